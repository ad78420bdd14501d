//! Anthropic error bodies: written for clients, read from upstreams.

use serde::Serialize;
use serde_json::Value;
use switchyard_core::outcome::BodyHint;

use crate::error::{ErrorKind, UpstreamError};

#[derive(Serialize)]
struct BodyOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: ErrorOut<'r>,
}

#[derive(Serialize)]
pub(super) struct ErrorOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'r str,
}

impl<'r> ErrorOut<'r> {
    /// Anthropic's own error types, so SDKs raise the matching exception.
    pub(super) fn new(kind: ErrorKind, message: &'r str) -> Self {
        let kind = match kind {
            ErrorKind::InvalidRequest
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::ContentPolicy => "invalid_request_error",
            ErrorKind::Authentication => "authentication_error",
            ErrorKind::PermissionDenied => "permission_error",
            ErrorKind::ModelNotFound => "not_found_error",
            ErrorKind::RequestTooLarge => "request_too_large",
            ErrorKind::RateLimited => "rate_limit_error",
            ErrorKind::QuotaExhausted => "billing_error",
            ErrorKind::Overloaded => "overloaded_error",
            ErrorKind::Timeout => "timeout_error",
            ErrorKind::Internal => "api_error",
        };
        Self { kind, message }
    }
}

/// `{"type": "error", "error": {"type", "message"}}`.
pub fn error_body(kind: ErrorKind, message: &str) -> Vec<u8> {
    serde_json::to_vec(&BodyOut { kind: "error", error: ErrorOut::new(kind, message) })
        .expect("serialising to memory cannot fail")
}

/// Reads an Anthropic error body. Anthropic's error types are coarse (a too-long prompt and a
/// bad parameter are both `invalid_request_error`), so the type narrows and the message
/// decides: "prompt is too long", "credit balance is too low", "model: ...".
pub fn error_report(body: &[u8]) -> UpstreamError {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return UpstreamError::unparsed(&text);
    };
    let error = value.get("error").unwrap_or(&value);
    let kind = error.get("type").and_then(Value::as_str);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| text.trim().to_owned(), str::to_owned);
    let lower = message.to_ascii_lowercase();
    let hint = match kind {
        Some("billing_error") => BodyHint::InsufficientQuota,
        Some("not_found_error") if lower.contains("model") => BodyHint::ModelNotFound,
        Some("invalid_request_error")
            if lower.contains("prompt is too long") || lower.contains("exceed context limit") =>
        {
            BodyHint::ContextLengthExceeded
        }
        Some("invalid_request_error" | "permission_error") if lower.contains("credit balance") => {
            BodyHint::InsufficientQuota
        }
        Some(
            "rate_limit_error"
            | "overloaded_error"
            | "api_error"
            | "authentication_error"
            | "timeout_error",
        ) => BodyHint::None,
        _ => BodyHint::sniff(&message),
    };
    UpstreamError { hint, code: kind.map(str::to_owned), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(body: &str) -> BodyHint {
        error_report(body.as_bytes()).hint
    }

    #[test]
    fn anthropic_messages_decide_within_a_coarse_error_type() {
        let long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210345 tokens > 200000 maximum"}}"#;
        assert_eq!(hint(long), BodyHint::ContextLengthExceeded);
        let limit = r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000"}}"#;
        assert_eq!(hint(limit), BodyHint::ContextLengthExceeded);
        let credit = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#;
        assert_eq!(hint(credit), BodyHint::InsufficientQuota);
        let model =
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}"#;
        assert_eq!(hint(model), BodyHint::ModelNotFound);
        let billing =
            r#"{"type":"error","error":{"type":"billing_error","message":"payment failed"}}"#;
        assert_eq!(hint(billing), BodyHint::InsufficientQuota);
    }

    #[test]
    fn overload_and_rate_limits_carry_no_hint() {
        let report = error_report(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            report,
            UpstreamError {
                hint: BodyHint::None,
                code: Some("overloaded_error".into()),
                message: "Overloaded".into()
            }
        );
        assert_eq!(hint("<html>502 Bad Gateway</html>"), BodyHint::None);
    }

    #[test]
    fn the_error_body_has_anthropics_shape() {
        let body: Value =
            serde_json::from_slice(&error_body(ErrorKind::Overloaded, "busy")).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        );
    }
}
