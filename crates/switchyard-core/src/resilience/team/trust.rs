//! What an instance takes from the team, and within which bounds: teammates need not
//! be fully trusted, nor the database. A member (or anyone who can write the tables) can forge
//! any row; what it can do to this instance is bounded here, at the one place every team entry
//! passes on its way into the registry, in this instance's time and by this instance's policy.
//!
//! - A lease another instance holds is honoured for at most this instance's `probe_timeout`
//!   from when it was granted; a lease granted "in the future" is not honoured at all. One row
//!   can no longer hold the team's probe slot for ever.
//! - Only timed states are taken: a credential the team calls `invalid` (or any other status
//!   without an end) becomes a cooldown here of at most [`REPORTED_REFUSED_FOR`] (and at most
//!   the policy's `max_cooldown`) from when it was reported, recorded as an auth failure so the health page says who reported it; the
//!   key's first success here afterwards clears the team's entry.
//! - Every deadline is at most the policy's longest wait after the entry's change; a change
//!   dated in the future (past [`SKEW`]) counts as made now.
//!
//! What is not bounded here, and cannot be by any instance alone: a member that keeps writing
//! keeps its effect for as long as it writes (each write bounded as above). docs/team.md says
//! how a team that wants more gives each member its own role and row-level security.

use std::time::Duration;

use super::shared::{Lease, SharedBreaker, SharedCredential, SharedLockout};
use crate::clock::UnixMillis;
use crate::ids::InstanceId;
use crate::outcome::CredentialFault;
use crate::resilience::CredentialStatus;
use crate::settings::{BreakerPolicy, CooldownPolicy, LockoutPolicy};

/// How long a key the team reports refused (`invalid`) is benched here: long enough that a key
/// that really is refused is not tried by every instance at once, short enough that a forged
/// report costs minutes, not the day.
pub const REPORTED_REFUSED_FOR: Duration = Duration::from_secs(5 * 60);

/// How far ahead of this instance's clock (already corrected by the measured offset) a change
/// may be dated before it counts as forged.
pub const SKEW: Duration = Duration::from_secs(60);

/// When a change dated `at` counts as made: never after `now`.
fn dated(at: UnixMillis, now: UnixMillis) -> UnixMillis {
    if at > now.plus(SKEW) { now } else { at.min(now) }
}

/// Whether a lease is live at `now` for an instance whose `probe_timeout` is `honoured`: granted
/// no later than now, and neither its own deadline nor `honoured` after the grant has passed. A
/// lease that does not say when it was granted is live only if it ends within `honoured`.
pub fn lease_live(lease: &Lease, now: UnixMillis, honoured: Duration) -> bool {
    if lease.until <= now {
        return false;
    }
    match lease.since {
        Some(since) => since <= now.plus(SKEW) && since.min(now).plus(honoured) > now,
        None => lease.until <= now.plus(honoured),
    }
}

/// A team breaker, in local time, as this instance takes it.
pub fn breaker(
    shared: &SharedBreaker,
    me: &InstanceId,
    now: UnixMillis,
    policy: &BreakerPolicy,
) -> SharedBreaker {
    let mut taken = shared.clone();
    let changed = dated(shared.record.changed_at, now);
    taken.record.changed_at = changed;
    // Opened "in the future": the wait is not believed at all (the database's lease statement
    // reads it the same way, so a probe may go out and heal the entry).
    let forged = shared.record.changed_at > now.plus(SKEW);
    taken.record.open_until = shared
        .record
        .open_until
        .map(|until| if forged { now } else { until.min(changed.plus(policy.longest())) });
    taken.lease = shared.lease.as_ref().and_then(|lease| {
        if lease.holder == *me {
            return Some(lease.clone());
        }
        lease_live(lease, now, policy.probe_timeout).then(|| {
            let since = lease.since.unwrap_or(now).min(now);
            Lease { until: lease.until.min(since.plus(policy.probe_timeout)), ..lease.clone() }
        })
    });
    taken
}

