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

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use indexmap::{Equivalent, IndexMap};
use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::breaker::{Admission, LeaseHolder, ProbeId};
use super::event::HealthRecords;
use super::first_event::FirstEventSketch;
use super::lockout::LockReason;
use super::recovery::{
    Bench, ProbeRefused, ProbeResult, ProbeScope, ProbeTrack, ProbeView, SUSPECT_AFTER,
};
use super::team::link::{LeaseAnswer, LeaseScope};
use super::team::{
    BreakerChange, CredentialChange, LockoutChange, SharedBreaker, SharedCredential, SharedLockout,
    TeamLink, TeamOp, TeamTarget,
};
use super::{
    Breaker, BreakerRecord, BreakerState, Changed, CredentialCooldown, CredentialKind,
    CredentialRecord, CredentialStatus, HealthEvent, LockoutRecord, ModelLockout, SkipReason,
};
use crate::clock::{UnixMillis, millis};
use crate::ids::{CandidateKey, CredentialId, CredentialKey, InstanceId, ModelId, ProviderId};
use crate::outcome::{BreakerFault, ClassifyPolicy, OutcomeKind, Verdict};
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

/// The policies every layer runs on; all can be replaced live.
#[derive(Clone, Debug, Default)]
struct Policies {
    default_breaker: BreakerPolicy,
    breakers: FxIndexMap<ProviderId, BreakerPolicy>,
    cooldown: CooldownPolicy,
    credential_kinds: FxIndexMap<CredentialKey, CredentialKind>,
    lockout: LockoutPolicy,
}

impl Policies {
    fn breaker(&self, provider: &ProviderId) -> &BreakerPolicy {
        self.breakers.get(provider).unwrap_or(&self.default_breaker)
    }

    fn kind(&self, key: CredRef<'_>) -> CredentialKind {
        self.credential_kinds.get(&key).copied().unwrap_or_default()
    }
}

/// A credential key made of borrowed parts, so the hot path looks up credentials without
/// cloning ids. Hashes exactly like [`CredentialKey`] (fields in the same order).
#[derive(Clone, Copy, Hash)]
struct CredRef<'a> {
    provider: &'a ProviderId,
    credential: &'a CredentialId,
}

impl Equivalent<CredentialKey> for CredRef<'_> {
    fn equivalent(&self, key: &CredentialKey) -> bool {
        *self.provider == key.provider && *self.credential == key.credential
    }
}

impl<'a> From<&'a CandidateKey> for CredRef<'a> {
    fn from(k: &'a CandidateKey) -> Self {
        Self { provider: &k.provider, credential: &k.credential }
    }
}

/// What one layer's table needs to know about its entries.
trait Layer {
    type Key: Hash + Eq + Clone;
    type Entry;
    type Policy;
    type Record;

    /// What an entry shows the world, as opposed to its counters: a change of it is a
    /// transition, which is published; a change of a counter alone (a failure below a
    /// threshold, a success that lowers a count) is not, so persistence writes on transitions
    /// only (RESILIENCE.md §6). The counters travel with the next transition's full record.
    type Phase: PartialEq;

    fn refresh(entry: &mut Self::Entry, now: UnixMillis, policy: &Self::Policy) -> Changed;
    fn phase(entry: &Self::Entry, policy: &Self::Policy) -> Self::Phase;
    fn is_pristine(entry: &Self::Entry) -> bool;
    /// Eligible right now: such an entry may be forgotten when idle or when room is needed.
    fn is_healthy(entry: &Self::Entry, now: UnixMillis, policy: &Self::Policy) -> bool;
    fn changed_at(entry: &Self::Entry) -> UnixMillis;
    fn record(entry: &Self::Entry, policy: &Self::Policy) -> Self::Record;
    fn event(key: &Self::Key, record: Option<Self::Record>, at: UnixMillis) -> HealthEvent;

    /// What a team shares of an entry (issue 20), in this instance's time.
    type Shared;
    /// This layer's table, and the policy `key` runs on.
    fn part<'s>(st: &'s mut State, key: &Self::Key) -> (&'s mut Table<Self>, &'s Self::Policy)
    where
        Self: Sized;
    /// A shared entry within this instance's bounds (see [`super::team::trust`]).
    fn trust(
        shared: &Self::Shared,
        me: &InstanceId,
        now: UnixMillis,
        policy: &Self::Policy,
    ) -> Self::Shared;
    /// The entry a shared one stands for here; `previous` is what was here (a breaker keeps
    /// its own probes while it holds the team's lease).
    fn adopt(
        shared: &Self::Shared,
        now: UnixMillis,
        policy: &Self::Policy,
        previous: Option<&Self::Entry>,
        lease: LeaseHolder,
    ) -> Self::Entry;
}

struct Breakers;
struct Credentials;
struct Lockouts;

impl Layer for Breakers {
    type Key = ProviderId;
    type Entry = Breaker;
    type Policy = BreakerPolicy;
    type Record = BreakerRecord;
    /// The state and, while open, when it may half-open.
    type Phase = (BreakerState, Option<UnixMillis>);

    fn refresh(e: &mut Breaker, now: UnixMillis, p: &BreakerPolicy) -> Changed {
        e.refresh(now, p)
    }
    fn phase(e: &Breaker, p: &BreakerPolicy) -> Self::Phase {
        let r = e.record(p);
        (r.state, r.open_until)
    }
    fn is_pristine(e: &Breaker) -> bool {
        e.is_pristine()
    }
    fn is_healthy(e: &Breaker, _: UnixMillis, p: &BreakerPolicy) -> bool {
        matches!(e.state(p), BreakerState::Closed | BreakerState::Degraded)
    }
    fn changed_at(e: &Breaker) -> UnixMillis {
        e.changed_at()
    }
    fn record(e: &Breaker, p: &BreakerPolicy) -> BreakerRecord {
        e.record(p)
    }
    fn event(provider: &ProviderId, record: Option<BreakerRecord>, at: UnixMillis) -> HealthEvent {
        HealthEvent::Breaker { provider: provider.clone(), record, at }
    }

    type Shared = SharedBreaker;
    fn part<'s>(st: &'s mut State, key: &ProviderId) -> (&'s mut Table<Self>, &'s BreakerPolicy) {
        let State { policies, breakers, .. } = st;
        (breakers, policies.breaker(key))
    }
    fn trust(
        s: &SharedBreaker,
        me: &InstanceId,
        now: UnixMillis,
        p: &BreakerPolicy,
    ) -> SharedBreaker {
        super::team::trust::breaker(s, me, now, p)
    }
    fn adopt(
        shared: &SharedBreaker,
        now: UnixMillis,
        policy: &BreakerPolicy,
        previous: Option<&Breaker>,
        lease: LeaseHolder,
    ) -> Breaker {
        // Another's lease as this instance honours it (`shared` went through `trust`).
        let lease = match (lease, &shared.lease) {
            (LeaseHolder::Other { .. }, Some(l)) => LeaseHolder::Other { until: l.until },
            (LeaseHolder::Other { .. }, None) => LeaseHolder::Nobody,
            (held, _) => held,
        };
        Breaker::adopt(&shared.record, now, policy, lease, previous)
    }
}

