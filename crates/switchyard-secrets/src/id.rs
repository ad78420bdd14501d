//! Names of entries in a [`SecretStore`](crate::SecretStore).
//!
//! Invariant: a [`SecretId`] is always `provider/credential`, each part 1 to 64 ASCII letters,
//! digits, '-', '_' or '.' (the rule config ids follow). In the OS keychain it is the account
//! of an entry whose service is [`SERVICE`]. An id is a name, not a secret, so errors show it.

use std::fmt;
use std::str::FromStr;

use crate::SecretError;

/// The keychain service every Switchyard entry is filed under.
pub const SERVICE: &str = "switchyard";

const MAX_PART: usize = 64;

/// Which secret: `provider/credential`, validated.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretId {
    account: String,
    /// Byte index of the '/' in `account`.
    slash: usize,
}

impl SecretId {
    pub fn new(provider: &str, credential: &str) -> Result<Self, SecretError> {
        if !is_name(provider) {
            return Err(SecretError::InvalidId(
                "the provider part must be 1 to 64 ASCII letters, digits, '-', '_' or '.'",
            ));
        }
        if !is_name(credential) {
            return Err(SecretError::InvalidId(
                "the credential part must be 1 to 64 ASCII letters, digits, '-', '_' or '.'",
            ));
        }
        Ok(Self { account: format!("{provider}/{credential}"), slash: provider.len() })
    }

    /// Parses `provider/credential`. Errors say what is wrong without repeating the text.
    pub fn parse(account: &str) -> Result<Self, SecretError> {
        let (provider, credential) = account.split_once('/').ok_or(SecretError::InvalidId(
            "write it as provider/credential, with one '/' between the two names",
        ))?;
        Self::new(provider, credential)
    }

    pub fn provider(&self) -> &str {
        &self.account[..self.slash]
    }

    pub fn credential(&self) -> &str {
        &self.account[self.slash + 1..]
    }

    /// `provider/credential`: the account name of the keychain entry.
    pub fn account(&self) -> &str {
        &self.account
    }
}

/// Shared with `KeychainStore::with_service`, so a service name obeys the same rule.
pub(crate) fn is_name(text: &str) -> bool {
    (1..=MAX_PART).contains(&text.len())
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl FromStr for SecretId {
    type Err = SecretError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for SecretId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.account)
    }
}

impl fmt::Debug for SecretId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretId({:?})", self.account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_provider_slash_credential() {
        let id = SecretId::parse("openai/team-key_2.old").unwrap();
        assert_eq!(
            (id.provider(), id.credential(), id.account()),
            ("openai", "team-key_2.old", "openai/team-key_2.old")
        );
        assert_eq!(id, SecretId::new("openai", "team-key_2.old").unwrap());
        assert_eq!(id.to_string().parse::<SecretId>().unwrap(), id);
        assert_eq!(format!("{id:?}"), "SecretId(\"openai/team-key_2.old\")");
    }

    #[test]
    fn malformed_ids_are_refused_without_repeating_the_text() {
        let long = "a".repeat(65);
        for bad in [
            "",
            "openai",
            "/default",
            "openai/",
            "openai/a/b",
            "open ai/default",
            "openai/dé",
            "sk-proj-Abc123DEF456ghi789JKL",
            &format!("{long}/x"),
            &format!("x/{long}"),
        ] {
            let err = SecretId::parse(bad).expect_err(bad);
            assert!(matches!(err, SecretError::InvalidId(_)), "{bad}: {err:?}");
            let shown = format!("{err} {err:?}");
            assert!(bad.len() < 3 || !shown.contains(bad), "{bad} echoed in {shown}");
        }
        assert!(SecretId::parse(&format!("{}/{}", "a".repeat(64), "b".repeat(64))).is_ok());
    }

    #[test]
    fn the_error_says_which_part_is_wrong() {
        let provider = SecretId::new("", "default").unwrap_err().to_string();
        let credential = SecretId::new("openai", "a b").unwrap_err().to_string();
        let slash = SecretId::parse("openai").unwrap_err().to_string();
        assert!(provider.contains("provider part"), "{provider}");
        assert!(credential.contains("credential part"), "{credential}");
        assert!(slash.contains("provider/credential"), "{slash}");
    }
}
