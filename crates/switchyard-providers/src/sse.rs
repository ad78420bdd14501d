//! Server-sent events framing: an incremental decoder for upstream streams and the writers the
//! client encoders use.
//!
//! The decoder follows the WHATWG event-stream rules with three deliberate choices:
//! - A block of comments (`: ping`) or bare blank lines is reported as
//!   [`SseItem::KeepAlive`], so the caller can tell a live-but-idle upstream from a real event
//!   (RESILIENCE.md §7: only a real event releases the held response).
//! - One event may not grow past `max_event_bytes`: a hostile or broken upstream that never
//!   sends a blank line cannot make the proxy buffer without bound. The limit is checked on
//!   every pull, so memory stays below the limit plus one pushed chunk.
//! - At end of input, [`SseDecoder::close`] dispatches a last event that lacks its closing
//!   blank line (the spec drops it). Upstreams do end that way; a truly cut event is caught
//!   one level up, where its JSON fails to parse.
//!
//! Invariants: bytes are buffered until a whole event is present, so chunk boundaries (in a
//! line, in a CRLF, in a UTF-8 sequence) never change what is decoded; and an event's `data`
//! borrows the decoder's buffer unless it spans several `data:` lines.

use std::ops::Range;

use crate::error::ProviderError;

/// One decoded event. `data` joins multi-line data with `\n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<&'a str>,
    pub data: &'a str,
    pub id: Option<&'a str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SseItem<'a> {
    Event(SseEvent<'a>),
    /// Comments or blank lines only: the upstream is alive, nothing happened.
    KeepAlive,
}

/// Incremental decoder: [`push`](Self::push) bytes as they arrive in any chunking, then pull
/// items with [`next_item`](Self::next_item) until it returns `None`.
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the event being assembled; everything before it has been handed out.
    start: usize,
    /// Where the search for the next line end resumes.
    scan: usize,
    /// The previous line ended in CR: an LF right after it belongs to the same line end.
    skip_lf: bool,
    /// The first bytes of the stream have been checked for a byte-order mark.
    bom_checked: bool,
    phase: Phase,
    max_event_bytes: usize,
    /// Data of an event with several `data:` lines, joined.
    joined: String,
    /// The current event re-decoded with replacement characters, when it was not UTF-8.
    lossy: String,
}

/// Large enough for a model's biggest single event (a whole tool call or a long text chunk),
/// small enough that a stream that never ends an event cannot hurt.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reading,
    /// The upstream ended; what is buffered is still handed out.
    Closed,
    /// An event outgrew the limit; nothing more is handed out.
    Failed,
}

