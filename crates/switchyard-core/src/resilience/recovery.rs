//! Recovery probes (RESILIENCE.md §3): how a benched target earns its traffic back without a
//! user's request being spent on it while it may still be down.
//!
//! A target is *recovering* when a layer benched it and the bench's wait has run out, but
//! nothing has shown yet that it works again: its breaker is half-open, its breaker is degraded
//! or suspect (ranked last, so it would never be tried), its credential's cooldown ran out with
//! a backoff still standing, or its model lock lapsed with failures still counted. When another
//! candidate can serve, the planner passes such a target over and names it for a probe of the
//! proxy's own: one token, never a user's prompt. The probe's answer is judged by the layer that
//! benched the target, and success clears that bench at once.
//!
//! A target benched again after its first wait ran out (its breaker re-opened, its key cooling
//! or its model locked a second time in a row) is probed *through* the bench, every
//! [`PROBE_INTERVAL`] while traffic flows, instead of only when the bench's doubled wait runs
//! out: only the proxy's own backoff is probed through, never a wait the upstream stated
//! (`Retry-After`, a reset header), which is honoured exactly.
//!
//! Invariants:
//! - At most one probe per scope (provider, credential, or model on a credential) is in flight:
//!   the slot is taken in the registry and released on every exit path, including a dropped
//!   probe (cancelled, panicked), so a scope can never stay "probing" for ever.
//! - A scope is probed at most once per [`PROBE_INTERVAL`].
//! - A recovery probe never adds to a breaker's failure count (the users that count protects go
//!   elsewhere already); a half-open probe's failure re-opens the breaker as before.
//! - Probes are triggered by traffic only: no timers.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, ProviderId};
use crate::outcome::{OutcomeKind, Verdict};

/// Which bench a recovering target is on: it decides the probe's scope and how its answer is
/// judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum Bench {
    /// The provider's breaker is half-open: the probe takes its probe slot.
    BreakerHalfOpen,
    /// The provider's breaker is degraded, so the planner ranks it last.
    BreakerDegraded,
    /// The credential's cooldown ran out, its backoff still standing.
    CredentialCooled,
    /// The model's lock on this credential ran out, its failures still counted.
    ModelLockLapsed,
    /// The provider's breaker re-opened after a failed half-open probe: the probe goes through
    /// the open breaker, which its success closes.
    BreakerOpen,
    /// The credential cools down again, by the proxy's own backoff, after its first cooldown
    /// ran out: the probe goes through the cooldown, which its success ends.
    CredentialCooling,
    /// The model is locked again, by the proxy's own backoff, after its first lock ran out: the
    /// probe goes through the lock, which its success lifts.
    ModelLocked,
}

/// A scope is probed at most this often. Traffic triggers probes, so the gap between two is
/// this plus the wait for the next request: with a request at least every 2 s a benched target
/// is probed at least every 5 s, and one that heals has users again within one interval and
/// two requests (RESILIENCE.md §3).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(3);

/// A provider that failed this many users' attempts in a row (nothing answering well between)
/// is suspect: ranked last and probed, not given users, until it answers. One failure is a
/// blip that the same-target retry usually covers; two in a row (the retry failed too) mean
/// the next user would most likely fail as well.
pub const SUSPECT_AFTER: u32 = 2;

