//! Stand-ins for the model servers that run on a user's machine (Ollama, LM Studio, ...), for
//! the local detection tests: a [`FakeModelServer`] answers its server's model list in that
//! server's shape and OpenAI chat completions, recording the model of each; a [`SilentPort`]
//! accepts connections and never answers.
//!
//! Each binds `127.0.0.1:0`, never a server's real port, so a test never meets (or disturbs)
//! a real Ollama on the machine.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A fake model server on a random loopback port.
#[derive(Debug)]
pub struct FakeModelServer {
    pub port: u16,
    chats: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl FakeModelServer {
    /// Ollama: `GET /api/tags` lists `models` as `{"models": [{"name": ...}]}`.
    pub async fn ollama(models: &[&str]) -> Self {
        let list: Vec<Value> =
            models.iter().map(|m| json!({"name": m, "model": m, "size": 1_000_000})).collect();
        Self::start("/api/tags", json!({ "models": list })).await
    }

    /// LM Studio: `GET /v1/models` is a plain OpenAI list.
    pub async fn lmstudio(models: &[&str]) -> Self {
        let list: Vec<Value> = models
            .iter()
            .map(|m| json!({"id": m, "object": "model", "owned_by": "organization_owner"}))
            .collect();
        Self::start("/v1/models", json!({ "object": "list", "data": list })).await
    }

    /// Answers `GET path` with `list`, and `POST /v1/chat/completions` with a short answer
    /// naming this server's port.
    pub async fn start(path: &str, list: Value) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let chats = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route(path, get(move || async move { Json(list) }))
            .route("/v1/chat/completions", post(chat))
            .with_state((Arc::clone(&chats), port));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { port, chats, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The model of every chat completion received, in order.
    pub fn chats(&self) -> Vec<String> {
        self.chats.lock().clone()
    }
}

impl Drop for FakeModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn chat(
    State((chats, port)): State<(Arc<Mutex<Vec<String>>>, u16)>,
    Json(request): Json<Value>,
) -> Json<Value> {
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    chats.lock().push(model.clone());
    Json(json!({
        "id": "chatcmpl-local-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": format!("hello from port {port}")},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }))
}

/// A port that accepts connections and never says a word: a hung server.
#[derive(Debug)]
pub struct SilentPort {
    pub port: u16,
    task: JoinHandle<()>,
}

impl SilentPort {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let task = tokio::spawn(async move {
            // Held open, never read or written, until the port is dropped.
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Self { port, task }
    }
}

impl Drop for SilentPort {
    fn drop(&mut self) {
        self.task.abort();
    }
}
