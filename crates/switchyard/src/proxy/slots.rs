//! Concurrency caps (RESILIENCE.md §11): `max_in_flight` per credential and
//! per provider. A request takes a slot of each cap on its way before its attempt is sent, and
//! the attempt keeps it to its end (a stream's last byte: the slot rides in the registry's
//! `Attempt`). Over a cap, a request waits in a bounded FIFO (tokio's semaphores are fair) up to
//! `[settings.routing] queue_ms` within its own deadline, or goes to the next candidate. Hedges
//! take slots, without waiting; the proxy's own probes take none.
//!
//! The caps belong to one routing table: a config change builds new ones, so requests already
//! in flight on the old table are not counted against the new (for the moment of the change).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use switchyard_core::resilience::Held;
use switchyard_core::{CandidateKey, CredentialId, ProviderId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Config;

/// How many requests may wait for one cap at once; more go straight to the next candidate.
pub(crate) const MAX_WAITING: usize = 256;

/// One cap: its permits and how many wait for one.
#[derive(Debug)]
struct Cap {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
}

impl Cap {
    fn new(n: u32) -> Self {
        Self { permits: Arc::new(Semaphore::new(n as usize)), waiting: AtomicUsize::new(0) }
    }

    fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.permits).try_acquire_owned().ok()
    }

    /// Waits in line for a permit until `until`; `None` when the line is full or time is up.
    async fn take(&self, until: Instant) -> Option<OwnedSemaphorePermit> {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let permit = Arc::clone(&self.permits).acquire_owned();
        let permit = tokio::time::timeout_at(until, permit).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        permit.ok().and_then(Result::ok)
    }
}

/// Every cap of one routing table.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    providers: HashMap<ProviderId, Cap>,
    credentials: HashMap<(ProviderId, CredentialId), Cap>,
}

/// The slots one attempt holds: let go when it is dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _provider: Option<OwnedSemaphorePermit>,
    _credential: Option<OwnedSemaphorePermit>,
}

/// The attempt keeps its slots for as long as it runs, and lets them go when it ends.
impl Held for Slot {}

impl Slots {
    pub(crate) fn of(config: &Config) -> Self {
        let mut slots = Self::default();
        for provider in &config.providers {
            if let Some(n) = provider.max_in_flight {
                slots.providers.insert(provider.id.clone(), Cap::new(n));
            }
            for credential in &provider.credentials {
                if let Some(n) = credential.max_in_flight {
                    let key = (provider.id.clone(), credential.id.clone());
                    slots.credentials.insert(key, Cap::new(n));
                }
            }
        }
        slots
    }

    fn caps(&self, key: &CandidateKey) -> (Option<&Cap>, Option<&Cap>) {
        let credential = if self.credentials.is_empty() {
            None
        } else {
            self.credentials.get(&(key.provider.clone(), key.credential.clone()))
        };
        (self.providers.get(&key.provider), credential)
    }

    /// A slot for `key` now, if one is free (always, when it has no cap).
    pub(crate) fn try_take(&self, key: &CandidateKey) -> Option<Slot> {
        let (provider, credential) = self.caps(key);
        let provider = match provider {
            Some(cap) => Some(cap.try_take()?),
            None => None,
        };
        let credential = match credential {
            Some(cap) => Some(cap.try_take()?),
            None => None,
        };
        Some(Slot { _provider: provider, _credential: credential })
    }

    /// A slot for `key`, waiting in line until `until` when none is free.
    pub(crate) async fn take(&self, key: &CandidateKey, until: Instant) -> Option<Slot> {
        if let Some(slot) = self.try_take(key) {
            return Some(slot);
        }
        let (provider, credential) = self.caps(key);
        let provider = match provider {
            Some(cap) => Some(cap.take(until).await?),
            None => None,
        };
        let credential = match credential {
            Some(cap) => Some(cap.take(until).await?),
            None => None,
        };
        Some(Slot { _provider: provider, _credential: credential })
    }

    /// Whether `key` has a slot free (or no cap).
    pub(crate) fn free(&self, key: &CandidateKey) -> bool {
        let (provider, credential) = self.caps(key);
        [provider, credential].into_iter().flatten().all(|cap| cap.permits.available_permits() > 0)
    }

    /// Whether any cap is configured: without one, nothing here costs a request anything.
    pub(crate) fn any(&self) -> bool {
        !(self.providers.is_empty() && self.credentials.is_empty())
    }
}

/// Candidates with a free slot before those of the same target without one: a request over
/// one credential's cap goes to another credential of the same target before it waits.
pub(crate) fn free_first(candidates: &mut [switchyard_core::routing::Candidate], slots: &Slots) {
    switchyard_core::routing::prefer_within_targets(candidates, |key| !slots.free(key));
}
