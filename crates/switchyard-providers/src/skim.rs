//! A strict reader for the few fields a relay needs from a JSON object, borrowing every string
//! written without escapes: serde's derived visitors cost the relay's decoder 43.7k
//! instructions per streamed small chat request, this reader 31.4k (`scripts/profile 100
//! --stream`, docs/benchmarks.md).
//!
//! It reads a subset of what `serde_json` accepts and agrees with it there. Whatever it does
//! not read plainly (a key with escapes, an array where an object is expected, a duplicate
//! field, a number it cannot take as the field's type, nesting past [`MAX_DEPTH`]) makes it give
//! up with `None`, and the caller parses the same text with serde, which then reads the odd
//! form or reports the error as before. A reader that agrees with serde wherever it answers
//! cannot change what a client sees; the tests hold it to that on mutated inputs.

use std::borrow::Cow;

use crate::json::Str;

/// Deeper than this, serde decides (its own limit is 128).
const MAX_DEPTH: usize = 64;

/// The bytes that end a plain string's scan: its closing quote, an escape, and the control
/// characters JSON wants escaped.
static STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        stops[b] = true;
        b += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// Where the first of [`STOPS`] is in `bytes`. Eight bytes at a time, as `serde_json` scans a
/// string (a byte at a time, a relayed answer's keys and short values would cost the decoder
/// of its ending most of its work); keys and values are too
/// short for `memchr`'s set-up to pay.
fn first_stop(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte's high bit is set where it is below `n` (`n` at most 0x80). A set bit can be
    // wrong only above a right one, so the lowest is always right.
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let stops = below(word, 0x20)
            | below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1);
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = chunks.remainder().iter().position(|&b| STOPS[usize::from(b)])?;
    Some(at + tail)
}

/// A cursor over one JSON text.
pub(crate) struct Skim<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Skim<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, pos: 0, depth: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.bytes().get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            } else {
                return Some(b);
            }
        }
        None
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let rest = self.bytes().get(self.pos..)?;
        rest.starts_with(word).then(|| self.pos += word.len())
    }

    /// Only whitespace is left.
    pub(crate) fn end(mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// Reads an object, handing each key to `field`, which reads its value.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.nest(|s| {
            if s.eat(b'}').is_some() {
                return Some(());
            }
            loop {
                if s.peek()? != b'"' {
                    return None;
                }
                let key = s.plain_string()?;
                s.eat(b':')?;
                field(s, key)?;
                match s.peek()? {
                    b',' => s.pos += 1,
                    b'}' => {
                        s.pos += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        })
    }

    /// Reads an array, `item` reading each element.
    pub(crate) fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.nest(|s| {
            if s.eat(b']').is_some() {
                return Some(());
            }
            loop {
                item(s)?;
                match s.peek()? {
                    b',' => s.pos += 1,
                    b']' => {
                        s.pos += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        })
    }

    fn nest(&mut self, inner: impl FnOnce(&mut Self) -> Option<()>) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let read = inner(self);
        self.depth -= 1;
        read
    }

    /// `null`, read, or not there.
    pub(crate) fn null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.literal(b"null").is_some()
    }

    /// A string (not `null`), borrowed unless it has escapes.
    pub(crate) fn string(&mut self) -> Option<Str<'a>> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.pos;
        if let Some(plain) = self.plain_string() {
            return Some(Str(Cow::Borrowed(plain)));
        }
        self.pos = start;
        let token = self.string_token()?;
        serde_json::from_str::<String>(token).ok().map(|s| Str(Cow::Owned(s)))
    }

    /// Reads `null` (as `None`) or a string into `field`.
    pub(crate) fn optional_string(&mut self, field: &mut Option<Str<'a>>) -> Option<()> {
        self.nullable(field, Self::string)
    }

    /// Reads `null` (as `None`) or what `read` reads into `field`, as serde reads an `Option`.
    pub(crate) fn nullable<T>(
        &mut self,
        field: &mut Option<T>,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<()> {
        *field = if self.null() { None } else { Some(read(self)?) };
        Some(())
    }

    /// A non-negative integer that fits `T` (`u32`, `u64`), written as one (no fraction or
    /// exponent).
    pub(crate) fn unsigned<T: std::str::FromStr>(&mut self) -> Option<T> {
        self.peek()?;
        let digits = self.digits()?;
        if matches!(self.bytes().get(self.pos), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        digits.parse().ok()
    }

    /// Reads `null` (as `None`) or an unsigned integer into `field`.
    pub(crate) fn optional_unsigned<T: std::str::FromStr>(
        &mut self,
        field: &mut Option<T>,
    ) -> Option<()> {
        self.nullable(field, Self::unsigned)
    }

    /// Skips a value and gives its text, for serde to read.
    pub(crate) fn raw(&mut self) -> Option<&'a str> {
        self.peek()?;
        let start = self.pos;
        self.skip()?;
        Some(&self.text[start..self.pos])
    }

    /// Skips a value, checking it as serde would.
    pub(crate) fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|s, _| s.skip()),
            b'[' => self.array(Self::skip),
            b'"' => {
                let start = self.pos;
                if self.plain_string().is_none() {
                    self.pos = start;
                    let token = self.string_token()?;
                    serde_json::from_str::<serde::de::IgnoredAny>(token).ok()?;
                }
                Some(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// A string without escapes or control characters, quotes consumed; `None` (position
    /// unspecified) for any other.
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.pos + 1;
        let rest = self.bytes().get(start..)?;
        let len = first_stop(rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.pos = start + len + 1;
        Some(&self.text[start..start + len])
    }

    /// The text of a string with escapes, quotes included, for serde to check and unescape.
    fn string_token(&mut self) -> Option<&'a str> {
        let start = self.pos;
        let mut at = start + 1;
        let bytes = self.bytes();
        loop {
            match *bytes.get(at)? {
                b'"' => break,
                b'\\' => at += 2,
                _ => at += 1,
            }
        }
        self.pos = at + 1;
        Some(&self.text[start..self.pos])
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.bytes().get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        self.digits()?;
        if self.bytes().get(self.pos) == Some(&b'.') {
            self.pos += 1;
            self.run_of_digits()?;
        }
        if matches!(self.bytes().get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.bytes().get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.run_of_digits()?;
        }
        Some(())
    }

    /// An integer part: `0`, or digits not starting with `0`.
    fn digits(&mut self) -> Option<&'a str> {
        let start = self.pos;
        if self.bytes().get(self.pos) == Some(&b'0') {
            self.pos += 1;
            if self.bytes().get(self.pos).is_some_and(u8::is_ascii_digit) {
                return None;
            }
            return Some(&self.text[start..self.pos]);
        }
        self.run_of_digits()?;
        Some(&self.text[start..self.pos])
    }

    fn run_of_digits(&mut self) -> Option<()> {
        let rest = self.bytes().get(self.pos..)?;
        let len = rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len());
        (len > 0).then(|| self.pos += len)
    }
}

