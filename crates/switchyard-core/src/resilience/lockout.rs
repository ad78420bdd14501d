//! Layer 3: the model lockout (RESILIENCE.md §5), scoped to (provider, credential, model).
//!
//! Invariants:
//! - A lock runs out by itself (lazy expiry); a user's success does not lift it, it halves the
//!   consecutive-failure count that sizes the next lock. Only a recovery probe's success lifts
//!   a lock early, and only one of the proxy's own backoff set after an earlier lock ran out
//!   ([`ModelLockout::probe_through`]); a wait the upstream stated is never cut short.
//! - Failures that arrive while locked (stragglers admitted before the lock) change nothing.
//! - An entry with no lock and no failures carries no information and is not kept.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Changed, SkipReason};
use crate::clock::{UnixMillis, millis};
use crate::outcome::OutcomeKind;
use crate::settings::LockoutPolicy;

/// How long a model the upstream refused to this credential (403 `model_forbidden`) stays
/// locked (RESILIENCE.md §2). Fixed rather than the backoff formula: a refusal of a model, region
/// or organisation does not flicker, and re-asking every 10 s would only collect more 403s,
/// while an hour would hide a permission that was just granted.
pub const FORBIDDEN_LOCK: Duration = Duration::from_secs(600);

/// Why a model was locked: the outcome kind and the upstream status, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct LockReason {
    pub kind: OutcomeKind,
    pub status: Option<u16>,
}

/// One (provider, credential, model)'s lockout state. Also its persisted form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct ModelLockout {
    pub locked_until: Option<UnixMillis>,
    pub consecutive_failures: u32,
    pub reason: Option<LockReason>,
    pub changed_at: UnixMillis,
    /// The lock is the proxy's own backoff, set when the model failed again after an earlier
    /// lock ran out: a recovery probe may go through it (RESILIENCE.md §3). Never a wait the
    /// upstream stated, a first lock, or a model refused or missing (those do not flicker).
    /// Not persisted: a restored or shared lock counts as stated and runs out by itself.
    #[serde(skip)]
    #[ts(skip)]
    pub probe_through: bool,
}

/// The persisted form of a lockout.
pub type LockoutRecord = ModelLockout;

impl ModelLockout {
    pub fn new(now: UnixMillis) -> Self {
        Self { changed_at: now, ..Self::default() }
    }

    pub fn is_pristine(&self) -> bool {
        self.locked_until.is_none() && self.consecutive_failures == 0
    }

    /// Whether a lock is in force at `now`.
    pub fn is_locked(&self, now: UnixMillis) -> bool {
        self.locked_until.is_some_and(|until| now < until)
    }

    /// Drops an expired lock and clamps a live one against clock jumps.
    pub fn refresh(&mut self, now: UnixMillis, policy: &LockoutPolicy) -> Changed {
        let Some(until) = self.locked_until.as_mut() else {
            return Changed::No;
        };
        if now >= *until {
            // The lock ended at `until`, whenever someone happens to look.
            self.changed_at = *until;
            self.locked_until = None;
            self.probe_through = false;
            return Changed::Yes;
        }
        let clamped = until.clamp_from(now, policy.longest());
        if clamped == *until {
            return Changed::No;
        }
        *until = clamped;
        self.changed_at = now;
        Changed::Yes
    }

    /// Call [`Self::refresh`] first.
    pub fn check(&self, now: UnixMillis) -> Result<(), SkipReason> {
        match self.locked_until {
            Some(until) if now < until => Err(SkipReason::ModelLocked {
                retry_in_ms: millis(until.since(now)),
                rate_limited: self.reason.is_some_and(|r| r.kind == OutcomeKind::RateLimit),
            }),
            _ => Ok(()),
        }
    }

    pub fn on_success(&mut self, now: UnixMillis) -> Changed {
        if self.consecutive_failures == 0 {
            return Changed::No;
        }
        self.consecutive_failures /= 2;
        self.changed_at = now;
        Changed::Yes
    }

    /// The lock ran out with its failures still counted: nothing has shown since that the model
    /// answers again (see [`crate::resilience::recovery`]).
    pub fn is_recovering(&self, now: UnixMillis, policy: &LockoutPolicy) -> bool {
        !self.is_locked(now) && self.consecutive_failures >= policy.failure_threshold.max(1)
    }

    /// A recovery probe got a 2xx: the count that sizes the next lock is cleared at once, and a
    /// lock it went through ([`Self::may_probe_through`]) is lifted.
    pub fn heal(&mut self, now: UnixMillis) -> Changed {
        let through = self.may_probe_through(now);
        if !through && (self.is_locked(now) || self.consecutive_failures == 0) {
            return Changed::No;
        }
        self.locked_until = None;
        self.consecutive_failures = 0;
        self.probe_through = false;
        self.changed_at = now;
        Changed::Yes
    }

    /// Whether a recovery probe may go through the lock in force at `now` (see
    /// [`Self::probe_through`]).
    pub fn may_probe_through(&self, now: UnixMillis) -> bool {
        self.probe_through && self.is_locked(now)
    }