impl Bench {
    /// The stable machine name, as used in traces.
    pub fn code(self) -> &'static str {
        match self {
            Self::BreakerHalfOpen => "breaker_half_open",
            Self::BreakerDegraded => "breaker_degraded",
            Self::CredentialCooled => "credential_cooled",
            Self::ModelLockLapsed => "model_lock_lapsed",
            Self::BreakerOpen => "breaker_open",
            Self::CredentialCooling => "credential_cooling",
            Self::ModelLocked => "model_locked",
        }
    }

    /// What one probe on this bench stands for: every target sharing it is judged by it.
    pub fn scope(self, key: &CandidateKey) -> ProbeScope {
        match self {
            Self::BreakerHalfOpen | Self::BreakerDegraded | Self::BreakerOpen => {
                ProbeScope::Provider { provider: key.provider.clone() }
            }
            Self::CredentialCooled | Self::CredentialCooling => {
                ProbeScope::Credential { key: key.credential_key() }
            }
            Self::ModelLockLapsed | Self::ModelLocked => ProbeScope::Model { key: key.clone() },
        }
    }

    /// Whether `verdict` shows the target fit again, by the rule of this bench's layer: the
    /// breaker asks for any answer that does not blame the provider, a lockout for a 2xx, a
    /// cooldown for anything but a rate limit (or another fault of the credential itself).
    pub fn healed_by(self, verdict: &Verdict) -> bool {
        match self {
            Self::BreakerHalfOpen | Self::BreakerDegraded | Self::BreakerOpen => {
                verdict.charges.provider.is_none()
            }
            Self::CredentialCooled | Self::CredentialCooling => {
                verdict.kind != OutcomeKind::RateLimit && verdict.charges.credential.is_none()
            }
            Self::ModelLockLapsed | Self::ModelLocked => verdict.kind == OutcomeKind::Success,
        }
    }

    /// Whether the probe goes through a bench still in force (see the module documentation).
    pub fn is_through(self) -> bool {
        matches!(self, Self::BreakerOpen | Self::CredentialCooling | Self::ModelLocked)
    }
}

/// The unit one probe answers for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "layer", rename_all = "snake_case")]
pub enum ProbeScope {
    Provider { provider: ProviderId },
    Credential { key: CredentialKey },
    Model { key: CandidateKey },
}

impl ProbeScope {
    /// Whether a probe of this scope stands for `key` too: a target is never probed twice at
    /// once, whichever bench each probe answers for.
    pub fn covers(&self, key: &CandidateKey) -> bool {
        match self {
            Self::Provider { provider } => *provider == key.provider,
            Self::Credential { key: credential } => {
                credential.provider == key.provider && credential.credential == key.credential
            }
            Self::Model { key: model } => model == key,
        }
    }
}

/// What the last probe of a scope found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct ProbeResult {
    pub at: UnixMillis,
    pub bench: Bench,
    pub outcome: OutcomeKind,
    pub status: Option<u16>,
    /// The bench was cleared: the target has its traffic back.
    pub healed: bool,
}

/// A scope's probing, as the registry tracks it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProbeTrack {
    pub in_flight: bool,
    pub last_sent: Option<UnixMillis>,
    pub last: Option<ProbeResult>,
    /// Provider scope: its last probe failed and the provider has not answered well since.
    /// Its failure count may decay below the degraded threshold meanwhile, but it keeps the
    /// last place (and is probed, not given users' requests) until it answers: the decay is
    /// for a provider nobody asks, not for one just seen failing.
    pub suspect: bool,
    /// Provider scope: users' attempts that failed on the provider's account in a row, with
    /// nothing answering well between (see [`SUSPECT_AFTER`]).
    pub failed_in_a_row: u32,
}

impl ProbeTrack {
    /// Whether a probe of this track's scope may start at `now`: [`PROBE_INTERVAL`] since the
    /// last (in-flight probes are checked across covering scopes by the registry).
    pub(crate) fn due(&self, now: UnixMillis) -> bool {
        !self.in_flight && self.last_sent.is_none_or(|at| now.since(at) >= PROBE_INTERVAL)
    }
}

/// Why no probe was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeRefused {
    /// A probe of the same scope is in flight; its answer will decide.
    InFlight,
    /// The target is no longer eligible (another request's failure benched it again).
    NotEligible,
    /// The retry budget is spent: probes are retries in its eyes (RESILIENCE.md §8).
    Budget,
    /// The scope was probed less than [`PROBE_INTERVAL`] ago.
    NotDue,
}

impl ProbeRefused {
    pub fn code(self) -> &'static str {
        match self {
            Self::InFlight => "probe_in_flight",
            Self::NotEligible => "probe_not_eligible",
            Self::Budget => "retry_budget",
            Self::NotDue => "probe_not_due",
        }
    }
}