/// A team credential cooldown, in local time, as this instance takes it.
pub fn credential(
    shared: &SharedCredential,
    now: UnixMillis,
    policy: &CooldownPolicy,
) -> SharedCredential {
    let mut taken = shared.clone();
    let changed = dated(shared.changed_at, now);
    taken.changed_at = changed;
    match shared.status {
        CredentialStatus::Active => taken.cooling_until = None,
        CredentialStatus::Cooling | CredentialStatus::QuotaExhausted => {
            taken.cooling_until =
                Some(shared.cooling_until.unwrap_or(changed).min(changed.plus(policy.longest())));
        }
        CredentialStatus::Invalid | CredentialStatus::Expired | CredentialStatus::Refreshing => {
            let until = changed.plus(REPORTED_REFUSED_FOR.min(policy.max_cooldown));
            taken.status =
                if until > now { CredentialStatus::Cooling } else { CredentialStatus::Active };
            taken.cooling_until = (until > now).then_some(until);
            taken.last_error = Some(CredentialFault::Auth);
            // A backoff step, so the key's first success here is a change the team hears of:
            // it clears the report (see `CredentialChange::apply`).
            taken.backoff_level = taken.backoff_level.max(1);
        }
    }
    taken
}

/// A team model lockout, in local time, as this instance takes it.
pub fn lockout(shared: &SharedLockout, now: UnixMillis, policy: &LockoutPolicy) -> SharedLockout {
    let mut taken = shared.clone();
    let changed = dated(shared.changed_at, now);
    taken.changed_at = changed;
    taken.locked_until = shared.locked_until.map(|until| until.min(changed.plus(policy.longest())));
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resilience::{Breaker, BreakerState, CredentialRecord};

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);
    const YEAR: Duration = Duration::from_secs(365 * 86_400);

    fn forged_lease(since: Option<UnixMillis>) -> SharedBreaker {
        let p = BreakerPolicy::default();
        let mut record = Breaker::new(T0).record(&p);
        record.state = BreakerState::HalfOpen;
        let lease = Lease { holder: InstanceId::new("mallory"), since, until: T0.plus(YEAR) };
        SharedBreaker { record, lease: Some(lease) }
    }

    #[test]
    fn a_foreign_lease_is_honoured_for_the_local_probe_timeout_at_most() {
        let p = BreakerPolicy::default();
        let me = InstanceId::new("me");
        let taken = breaker(&forged_lease(Some(T0)), &me, T0, &p);
        assert_eq!(taken.lease.unwrap().until, T0.plus(p.probe_timeout));
        let later = T0.plus(p.probe_timeout);
        assert!(breaker(&forged_lease(Some(T0)), &me, later, &p).lease.is_none(), "lapsed");
        // Granted "tomorrow": not a lease at all.
        let tomorrow = Some(T0.plus(Duration::from_secs(86_400)));
        assert!(breaker(&forged_lease(tomorrow), &me, T0, &p).lease.is_none());
    }

    #[test]
    fn a_reported_refusal_is_a_bounded_cooldown_that_names_an_auth_failure() {
        let p = CooldownPolicy::default();
        let invalid = CredentialRecord {
            status: CredentialStatus::Invalid,
            cooling_until: None,
            backoff_level: 0,
            last_error: Some(CredentialFault::Auth),
            changed_at: T0,
        };
        let taken = credential(&invalid, T0, &p);
        assert_eq!(taken.status, CredentialStatus::Cooling);
        let bound = REPORTED_REFUSED_FOR.min(p.max_cooldown);
        assert_eq!(taken.cooling_until, Some(T0.plus(bound)));
        assert_eq!((taken.last_error, taken.backoff_level), (Some(CredentialFault::Auth), 1));
        // Read again later (another catch-up), the bound is still from the report, not renewed.
        let again = credential(&invalid, T0.plus(bound), &p);
        assert_eq!((again.status, again.cooling_until), (CredentialStatus::Active, None));
        // A report dated a year ahead counts as made now.
        let forged = CredentialRecord { changed_at: T0.plus(YEAR), ..invalid };
        assert_eq!(credential(&forged, T0, &p).cooling_until, Some(T0.plus(bound)));
    }

    #[test]
    fn deadlines_a_year_away_are_cut_to_the_longest_wait_after_the_change() {
        let cooling = CredentialRecord {
            status: CredentialStatus::Cooling,
            cooling_until: Some(T0.plus(YEAR)),
            backoff_level: 1,
            last_error: Some(CredentialFault::RateLimit),
            changed_at: T0,
        };
        let p = CooldownPolicy::default();
        assert_eq!(credential(&cooling, T0, &p).cooling_until, Some(T0.plus(p.longest())));
        let bp = BreakerPolicy::default();
        let mut open = forged_lease(None);
        open.record.state = BreakerState::Open;
        open.record.open_until = Some(T0.plus(YEAR));
        let me = InstanceId::new("me");
        assert_eq!(breaker(&open, &me, T0, &bp).record.open_until, Some(T0.plus(bp.longest())));
    }
}
