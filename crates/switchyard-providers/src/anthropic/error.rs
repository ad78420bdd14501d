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

/// Reads an Anthropic error body (<https://docs.anthropic.com/en/api/errors>:
/// `{"type": "error", "error": {"type", "message"}}`).
///
/// Anthropic's error types are coarse (a too-long prompt, a refused beta and an empty credit
/// balance are all `invalid_request_error`), so the type narrows and the documented phrases
/// decide; a type that needs no refinement decides alone, and nothing else in a message counts.
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
    let hint = hint(kind, &message.to_ascii_lowercase());
    UpstreamError { hint, code: kind.map(str::to_owned), message }
}

fn hint(kind: Option<&str>, lower: &str) -> BodyHint {
    let says = |phrases: &[&str]| phrases.iter().any(|p| lower.contains(p));
    match kind {
        Some("billing_error") => BodyHint::InsufficientQuota,
        // Anthropic answers an empty prepaid balance with a 400: "Your credit balance is too low
        // to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase
        // credits."
        Some("invalid_request_error" | "permission_error")
            if says(&["credit balance is too low"]) =>
        {
            BodyHint::InsufficientQuota
        }
        Some("invalid_request_error") if says(&["prompt is too long", "exceed context limit"]) => {
            BodyHint::ContextLengthExceeded
        }
        // Something the client sent and this provider refuses: "Unexpected value(s)
        // `foo-2025-01-01` for the `anthropic-beta` header. Please consult our documentation
        // ...", "... is not supported on this model", "... does not support ...". Another
        // provider may take the request; another key of this one would refuse it the same way.
        Some("invalid_request_error" | "permission_error")
            if says(&["anthropic-beta", "is not supported", "does not support"]) =>
        {
            BodyHint::UnsupportedFeature
        }
        // Anthropic's streaming classifiers refuse with "Output blocked by content filtering
        // policy" (a 400 `invalid_request_error`).
        Some("invalid_request_error") if says(&["content filtering policy"]) => {
            BodyHint::ContentPolicy
        }
        Some("not_found_error") if lower.contains("model") => BodyHint::ModelNotFound,
        // The key itself: "invalid x-api-key", a revoked OAuth token. Whatever the status.
        Some("authentication_error") => BodyHint::InvalidCredential,
        // A `permission_error` that is none of the above ("Your API key does not have
        // permission to use the specified resource") is about this model or organisation: the
        // status (403) makes it `model_forbidden`, and the key keeps serving.
        _ => BodyHint::None,
    }
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
    fn a_beta_header_or_feature_the_client_sent_is_an_unsupported_feature() {
        let beta = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Unexpected value(s) `foo-2025-01-01` for the `anthropic-beta` header. Please consult our documentation at docs.anthropic.com or try again without the header."}}"#;
        assert_eq!(hint(beta), BodyHint::UnsupportedFeature);
        let feature = r#"{"type":"error","error":{"type":"invalid_request_error","message":"thinking: extended thinking is not supported on this model"}}"#;
        assert_eq!(hint(feature), BodyHint::UnsupportedFeature);
        let forbidden_beta = r#"{"type":"error","error":{"type":"permission_error","message":"This organization does not have access to the `anthropic-beta` value `context-1m-2025-08-07`."}}"#;
        assert_eq!(hint(forbidden_beta), BodyHint::UnsupportedFeature);
    }

    #[test]
    fn a_content_filtering_refusal_is_a_policy_refusal() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}"#;
        assert_eq!(hint(body), BodyHint::ContentPolicy);
    }

    #[test]
    fn a_permission_error_about_a_resource_is_left_to_the_status() {
        let body = r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}"#;
        assert_eq!(hint(body), BodyHint::None);
        let key = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(hint(key), BodyHint::InvalidCredential);
    }

    #[test]
    fn billing_words_outside_the_documented_phrase_prove_nothing() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"metadata.billing_id: Extra inputs are not permitted"}}"#;
        assert_eq!(hint(body), BodyHint::None);
        assert_eq!(hint("<html>billing gateway: 502 Bad Gateway</html>"), BodyHint::None);
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