/// A scope's probing, for the health page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct ProbeView {
    pub scope: ProbeScope,
    /// A probe is in flight right now.
    pub probing: bool,
    pub last: Option<ProbeResult>,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::outcome::{BodyHint, ClassifyPolicy, Outcome, Upstream, classify};
    use crate::resilience::{BreakerState, HealthRegistry, SkipReason};

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);
    const SEC: Duration = Duration::from_secs(1);
    /// How long a probe's half-open slot is held: the probe's own deadline.
    const PERMIT: Duration = Duration::from_secs(15);

    fn verdict(status: u16) -> Verdict {
        let headers = http::HeaderMap::new();
        let up = Upstream::Response { status, headers: &headers, body: BodyHint::None };
        classify(&Outcome::new(up), &ClassifyPolicy::default(), T0)
    }

    fn fail(r: &Arc<HealthRegistry>, key: &CandidateKey, status: u16, now: UnixMillis) {
        r.admit(key, now).unwrap().finish(&verdict(status), now);
    }

    fn key() -> CandidateKey {
        CandidateKey::new("p", "k", "m")
    }

    fn with_retry_after(status: u16, secs: u64) -> Verdict {
        let mut headers = http::HeaderMap::new();
        headers.insert("retry-after", secs.to_string().parse().unwrap());
        let up = Upstream::Response { status, headers: &headers, body: BodyHint::None };
        classify(&Outcome::new(up), &ClassifyPolicy::default(), T0)
    }

    /// The lock's remaining time at `now`.
    fn locked_for(r: &Arc<HealthRegistry>, now: UnixMillis) -> Option<Duration> {
        r.eligible(&key(), now).err().and_then(SkipReason::retry_in)
    }

    #[test]
    fn a_model_locked_again_is_probed_through_every_interval_and_the_first_success_lifts_it() {
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 503, T0);
        assert_eq!(r.probe_through(&key(), T0), None, "its first wait runs out first");
        let lapsed = T0.plus(10 * SEC);
        assert_eq!(r.recovering(&key(), lapsed), Some(Bench::ModelLockLapsed));
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap();
        assert!(!probe.finish(&verdict(503), lapsed));
        // Locked again for 20 s by the proxy's own backoff: a probe may go through it.
        assert_eq!(locked_for(&r, lapsed), Some(20 * SEC));
        assert_eq!(r.probe_through(&key(), lapsed), Some(Bench::ModelLocked));
        assert!(!r.probe_due(&key(), Bench::ModelLocked, lapsed), "probed just now");
        let mut at = lapsed;
        for _ in 0..3 {
            at = at.plus(PROBE_INTERVAL);
            assert!(r.probe_due(&key(), Bench::ModelLocked, at));
            let probe = r.start_probe(&key(), Bench::ModelLocked, at, PERMIT, || true).unwrap();
            assert!(!probe.finish(&verdict(503), at));
            let left = lapsed.plus(20 * SEC).since(at);
            assert_eq!(locked_for(&r, at), Some(left), "a failure through it leaves it as it was");
        }
        let breakers = r.snapshot(at).breakers;
        assert_eq!(breakers[0].failures, 1, "only the user's failure is counted: {breakers:?}");
        at = at.plus(PROBE_INTERVAL);
        let probe = r.start_probe(&key(), Bench::ModelLocked, at, PERMIT, || true).unwrap();
        assert!(probe.finish(&verdict(200), at));
        assert_eq!(r.eligible(&key(), at), Ok(()), "lifted at once, 5 s before it would lapse");
        assert_eq!(r.recovering(&key(), at), None);
        assert!(r.snapshot(at).lockouts.is_empty());
    }

    #[test]
    fn a_wait_the_upstream_states_is_never_probed_through_and_replaces_the_proxys_own() {
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 503, T0);
        let lapsed = T0.plus(10 * SEC);
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap();
        assert!(!probe.finish(&with_retry_after(503, 30), lapsed));
        assert_eq!(locked_for(&r, lapsed), Some(30 * SEC), "exactly the stated wait");
        for after in [3, 15, 29] {
            assert_eq!(r.probe_through(&key(), lapsed.plus(after * SEC)), None, "{after} s on");
        }
        assert_eq!(r.recovering(&key(), lapsed.plus(30 * SEC)), Some(Bench::ModelLockLapsed));

        // A probe through a lock of the proxy's own that is answered with a wait: that wait.
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 503, T0);
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap();
        assert!(!probe.finish(&verdict(503), lapsed));
        let at = lapsed.plus(PROBE_INTERVAL);
        let probe = r.start_probe(&key(), Bench::ModelLocked, at, PERMIT, || true).unwrap();
        assert!(!probe.finish(&with_retry_after(503, 45), at));
        assert_eq!(locked_for(&r, at), Some(45 * SEC));
        assert_eq!(r.probe_through(&key(), at.plus(PROBE_INTERVAL)), None);
        assert_eq!(
            r.start_probe(&key(), Bench::ModelLocked, at.plus(PROBE_INTERVAL), PERMIT, || true)
                .unwrap_err(),
            ProbeRefused::NotEligible
        );
    }

    #[test]
    fn a_breaker_that_reopened_is_probed_through_without_its_half_open_slot_and_closes() {
        let r = Arc::new(HealthRegistry::default());
        let other = CandidateKey::new("p", "k", "other");
        for _ in 0..5 {
            fail(&r, &other, 502, T0);
        }
        assert_eq!(r.probe_through(&key(), T0), None, "its first wait runs out first");
        let half_open = T0.plus(30 * SEC);
        let probe = r.start_probe(&key(), Bench::BreakerHalfOpen, half_open, PERMIT, || true);
        assert!(!probe.unwrap().finish(&verdict(502), half_open));
        assert_eq!(r.breaker_state(&"p".into(), half_open), BreakerState::Open);
        let at = half_open.plus(PROBE_INTERVAL);
        assert_eq!(r.probe_through(&key(), at), Some(Bench::BreakerOpen));
        let probe = r.start_probe(&key(), Bench::BreakerOpen, at, PERMIT, || true).unwrap();
        assert!(matches!(r.eligible(&other, at), Err(SkipReason::BreakerOpen { .. })));
        assert!(probe.finish(&verdict(200), at));
        assert_eq!(r.breaker_state(&"p".into(), at), BreakerState::Closed);
        assert!(r.snapshot(at).breakers.is_empty(), "closed with its counters reset");
    }

    #[test]
    fn two_failed_attempts_in_a_row_make_a_provider_suspect_and_one_between_successes_does_not() {
        let r = Arc::new(HealthRegistry::default());
        let p: ProviderId = "p".into();
        fail(&r, &key(), 500, T0);
        assert!(!r.ranks_last(&p, T0), "one failure is a blip");
        r.admit(&key(), T0).unwrap().finish(&verdict(200), T0);
        fail(&r, &key(), 500, T0);
        assert!(!r.ranks_last(&p, T0), "a success came between");
        fail(&r, &key(), 500, T0.plus(SEC));
        let at = T0.plus(PROBE_INTERVAL);
        assert!(r.ranks_last(&p, at), "two users' in a row");
        assert_eq!(r.recovering(&key(), at), Some(Bench::BreakerDegraded));
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, at, PERMIT, || true).unwrap();
        assert!(probe.finish(&verdict(200), at));
        assert!(!r.ranks_last(&p, at));
        assert!(r.snapshot(at).breakers.is_empty(), "healed: its failures forgotten");
    }

    #[test]
    fn a_lapsed_lock_is_recovering_until_a_probe_gets_a_2xx() {
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 503, T0);
        assert_eq!(r.recovering(&key(), T0), None, "locked: benched, not recovering");
        let lapsed = T0.plus(10 * SEC);
        assert_eq!(r.recovering(&key(), lapsed), Some(Bench::ModelLockLapsed));
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap();
        assert!(probe.finish(&verdict(200), lapsed));
        assert_eq!(r.recovering(&key(), lapsed), None);
        assert!(r.snapshot(lapsed).lockouts.is_empty());
    }

    #[test]
    fn a_failed_probe_extends_a_lapsed_lock_by_the_usual_backoff_even_if_not_charged() {
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 503, T0);
        let lapsed = T0.plus(10 * SEC);
        // 500 is not in the lockout list, but the lock asks for a 2xx.
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap();
        assert!(!probe.finish(&verdict(500), lapsed));
        assert_eq!(r.eligible(&key(), lapsed).unwrap_err().retry_in(), Some(20 * SEC));
        let view = r.snapshot(lapsed).probes;
        assert_eq!(view.len(), 1);
        assert_eq!(view[0].last.map(|l| (l.status, l.healed)), Some((Some(500), false)));
    }

    #[test]
    fn one_probe_per_scope_at_a_time_and_a_dropped_probe_frees_its_slot() {
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 404, T0);
        let lapsed = T0.plus(10 * SEC);
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap();
        assert_eq!(
            r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap_err(),
            ProbeRefused::InFlight
        );
        assert!(r.snapshot(lapsed).probes[0].probing);
        // Nor under another bench: a target is never probed twice at once.
        assert_eq!(
            r.start_probe(&key(), Bench::CredentialCooled, lapsed, PERMIT, || true).unwrap_err(),
            ProbeRefused::InFlight
        );
        drop(probe);
        assert!(!r.snapshot(lapsed).probes.iter().any(|p| p.probing));
        // The slot is free, but the scope was probed just now: the next waits its interval.
        assert_eq!(
            r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, PERMIT, || true).unwrap_err(),
            ProbeRefused::NotDue
        );
        // A probe the budget cannot afford is not started and spends nothing of the slot.
        let due = lapsed.plus(PROBE_INTERVAL);
        assert_eq!(
            r.start_probe(&key(), Bench::ModelLockLapsed, due, PERMIT, || false).unwrap_err(),
            ProbeRefused::Budget
        );
        assert!(r.start_probe(&key(), Bench::ModelLockLapsed, due, PERMIT, || true).is_ok());
    }

    #[test]
    fn a_half_open_breaker_is_recovering_and_its_probe_closes_it() {
        let r = Arc::new(HealthRegistry::default());
        let other = CandidateKey::new("p", "k", "other");
        for _ in 0..5 {
            fail(&r, &other, 502, T0);
        }
        let at = T0.plus(30 * SEC);
        assert_eq!(r.recovering(&key(), at), Some(Bench::BreakerHalfOpen));
        let probe = r.start_probe(&key(), Bench::BreakerHalfOpen, at, PERMIT, || true).unwrap();
        // The probe holds the half-open slot: nobody else is admitted meanwhile.
        assert!(r.eligible(&other, at).is_err());
        // A 400 does not blame the provider: the breaker closes.
        assert!(probe.finish(&verdict(400), at));
        assert_eq!(r.breaker_state(&"p".into(), at), BreakerState::Closed);
    }

    #[test]
    fn a_degraded_breaker_is_probed_at_most_once_per_probe_interval_and_its_failures_only_hold() {
        let r = Arc::new(HealthRegistry::default());
        let settings = crate::settings::BreakerSettings {
            failure_threshold: 10,
            ..crate::settings::BreakerSettings::default()
        };
        r.set_default_breaker_policy(settings.validate().unwrap());
        for _ in 0..6 {
            fail(&r, &key(), 502, T0);
        }
        assert_eq!(r.recovering(&key(), T0), Some(Bench::BreakerDegraded));
        assert!(r.probe_due(&key(), Bench::BreakerDegraded, T0));
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, T0, PERMIT, || true).unwrap();
        assert!(!r.probe_due(&key(), Bench::BreakerDegraded, T0), "a probe is in flight");
        assert_eq!(r.recovering(&key(), T0), Some(Bench::BreakerDegraded), "still passed over");
        assert!(!probe.finish(&verdict(502), T0));
        assert_eq!(r.snapshot(T0).breakers[0].failures, 6, "a probe's failure is not counted");
        let almost = T0.plus(PROBE_INTERVAL).minus(Duration::from_millis(1));
        assert!(!r.probe_due(&key(), Bench::BreakerDegraded, almost));
        assert!(r.probe_due(&key(), Bench::BreakerDegraded, T0.plus(PROBE_INTERVAL)));
        // Failed probes every interval hold the count: it does not decay back to users.
        let mut at = T0;
        while at < T0.plus(60 * SEC) {
            at = at.plus(PROBE_INTERVAL);
            let probe = r.start_probe(&key(), Bench::BreakerDegraded, at, PERMIT, || true).unwrap();
            assert!(!probe.finish(&verdict(502), at));
        }
        assert_eq!(r.breaker_state(&"p".into(), at), BreakerState::Degraded);
        assert_eq!(r.snapshot(at).breakers[0].failures, 6);
    }

    #[test]
    fn a_degraded_breaker_healed_by_a_probe_forgets_its_failures_at_once() {
        let r = Arc::new(HealthRegistry::default());
        for _ in 0..4 {
            fail(&r, &key(), 502, T0);
        }
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, T0, PERMIT, || true).unwrap();
        assert!(probe.finish(&verdict(200), T0));
        assert_eq!(r.breaker_state(&"p".into(), T0), BreakerState::Closed);
        assert!(r.snapshot(T0).breakers.is_empty(), "no failures left to count");
    }

    #[test]
    fn a_cooled_credential_is_cleared_by_any_answer_but_a_429() {
        let r = Arc::new(HealthRegistry::default());
        let mut lockouts = crate::settings::LockoutSettings::default();
        lockouts.error_codes.retain(|&c| c != 429);
        r.set_lockout_policy(lockouts.validate().unwrap());
        let classify_429 = || {
            let headers = http::HeaderMap::new();
            let up = Upstream::Response { status: 429, headers: &headers, body: BodyHint::None };
            classify(&Outcome::new(up), &r.classify_policy(), T0)
        };
        r.admit(&key(), T0).unwrap().finish(&classify_429(), T0);
        let at = T0.plus(60 * SEC);
        assert_eq!(r.recovering(&key(), at), Some(Bench::CredentialCooled));
        let probe = r.start_probe(&key(), Bench::CredentialCooled, at, PERMIT, || true).unwrap();
        assert!(!probe.finish(&classify_429(), at));
        assert!(r.eligible(&key(), at).is_err(), "cooling again");
        let later = at.plus(600 * SEC);
        let probe = r.start_probe(&key(), Bench::CredentialCooled, later, PERMIT, || true).unwrap();
        assert!(probe.finish(&verdict(400), later));
        assert_eq!(r.recovering(&key(), later), None);
        assert!(r.snapshot(later).credentials.is_empty());
    }

    #[test]
    fn a_provider_whose_probe_failed_ranks_last_even_once_its_count_decays() {
        let r = Arc::new(HealthRegistry::default());
        for _ in 0..3 {
            fail(&r, &key(), 500, T0);
        }
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, T0, PERMIT, || true).unwrap();
        assert!(!probe.finish(&verdict(500), T0));
        // 3 failures (the probe's is not counted) halve to 1 after 30 s: closed, but just seen
        // failing.
        let at = T0.plus(30 * SEC);
        assert_eq!(r.breaker_state(&"p".into(), at), BreakerState::Closed);
        assert!(r.ranks_last(&"p".into(), at));
        assert_eq!(r.recovering(&key(), at), Some(Bench::BreakerDegraded), "probed, not used");
        // Any answer that does not blame the provider lifts the suspicion.
        r.admit(&key(), at).unwrap().finish(&verdict(200), at);
        assert!(!r.ranks_last(&"p".into(), at));
        assert_eq!(r.recovering(&key(), at), None);
    }
}
