//! The three layers as the registry's tables see them: each layer's key, entry, policy and
//! record, what counts as a transition, and how a shared entry is taken in. The policies they
//! run on, and the borrowed credential key the hot path looks up by.

use std::hash::Hash;

use indexmap::Equivalent;

use super::FxIndexMap;
use super::state::State;
use super::table::Table;
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialId, CredentialKey, InstanceId, ProviderId};
use crate::resilience::breaker::LeaseHolder;
use crate::resilience::team::{SharedBreaker, SharedCredential, SharedLockout};
use crate::resilience::{
    Breaker, BreakerRecord, BreakerState, Changed, CredentialCooldown, CredentialKind,
    CredentialRecord, CredentialStatus, HealthEvent, LockoutRecord, ModelLockout,
};
use crate::settings::{BreakerPolicy, CooldownPolicy, LockoutPolicy};

/// The policies every layer runs on; all can be replaced live.
#[derive(Clone, Debug, Default)]
pub(super) struct Policies {
    pub(super) default_breaker: BreakerPolicy,
    pub(super) breakers: FxIndexMap<ProviderId, BreakerPolicy>,
    pub(super) cooldown: CooldownPolicy,
    pub(super) credential_kinds: FxIndexMap<CredentialKey, CredentialKind>,
    pub(super) lockout: LockoutPolicy,
}

impl Policies {
    pub(super) fn breaker(&self, provider: &ProviderId) -> &BreakerPolicy {
        self.breakers.get(provider).unwrap_or(&self.default_breaker)
    }

    pub(super) fn kind(&self, key: CredRef<'_>) -> CredentialKind {
        self.credential_kinds.get(&key).copied().unwrap_or_default()
    }
}

/// A credential key made of borrowed parts, so the hot path looks up credentials without
/// cloning ids. Hashes exactly like [`CredentialKey`] (fields in the same order).
#[derive(Clone, Copy, Hash)]
pub(super) struct CredRef<'a> {
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
pub(super) trait Layer {
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

    /// What a team shares of an entry, in this instance's time.
    type Shared;
    /// This layer's table, and the policy `key` runs on.
    fn part<'s>(st: &'s mut State, key: &Self::Key) -> (&'s mut Table<Self>, &'s Self::Policy)
    where
        Self: Sized;
    /// A shared entry within this instance's bounds (see [`crate::resilience::team::trust`]).
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

pub(super) struct Breakers;
pub(super) struct Credentials;
pub(super) struct Lockouts;

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
        crate::resilience::team::trust::breaker(s, me, now, p)
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
        crate::resilience::team::trust::credential(s, now, p)
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
        crate::resilience::team::trust::lockout(s, now, p)
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
