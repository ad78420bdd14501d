//! Layer 2: the credential cooldown (RESILIENCE.md §4).
//!
//! Invariants:
//! - Expiry is lazy: a timed status (`cooling`, `quota_exhausted`) ends at the first read at or
//!   after `until`.
//! - `backoff_level` only decays on success; a cooldown running out does not reset it, so a
//!   flapping key waits longer each time instead of being hammered again and again.
//! - A failure of the same kind on a credential that is already benched neither extends the
//!   cooldown nor raises the level: a burst of concurrent 429s counts once.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Changed, SkipReason};
use crate::clock::{UnixMillis, millis};
use crate::outcome::{CredentialFault, MAX_SUBSCRIPTION_WAIT};
use crate::settings::CooldownPolicy;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum CredentialStatus {
    #[default]
    Active,
    Cooling,
    /// Refused by the upstream (401/403); stays benched until reset or replaced.
    Invalid,
    /// An OAuth token past its expiry that could not be refreshed.
    Expired,
    QuotaExhausted,
    /// An OAuth refresh is in progress.
    Refreshing,
}

/// Whether a credential is an API key, an OAuth token Switchyard keeps, or the caller's own
/// login (a subscription passed through): they start from different bases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    #[default]
    ApiKey,
    Oauth,
    /// The client's own `Authorization`, sent as the client sent it to this provider alone;
    /// never stored. Its health is kept per account (see `CredentialId::for_account`).
    Client,
}

/// How long a login passed through (a `client` credential's token) is benched after the
/// upstream refused it: long enough not to send a dead token again and again, short enough
/// that a token refused by mistake serves again without anyone acting.
pub const CLIENT_AUTH_BENCH: Duration = Duration::from_secs(10 * 60);

/// One credential's cooldown state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialCooldown {
    status: CredentialStatus,
    until: Option<UnixMillis>,
    backoff_level: u32,
    last_error: Option<CredentialFault>,
    changed_at: UnixMillis,
    /// The cooldown is the proxy's own backoff, set when the key was rate-limited again after
    /// an earlier cooldown ran out: a recovery probe may go through it (RESILIENCE.md §3).
    /// Never a wait the upstream stated. Not persisted: a restored or shared cooldown counts as
    /// stated and runs out by itself.
    probe_through: bool,
}

/// What is persisted of a credential's cooldown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct CredentialRecord {
    pub status: CredentialStatus,
    pub cooling_until: Option<UnixMillis>,
    pub backoff_level: u32,
    pub last_error: Option<CredentialFault>,
    pub changed_at: UnixMillis,
}

impl CredentialCooldown {
    pub fn new(now: UnixMillis) -> Self {
        Self { changed_at: now, ..Self::default() }
    }

    /// Active with no backoff: carries no information and need not be tracked.
    pub fn is_pristine(&self) -> bool {
        self.status == CredentialStatus::Active && self.backoff_level == 0
    }

    pub fn status(&self) -> CredentialStatus {
        self.status
    }

    pub fn backoff_level(&self) -> u32 {
        self.backoff_level
    }

    pub fn changed_at(&self) -> UnixMillis {
        self.changed_at
    }

    /// Ends an expired timed status and clamps `until` against clock jumps.
    pub fn refresh(&mut self, now: UnixMillis, policy: &CooldownPolicy) -> Changed {
        let longest = self.longest(policy);
        let Some(until) = self.until.as_mut() else {
            return Changed::No;
        };
        if now >= *until {
            // The cooldown ended at `until`, whenever someone happens to look.
            self.changed_at = *until;
            self.status = CredentialStatus::Active;
            self.until = None;
            self.probe_through = false;
            return Changed::Yes;
        }
        let clamped = until.clamp_from(now, longest);
        if clamped == *until {
            return Changed::No;
        }
        *until = clamped;
        self.changed_at = now;
        Changed::Yes
    }