impl Layer for Credentials {
    type Key = CredentialKey;
    type Entry = CredentialCooldown;
    type Policy = CooldownPolicy;
    type Record = CredentialRecord;
    /// The status and until when it lasts. A success that only decays `backoff_level` is not a
    /// transition.
    type Phase = (CredentialStatus, Option<UnixMillis>);

    fn refresh(e: &mut CredentialCooldown, now: UnixMillis, p: &CooldownPolicy) -> Changed {
        e.refresh(now, p)
    }
    fn phase(e: &CredentialCooldown, _: &CooldownPolicy) -> Self::Phase {
        let r = e.record();
        (r.status, r.cooling_until)
    }
    fn is_pristine(e: &CredentialCooldown) -> bool {
        e.is_pristine()
    }
    fn is_healthy(e: &CredentialCooldown, now: UnixMillis, _: &CooldownPolicy) -> bool {
        e.check(now).is_ok()
    }
    fn changed_at(e: &CredentialCooldown) -> UnixMillis {
        e.changed_at()
    }
    fn record(e: &CredentialCooldown, _: &CooldownPolicy) -> CredentialRecord {
        e.record()
    }
    fn event(key: &CredentialKey, record: Option<CredentialRecord>, at: UnixMillis) -> HealthEvent {
        HealthEvent::Credential { key: key.clone(), record, at }
    }

    type Shared = SharedCredential;
    fn part<'s>(st: &'s mut State, _: &CredentialKey) -> (&'s mut Table<Self>, &'s CooldownPolicy) {
        (&mut st.credentials, &st.policies.cooldown)
    }
    fn trust(
        s: &SharedCredential,
        _: &InstanceId,
        now: UnixMillis,
        p: &CooldownPolicy,
    ) -> SharedCredential {
        super::team::trust::credential(s, now, p)
    }
    fn adopt(
        shared: &SharedCredential,
        now: UnixMillis,
        policy: &CooldownPolicy,
        _: Option<&CredentialCooldown>,
        _: LeaseHolder,
    ) -> CredentialCooldown {
        CredentialCooldown::restore(shared, now, policy)
    }
}

impl Layer for Lockouts {
    type Key = CandidateKey;
    type Entry = ModelLockout;
    type Policy = LockoutPolicy;
    type Record = LockoutRecord;
    /// Until when the model is locked; the consecutive-failure count is a counter.
    type Phase = Option<UnixMillis>;

    fn refresh(e: &mut ModelLockout, now: UnixMillis, p: &LockoutPolicy) -> Changed {
        e.refresh(now, p)
    }
    fn phase(e: &ModelLockout, _: &LockoutPolicy) -> Self::Phase {
        e.locked_until
    }
    fn is_pristine(e: &ModelLockout) -> bool {
        e.is_pristine()
    }
    fn is_healthy(e: &ModelLockout, now: UnixMillis, _: &LockoutPolicy) -> bool {
        !e.is_locked(now)
    }
    fn changed_at(e: &ModelLockout) -> UnixMillis {
        e.changed_at
    }
    fn record(e: &ModelLockout, _: &LockoutPolicy) -> LockoutRecord {
        e.clone()
    }
    fn event(key: &CandidateKey, record: Option<LockoutRecord>, at: UnixMillis) -> HealthEvent {
        HealthEvent::Lockout { key: key.clone(), record, at }
    }

    type Shared = SharedLockout;
    fn part<'s>(st: &'s mut State, _: &CandidateKey) -> (&'s mut Table<Self>, &'s LockoutPolicy) {
        (&mut st.lockouts, &st.policies.lockout)
    }
    fn trust(
        s: &SharedLockout,
        _: &InstanceId,
        now: UnixMillis,
        p: &LockoutPolicy,
    ) -> SharedLockout {
        super::team::trust::lockout(s, now, p)
    }
    fn adopt(
        shared: &SharedLockout,
        now: UnixMillis,
        policy: &LockoutPolicy,
        _: Option<&ModelLockout>,
        _: LeaseHolder,
    ) -> ModelLockout {
        ModelLockout::restore(shared, now, policy)
    }
}

/// Publishes events; sending never blocks and works with no subscriber.
#[derive(Debug)]
struct Publisher(broadcast::Sender<HealthEvent>);

impl Publisher {
    fn send(&self, event: HealthEvent) {
        // An error only means nobody is listening right now, which is fine.
        let _ = self.0.send(event);
    }
}

struct Table<L: Layer> {
    map: FxIndexMap<L::Key, L::Entry>,
    /// Where the next sweep starts.
    cursor: usize,
    /// A healthy entry unchanged this long is forgotten, on the next look or sweep.
    idle: Duration,
    /// In a team (issue 20): which instance recorded an entry that came from the team. An
    /// entry changed here since has none until the team's answer names the recorder again.
    origins: FxIndexMap<L::Key, InstanceId>,
    /// In a team (issue 31): the sequence number of the last change of each entry sent to the
    /// team and not yet seen in a team entry. A team entry that does not include it is older
    /// than this instance's state, and does not replace it. Kept when the entry itself goes (a
    /// reset's clear is such a change).
    sent: FxIndexMap<L::Key, u64>,
}

impl<L: Layer> Table<L> {
    fn new(idle: Duration) -> Self {
        Self {
            map: FxIndexMap::default(),
            cursor: 0,
            idle,
            origins: FxIndexMap::default(),
            sent: FxIndexMap::default(),
        }
    }

    /// Removes the entry at `index`, and what is known of its origin.
    fn take(&mut self, index: usize) -> (L::Key, L::Entry) {
        let (k, e) = self.map.swap_remove_index(index).expect("index is live");
        self.origins.swap_remove(&k);
        (k, e)
    }

    fn publish(&self, index: usize, policy: &L::Policy, now: UnixMillis, out: &Publisher) {
        let (k, e) = self.map.get_index(index).expect("index is live");
        out.send(L::event(k, Some(L::record(e, policy)), now));
    }

    /// Publishes a transition of the entry at `index`, dropping it if it became pristine (an
    /// entry that got there by counter ticks alone is dropped silently: it was never published
    /// in that state, and a row left behind in the store is forgotten as idle after a restart).
    /// Returns whether the entry is still there.
    fn settle(
        &mut self,
        index: usize,
        changed: bool,
        policy: &L::Policy,
        now: UnixMillis,
        out: &Publisher,
    ) -> bool {
        let (_, entry) = self.map.get_index(index).expect("index is live");
        if L::is_pristine(entry) {
            let (k, _) = self.take(index);
            if changed {
                out.send(L::event(&k, None, now));
            }
            return false;
        }
        if changed {
            self.publish(index, policy, now, out);
        }
        true
    }

    /// The entry for `key` at `now` (after its lazy transitions, which are published).
    fn get<Q>(
        &mut self,
        key: &Q,
        now: UnixMillis,
        policy: &L::Policy,
        out: &Publisher,
    ) -> Option<&mut L::Entry>
    where
        Q: ?Sized + Hash + Equivalent<L::Key>,
    {
        let (index, _, entry) = self.map.get_full_mut(key)?;
        let changed = L::refresh(entry, now, policy).is_yes();
        // Forgetting is lazy too: an entry that has been healthy and quiet for `idle` is as
        // good as new. Without this a degraded provider that the planner ranks last (so it
        // sees no successes to leak its failures away) would stay demoted for ever.
        if L::is_healthy(entry, now, policy) && now.since(L::changed_at(entry)) >= self.idle {
            let (k, _) = self.take(index);
            out.send(L::event(&k, None, now));
            return None;
        }
        if !self.settle(index, changed, policy, now, out) {
            return None;
        }
        self.map.get_index_mut(index).map(|(_, e)| e)
    }