/// `rounds` mutations of each text of `corpus` (one to three bytes deleted, inserted or
/// replaced, from JSON's own alphabet), the same every run: for the tests that hold a skim
/// reading to serde's.
#[cfg(test)]
pub(crate) fn mutations(corpus: &[&str], rounds: usize, mut each: impl FnMut(&str)) {
    const BYTES: &[u8] = b"{}[],:\" \\0123456789.eE-+ntrufalsxcid_\t\n";
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % u64::try_from(below).unwrap()).unwrap()
    };
    for text in corpus {
        for _ in 0..rounds {
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..=next(3) {
                let at = next(bytes.len());
                match next(3) {
                    0 => {
                        bytes.remove(at);
                    }
                    1 => bytes.insert(at, BYTES[next(BYTES.len())]),
                    _ => bytes[at] = BYTES[next(BYTES.len())],
                }
            }
            if let Ok(text) = String::from_utf8(bytes) {
                each(&text);
            }
        }
    }
}

/// Holds a skim reading of `text` to serde's (their `Debug` forms): equal where the skim
/// answered, which it must not do where serde refuses. Whether it answered.
#[cfg(test)]
pub(crate) fn agrees_with_serde<'a, T>(text: &'a str, skimmed: Option<T>) -> bool
where
    T: serde::Deserialize<'a> + std::fmt::Debug,
{
    let Some(skimmed) = skimmed else { return false };
    let serde = serde_json::from_str::<T>(text)
        .unwrap_or_else(|error| panic!("the skim read what serde refuses ({error}): {text}"));
    assert_eq!(format!("{skimmed:?}"), format!("{serde:?}"), "{text}");
    true
}

/// Fields already read, so a duplicate is left to serde (which refuses it).
#[derive(Default)]
pub(crate) struct Seen(u32);

impl Seen {
    /// `None` the second time `field` (an index below 32) is read.
    pub(crate) fn first(&mut self, field: u32) -> Option<()> {
        let bit = 1 << field;
        let first = self.0 & bit == 0;
        self.0 |= bit;
        first.then_some(())
    }

