//! The logins a `client` credential serves (RESILIENCE.md §11). A `client`
//! credential stands for whichever subscriber's login the request carries, so its health is
//! kept per login: one subscriber's spent window or refused token benches that login only, and
//! a second subscriber through the same Switchyard keeps serving.
//!
//! Invariants:
//! - A login is named by a keyed digest of its token (never the token, never an account id the
//!   caller claims): what a bench is charged to is what the token proved. The scoped id goes to
//!   the trace, the UI and the state file; the digest's key is the data directory's, so a bench
//!   restored from the state file is found again by the same token.
//! - Bounded per local key: each local key's requests tell at most [`ACCOUNTS_PER_CREDENTIAL`]
//!   logins of a credential apart; the ones after those share an overflow scope of that local
//!   key's own ([`OVERFLOW`] and the key's id), so one local key, however many tokens it makes
//!   up, never fills another's scopes or shares a bench with it. Scopes are never reassigned,
//!   so a bench recorded for a login stays that login's.

use rustc_hash::FxHashMap;

use crate::ids::{CredentialId, CredentialKey};

/// How many logins one local key's requests tell apart per `client` credential; a local
/// router rarely sees more than one or two.
pub const ACCOUNTS_PER_CREDENTIAL: usize = 16;

/// The scope (with the local key's id) every login past the first [`ACCOUNTS_PER_CREDENTIAL`]
/// of a local key shares.
pub const OVERFLOW: &str = "other";

/// Which logins each `client` credential has seen, per local key.
#[derive(Debug, Default)]
pub struct Accounts {
    seen: FxHashMap<(CredentialKey, Box<str>), Vec<Box<str>>>,
}

impl Accounts {
    /// The credential id `key`'s requests with `login` (its scope) from the local key `caller`
    /// are benched under: the configured id scoped to the login, or to the caller's overflow
    /// once the caller has filled its share; and whether the scope is new.
    pub fn scope(
        &mut self,
        key: &CredentialKey,
        caller: &str,
        login: &str,
    ) -> (CredentialId, bool) {
        let seen = self.seen.entry((key.clone(), caller.into())).or_default();
        if seen.iter().any(|a| &**a == login) {
            return (key.credential.for_account(login), false);
        }
        if seen.len() < ACCOUNTS_PER_CREDENTIAL && !login.starts_with(OVERFLOW) {
            seen.push(login.into());
            return (key.credential.for_account(login), true);
        }
        // The overflow's scope is new the first time this caller overflows.
        let new = seen.len() == ACCOUNTS_PER_CREDENTIAL;
        if new {
            seen.push(OVERFLOW.into());
        }
        (key.credential.for_account(&format!("{OVERFLOW}.{caller}")), new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login() -> CredentialKey {
        CredentialKey { provider: "claude".into(), credential: "login".into() }
    }

    fn scoped(accounts: &mut Accounts, caller: &str, token: &str) -> String {
        accounts.scope(&login(), caller, token).0.to_string()
    }

    #[test]
    fn each_login_is_scoped_on_its_own_and_keeps_its_scope() {
        let mut accounts = Accounts::default();
        let (a, new) = accounts.scope(&login(), "k1", "ta1b2c3");
        assert!(new);
        assert_eq!(a.as_str(), "login~ta1b2c3");
        assert_eq!(scoped(&mut accounts, "k1", "td4e5f6"), "login~td4e5f6");
        assert_eq!(accounts.scope(&login(), "k1", "ta1b2c3"), (a.clone(), false));
        assert_eq!((a.configured(), a.account()), ("login", Some("ta1b2c3")));
        // The same token through another local key: the same scope (the token proves it).
        assert_eq!(scoped(&mut accounts, "k2", "ta1b2c3"), "login~ta1b2c3");
    }

    #[test]
    fn one_local_key_that_makes_up_tokens_fills_only_its_own_share() {
        let mut accounts = Accounts::default();
        for i in 0..ACCOUNTS_PER_CREDENTIAL {
            assert_eq!(scoped(&mut accounts, "mallory", &format!("t{i}")), format!("login~t{i}"));
        }
        let (late, new) = accounts.scope(&login(), "mallory", "tlate");
        assert_eq!((late.as_str(), new), ("login~other.mallory", true));
        assert_eq!(accounts.scope(&login(), "mallory", "tlater"), (late, false), "new once");
        assert_eq!(scoped(&mut accounts, "mallory", "t0"), "login~t0");
        // Another local key keeps a share of its own, and never lands in mallory's overflow.
        assert_eq!(scoped(&mut accounts, "alice", "tvictim"), "login~tvictim");
        for i in 0..ACCOUNTS_PER_CREDENTIAL + 4 {
            scoped(&mut accounts, "mallory", &format!("tmore{i}"));
        }
        assert_eq!(scoped(&mut accounts, "alice", "tvictim"), "login~tvictim");
        let (alices, _) = accounts.scope(&login(), "alice", "other.mallory");
        assert_ne!(
            alices.as_str(),
            "login~other.mallory",
            "no scope named like another's overflow"
        );
        // Another credential has a bound of its own.
        let other = CredentialKey { provider: "codex".into(), credential: "login".into() };
        assert_eq!(accounts.scope(&other, "mallory", "tlate").0.as_str(), "login~tlate");
    }
}
