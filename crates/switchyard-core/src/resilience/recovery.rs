//! Recovery probes (RESILIENCE.md §3): how a benched target earns its traffic back without a
//! user's request being spent on it while it may still be down.
//!
//! A target is *recovering* when a layer benched it and the bench's wait has run out, but
//! nothing has shown yet that it works again: its breaker is half-open, its breaker is degraded
//! (ranked last, so it would never be tried), its credential's cooldown ran out with a backoff
//! still standing, or its model lock lapsed with failures still counted. When another candidate
//! can serve, the planner passes such a target over and names it for a probe of the proxy's
//! own: one token, never a user's prompt. The probe's answer is judged by the layer that benched
//! the target, and success clears that bench at once.
//!
//! Invariants:
//! - At most one probe per scope (provider, credential, or model on a credential) is in flight:
//!   the slot is taken in the registry and released on every exit path, including a dropped
//!   probe (cancelled, panicked), so a scope can never stay "probing" for ever.
//! - A degraded provider is probed at most once per `reset_timeout`.
//! - Probes are triggered by traffic only: no timers.

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
}

impl Bench {
    /// The stable machine name, as used in traces.
    pub fn code(self) -> &'static str {
        match self {
            Self::BreakerHalfOpen => "breaker_half_open",
            Self::BreakerDegraded => "breaker_degraded",
            Self::CredentialCooled => "credential_cooled",
            Self::ModelLockLapsed => "model_lock_lapsed",
        }
    }

    /// What one probe on this bench stands for: every target sharing it is judged by it.
    pub fn scope(self, key: &CandidateKey) -> ProbeScope {
        match self {
            Self::BreakerHalfOpen | Self::BreakerDegraded => {
                ProbeScope::Provider { provider: key.provider.clone() }
            }
            Self::CredentialCooled => ProbeScope::Credential { key: key.credential_key() },
            Self::ModelLockLapsed => ProbeScope::Model { key: key.clone() },
        }
    }

    /// Whether `verdict` shows the target fit again, by the rule of this bench's layer: the
    /// breaker asks for any answer that does not blame the provider, a lockout for a 2xx, a
    /// cooldown for anything but a rate limit (or another fault of the credential itself).
    pub fn healed_by(self, verdict: &Verdict) -> bool {
        match self {
            Self::BreakerHalfOpen | Self::BreakerDegraded => verdict.charges.provider.is_none(),
            Self::CredentialCooled => {
                verdict.kind != OutcomeKind::RateLimit && verdict.charges.credential.is_none()
            }
            Self::ModelLockLapsed => verdict.kind == OutcomeKind::Success,
        }
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
}

impl ProbeRefused {
    pub fn code(self) -> &'static str {
        match self {
            Self::InFlight => "probe_in_flight",
            Self::NotEligible => "probe_not_eligible",
            Self::Budget => "retry_budget",
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
    use crate::resilience::{BreakerState, HealthRegistry};

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);
    const SEC: Duration = Duration::from_secs(1);

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

    #[test]
    fn a_lapsed_lock_is_recovering_until_a_probe_gets_a_2xx() {
        let r = Arc::new(HealthRegistry::default());
        fail(&r, &key(), 503, T0);
        assert_eq!(r.recovering(&key(), T0), None, "locked: benched, not recovering");
        let lapsed = T0.plus(10 * SEC);
        assert_eq!(r.recovering(&key(), lapsed), Some(Bench::ModelLockLapsed));
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, || true).unwrap();
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
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, || true).unwrap();
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
        let probe = r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, || true).unwrap();
        assert_eq!(
            r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, || true).unwrap_err(),
            ProbeRefused::InFlight
        );
        assert!(r.snapshot(lapsed).probes[0].probing);
        // Nor under another bench: a target is never probed twice at once.
        assert_eq!(
            r.start_probe(&key(), Bench::CredentialCooled, lapsed, || true).unwrap_err(),
            ProbeRefused::InFlight
        );
        drop(probe);
        assert!(!r.snapshot(lapsed).probes.iter().any(|p| p.probing));
        // A probe the budget cannot afford is not started and spends nothing of the slot.
        assert_eq!(
            r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, || false).unwrap_err(),
            ProbeRefused::Budget
        );
        assert!(r.start_probe(&key(), Bench::ModelLockLapsed, lapsed, || true).is_ok());
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
        let probe = r.start_probe(&key(), Bench::BreakerHalfOpen, at, || true).unwrap();
        // The probe holds the half-open slot: nobody else is admitted meanwhile.
        assert!(r.eligible(&other, at).is_err());
        // A 400 does not blame the provider: the breaker closes.
        assert!(probe.finish(&verdict(400), at));
        assert_eq!(r.breaker_state(&"p".into(), at), BreakerState::Closed);
    }

    #[test]
    fn a_degraded_breaker_is_probed_at_most_once_per_reset_timeout() {
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
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, T0, || true).unwrap();
        assert_eq!(r.recovering(&key(), T0), None, "a probe is in flight");
        assert!(!probe.finish(&verdict(502), T0));
        // A user request fails meanwhile (the decay clock restarts): still degraded.
        fail(&r, &key(), 502, T0.plus(20 * SEC));
        assert_eq!(r.recovering(&key(), T0.plus(29 * SEC)), None, "probed 29 s ago");
        assert_eq!(r.recovering(&key(), T0.plus(30 * SEC)), Some(Bench::BreakerDegraded));
    }

    #[test]
    fn a_degraded_breaker_healed_by_a_probe_forgets_its_failures_at_once() {
        let r = Arc::new(HealthRegistry::default());
        for _ in 0..4 {
            fail(&r, &key(), 502, T0);
        }
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, T0, || true).unwrap();
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
        let probe = r.start_probe(&key(), Bench::CredentialCooled, at, || true).unwrap();
        assert!(!probe.finish(&classify_429(), at));
        assert!(r.eligible(&key(), at).is_err(), "cooling again");
        let later = at.plus(600 * SEC);
        let probe = r.start_probe(&key(), Bench::CredentialCooled, later, || true).unwrap();
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
        let probe = r.start_probe(&key(), Bench::BreakerDegraded, T0, || true).unwrap();
        assert!(!probe.finish(&verdict(500), T0));
        // 4 failures halve to 2 after 30 s: closed, but just seen failing.
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
