//! The request log: every client request with its routing trace, kept in a bounded ring in
//! memory (for the UI) and appended to the state file by a task of its own, in batches, off the
//! request path. The ring starts with the file's newest requests, so the history survives a
//! restart; a page past the ring is read from the file. A record waits up to [`FLUSH_EVERY`] for others to share its write, so a busy
//! proxy writes a few times a second instead of once per request (each write wakes the
//! database's thread and takes its file lock). When the writer falls behind, records are dropped
//! from the file (never from the ring) rather than making a request wait; a crash loses at most
//! the last interval. [`RequestLog::close`] writes everything out.
//!
//! The log is also the door to the usage aggregates: a record is counted by the
//! [`UsageTracker`] as it is taken, and each batch's sums go to the file in the transaction
//! that writes the batch, so the file's aggregates always equal its entries summed.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use switchyard_core::UnixMillis;
use switchyard_core::text::bounded;
use switchyard_core::usage::ledger::{Ledger, UsageEntry};
use switchyard_store::{RequestFilter, RequestRecord, Store, UsageBatch};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use crate::usage::UsageTracker;

/// Requests kept in memory [default].
pub const RING: usize = 1_000;
/// Requests kept in the state file.
const KEEP_IN_FILE: u32 = 10_000;
/// Records waiting for the writer before new ones are dropped from the file.
const QUEUE: usize = 4_096;
/// How long a record waits for others to share its write.
const FLUSH_EVERY: Duration = Duration::from_millis(500);
/// Records a slow listener may fall behind by before it misses some.
const LISTENER_QUEUE: usize = 64;
/// The most records one write takes.
const BATCH: usize = 256;

/// Records are shared by the ring and the writer: the request path copies nothing.
pub type Shared = Arc<RequestRecord>;
/// A record on its way to the file, and whether the usage aggregates count it.
/// A record and, when usage is tracked, what it counted there (with bounded labels).
type Queued = (Shared, Option<UsageEntry>);
type Writer = (mpsc::Sender<Queued>, tokio::task::JoinHandle<()>);

/// The shared request log.
#[derive(Debug)]
pub struct RequestLog {
    recent: Mutex<VecDeque<Shared>>,
    /// How many requests `recent` holds at most.
    ring: usize,
    /// `None` without a state file, and once closed.
    writer: Mutex<Option<Writer>>,
    /// The state file, read for what the ring no longer holds.
    store: Option<Store>,
    listeners: broadcast::Sender<Shared>,
    usage: Arc<UsageTracker>,
}

impl RequestLog {
    /// A log that also writes to `store`, when there is one, and counts usage in `usage`;
    /// `ring` requests are kept in memory, starting with the file's newest.
    pub async fn start(store: Option<Store>, usage: Arc<UsageTracker>, ring: usize) -> Self {
        let ring = ring.max(1);
        let mut recent = VecDeque::with_capacity(ring);
        if let Some(store) = &store {
            let newest = store.recent_requests(u32::try_from(ring).unwrap_or(u32::MAX)).await;
            match newest {
                Ok(newest) => recent.extend(newest.into_iter().rev().map(Arc::new)),
                Err(error) => {
                    tracing::warn!(%error, "cannot read the request log's history; the Requests page starts empty");
                }
            }
        }
        let writer = store.clone().map(|store| {
            let (tx, rx) = mpsc::channel(QUEUE);
            (tx, tokio::spawn(write(store, rx, Arc::clone(&usage))))
        });
        Self {
            recent: Mutex::new(recent),
            ring,
            writer: Mutex::new(writer),
            store,
            listeners: broadcast::channel(LISTENER_QUEUE).0,
            usage,
        }
    }

    /// The usage aggregates and budgets the log counts into.
    pub fn usage(&self) -> &Arc<UsageTracker> {
        &self.usage
    }

    /// Keeps `record` of a request made through the key named `key`, counts its usage, and
    /// hands it to whoever listens (the desktop's fallback notices).
    pub fn record(&self, mut record: RequestRecord, key: Option<&str>) -> Shared {
        // Every string a client or an upstream could have chosen is bounded here, the one door
        // into the ring, the file and the notifications (the trace's strings are bounded as it
        // is built, since JSON cannot be cut).
        for text in [Some(&mut record.model), record.served_by.as_mut(), record.outcome.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Cow::Owned(kept) = bounded(text) {
                *text = kept;
            }
        }
        let counted = self.usage.observe(&record, key);
        let record = Arc::new(record);
        if let Some((writer, _)) = &*self.writer.lock()
            && writer.try_send((Arc::clone(&record), counted)).is_err()
        {
            tracing::debug!("request log writer is behind; this record stays in memory only");
        }
        let mut recent = self.recent.lock();
        if recent.len() >= self.ring {
            recent.pop_front();
        }
        recent.push_back(Arc::clone(&record));
        drop(recent);
        // Without listeners this is one atomic load.
        if self.listeners.receiver_count() > 0 {
            let _ = self.listeners.send(Arc::clone(&record));
        }
        record
    }

