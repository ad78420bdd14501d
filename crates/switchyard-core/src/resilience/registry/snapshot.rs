//! What the registry shows: every entry's record, for the state file (and restored from it),
//! and the health page's snapshot.

use serde::{Deserialize, Serialize};

use super::HealthRegistry;
use super::state::State;
use crate::clock::{UnixMillis, millis};
use crate::ids::{CandidateKey, CredentialKey, InstanceId, ProviderId};
use crate::outcome::BreakerFault;
use crate::resilience::event::HealthRecords;
use crate::resilience::lockout::LockReason;
use crate::resilience::recovery::{ProbeScope, ProbeView};
use crate::resilience::{
    Breaker, BreakerState, CredentialCooldown, CredentialStatus, ModelLockout, SkipReason,
};

impl HealthRegistry {
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
    /// reported the key refused, and this one benches it for a bounded time only.
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
