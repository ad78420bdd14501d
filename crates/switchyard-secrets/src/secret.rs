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
    fn whitespace_only_secrets_count_as_blank() {
        assert!(Secret::from(" \t\n").is_blank());
        assert!(Secret::from("").is_blank());
        assert!(!Secret::from(" k ").is_blank());
    }
}