    /// Applies `change` to the entry for `key`, or to a fresh one from `create` when the key is
    /// untracked (and `create` is given); publishes the result. Returns whether `change` changed
    /// the entry at all (a counter included).
    fn update<Q>(
        &mut self,
        key: &Q,
        now: UnixMillis,
        policy: &L::Policy,
        out: &Publisher,
        create: Option<impl FnOnce() -> (L::Key, L::Entry)>,
        change: impl FnOnce(&mut L::Entry) -> Changed,
    ) -> bool
    where
        Q: ?Sized + Hash + Equivalent<L::Key>,
    {
        let _ = self.get(key, now, policy, out);
        let index = match (self.map.get_index_of(key), create) {
            (Some(index), _) => index,
            (None, Some(create)) => {
                let (k, fresh) = create();
                self.map.insert_full(k, fresh).0
            }
            (None, None) => return false,
        };
        let (_, entry) = self.map.get_index_mut(index).expect("index is live");
        let before = L::phase(entry, policy);
        let changed = change(entry).is_yes();
        // A counter that moved without the phase moving is kept in memory, not published.
        let transition = changed && L::phase(entry, policy) != before;
        if transition {
            self.origins.swap_remove(key);
        }
        self.settle(index, transition, policy, now, out);
        changed
    }

    /// Applies `change` to the tracked entry for `key` and publishes the result as a transition
    /// whatever its phase: for a probe's verdict, which clears or extends a bench that a reader
    /// must see go (a lapsed lock forgotten, a degraded breaker back to closed). Returns whether
    /// it changed anything.
    fn force<Q>(
        &mut self,
        key: &Q,
        now: UnixMillis,
        policy: &L::Policy,
        out: &Publisher,
        change: impl FnOnce(&mut L::Entry) -> Changed,
    ) -> bool
    where
        Q: ?Sized + Hash + Equivalent<L::Key>,
    {
        let _ = self.get(key, now, policy, out);
        let Some((index, _, entry)) = self.map.get_full_mut(key) else { return false };
        if !change(entry).is_yes() {
            return false;
        }
        self.origins.swap_remove(key);
        self.settle(index, true, policy, now, out);
        true
    }

    /// Replaces the entry for `key` with `entry`, which the team recorded (`origin`), publishing
    /// it if it differs from what was here. A pristine entry removes the key.
    fn put(
        &mut self,
        key: &L::Key,
        entry: L::Entry,
        origin: &InstanceId,
        policy: &L::Policy,
        now: UnixMillis,
        out: &Publisher,
    ) where
        L::Record: PartialEq,
    {
        let record = L::record(&entry, policy);
        if L::is_pristine(&entry) {
            if let Some(index) = self.map.get_index_of(key) {
                let (k, _) = self.take(index);
                out.send(L::event(&k, None, now));
            }
            return;
        }
        let before = self.map.insert(key.clone(), entry);
        self.origins.insert(key.clone(), origin.clone());
        if before.is_none_or(|b| L::record(&b, policy) != record) {
            out.send(L::event(key, Some(record), now));
        }
    }

    /// Removes every entry `pick` selects, publishing each removal. Returns their keys.
    fn remove_where(
        &mut self,
        now: UnixMillis,
        out: &Publisher,
        pick: impl Fn(&L::Key) -> bool,
    ) -> Vec<L::Key> {
        let mut removed = Vec::new();
        self.map.retain(|k, _| {
            let remove = pick(k);
            if remove {
                out.send(L::event(k, None, now));
                removed.push(k.clone());
            }
            !remove
        });
        for k in &removed {
            self.origins.swap_remove(k);
        }
        self.cursor = 0;
        removed
    }

    /// Visits up to `budget` entries from the cursor, forgetting healthy ones unchanged for at
    /// least `idle`. Returns how many it visited.
    fn sweep<'p>(
        &mut self,
        now: UnixMillis,
        idle: Duration,
        budget: usize,
        policy: impl Fn(&L::Key) -> &'p L::Policy,
        out: &Publisher,
    ) -> usize
    where
        L::Policy: 'p,
    {
        // At most one lap: a large budget must not spin on a small table. A whole lap starts at
        // the front, where `swap_remove` only ever pulls unvisited entries into the cursor's
        // place, so every entry is visited exactly once.
        if budget >= self.map.len() {
            self.cursor = 0;
        }
        let budget = budget.min(self.map.len());
        let mut visited = 0;
        while visited < budget && !self.map.is_empty() {
            if self.cursor >= self.map.len() {
                self.cursor = 0;
            }
            visited += 1;
            let (key, entry) = self.map.get_index_mut(self.cursor).expect("cursor is in range");
            let p = policy(key);
            let refreshed = L::refresh(entry, now, p).is_yes();
            let forget = L::is_healthy(entry, now, p) && now.since(L::changed_at(entry)) >= idle;
            if forget || L::is_pristine(entry) {
                let (k, _) = self.take(self.cursor);
                out.send(L::event(&k, None, now));
            } else {
                if refreshed {
                    self.publish(self.cursor, p, now, out);
                }
                self.cursor += 1;
            }
        }
        visited
    }
}

/// Which entries a manual reset clears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum ResetScope {
    All,
    /// The provider's breaker, its credentials' cooldowns and its lockouts.
    Provider {
        provider: ProviderId,
    },
    /// One credential's cooldown and its lockouts.
    Credential {
        provider: ProviderId,
        credential: CredentialId,
    },
    /// One model's lockouts on every credential of the provider.
    Model {
        provider: ProviderId,
        model: ModelId,
    },
    /// One lockout.
    Lockout {
        key: CandidateKey,
    },
}

/// How many entries a reset removed, per layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct ResetCounts {
    pub breakers: usize,
    pub credentials: usize,
    pub lockouts: usize,
}

struct State {
    policies: Policies,
    breakers: Table<Breakers>,
    credentials: Table<Credentials>,
    lockouts: Table<Lockouts>,
    /// Failures not tracked because the registry was full of benched entries.
    untracked: u64,
    /// Recovery probes, by scope: whether one is in flight, when the last was sent and what it
    /// found. One entry per scope ever probed, bounded by the configured candidates.
    probes: FxIndexMap<ProbeScope, ProbeTrack>,
}

impl State {
    fn new(idle: Duration) -> Self {
        Self {
            policies: Policies::default(),
            breakers: Table::new(idle),
            credentials: Table::new(idle),
            lockouts: Table::new(idle),
            untracked: 0,
            probes: FxIndexMap::default(),
        }
    }