    /// May this credential be used at `now`? Call [`Self::refresh`] first.
    pub fn check(&self, now: UnixMillis) -> Result<(), SkipReason> {
        let retry_in_ms = self.until.map_or(0, |u| millis(u.since(now)));
        match self.status {
            CredentialStatus::Active => Ok(()),
            CredentialStatus::Cooling => Err(SkipReason::CredentialCooling { retry_in_ms }),
            CredentialStatus::QuotaExhausted => {
                Err(SkipReason::CredentialQuotaExhausted { retry_in_ms })
            }
            CredentialStatus::Invalid => Err(SkipReason::CredentialInvalid),
            CredentialStatus::Expired => Err(SkipReason::CredentialExpired),
            CredentialStatus::Refreshing => Err(SkipReason::CredentialRefreshing),
        }
    }

    pub fn on_success(&mut self, now: UnixMillis) -> Changed {
        if self.backoff_level == 0 {
            return Changed::No;
        }
        self.backoff_level -= 1;
        self.changed_at = now;
        Changed::Yes
    }

    /// Its cooldown ran out but its backoff still stands: it was rate-limited and nothing has
    /// shown since that it is served again (see [`crate::resilience::recovery`]).
    pub fn is_recovering(&self) -> bool {
        self.status == CredentialStatus::Active
            && self.backoff_level > 0
            && self.last_error == Some(CredentialFault::RateLimit)
    }

    /// A recovery probe was served without a rate limit: the backoff is cleared at once, and a
    /// cooldown it went through ([`Self::may_probe_through`]) ends.
    pub fn heal(&mut self, now: UnixMillis) -> Changed {
        if self.may_probe_through(now) {
            self.status = CredentialStatus::Active;
            self.until = None;
            self.probe_through = false;
        } else if !self.is_recovering() {
            return Changed::No;
        }
        self.backoff_level = 0;
        self.changed_at = now;
        Changed::Yes
    }

    /// Whether a recovery probe may go through the cooldown in force at `now` (see
    /// `probe_through`).
    pub fn may_probe_through(&self, now: UnixMillis) -> bool {
        self.probe_through
            && self.status == CredentialStatus::Cooling
            && self.until.is_some_and(|until| now < until)
    }

    /// A probe through the cooldown was answered with a wait (`hint`): the cooldown becomes
    /// exactly that wait, the upstream's, which no probe goes through.
    pub fn restate(&mut self, now: UnixMillis, hint: Duration) -> Changed {
        if !self.may_probe_through(now) {
            return Changed::No;
        }
        self.until = Some(now.plus(hint));
        self.probe_through = false;
        self.changed_at = now;
        Changed::Yes
    }

    /// Charges `fault` to this credential. `hint` is the upstream's wait, already clamped by the
    /// classifier; call [`Self::refresh`] first.
    pub fn on_failure(
        &mut self,
        now: UnixMillis,
        policy: &CooldownPolicy,
        kind: CredentialKind,
        fault: CredentialFault,
        hint: Option<Duration>,
    ) -> Changed {
        use CredentialStatus as S;
        let benched_for = |status| self.status == status;
        // Rate-limited again after its last cooldown ran out unproven.
        let again = matches!(fault, CredentialFault::RateLimit) && self.is_recovering();
        match fault {
            CredentialFault::Auth if benched_for(S::Invalid) => return Changed::No,
            // A login passed through is its client's to renew, and its scope is the token: the
            // token is benched for a while, never for ever (a new one is a new scope and serves
            // at once; a refused token would be refused again until its client signs in anew).
            CredentialFault::Auth if kind == CredentialKind::Client => {
                if self.status == S::Cooling {
                    return Changed::No;
                }
                self.status = S::Cooling;
                self.until = Some(now.plus(CLIENT_AUTH_BENCH));
            }
            CredentialFault::Auth => {
                self.status = S::Invalid;
                self.until = None;
            }
            // A quota verdict outranks a plain rate limit, but does not extend itself.
            CredentialFault::Quota if benched_for(S::QuotaExhausted) || self.is_dead() => {
                return Changed::No;
            }
            CredentialFault::Quota => {
                let wait = hint.map_or(policy.quota_cooldown, |h| h.max(policy.quota_cooldown));
                self.status = S::QuotaExhausted;
                self.until = Some(now.plus(wait));
            }
            // A subscription's window: out until exactly its reset, however far, and back then.
            CredentialFault::Subscription if self.is_dead() => return Changed::No,
            CredentialFault::Subscription => {
                self.status = S::QuotaExhausted;
                self.until = Some(now.plus(hint.unwrap_or(policy.quota_cooldown)));
            }
            CredentialFault::RateLimit if self.status != S::Active => return Changed::No,
            CredentialFault::RateLimit => {
                let wait = hint.unwrap_or_else(|| formula(policy, kind, self.backoff_level));
                self.status = S::Cooling;
                self.until = Some(now.plus(wait));
                self.backoff_level = (self.backoff_level + 1).min(policy.max_backoff_level);
            }
        }
        self.probe_through = again && hint.is_none();
        self.last_error = Some(fault);
        self.changed_at = now;
        Changed::Yes
    }

