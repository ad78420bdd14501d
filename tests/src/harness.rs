//! A real Switchyard server on `127.0.0.1:0` with a real state file, in front of the testkit's
//! mock upstream, for end-to-end tests.
//!
//! Providers point at the one mock: `oa` (OpenAI dialect, keys `oa-1` and `oa-2`), `an`
//! (Anthropic, key `an-1`) and `ge` (Gemini, key `ge-1`); combos are whatever the test adds.
//!
//! A [`Setup`] changes what a test needs beyond the defaults: shorter deadlines, a breaker
//! profile for every provider, and a [`ManualClock`] for every resilience decision, so a test
//! can step over a 30 s cooldown instead of waiting for it. Deadlines stay on real time: they
//! are what a test measures.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use switchyard::keys::LocalKeys;
use switchyard::server::ipc::InProcess;
use switchyard::server::{Limits, SHUTDOWN_GRACE};
use switchyard::{App, Launch};
use switchyard_core::resilience::HealthSnapshot;
use switchyard_core::resilience::registry::{BreakerView, CredentialView, LockoutView};
use switchyard_core::settings::TimeoutSettings;
use switchyard_core::{CandidateKey, Clock, ManualClock, SystemClock, UnixMillis};
use switchyard_secrets::{MemoryStore, SecretStore};
use switchyard_testkit::{Attempt, MockUpstream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A combo `smart`: `oa/gpt-4o`, then `an/claude-fallback`.
pub const FALLBACK: &str = r#"
[[combos]]
name = "smart"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-fallback" }]
"#;

/// The config file a harness writes in its data directory and runs on (edits through the
/// API are saved to it).
pub const CONFIG_FILE: &str = "harness.toml";

/// A fixed instant for manual clocks: every remaining time is then exact.
pub const T0: UnixMillis = UnixMillis(1_800_000_000_000);

/// Bounds every wait on the mock, so a broken proxy fails the test instead of hanging it.
pub const WATCHDOG: std::time::Duration = std::time::Duration::from_secs(10);

/// A provider key that must never show up anywhere but in the upstream request
/// (`env:CANARY` in a test's config).
pub const CANARY: &str = "sk-canary-7f3a9c1e5b2d4068";

/// Whether a real Secret Service is there for the keychain tests (`scripts/keychain-test` sets
/// `SWITCHYARD_KEYCHAIN_TESTS=1` in a throwaway session); without one a test says it did not
/// run rather than pass silently, and never touches a desktop's keyring.
#[expect(clippy::print_stderr, reason = "a skipped run says so, or it would pass silently")]
pub fn keychain_tests() -> bool {
    let on = std::env::var("SWITCHYARD_KEYCHAIN_TESTS").as_deref() == Ok("1");
    if !on {
        eprintln!(
            "not run: set SWITCHYARD_KEYCHAIN_TESTS=1 with a Secret Service (scripts/keychain-test)"
        );
    }
    on
}

/// The local API key every harness accepts.
pub const LOCAL_KEY: &str = "sy-test-local-key";

/// The management token every harness accepts.
pub const MANAGEMENT_TOKEN: &str = "sy-test-management-token";

/// A running server and its mock upstream.
pub struct Harness {
    pub mock: MockUpstream,
    pub port: u16,
    pub http: reqwest::Client,
    pub app: Arc<AppHandle>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    /// Kept alive (and deleted on drop) with the harness.
    data: Option<tempfile::TempDir>,
    data_dir: std::path::PathBuf,
    in_process: InProcess,
}

/// The app behind a harness, for looking at health state.
#[derive(Debug)]
pub struct AppHandle {
    pub registry: Arc<switchyard_core::resilience::HealthRegistry>,
    /// The clock the app decides by: a test's [`ManualClock`], or the system clock.
    pub clock: Arc<dyn Clock>,
}

impl AppHandle {
    /// `now` as the app sees it.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    /// Every breaker, benched credential and active lockout, at the app's `now`.
    pub fn snapshot(&self) -> HealthSnapshot {
        self.registry.snapshot(self.now())
    }

    /// The provider's breaker, if it is tracked (a pristine breaker is not).
    pub fn breaker(&self, provider: &str) -> Option<BreakerView> {
        self.snapshot().breakers.into_iter().find(|b| b.provider.as_str() == provider)
    }

    /// The credential's cooldown, if it is benched.
    pub fn credential(&self, provider: &str, credential: &str) -> Option<CredentialView> {
        self.snapshot().credentials.into_iter().find(|c| {
            c.key.provider.as_str() == provider && c.key.credential.as_str() == credential
        })
    }

    /// Every active lockout as `provider/model@credential`, sorted.
    pub fn locked(&self) -> Vec<String> {
        let mut locked: Vec<String> =
            self.snapshot().lockouts.iter().map(|l| l.key.to_string()).collect();
        locked.sort();
        locked
    }

    /// Resolves once no recovery probe is in flight. A probe's slot is taken before the
    /// request that triggered it answers, so awaiting this after that answer waits for the
    /// probe's verdict to be recorded.
    pub async fn probes_settled(&self) {
        tokio::time::timeout(WATCHDOG, async {
            while self.snapshot().probes.iter().any(|p| p.probing) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every recovery probe settles");
    }

    /// The lockout of `provider/model@credential`, if active.
    pub fn lockout(&self, provider: &str, credential: &str, model: &str) -> Option<LockoutView> {
        let key = CandidateKey::new(provider, credential, model);
        self.snapshot().lockouts.into_iter().find(|l| l.key == key)
    }
}

/// How to start a harness, beyond the standard providers.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Appended to the config: combos, more providers, other settings sections. `{mock}`
    /// stands for the mock's base URL.
    pub extra: String,
    /// The `[settings.timeouts]` table. It is written by the harness, so a test that needs other
    /// deadlines changes them here rather than in `extra` (a second table would not parse).
    pub timeouts: TimeoutSettings,
    /// An inline TOML table used as the `breaker` of every standard provider, e.g.
    /// `{ failure_threshold = 3, degraded_threshold = 3 }`; the API-key profile when `None`.
    pub breaker: Option<String>,
    /// The clock behind every resilience decision; the system clock when `None`.
    pub clock: Option<ManualClock>,
    /// Where `keychain:` secrets resolve and where secrets sent to the API go; an empty
    /// in-memory store when `None`.
    pub secrets: Option<Arc<dyn SecretStore>>,
    /// Start on the config file a previous harness left in the data directory (with its edits)
    /// instead of writing a fresh one.
    pub reuse_config: bool,
    /// Run on the config kept in the state file (the desktop app, `serve` without
    /// `--config`) instead of writing a config file; `extra` and the deadlines are unused.
    pub stored_config: bool,
    /// How many requests the request log keeps in memory; the app's default when `None`.
    pub request_ring: Option<usize>,
    /// A built web UI to serve at `/` (as `serve --ui DIR`).
    pub ui: Option<std::path::PathBuf>,
    /// How long a client may take to send a request head; the server's default when `None`.
    pub header_read_timeout: Option<std::time::Duration>,
    /// The management token is the data directory's `management-token` file (made on first
    /// use, followed as it is rotated), as `serve` reads it, instead of [`MANAGEMENT_TOKEN`].
    pub management_token_file: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Self::new("")
    }
}

impl Setup {
    /// The standard deadlines are short, so a test of a deadline ends quickly.
    pub fn new(extra: &str) -> Self {
        Self {
            extra: extra.to_owned(),
            timeouts: TimeoutSettings {
                first_event_ms: 1500,
                first_byte_ms: 3000,
                non_stream_ms: 3000,
                idle_ms: 1000,
                total_ms: 20000,
                ..TimeoutSettings::default()
            },
            breaker: None,
            clock: None,
            secrets: None,
            reuse_config: false,
            stored_config: false,
            request_ring: None,
            ui: None,
            header_read_timeout: None,
            management_token_file: false,
        }
    }

    /// Keeps only `n` requests in memory: older pages of the Requests page come from the file.
    #[must_use]
    pub fn request_ring(mut self, n: usize) -> Self {
        self.request_ring = Some(n);
        self
    }

    /// Runs on the config kept in the state file, as the desktop app does.
    #[must_use]
    pub fn stored_config(mut self) -> Self {
        self.stored_config = true;
        self
    }

    /// Takes the management token from the data directory's file, as `serve` does.
    #[must_use]
    pub fn management_token_file(mut self) -> Self {
        self.management_token_file = true;
        self
    }

    /// Serves the web UI in `dir` at `/`.
    #[must_use]
    pub fn ui(mut self, dir: &Path) -> Self {
        self.ui = Some(dir.to_owned());
        self
    }

    /// Keeps the config file (and its edits) of the previous harness in the same directory.
    #[must_use]
    pub fn reuse_config(mut self) -> Self {
        self.reuse_config = true;
        self
    }

    /// Closes connections whose request head takes longer than `timeout` to arrive.
    #[must_use]
    pub fn header_read_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.header_read_timeout = Some(timeout);
        self
    }

    /// Resolves `keychain:` secrets from `store`.
    #[must_use]
    pub fn secrets(mut self, store: Arc<dyn SecretStore>) -> Self {
        self.secrets = Some(store);
        self
    }

    #[must_use]
    pub fn timeouts(mut self, change: impl FnOnce(&mut TimeoutSettings)) -> Self {
        change(&mut self.timeouts);
        self
    }

    #[must_use]
    pub fn breaker(mut self, table: &str) -> Self {
        self.breaker = Some(table.to_owned());
        self
    }

    /// The app reads `clock` (a clone: moving the test's copy moves the app's).
    #[must_use]
    pub fn clock(mut self, clock: &ManualClock) -> Self {
        self.clock = Some(clock.clone());
        self
    }
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness").field("port", &self.port).finish_non_exhaustive()
    }
}

