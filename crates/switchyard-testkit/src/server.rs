//! The mock's lifecycle: bind, accept, serve, stop.
//!
//! The accept loop is our own (plain hyper HTTP/1.1 per connection) rather than a framework's,
//! for two reasons: every accepted socket gets `TCP_NODELAY` (without it, streamed events wait
//! ~40 ms for Nagle and delayed ACK, which would swamp any benchmark), and each connection has a
//! [`ConnectionControl`] through which a handler or a body can drop its own connection (with a
//! TCP reset, or mid-body).
//!
//! Invariants:
//! - The mock listens on 127.0.0.1 only, on the port asked for (0 in every test).
//! - Dropping the [`MockUpstream`] stops the accept loop and every connection task; nothing
//!   outlives it. [`MockUpstream::shutdown`] does the same and waits until all sockets are closed.

mod cache;
mod connection;
mod exchange;
mod route;

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchyard_core::{Clock, SystemClock};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

pub(crate) use self::connection::ConnectionControl;
use crate::behavior::{Behavior, Flood};
use crate::record::{Attempt, Journal, Occupancy, Peaks};
use crate::script::{Rule, Script, Scripts};

/// State shared by the handle and every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) scripts: Scripts,
    pub(crate) journal: Journal,
    pub(crate) occupancy: Arc<Occupancy>,
    /// Connections accepted and not yet closed.
    pub(crate) connections: Arc<Occupancy>,
    /// Listed by the model endpoints in addition to every scripted model.
    pub(crate) listed_models: Vec<String>,
    /// Listed too, as embedding models (as is any listed model whose name mentions `embed`).
    pub(crate) embedding_models: Vec<String>,
    /// Requests marked as probes (`x-switchyard-probe`) open at once, per credential and model.
    pub(crate) probes: Arc<Peaks>,
    /// Generation and embeddings requests open at once, per credential.
    pub(crate) credentials: Arc<Peaks>,
    /// When set, the model endpoints answer with this flood instead of a list.
    pub(crate) listing_flood: std::sync::Mutex<Option<Flood>>,
    /// Each credential's prompt cache, once a test turns it on.
    pub(crate) prompt_cache: cache::PromptCache,
    /// The quota each credential's answers report (`x-ratelimit-*-requests`).
    pub(crate) quota: std::sync::Mutex<std::collections::HashMap<String, Quota>>,
    /// The time a status's `{epoch+N}` placeholders are counted from (see [`crate::Status::at`]).
    pub(crate) clock: Arc<dyn Clock>,
}

/// What a credential's answers say is left of its request quota.
#[derive(Clone, Debug)]
pub(crate) struct Quota {
    remaining: u64,
    limit: u64,
    /// `x-ratelimit-reset-requests`, as sent (`60s`).
    reset: String,
}

impl Quota {
    pub(crate) fn headers(&self) -> Vec<(http::HeaderName, http::HeaderValue)> {
        let value = |v: String| http::HeaderValue::from_str(&v).expect("ASCII");
        vec![
            (
                http::HeaderName::from_static("x-ratelimit-limit-requests"),
                value(self.limit.to_string()),
            ),
            (
                http::HeaderName::from_static("x-ratelimit-remaining-requests"),
                value(self.remaining.to_string()),
            ),
            (
                http::HeaderName::from_static("x-ratelimit-reset-requests"),
                value(self.reset.clone()),
            ),
        ]
    }
}

/// A running mock upstream on 127.0.0.1. Serves until dropped.
#[derive(Debug)]
pub struct MockUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Options for [`MockUpstream::builder`].
#[derive(Debug, Default)]
#[must_use]
pub struct MockBuilder {
    port: u16,
    /// `None`: 127.0.0.1.
    ip: Option<IpAddr>,
    script: Script,
    models: Vec<String>,
    embedding_models: Vec<String>,
    forget_attempts: bool,
    record_dir: Option<PathBuf>,
    /// `None`: the system clock.
    clock: Option<Arc<dyn Clock>>,
}

impl MockBuilder {
    /// A fixed port, for the binary; tests keep the default 0.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Another address than 127.0.0.1: for a test that needs the mock at an address that is not
    /// loopback (team mode never shares a provider at a loopback address).
    pub fn ip(mut self, ip: IpAddr) -> Self {
        self.ip = Some(ip);
        self
    }

    pub fn script(mut self, script: Script) -> Self {
        self.script = script;
        self
    }

    /// Models the listing endpoints report besides the scripted ones.
    pub fn models(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.models.extend(names.into_iter().map(Into::into));
        self
    }