    /// Sets a status owned by another component (the OAuth refresher): `refreshing`,
    /// `expired`, or back to `active`.
    pub fn set_status(&mut self, now: UnixMillis, status: CredentialStatus) -> Changed {
        if self.status == status {
            return Changed::No;
        }
        self.status = status;
        self.until = None;
        self.probe_through = false;
        self.changed_at = now;
        Changed::Yes
    }

    /// The longest its timed status may last from now: a subscription's window until its
    /// reset (up to [`MAX_SUBSCRIPTION_WAIT`]), anything else the policy's longest.
    fn longest(&self, policy: &CooldownPolicy) -> Duration {
        longest(policy, self.last_error)
    }

    /// Benched until a person or the OAuth refresher acts.
    fn is_dead(&self) -> bool {
        matches!(self.status, CredentialStatus::Invalid | CredentialStatus::Expired)
    }

    pub fn record(&self) -> CredentialRecord {
        CredentialRecord {
            status: self.status,
            cooling_until: self.until,
            backoff_level: self.backoff_level,
            last_error: self.last_error,
            changed_at: self.changed_at,
        }
    }

    /// Rebuilds from a record, pulling `cooling_until` back to at most `now + longest` (one
    /// already past lapses on the next read, exactly as in memory). A credential saved
    /// mid-refresh comes back `expired`: the refresh died with the process.
    pub fn restore(record: &CredentialRecord, now: UnixMillis, policy: &CooldownPolicy) -> Self {
        let status = match record.status {
            CredentialStatus::Refreshing => CredentialStatus::Expired,
            other => other,
        };
        let timed = matches!(status, CredentialStatus::Cooling | CredentialStatus::QuotaExhausted);
        Self {
            status,
            until: timed.then(|| {
                let longest = longest(policy, record.last_error);
                record.cooling_until.unwrap_or(now).min(now.plus(longest))
            }),
            backoff_level: record.backoff_level.min(policy.max_backoff_level),
            last_error: record.last_error,
            changed_at: record.changed_at,
            probe_through: false,
        }
    }
}

/// How long a timed status charged with `fault` may last at most (see
/// [`CredentialCooldown::refresh`], [`CredentialCooldown::restore`]).
fn longest(policy: &CooldownPolicy, fault: Option<CredentialFault>) -> Duration {
    match fault {
        Some(CredentialFault::Subscription) => MAX_SUBSCRIPTION_WAIT,
        _ => policy.longest(),
    }
}