    /// Which bench `key` is recovering from, if any (see [`super::recovery`]): eligible, but
    /// not yet shown to work since a layer benched it. Outermost layer first.
    fn recovering(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        out: &Publisher,
    ) -> Option<Bench> {
        self.check(key, now, out).ok()?;
        let ranks_last = self.ranks_last(&key.provider, now, out);
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let policy = policies.breaker(&key.provider);
        if let Some(b) = breakers.map.get(&key.provider) {
            match b.state(policy) {
                BreakerState::HalfOpen => return Some(Bench::BreakerHalfOpen),
                BreakerState::Degraded | BreakerState::Closed if ranks_last => {
                    return Some(Bench::BreakerDegraded);
                }
                BreakerState::Degraded | BreakerState::Closed | BreakerState::Open => {}
            }
        }
        if credentials.map.get(&CredRef::from(key)).is_some_and(CredentialCooldown::is_recovering) {
            return Some(Bench::CredentialCooled);
        }
        if lockouts.map.get(key).is_some_and(|l| l.is_recovering(now, &policies.lockout)) {
            return Some(Bench::ModelLockLapsed);
        }
        None
    }

    /// Whether the planner puts `provider` after the others: its breaker is degraded, or it
    /// still counts failures and its last probe failed (see [`ProbeTrack::suspect`]).
    fn ranks_last(&mut self, provider: &ProviderId, now: UnixMillis, out: &Publisher) -> bool {
        let State { policies, breakers, probes, .. } = self;
        let policy = policies.breaker(provider);
        let Some(b) = breakers.get(provider, now, policy, out) else { return false };
        match b.state(policy) {
            BreakerState::Degraded => true,
            BreakerState::Closed => {
                b.failures() > 0
                    && probes
                        .get(&ProbeScope::Provider { provider: provider.clone() })
                        .is_some_and(|t| t.suspect)
            }
            BreakerState::Open | BreakerState::HalfOpen => false,
        }
    }

    /// Which benches of the proxy's own a recovery probe of `key` would go through at `now`
    /// (see [`super::recovery`]), and the outermost one's [`Bench`]: `None` when nothing
    /// benches `key`, or when a layer benches it that no probe may go through (a first wait, a
    /// wait the upstream stated, a refused key).
    fn passage(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        out: &Publisher,
    ) -> Option<(Bench, Passage)> {
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let policy = policies.breaker(&key.provider);
        let breaker = match breakers.get(&key.provider, now, policy, out) {
            Some(b) if b.check(now, policy).is_err() => b.may_probe_through(policy).then_some(true),
            _ => Some(false),
        };
        let credential = match credentials.get(&CredRef::from(key), now, &policies.cooldown, out) {
            Some(c) if c.check(now).is_err() => c.may_probe_through(now).then_some(true),
            _ => Some(false),
        };
        let lock = match lockouts.get(key, now, &policies.lockout, out) {
            Some(l) if l.check(now).is_err() => l.may_probe_through(now).then_some(true),
            _ => Some(false),
        };
        let passage = Passage { breaker: breaker?, credential: credential?, lock: lock? };
        let bench = if passage.breaker {
            Bench::BreakerOpen
        } else if passage.credential {
            Bench::CredentialCooling
        } else if passage.lock {
            Bench::ModelLocked
        } else {
            return None;
        };
        Some((bench, passage))
    }

    /// Whether a probe of `key` on `bench` may start at `now`: none in flight for it (under any
    /// bench) and its scope not probed within [`super::recovery::PROBE_INTERVAL`].
    fn probe_due(
        &self,
        key: &CandidateKey,
        bench: Bench,
        now: UnixMillis,
    ) -> Result<(), ProbeRefused> {
        let scope = bench.scope(key);
        if self.probes.iter().any(|(s, t)| t.in_flight && (*s == scope || s.covers(key))) {
            return Err(ProbeRefused::InFlight);
        }
        match self.probes.get(&scope) {
            Some(track) if !track.due(now) => Err(ProbeRefused::NotDue),
            _ => Ok(()),
        }
    }

    /// A recovery probe went through `passage`'s waits of the proxy's own: each one passed is
    /// judged by its own layer's rule; a wait the answer states replaces it exactly
    /// (RESILIENCE.md §3). Returns what the team hears: a bench lifted, as cleared (it only ever
    /// holds such a wait as a stated one).
    fn pass_judgement(
        &mut self,
        key: &CandidateKey,
        passage: Passage,
        verdict: &Verdict,
        now: UnixMillis,
        out: &Publisher,
    ) -> Vec<TeamTarget> {
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let mut shared = Vec::new();
        let provider = || key.provider.clone();

        let policy = policies.breaker(&key.provider);
        if passage.breaker
            && Bench::BreakerOpen.healed_by(verdict)
            && breakers.force(&key.provider, now, policy, out, |b| b.close_through(now))
        {
            shared.push(TeamTarget::Breaker { provider: provider(), change: BreakerChange::Clear });
        }
        let cooldown = &policies.cooldown;
        let cred = CredRef::from(key);
        if passage.credential && Bench::CredentialCooling.healed_by(verdict) {
            if credentials.force(&cred, now, cooldown, out, |c| c.heal(now)) {
                let change = CredentialChange::Clear;
                shared.push(TeamTarget::Credential { key: key.credential_key(), change });
            }
        } else if passage.credential
            && let Some(hint) = verdict.retry_after.filter(|_| verdict.charges.credential.is_some())
        {
            credentials.force(&cred, now, cooldown, out, |c| c.restate(now, hint));
        }
        let lockout = &policies.lockout;
        if passage.lock && Bench::ModelLocked.healed_by(verdict) {
            if lockouts.force(key, now, lockout, out, |l| l.heal(now)) {
                shared.push(TeamTarget::Lockout { key: key.clone(), change: LockoutChange::Clear });
            }
        } else if passage.lock
            && let Some(hint) = verdict.retry_after.filter(|_| verdict.charges.model)
        {
            lockouts.force(key, now, lockout, out, |l| l.restate(now, hint));
        }
        shared
    }

    /// Lets an attempt at `key` through, claiming a half-open probe slot (until `deadline`) if
    /// there is one.
    fn admit(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        deadline: UnixMillis,
        out: &Publisher,
        next_probe: &AtomicU64,
    ) -> Result<Option<ProbeId>, SkipReason> {
        self.check(key, now, out)?;
        self.claim(key, now, deadline, out, next_probe)
    }

    /// The breaker's part of [`Self::admit`]: a half-open probe slot, if there is one.
    fn claim(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        deadline: UnixMillis,
        out: &Publisher,
        next_probe: &AtomicU64,
    ) -> Result<Option<ProbeId>, SkipReason> {
        let State { policies, breakers, .. } = self;
        let policy = policies.breaker(&key.provider);
        let admission = match breakers.get(&key.provider, now, policy, out) {
            Some(b) => {
                b.admit(now, policy, deadline, || next_probe.fetch_add(1, Ordering::Relaxed))?
            }
            None => Admission::Normal,
        };
        Ok(match admission {
            Admission::Probe(id) => Some(id),
            Admission::Normal => None,
        })
    }

    fn len(&self) -> usize {
        self.breakers.map.len() + self.credentials.map.len() + self.lockouts.map.len()
    }

    /// Runs a bounded sweep over all three tables.
    fn sweep(&mut self, now: UnixMillis, idle: Duration, budget: usize, out: &Publisher) -> usize {
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let mut visited = breakers.sweep(now, idle, budget, |p| policies.breaker(p), out);
        visited += credentials.sweep(
            now,
            idle,
            budget.saturating_sub(visited),
            |_| &policies.cooldown,
            out,
        );
        visited +=
            lockouts.sweep(now, idle, budget.saturating_sub(visited), |_| &policies.lockout, out);
        visited
    }