    /// Embedding models the listing endpoints report besides the scripted ones: Gemini's
    /// listing gives them `supportedGenerationMethods: ["embedContent", "batchEmbedContents"]`.
    /// Needed only for a name that does not mention `embed`: every listed model whose name does
    /// (`text-embedding-3-small`, `gemini-embedding-001`) is listed as an embedding model anyway.
    /// Any model answers embeddings requests, listed or not.
    pub fn embedding_models(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.embedding_models.extend(names.into_iter().map(Into::into));
        self
    }

    /// For long benchmarks: keep counting attempts but do not store them, so memory stays flat.
    /// [`MockUpstream::attempts`] is then always empty.
    pub fn forget_attempts(mut self) -> Self {
        self.forget_attempts = true;
        self
    }

    /// Also write every attempt to `dir` as `<seq>.json` (see [`Attempt::to_json`]), for
    /// tests that run the mock as a separate process. The directory is created if missing.
    pub fn record_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.record_dir = Some(dir.into());
        self
    }

    /// The clock a status's `{epoch+N}` header placeholders read (see [`crate::Status::at`]); the
    /// system clock by default, which is what a proxy in another process reads too. A test
    /// whose proxy runs on a [`crate::ManualClock`] passes the same clock here.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Binds and starts serving on the current tokio runtime.
    pub async fn start(self) -> io::Result<MockUpstream> {
        if let Some(dir) = &self.record_dir {
            std::fs::create_dir_all(dir)?;
        }
        let listener =
            TcpListener::bind((self.ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)), self.port))
                .await?;
        let addr = listener.local_addr()?;
        let scripts = Scripts::default();
        scripts.load(self.script);
        let shared = Arc::new(Shared {
            scripts,
            journal: Journal::new(Instant::now(), !self.forget_attempts, self.record_dir),
            occupancy: Arc::new(Occupancy::new()),
            connections: Arc::new(Occupancy::new()),
            probes: Arc::default(),
            credentials: Arc::new(Peaks::with_abandoned()),
            prompt_cache: cache::PromptCache::default(),
            quota: std::sync::Mutex::default(),
            listed_models: self.models,
            embedding_models: self.embedding_models,
            listing_flood: std::sync::Mutex::default(),
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
        });
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped));
        Ok(MockUpstream { addr, shared, stop: Some(stop), task: Some(task) })
    }
}

impl MockUpstream {
    /// Starts a mock on 127.0.0.1 and a free port.
    ///
    /// # Panics
    /// When no loopback port can be bound: nothing useful can happen in that test anyway.
    pub async fn start() -> Self {
        Self::builder().start().await.expect("bind the mock upstream on 127.0.0.1:0")
    }

