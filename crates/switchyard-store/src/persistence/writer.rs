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
//! - A write error does not end the task. It waits (exponential backoff) and rewrites the whole
//!   file from a registry snapshot, which also covers whatever the failed batch held. After
//!   [`WriteRetry::degrade_after`] failures in a row it marks the status memory-only and says so
//!   loudly, keeps retrying at the slowest pace, and marks it durable again (and says so) once a
//!   rewrite succeeds: a disk that was full for a minute does not cost durability for the life
//!   of the process. The registry never waits for any of this.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchyard_core::resilience::{HealthEvent, HealthRegistry};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::PersistenceStatus;
use crate::{Store, StoreError};

/// Events per transaction at most: bounds the time one commit holds the write lock.
const MAX_BATCH: usize = 1024;

/// How the writer retries after a failed write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRetry {
    /// The wait after the first failure; it doubles with each failure in a row.
    pub first: Duration,
    /// The longest wait between two attempts (the pace while degraded).
    pub max: Duration,
    /// Failures in a row after which the status says memory-only. At least 1.
    pub degrade_after: u32,
}

impl Default for WriteRetry {
    /// About a second and a half of quick retries (a lock held by another process, a brief I/O
    /// hiccup), then memory-only with a retry every 30 s.
    fn default() -> Self {
        Self { first: Duration::from_millis(100), max: Duration::from_secs(30), degrade_after: 4 }
    }
}

impl WriteRetry {
    fn wait(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(20);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// The handle of the writer task.
#[derive(Debug)]
pub(super) struct Writer {
    flushes: mpsc::Sender<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    batches: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
}

impl Writer {
    pub(super) fn spawn(
        store: Store,
        registry: Arc<HealthRegistry>,
        events: broadcast::Receiver<HealthEvent>,
        status: watch::Sender<PersistenceStatus>,
        retry: WriteRetry,
    ) -> Self {
        let (flushes, flush_requests) = mpsc::channel(16);
        let batches = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(
            Task {
                store,
                registry,
                events,
                flush_requests,
                status,
                batches: Arc::clone(&batches),
                failures: Arc::clone(&failures),
                retry: WriteRetry { degrade_after: retry.degrade_after.max(1), ..retry },
                held: Vec::new(),
            }
            .run(),
        );
        Self { flushes, task, batches, failures }
    }

    pub(super) fn batches_written(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    pub(super) fn write_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
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
    failures: Arc<AtomicU64>,
    retry: WriteRetry,
    /// Flushes asked for while a write was failing, before the status said memory-only: they
    /// resolve when a rewrite succeeds or the writer degrades.
    held: Vec<oneshot::Sender<()>>,
}

impl Task {
    async fn run(mut self) {
        let mut failed_in_a_row = 0u32;
        loop {
            let error = match self.serve(failed_in_a_row > 0).await {
                Ok(()) => return,
                Err(error) => error,
            };
            failed_in_a_row = failed_in_a_row.saturating_add(1);
            self.failures.fetch_add(1, Ordering::Relaxed);
            let path = self.store.path().display().to_string();
            let wait = self.retry.wait(failed_in_a_row);
            if failed_in_a_row == self.retry.degrade_after {
                let reason = format!("writing the state file failed: {error}");
                tracing::error!(
                    %path,
                    %reason,
                    retry_in_ms = wait.as_millis(),
                    "health state runs in memory only: it will not survive a restart until a \
                     write succeeds again"
                );
                self.status.send_replace(PersistenceStatus::MemoryOnly { reason });
                self.release_held();
            } else if failed_in_a_row < self.retry.degrade_after {
                tracing::warn!(%path, %error, retry_in_ms = wait.as_millis(), "writing the state file failed; retrying");
            }
            if !self.pause(wait).await {
                return;
            }
        }
    }

    /// Waits `wait` before the next attempt, answering flushes meanwhile: at once when the
    /// status already says memory-only (nothing more will be written for now), otherwise when
    /// the next attempt settles. Returns `false` when the app is shutting down.
    async fn pause(&mut self, wait: Duration) -> bool {
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return true,
                request = self.flush_requests.recv() => match request {
                    None => {
                        self.release_held();
                        return false;
                    }
                    Some(done) if !self.status.borrow().is_durable() => {
                        let _ = done.send(());
                    }
                    Some(done) => self.held.push(done),
                },
            }
        }
    }

    fn release_held(&mut self) {
        for done in self.held.drain(..) {
            let _ = done.send(());
        }
    }

    /// `recovering`: the last attempt failed, so the file may be behind the registry.
    async fn serve(&mut self, recovering: bool) -> Result<(), StoreError> {
        // Restore clamped deadlines and skipped pristine entries: from here the file mirrors
        // memory exactly. After a failure this also writes whatever the failed batch held.
        self.resync().await?;
        if recovering {
            if !self.status.borrow().is_durable() {
                tracing::warn!(
                    path = %self.store.path().display(),
                    "the state file is written again: health state survives a restart"
                );
                self.status.send_replace(PersistenceStatus::Durable);
            }
            self.release_held();
        }
        loop {
            tokio::select! {
                request = self.flush_requests.recv() => {
                    let drained = self.drain(Vec::new()).await;
                    let Some(done) = request else { return drained };
                    match drained {
                        Ok(()) => {
                            let _ = done.send(());
                        }
                        // Answered once a retry succeeds or the writer degrades, not now: the
                        // caller asked to know that its transitions are in the file.
                        Err(error) => {
                            self.held.push(done);
                            return Err(error);
                        }
                    }
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
