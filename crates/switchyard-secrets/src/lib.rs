//! Where API keys and OAuth tokens live. The keychain-backed `SecretStore` arrives with the
//! keychain milestone; today this crate holds [`Secret`], the redacting wrapper every secret
//! travels in, and the resolution of `env:VAR` references.
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

    /// The secret's text, for the one place that must send it (an HTTP header).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The last four characters, for showing which key is which without revealing it.
    pub fn hint(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
        format!("…{tail}")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
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

/// Where a credential's secret comes from, as written in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretRef {
    /// `env:VAR`: read from the environment when the config is loaded.
    Env(String),
}

/// Why a secret reference could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error(
        "\"{0}\" is not a secret reference; write \"env:VARIABLE\" (inline secrets are not allowed in files)"
    )]
    NotAReference(String),
    #[error("environment variable {0} is not set (or not valid UTF-8)")]
    MissingEnv(String),
    #[error("environment variable {0} is empty")]
    EmptyEnv(String),
}

impl SecretRef {
    /// Parses `env:VAR`. The error never repeats the text when it might be a pasted secret.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        match text.strip_prefix("env:") {
            Some(var)
                if !var.is_empty()
                    && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                Ok(Self::Env(var.to_owned()))
            }
            _ => Err(SecretError::NotAReference(if text.len() > 12 || !text.contains(':') {
                "<redacted>".to_owned()
            } else {
                text.to_owned()
            })),
        }
    }

    /// Reads the secret now from the process environment.
    pub fn resolve(&self) -> Result<Secret, SecretError> {
        self.resolve_with(&|var| std::env::var(var).ok())
    }

    /// Reads the secret now, looking variables up with `env` (tests pass a map).
    pub fn resolve_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Secret, SecretError> {
        match self {
            Self::Env(var) => {
                let value = env(var).ok_or_else(|| SecretError::MissingEnv(var.clone()))?;
                if value.trim().is_empty() {
                    return Err(SecretError::EmptyEnv(var.clone()));
                }
                Ok(Secret::new(value.trim()))
            }
        }
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
    fn only_env_references_are_accepted_and_pasted_keys_are_not_echoed() {
        assert_eq!(
            SecretRef::parse("env:OPENAI_API_KEY"),
            Ok(SecretRef::Env("OPENAI_API_KEY".into()))
        );
        let err = SecretRef::parse("sk-proj-abcdefghijklmnop").unwrap_err().to_string();
        assert!(!err.contains("sk-proj"), "{err}");
        assert!(SecretRef::parse("env:").is_err());
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err =
            SecretRef::parse("env:SWITCHYARD_TEST_SURELY_UNSET").unwrap().resolve().unwrap_err();
        assert_eq!(err, SecretError::MissingEnv("SWITCHYARD_TEST_SURELY_UNSET".into()));
    }
}
