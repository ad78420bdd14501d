//! What the registry's one lock guards: the policies, the three tables and the probe tracks,
//! and the checks and claims made under it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::layer::{Breakers, CredRef, Credentials, Lockouts, Policies};
use super::table::{Publisher, Table};
use super::{FxIndexMap, RegistryLimits};
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, ProviderId};
use crate::resilience::breaker::{Admission, ProbeId};
use crate::resilience::recovery::{ProbeScope, ProbeTrack};
use crate::resilience::{BreakerState, SkipReason};

pub(super) struct State {
    pub(super) policies: Policies,
    pub(super) breakers: Table<Breakers>,
    pub(super) credentials: Table<Credentials>,
    pub(super) lockouts: Table<Lockouts>,
    /// Failures not tracked because the registry was full of benched entries.
    pub(super) untracked: u64,
    /// Recovery probes, by scope: whether one is in flight, when the last was sent and what it
    /// found. One entry per scope ever probed, bounded by the configured candidates.
    pub(super) probes: FxIndexMap<ProbeScope, ProbeTrack>,
}

impl State {
    pub(super) fn new(idle: Duration) -> Self {
        Self {
            policies: Policies::default(),
            breakers: Table::new(idle),
            credentials: Table::new(idle),
            lockouts: Table::new(idle),
            untracked: 0,
            probes: FxIndexMap::default(),
        }
    }

    /// Whether the planner puts `provider` after the others: its breaker is degraded, or it
    /// still counts failures and its last probe failed (see [`ProbeTrack::suspect`]).
    pub(super) fn ranks_last(
        &mut self,
        provider: &ProviderId,
        now: UnixMillis,
        out: &Publisher,
    ) -> bool {
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

    /// Lets an attempt at `key` through, claiming a half-open probe slot (until `deadline`) if
    /// there is one.
    pub(super) fn admit(
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
    pub(super) fn claim(
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

    pub(super) fn len(&self) -> usize {
        self.breakers.map.len() + self.credentials.map.len() + self.lockouts.map.len()
    }

    /// Runs a bounded sweep over all three tables.
    pub(super) fn sweep(
        &mut self,
        now: UnixMillis,
        idle: Duration,
        budget: usize,
        out: &Publisher,
    ) -> usize {
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
    pub(super) fn make_room(
        &mut self,
        now: UnixMillis,
        limits: &RegistryLimits,
        out: &Publisher,
    ) -> bool {
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
    pub(super) fn check(
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

pub(super) fn release(st: &mut State, key: &CandidateKey, probe: Option<ProbeId>) {
    let Some(probe) = probe else { return };
    if let Some(b) = st.breakers.map.get_mut(&key.provider) {
        b.release(probe);
    }
}