    /// Every request recorded from now on. A listener that falls behind misses records (it
    /// sees `Lagged`), it never slows requests down.
    pub fn subscribe(&self) -> broadcast::Receiver<Shared> {
        self.listeners.subscribe()
    }

    /// Stops the writer once everything recorded so far is in the file. Records made after
    /// this stay in memory only.
    pub async fn close(&self) {
        let writer = self.writer.lock().take();
        if let Some((tx, task)) = writer {
            drop(tx);
            let _ = task.await;
        }
    }

    /// The newest requests in memory first.
    pub fn recent(&self, limit: usize) -> Vec<RequestRecord> {
        self.in_ring(&RequestFilter::default(), 0, limit).0
    }

    /// Every request that arrived in `[from, to)`: what the ring holds, and from the state file
    /// what arrived before the ring's oldest (the file keeps its newest rows only). Traces are
    /// left out of the file's.
    pub async fn between(&self, from: UnixMillis, to: UnixMillis) -> Vec<RequestRecord> {
        let (oldest, ring) = {
            let recent = self.recent.lock();
            let oldest = recent.iter().map(|r| r.at).min();
            let inside = |r: &&Shared| from <= r.at && r.at < to;
            let ring: Vec<RequestRecord> =
                recent.iter().filter(inside).map(|r| RequestRecord::clone(r)).collect();
            (oldest, ring)
        };
        let mut all = Vec::new();
        let before = oldest.map_or(to, |oldest| oldest.min(to));
        if let Some(store) = &self.store
            && from < before
        {
            match store.requests_between(from, before).await {
                Ok(older) => all = older,
                Err(error) => tracing::warn!(%error, "cannot read the request log's file"),
            }
        }
        all.extend(ring);
        all
    }

    /// The newest requests that `filter` lets through, after skipping `offset` of them: from
    /// memory when the ring holds the whole page, else from the file (which holds everything
    /// the ring does, except the last moments' requests not written yet, and what was dropped
    /// when the writer fell behind).
    pub async fn page(
        &self,
        filter: &RequestFilter,
        offset: usize,
        limit: usize,
    ) -> Vec<RequestRecord> {
        let (page, whole) = self.in_ring(filter, offset, limit);
        if whole {
            return page;
        }
        if let Some(store) = &self.store {
            let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            match store.requests_page(filter, count(offset), count(limit)).await {
                Ok(from_file) => return from_file,
                Err(error) => tracing::warn!(%error, "cannot read the request log's file"),
            }
        }
        page
    }

    /// The page as memory has it, and whether that is the whole page: it is unless the ring
    /// ran out while older requests are in the file (there is one, and the ring is full: a
    /// ring that never filled holds every request since the file was empty).
    fn in_ring(
        &self,
        filter: &RequestFilter,
        offset: usize,
        limit: usize,
    ) -> (Vec<RequestRecord>, bool) {
        let recent = self.recent.lock();
        let newest = recent.iter().rev().filter(|r| filter.matches(r)).skip(offset).take(limit);
        let page: Vec<RequestRecord> = newest.map(|r| RequestRecord::clone(r)).collect();
        let whole = page.len() == limit || self.store.is_none() || recent.len() < self.ring;
        (page, whole)
    }
}

async fn write(store: Store, mut rx: mpsc::Receiver<Queued>, usage: Arc<UsageTracker>) {
    // The first kept hour the file was last compacted to: the delete runs when it moves.
    let mut compacted: Option<u64> = None;
    while let Some(batch) = next_batch(&mut rx).await {
        let mut sums = Ledger::default();
        for entry in batch.iter().filter_map(|(_, counted)| counted.as_ref()) {
            sums.add(entry);
        }
        let first_kept = usage.first_kept_hour();
        let first_kept_hour = (compacted != Some(first_kept)).then_some(first_kept);
        // Shared with the ring, not copied.
        let batch: Vec<Shared> = batch.into_iter().map(|(record, _)| record).collect();
        let usage = UsageBatch { sums: &sums, first_kept_hour };
        if let Err(error) = store.append_requests(&batch, KEEP_IN_FILE, Some(usage)).await {
            tracing::warn!(%error, "cannot write the request log; it stays in memory only");
            return;
        }
        compacted = Some(first_kept);
    }
}

