//! A real Switchyard server on `127.0.0.1:0` with a real state file, in front of the testkit's
//! mock upstream, for end-to-end tests.
//!
//! Providers point at the one mock: `oa` (OpenAI dialect, keys `oa-1` and `oa-2`), `an`
//! (Anthropic, key `an-1`) and `ge` (Gemini, key `ge-1`); combos are whatever the test adds.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use switchyard::App;
use switchyard::config::Config;
use switchyard::keys::LocalKeys;
use switchyard_core::SystemClock;
use switchyard_testkit::MockUpstream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The local API key every harness accepts.
pub const LOCAL_KEY: &str = "sy-test-local-key";

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
}

/// The app behind a harness, for looking at health state.
#[derive(Debug)]
pub struct AppHandle {
    pub registry: Arc<switchyard_core::resilience::HealthRegistry>,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness").field("port", &self.port).finish_non_exhaustive()
    }
}

/// The upstream keys the harness config references, as the config loader sees them.
fn env(var: &str) -> Option<String> {
    let key = match var {
        "OA_1" => "oa-1",
        "OA_2" => "oa-2",
        "AN_1" => "an-1",
        "GE_1" => "ge-1",
        _ => return None,
    };
    Some(key.to_owned())
}

/// The providers section for `mock`, followed by `extra` (combos, settings).
pub fn config_text(mock: &MockUpstream, extra: &str) -> String {
    let base = mock.base_url();
    format!(
        r#"
[[providers]]
id = "oa"
kind = "openai"
base_url = "{base}/v1"
models = ["gpt-4o", "gpt-4o-mini"]
credentials = [{{ id = "oa-1", secret = "env:OA_1" }}, {{ id = "oa-2", secret = "env:OA_2" }}]

[[providers]]
id = "an"
kind = "anthropic"
base_url = "{base}"
credentials = [{{ id = "an-1", secret = "env:AN_1" }}]

[[providers]]
id = "ge"
kind = "gemini"
base_url = "{base}/v1beta"
credentials = [{{ id = "ge-1", secret = "env:GE_1" }}]

[settings.timeouts]
first_event_ms = 1500
first_byte_ms = 3000
idle_ms = 1000
total_ms = 20000

{extra}
"#
    )
}

impl Harness {
    /// A server with the standard providers plus `extra` config, state in a fresh directory.
    pub async fn start(extra: &str) -> Self {
        let data = tempfile::tempdir().expect("temp dir");
        let mock = MockUpstream::start().await;
        let mut harness = Self::start_in(mock, data.path(), extra).await;
        harness.data = Some(data);
        harness
    }

    /// A server on `mock` keeping its state in `data_dir` (for restart tests).
    pub async fn start_in(mock: MockUpstream, data_dir: &Path, extra: &str) -> Self {
        let text = config_text(&mock, extra);
        let config =
            Config::parse(&text, Path::new("harness.toml"), &env).unwrap_or_else(|e| panic!("{e}"));
        let app = App::start_with_clock(data_dir, Arc::new(config), Arc::new(SystemClock)).await;
        let listener = switchyard::server::bind(0).await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = app.server_state(port, LocalKeys::new(Some(LOCAL_KEY.into())));
        let handle = Arc::new(AppHandle { registry: Arc::clone(app.registry()) });
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = switchyard::server::serve(listener, state, async {
                let _ = stopped.await;
            })
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
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// An OpenAI chat request for `model`.
    pub fn openai(&self, model: &str, stream: bool) -> reqwest::RequestBuilder {
        self.http
            .post(self.url("/v1/chat/completions"))
            .bearer_auth(LOCAL_KEY)
            .json(&json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
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
