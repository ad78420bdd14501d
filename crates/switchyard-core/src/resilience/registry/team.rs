//! The registry in a team: its changes sent to the team, the team's entries taken in.

use super::HealthRegistry;
use super::layer::{Breakers, Credentials, Layer, Lockouts};
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, InstanceId, ProviderId};
use crate::outcome::BreakerFault;
use crate::resilience::breaker::LeaseHolder;
use crate::resilience::team::{
    BreakerChange, SharedBreaker, SharedCredential, SharedLockout, TeamLink, TeamOp, TeamTarget,
};

impl HealthRegistry {
    /// Joins a team: from now on every change this registry makes to a breaker,
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
    pub(super) fn share(&self, changes: Vec<TeamTarget>, at: UnixMillis) {
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

    /// Takes in a breaker the team shares, already in this instance's time, for every local
    /// provider it stands for. Published like any change (the state file and the UI follow
    /// it), never sent back to the team: it came from there. A half-open breaker whose lease
    /// another instance holds keeps its probe slot taken until the lease's deadline.
    ///
    /// `covers`: the last of this instance's own changes that the entry includes (see
    /// [`TeamOp::seq`]; `u64::MAX` for a resync, which replaces whatever is here). An entry that
    /// does not include this instance's last change of it is older than what is here, and is
    /// not taken: the team's answer to that change will be.
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
}

/// What the team hears of a verdict on a breaker: a failure always (the team's count decides),
/// a success only when it changed something here, and a probe's result only from the holder of
/// the team's lease.
pub(super) fn told_to_team(
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

pub(super) fn breaker_change(key: &CandidateKey, change: BreakerChange) -> TeamTarget {
    TeamTarget::Breaker { provider: key.provider.clone(), change }
}