/// The upstream keys the harness config references, as the config loader sees them.
fn env(var: &str) -> Option<String> {
    let key = match var {
        "CANARY" => CANARY,
        "OA_1" => "oa-1",
        "OA_2" => "oa-2",
        "AN_1" => "an-1",
        "GE_1" => "ge-1",
        // A team database nothing listens at: only ever validated, never connected to.
        "TEAM_DB" => "postgres://team@127.0.0.1:9/switchyard",
        _ => return None,
    };
    Some(key.to_owned())
}

/// The providers section for `mock`, followed by `extra` (combos, settings).
pub fn config_text(mock: &MockUpstream, extra: &str) -> String {
    setup_text(mock, &Setup::new(extra))
}

/// The whole config a harness started with `setup` runs on.
pub fn setup_text(mock: &MockUpstream, setup: &Setup) -> String {
    let base = mock.base_url();
    let breaker = setup.breaker.as_ref().map(|t| format!("breaker = {t}")).unwrap_or_default();
    let TimeoutSettings {
        connect_ms,
        first_event_ms,
        first_byte_ms,
        non_stream_ms,
        idle_ms,
        total_ms,
    } = setup.timeouts;
    let extra = setup.extra.replace("{mock}", &base);
    format!(
        r#"
[[providers]]
id = "oa"
kind = "openai"
base_url = "{base}/v1"
models = ["gpt-4o", "gpt-4o-mini"]
credentials = [{{ id = "oa-1", secret = "env:OA_1" }}, {{ id = "oa-2", secret = "env:OA_2" }}]
{breaker}

[[providers]]
id = "an"
kind = "anthropic"
base_url = "{base}"
credentials = [{{ id = "an-1", secret = "env:AN_1" }}]
{breaker}

[[providers]]
id = "ge"
kind = "gemini"
base_url = "{base}/v1beta"
credentials = [{{ id = "ge-1", secret = "env:GE_1" }}]
{breaker}

[settings.timeouts]
connect_ms = {connect_ms}
first_event_ms = {first_event_ms}
first_byte_ms = {first_byte_ms}
non_stream_ms = {non_stream_ms}
idle_ms = {idle_ms}
total_ms = {total_ms}

{extra}
"#
    )
}