    /// A probe through the lock was answered with a wait (`hint`, a `Retry-After` or reset
    /// header): the lock becomes exactly that wait, the upstream's, which no probe goes through.
    pub fn restate(&mut self, now: UnixMillis, hint: Duration) -> Changed {
        if !self.may_probe_through(now) {
            return Changed::No;
        }
        self.locked_until = Some(now.plus(hint));
        self.probe_through = false;
        self.changed_at = now;
        Changed::Yes
    }

    /// Counts a failure and locks once the threshold is reached, or at once when `at_once`
    /// (the upstream asked for a wait: a transient answer's long `Retry-After`, see
    /// [`Verdict::benched_by_retry_after`](crate::outcome::Verdict::benched_by_retry_after)).
    /// Call [`Self::refresh`] first.
    pub fn on_failure(
        &mut self,
        now: UnixMillis,
        policy: &LockoutPolicy,
        reason: LockReason,
        hint: Option<Duration>,
        at_once: bool,
    ) -> Changed {
        if !policy.enabled || self.is_locked(now) {
            return Changed::No;
        }
        // A lock ran out with its failures still counted, and the model failed again.
        let again = self.is_recovering(now, policy);
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.reason = Some(reason);
        if at_once || self.consecutive_failures >= policy.failure_threshold {
            let normal = || match reason.kind {
                OutcomeKind::ModelForbidden => FORBIDDEN_LOCK,
                _ => formula(policy, self.consecutive_failures),
            };
            let wait = match (reason.kind, hint) {
                // A model that is gone or refused stays locked at least its normal length: a
                // `Retry-After` on it may only lengthen the lock, never shorten it.
                (OutcomeKind::ModelUnavailable | OutcomeKind::ModelForbidden, Some(hint)) => {
                    hint.max(normal())
                }
                // A rate limit's or an overload's hint is the wait itself.
                (_, Some(hint)) => hint,
                (_, None) => normal(),
            };
            self.locked_until = Some(now.plus(wait));
            let standing =
                matches!(reason.kind, OutcomeKind::ModelUnavailable | OutcomeKind::ModelForbidden);
            self.probe_through = again && hint.is_none() && !standing;
        }
        self.changed_at = now;
        Changed::Yes
    }

    /// The stored lock, pulled back to at most `now + longest` (one already past lapses on the
    /// next read, exactly as in memory).
    pub fn restore(record: &LockoutRecord, now: UnixMillis, policy: &LockoutPolicy) -> Self {
        let mut lockout = record.clone();
        lockout.locked_until =
            record.locked_until.map(|until| until.min(now.plus(policy.longest())));
        lockout.probe_through = false;
        lockout
    }
}

