//! OpenAI error bodies: written for clients, read from upstreams.

use serde::Serialize;
use serde_json::Value;
use switchyard_core::outcome::BodyHint;

use crate::error::{ErrorKind, UpstreamError};

#[derive(Serialize)]
struct BodyOut<'r> {
    error: ErrorOut<'r>,
}

#[derive(Serialize)]
pub(super) struct ErrorOut<'r> {
    message: &'r str,
    #[serde(rename = "type")]
    kind: &'static str,
    param: Option<()>,
    code: Option<&'static str>,
}

impl<'r> ErrorOut<'r> {
    /// OpenAI's own `type` and `code` for each kind, so SDKs raise the matching exception.
    pub(super) fn new(kind: ErrorKind, message: &'r str) -> Self {
        let (kind, code) = match kind {
            ErrorKind::InvalidRequest => ("invalid_request_error", None),
            ErrorKind::ContextLengthExceeded => {
                ("invalid_request_error", Some("context_length_exceeded"))
            }
            ErrorKind::ContentPolicy => ("invalid_request_error", Some("content_policy_violation")),
            ErrorKind::Authentication => ("invalid_request_error", Some("invalid_api_key")),
            ErrorKind::PermissionDenied => ("invalid_request_error", Some("permission_denied")),
            ErrorKind::ModelNotFound => ("invalid_request_error", Some("model_not_found")),
            ErrorKind::RequestTooLarge => ("invalid_request_error", Some("request_too_large")),
            ErrorKind::RateLimited => ("rate_limit_error", Some("rate_limit_exceeded")),
            ErrorKind::QuotaExhausted => ("insufficient_quota", Some("insufficient_quota")),
            ErrorKind::Overloaded => ("server_error", Some("overloaded")),
            ErrorKind::Timeout => ("server_error", Some("timeout")),
            ErrorKind::Internal => ("server_error", None),
        };
        Self { message, kind, param: None, code }
    }
}

/// `{"error": {"message", "type", "param", "code"}}`.
pub fn error_body(kind: ErrorKind, message: &str) -> Vec<u8> {
    serde_json::to_vec(&BodyOut { error: ErrorOut::new(kind, message) })
        .expect("serialising to memory cannot fail")
}

/// Reads an OpenAI-style error body. OpenAI's `code`/`type` decide when they are known, even
/// when they say "nothing special": a `rate_limit_exceeded` message mentions billing pages,
/// and sniffing it would turn a short rate limit into an hour-long quota cooldown. Compatible
/// servers that answer in other shapes (`{"error": "text"}`, `FastAPI`'s `{"detail": ...}`) are
/// sniffed.
pub fn error_report(body: &[u8]) -> UpstreamError {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return UpstreamError::unparsed(&text);
    };
    let error = value.get("error").unwrap_or(&value);
    let message = error
        .get("message")
        .or_else(|| error.get("detail"))
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map_or_else(|| text.trim().to_owned(), str::to_owned);
    let code = error.get("code").and_then(Value::as_str);
    let kind = error.get("type").and_then(Value::as_str);
    let known = |name: &str| match name {
        "insufficient_quota" => Some(BodyHint::InsufficientQuota),
        "context_length_exceeded" | "string_above_max_length" => {
            Some(BodyHint::ContextLengthExceeded)
        }
        "content_filter" | "content_policy_violation" => Some(BodyHint::ContentPolicy),
        "model_not_found" => Some(BodyHint::ModelNotFound),
        "rate_limit_exceeded" | "invalid_api_key" => Some(BodyHint::None),
        _ => None,
    };
    let hint = code.and_then(known).or_else(|| kind.and_then(known)).unwrap_or_else(|| {
        let lower = message.to_ascii_lowercase();
        // Ollama and friends: `model "x" not found, try pulling it first`.
        if lower.contains("model") && lower.contains("not found") {
            BodyHint::ModelNotFound
        } else {
            BodyHint::sniff(&message)
        }
    });
    UpstreamError { hint, code: code.or(kind).map(str::to_owned), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(body: &str) -> BodyHint {
        error_report(body.as_bytes()).hint
    }

    #[test]
    fn openai_error_codes_decide_the_hint() {
        let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        assert_eq!(hint(quota), BodyHint::InsufficientQuota);
        let context = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(hint(context), BodyHint::ContextLengthExceeded);
        let policy = r#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}"#;
        assert_eq!(hint(policy), BodyHint::ContentPolicy);
        let model = r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert_eq!(hint(model), BodyHint::ModelNotFound);
    }

    #[test]
    fn a_rate_limit_that_mentions_billing_is_not_a_quota_problem() {
        let body = r#"{"error":{"message":"Rate limit reached for gpt-4o. Visit https://platform.openai.com/account/rate-limits; see billing settings to raise it.","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert_eq!(hint(body), BodyHint::None);
    }

    #[test]
    fn unknown_shapes_fall_back_to_sniffing_the_message() {
        assert_eq!(
            hint(r#"{"detail":"Prompt is too long for this model"}"#),
            BodyHint::ContextLengthExceeded
        );
        assert_eq!(
            hint(r#"{"error":"model 'llama9' not found, try pulling it first"}"#),
            BodyHint::ModelNotFound
        );
        assert_eq!(hint("upstream says: insufficient quota"), BodyHint::InsufficientQuota);
        let report = error_report(br#"{"error":{"message":"boom","code":500}}"#);
        assert_eq!(
            (report.hint, report.code, report.message.as_str()),
            (BodyHint::None, None, "boom")
        );
    }

    #[test]
    fn the_error_body_has_openais_shape() {
        let body: Value =
            serde_json::from_slice(&error_body(ErrorKind::RateLimited, "slow down")).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {"message": "slow down", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})
        );
    }
}