impl Harness {
    /// A server with the standard providers plus `extra` config, state in a fresh directory.
    pub async fn start(extra: &str) -> Self {
        Self::start_with(Setup::new(extra)).await
    }

    /// A server as `setup` says, state in a fresh directory.
    pub async fn start_with(setup: Setup) -> Self {
        let data = tempfile::tempdir().expect("temp dir");
        let mock = MockUpstream::start().await;
        let mut harness = Self::start_in_with(mock, data.path(), setup).await;
        harness.data = Some(data);
        harness
    }

    /// A server whose resilience decisions read `clock`: advance it to step over cooldowns.
    pub async fn start_with_clock(extra: &str, clock: &ManualClock) -> Self {
        Self::start_with(Setup::new(extra).clock(clock)).await
    }

    /// A server on `mock` keeping its state in `data_dir` (for restart tests).
    pub async fn start_in(mock: MockUpstream, data_dir: &Path, extra: &str) -> Self {
        Self::start_in_with(mock, data_dir, Setup::new(extra)).await
    }

    /// A server on `mock` as `setup` says, keeping its state in `data_dir`.
    pub async fn start_in_with(mock: MockUpstream, data_dir: &Path, setup: Setup) -> Self {
        let file = data_dir.join(CONFIG_FILE);
        if !(setup.reuse_config || setup.stored_config) {
            std::fs::write(&file, setup_text(&mock, &setup)).expect("write the harness config");
        }
        let clock: Arc<dyn Clock> = match setup.clock {
            Some(clock) => Arc::new(clock),
            None => Arc::new(SystemClock),
        };
        let secrets = setup.secrets.unwrap_or_else(|| Arc::new(MemoryStore::default()));
        let mut launch = Launch::new(data_dir);
        if !setup.stored_config {
            launch = launch.config_file(file);
        }
        if let Some(n) = setup.request_ring {
            launch = launch.request_ring(n);
        }
        let launch = launch.clock(Arc::clone(&clock)).secrets(secrets).env(env);
        let app = App::start(launch).await.unwrap_or_else(|e| panic!("{e}"));
        let listener = switchyard::server::bind(0).await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut state = app
            .server_state(port, LocalKeys::new(Some(LOCAL_KEY.into())))
            .with_management_token(MANAGEMENT_TOKEN.into());
        if setup.management_token_file {
            let token = switchyard::keys::token_from_file(data_dir).expect("a management token");
            state.management = LocalKeys::management(data_dir, token);
        }
        if let Some(dir) = setup.ui {
            state = state.with_ui(dir);
        }
        let in_process = InProcess::new(state.clone()).expect("an in-process API");
        let handle = Arc::new(AppHandle { registry: Arc::clone(app.registry()), clock });
        let mut limits =
            Limits { max_connections: state.proxy.config().max_connections, ..Limits::default() };
        if let Some(timeout) = setup.header_read_timeout {
            limits.header_read_timeout = timeout;
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            let _ =
                switchyard::server::serve_with(listener, state, stopped, SHUTDOWN_GRACE, limits)
                    .await;
            app.shutdown().await;
        });
        Self {
            mock,
            port,
            http: reqwest::Client::new(),
            app: handle,
            stop: Some(stop),
            server: Some(server),
            data: None,
            data_dir: data_dir.to_owned(),
            in_process,
        }
    }

    /// The management API as the desktop window reaches it: in process, no token, no socket.
    pub fn in_process(&self) -> &InProcess {
        &self.in_process
    }

    /// Where the state file and the config file are.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `POST /api/config/import{query}` of the config file `text`, with the management token;
    /// the summary (a 200 is asserted).
    pub async fn import_config(&self, query: &str, text: &str) -> Value {
        let response = self
            .http
            .post(self.url(&format!("/api/config/import{query}")))
            .bearer_auth(MANAGEMENT_TOKEN)
            .body(text.to_owned())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "import{query}");
        response.json().await.unwrap()
    }

    /// What `switchyard status` says of this server: its report over the health page and the
    /// providers, as the command reads them from the API.
    pub async fn status(&self) -> switchyard::status::Report {
        let (_, health) = self.api_get("/api/monitoring/health").await;
        let (_, providers) = self.api_get("/api/providers").await;
        let health = serde_json::from_value(health).expect("the health page reads");
        let providers: Vec<switchyard::status::ProviderLook> =
            serde_json::from_value(providers).expect("the providers read");
        switchyard::status::report(&health, &providers)
    }

    /// `GET` on the management API: status and JSON body (`null` when there is none).
    pub async fn api_get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// `GET` of a text the management token reads (`/metrics`, a config export), once it
    /// answers 200.
    pub async fn api_text(&self, path: &str) -> String {
        let r = self.http.get(self.url(path)).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.text().await.unwrap()
    }

    /// A management API call with a JSON body: status and JSON body.
    pub async fn api(&self, method: reqwest::Method, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .request(method, self.url(path))
            .bearer_auth(MANAGEMENT_TOKEN)
            .json(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// An OpenAI chat request for `model`.
    pub fn openai(&self, model: &str, stream: bool) -> reqwest::RequestBuilder {
        self.http
            .post(self.url("/v1/chat/completions"))
            .bearer_auth(LOCAL_KEY)
            .json(&json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
    }

    /// The newest entry of the request log, once there is one: a streamed request is logged
    /// when its stream ends, which may be a moment after the client read its last byte.
    /// Waits until the request log holds `n` requests: a stream is logged when it ends, a
    /// moment after its client read the last byte.
    pub async fn logged(&self, n: usize) {
        tokio::time::timeout(WATCHDOG, async {
            loop {
                let (_, log) = self.api_get("/api/requests").await;
                if log.as_array().map_or(0, Vec::len) >= n {
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every request is logged");
    }

    pub async fn newest_logged(&self) -> Value {
        tokio::time::timeout(WATCHDOG, async {
            loop {
                let (_, log) = self.api_get("/api/requests").await;
                if let Some(entry) = log.as_array().and_then(|a| a.first()).cloned() {
                    return entry;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the request is logged when it ends")
    }

    /// An Anthropic messages request for `model`.
    pub fn anthropic(&self, model: &str, stream: bool) -> reqwest::RequestBuilder {
        self.http.post(self.url("/v1/messages")).header("x-api-key", LOCAL_KEY).json(&json!({
            "model": model, "max_tokens": 100, "stream": stream, "messages": [{"role": "user", "content": "hi"}]
        }))
    }

    /// Stops the server (finishing requests in flight) and flushes its state.
    pub async fn stop(mut self) -> MockUpstream {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        self.mock
    }
}

/// The text a non-streamed OpenAI answer carries.
pub fn openai_text(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().unwrap_or_default()
}

/// Status, headers and JSON body of a non-streamed answer.
pub async fn json_parts(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.expect("a JSON body"))
}

/// A response header as text; empty when absent.
pub fn header<'h>(headers: &'h reqwest::header::HeaderMap, name: &str) -> &'h str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The upstream key each attempt presented, in order.
pub fn keys_of(attempts: &[Attempt]) -> Vec<String> {
    attempts.iter().map(|a| a.api_key().unwrap_or("").to_owned()).collect()
}

/// Whether the mock's `attempt` was one of the proxy's own recovery probes (they carry
/// `x-switchyard-probe`), as opposed to a user's request.
pub fn is_probe(attempt: &Attempt) -> bool {
    attempt.header("x-switchyard-probe").is_some()
}

/// The attempts that were users' requests, not probes.
pub fn user_requests(attempts: &[Attempt]) -> Vec<&Attempt> {
    attempts.iter().filter(|a| !is_probe(a)).collect()
}

/// The JSON of every `data:` line of an SSE body (`[DONE]` and non-JSON lines left out).
pub fn sse_data(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim_start()).ok())
        .collect()
}

/// The `event:` names of an SSE body, in order.
pub fn sse_events(text: &str) -> Vec<&str> {
    text.lines().filter_map(|line| line.strip_prefix("event:")).map(str::trim).collect()
}

/// The text an OpenAI stream carries, its content deltas joined.
pub fn openai_stream_text(text: &str) -> String {
    sse_data(text)
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect()
}

/// The text an Anthropic stream carries, its text deltas joined.
pub fn anthropic_stream_text(text: &str) -> String {
    sse_data(text)
        .iter()
        .filter(|event| event["type"] == "content_block_delta")
        .filter_map(|event| event["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// A loopback port nobody listens on: bound, then released. A provider pointed at it gets
/// "connection refused" at once.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind a probe port");
    listener.local_addr().expect("addr").port()
}

/// Sends a non-streamed OpenAI request for `model`: status, headers, JSON body.
pub async fn ask(h: &Harness, model: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    json_parts(h.openai(model, false).send().await.unwrap()).await
}