/// Where the pieces of a dispatched event live, computed before anything is borrowed.
struct Located {
    in_lossy: bool,
    event: Option<Range<usize>>,
    id: Option<Range<usize>>,
    /// `None`: the data is in `joined`.
    data: Option<Range<usize>>,
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scan: 0,
            skip_lf: false,
            bom_checked: false,
            phase: Phase::Reading,
            max_event_bytes,
            joined: String::new(),
            lossy: String::new(),
        }
    }

    /// Appends bytes from the upstream. Already handed-out bytes are dropped first, so the
    /// buffer holds at most one partial event plus this chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.phase != Phase::Reading {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scan -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The upstream ended: a last event without its closing blank line is dispatched by the
    /// following [`next_item`](Self::next_item) calls.
    pub fn close(&mut self) {
        if self.phase != Phase::Reading {
            return;
        }
        if self.start < self.buf.len() {
            // End the last line if it is open, then add the blank line the upstream never
            // sent. After a CR, the first LF is taken as the rest of a CRLF.
            let tail: &[u8] = if self.buf.last() == Some(&b'\n') { b"\n" } else { b"\n\n" };
            self.push(tail);
        }
        self.phase = Phase::Closed;
    }

    /// The next complete item, `None` when more bytes are needed (or after an error).
    ///
    /// An [`ProviderError::EventTooLarge`] is returned once; the decoder then stays empty,
    /// since nothing after an oversized event can be trusted to be framed right.
    pub fn next_item(&mut self) -> Option<Result<SseItem<'_>, ProviderError>> {
        if self.phase == Phase::Failed {
            return None;
        }
        if !self.bom_checked {
            if self.buf.len() < 3
                && self.phase == Phase::Reading
                && b"\xEF\xBB\xBF".starts_with(&self.buf)
            {
                return None;
            }
            self.bom_checked = true;
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.start = 3;
                self.scan = 3;
            }
        }
        loop {
            let Some((line_end, next)) = self.next_line_end() else {
                if self.buf.len() - self.start > self.max_event_bytes {
                    self.phase = Phase::Failed;
                    self.buf = Vec::new();
                    self.start = 0;
                    self.scan = 0;
                    return Some(Err(ProviderError::EventTooLarge { limit: self.max_event_bytes }));
                }
                return None;
            };
            let line_start = self.scan;
            self.scan = next;
            if line_end > line_start {
                continue;
            }
            // A blank line: the block from `start` up to here is one event (or keep-alive).
            let block = self.start..line_start;
            self.start = next;
            if block.len() > self.max_event_bytes {
                self.phase = Phase::Failed;
                return Some(Err(ProviderError::EventTooLarge { limit: self.max_event_bytes }));
            }
            return Some(Ok(match self.locate(block) {
                Some(located) => SseItem::Event(self.view(&located)),
                None => SseItem::KeepAlive,
            }));
        }
    }

    /// Finds the end of the line starting at `scan`: (end of its content, start of the next
    /// line). A CR at the very end of the buffer ends the line at once; a following LF is
    /// skipped when it arrives.
    fn next_line_end(&mut self) -> Option<(usize, usize)> {
        if self.skip_lf && self.scan < self.buf.len() {
            self.skip_lf = false;
            if self.buf[self.scan] == b'\n' {
                self.scan += 1;
                if self.start == self.scan - 1 {
                    self.start = self.scan;
                }
            }
        }
        let rest = &self.buf[self.scan..];
        let at = memchr::memchr2(b'\n', b'\r', rest)?;
        let end = self.scan + at;
        if rest[at] == b'\n' {
            return Some((end, end + 1));
        }
        match rest.get(at + 1) {
            Some(b'\n') => Some((end, end + 2)),
            Some(_) => Some((end, end + 1)),
            None => {
                self.skip_lf = true;
                Some((end, end + 1))
            }
        }
    }

    /// Parses the fields of one block. `None` when the block dispatches nothing (comments,
    /// `event:` without data, ...): a keep-alive.
    fn locate(&mut self, block: Range<usize>) -> Option<Located> {
        let in_lossy = std::str::from_utf8(&self.buf[block.clone()]).is_err();
        if in_lossy {
            self.lossy = String::from_utf8_lossy(&self.buf[block.clone()]).into_owned();
        }
        let (text, base) = if in_lossy {
            (self.lossy.as_bytes(), 0)
        } else {
            (&self.buf[block.clone()], block.start)
        };

        let mut event = None;
        let mut id = None;
        let mut data: Option<Range<usize>> = None;
        let mut data_lines = 0usize;
        let mut pos = 0;
        while pos < text.len() {
            let (end, next) = line_bounds(text, pos);
            let line = &text[pos..end];
            let (name, value) = match memchr::memchr(b':', line) {
                Some(0) => {
                    pos = next;
                    continue;
                }
                Some(colon) => {
                    let value_start =
                        if line.get(colon + 1) == Some(&b' ') { colon + 2 } else { colon + 1 };
                    (&line[..colon], pos + value_start..end)
                }
                None => (line, end..end),
            };
            let absolute = base + value.start..base + value.end;
            match name {
                b"event" => event = Some(absolute),
                b"id" if !text[value.clone()].contains(&0) => id = Some(absolute),
                b"data" => {
                    data_lines += 1;
                    match data_lines {
                        1 => data = Some(absolute),
                        2 => {
                            let source = if in_lossy { self.lossy.as_bytes() } else { &self.buf };
                            let first = data.take().unwrap_or(0..0);
                            self.joined.clear();
                            self.joined.push_str(as_str(&source[first]));
                            self.joined.push('\n');
                            self.joined.push_str(as_str(&source[absolute]));
                        }
                        _ => {
                            let source = if in_lossy { self.lossy.as_bytes() } else { &self.buf };
                            self.joined.push('\n');
                            self.joined.push_str(as_str(&source[absolute]));
                        }
                    }
                }
                _ => {}
            }
            pos = next;
        }
        (data_lines > 0).then_some(Located { in_lossy, event, id, data })
    }

    fn view(&self, located: &Located) -> SseEvent<'_> {
        let source = if located.in_lossy { self.lossy.as_bytes() } else { &self.buf };
        let field = |range: &Option<Range<usize>>| range.clone().map(|r| as_str(&source[r]));
        SseEvent {
            event: field(&located.event).filter(|e| !e.is_empty()),
            data: match &located.data {
                Some(range) => as_str(&source[range.clone()]),
                None => &self.joined,
            },
            id: field(&located.id),
        }
    }
}

/// The line starting at `pos` inside a complete block: (end of content, start of next line).
fn line_bounds(text: &[u8], pos: usize) -> (usize, usize) {
    match memchr::memchr2(b'\n', b'\r', &text[pos..]) {
        None => (text.len(), text.len()),
        Some(at) => {
            let end = pos + at;
            let crlf = text[end] == b'\r' && text.get(end + 1) == Some(&b'\n');
            (end, if crlf { end + 2 } else { end + 1 })
        }
    }
}