/// `base × 2^level`, capped at `max_cooldown`.
pub fn formula(policy: &CooldownPolicy, kind: CredentialKind, level: u32) -> Duration {
    let base = match kind {
        CredentialKind::ApiKey => policy.api_key_base,
        // A login passed through is an OAuth token too, refreshed by its client.
        CredentialKind::Oauth | CredentialKind::Client => policy.oauth_base,
    };
    base.saturating_mul(1u32.checked_shl(level).unwrap_or(u32::MAX)).min(policy.max_cooldown)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);
    const SEC: Duration = Duration::from_secs(1);

    fn rate_limit(c: &mut CredentialCooldown, now: UnixMillis, hint: Option<Duration>) -> Changed {
        let p = CooldownPolicy::default();
        let _ = c.refresh(now, &p);
        c.on_failure(now, &p, CredentialKind::ApiKey, CredentialFault::RateLimit, hint)
    }

    #[test]
    fn only_a_second_cooldown_of_its_own_backoff_may_be_probed_through_and_its_probe_ends_it() {
        let mut c = CredentialCooldown::new(T0);
        let _ = rate_limit(&mut c, T0, None);
        assert!(!c.may_probe_through(T0), "the first wait runs out first");
        let cooled = T0.plus(3 * SEC);
        let _ = rate_limit(&mut c, cooled, None);
        assert!(c.may_probe_through(cooled), "cooling again for 6 s: the proxy's own backoff");
        let mut restated = c.clone();
        assert!(c.heal(cooled.plus(SEC)).is_yes());
        assert_eq!(check_at(&mut c, cooled.plus(SEC)), Ok(()));
        assert!(c.is_pristine());

        // The upstream's wait is honoured exactly, and no probe goes through it.
        assert!(restated.restate(cooled.plus(SEC), 20 * SEC).is_yes());
        assert!(!restated.may_probe_through(cooled.plus(SEC)));
        assert_eq!(
            check_at(&mut restated, cooled.plus(SEC)),
            Err(SkipReason::CredentialCooling { retry_in_ms: 20_000 })
        );
        let mut stated = CredentialCooldown::new(T0);
        let _ = rate_limit(&mut stated, T0, None);
        let _ = rate_limit(&mut stated, cooled, Some(30 * SEC));
        assert!(!stated.may_probe_through(cooled));
    }

    fn check_at(c: &mut CredentialCooldown, now: UnixMillis) -> Result<(), SkipReason> {
        let _ = c.refresh(now, &CooldownPolicy::default());
        c.check(now)
    }

    #[test]
    fn upstream_hint_beats_the_formula() {
        let mut c = CredentialCooldown::new(T0);
        assert!(rate_limit(&mut c, T0, Some(42 * SEC)).is_yes());
        assert_eq!(
            check_at(&mut c, T0),
            Err(SkipReason::CredentialCooling { retry_in_ms: 42_000 })
        );
        assert_eq!(check_at(&mut c, T0.plus(42 * SEC)), Ok(()));
    }

    #[test]
    fn formula_doubles_from_the_base_and_stops_at_the_cap() {
        let p = CooldownPolicy::default();
        let waits: Vec<u64> =
            (0..10).map(|l| formula(&p, CredentialKind::ApiKey, l).as_secs()).collect();
        assert_eq!(waits, [3, 6, 12, 24, 48, 96, 192, 300, 300, 300]);
        assert_eq!(formula(&p, CredentialKind::Oauth, 0), 5 * SEC);
    }

    #[test]
    fn concurrent_failures_on_a_cooling_key_do_not_extend_or_escalate() {
        let mut c = CredentialCooldown::new(T0);
        let _ = rate_limit(&mut c, T0, None);
        let later = T0.plus(2 * SEC);
        assert!(rate_limit(&mut c, later, None) == Changed::No);
        assert!(rate_limit(&mut c, later, Some(600 * SEC)) == Changed::No);
        assert_eq!(
            check_at(&mut c, later),
            Err(SkipReason::CredentialCooling { retry_in_ms: 1_000 })
        );
        assert_eq!(c.backoff_level(), 1);
    }

    #[test]
    fn expiry_does_not_reset_the_backoff_but_success_decays_it_by_one() {
        let mut c = CredentialCooldown::new(T0);
        let mut now = T0;
        for _ in 0..3 {
            let _ = rate_limit(&mut c, now, None);
            now = now.plus(300 * SEC);
            assert_eq!(check_at(&mut c, now), Ok(()));
        }
        assert_eq!(c.backoff_level(), 3, "expiry kept the level");
        let _ = rate_limit(&mut c, now, None);
        assert_eq!(
            check_at(&mut c, now),
            Err(SkipReason::CredentialCooling { retry_in_ms: 24_000 })
        );
        now = now.plus(24 * SEC);
        assert!(c.on_success(now).is_yes());
        assert_eq!(c.backoff_level(), 3);
        let _ = rate_limit(&mut c, now, None);
        assert_eq!(
            check_at(&mut c, now),
            Err(SkipReason::CredentialCooling { retry_in_ms: 24_000 })
        );
    }

    #[test]
    fn auth_failure_marks_the_key_invalid_until_reset() {
        let p = CooldownPolicy::default();
        let mut c = CredentialCooldown::new(T0);
        let _ = c.on_failure(T0, &p, CredentialKind::ApiKey, CredentialFault::Auth, None);
        assert_eq!(
            check_at(&mut c, T0.plus(Duration::from_secs(86_400 * 30))),
            Err(SkipReason::CredentialInvalid)
        );
        assert!(c.set_status(T0, CredentialStatus::Active).is_yes());
        assert_eq!(c.check(T0), Ok(()));
    }

    #[test]
    fn a_refused_login_is_benched_for_a_while_never_for_ever_and_restores_as_timed() {
        let p = CooldownPolicy::default();
        let mut c = CredentialCooldown::new(T0);
        assert!(c.on_failure(T0, &p, CredentialKind::Client, CredentialFault::Auth, None).is_yes());
        let bench = u64::try_from(CLIENT_AUTH_BENCH.as_millis()).unwrap();
        let almost = T0.plus(CLIENT_AUTH_BENCH.saturating_sub(SEC));
        assert_eq!(check_at(&mut c, T0), Err(SkipReason::CredentialCooling { retry_in_ms: bench }));
        assert!(
            !c.on_failure(almost, &p, CredentialKind::Client, CredentialFault::Auth, None).is_yes(),
            "a second refusal does not extend it"
        );
        let restored = CredentialCooldown::restore(&c.record(), T0, &p);
        assert_ne!(restored.record().status, CredentialStatus::Invalid, "never kept as invalid");
        assert!(restored.record().cooling_until.is_some(), "timed after a restart too");
        assert_eq!(check_at(&mut c, T0.plus(CLIENT_AUTH_BENCH)), Ok(()), "over by itself");
    }

    #[test]
    fn quota_exhaustion_benches_for_the_long_cooldown_even_while_cooling() {
        let p = CooldownPolicy::default();
        let mut c = CredentialCooldown::new(T0);
        let _ = rate_limit(&mut c, T0, None);
        assert!(
            c.on_failure(T0, &p, CredentialKind::ApiKey, CredentialFault::Quota, Some(SEC))
                .is_yes()
        );
        assert_eq!(
            check_at(&mut c, T0),
            Err(SkipReason::CredentialQuotaExhausted { retry_in_ms: millis(p.quota_cooldown) })
        );
    }

    #[test]
    fn a_subscriptions_window_benches_it_until_exactly_its_reset_and_survives_a_restore() {
        let p = CooldownPolicy::default();
        let five_hours = Duration::from_secs(5 * 3600);
        assert!(five_hours > p.longest(), "the test needs a reset past every other cap");
        let mut c = CredentialCooldown::new(T0);
        let fault = CredentialFault::Subscription;
        let benched = c.on_failure(T0, &p, CredentialKind::ApiKey, fault, Some(five_hours));
        assert_eq!(benched, Changed::Yes);
        let just_before = T0.plus(five_hours.saturating_sub(SEC));
        assert!(matches!(
            check_at(&mut c, just_before),
            Err(SkipReason::CredentialQuotaExhausted { .. })
        ));
        // Saved and read back at start: the reset stands, not the one-hour cap of hints.
        let restored = CredentialCooldown::restore(&c.record(), T0.plus(SEC), &p);
        assert_eq!(restored.record().cooling_until, Some(T0.plus(five_hours)));
        assert_eq!(check_at(&mut c, T0.plus(five_hours)), Ok(()), "it serves again at the reset");
        // Without a reset said, the long quota cooldown.
        let mut c = CredentialCooldown::new(T0);
        assert_eq!(c.on_failure(T0, &p, CredentialKind::ApiKey, fault, None), Changed::Yes);
        assert_eq!(c.record().cooling_until, Some(T0.plus(p.quota_cooldown)));
        // A corrupt record cannot bench it past the longest window.
        let mut far = c.record();
        far.cooling_until = Some(T0.plus(MAX_SUBSCRIPTION_WAIT * 3));
        let restored = CredentialCooldown::restore(&far, T0, &p);
        assert_eq!(restored.record().cooling_until, Some(T0.plus(MAX_SUBSCRIPTION_WAIT)));
    }

    #[test]
    fn refreshing_credential_restores_as_expired() {
        let p = CooldownPolicy::default();
        let mut c = CredentialCooldown::new(T0);
        let _ = c.set_status(T0, CredentialStatus::Refreshing);
        let restored = CredentialCooldown::restore(&c.record(), T0, &p);
        assert_eq!(restored.check(T0), Err(SkipReason::CredentialExpired));
    }
}