    /// Before tracking a new entry: keep memory flat by sweeping a little, and at the cap make
    /// room by forgetting healthy entries. `false` means there is no room.
    fn make_room(&mut self, now: UnixMillis, limits: &RegistryLimits, out: &Publisher) -> bool {
        self.sweep(now, limits.idle_ttl, limits.sweep_budget, out);
        if self.len() < limits.max_entries {
            return true;
        }
        self.sweep(now, Duration::ZERO, limits.sweep_budget.max(64), out);
        if self.len() < limits.max_entries {
            return true;
        }
        self.untracked += 1;
        false
    }

    /// Checks the layers outermost first. All three entries are refreshed before any verdict,
    /// so every look at a candidate performs the same lazy transitions whatever the answer.
    fn check(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        out: &Publisher,
    ) -> Result<(), SkipReason> {
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let breaker_policy = policies.breaker(&key.provider);
        let b = breakers
            .get(&key.provider, now, breaker_policy, out)
            .map(|b| b.check(now, breaker_policy));
        let c = credentials
            .get(&CredRef::from(key), now, &policies.cooldown, out)
            .map(|c| c.check(now));
        let l = lockouts.get(key, now, &policies.lockout, out).map(|l| l.check(now));
        b.unwrap_or(Ok(()))?;
        c.unwrap_or(Ok(()))?;
        l.unwrap_or(Ok(()))
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
    /// In a team (issue 20), where this instance's changes go. Set once, at start.
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

    /// Joins a team (issue 20): from now on every change this registry makes to a breaker,
    /// cooldown or lockout is also sent through `link`, and half-open probes ask it for their
    /// lease. Once per registry; a second link is refused and handed back.
    pub fn join_team(&self, link: TeamLink) -> Result<(), TeamLink> {
        self.team.set(link)
    }

    /// The team this registry shares its state with, if any.
    pub fn team(&self) -> Option<&TeamLink> {
        self.team.get()
    }

    /// Sends `changes` to the team, if there is one; never waits. Each entry remembers its
    /// last change's sequence number, until a team entry that includes it comes back.
    fn share(&self, changes: Vec<TeamTarget>, at: UnixMillis) {
        let Some(team) = self.team.get() else { return };
        if changes.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        for target in changes {
            let key = target.clone();
            let Some(seq) = team.send(TeamOp::new(target, at)) else { continue };
            match key {
                TeamTarget::Breaker { provider, .. } => {
                    st.breakers.sent.insert(provider, seq);
                }
                TeamTarget::Credential { key, .. } => {
                    st.credentials.sent.insert(key, seq);
                }
                TeamTarget::Lockout { key, .. } => {
                    st.lockouts.sent.insert(key, seq);
                }
            }
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

    /// What `auto` scores a provider's health on (issue 30): its breaker's state at `now`, as
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
        Ok(Attempt {
            registry: Arc::clone(self),
            key: key.clone(),
            probe,
            leased: false,
            admitted: now,
            deadline,
            answered: false,
            recovery: false,
            held: None,
        })
    }

    /// Which bench `key` is recovering from, if any: eligible again, but not yet shown to work
    /// (RESILIENCE.md §3). The planner passes such a target over for a probe when another
    /// candidate can serve. Performs lazy transitions, claims nothing.
    pub fn recovering(&self, key: &CandidateKey, now: UnixMillis) -> Option<Bench> {
        self.state.lock().recovering(key, now, &self.events)
    }

    /// Which bench a recovery probe of `key` would go through, if `key` is benched at `now`
    /// only by waits of the proxy's own whose first has run out (RESILIENCE.md §3): the planner
    /// names such a target for a probe while another candidate serves. Performs lazy
    /// transitions, claims nothing.
    pub fn probe_through(&self, key: &CandidateKey, now: UnixMillis) -> Option<Bench> {
        self.state.lock().passage(key, now, &self.events).map(|(bench, _)| bench)
    }

    /// Whether a probe of `key` on `bench` may start at `now`: none in flight for `key`, and
    /// its scope not probed within [`super::recovery::PROBE_INTERVAL`]. Claims nothing.
    pub fn probe_due(&self, key: &CandidateKey, bench: Bench, now: UnixMillis) -> bool {
        self.state.lock().probe_due(key, bench, now).is_ok()
    }

    /// Starts a recovery probe of `key` on `bench`: takes the scope's probe slot (and a
    /// half-open breaker's, for `permit`: as long as the probe may take), so no other probe of
    /// the scope starts until this one is settled with [`RecoveryProbe::finish`] or dropped.
    /// A probe through a bench ([`Bench::is_through`]) passes the waits of the proxy's own that
    /// [`Self::probe_through`] names, and nothing else. `afford` is asked last, once the probe
    /// could go out (the retry budget: a probe refused for another reason spends nothing).
    pub fn start_probe(
        self: &Arc<Self>,
        key: &CandidateKey,
        bench: Bench,
        now: UnixMillis,
        permit: Duration,
        afford: impl FnOnce() -> bool,
    ) -> Result<RecoveryProbe, ProbeRefused> {
        let scope = bench.scope(key);
        let out = &self.events;
        let mut st = self.state.lock();
        st.probe_due(key, bench, now)?;
        let passage = if bench.is_through() {
            match st.passage(key, now, out) {
                Some((through, passage)) if through == bench => passage,
                _ => return Err(ProbeRefused::NotEligible),
            }
        } else {
            st.check(key, now, out).map_err(|_| ProbeRefused::NotEligible)?;
            Passage::default()
        };
        if !afford() {
            return Err(ProbeRefused::Budget);
        }
        let deadline = now.plus(permit);
        let probe = if passage.breaker {
            // Through the open breaker: no half-open slot to claim.
            None
        } else {
            st.claim(key, now, deadline, out, &self.next_probe)
                .map_err(|_| ProbeRefused::NotEligible)?
        };
        let track = st.probes.entry(scope.clone()).or_default();
        track.in_flight = true;
        track.last_sent = Some(now);
        drop(st);
        let attempt = Attempt {
            registry: Arc::clone(self),
            key: key.clone(),
            probe,
            leased: false,
            admitted: now,
            deadline,
            answered: false,
            recovery: true,
            held: None,
        };
        Ok(RecoveryProbe { attempt: Some(attempt), bench, scope, passage, scope_leased: false })
    }

    /// Judges a probe's verdict by its bench's layer: success clears the bench at once; a
    /// failure the verdict did not already charge to a lapsed lock extends it by the usual
    /// backoff. Frees the scope's slot and keeps the result for the health page.
    fn judge_probe(
        &self,
        key: &CandidateKey,
        (bench, scope, passage): (Bench, &ProbeScope, Passage),
        verdict: &Verdict,
        now: UnixMillis,
    ) -> bool {
        let out = &self.events;
        let mut st = self.state.lock();
        let aborted = verdict.kind == OutcomeKind::Aborted;
        let healed = !aborted && bench.healed_by(verdict);
        let State { policies, breakers, credentials, lockouts, .. } = &mut *st;
        let provider = || key.provider.clone();
        // A half-open probe closed (or re-opened) the breaker through its own admission, and
        // the verdict has charged every other failure already: only these change more.
        let shared = match bench {
            Bench::BreakerDegraded if healed => {
                let policy = policies.breaker(&key.provider);
                breakers.force(&key.provider, now, policy, out, |b| b.heal(now)).then(|| {
                    TeamTarget::Breaker { provider: provider(), change: BreakerChange::Heal }
                })
            }
            Bench::CredentialCooled if healed => {
                let cooldown = &policies.cooldown;
                credentials.force(&CredRef::from(key), now, cooldown, out, |c| c.heal(now)).then(
                    || TeamTarget::Credential {
                        key: key.credential_key(),
                        change: CredentialChange::Heal,
                    },
                )
            }
            Bench::ModelLockLapsed if healed => lockouts
                .force(key, now, &policies.lockout, out, |l| l.heal(now))
                .then(|| TeamTarget::Lockout { key: key.clone(), change: LockoutChange::Heal }),
            Bench::ModelLockLapsed if !verdict.charges.model && !aborted => {
                let lockout = &policies.lockout;
                let reason = LockReason { kind: verdict.kind, status: verdict.status };
                let hint = verdict.retry_after;
                lockouts
                    .force(key, now, lockout, out, |l| {
                        l.on_failure(now, lockout, reason, hint, true)
                    })
                    .then(|| TeamTarget::Lockout {
                        key: key.clone(),
                        change: LockoutChange::Failure { reason, hint, at_once: true },
                    })
            }
            Bench::BreakerHalfOpen
            | Bench::BreakerDegraded
            | Bench::CredentialCooled
            | Bench::ModelLockLapsed
            | Bench::BreakerOpen
            | Bench::CredentialCooling
            | Bench::ModelLocked => None,
        };
        let mut shared: Vec<TeamTarget> = shared.into_iter().collect();
        if !aborted {
            shared.extend(st.pass_judgement(key, passage, verdict, now, out));
        }
        let State { probes, .. } = &mut *st;
        let track = probes.entry(scope.clone()).or_default();
        track.in_flight = false;
        if !aborted && matches!(scope, ProbeScope::Provider { .. }) {
            track.suspect = !healed;
        }
        if !aborted {
            track.last = Some(ProbeResult {
                at: now,
                bench,
                outcome: verdict.kind,
                status: verdict.status,
                healed,
            });
        }
        drop(st);
        self.share(shared, now);
        healed
    }

    fn release_probe(&self, scope: &ProbeScope) {
        if let Some(track) = self.state.lock().probes.get_mut(scope) {
            track.in_flight = false;
        }
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

    /// Clears state by hand. Publishes a removal for every entry cleared.
    pub fn reset(&self, scope: &ResetScope, now: UnixMillis) -> ResetCounts {
        let mut st = self.state.lock();
        let out = &self.events;
        let (of_provider, of_credential, of_model, of_lockout) = match scope {
            ResetScope::All => (None, None, None, None),
            ResetScope::Provider { provider } => (Some(provider), None, None, None),
            ResetScope::Credential { provider, credential } => {
                (Some(provider), Some(credential), None, None)
            }
            ResetScope::Model { provider, model } => (Some(provider), None, Some(model), None),
            ResetScope::Lockout { key } => (None, None, None, Some(key)),
        };
        let provider_ok = |p: &ProviderId| of_provider.is_none_or(|x| x == p);
        let credential_ok = |c: &CredentialId| of_credential.is_none_or(|x| x == c);
        let whole_layer = of_credential.is_none() && of_model.is_none() && of_lockout.is_none();
        let breakers = if whole_layer {
            st.breakers.remove_where(now, out, |p| provider_ok(p))
        } else {
            Vec::new()
        };
        let credentials = if of_model.is_none() && of_lockout.is_none() {
            st.credentials.remove_where(now, out, |k| {
                provider_ok(&k.provider) && credential_ok(&k.credential)
            })
        } else {
            Vec::new()
        };
        let lockouts = st.lockouts.remove_where(now, out, |k| {
            of_lockout.is_none_or(|x| x == k)
                && provider_ok(&k.provider)
                && credential_ok(&k.credential)
                && of_model.is_none_or(|m| *m == k.model)
        });
        drop(st);
        let counts = ResetCounts {
            breakers: breakers.len(),
            credentials: credentials.len(),
            lockouts: lockouts.len(),
        };
        // A reset here clears the team's entries too: whoever cleared a bench by hand meant it
        // for the key, not for this machine's view of it.
        if self.team.get().is_some() {
            let cleared = breakers
                .into_iter()
                .map(|provider| TeamTarget::Breaker { provider, change: BreakerChange::Clear })
                .chain(
                    credentials
                        .into_iter()
                        .map(|key| TeamTarget::Credential { key, change: CredentialChange::Clear }),
                )
                .chain(
                    lockouts
                        .into_iter()
                        .map(|key| TeamTarget::Lockout { key, change: LockoutChange::Clear }),
                );
            self.share(cleared.collect(), now);
        }
        counts
    }

    // -- snapshots and persistence --------------------------------------------------------

    /// Every tracked entry's state, for persistence and for resyncing a lagging consumer.
    pub fn records(&self) -> HealthRecords {
        let st = self.state.lock();
        HealthRecords {
            breakers: st
                .breakers
                .map
                .iter()
                .map(|(p, b)| (p.clone(), b.record(st.policies.breaker(p))))
                .collect(),
            credentials: st.credentials.map.iter().map(|(k, c)| (k.clone(), c.record())).collect(),
            lockouts: st.lockouts.map.iter().map(|(k, l)| (k.clone(), l.clone())).collect(),
        }
    }

    /// Loads persisted state, clamping every deadline to `[now, now + longest]` of the current
    /// policies. Publishes nothing: this state already is what the store holds.
    pub fn restore(&self, records: &HealthRecords, now: UnixMillis) {
        let mut st = self.state.lock();
        let State { policies, breakers, credentials, lockouts, .. } = &mut *st;
        for (provider, record) in &records.breakers {
            let b = Breaker::restore(record, now, policies.breaker(provider));
            if !b.is_pristine() {
                breakers.map.insert(provider.clone(), b);
            }
        }
        for (key, record) in &records.credentials {
            let c = CredentialCooldown::restore(record, now, &policies.cooldown);
            if !c.is_pristine() {
                credentials.map.insert(key.clone(), c);
            }
        }
        for (key, record) in &records.lockouts {
            let l = ModelLockout::restore(record, now, &policies.lockout);
            if !l.is_pristine() {
                lockouts.map.insert(key.clone(), l);
            }
        }
    }

    // -- the team (issue 20) -----------------------------------------------------------------

    /// Takes in a breaker the team shares, already in this instance's time, for every local
    /// provider it stands for. Published like any change (the state file and the UI follow
    /// it), never sent back to the team: it came from there. A half-open breaker whose lease
    /// another instance holds keeps its probe slot taken until the lease's deadline.
    ///
    /// `covers`: the last of this instance's own changes that the entry includes (see
    /// [`TeamOp::seq`]; `u64::MAX` for a resync, which replaces whatever is here). An entry that
    /// does not include this instance's last change of it is older than what is here, and is
    /// not taken (issue 31): the team's answer to that change will be.
    pub fn apply_shared_breaker(
        &self,
        providers: &[ProviderId],
        shared: &SharedBreaker,
        recorded_by: &InstanceId,
        covers: u64,
        now: UnixMillis,
    ) {
        let me = self.team.get().map(TeamLink::me);
        let lease = match &shared.lease {
            None => LeaseHolder::Nobody,
            Some(l) if Some(&l.holder) == me => LeaseHolder::Me,
            Some(l) => LeaseHolder::Other { until: l.until },
        };
        self.apply_shared::<Breakers>(providers, shared, lease, (recorded_by, covers), now);
    }

    /// Takes in a credential cooldown the team shares (see [`Self::apply_shared_breaker`]).
    pub fn apply_shared_credential(
        &self,
        keys: &[CredentialKey],
        shared: &SharedCredential,
        recorded_by: &InstanceId,
        covers: u64,
        now: UnixMillis,
    ) {
        let origin = (recorded_by, covers);
        self.apply_shared::<Credentials>(keys, shared, LeaseHolder::Nobody, origin, now);
    }

    /// Takes in a model lockout the team shares (see [`Self::apply_shared_breaker`]).
    pub fn apply_shared_lockout(
        &self,
        keys: &[CandidateKey],
        shared: &SharedLockout,
        recorded_by: &InstanceId,
        covers: u64,
        now: UnixMillis,
    ) {
        let origin = (recorded_by, covers);
        self.apply_shared::<Lockouts>(keys, shared, LeaseHolder::Nobody, origin, now);
    }

    fn apply_shared<L: Layer>(
        &self,
        keys: &[L::Key],
        shared: &L::Shared,
        lease: LeaseHolder,
        (recorded_by, covers): (&InstanceId, u64),
        now: UnixMillis,
    ) where
        L::Record: PartialEq,
    {
        let out = &self.events;
        let me = self.team.get().map_or_else(|| InstanceId::new(""), |t| t.me().clone());
        let mut st = self.state.lock();
        for key in keys {
            let sent = &mut L::part(&mut st, key).0.sent;
            match sent.get(key) {
                Some(&last) if last > covers => continue,
                Some(_) => {
                    sent.swap_remove(key);
                }
                None => {}
            }
            let tracked = L::part(&mut st, key).0.map.contains_key(key);
            if !tracked && !st.make_room(now, &self.limits, out) {
                continue;
            }
            let (table, policy) = L::part(&mut st, key);
            let trusted = L::trust(shared, &me, now, policy);
            let adopted = L::adopt(&trusted, now, policy, table.map.get(key), lease);
            table.put(key, adopted, recorded_by, policy, now, out);
        }
    }

    /// What a person looking at the health page needs: every breaker that is not pristine,
    /// every benched credential and every active lockout, with time remaining.
    pub fn snapshot(&self, now: UnixMillis) -> HealthSnapshot {
        let mut st = self.state.lock();
        let out = &self.events;
        let idle = self.limits.idle_ttl;
        let State { policies, breakers, credentials, lockouts, untracked, probes } = &mut *st;
        // Refresh first so the snapshot shows lazy transitions (and publishes them).
        let keys: Vec<ProviderId> = breakers.map.keys().cloned().collect();
        for p in &keys {
            let _ = breakers.get(p, now, policies.breaker(p), out);
        }
        let keys: Vec<CredentialKey> = credentials.map.keys().cloned().collect();
        for k in &keys {
            let _ = credentials.get(k, now, &policies.cooldown, out);
        }
        let keys: Vec<CandidateKey> = lockouts.map.keys().cloned().collect();
        for k in &keys {
            let _ = lockouts.get(k, now, &policies.lockout, out);
        }
        HealthSnapshot {
            at: now,
            breakers: breakers
                .map
                .iter()
                .map(|(provider, b)| {
                    let policy = policies.breaker(provider);
                    BreakerView {
                        provider: provider.clone(),
                        state: b.state(policy),
                        failures: b.failures(),
                        reopens: b.reopens(),
                        last_fault: b.last_fault(),
                        retry_in_ms: millis(b.retry_in(now, policy)),
                        probing_elsewhere: b.leased_elsewhere(now),
                        recorded_by: breakers.origins.get(provider).cloned(),
                    }
                })
                .collect(),
            credentials: credentials
                .map
                .iter()
                .filter(|(_, c)| c.status() != CredentialStatus::Active)
                .map(|(key, c)| CredentialView {
                    key: key.clone(),
                    status: c.status(),
                    backoff_level: c.backoff_level(),
                    retry_in_ms: c.check(now).err().and_then(SkipReason::retry_in).map(millis),
                    recorded_by: credentials.origins.get(key).cloned(),
                    last_error: c.record().last_error,
                })
                .collect(),
            lockouts: lockouts
                .map
                .iter()
                .filter(|(_, l)| l.is_locked(now))
                .map(|(key, l)| LockoutView {
                    key: key.clone(),
                    reason: l.reason,
                    consecutive_failures: l.consecutive_failures,
                    locked_until: l.locked_until.unwrap_or(now),
                    remaining_ms: l.locked_until.map_or(0, |u| millis(u.since(now))),
                    recorded_by: lockouts.origins.get(key).cloned(),
                })
                .collect(),
            untracked: *untracked,
            // Probing now, still benched since the last probe ("last probe: 503"), or healed
            // by a probe within the idle horizon ("back since 14:02").
            probes: probes
                .iter()
                .filter(|(scope, track)| {
                    // A provider only ever counted as failing, never probed, has nothing to show.
                    (track.in_flight || track.last.is_some())
                        && (track.in_flight
                            || track.last.is_some_and(|l| l.healed && now.since(l.at) < idle)
                            || match scope {
                                ProbeScope::Provider { provider } => {
                                    breakers.map.contains_key(provider)
                                }
                                ProbeScope::Credential { key } => credentials.map.contains_key(key),
                                ProbeScope::Model { key } => lockouts.map.contains_key(key),
                            })
                })
                .map(|(scope, track)| ProbeView {
                    scope: scope.clone(),
                    probing: track.in_flight,
                    last: track.last,
                })
                .collect(),
        }
    }
}

/// What the team hears of a verdict on a breaker: a failure always (the team's count decides),
/// a success only when it changed something here, and a probe's result only from the holder of
/// the team's lease.
fn told_to_team(
    fault: Option<BreakerFault>,
    (probe, leased): (bool, bool),
    changed: bool,
) -> Option<BreakerChange> {
    match (fault, probe, leased) {
        (Some(fault), true, true) => Some(BreakerChange::ProbeFailed(fault)),
        (None, true, true) => Some(BreakerChange::ProbeSucceeded),
        (_, true, false) => None,
        (Some(fault), false, _) => Some(BreakerChange::Failure(fault)),
        (None, false, _) => changed.then_some(BreakerChange::Success),
    }
}

fn breaker_change(key: &CandidateKey, change: BreakerChange) -> TeamTarget {
    TeamTarget::Breaker { provider: key.provider.clone(), change }
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

fn release(st: &mut State, key: &CandidateKey, probe: Option<ProbeId>) {
    let Some(probe) = probe else { return };
    if let Some(b) = st.breakers.map.get_mut(&key.provider) {
        b.release(probe);
    }
}

/// One admitted attempt. Settle it with [`Attempt::finish`]; dropping it unsettled (client
/// abort, cancellation, panic) releases its probe slot, so a half-open breaker never waits for
/// a result that cannot come.
#[derive(Debug)]
pub struct Attempt {
    registry: Arc<HealthRegistry>,
    key: CandidateKey,
    probe: Option<ProbeId>,
    /// The probe holds the team's lease (see [`Attempt::lease`]).
    leased: bool,
    /// When it was admitted: a lease it holds is released as of then if it is dropped.
    admitted: UnixMillis,
    /// The latest it may settle by: a team lease it asks for lasts until then.
    deadline: UnixMillis,
    /// Its success was recorded already, at the stream's first real event.
    answered: bool,
    /// A recovery probe of the proxy's own (see [`HealthRegistry::start_probe`]).
    recovery: bool,
    /// What the caller keeps for as long as the attempt runs (a concurrency slot): let go
    /// when the attempt is settled or dropped, so a stream holds it to its end.
    held: Option<Held>,
}

/// A value an [`Attempt`] keeps for its caller, opaque to the registry.
pub struct Held(
    #[expect(dead_code, reason = "kept only to be dropped with the attempt")]
    Box<dyn std::any::Any + Send + Sync>,
);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

impl Attempt {
    /// Keeps `value` until this attempt is settled or dropped.
    pub fn hold(&mut self, value: impl std::any::Any + Send + Sync) {
        self.held = Some(Held(Box::new(value)));
    }

    pub fn key(&self) -> &CandidateKey {
        &self.key
    }

    /// Whether this attempt is the breaker's half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }

    /// In a team (issue 20), a half-open probe goes out only under the team's lease, so one
    /// probe is in flight across every instance. Waits for the lease at most the wait derived
    /// from the measured round trip to the database ([`TeamLink::lease_wait`]); `Err` (another
    /// instance probes, or no answer in time) means: drop this attempt and try the next
    /// candidate. Any other attempt, an instance without a team, or a team whose database is
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

/// One recovery probe in flight (see [`super::recovery`]). Settle it with
/// [`RecoveryProbe::finish`]; dropping it unsettled frees its scope's slot (and a half-open
/// breaker's probe slot), so a scope never stays "probing" for a probe that cannot answer.
#[derive(Debug)]
pub struct RecoveryProbe {
    /// `None` once settled.
    attempt: Option<Attempt>,
    bench: Bench,
    scope: ProbeScope,
    /// The waits of the proxy's own it goes through, if any.
    passage: Passage,
    /// It holds the team's lease of its scope (issue 31), released when it is over.
    scope_leased: bool,
}

/// The benches of the proxy's own a recovery probe goes through (see [`Bench::is_through`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Passage {
    breaker: bool,
    credential: bool,
    lock: bool,
}

impl RecoveryProbe {
    pub fn key(&self) -> &CandidateKey {
        &self.attempt.as_ref().expect("unsettled until finished").key
    }

    pub fn bench(&self) -> Bench {
        self.bench
    }

    /// In a team, a recovery probe goes out only under the team's lease of its scope, so one
    /// probe of each bench is in flight across every instance (issue 31); a probe that is a
    /// half-open breaker's probe needs the breaker's lease like any other attempt (see
    /// [`Attempt::lease`]). `false`: drop it, another instance probes. Without a team, or while
    /// the team's database is unreachable, it goes ahead at once.
    pub async fn lease(&mut self, now: UnixMillis) -> bool {
        let attempt = self.attempt.as_mut().expect("unsettled until finished");
        if attempt.probe.is_some() {
            return attempt.lease(now).await.is_ok();
        }
        let Some(team) = attempt.registry.team.get() else { return true };
        let lasts = attempt.deadline.since(now);
        match team.lease(LeaseScope::Probe(self.scope.clone()), now, lasts).await {
            LeaseAnswer::Granted => {
                self.scope_leased = true;
                true
            }
            LeaseAnswer::Unavailable => true,
            LeaseAnswer::Refused => false,
        }
    }

    /// Frees the team's slot of this probe's scope, if it holds it.
    fn release_scope(&mut self, registry: &HealthRegistry) {
        if std::mem::take(&mut self.scope_leased)
            && let Some(team) = registry.team.get()
        {
            team.release(self.scope.clone());
        }
    }

    /// Records the probe's verdict on all three layers, as any attempt's, then judges it by its
    /// bench's layer. Returns whether the bench was cleared.
    pub fn finish(mut self, verdict: &Verdict, now: UnixMillis) -> bool {
        let attempt = self.attempt.take().expect("settled once");
        let (registry, key) = (Arc::clone(&attempt.registry), attempt.key.clone());
        attempt.finish(verdict, now);
        let healed =
            registry.judge_probe(&key, (self.bench, &self.scope, self.passage), verdict, now);
        self.release_scope(&registry);
        healed
    }
}

impl Drop for RecoveryProbe {
    fn drop(&mut self) {
        if let Some(attempt) = self.attempt.take() {
            attempt.registry.release_probe(&self.scope);
            self.release_scope(&attempt.registry);
        }
    }
}

/// A display snapshot of the registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct HealthSnapshot {
    pub at: UnixMillis,
    pub breakers: Vec<BreakerView>,
    pub credentials: Vec<CredentialView>,
    pub lockouts: Vec<LockoutView>,
    /// Failures not tracked because the registry was full of benched entries.
    #[ts(type = "number")]
    pub untracked: u64,
    /// Recovery probes in flight, and the last probe's result for every target still benched
    /// or healed by a probe within the last hour.
    pub probes: Vec<ProbeView>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct BreakerView {
    pub provider: ProviderId,
    pub state: BreakerState,
    pub failures: u32,
    pub reopens: u32,
    pub last_fault: Option<BreakerFault>,
    #[ts(type = "number")]
    pub retry_in_ms: u64,
    /// Half-open, and another instance of the team holds the probe's lease.
    pub probing_elsewhere: bool,
    /// In a team: the instance whose change this state came from; `null` when it was this
    /// instance (or there is no team).
    pub recorded_by: Option<InstanceId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct CredentialView {
    pub key: CredentialKey,
    pub status: CredentialStatus,
    pub backoff_level: u32,
    /// `None` when only a person (or the OAuth refresher) can bring it back.
    #[ts(type = "number | null")]
    pub retry_in_ms: Option<u64>,
    /// In a team: the instance that recorded this cooldown; `null` when it was this instance
    /// (or there is no team).
    pub recorded_by: Option<InstanceId>,
    /// What benched it last. `auth` on a cooling key another instance recorded: that instance
    /// reported the key refused, and this one benches it for a bounded time only (issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub last_error: Option<crate::outcome::CredentialFault>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct LockoutView {
    pub key: CandidateKey,
    pub reason: Option<LockReason>,
    pub consecutive_failures: u32,
    pub locked_until: UnixMillis,
    #[ts(type = "number")]
    pub remaining_ms: u64,
    /// In a team: the instance that recorded this lock; `null` when it was this instance (or
    /// there is no team).
    pub recorded_by: Option<InstanceId>,
}