/// `exponential ? min(base × 2^steps, max) : base`, where `steps` counts the failures beyond
/// the threshold (at the default threshold of 1 this is RESILIENCE.md's
/// `consecutive_failures − 1`), capped at `max_backoff_steps`.
pub fn formula(policy: &LockoutPolicy, consecutive_failures: u32) -> Duration {
    if !policy.exponential_backoff {
        return policy.base_cooldown;
    }
    let steps =
        consecutive_failures.saturating_sub(policy.failure_threshold).min(policy.max_backoff_steps);
    policy
        .base_cooldown
        .saturating_mul(1u32.checked_shl(steps).unwrap_or(u32::MAX))
        .min(policy.max_cooldown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::LockoutSettings;

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);
    const SEC: Duration = Duration::from_secs(1);
    const NOT_FOUND: LockReason =
        LockReason { kind: OutcomeKind::ModelUnavailable, status: Some(404) };

    fn fail(
        l: &mut ModelLockout,
        now: UnixMillis,
        p: &LockoutPolicy,
        hint: Option<Duration>,
    ) -> Changed {
        let _ = l.refresh(now, p);
        l.on_failure(now, p, NOT_FOUND, hint, false)
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let p = LockoutPolicy::default();
        assert!(p.enabled && p.exponential_backoff);
        assert_eq!(p.error_codes.iter().collect::<Vec<_>>(), [404, 429, 503]);
        assert_eq!((p.failure_threshold, p.max_backoff_steps), (1, 5));
        assert_eq!((p.base_cooldown, p.max_cooldown), (10 * SEC, 60 * SEC));
    }

    #[test]
    fn each_consecutive_failure_doubles_the_lock_up_to_the_max() {
        let p = LockoutPolicy::default();
        let mut l = ModelLockout::new(T0);
        let mut now = T0;
        let mut locks = Vec::new();
        for _ in 0..7 {
            assert!(fail(&mut l, now, &p, None).is_yes());
            let until = l.locked_until.unwrap();
            locks.push(until.since(now).as_secs());
            now = until;
        }
        assert_eq!(locks, [10, 20, 40, 60, 60, 60, 60]);
    }

    #[test]
    fn max_backoff_steps_caps_the_exponent() {
        let p = LockoutSettings {
            max_backoff_steps: 2,
            max_cooldown_ms: 3_600_000,
            ..LockoutSettings::default()
        }
        .validate()
        .unwrap();
        let waits: Vec<u64> = (1..=6).map(|cf| formula(&p, cf).as_secs()).collect();
        assert_eq!(waits, [10, 20, 40, 40, 40, 40]);
    }

    #[test]
    fn threshold_counts_failures_before_the_first_lock() {
        let p = LockoutSettings { failure_threshold: 3, ..LockoutSettings::default() }
            .validate()
            .unwrap();
        let mut l = ModelLockout::new(T0);
        let _ = fail(&mut l, T0, &p, None);
        let _ = fail(&mut l, T0, &p, None);
        assert_eq!(l.check(T0), Ok(()));
        let _ = fail(&mut l, T0, &p, None);
        assert_eq!(
            l.check(T0),
            Err(SkipReason::ModelLocked { retry_in_ms: 10_000, rate_limited: false })
        );
    }

    #[test]
    fn hint_beats_the_formula_and_locked_failures_do_not_extend() {
        let p = LockoutPolicy::default();
        let mut l = ModelLockout::new(T0);
        let _ = fail(&mut l, T0, &p, Some(90 * SEC));
        assert!(fail(&mut l, T0.plus(SEC), &p, Some(900 * SEC)) == Changed::No);
        assert_eq!(
            l.check(T0.plus(SEC)),
            Err(SkipReason::ModelLocked { retry_in_ms: 89_000, rate_limited: false })
        );
        assert_eq!(l.consecutive_failures, 1);
    }

    #[test]
    fn success_halves_the_count_but_leaves_the_lock_to_run_out() {
        let p = LockoutPolicy::default();
        let mut l = ModelLockout { consecutive_failures: 4, ..ModelLockout::new(T0) };
        let _ = fail(&mut l, T0, &p, None);
        assert!(l.on_success(T0).is_yes());
        assert_eq!(l.consecutive_failures, 2);
        assert!(l.is_locked(T0));
        let expiry = l.locked_until.unwrap();
        assert!(l.refresh(expiry, &p).is_yes());
        assert_eq!(l.check(expiry), Ok(()));
    }

    const OVERLOADED: LockReason = LockReason { kind: OutcomeKind::Transient, status: Some(503) };

    fn overload(l: &mut ModelLockout, now: UnixMillis, hint: Option<Duration>) {
        let p = LockoutPolicy::default();
        let _ = l.refresh(now, &p);
        let _ = l.on_failure(now, &p, OVERLOADED, hint, hint.is_some());
    }

    #[test]
    fn only_a_second_lock_of_its_own_backoff_may_be_probed_through() {
        let mut l = ModelLockout::new(T0);
        overload(&mut l, T0, None);
        assert!(!l.may_probe_through(T0), "the first wait runs out first");
        let lapsed = T0.plus(10 * SEC);
        overload(&mut l, lapsed, None);
        assert!(l.may_probe_through(lapsed), "locked again for 20 s: the proxy's own backoff");
        assert!(!l.may_probe_through(lapsed.plus(20 * SEC)), "no lock left to go through");

        // A stated wait is the upstream's: never gone through, whatever came before.
        let mut stated = ModelLockout::new(T0);
        overload(&mut stated, T0, None);
        overload(&mut stated, lapsed, Some(30 * SEC));
        assert!(!stated.may_probe_through(lapsed));

        // Nor a model that is gone, however often it was locked.
        let p = LockoutPolicy::default();
        let mut gone = ModelLockout::new(T0);
        let _ = fail(&mut gone, T0, &p, None);
        let _ = fail(&mut gone, lapsed, &p, None);
        assert!(gone.is_locked(lapsed) && !gone.may_probe_through(lapsed));
    }

    #[test]
    fn a_probe_through_the_lock_lifts_it_or_turns_it_into_the_wait_the_upstream_states() {
        let lapsed = T0.plus(10 * SEC);
        let mut l = ModelLockout::new(T0);
        overload(&mut l, T0, None);
        assert!(l.heal(T0) == Changed::No, "a first lock is not lifted by a probe");
        overload(&mut l, lapsed, None);
        let mut restated = l.clone();
        assert!(l.heal(lapsed.plus(SEC)).is_yes());
        assert!(l.is_pristine(), "{l:?}");

        let at = lapsed.plus(SEC);
        assert!(restated.restate(at, 45 * SEC).is_yes());
        assert_eq!(restated.locked_until, Some(at.plus(45 * SEC)));
        assert!(!restated.may_probe_through(at), "the upstream's wait is honoured exactly");
        assert!(restated.heal(at) == Changed::No);
    }

    #[test]
    fn disabled_lockouts_never_lock() {
        let p =
            LockoutSettings { enabled: false, ..LockoutSettings::default() }.validate().unwrap();
        let mut l = ModelLockout::new(T0);
        assert!(fail(&mut l, T0, &p, None) == Changed::No);
        assert!(l.is_pristine());
    }
}
