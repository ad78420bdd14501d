//! What the mock observed: every attempt it received, and how many requests are still open.
//!
//! Tests synchronise on these, never on sleeps: [`Journal`] publishes its attempt count on a
//! `watch` channel and [`Occupancy`] publishes the number of requests in flight, so a test can
//! await "the third attempt has arrived" or "the proxy has let go of the upstream connection".
//!
//! With a record directory, each attempt is also written there as `<seq>.json` (see
//! [`Attempt::to_json`] for the format) for tests that run the mock as a process and a real
//! client against it: they read the files instead of an API.
//!
//! Invariants: an attempt is recorded (and its file written, atomically by rename) before any
//! byte of its answer is sent, so a test that awaits it can then act on a hanging or stalled
//! request, and a client that has read its answer has left every file behind; sequence numbers
//! are unique and increasing for the mock's whole life, even across [`Journal::clear`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::behavior::Behavior;
use crate::dialect::Dialect;

/// What an attempt asked the model for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// A generation: Chat Completions, Messages, Responses, `generateContent`.
    #[default]
    Generation,
    /// Embeddings: OpenAI's `/v1/embeddings` (dialect [`Dialect::OpenAi`]), Gemini's
    /// `:embedContent` and `:batchEmbedContents` ([`Dialect::Gemini`]).
    Embeddings,
}

/// One request the mock received for a model, and what it did with it.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// Order of arrival, from 0, across all models.
    pub seq: u64,
    pub dialect: Dialect,
    /// A generation or embeddings (the path tells which embeddings call).
    pub endpoint: Endpoint,
    /// From the body (OpenAI, Anthropic) or the path (Gemini); empty when the request had none.
    pub model: String,
    pub path: String,
    pub query: Option<String>,
    pub stream: bool,
    pub headers: HeaderMap,
    /// The request body; `Null` when it was not JSON.
    pub body: Value,
    /// The request body exactly as received, so a test can prove a proxy forwarded a client's
    /// bytes unchanged (which the parsed `body` cannot: it loses key order and spacing).
    pub raw_body: Bytes,
    pub behavior: Behavior,
    pub at: Instant,
    /// Time since the mock started.
    pub elapsed: Duration,
}

impl Attempt {
    /// A request header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The credential the client presented, in whichever place its dialect puts it:
    /// `Authorization: Bearer`, `x-api-key`, `x-goog-api-key` or Gemini's `?key=`.
    pub fn api_key(&self) -> Option<&str> {
        self.header("authorization")
            .map(|value| value.strip_prefix("Bearer ").unwrap_or(value))
            .or_else(|| self.header("x-api-key"))
            .or_else(|| self.header("x-goog-api-key"))
            .or_else(|| {
                self.query.as_deref()?.split('&').find_map(|pair| pair.strip_prefix("key="))
            })
    }

    /// Every credential the request carried, each by where it was and its digest (as `key`):
    /// a header of [`REDACTED_HEADERS`] (`authorization` without its `Bearer ` prefix), or
    /// `?key` for Gemini's query key. [`Attempt::api_key`] names one credential; this names all
    /// of them, so a test can tell a subscriber's own login (`Authorization: Bearer <token>`)
    /// from an API key (`x-api-key`) even when a request carries both.
    pub fn credentials(&self) -> Map<String, Value> {
        let mut found = Map::new();
        for &name in REDACTED_HEADERS {
            if let Some(value) = self.header(name) {
                let secret = value.strip_prefix("Bearer ").unwrap_or(value);
                found.insert(name.to_owned(), Value::String(key_digest(secret)));
            }
        }
        let query_key = self
            .query
            .as_deref()
            .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("key=")));
        if let Some(key) = query_key {
            found.insert("?key".to_owned(), Value::String(key_digest(key)));
        }
        found
    }

    /// The attempt as a record file holds it: `seq`, `dialect`, `endpoint` (`generation` or
    /// `embeddings`), `model`, `path`, `query`,
    /// `stream`, `headers` (name → value, repeated headers joined with `, `, credentials
    /// replaced by `[redacted]`), `body` (parsed, `null` when not JSON), `raw_body` (the exact
    /// bytes as UTF-8 text, or `raw_body_base64` when they are not UTF-8), `behavior`,
    /// `elapsed_ms`, `key` (the first 12 hex digits of the presented credential's SHA-256,
    /// `null` without one: which key served, without the key) and `credentials` (the same
    /// digest of every credential the request carried, by header name, `?key` for Gemini's
    /// query key: see [`Attempt::credentials`]). Headers that only name an account, such as
    /// Codex's `chatgpt-account-id`, are kept as sent.
    pub fn to_json(&self) -> Value {
        let mut headers = Map::new();
        for name in self.headers.keys() {
            let value = if REDACTED_HEADERS.contains(&name.as_str()) {
                "[redacted]".to_owned()
            } else {
                let values: Vec<String> = self
                    .headers
                    .get_all(name)
                    .iter()
                    .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
                    .collect();
                values.join(", ")
            };
            headers.insert(name.as_str().to_owned(), Value::String(value));
        }
        let mut record = json!({
            "seq": self.seq,
            "dialect": self.dialect,
            "endpoint": self.endpoint,
            "model": self.model,
            "path": self.path,
            "query": self.query,
            "stream": self.stream,
            "headers": headers,
            "body": self.body,
            "behavior": self.behavior,
            "elapsed_ms": u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX),
            "key": self.api_key().map(key_digest),
            "credentials": self.credentials(),
        });
        if let Ok(text) = std::str::from_utf8(&self.raw_body) {
            record["raw_body"] = Value::String(text.to_owned());
        } else {
            use base64::Engine as _;
            let encoded = base64::engine::general_purpose::STANDARD.encode(&self.raw_body);
            record["raw_body_base64"] = Value::String(encoded);
        }
        record
    }
}

