//! Errors as clients see them: one type, rendered in the dialect of the route that failed
//! (OpenAI's `{"error": {...}}` on `/v1/chat/completions` and `/v1/models`, Anthropic's
//! `{"type": "error", "error": {...}}` on `/v1/messages`).

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ts_rs::TS;

/// The client dialect of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    pub fn of_path(path: &str) -> Self {
        if path.starts_with("/v1/messages") { Self::Anthropic } else { Self::OpenAi }
    }
}

/// The body of every error of the management API (and of `/v1/chat/completions`): OpenAI's
/// error shape, with Switchyard's detail beside it.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub struct ErrorBody {
    pub error: ErrorInfo,
}

#[derive(Clone, Debug, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ErrorInfo {
    /// Starts with the field it is about, when it is about one (`timeouts.idle_ms: ...`).
    pub message: String,
    /// A stable machine name: `invalid_request_error`, `not_found_error`, `conflict_error`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP status.
    pub code: u16,
    /// `{"field": "..."}` for a refused input; `{"candidates": [...]}` when nothing could serve.
    pub switchyard: Option<Value>,
}

/// An error for the client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable machine name (`authentication_error`, `invalid_request_error`, ...).
    pub kind: &'static str,
    pub message: String,
    pub retry_after: Option<Duration>,
    /// Extra detail for the body (e.g. why each candidate was skipped or failed).
    pub detail: Option<Value>,
    /// The request field at fault, as OpenAI's `error.param` (the SDKs show it).
    pub param: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self { status, kind, message: message.into(), retry_after: None, detail: None, param: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    pub fn into_response_in(self, dialect: Dialect) -> Response {
        let body = match dialect {
            Dialect::OpenAi => {
                let mut body = json!(ErrorBody {
                    error: ErrorInfo {
                        message: self.message,
                        kind: self.kind.to_owned(),
                        code: self.status.as_u16(),
                        switchyard: self.detail,
                    }
                });
                if let Some(param) = self.param {
                    body["error"]["param"] = Value::from(param);
                }
                body
            }
            Dialect::Anthropic => json!({
                "type": "error",
                "error": {"type": self.kind, "message": self.message, "switchyard": self.detail}
            }),
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up: coming back early would only be refused again.
            let secs = wait.as_millis().div_ceil(1000).max(1);
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        response
    }
}

impl From<switchyard_providers::dialect::ClientDialect> for Dialect {
    fn from(d: switchyard_providers::dialect::ClientDialect) -> Self {
        match d {
            // The Responses API reports errors in OpenAI's shape.
            switchyard_providers::dialect::ClientDialect::OpenAi
            | switchyard_providers::dialect::ClientDialect::Responses => Self::OpenAi,
            switchyard_providers::dialect::ClientDialect::Anthropic => Self::Anthropic,
        }
    }
}
