//! One refresh breaker per provider: the core [`Breaker`] machine, with the refresh policy,
//! in front of the provider's token endpoint, so a broken identity provider is asked again only
//! as often as the breaker allows, however many credentials and requests wait on it.
//!
//! Invariants:
//! - The map lock is held only to read or move a breaker, never across a token request.
//! - A [`Permit`] settles its breaker exactly once: success, failure, or (when dropped
//!   unsettled, e.g. the caller was cancelled) release of its half-open probe slot, so the
//!   breaker can never stay half-open waiting for a result that will not come.
//! - Only identity-provider failures are charged; an answer that refuses us (`invalid_grant`)
//!   proves the endpoint works and counts as a success.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::Serialize;
use switchyard_core::outcome::BreakerFault;
use switchyard_core::resilience::breaker::{Admission, Breaker};
use switchyard_core::resilience::{BreakerState, SkipReason};
use switchyard_core::settings::BreakerPolicy;
use switchyard_core::{ProviderId, UnixMillis, clock::millis};

/// The last identity-provider failure seen for a provider or credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
pub struct RefreshFailure {
    /// Machine name: `idp_unreachable`, `idp_failing`, `invalid_grant`, `idp_rejected`, ...
    pub code: String,
    /// A sentence for a person; never carries a token.
    pub message: String,
    pub at: UnixMillis,
}

/// What the health API shows of a provider's refresh breaker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
pub struct RefreshBreakerView {
    pub state: BreakerState,
    pub failures: u32,
    pub last_fault: Option<BreakerFault>,
    /// How long until a refresh may be attempted; zero when it may be now.
    #[ts(type = "number")]
    pub retry_in_ms: u64,
    pub last_failure: Option<RefreshFailure>,
}

/// A refresh the breaker refused.
#[derive(Clone, Debug)]
pub(crate) struct Refused {
    pub(crate) retry_in_ms: u64,
    pub(crate) last_failure: Option<RefreshFailure>,
}

#[derive(Debug)]
struct Entry {
    breaker: Breaker,
    last_failure: Option<RefreshFailure>,
}

#[derive(Debug, Default)]
pub(crate) struct RefreshBreakers {
    map: Mutex<HashMap<ProviderId, Entry>>,
    next_probe: AtomicU64,
}

impl RefreshBreakers {
    fn with<T>(
        &self,
        provider: &ProviderId,
        now: UnixMillis,
        f: impl FnOnce(&mut Entry) -> T,
    ) -> T {
        let mut map = self.map.lock();
        let entry = map
            .entry(provider.clone())
            .or_insert_with(|| Entry { breaker: Breaker::new(now), last_failure: None });
        f(entry)
    }

    /// Lets one refresh through, or says when the next may go.
    pub(crate) fn admit<'a>(
        &'a self,
        provider: &ProviderId,
        now: UnixMillis,
        policy: &BreakerPolicy,
    ) -> Result<Permit<'a>, Refused> {
        let admitted = self.with(provider, now, |e| {
            let _ = e.breaker.refresh(now, policy);
            // A refresh is one short token request: its probe slot lasts `probe_timeout`.
            let deadline = now.plus(policy.probe_timeout);
            e.breaker
                .admit(now, policy, deadline, || self.next_probe.fetch_add(1, Ordering::Relaxed))
                .map_err(|reason: SkipReason| Refused {
                    retry_in_ms: reason.retry_in().map_or(0, millis),
                    last_failure: e.last_failure.clone(),
                })
        })?;
        Ok(Permit {
            breakers: self,
            provider: provider.clone(),
            admission: admitted,
            settled: false,
        })
    }

    pub(crate) fn view(
        &self,
        provider: &ProviderId,
        now: UnixMillis,
        policy: &BreakerPolicy,
    ) -> RefreshBreakerView {
        self.with(provider, now, |e| {
            let _ = e.breaker.refresh(now, policy);
            RefreshBreakerView {
                state: e.breaker.state(policy),
                failures: e.breaker.failures(),
                last_fault: e.breaker.last_fault(),
                retry_in_ms: millis(e.breaker.retry_in(now, policy)),
                last_failure: e.last_failure.clone(),
            }
        })
    }

    /// Whether a refresh could be admitted now, without claiming anything.
    pub(crate) fn would_admit(
        &self,
        provider: &ProviderId,
        now: UnixMillis,
        policy: &BreakerPolicy,
    ) -> bool {
        self.with(provider, now, |e| {
            let _ = e.breaker.refresh(now, policy);
            e.breaker.check(now, policy).is_ok()
        })
    }
}

/// One admitted refresh. Settle it with [`Permit::success`] or [`Permit::failure`].
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    breakers: &'a RefreshBreakers,
    provider: ProviderId,
    admission: Admission,
    settled: bool,
}

impl Permit<'_> {
    /// The identity provider answered (tokens, or a refusal that is not its fault).
    pub(crate) fn success(mut self, now: UnixMillis) {
        self.settled = true;
        let admission = self.admission;
        self.breakers.with(&self.provider, now, |e| {
            let _ = e.breaker.on_success(now, admission);
        });
    }

    /// The identity provider failed.
    pub(crate) fn failure(
        mut self,
        now: UnixMillis,
        policy: &BreakerPolicy,
        fault: BreakerFault,
        failure: RefreshFailure,
    ) {
        self.settled = true;
        let admission = self.admission;
        self.breakers.with(&self.provider, now, |e| {
            let _ = e.breaker.on_failure(now, policy, fault, admission);
            e.last_failure = Some(failure);
        });
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let (false, Admission::Probe(id)) = (self.settled, self.admission)
            && let Some(e) = self.breakers.map.lock().get_mut(&self.provider)
        {
            e.breaker.release(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::oauth::RefreshPolicy;

    use super::*;

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);

    fn failure() -> RefreshFailure {
        RefreshFailure { code: "idp_failing".into(), message: "HTTP 503".into(), at: T0 }
    }

    #[test]
    fn third_failure_opens_and_refuses_with_the_time_to_wait_and_the_reason() {
        let p = RefreshPolicy::default().breaker;
        let b = RefreshBreakers::default();
        let acme = ProviderId::from("acme");
        for _ in 0..3 {
            b.admit(&acme, T0, &p).unwrap().failure(T0, &p, BreakerFault::Transient, failure());
        }
        let refused = b.admit(&acme, T0, &p).unwrap_err();
        assert_eq!(refused.retry_in_ms, 30_000);
        assert_eq!(refused.last_failure, Some(failure()));
        assert_eq!(b.view(&acme, T0, &p).state, BreakerState::Open);
        assert!(b.would_admit(&ProviderId::from("other"), T0, &p), "breakers are per provider");
    }

    #[test]
    fn a_dropped_probe_frees_its_slot() {
        let p = RefreshPolicy::default().breaker;
        let b = RefreshBreakers::default();
        let acme = ProviderId::from("acme");
        for _ in 0..3 {
            b.admit(&acme, T0, &p).unwrap().failure(T0, &p, BreakerFault::Connect, failure());
        }
        let later = T0.plus(p.reset_timeout);
        let probe = b.admit(&acme, later, &p).unwrap();
        assert!(b.admit(&acme, later, &p).is_err(), "one probe at a time");
        drop(probe);
        let probe = b.admit(&acme, later, &p).unwrap();
        probe.success(later);
        assert_eq!(b.view(&acme, later, &p).state, BreakerState::Closed);
    }
}
