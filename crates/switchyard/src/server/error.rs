//! Errors as clients see them: one type ([`ApiError`], the proxy's own), rendered here in the
//! dialect of the route that failed
//! (OpenAI's `{"error": {...}}` on `/v1/chat/completions` and `/v1/models`, Anthropic's
//! `{"type": "error", "error": {...}}` on `/v1/messages`, Google's `{"error": {"code",
//! "message", "status"}}` on every `/v1beta` path).

use axum::Json;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::proxy::refusal::Refused;
pub use crate::proxy::refusal::{ApiError, Dialect};
use ts_rs::TS;

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

impl ApiError {
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
            Dialect::Gemini => json!({
                "error": {
                    "code": self.status.as_u16(),
                    "message": self.message,
                    "status": switchyard_providers::gemini::status_name(self.status.as_u16()),
                    "switchyard": self.detail,
                }
            }),
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.final_answer {
            response.headers_mut().insert("x-should-retry", HeaderValue::from_static("false"));
        }
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

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        self.error.into_response_in(self.dialect)
    }
}
