//! The redacting wrapper every secret travels in.
//!
//! Invariant: a secret's text is reachable only through [`Secret::expose`]; `Debug` and
//! `Display` print a fixed mask, so it cannot leak into logs, errors or API responses by accident.

use std::fmt;
use std::sync::Arc;

/// A secret value (API key, token). Cheap to clone; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Self(value.into())
    }

    /// The secret's text, for the one place that must send it (an HTTP header, the keychain).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The last four characters, for showing which key is which without revealing it. A
    /// secret shorter than twelve characters shows none: four would be too much of it.
    pub fn hint(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        if chars.len() < 12 {
            return "…".to_owned();
        }
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("…{tail}")
    }

    /// `text` (an upstream's error message) with this secret taken out, before it reaches a
    /// client, the UI or a log: the whole key wherever it appears, and any masked echo of it
    /// (OpenAI's "Incorrect API key provided: sk-proj-****…abcd"), a word with a run of `*`
    /// that starts like the key or ends like it.
    pub fn scrub(&self, text: &str) -> String {
        const REDACTED: &str = "[redacted]";
        let key = self.expose();
        if key.trim().is_empty() {
            return text.to_owned();
        }
        let text = text.replace(key, REDACTED);
        let chars: Vec<char> = key.chars().collect();
        let head: String = chars.iter().take(3).collect();
        let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
        let core = |word: &str| word.trim_end_matches(['.', ',', ';', ':', '"', '\'', ')']).len();
        let echoes = |word: &str| {
            let word = &word[..core(word)];
            word.contains("**")
                && ((chars.len() >= 8 && word.starts_with(&head))
                    || (chars.len() >= 12 && word.ends_with(&tail)))
        };
        if !text.split_whitespace().any(echoes) {
            return text;
        }
        text.split_inclusive(char::is_whitespace)
            .map(|piece| {
                // The punctuation and whitespace after the echo stay.
                let word = piece.trim_end();
                if echoes(word) {
                    format!("{REDACTED}{}", &piece[core(word)..])
                } else {
                    piece.to_owned()
                }
            })
            .collect()
    }

    /// HMAC-SHA256 of the secret under `salt`, in hex: what names a credential across a team
    ///. Two machines with the same key and the team's salt get the same name; the
    /// name reveals nothing of the key without the salt, and the salt lives in the team's
    /// database, never next to the names in a log or a dump of one machine.
    pub fn keyed_hash(&self, salt: &[u8]) -> String {
        use hmac::{Hmac, Mac as _};
        use std::fmt::Write as _;
        let mut mac =
            Hmac::<sha2::Sha256>::new_from_slice(salt).expect("HMAC takes a key of any length");
        mac.update(self.0.as_bytes());
        mac.finalize().into_bytes().iter().fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
    }

    /// Blank secrets are refused on the way in: an empty `Authorization` header fails far from
    /// the mistake that caused it.
    pub(crate) fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyed_hash_is_hmac_sha256_and_depends_on_the_salt() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
        let secret = Secret::new("what do ya want for nothing?");
        assert_eq!(
            secret.keyed_hash(b"Jefe"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_ne!(secret.keyed_hash(b"Jefe"), secret.keyed_hash(b"other team"));
        assert_ne!(secret.keyed_hash(b"Jefe"), Secret::new("another key").keyed_hash(b"Jefe"));
    }

    #[test]
    fn debug_and_display_never_show_the_secret() {
        let s = Secret::new("sk-live-canary-1234");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
        assert_eq!(s.hint(), "…1234");
    }

    #[test]
    fn a_short_secret_shows_no_characters_in_its_hint() {
        assert_eq!(Secret::new("sk-12345678").hint(), "…");
        assert_eq!(Secret::new("sk-123456789").hint(), "…6789");
    }

    #[test]
    fn scrubbing_takes_the_key_and_its_masked_echoes_out_of_a_message() {
        let key = Secret::new("sk-proj-canary-0123456789abcd");
        assert_eq!(
            key.scrub("Incorrect API key provided: sk-proj-canary-0123456789abcd. See docs."),
            "Incorrect API key provided: [redacted]. See docs."
        );
        assert_eq!(
            key.scrub("Incorrect API key provided: sk-proj-********************abcd. You can find"),
            "Incorrect API key provided: [redacted]. You can find"
        );
        assert_eq!(
            key.scrub("bad key ****abcd\nretry"),
            "bad key [redacted]\nretry",
            "a tail-only mask is an echo too"
        );
        // Nothing else is touched: a message without the key comes back as it was.
        let plain = "Rate limit reached for gpt-4o: 3 RPM. Limit **3**.";
        assert_eq!(key.scrub(plain), plain);
    }

    #[test]
    fn whitespace_only_secrets_count_as_blank() {
        assert!(Secret::from(" \t\n").is_blank());
        assert!(Secret::from("").is_blank());
        assert!(!Secret::from(" k ").is_blank());
    }
}
