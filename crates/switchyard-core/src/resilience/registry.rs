//! The health registry: the one owner of all three layers' state.
//!
//! The planner asks [`HealthRegistry::eligible`] about each candidate (O(1): three hash
//! lookups under one short lock, no allocation), the attempt loop takes an [`Attempt`] from
//! [`HealthRegistry::admit`] and settles it with [`Attempt::finish`]. Every change of an entry
//! is published as a [`HealthEvent`] while the lock is held, so consumers see changes in the
//! order they happened.
//!
//! Memory is bounded: an entry that returns to its pristine state is dropped at once; a bounded
//! sweep, run a few entries at a time whenever an entry is created, forgets entries that are
//! healthy and idle; and past `max_entries` healthy entries are evicted, or (when every entry is
//! benched) the new failure goes untracked, failing open rather than growing without bound.

mod attempt;
mod layer;
mod probe;
mod reset;
mod snapshot;
mod state;
mod table;
mod team;

pub use self::attempt::{Attempt, Held};
pub use self::probe::RecoveryProbe;
pub use self::reset::{ResetCounts, ResetScope};
pub use self::snapshot::{BreakerView, CredentialView, HealthSnapshot, LockoutView};

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use indexmap::IndexMap;
use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;
use tokio::sync::broadcast;

use self::layer::CredRef;
use self::state::{State, release};
use self::table::Publisher;
use self::team::{breaker_change, told_to_team};
use super::breaker::{Admission, ProbeId};
use super::first_event::FirstEventSketch;
use super::lockout::LockReason;
use super::recovery::{ProbeScope, ProbeTrack, SUSPECT_AFTER};
use super::team::{BreakerChange, CredentialChange, LockoutChange, TeamLink, TeamTarget};
use super::{
    Breaker, BreakerState, CredentialCooldown, CredentialKind, CredentialStatus, HealthEvent,
    ModelLockout, SkipReason,
};
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, ModelId, ProviderId};
use crate::outcome::{ClassifyPolicy, OutcomeKind, Verdict};
use crate::settings::{BreakerPolicy, CooldownPolicy, LockoutPolicy};

type FxIndexMap<K, V> = IndexMap<K, V, FxBuildHasher>;

/// Bounds on what the registry keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryLimits {
    /// Tracked entries across all three layers.
    pub max_entries: usize,
    /// A healthy entry untouched this long is forgotten by the sweep.
    pub idle_ttl: Duration,
    /// Entries the sweep visits per created entry.
    pub sweep_budget: usize,
    /// Capacity of the event channel; a consumer that falls further behind must resync.
    pub event_capacity: usize,
}

impl Default for RegistryLimits {
    fn default() -> Self {
        Self {
            max_entries: 100_000,
            idle_ttl: Duration::from_secs(3600),
            sweep_budget: 16,
            event_capacity: 4096,
        }
    }
}

/// The one owner of breaker, cooldown and lockout state.
pub struct HealthRegistry {
    state: Mutex<State>,
    events: Publisher,
    next_probe: AtomicU64,
    limits: RegistryLimits,
    /// Recent time to first real event per `provider/model`: not health state (never
    /// persisted, no events), kept here beside it because the attempt loop that feeds it and
    /// the hedge and usage statistics that read it all hold the registry. Its own lock, so
    /// recording a sample never waits for the layers'.
    first_events: Mutex<rustc_hash::FxHashMap<(ProviderId, ModelId), FirstEventSketch>>,
    /// In a team, where this instance's changes go. Set once, at start.
    team: OnceLock<TeamLink>,
}

impl std::fmt::Debug for HealthRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthRegistry")
            .field("entries", &self.len())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Default for HealthRegistry {
    fn default() -> Self {
        Self::new(RegistryLimits::default())
    }
}

impl HealthRegistry {
    pub fn new(limits: RegistryLimits) -> Self {
        let (tx, _) = broadcast::channel(limits.event_capacity.max(1));
        Self {
            state: Mutex::new(State::new(limits.idle_ttl)),
            events: Publisher(tx),
            next_probe: AtomicU64::new(1),
            limits,
            first_events: Mutex::default(),
            team: OnceLock::new(),
        }
    }

    /// Every state change from now on, in order. A receiver that lags past the channel's
    /// capacity gets `Lagged` and should resync from [`Self::records`].
    pub fn subscribe(&self) -> broadcast::Receiver<HealthEvent> {
        self.events.0.subscribe()
    }

    /// Publishes an event that is not one of the layers' state (a budget crossing) on the
    /// same stream, so every consumer of state changes hears of it too.
    pub fn announce(&self, event: HealthEvent) {
        self.events.send(event);
    }

    pub fn limits(&self) -> RegistryLimits {
        self.limits
    }

