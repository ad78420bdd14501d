//! "Try it": one prompt sent through a combo exactly as a client's request would go (the same
//! planner, attempt loop and request log), answered with the routing trace beside the answer,
//! so a user can see what a combo does before pointing an editor at it.

use axum::http::HeaderMap;
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_providers::dialect::ClientDialect;
use ts_rs::TS;

use super::Services;
use crate::config::{EditError, Problem};
use crate::proxy::exhausted::TraceEntry;
use crate::server::ErrorInfo;

/// The longest prompt "try it" sends, in bytes: it is a smoke test, not a chat.
const MAX_PROMPT: usize = 32 * 1024;
/// The most of an answer's body that is read.
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// `POST /api/try`.
#[derive(Clone, Debug, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct TryRequest {
    /// A combo name or `provider/model`.
    pub model: String,
    pub prompt: String,
}

/// What came of a "try it" request.
#[derive(Clone, Debug, Serialize, TS)]
#[ts(export)]
pub struct TryResult {
    /// The status a client would have seen.
    pub status: u16,
    /// The assistant's text, when it answered.
    pub answer: Option<String>,
    /// `provider/model` that answered.
    pub served_by: Option<String>,
    pub attempts: u32,
    #[ts(type = "number")]
    pub latency_ms: u64,
    /// Every candidate skipped or tried, in order.
    pub trace: Vec<TraceEntry>,
    /// The error a client would have seen, when nothing answered.
    pub error: Option<ErrorInfo>,
}

impl Services {
    /// Sends `request.prompt` to `request.model` through the proxy, as an OpenAI client would.
    pub async fn try_model(&self, request: TryRequest) -> Result<TryResult, EditError> {
        if request.model.trim().is_empty() {
            return Err(Problem::new("model", "name a combo or provider/model").into());
        }
        if request.prompt.trim().is_empty() {
            return Err(Problem::new("prompt", "write something to send").into());
        }
        if request.prompt.len() > MAX_PROMPT {
            let problem =
                format!("{} bytes is over the {MAX_PROMPT}-byte limit", request.prompt.len());
            return Err(Problem::new("prompt", problem).into());
        }
        let body = json!({
            "model": request.model,
            "messages": [{ "role": "user", "content": request.prompt }],
        });
        let body = Bytes::from(body.to_string());
        let (response, record) = self
            .proxy
            .handle_logged(ClientDialect::OpenAi, None, &HeaderMap::new(), None, body)
            .await;
        let response = response.unwrap_or_else(IntoResponse::into_response);
        let status = response.status();
        let bytes =
            axum::body::to_bytes(response.into_body(), MAX_ANSWER).await.unwrap_or_default();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let (answer, error) = if status.is_success() {
            let text = answer.pointer("/choices/0/message/content").and_then(Value::as_str);
            (Some(text.unwrap_or_default().to_owned()), None)
        } else {
            (None, answer.get("error").cloned().and_then(|e| serde_json::from_value(e).ok()))
        };
        Ok(TryResult {
            status: status.as_u16(),
            answer,
            served_by: record.served_by.clone(),
            attempts: record.attempts,
            latency_ms: record.duration_ms,
            trace: serde_json::from_str(&record.trace).unwrap_or_default(),
            error,
        })
    }
}