/// A credential's short digest: tells keys apart in a record without holding them.
fn key_digest(key: &str) -> String {
    use sha2::{Digest as _, Sha256};
    use std::fmt::Write as _;
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().take(6).fold(String::with_capacity(12), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}

/// Headers that carry credentials: a record file names them but never holds their value, so
/// record directories can be kept as CI artefacts. `x-switchyard-key` is Switchyard's own key,
/// which a client sends beside its login and which must never reach an upstream: a record
/// names it when it did.
const REDACTED_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "x-switchyard-key",
    "proxy-authorization",
    "cookie",
];

/// The attempt log.
#[derive(Debug)]
pub(crate) struct Journal {
    log: Mutex<Log>,
    /// Attempts recorded since the last clear; published so waiters need no polling.
    count: watch::Sender<usize>,
    next_seq: AtomicU64,
    started: Instant,
    /// Off for long benchmarks: counts are kept, attempts are not.
    keep: bool,
    /// Where each attempt is also written as `<seq>.json`, when set.
    dir: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct Log {
    attempts: Vec<Attempt>,
    per_model: HashMap<String, usize>,
    total: usize,
}

impl Journal {
    pub(crate) fn new(started: Instant, keep: bool, dir: Option<PathBuf>) -> Self {
        Self {
            log: Mutex::default(),
            count: watch::Sender::new(0),
            next_seq: AtomicU64::new(0),
            started,
            keep,
            dir,
        }
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Keeps the attempt; with a record directory, writes its file first. The attempt is kept
    /// even when the file cannot be written: the error is for the exchange to answer with.
    pub(crate) fn record(&self, attempt: Attempt) -> std::io::Result<()> {
        // Blocking I/O on purpose: small files, and the answer must wait for the file.
        let written = self.dir.as_deref().map_or(Ok(()), |dir| write_record(dir, &attempt));
        let mut log = self.log.lock();
        match log.per_model.get_mut(&attempt.model) {
            Some(count) => *count += 1,
            None => {
                log.per_model.insert(attempt.model.clone(), 1);
            }
        }
        if self.keep {
            log.attempts.push(attempt);
        }
        log.total += 1;
        // Published under the lock so the count never goes backwards between two recorders.
        self.count.send_replace(log.total);
        written
    }

    pub(crate) fn attempts(&self) -> Vec<Attempt> {
        self.log.lock().attempts.clone()
    }

    pub(crate) fn attempts_for(&self, model: &str) -> Vec<Attempt> {
        self.log.lock().attempts.iter().filter(|a| a.model == model).cloned().collect()
    }

    pub(crate) fn count_for(&self, model: &str) -> usize {
        self.log.lock().per_model.get(model).copied().unwrap_or(0)
    }

    pub(crate) fn total(&self) -> usize {
        *self.count.borrow()
    }

    pub(crate) fn clear(&self) {
        let mut log = self.log.lock();
        *log = Log::default();
        self.count.send_replace(0);
    }

    /// Resolves once at least `n` attempts are recorded.
    pub(crate) async fn wait_for(&self, n: usize) {
        let mut count = self.count.subscribe();
        count.wait_for(|&c| c >= n).await.expect("the journal owns the sender");
    }
}

/// Writes `<seq>.json` (zero-padded, so a plain sort is arrival order) through a temporary
/// name and a rename: a reader never sees half a file.
fn write_record(dir: &Path, attempt: &Attempt) -> std::io::Result<()> {
    let name = format!("{:06}.json", attempt.seq);
    let partial = dir.join(format!(".{name}.partial"));
    let text = serde_json::to_vec_pretty(&attempt.to_json()).map_err(std::io::Error::other)?;
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, dir.join(&name)))
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(name).display())))
}

/// How many requests are being answered (or connections are open) right now.
#[derive(Debug)]
pub(crate) struct Occupancy {
    open: watch::Sender<usize>,
    /// Left before they were finished (see [`InFlight::finish`]).
    unfinished: AtomicU64,
    /// Every one that ever entered, finished or not.
    entered: AtomicU64,
}

