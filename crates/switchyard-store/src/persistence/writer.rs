//! The write-behind health writer: one task that turns the registry's event stream into
//! transactions.
//!
//! Invariants:
//! - Whatever is queued is written together: the task waits for one event, drains the rest
//!   without waiting (at most [`MAX_BATCH`] per transaction) and commits once, so a burst of
//!   transitions costs a few transactions, not one each.
//! - A flush is served only after draining the queue, so it resolves once every event published
//!   before it is committed. No timer is involved anywhere.
//! - Falling behind the broadcast channel loses events, never state: the task rewrites the file
//!   from a registry snapshot. Events still queued may predate the snapshot, but they replay
//!   transitions in order, so every entry still ends at its latest state.
//! - The first write error ends the task: it marks the status memory-only and says so, and the
//!   registry, which never waits for it, keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use switchyard_core::resilience::{HealthEvent, HealthRegistry};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::PersistenceStatus;
use crate::{Store, StoreError};

/// Events per transaction at most: bounds the time one commit holds the write lock.
const MAX_BATCH: usize = 1024;

/// The handle of the writer task.
#[derive(Debug)]
pub(super) struct Writer {
    flushes: mpsc::Sender<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    batches: Arc<AtomicU64>,
}

impl Writer {
    pub(super) fn spawn(
        store: Store,
        registry: Arc<HealthRegistry>,
        events: broadcast::Receiver<HealthEvent>,
        status: watch::Sender<PersistenceStatus>,
    ) -> Self {
        let (flushes, flush_requests) = mpsc::channel(16);
        let batches = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(
            Task { store, registry, events, flush_requests, status, batches: Arc::clone(&batches) }
                .run(),
        );
        Self { flushes, task, batches }
    }

    pub(super) fn batches_written(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    pub(super) async fn flush(&self) {
        let (done, committed) = oneshot::channel();
        if self.flushes.send(done).await.is_ok() {
            // An error means the task stopped: nothing more will be written.
            let _ = committed.await;
        }
    }

    /// Closing the flush channel tells the task to drain what is queued and stop.
    pub(super) async fn shutdown(self) {
        let Self { flushes, task, .. } = self;
        drop(flushes);
        if let Err(error) = task.await {
            tracing::error!(%error, "the health writer panicked");
        }
    }
}

struct Task {
    store: Store,
    registry: Arc<HealthRegistry>,
    events: broadcast::Receiver<HealthEvent>,
    flush_requests: mpsc::Receiver<oneshot::Sender<()>>,
    status: watch::Sender<PersistenceStatus>,
    batches: Arc<AtomicU64>,
}

impl Task {
    async fn run(mut self) {
        if let Err(error) = self.serve().await {
            let reason = format!("writing the state file failed: {error}");
            tracing::error!(
                path = %self.store.path().display(),
                %reason,
                "health state runs in memory only from now on: it will not survive a restart"
            );
            self.status.send_replace(PersistenceStatus::MemoryOnly { reason });
        }
    }

    async fn serve(&mut self) -> Result<(), StoreError> {
        // Restore clamped deadlines and skipped pristine entries: from here the file mirrors
        // memory exactly.
        self.resync().await?;
        loop {
            tokio::select! {
                request = self.flush_requests.recv() => {
                    self.drain(Vec::new()).await?;
                    let Some(done) = request else { return Ok(()) };
                    let _ = done.send(());
                }
                event = self.events.recv() => match event {
                    Ok(event) => self.drain(vec![event]).await?,
                    Err(RecvError::Lagged(_)) => self.resync().await?,
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    /// Writes `batch` and everything queued behind it until the queue is empty.
    async fn drain(&mut self, mut batch: Vec<HealthEvent>) -> Result<(), StoreError> {
        loop {
            let mut empty = false;
            while batch.len() < MAX_BATCH {
                match self.events.try_recv() {
                    Ok(event) => batch.push(event),
                    Err(TryRecvError::Lagged(_)) => {
                        // The snapshot is newer than anything in the batch.
                        batch.clear();
                        self.resync().await?;
                    }
                    Err(TryRecvError::Empty | TryRecvError::Closed) => {
                        empty = true;
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                self.store.apply(&batch).await?;
                self.batches.fetch_add(1, Ordering::Relaxed);
                batch.clear();
            }
            if empty {
                return Ok(());
            }
        }
    }

    async fn resync(&mut self) -> Result<(), StoreError> {
        self.store.replace_all(&self.registry.records()).await?;
        self.batches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