/// Field values are cut at ASCII bytes (`:`, CR, LF) of text already checked to be UTF-8,
/// so every slice is UTF-8 too.
fn as_str(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// Appends one event. Multi-line `data` becomes several `data:` lines, as the format requires.
pub fn write_event(out: &mut Vec<u8>, event: Option<&str>, data: &str) {
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.push(b'\n');
    }
    let mut rest = data;
    loop {
        let (line, next) = match rest.find(['\n', '\r']) {
            None => (rest, None),
            Some(at) => {
                let skip = if rest[at..].starts_with("\r\n") { 2 } else { 1 };
                (&rest[..at], Some(&rest[at + skip..]))
            }
        };
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    out.push(b'\n');
}

/// Appends one event whose data is `value` as JSON, serialised straight into `out`. Compact
/// JSON never contains a raw line break, so it is always a single `data:` line.
pub fn write_json_event<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    event: Option<&str>,
    value: &T,
) {
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    serde_json::to_writer(&mut *out, value).expect("serialising to memory cannot fail");
    out.extend_from_slice(b"\n\n");
}

/// Appends a comment line and its blank line: a keep-alive every SSE client ignores.
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b": ");
    out.extend_from_slice(text.replace(['\n', '\r'], " ").as_bytes());
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    enum Item {
        Event { event: Option<String>, data: String, id: Option<String> },
        KeepAlive,
        TooLarge,
    }

    fn drain(decoder: &mut SseDecoder, items: &mut Vec<Item>) {
        while let Some(item) = decoder.next_item() {
            items.push(match item {
                Ok(SseItem::Event(e)) => Item::Event {
                    event: e.event.map(str::to_owned),
                    data: e.data.to_owned(),
                    id: e.id.map(str::to_owned),
                },
                Ok(SseItem::KeepAlive) => Item::KeepAlive,
                Err(_) => Item::TooLarge,
            });
        }
    }

    fn decode_chunks<'c>(chunks: impl IntoIterator<Item = &'c [u8]>, limit: usize) -> Vec<Item> {
        let mut decoder = SseDecoder::new(limit);
        let mut items = Vec::new();
        for chunk in chunks {
            decoder.push(chunk);
            drain(&mut decoder, &mut items);
        }
        decoder.close();
        drain(&mut decoder, &mut items);
        items
    }

    fn decode(bytes: &[u8]) -> Vec<Item> {
        decode_chunks([bytes], DEFAULT_MAX_EVENT_BYTES)
    }

    fn event(event: Option<&str>, data: &str) -> Item {
        Item::Event { event: event.map(str::to_owned), data: data.to_owned(), id: None }
    }

    #[test]
    fn one_event_per_blank_line_with_type_and_id() {
        let items = decode(b"event: delta\nid: 7\ndata: {\"a\":1}\n\ndata: two\n\n");
        assert_eq!(
            items,
            vec![
                Item::Event {
                    event: Some("delta".into()),
                    data: "{\"a\":1}".into(),
                    id: Some("7".into())
                },
                event(None, "two"),
            ]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_line_feeds() {
        assert_eq!(decode(b"data: a\ndata:b\ndata:  c\n\n"), vec![event(None, "a\nb\n c")]);
    }

    #[test]
    fn comments_and_blank_lines_are_keep_alives_not_events() {
        assert_eq!(
            decode(b": ping\n\n\n:\n: other\n\ndata: x\n\n"),
            vec![Item::KeepAlive, Item::KeepAlive, Item::KeepAlive, event(None, "x")]
        );
    }

    #[test]
    fn a_comment_inside_an_event_does_not_split_it() {
        assert_eq!(decode(b"data: a\n: note\ndata: b\n\n"), vec![event(None, "a\nb")]);
    }

    #[test]
    fn an_event_without_data_is_a_keep_alive() {
        assert_eq!(decode(b"event: ping\n\n"), vec![Item::KeepAlive]);
    }

    #[test]
    fn crlf_cr_and_lf_line_endings_all_work() {
        let expected = vec![event(Some("e"), "1"), event(None, "2"), event(None, "3")];
        assert_eq!(decode(b"event: e\r\ndata: 1\r\n\r\ndata: 2\r\rdata: 3\n\n"), expected);
    }

    #[test]
    fn a_crlf_split_between_chunks_is_one_line_end() {
        let items = decode_chunks(
            [&b"data: 1\r"[..], b"\n\r", b"\ndata: 2\r\n\r", b"\n"],
            DEFAULT_MAX_EVENT_BYTES,
        );
        assert_eq!(items, vec![event(None, "1"), event(None, "2")]);
    }

    #[test]
    fn a_line_split_mid_way_waits_for_its_end() {
        let items =
            decode_chunks([&b"da"[..], b"ta: hel", b"lo\n", b"\n"], DEFAULT_MAX_EVENT_BYTES);
        assert_eq!(items, vec![event(None, "hello")]);
    }

    #[test]
    fn a_utf8_character_split_between_chunks_arrives_whole() {
        let bytes = "data: grüße 🚂\n\n".as_bytes();
        let split = bytes.iter().position(|&b| b == 0xF0).unwrap() + 2;
        let items = decode_chunks([&bytes[..split], &bytes[split..]], DEFAULT_MAX_EVENT_BYTES);
        assert_eq!(items, vec![event(None, "grüße 🚂")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(decode(b"data: a\xFFb\n\n"), vec![event(None, "a\u{FFFD}b")]);
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped_even_when_split() {
        let items = decode_chunks([&b"\xEF"[..], b"\xBB\xBFdata: x\n\n"], DEFAULT_MAX_EVENT_BYTES);
        assert_eq!(items, vec![event(None, "x")]);
    }

    #[test]
    fn a_field_without_colon_or_space_follows_the_spec() {
        assert_eq!(decode(b"data\n\ndata:x\n\n"), vec![event(None, ""), event(None, "x")]);
    }

    #[test]
    fn a_last_event_without_its_blank_line_is_dispatched_at_close() {
        assert_eq!(
            decode(b"data: a\n\ndata: [DONE]"),
            vec![event(None, "a"), event(None, "[DONE]")]
        );
        assert_eq!(decode(b"data: a\n\ndata: b\n"), vec![event(None, "a"), event(None, "b")]);
    }

    #[test]
    fn an_event_growing_past_the_limit_fails_once_and_stops_the_decoder() {
        let mut decoder = SseDecoder::new(16);
        let mut items = Vec::new();
        decoder.push(b"data: short\n\n");
        drain(&mut decoder, &mut items);
        for _ in 0..4 {
            decoder.push(b"data: xxxxxxxxxx");
            drain(&mut decoder, &mut items);
        }
        decoder.push(b"\n\ndata: later\n\n");
        drain(&mut decoder, &mut items);
        assert_eq!(items, vec![event(None, "short"), Item::TooLarge]);
        assert!(decoder.buf.capacity() < 64, "the oversized buffer is released");
    }

    #[test]
    fn a_complete_event_over_the_limit_is_refused() {
        let items = decode_chunks([&b"data: 0123456789abcdef\n\n"[..]], 8);
        assert_eq!(items, vec![Item::TooLarge]);
    }

    #[test]
    fn the_writer_splits_multi_line_data_and_the_decoder_reads_it_back() {
        let mut out = Vec::new();
        write_event(&mut out, Some("e"), "a\nb\r\nc");
        write_comment(&mut out, "keep\nalive");
        write_json_event(&mut out, None, &serde_json::json!({"t": "x\ny"}));
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "event: e\ndata: a\ndata: b\ndata: c\n\n: keep alive\n\ndata: {\"t\":\"x\\ny\"}\n\n"
        );
        assert_eq!(
            decode(&out),
            vec![event(Some("e"), "a\nb\nc"), Item::KeepAlive, event(None, "{\"t\":\"x\\ny\"}")]
        );
    }

    const STREAM: &[u8] = b"\xEF\xBB\xBF: hello\r\n\r\nevent: message_start\r\ndata: {\"x\":\"gr\xC3\xBC\xC3\x9Fe\"}\r\n\r\ndata: a\rdata: b\r\r\nid: 3\ndata: \xF0\x9F\x9A\x82\n\nevent: ping\n\n: tail\n\ndata: [DONE]\n\n";

    proptest! {
        #[test]
        fn any_chunking_of_a_stream_yields_the_same_items(
            cuts in proptest::collection::vec(0..STREAM.len(), 0..12)
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts {
                chunks.push(&STREAM[from..cut]);
                from = cut;
            }
            chunks.push(&STREAM[from..]);
            let whole = decode(STREAM);
            prop_assert_eq!(decode_chunks(chunks, DEFAULT_MAX_EVENT_BYTES), whole);
        }
    }

    #[test]
    fn the_reference_stream_decodes_as_expected() {
        assert_eq!(
            decode(STREAM),
            vec![
                Item::KeepAlive,
                event(Some("message_start"), "{\"x\":\"grüße\"}"),
                event(None, "a\nb"),
                Item::Event { event: None, data: "🚂".into(), id: Some("3".into()) },
                Item::KeepAlive,
                Item::KeepAlive,
                event(None, "[DONE]"),
            ]
        );
    }

    #[test]
    fn byte_by_byte_delivery_yields_the_same_items() {
        assert_eq!(decode_chunks(STREAM.chunks(1), DEFAULT_MAX_EVENT_BYTES), decode(STREAM));
    }
}