impl Occupancy {
    pub(crate) fn new() -> Self {
        Self {
            open: watch::Sender::new(0),
            unfinished: AtomicU64::new(0),
            entered: AtomicU64::new(0),
        }
    }

    pub(crate) fn entered(&self) -> u64 {
        self.entered.load(Ordering::Relaxed)
    }

    pub(crate) fn unfinished(&self) -> u64 {
        self.unfinished.load(Ordering::Relaxed)
    }

    pub(crate) fn current(&self) -> usize {
        *self.open.borrow()
    }

    pub(crate) async fn wait_for(&self, n: usize) {
        let mut open = self.open.subscribe();
        open.wait_for(|&c| c == n).await.expect("the occupancy owns the sender");
    }

    pub(crate) async fn wait_at_most(&self, n: usize) {
        let mut open = self.open.subscribe();
        open.wait_for(|&c| c <= n).await.expect("the occupancy owns the sender");
    }
}

/// One open request: counted from arrival until its answer has been sent in full, or until
/// the request is abandoned (client gone, connection cut, mock stopped). Also one open
/// connection, counted from accept until it is closed.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Occupancy>, Vec<Concurrent>, bool);

impl InFlight {
    pub(crate) fn enter(occupancy: &Arc<Occupancy>) -> Self {
        occupancy.entered.fetch_add(1, Ordering::Relaxed);
        occupancy.open.send_modify(|open| *open += 1);
        Self(Arc::clone(occupancy), Vec::new(), false)
    }

    /// Done in full; dropped without this, it counts as left unfinished.
    pub(crate) fn finish(mut self) {
        self.2 = true;
        for group in &mut self.1 {
            group.finished = true;
        }
    }

    /// Also counts the request in `group` of `peaks` for as long as it is open.
    pub(crate) fn count_in(&mut self, peaks: &Arc<Peaks>, group: String) {
        self.1.push(Concurrent::enter(peaks, group));
    }
}

/// How many requests of each group were open at once, at most: for requests a client marks as
/// its own (Switchyard's recovery probes), per credential and model, so a test can check that
/// the client never has two of one group out at a time.
///
/// A request the client abandoned (a probe the proxy gave up on when its deadline passed) is
/// left out of the count: the mock notices a closed connection only when its task next runs,
/// which on a loaded machine can be after the client's next request of the group arrived, so
/// that overlap says nothing about the client. Two requests that were both answered in full
/// and overlapped were both out at once.
#[derive(Debug, Default)]
pub(crate) struct Peaks {
    groups: Mutex<HashMap<String, Group>>,
    /// Count abandoned requests too, from arrival until the mock let go of them: for a cap
    /// the client must keep, a request it gave up on was still out until then.
    with_abandoned: bool,
}

/// One group's requests: arrivals and ends in order, and which requests were abandoned.
#[derive(Debug, Default)]
struct Group {
    next: u64,
    /// (request, `true` on arrival, `false` at its end).
    events: Vec<(u64, bool)>,
    abandoned: std::collections::HashSet<u64>,
}

impl Peaks {
    /// Peaks that count every request, abandoned or not.
    pub(crate) fn with_abandoned() -> Self {
        Self { with_abandoned: true, ..Self::default() }
    }

    pub(crate) fn peaks(&self) -> HashMap<String, usize> {
        let groups = self.groups.lock();
        groups
            .iter()
            .map(|(name, group)| {
                let (mut open, mut peak) = (0usize, 0usize);
                for &(id, arrival) in &group.events {
                    if !self.with_abandoned && group.abandoned.contains(&id) {
                        continue;
                    }
                    if arrival {
                        open += 1;
                        peak = peak.max(open);
                    } else {
                        open -= 1;
                    }
                }
                (name.clone(), peak)
            })
            .collect()
    }
}

/// One open request of a group (see [`Peaks`]).
#[derive(Debug)]
struct Concurrent {
    peaks: Arc<Peaks>,
    group: String,
    id: u64,
    finished: bool,
}

impl Concurrent {
    fn enter(peaks: &Arc<Peaks>, group: String) -> Self {
        let mut groups = peaks.groups.lock();
        let entry = groups.entry(group.clone()).or_default();
        let id = entry.next;
        entry.next += 1;
        entry.events.push((id, true));
        Self { peaks: Arc::clone(peaks), group, id, finished: false }
    }
}

impl Drop for Concurrent {
    fn drop(&mut self) {
        if let Some(group) = self.peaks.groups.lock().get_mut(&self.group) {
            group.events.push((self.id, false));
            if !self.finished {
                group.abandoned.insert(self.id);
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.2 {
            self.0.unfinished.fetch_add(1, Ordering::Relaxed);
        }
        self.0.open.send_modify(|open| *open -= 1);
    }
}