    /// Tracked entries across all layers.
    pub fn len(&self) -> usize {
        self.state.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // -- policies -------------------------------------------------------------------------

    pub fn set_default_breaker_policy(&self, policy: BreakerPolicy) {
        self.state.lock().policies.default_breaker = policy;
    }

    pub fn set_breaker_policy(&self, provider: ProviderId, policy: BreakerPolicy) {
        self.state.lock().policies.breakers.insert(provider, policy);
    }

    pub fn set_cooldown_policy(&self, policy: CooldownPolicy) {
        self.state.lock().policies.cooldown = policy;
    }

    pub fn set_lockout_policy(&self, policy: LockoutPolicy) {
        self.state.lock().policies.lockout = policy;
    }

    pub fn lockout_policy(&self) -> LockoutPolicy {
        self.state.lock().policies.lockout.clone()
    }

    /// The breaker policy `provider` runs on.
    pub fn breaker_policy(&self, provider: &ProviderId) -> BreakerPolicy {
        self.state.lock().policies.breaker(provider).clone()
    }

    pub fn cooldown_policy(&self) -> CooldownPolicy {
        self.state.lock().policies.cooldown.clone()
    }

    /// Whether `key` is an API key or an OAuth token, as configured.
    pub fn credential_kind(&self, key: &CredentialKey) -> CredentialKind {
        let st = self.state.lock();
        st.policies.credential_kinds.get(key).copied().unwrap_or_default()
    }

    /// What the classifier needs from the live lockout settings.
    pub fn classify_policy(&self) -> ClassifyPolicy {
        self.state.lock().policies.lockout.classify_policy()
    }

    pub fn set_credential_kind(&self, key: CredentialKey, kind: CredentialKind) {
        self.state.lock().policies.credential_kinds.insert(key, kind);
    }

    // -- time to first event --------------------------------------------------------------

    /// Records that `provider/model` took `took` to a stream's first real event, at `now`.
    pub fn observe_first_event(
        &self,
        provider: &ProviderId,
        model: &ModelId,
        took: Duration,
        now: UnixMillis,
    ) {
        let mut sketches = self.first_events.lock();
        let key = (provider.clone(), model.clone());
        sketches.entry(key).or_default().observe(took, now);
    }

    /// A copy of `provider/model`'s recent times to first real event, if any were seen.
    pub fn first_event_sketch(
        &self,
        provider: &ProviderId,
        model: &ModelId,
    ) -> Option<FirstEventSketch> {
        self.first_events.lock().get(&(provider.clone(), model.clone())).cloned()
    }

    /// `provider`'s recent times to first real event, every model's together, as of `now`;
    /// `None` when none were seen.
    pub fn first_events_of(
        &self,
        provider: &ProviderId,
        now: UnixMillis,
    ) -> Option<FirstEventSketch> {
        let sketches = self.first_events.lock();
        let mut of = sketches.iter().filter(|((p, _), _)| p == provider).map(|(_, s)| s);
        let mut merged = of.next()?.clone();
        for sketch in of {
            merged.merge(sketch, now);
        }
        Some(merged)
    }

    // -- the request path -----------------------------------------------------------------

    /// May `key` be tried at `now`? Checks the layers outermost first and names the first one
    /// that says no. Performs (and publishes) lazy transitions, claims nothing.
    pub fn eligible(&self, key: &CandidateKey, now: UnixMillis) -> Result<(), SkipReason> {
        self.state.lock().check(key, now, &self.events)
    }

    /// Whether the planner ranks `provider` after the others at `now`: its breaker is degraded,
    /// or its failures have decayed below that while its last recovery probe failed.
    pub fn ranks_last(&self, provider: &ProviderId, now: UnixMillis) -> bool {
        self.state.lock().ranks_last(provider, now, &self.events)
    }

    /// What `auto` scores a provider's health on: its breaker's state at `now`, as
    /// `routing::auto` reads it (an open breaker's targets are benched before scoring).
    pub fn auto_health(
        &self,
        provider: &ProviderId,
        now: UnixMillis,
    ) -> crate::routing::auto::Health {
        use crate::routing::auto::Health;
        let mut st = self.state.lock();
        let State { policies, breakers, .. } = &mut *st;
        let policy = policies.breaker(provider);
        let threshold = policy.failure_threshold;
        match breakers.get(provider, now, policy, &self.events) {
            None => Health::Closed { failures: 0, threshold },
            Some(b) => match b.state(policy) {
                BreakerState::Closed => Health::Closed { failures: b.failures(), threshold },
                BreakerState::Degraded => Health::Degraded,
                BreakerState::HalfOpen | BreakerState::Open => Health::HalfOpen,
            },
        }
    }

    /// The provider's breaker state at `now`.
    pub fn breaker_state(&self, provider: &ProviderId, now: UnixMillis) -> BreakerState {
        let mut st = self.state.lock();
        let State { policies, breakers, .. } = &mut *st;
        let policy = policies.breaker(provider);
        breakers
            .get(provider, now, policy, &self.events)
            .map_or(BreakerState::Closed, |b| b.state(policy))
    }

    /// Lets one attempt at `key` through, claiming a half-open probe slot if the breaker is
    /// half-open, for at most `probe_timeout`: for a caller that knows no deadline of its own
    /// (tools, tests). The attempt loop names its attempt's with [`Self::admit_until`].
    pub fn admit(
        self: &Arc<Self>,
        key: &CandidateKey,
        now: UnixMillis,
    ) -> Result<Attempt, SkipReason> {
        let permit = self.breaker_policy(&key.provider).probe_timeout;
        self.admit_until(key, now, now.plus(permit))
    }

    /// Lets one attempt at `key` through, claiming a half-open probe slot if the breaker is
    /// half-open. The slot is held until `deadline` at the latest: as long as the request the
    /// attempt rides on may take (a stream's first real event deadline, a non-streamed answer's
    /// `non_stream_ms`), so a slow answer's success still closes the breaker (RESILIENCE.md
    /// §3). The returned [`Attempt`] must be settled with [`Attempt::finish`]; dropping it
    /// instead releases the probe slot (client gone, task cancelled, panic).
    pub fn admit_until(
        self: &Arc<Self>,
        key: &CandidateKey,
        now: UnixMillis,
        deadline: UnixMillis,
    ) -> Result<Attempt, SkipReason> {
        let probe = self.state.lock().admit(key, now, deadline, &self.events, &self.next_probe)?;
        Ok(Attempt::admitted(self, key, probe, (now, deadline), false))
    }

    /// Records `verdict` on all three layers. `leased`: the probe holds the team's lease, so
    /// its result is the team's too (a probe admitted while the team was unreachable settles
    /// this instance only).
    /// `recovery`: the attempt is a recovery probe of the proxy's own, whose failure never adds
    /// to a breaker's count (see [`super::recovery`]).
    fn settle(
        &self,
        key: &CandidateKey,
        (probe, leased, recovery): (Option<ProbeId>, bool, bool),
        verdict: &Verdict,
        now: UnixMillis,
    ) {
        let admission = probe.map_or(Admission::Normal, Admission::Probe);
        let sharing = self.team.get().is_some();
        let mut shared = Vec::new();
        let out = &self.events;
        let mut st = self.state.lock();
        // Lazy transitions first, on all three layers, exactly as a look would.
        let _ = st.check(key, now, out);
        if verdict.kind == OutcomeKind::Aborted {
            release(&mut st, key, probe);
            drop(st);
            if leased {
                self.share(vec![breaker_change(key, BreakerChange::Release)], now);
            }
            return;
        }
        let charges = verdict.charges;
        let creates = charges.provider.is_some() || charges.credential.is_some() || charges.model;
        let room = !creates || st.make_room(now, &self.limits, out);
        let State { policies, breakers, credentials, lockouts, probes, .. } = &mut *st;

        // Layer 1. The provider answered for itself unless the verdict blames it.
        suspicion(probes, &key.provider, charges.provider.is_some(), recovery);
        let policy = policies.breaker(&key.provider);
        // A recovery probe's failure only holds the count, unless it is the half-open probe.
        let held = recovery && probe.is_none();
        let changed = match charges.provider {
            Some(_) if held => {
                breakers.update(&key.provider, now, policy, out, no_create(), |b| b.hold(now))
            }
            Some(fault) => breakers.update(
                &key.provider,
                now,
                policy,
                out,
                room.then_some(|| (key.provider.clone(), Breaker::new(now))),
                |b| b.on_failure(now, policy, fault, admission),
            ),
            None => breakers.update(&key.provider, now, policy, out, no_create(), |b| {
                b.on_success(now, admission)
            }),
        };
        let change = match charges.provider {
            Some(_) if held => None,
            fault => told_to_team(fault, (probe.is_some(), leased), changed),
        };
        shared.extend(change.filter(|_| sharing).map(|c| breaker_change(key, c)));

        // Layer 2.
        let cred = CredRef::from(key);
        let kind = policies.kind(cred);
        let cooldown = &policies.cooldown;
        let change = if let Some(fault) = charges.credential {
            credentials.update(
                &cred,
                now,
                cooldown,
                out,
                room.then_some(|| (key.credential_key(), CredentialCooldown::new(now))),
                |c| c.on_failure(now, cooldown, kind, fault, verdict.retry_after),
            );
            Some(CredentialChange::Failure { fault, hint: verdict.retry_after })
        } else if verdict.kind == OutcomeKind::Success {
            credentials
                .update(&cred, now, cooldown, out, no_create(), |c| c.on_success(now))
                .then_some(CredentialChange::Success)
        } else {
            None
        };
        shared.extend(
            change
                .filter(|_| sharing)
                .map(|change| TeamTarget::Credential { key: key.credential_key(), change }),
        );

        // Layer 3.
        let lockout = &policies.lockout;
        let change = if charges.model {
            let reason = LockReason { kind: verdict.kind, status: verdict.status };
            let at_once = verdict.benched_by_retry_after();
            lockouts.update(
                key,
                now,
                lockout,
                out,
                room.then_some(|| (key.clone(), ModelLockout::new(now))),
                |l| l.on_failure(now, lockout, reason, verdict.retry_after, at_once),
            );
            Some(LockoutChange::Failure { reason, hint: verdict.retry_after, at_once })
        } else if verdict.kind == OutcomeKind::Success {
            lockouts
                .update(key, now, lockout, out, no_create(), |l| l.on_success(now))
                .then_some(LockoutChange::Success)
        } else {
            None
        };
        shared.extend(
            change
                .filter(|_| sharing)
                .map(|change| TeamTarget::Lockout { key: key.clone(), change }),
        );

        // Whatever happened, a probe slot never outlives its attempt.
        release(&mut st, key, probe);
        drop(st);
        self.share(shared, now);
    }

    fn release(&self, key: &CandidateKey, probe: ProbeId, leased: bool, now: UnixMillis) {
        release(&mut self.state.lock(), key, Some(probe));
        if leased {
            self.share(vec![breaker_change(key, BreakerChange::Release)], now);
        }
    }

    // -- maintenance and control ----------------------------------------------------------

    /// Forgets up to `budget` healthy entries idle for `limits.idle_ttl`. Returns how many
    /// entries it visited. The registry sweeps a little on its own whenever it tracks a new
    /// entry; call this for a deliberate pass.
    pub fn sweep(&self, now: UnixMillis, budget: usize) -> usize {
        self.state.lock().sweep(now, self.limits.idle_ttl, budget, &self.events)
    }

    /// Sets a credential status owned by another component (the OAuth refresher).
    pub fn set_credential_status(
        &self,
        key: &CredentialKey,
        status: CredentialStatus,
        now: UnixMillis,
    ) {
        let mut st = self.state.lock();
        let room = st.make_room(now, &self.limits, &self.events);
        let State { policies, credentials, .. } = &mut *st;
        credentials.update(
            key,
            now,
            &policies.cooldown,
            &self.events,
            room.then_some(|| (key.clone(), CredentialCooldown::new(now))),
            |c| c.set_status(now, status),
        );
    }

    /// The credentials whose status is `status` right now (after lazy expiry), for the
    /// component that owns that status: the OAuth manager looks for `expired` credentials it
    /// did not bench itself (restored from the state file after a restart).
    pub fn credentials_with_status(
        &self,
        status: CredentialStatus,
        now: UnixMillis,
    ) -> Vec<CredentialKey> {
        let mut st = self.state.lock();
        let State { policies, credentials, .. } = &mut *st;
        let keys: Vec<CredentialKey> = credentials.map.keys().cloned().collect();
        keys.into_iter()
            .filter(|k| {
                credentials
                    .get(k, now, &policies.cooldown, &self.events)
                    .is_some_and(|c| c.status() == status)
            })
            .collect()
    }
}

/// The provider's probe track, if it was ever probed.
fn provider_track<'t>(
    probes: &'t mut FxIndexMap<ProbeScope, ProbeTrack>,
    provider: &ProviderId,
) -> Option<&'t mut ProbeTrack> {
    probes.get_mut(&ProbeScope::Provider { provider: provider.clone() })
}

/// Keeps a provider's suspicion (see [`ProbeTrack::suspect`]): any answer that does not blame
/// it lifts it; users' failures in a row raise it (see [`SUSPECT_AFTER`]); a recovery probe's
/// failure is the proxy's, not a user's, and is judged with the probe.
fn suspicion(
    probes: &mut FxIndexMap<ProbeScope, ProbeTrack>,
    provider: &ProviderId,
    blamed: bool,
    recovery: bool,
) {
    if !blamed {
        if let Some(track) = provider_track(probes, provider) {
            track.suspect = false;
            track.failed_in_a_row = 0;
        }
    } else if !recovery {
        let track = probes.entry(ProbeScope::Provider { provider: provider.clone() }).or_default();
        track.failed_in_a_row = track.failed_in_a_row.saturating_add(1);
        track.suspect |= track.failed_in_a_row >= SUSPECT_AFTER;
    }
}

/// `Table::update`'s "do not create" marker, with a concrete closure type.
fn no_create<K, E>() -> Option<fn() -> (K, E)> {
    None
}
