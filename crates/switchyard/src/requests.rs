//! The request log: every client request with its routing trace, kept in a bounded ring in
//! memory (for the UI) and appended to the state file by a task of its own, in batches, off the
//! request path. When the writer falls behind, records are dropped from the file (never from
//! the ring) rather than making a request wait.

use std::collections::VecDeque;

use parking_lot::Mutex;
use switchyard_store::{RequestRecord, Store};
use tokio::sync::mpsc;

/// Requests kept in memory.
const RING: usize = 1_000;
/// Requests kept in the state file.
const KEEP_IN_FILE: u32 = 10_000;
/// Records waiting for the writer before new ones are dropped from the file.
const QUEUE: usize = 4_096;

/// The shared request log.
#[derive(Debug)]
pub struct RequestLog {
    recent: Mutex<VecDeque<RequestRecord>>,
    writer: Option<(mpsc::Sender<RequestRecord>, tokio::task::JoinHandle<()>)>,
}

impl RequestLog {
    /// A log that also writes to `store`, when there is one.
    pub fn start(store: Option<Store>) -> Self {
        let writer = store.map(|store| {
            let (tx, rx) = mpsc::channel(QUEUE);
            (tx, tokio::spawn(write(store, rx)))
        });
        Self { recent: Mutex::new(VecDeque::with_capacity(RING)), writer }
    }

    pub fn record(&self, record: RequestRecord) {
        if let Some((writer, _)) = &self.writer
            && writer.try_send(record.clone()).is_err()
        {
            tracing::debug!("request log writer is behind; this record stays in memory only");
        }
        let mut recent = self.recent.lock();
        if recent.len() == RING {
            recent.pop_front();
        }
        recent.push_back(record);
    }

    /// Stops the writer once everything recorded so far is in the file.
    pub async fn close(self) {
        if let Some((tx, task)) = self.writer {
            drop(tx);
            let _ = task.await;
        }
    }

    /// The newest requests first.
    pub fn recent(&self, limit: usize) -> Vec<RequestRecord> {
        self.newest(|_| true, 0, limit)
    }

    /// The newest requests that pass `filter`, after skipping `offset` of them.
    pub fn newest(
        &self,
        filter: impl Fn(&RequestRecord) -> bool,
        offset: usize,
        limit: usize,
    ) -> Vec<RequestRecord> {
        let recent = self.recent.lock();
        recent.iter().rev().filter(|r| filter(r)).skip(offset).take(limit).cloned().collect()
    }
}

async fn write(store: Store, mut rx: mpsc::Receiver<RequestRecord>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < 256
            && let Ok(next) = rx.try_recv()
        {
            batch.push(next);
        }
        if let Err(error) = store.append_requests(&batch, KEEP_IN_FILE).await {
            tracing::warn!(%error, "cannot write the request log; it stays in memory only");
            return;
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::UnixMillis;

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
        }
    }

    #[tokio::test]
    async fn records_reach_the_ring_at_once_and_the_file_by_close() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).await.unwrap();
        let log = RequestLog::start(Some(store.clone()));
        for i in 0..3 {
            log.record(record(i));
        }
        let newest: Vec<u64> = log.recent(2).iter().map(|r| r.at.0).collect();
        assert_eq!(newest, [2, 1]);
        log.close().await;
        let stored = store.recent_requests(10).await.unwrap();
        assert_eq!(stored.len(), 3);
        assert_eq!(stored[0], record(2));
    }

    #[tokio::test]
    async fn the_ring_keeps_only_the_newest() {
        let log = RequestLog::start(None);
        for i in 0..(RING as u64 + 5) {
            log.record(record(i));
        }
        let all = log.recent(usize::MAX);
        assert_eq!(all.len(), RING);
        assert_eq!(all.last().unwrap().at.0, 5);
    }
}
