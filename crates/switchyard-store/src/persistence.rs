//! Persistence as the app runs it: restore the health registry from the state file at start,
//! then mirror every state transition into the file without a request ever waiting on it.
//!
//! Invariants:
//! - Starting never fails. A file that cannot be opened, read or written leaves the app running
//!   in memory only, with a log line naming the path and the reason, and a
//!   [`PersistenceStatus::MemoryOnly`] the UI can show.
//! - The registry never depends on the file: it publishes each transition on its broadcast
//!   channel and moves on. The writer is just a consumer; it may fall behind (it then resyncs
//!   from a snapshot) or stop (requests do not notice).
//! - A read-only file still restores the state it holds; only writing is off.

mod writer;

use std::path::Path;
use std::sync::Arc;

use switchyard_core::UnixMillis;
use switchyard_core::resilience::{HealthEvent, HealthRegistry};
use tokio::sync::{broadcast, watch};

pub use self::writer::WriteRetry;
use self::writer::Writer;
use crate::Store;

/// Whether health state survives a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PersistenceStatus {
    /// Every transition reaches the state file.
    Durable,
    /// Transitions live in memory only, for the reason given.
    MemoryOnly { reason: String },
}

impl PersistenceStatus {
    pub fn is_durable(&self) -> bool {
        *self == Self::Durable
    }
}

/// The state file, restored into a registry and kept up to date by a write-behind task.
#[derive(Debug)]
pub struct Persistence {
    store: Option<Store>,
    status: watch::Receiver<PersistenceStatus>,
    writer: Option<Writer>,
    /// Restored, the writer not started yet: see [`Self::restore`].
    pending: Option<Pending>,
}

/// What the writer will start with.
#[derive(Debug)]
struct Pending {
    registry: Arc<HealthRegistry>,
    events: broadcast::Receiver<HealthEvent>,
    status: watch::Sender<PersistenceStatus>,
    retry: WriteRetry,
}

impl Persistence {
    /// Opens the state file at `path`, restores `registry` from it as of `now` (every deadline
    /// clamped by the registry's current policies, so set those first), and starts the writer.
    /// Never fails: see [`Self::status`].
    pub async fn start(
        path: impl AsRef<Path>,
        registry: &Arc<HealthRegistry>,
        now: UnixMillis,
    ) -> Self {
        Self::start_with(path, registry, now, WriteRetry::default()).await
    }

    /// [`Self::start`], with the writer retrying failed writes as `retry` says.
    pub async fn start_with(
        path: impl AsRef<Path>,
        registry: &Arc<HealthRegistry>,
        now: UnixMillis,
        retry: WriteRetry,
    ) -> Self {
        let mut persistence = Self::restore_with(path, registry, now, retry).await;
        persistence.write_behind();
        persistence
    }

    /// [`Self::start`] without starting the writer yet: transitions from now on are kept for
    /// it, and [`Self::write_behind`] starts it. The writer begins by making the file mirror
    /// memory (clamped deadlines), one write of every entry; a start that writes the file
    /// itself (the first start's bindings) does that first instead of waiting for it, and the
    /// app starts the writer once it is ready to serve: a large state file does not hold the start.
    pub async fn restore(
        path: impl AsRef<Path>,
        registry: &Arc<HealthRegistry>,
        now: UnixMillis,
    ) -> Self {
        Self::restore_with(path, registry, now, WriteRetry::default()).await
    }

    async fn restore_with(
        path: impl AsRef<Path>,
        registry: &Arc<HealthRegistry>,
        now: UnixMillis,
        retry: WriteRetry,
    ) -> Self {
        let path = path.as_ref();
        // Subscribed before the file is read, so a transition during start-up is not lost.
        let events = registry.subscribe();
        let store = match Store::open(path).await {
            Ok(store) => store,
            Err(error) => {
                return Self::memory_only(path, format!("cannot open the state file: {error}"));
            }
        };
        match store.load_health().await {
            Ok(records) => registry.restore(&records, now),
            Err(error) => {
                return Self::memory_only(path, format!("cannot read the state file: {error}"));
            }
        }
        if store.is_read_only() {
            let reason =
                "the state file is read-only: state was restored from it, changes are not saved";
            tracing::warn!(path = %path.display(), reason, "health state runs in memory only");
            return Self::without_writer(Some(store), reason.to_owned());
        }
        let (status_tx, status) = watch::channel(PersistenceStatus::Durable);
        let pending = Pending { registry: Arc::clone(registry), events, status: status_tx, retry };
        Self { store: Some(store), status, writer: None, pending: Some(pending) }
    }

    /// Starts the writer of a [`Self::restore`]d state file; nothing when it runs already or
    /// there is nothing to write to.
    pub fn write_behind(&mut self) {
        let (Some(store), Some(pending)) = (&self.store, self.pending.take()) else { return };
        let Pending { registry, events, status, retry } = pending;
        self.writer = Some(Writer::spawn(store.clone(), registry, events, status, retry));
    }

    fn memory_only(path: &Path, reason: String) -> Self {
        tracing::error!(
            path = %path.display(),
            %reason,
            "health state runs in memory only: it will not survive a restart"
        );
        Self::without_writer(None, reason)
    }

    fn without_writer(store: Option<Store>, reason: String) -> Self {
        Self {
            store,
            status: watch::channel(PersistenceStatus::MemoryOnly { reason }).1,
            writer: None,
            pending: None,
        }
    }

    pub fn status(&self) -> PersistenceStatus {
        self.status.borrow().clone()
    }

    /// The status as it changes: the writer turns it to memory-only when writes keep failing (a
    /// full disk), long after start, and back to durable when they succeed again, so whoever
    /// shows it must read it live, not keep a copy.
    pub fn watch_status(&self) -> watch::Receiver<PersistenceStatus> {
        self.status.clone()
    }

    /// The state file, for settings; `None` when it could not be opened or read.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// Transactions the writer has committed: batches of events and resyncs.
    pub fn batches_written(&self) -> u64 {
        self.writer.as_ref().map_or(0, Writer::batches_written)
    }

    /// Writes that failed (each is retried, see [`WriteRetry`]).
    pub fn write_failures(&self) -> u64 {
        self.writer.as_ref().map_or(0, Writer::write_failures)
    }

    /// Resolves once every transition published before the call is in the file, or once the
    /// writer cannot write for now or has stopped (check [`Self::status`]).
    pub async fn flush(&self) {
        if let Some(writer) = &self.writer {
            writer.flush().await;
        }
    }

    /// Writes what is still queued, stops the writer and closes the file.
    pub async fn shutdown(mut self) {
        // A writer never started still owes the file what changed since the restore.
        self.write_behind();
        if let Some(writer) = self.writer {
            writer.shutdown().await;
        }
        if let Some(store) = self.store {
            store.close().await;
        }
    }
}