/// Waits for a record, then gathers more until [`BATCH`] of them or [`FLUSH_EVERY`] after the
/// first. `None` once the log is closed and everything is taken.
async fn next_batch<T>(rx: &mut mpsc::Receiver<T>) -> Option<Vec<T>> {
    let mut batch = vec![rx.recv().await?];
    let due = Instant::now() + FLUSH_EVERY;
    while batch.len() < BATCH {
        match tokio::time::timeout_at(due, rx.recv()).await {
            Ok(Some(next)) => batch.push(next),
            // Closed (write what there is; the next call says so) or due.
            Ok(None) | Err(_) => break,
        }
    }
    Some(batch)
}

#[cfg(test)]
mod tests {

    use super::*;

    fn record(i: u64) -> RequestRecord {
        RequestRecord {
            at: UnixMillis(i),
            dialect: "openai".into(),
            model: "smart".into(),
            served_by: Some("oa/gpt-4o".into()),
            status: 200,
            attempts: 1,
            duration_ms: 3,
            trace: "[]".into(),
            outcome: Some("complete".into()),
            first_byte_ms: Some(1),
            usage: None,
            cost: None,
            local_key: None,
            combo: Some("smart".into()),
            fallback: false,
            session: None,
            credential: None,
            session_home: None,
        }
    }

    fn tracker() -> Arc<UsageTracker> {
        let clock = switchyard_core::ManualClock::new(UnixMillis(1_800_000_000_000));
        let tracker = UsageTracker::new(Arc::new(clock), Arc::default());
        tracker.configure(&crate::config::Config::default());
        Arc::new(tracker)
    }

    #[tokio::test]
    async fn records_reach_the_ring_at_once_and_the_file_by_close() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).await.unwrap();
        let log = RequestLog::start(Some(store.clone()), tracker(), RING).await;
        for i in 0..3 {
            log.record(record(i), None);
        }
        let newest: Vec<u64> = log.recent(2).iter().map(|r| r.at.0).collect();
        assert_eq!(newest, [2, 1]);
        log.close().await;
        let stored = store.recent_requests(10).await.unwrap();
        assert_eq!(stored.len(), 3);
        assert_eq!(stored[0], record(2));
    }

    #[tokio::test(start_paused = true)]
    async fn records_share_a_write_until_the_interval_after_the_first_is_up() {
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let batch = tokio::spawn(async move { (next_batch(&mut rx).await, rx) });
        tx.send(Arc::new(record(0))).await.unwrap();
        tokio::time::sleep(FLUSH_EVERY / 2).await;
        tx.send(Arc::new(record(1))).await.unwrap();
        tokio::time::sleep(FLUSH_EVERY / 2).await;
        // Due now: a record sent after the interval goes to the next batch.
        tokio::time::sleep(Duration::from_millis(1)).await;
        tx.send(Arc::new(record(2))).await.unwrap();
        let (first, mut rx) = batch.await.unwrap();
        let at = |b: Vec<Shared>| b.iter().map(|r| r.at.0).collect::<Vec<_>>();
        assert_eq!(at(first.unwrap()), [0, 1]);
        drop(tx);
        assert_eq!(at(next_batch(&mut rx).await.unwrap()), [2], "closing writes what is left");
        assert!(next_batch(&mut rx).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_is_written_without_waiting() {
        let (tx, mut rx) = mpsc::channel(QUEUE);
        for i in 0..=BATCH as u64 {
            tx.send(Arc::new(record(i))).await.unwrap();
        }
        let started = Instant::now();
        assert_eq!(next_batch(&mut rx).await.unwrap().len(), BATCH);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn the_ring_starts_with_the_files_newest_and_pages_past_it_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).await.unwrap();
        let log = RequestLog::start(Some(store.clone()), tracker(), 3).await;
        for i in 0..5 {
            log.record(record(i), None);
        }
        log.close().await;
        let log = RequestLog::start(Some(store), tracker(), 3).await;
        let at = |page: Vec<RequestRecord>| page.iter().map(|r| r.at.0).collect::<Vec<_>>();
        assert_eq!(at(log.recent(10)), [4, 3, 2], "the ring, refilled");
        let all = RequestFilter::default();
        assert_eq!(at(log.page(&all, 0, 3).await), [4, 3, 2]);
        assert_eq!(at(log.page(&all, 2, 3).await), [2, 1, 0], "past the ring: the file");
        assert_eq!(at(log.page(&all, 5, 3).await), Vec::<u64>::new());
    }

    #[tokio::test]
    async fn the_ring_keeps_only_the_newest() {
        let log = RequestLog::start(None, tracker(), RING).await;
        for i in 0..(RING as u64 + 5) {
            log.record(record(i), None);
        }
        let all = log.recent(usize::MAX);
        assert_eq!(all.len(), RING);
        assert_eq!(all.last().unwrap().at.0, 5);
    }
}
