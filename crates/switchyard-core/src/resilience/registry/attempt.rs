//! One admitted attempt: settled with its verdict, or released when dropped.

use std::sync::Arc;

use super::HealthRegistry;
use crate::clock::{UnixMillis, millis};
use crate::ids::CandidateKey;
use crate::outcome::{OutcomeKind, Verdict};
use crate::resilience::SkipReason;
use crate::resilience::breaker::ProbeId;
use crate::resilience::team::link::{LeaseAnswer, LeaseScope};

/// One admitted attempt. Settle it with [`Attempt::finish`]; dropping it unsettled (client
/// abort, cancellation, panic) releases its probe slot, so a half-open breaker never waits for
/// a result that cannot come.
#[derive(Debug)]
pub struct Attempt {
    pub(super) registry: Arc<HealthRegistry>,
    pub(super) key: CandidateKey,
    pub(super) probe: Option<ProbeId>,
    /// The probe holds the team's lease (see [`Attempt::lease`]).
    pub(super) leased: bool,
    /// When it was admitted: a lease it holds is released as of then if it is dropped.
    pub(super) admitted: UnixMillis,
    /// The latest it may settle by: a team lease it asks for lasts until then.
    pub(super) deadline: UnixMillis,
    /// Its success was recorded already, at the stream's first real event.
    pub(super) answered: bool,
    /// A recovery probe of the proxy's own (see [`HealthRegistry::start_probe`]).
    pub(super) recovery: bool,
    /// What the caller keeps for as long as the attempt runs (a concurrency slot): let go
    /// when the attempt is settled or dropped, so a stream holds it to its end.
    pub(super) held: Option<Box<dyn Held>>,
}

impl Attempt {
    /// A new attempt at `key`, admitted at `now`, to settle by `deadline`; `recovery` for a
    /// recovery probe of the proxy's own.
    pub(super) fn admitted(
        registry: &Arc<HealthRegistry>,
        key: &CandidateKey,
        probe: Option<ProbeId>,
        (now, deadline): (UnixMillis, UnixMillis),
        recovery: bool,
    ) -> Self {
        Self {
            registry: Arc::clone(registry),
            key: key.clone(),
            probe,
            leased: false,
            admitted: now,
            deadline,
            answered: false,
            recovery,
            held: None,
        }
    }
}

/// A resource an [`Attempt`] keeps for its caller while it runs (the app's concurrency
/// slot), released when the attempt ends: releasing it is dropping it, and the attempt drops
/// it when it is settled or dropped, so a stream holds it to its last byte. The registry only
/// owns it. A type says it is such a resource with an empty `impl`, so an attempt never keeps
/// something by accident.
pub trait Held: std::fmt::Debug + Send + Sync {}

impl Attempt {
    /// Keeps `held` until this attempt is settled or dropped.
    pub fn hold(&mut self, held: impl Held + 'static) {
        self.held = Some(Box::new(held));
    }

    pub fn key(&self) -> &CandidateKey {
        &self.key
    }

    /// Whether this attempt is the breaker's half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }

    /// In a team, a half-open probe goes out only under the team's lease, so one
    /// probe is in flight across every instance. Waits for the lease at most the wait derived
    /// from the measured round trip to the database
    /// ([`TeamLink::lease_wait`](crate::resilience::team::TeamLink::lease_wait)); `Err`
    /// (another instance probes, or no answer in time) means: drop this attempt and try the
    /// next candidate. Any other attempt, an instance without a team, or a team whose database is
    /// unreachable goes ahead at once. The lease lasts as long as the attempt may (its
    /// deadline), and at most the breaker's `probe_timeout`, which is how long every other
    /// instance honours it.
    pub async fn lease(&mut self, now: UnixMillis) -> Result<(), SkipReason> {
        let Some(team) = self.registry.team.get() else { return Ok(()) };
        if self.probe.is_none() || self.leased {
            return Ok(());
        }
        let policy = self.registry.breaker_policy(&self.key.provider);
        let lasts = self.deadline.since(now).min(policy.probe_timeout);
        let scope = LeaseScope::HalfOpen(self.key.provider.clone());
        match team.lease(scope, now, lasts).await {
            LeaseAnswer::Granted => {
                self.leased = true;
                Ok(())
            }
            LeaseAnswer::Unavailable => Ok(()),
            LeaseAnswer::Refused => {
                Err(SkipReason::BreakerProbing { retry_in_ms: millis(policy.probe_timeout) })
            }
        }
    }

    /// The upstream answers again: a stream's first real event arrived, and `success` is that
    /// answer's verdict. A half-open probe settles now (RESILIENCE.md §7), so a provider whose
    /// streams outlast `probe_timeout_ms` can close its breaker; the attempt stays open for the
    /// rest of the stream, and a later break is charged by [`Attempt::finish`] as usual.
    pub fn answered(&mut self, success: &Verdict, now: UnixMillis) {
        if let Some(probe) = self.probe.take() {
            self.registry.settle(
                &self.key,
                (Some(probe), self.leased, self.recovery),
                success,
                now,
            );
            self.answered = true;
        }
    }

    /// Records the attempt's verdict on all three layers (a success already recorded by
    /// [`Attempt::answered`] is not counted twice).
    pub fn finish(mut self, verdict: &Verdict, now: UnixMillis) {
        if self.answered && verdict.kind == OutcomeKind::Success {
            return;
        }
        let probe = self.probe.take();
        self.registry.settle(&self.key, (probe, self.leased, self.recovery), verdict, now);
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if let Some(probe) = self.probe.take() {
            self.registry.release(&self.key, probe, self.leased, self.admitted);
        }
    }
}