    /// `read`s `field` the first time; `None` the second time, or when `read` gives up.
    pub(crate) fn once(&mut self, field: u32, read: impl FnOnce() -> Option<()>) -> Option<()> {
        self.first(field)?;
        read()
    }

    /// Whether `field` was read.
    pub(crate) fn has(&self, field: u32) -> bool {
        self.0 & (1 << field) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(text: &str) -> bool {
        let mut s = Skim::new(text);
        s.skip().is_some() && s.end().is_some()
    }

    #[test]
    fn skips_exactly_what_serde_accepts_on_a_corpus_of_valid_and_broken_values() {
        let corpus = [
            r#"{"a":[1,-2.5e+3,0,0.5,true,false,null,"x\n\u00e9"],"b":{}}"#,
            " [ ] ",
            r#""\ud83d\ude00""#,
            "0",
            "-0",
            "1E5",
            r#"{"a":1,}"#,
            "[1,]",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "tru",
            "nul",
            r#""\x""#,
            r#""\ud800""#,
            "\"a\tb\"",
            r#"{"a" 1}"#,
            "{1:2}",
            r#"{"a":1}}"#,
            "[1 2]",
            "",
            r#""unterminated"#,
            r#""ends in a backslash\"#,
        ];
        for text in corpus {
            let serde = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
            // The reader may give up on what serde takes, never take what serde refuses.
            assert!(!skipped(text) || serde, "skim took what serde refuses: {text}");
            if !text.contains("\\u") && !text.is_empty() {
                assert_eq!(skipped(text), serde, "{text}");
            }
        }
    }

    #[test]
    fn strings_borrow_without_escapes_and_unescape_with_them() {
        let mut s = Skim::new(r#"["plain","line\nbreak",null,7]"#);
        let mut read = Vec::new();
        s.array(|s| {
            let mut field = Some(Str::default());
            let taken = s.optional_string(&mut field);
            read.push(taken.map(|()| field));
            if taken.is_none() { s.skip() } else { Some(()) }
        })
        .unwrap();
        assert!(matches!(&read[0], Some(Some(Str(Cow::Borrowed("plain"))))));
        assert_eq!(read[1], Some(Some(Str(Cow::Owned("line\nbreak".into())))));
        assert_eq!(read[2], Some(None));
        assert_eq!(read[3], None, "a number is not a string");
    }

    #[test]
    fn integers_fit_a_u32_or_are_left_to_serde() {
        let read = |text: &str| Skim::new(text).unsigned::<u32>();
        assert_eq!(read("0"), Some(0));
        assert_eq!(read(" 4294967295"), Some(u32::MAX));
        for odd in ["4294967296", "-1", "1.0", "1e2", "01", "null", "\"1\""] {
            assert_eq!(read(odd), None, "{odd}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_left_to_serde() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(!skipped(&deep));
        let fits = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(skipped(&fits));
    }

    #[test]
    fn a_string_stops_at_its_first_quote_escape_or_control_character_at_any_offset() {
        // Every stop, and bytes either side of each class (space, DEL, 0x80, 0xff), at every
        // offset of a word and past it, behind a run that is not a stop: a byte above a stop
        // is where a word-at-a-time scan can be wrong.
        let stops = (0..0x20).chain([b'"', b'\\']);
        let others = [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xc3, 0xff, b'a'];
        for stop in stops {
            for len in 0..20 {
                for after in [b'"', 0x00, b'a', 0xff] {
                    let mut bytes: Vec<u8> = (0..len).map(|i| others[i % others.len()]).collect();
                    bytes.push(stop);
                    bytes.push(after);
                    bytes.extend_from_slice(b"tail-of-the-text");
                    let expected = bytes.iter().position(|&b| STOPS[usize::from(b)]);
                    assert_eq!(first_stop(&bytes), expected, "{bytes:?}");
                    assert_eq!(first_stop(&bytes), Some(len));
                }
            }
        }
        for len in 0..20 {
            let plain: Vec<u8> = (0..len).map(|i| others[i % others.len()]).collect();
            assert_eq!(first_stop(&plain), None, "{plain:?}");
        }
    }

    #[test]
    fn a_field_is_seen_once() {
        let mut seen = Seen::default();
        assert_eq!(seen.first(3), Some(()));
        assert_eq!(seen.first(4), Some(()));
        assert_eq!(seen.first(3), None);
    }
}
