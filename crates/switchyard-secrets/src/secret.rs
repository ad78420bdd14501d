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

    /// The last four characters, for showing which key is which without revealing it.
    pub fn hint(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
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
    fn whitespace_only_secrets_count_as_blank() {
        assert!(Secret::from(" \t\n").is_blank());
        assert!(Secret::from("").is_blank());
        assert!(!Secret::from(" k ").is_blank());
    }
}
