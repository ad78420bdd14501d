//! Responses error bodies: the same `{"error": {...}}` shape as Chat Completions, so both
//! directions are OpenAI's; and the `error` object of a `response.failed` event or an `error`
//! stream event, read into what the classifier takes.

use serde::Deserialize;

use crate::error::{ErrorKind, UpstreamError};
use crate::json::Str;

/// `{"error": {"message", "type", "param", "code"}}`, as the OpenAI SDKs read it.
pub fn error_body(kind: ErrorKind, message: &str) -> Vec<u8> {
    crate::openai::error_body(kind, message)
}

/// Reads an error body of a Responses upstream (OpenAI's error shape).
pub fn error_report(body: &[u8]) -> UpstreamError {
    crate::openai::error_report(body)
}

/// An `error` object inside a stream (`response.failed`'s `response.error`, or the `error`
/// event's own fields).
#[derive(Debug, Default, Deserialize)]
pub(super) struct StreamErrorWire<'a> {
    #[serde(borrow, default)]
    pub(super) code: Option<Str<'a>>,
    #[serde(borrow, default, rename = "type")]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) message: Option<Str<'a>>,
}

impl StreamErrorWire<'_> {
    /// Read as an OpenAI error body would be, so the codes the classifier knows
    /// (`rate_limit_exceeded`, `insufficient_quota`, `context_length_exceeded`, ...) decide.
    pub(super) fn report(&self) -> UpstreamError {
        let body = serde_json::json!({"error": {
            "message": self.message.as_ref().map_or("the upstream reported an error", |m| &m.0),
            "type": self.kind.as_ref().map(|k| &k.0),
            "code": self.code.as_ref().map(|c| &c.0),
        }});
        let mut report = error_report(body.to_string().as_bytes());
        if report.code.is_none() {
            report.code = Some("server_error".to_owned());
        }
        report
    }
}

/// The `code` of a `response.failed` a client reads: OpenAI's own for what Codex and the SDKs
/// act on (`context_length_exceeded` ends Codex's turn, `insufficient_quota` stops it,
/// anything else it retries).
pub(super) fn failed_code(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ContextLengthExceeded => "context_length_exceeded",
        ErrorKind::QuotaExhausted => "insufficient_quota",
        ErrorKind::RateLimited => "rate_limit_exceeded",
        ErrorKind::InvalidRequest | ErrorKind::RequestTooLarge | ErrorKind::ContentPolicy => {
            "invalid_prompt"
        }
        ErrorKind::Authentication
        | ErrorKind::PermissionDenied
        | ErrorKind::ModelNotFound
        | ErrorKind::Overloaded
        | ErrorKind::Timeout
        | ErrorKind::Internal => "server_error",
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::outcome::BodyHint;

    use super::*;

    #[test]
    fn a_stream_error_is_read_by_its_code() {
        let wire: StreamErrorWire<'_> = serde_json::from_str(
            r#"{"code":"insufficient_quota","message":"You exceeded your current quota"}"#,
        )
        .unwrap();
        let report = wire.report();
        assert_eq!(report.hint, BodyHint::InsufficientQuota);
        assert_eq!(report.code.as_deref(), Some("insufficient_quota"));
        let unknown = StreamErrorWire::default().report();
        assert_eq!(unknown.code.as_deref(), Some("server_error"));
    }
}