    pub fn builder() -> MockBuilder {
        MockBuilder::default()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a path: append `/v1` for an OpenAI-style base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The full URL of `path` on this mock.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// From now on the model endpoints answer with `flood` instead of a list (`None`: a list
    /// again).
    pub fn flood_model_lists(&self, flood: Option<Flood>) {
        *self.shared.listing_flood.lock().expect("the flood lock is never poisoned") = flood;
    }

    /// Appends one behaviour to `model`'s queue. Generation and embeddings requests for the
    /// model take from the same queue, one behaviour per attempt.
    pub fn enqueue(&self, model: &str, behavior: impl Into<Behavior>) {
        self.shared.scripts.enqueue(model, [behavior.into()]);
    }

    /// Keeps a prompt cache per credential from now on: a prompt prefix a key was sent before
    /// is reported read from the cache (`cache_read_input_tokens`, `cached_tokens`,
    /// `cachedContentTokenCount`), the rest as uncached input. Replies with scripted usage
    /// report that instead.
    pub fn cache_prompts(&self) {
        self.shared.prompt_cache.turn_on();
    }

    /// From now on, every answer on `credential` (its key, as [`Attempt::api_key`] reads it)
    /// says `remaining` of `limit` requests are left until `reset` (a Go duration, `60s`), in
    /// OpenAI's `x-ratelimit-*-requests` headers, as real providers say it on every answer.
    pub fn report_quota(&self, credential: &str, remaining: u64, limit: u64, reset: &str) {
        let quota = Quota { remaining, limit, reset: reset.to_owned() };
        self.shared.quota.lock().expect("never poisoned").insert(credential.to_owned(), quota);
    }

    /// Appends behaviours to `model`'s queue, one per future attempt.
    pub fn script(&self, model: &str, behaviors: impl IntoIterator<Item = Behavior>) {
        self.shared.scripts.enqueue(model, behaviors);
    }

    /// Adds a content rule after `model`'s other rules (use [`crate::ANY_MODEL`] for every
    /// model): requests it matches get its behaviour before the queue is looked at.
    pub fn add_rule(&self, model: &str, rule: Rule) {
        self.shared.scripts.add_rule(model, rule);
    }

    /// What `model` does once its queue is empty (a normal reply unless set).
    pub fn set_default(&self, model: &str, behavior: impl Into<Behavior>) {
        self.shared.scripts.set_default(model, behavior.into());
    }

    /// Appends every model's queue from `script` and takes its defaults.
    pub fn load(&self, script: Script) {
        self.shared.scripts.load(script);
    }

    /// Forgets every rule, queue and default: all models reply normally again.
    pub fn clear_scripts(&self) {
        self.shared.scripts.clear();
    }

    /// Every recorded attempt, in order of arrival.
    pub fn attempts(&self) -> Vec<Attempt> {
        self.shared.journal.attempts()
    }

    pub fn attempts_for(&self, model: &str) -> Vec<Attempt> {
        self.shared.journal.attempts_for(model)
    }

    /// Every recorded embeddings attempt (OpenAI `/v1/embeddings`, Gemini `:embedContent` and
    /// `:batchEmbedContents`), in order of arrival: [`Attempt::endpoint`] is
    /// [`crate::Endpoint::Embeddings`].
    pub fn embedding_attempts(&self) -> Vec<Attempt> {
        let mut attempts = self.attempts();
        attempts.retain(|attempt| attempt.endpoint == crate::Endpoint::Embeddings);
        attempts
    }

    pub fn attempt_count(&self, model: &str) -> usize {
        self.shared.journal.count_for(model)
    }

    pub fn total_attempts(&self) -> usize {
        self.shared.journal.total()
    }

    /// Forgets the recorded attempts (scripts are kept).
    pub fn clear(&self) {
        self.shared.journal.clear();
    }

    /// Resolves once at least `n` attempts have been recorded since the last [`Self::clear`],
    /// and returns them. Wrap it in `tokio::time::timeout` so a broken test fails instead of
    /// hanging.
    pub async fn wait_for_attempts(&self, n: usize) -> Vec<Attempt> {
        self.shared.journal.wait_for(n).await;
        self.attempts()
    }

    /// The most requests marked `x-switchyard-probe` (Switchyard's recovery probes) that were
    /// open at once, per `credential model` (the credential as [`Attempt::api_key`] reads it,
    /// the model from the body or, for Gemini, the path). A request counts from arrival until
    /// its answer is sent in full or it is abandoned.
    pub fn probe_peaks(&self) -> std::collections::HashMap<String, usize> {
        self.shared.probes.peaks()
    }

    /// The most generation and embeddings requests that were open at once on each credential (as
    /// [`Attempt::api_key`] reads it), from arrival until the answer was sent in full or the
    /// mock let go of it.
    pub fn credential_peaks(&self) -> std::collections::HashMap<String, usize> {
        self.shared.credentials.peaks()
    }

    /// Requests received whose answer has not finished (hanging, stalled, still streaming).
    pub fn in_flight(&self) -> usize {
        self.shared.occupancy.current()
    }

    /// Resolves when exactly `n` requests are in flight; `0` proves the client let go of every
    /// hanging or stalled request.
    pub async fn wait_for_in_flight(&self, n: usize) {
        self.shared.occupancy.wait_for(n).await;
    }

    /// Requests whose answer was not sent in full: the client let go first (a hedge's loser,
    /// a client that left), or a scripted fault ended it.
    pub fn unfinished_answers(&self) -> u64 {
        self.shared.occupancy.unfinished()
    }

    /// Every request received, whatever it asked for (model lists, token counts and unknown
    /// paths too, which [`Self::attempts`] does not record), answered or not.
    pub fn requests_received(&self) -> u64 {
        self.shared.occupancy.entered()
    }

    /// Every connection ever accepted, with or without a request on it: `0` proves no client
    /// reached the mock at all.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.connections.entered()
    }

    /// Connections accepted and not closed yet: how many a client keeps open (its idle pool
    /// included).
    pub fn open_connections(&self) -> usize {
        self.shared.connections.current()
    }

    /// Resolves once at most `n` connections are open.
    pub async fn wait_for_open_connections_at_most(&self, n: usize) {
        self.shared.connections.wait_at_most(n).await;
    }

    /// Stops accepting, drops every connection and waits until all of them are closed.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Accepts until told to stop; owns every connection task so they all end with it.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection::serve(stream, Arc::clone(&shared)));
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next() => {}
        }
    }
    connections.shutdown().await;
}
