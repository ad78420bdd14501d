//! References to secrets, as written in config files and kept in the database.
//!
//! Invariant: a reference never holds a secret, only where to find one. Parsing errors never
//! repeat text that could be a pasted key: at most the kind before ':' is shown, and only when
//! it is letters alone (a scheme-like word, not a random token).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::{Secret, SecretError, SecretId, SecretStore};

/// Where a credential's secret comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretRef {
    /// `env:VAR`: read from the environment when the config is loaded.
    Env(String),
    /// `keychain:provider/credential`: read from a [`SecretStore`] (the OS keychain).
    Keychain(SecretId),
    /// `file:/absolute/path`: the file's content (see [`crate::file`]).
    File(PathBuf),
}

const MAX_SHOWN_KIND: usize = 16;

impl SecretRef {
    /// Parses `env:VAR`, `file:/path` or `keychain:provider/credential`.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        if let Some(var) = text.strip_prefix("env:") {
            return if !var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                Ok(Self::Env(var.to_owned()))
            } else {
                Err(SecretError::InvalidVariable)
            };
        }
        if let Some(id) = text.strip_prefix("keychain:") {
            return SecretId::parse(id).map(Self::Keychain);
        }
        if let Some(path) = text.strip_prefix("file:") {
            let path = PathBuf::from(path);
            return if path.is_absolute() {
                Ok(Self::File(path))
            } else {
                Err(SecretError::InvalidFilePath)
            };
        }
        match text.split_once(':') {
            Some((kind, _))
                if (1..=MAX_SHOWN_KIND).contains(&kind.len())
                    && kind.chars().all(|c| c.is_ascii_alphabetic()) =>
            {
                Err(SecretError::UnknownKind(kind.to_owned()))
            }
            _ => Err(SecretError::NotAReference),
        }
    }

    /// Whether `text` is written as a reference (`env:`, `file:` or `keychain:`), valid or not:
    /// a value that is not is taken literally, or refused where only references belong.
    pub fn is_reference(text: &str) -> bool {
        ["env:", "file:", "keychain:"].iter().any(|kind| text.starts_with(kind))
    }

    /// Reads an `env:` secret now from the process environment. A `keychain:` reference fails
    /// with [`SecretError::NoStore`]; use [`SecretRef::resolve_using`] where a store exists.
    pub fn resolve(&self) -> Result<Secret, SecretError> {
        self.resolve_using(&|var| std::env::var(var).ok(), None)
    }

    /// Like [`SecretRef::resolve`], looking variables up with `env` (tests pass a map).
    pub fn resolve_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Secret, SecretError> {
        self.resolve_using(env, None)
    }

    /// Reads the secret now: `env:` through `env`, `keychain:` through `store`.
    ///
    /// On a machine without a keychain, pass the [`KeychainStore`](crate::KeychainStore)
    /// anyway: `env:` references still resolve and `keychain:` ones fail with
    /// [`SecretError::Unavailable`], which says what to do. Nothing falls back to plaintext.
    pub fn resolve_using(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        store: Option<&dyn SecretStore>,
    ) -> Result<Secret, SecretError> {
        match self {
            Self::Env(var) => {
                let value = env(var).ok_or_else(|| SecretError::MissingEnv(var.clone()))?;
                if value.trim().is_empty() {
                    return Err(SecretError::EmptyEnv(var.clone()));
                }
                Ok(Secret::new(value.trim()))
            }
            Self::Keychain(id) => {
                let store = store.ok_or_else(|| SecretError::NoStore(id.clone()))?;
                match store.get(id)? {
                    Some(secret) if secret.is_blank() => Err(SecretError::EmptySecret),
                    Some(secret) => Ok(secret),
                    None => Err(SecretError::MissingEntry(id.clone())),
                }
            }
            Self::File(path) => crate::file::read(path).map(|(secret, ..)| secret),
        }
    }
}

/// The form [`SecretRef::parse`] reads, so config export round-trips.
impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(var) => write!(f, "env:{var}"),
            Self::Keychain(id) => write!(f, "keychain:{id}"),
            Self::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

