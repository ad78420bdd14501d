//! Health events: every state change of every layer, as the new full state of one entry.
//!
//! Carrying the whole entry (not a delta) makes consumers idempotent: the store upserts the
//! latest record per key, so a batch can be coalesced and a lagging consumer can resynchronise
//! from a snapshot without replaying history.

use serde::{Deserialize, Serialize};

use super::{BreakerRecord, CredentialRecord, LockoutRecord};
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, ProviderId};
use crate::usage::budget::BudgetView;

/// One entry's new state; `None` means back to pristine (or cleared by hand): nothing to keep.
/// `Budget` is the one event that is no layer's state: a spend budget crossed 80 % or was
/// reached. It rides the same stream so the UI, the tray and the desktop's
/// notifications hear of it where they hear of everything else; the store keeps nothing of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "layer", rename_all = "snake_case")]
pub enum HealthEvent {
    Breaker { provider: ProviderId, record: Option<BreakerRecord>, at: UnixMillis },
    Credential { key: CredentialKey, record: Option<CredentialRecord>, at: UnixMillis },
    Lockout { key: CandidateKey, record: Option<LockoutRecord>, at: UnixMillis },
    Budget { budget: BudgetView, at: UnixMillis },
}

impl HealthEvent {
    pub fn at(&self) -> UnixMillis {
        match self {
            Self::Breaker { at, .. }
            | Self::Credential { at, .. }
            | Self::Lockout { at, .. }
            | Self::Budget { at, .. } => *at,
        }
    }
}

/// Every tracked entry's state: what the store persists and restores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthRecords {
    pub breakers: Vec<(ProviderId, BreakerRecord)>,
    pub credentials: Vec<(CredentialKey, CredentialRecord)>,
    pub lockouts: Vec<(CandidateKey, LockoutRecord)>,
}

impl HealthRecords {
    pub fn len(&self) -> usize {
        self.breakers.len() + self.credentials.len() + self.lockouts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The events that would rebuild these records from nothing.
    pub fn into_events(self, at: UnixMillis) -> impl Iterator<Item = HealthEvent> {
        let breakers = self.breakers.into_iter().map(move |(provider, r)| HealthEvent::Breaker {
            provider,
            record: Some(r),
            at,
        });
        let credentials = self
            .credentials
            .into_iter()
            .map(move |(key, r)| HealthEvent::Credential { key, record: Some(r), at });
        let lockouts = self.lockouts.into_iter().map(move |(key, r)| HealthEvent::Lockout {
            key,
            record: Some(r),
            at,
        });
        breakers.chain(credentials).chain(lockouts)
    }
}
