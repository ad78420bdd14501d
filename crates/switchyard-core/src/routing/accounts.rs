//! The accounts a `client` credential serves (issue 28, RESILIENCE.md §11). A `client`
//! credential stands for whichever subscriber's login the request carries, so its health is
//! kept per account: one subscriber's spent window benches that subscription only, and a
//! second subscriber through the same Switchyard keeps serving.
//!
//! Invariants:
//! - Bounded: a credential tells at most [`ACCOUNTS_PER_CREDENTIAL`] accounts apart; the ones
//!   seen after those share one scope, [`OVERFLOW`]. Scopes are never reassigned, so a bench
//!   recorded for an account stays that account's (no eviction can hand it to another), and the
//!   registry holds at most that many entries per credential.
//! - An account is named by a digest the caller made (never a token): the scoped id goes to the
//!   trace, the UI and the state file. The digest of an account id is the same across
//!   restarts, so a bench restored from the state file is found again by the same account.

use rustc_hash::FxHashMap;

use crate::ids::{CredentialId, CredentialKey};

/// How many accounts one `client` credential tells apart; a local router rarely sees more
/// than one or two.
pub const ACCOUNTS_PER_CREDENTIAL: usize = 16;

/// The scope every account past the first [`ACCOUNTS_PER_CREDENTIAL`] shares.
pub const OVERFLOW: &str = "other";

/// Which accounts each `client` credential has seen.
#[derive(Debug, Default)]
pub struct Accounts {
    seen: FxHashMap<CredentialKey, Vec<Box<str>>>,
}

impl Accounts {
    /// The credential id `key`'s requests for `account` are benched under: the configured id
    /// scoped to the account, or to [`OVERFLOW`] once the credential has seen its fill; and
    /// whether the scope is new.
    pub fn scope(&mut self, key: &CredentialKey, account: &str) -> (CredentialId, bool) {
        let seen = match self.seen.get_mut(key) {
            Some(seen) => seen,
            None => self.seen.entry(key.clone()).or_default(),
        };
        if seen.iter().any(|a| &**a == account) {
            return (key.credential.for_account(account), false);
        }
        if seen.len() < ACCOUNTS_PER_CREDENTIAL && account != OVERFLOW {
            seen.push(account.into());
            return (key.credential.for_account(account), true);
        }
        // The overflow's scope is new the first time a credential overflows.
        let new = seen.len() == ACCOUNTS_PER_CREDENTIAL;
        if new {
            seen.push(OVERFLOW.into());
        }
        (key.credential.for_account(OVERFLOW), new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login() -> CredentialKey {
        CredentialKey { provider: "claude".into(), credential: "login".into() }
    }

    fn scoped(accounts: &mut Accounts, key: &CredentialKey, account: &str) -> String {
        accounts.scope(key, account).0.to_string()
    }

    #[test]
    fn each_account_is_scoped_on_its_own_and_keeps_its_scope() {
        let mut accounts = Accounts::default();
        let (a, new) = accounts.scope(&login(), "a1b2c3");
        assert!(new);
        assert_eq!(a.as_str(), "login~a1b2c3");
        assert_eq!(scoped(&mut accounts, &login(), "d4e5f6"), "login~d4e5f6");
        assert_eq!(accounts.scope(&login(), "a1b2c3"), (a.clone(), false));
        assert_eq!((a.configured(), a.account()), ("login", Some("a1b2c3")));
    }

    #[test]
    fn accounts_past_the_bound_share_one_scope_and_the_first_keep_theirs() {
        let mut accounts = Accounts::default();
        for i in 0..ACCOUNTS_PER_CREDENTIAL {
            assert_eq!(
                scoped(&mut accounts, &login(), &format!("acct{i}")),
                format!("login~acct{i}")
            );
        }
        let (late, new) = accounts.scope(&login(), "late");
        assert_eq!((late.as_str(), new), ("login~other", true));
        assert_eq!(
            accounts.scope(&login(), "later"),
            (late, false),
            "one overflow scope, new once"
        );
        assert_eq!(scoped(&mut accounts, &login(), "acct0"), "login~acct0");
        // Another credential has a bound of its own.
        let other = CredentialKey { provider: "codex".into(), credential: "login".into() };
        assert_eq!(scoped(&mut accounts, &other, "late"), "login~late");
    }
}