impl FromStr for SecretRef {
    type Err = SecretError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    fn id(text: &str) -> SecretId {
        SecretId::parse(text).unwrap()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn env_and_keychain_references_parse_and_print_back() {
        for (text, want) in [
            ("env:OPENAI_API_KEY", SecretRef::Env("OPENAI_API_KEY".into())),
            ("keychain:openai/default", SecretRef::Keychain(id("openai/default"))),
        ] {
            let parsed = SecretRef::parse(text).unwrap();
            assert_eq!(parsed, want);
            assert_eq!(parsed.to_string(), text);
            assert_eq!(text.parse::<SecretRef>().unwrap(), want);
        }
    }

    #[test]
    fn pasted_keys_are_never_echoed() {
        for pasted in [
            "sk-proj-abcdefghijklmnop",
            "sk-ant-api03:Zx9y8W7v6U5t4S3r",
            "AIzaSyA1b2C3d4E5f6G7h8I9j0",
            "user:hunter2-and-more",
            "env:sk-proj-abcdefghijklmnop",
            "keychain:sk-proj-abcdefghijklmnop",
            "keychain:sk-proj/abc def",
        ] {
            let err = SecretRef::parse(pasted).unwrap_err();
            let shown = format!("{err} {err:?}");
            for fragment in ["sk-", "hunter2", "AIza", "Zx9y", "abcdefgh", "abc def"] {
                assert!(!shown.contains(fragment), "{pasted} leaked {fragment} in {shown}");
            }
        }
    }

    #[test]
    fn an_unknown_kind_is_named_when_it_is_a_plain_word() {
        assert_eq!(
            SecretRef::parse("keychian:openai/default"),
            Err(SecretError::UnknownKind("keychian".into()))
        );
        assert_eq!(SecretRef::parse("vault2:x"), Err(SecretError::NotAReference));
        assert_eq!(SecretRef::parse("env:"), Err(SecretError::InvalidVariable));
        assert_eq!(SecretRef::parse("env:OPENAI-KEY"), Err(SecretError::InvalidVariable));
        assert!(matches!(SecretRef::parse("keychain:openai"), Err(SecretError::InvalidId(_))));
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err =
            SecretRef::parse("env:SWITCHYARD_TEST_SURELY_UNSET").unwrap().resolve().unwrap_err();
        assert_eq!(err, SecretError::MissingEnv("SWITCHYARD_TEST_SURELY_UNSET".into()));
    }

    #[test]
    fn env_values_are_trimmed_and_blank_ones_refused() {
        let r = SecretRef::Env("K".into());
        let got = r.resolve_with(&|_| Some("  sk-1234 \n".into())).unwrap();
        assert_eq!(got.expose(), "sk-1234");
        assert_eq!(r.resolve_with(&|_| Some(" ".into())), Err(SecretError::EmptyEnv("K".into())));
    }

    #[test]
    fn keychain_references_resolve_through_the_store() {
        let store = MemoryStore::new();
        store.set(&id("openai/default"), &Secret::from("sk-from-keychain")).unwrap();
        let r = SecretRef::parse("keychain:openai/default").unwrap();
        assert_eq!(r.resolve_using(&no_env, Some(&store)).unwrap().expose(), "sk-from-keychain");
    }

    #[test]
    fn a_keychain_reference_without_its_entry_names_the_entry() {
        let store = MemoryStore::new();
        let r = SecretRef::parse("keychain:openai/gone").unwrap();
        let err = r.resolve_using(&no_env, Some(&store)).unwrap_err();
        assert_eq!(err, SecretError::MissingEntry(id("openai/gone")));
        assert!(err.to_string().contains("keychain:openai/gone"), "{err}");
    }

    #[test]
    fn without_a_store_keychain_references_fail_and_env_references_still_work() {
        let r = SecretRef::parse("keychain:openai/default").unwrap();
        assert_eq!(r.resolve_with(&no_env), Err(SecretError::NoStore(id("openai/default"))));
        let env = SecretRef::parse("env:K").unwrap();
        assert_eq!(env.resolve_with(&|_| Some("v".into())).unwrap().expose(), "v");
    }

    #[test]
    fn on_a_machine_without_a_keychain_only_env_references_resolve() {
        let headless = MemoryStore::unavailable();
        let r = SecretRef::parse("keychain:openai/default").unwrap();
        let err = r.resolve_using(&no_env, Some(&headless)).unwrap_err();
        assert!(matches!(err, SecretError::Unavailable(_)), "{err:?}");
        assert!(err.to_string().contains("env:"), "the error offers the way out: {err}");
        let env = SecretRef::parse("env:K").unwrap();
        let got = env.resolve_using(&|_| Some("v".into()), Some(&headless)).unwrap();
        assert_eq!(got.expose(), "v");
    }
}
