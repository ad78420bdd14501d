//! Gemini error bodies: read from upstreams, written for clients.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use switchyard_core::outcome::BodyHint;

use crate::error::{ErrorKind, UpstreamError};

/// A Google API error as clients read it: `{"error": {"code", "message", "status"}}`.
#[derive(Serialize)]
pub(super) struct BodyOut<'m> {
    pub(super) error: ErrorOut<'m>,
}

#[derive(Serialize)]
pub(super) struct ErrorOut<'m> {
    code: u16,
    message: &'m str,
    status: &'static str,
}

impl<'m> ErrorOut<'m> {
    pub(super) fn new(kind: ErrorKind, message: &'m str) -> Self {
        let code = match kind {
            ErrorKind::InvalidRequest
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::ContentPolicy
            | ErrorKind::RequestTooLarge => 400,
            ErrorKind::Authentication => 401,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::ModelNotFound => 404,
            ErrorKind::RateLimited | ErrorKind::QuotaExhausted => 429,
            ErrorKind::Overloaded => 503,
            ErrorKind::Timeout => 504,
            ErrorKind::Internal => 500,
        };
        Self { code, message, status: status_name(code) }
    }
}

/// The non-streamed error body for a client.
pub fn error_body(kind: ErrorKind, message: &str) -> Vec<u8> {
    serde_json::to_vec(&BodyOut { error: ErrorOut::new(kind, message) })
        .expect("serialising to memory cannot fail")
}

/// The `google.rpc.Code` name Google APIs answer an HTTP status with
/// (<https://cloud.google.com/apis/design/errors#handling_errors>): what Gemini CLI and the
/// SDKs read from `error.status`.
pub fn status_name(http: u16) -> &'static str {
    match http {
        400 | 411 | 413 | 415 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 | 410 => "NOT_FOUND",
        405 | 501 => "UNIMPLEMENTED",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        412 => "FAILED_PRECONDITION",
        429 | 402 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        502 | 503 | 529 => "UNAVAILABLE",
        _ => "UNKNOWN",
    }
}

/// Reads a Google API error (`{"error": {"code", "message", "status", "details"}}`, sometimes
/// wrapped in an array; <https://ai.google.dev/gemini-api/docs/troubleshooting>).
///
/// `RESOURCE_EXHAUSTED` is Gemini's 429 for every quota, and its message always says "check
/// your plan and billing details": read as text it would bench a key for an hour over a
/// per-minute limit. Only a per-day quota (in `details[].violations[].quotaId`) is treated as
/// exhausted; anything else is a plain rate limit, whose `RetryInfo.retryDelay` (in `details`)
/// is honoured like a `Retry-After`.
pub fn error_report(body: &[u8]) -> UpstreamError {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return UpstreamError::unparsed(&text);
    };
    let value = value.as_array().and_then(|a| a.first()).unwrap_or(&value);
    let error = value.get("error").unwrap_or(value);
    let status = error.get("status").and_then(Value::as_str);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| text.trim().to_owned(), str::to_owned);
    let lower = message.to_ascii_lowercase();
    let says = |phrases: &[&str]| phrases.iter().any(|p| lower.contains(p));
    let hint = match status {
        Some("RESOURCE_EXHAUSTED") if daily_quota(error) => BodyHint::InsufficientQuota,
        // The key itself: `API_KEY_INVALID` (a 400), a key reported as leaked or blocked for
        // this API (403 `PERMISSION_DENIED`), no key at all.
        _ if reason(error, |r| r.starts_with("API_KEY_")) => BodyHint::InvalidCredential,
        Some("UNAUTHENTICATED") => BodyHint::InvalidCredential,
        Some("INVALID_ARGUMENT") if says(&["api key not valid"]) => BodyHint::InvalidCredential,
        Some("PERMISSION_DENIED")
            if says(&["api key was reported as leaked", "unregistered callers"]) =>
        {
            BodyHint::InvalidCredential
        }
        Some("INVALID_ARGUMENT")
            if says(&["input token count", "exceeds the maximum number of tokens"]) =>
        {
            BodyHint::ContextLengthExceeded
        }
        // A prompt refused by the safety filters ("... blocked due to safety", "... violates
        // the content policy (SAFETY)").
        Some("INVALID_ARGUMENT")
            if says(&["blocked due to safety", "violates the content policy"]) =>
        {
            BodyHint::ContentPolicy
        }
        // A field, tool or mode the request used that this model or API version does not take
        // ("Function calling is not enabled for models/...", "... is not supported ...",
        // `Invalid JSON payload received. Unknown name "foo"`).
        Some("INVALID_ARGUMENT")
            if says(&["is not supported", "is not enabled", "unknown name"]) =>
        {
            BodyHint::UnsupportedFeature
        }
        // "Gemini API free tier is not available in your country. Please enable billing on
        // your project in Google AI Studio."
        Some("FAILED_PRECONDITION") if says(&["enable billing"]) => BodyHint::InsufficientQuota,
        // "User location is not supported for the API use." Another provider may serve.
        Some("FAILED_PRECONDITION") if says(&["location is not supported"]) => {
            BodyHint::NotPermitted
        }
        Some("NOT_FOUND") if lower.contains("model") => BodyHint::ModelNotFound,
        _ => retry_delay(error).map_or(BodyHint::None, BodyHint::RetryDelay),
    };
    UpstreamError { hint, code: status.map(str::to_owned), message }
}

fn details(error: &Value) -> &[Value] {
    error.get("details").and_then(Value::as_array).map_or(&[][..], Vec::as_slice)
}

fn daily_quota(error: &Value) -> bool {
    details(error)
        .iter()
        .filter_map(|detail| detail.get("violations").and_then(Value::as_array))
        .flatten()
        .filter_map(|violation| violation.get("quotaId").and_then(Value::as_str))
        .any(|quota| quota.contains("PerDay"))
}

/// Whether a `google.rpc.ErrorInfo` detail's `reason` matches.
fn reason(error: &Value, matches: impl Fn(&str) -> bool) -> bool {
    details(error).iter().filter_map(|d| d.get("reason").and_then(Value::as_str)).any(matches)
}

/// `google.rpc.RetryInfo.retryDelay`: a protobuf `Duration` in its JSON form, decimal seconds
/// with an `s` suffix ("37s", "0.5s", "1.000340012s").
fn retry_delay(error: &Value) -> Option<Duration> {
    details(error)
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| d.get("retryDelay").and_then(Value::as_str))
        .and_then(protobuf_duration)
}

/// "37s" → 37 s; the fraction is kept to the nanosecond (at most nine digits, as protobuf
/// writes it). Anything else, a sign included, is not a delay.
fn protobuf_duration(text: &str) -> Option<Duration> {
    let seconds = text.strip_suffix('s')?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return None;
    }
    if seconds.ends_with('.') {
        return None;
    }
    let nanos =
        if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse::<u32>().ok()? };
    Some(Duration::new(whole.parse().ok()?, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PER_MINUTE: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"10"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"23s"}]}}"#;

    #[test]
    fn a_per_minute_quota_is_a_rate_limit_even_though_it_mentions_billing() {
        let report = error_report(PER_MINUTE.as_bytes());
        assert!(!matches!(report.hint, BodyHint::InsufficientQuota), "{:?}", report.hint);
        assert_eq!(report.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
    }

    #[test]
    fn retry_info_retry_delay_is_read_like_retry_after() {
        assert_eq!(
            error_report(PER_MINUTE.as_bytes()).hint,
            BodyHint::RetryDelay(Duration::from_secs(23))
        );
        let unavailable = r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#;
        assert_eq!(
            error_report(unavailable.as_bytes()).hint,
            BodyHint::RetryDelay(Duration::from_secs(37))
        );
        let without = PER_MINUTE.replace(r#","retryDelay":"23s""#, "");
        assert_eq!(error_report(without.as_bytes()).hint, BodyHint::None);
    }

    #[test]
    fn protobuf_durations_parse_exactly_and_reject_anything_else() {
        assert_eq!(protobuf_duration("37s"), Some(Duration::from_secs(37)));
        assert_eq!(protobuf_duration("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(protobuf_duration("1.000340012s"), Some(Duration::new(1, 340_012)));
        for bad in ["", "s", "37", "-1s", "1.s", ".5s", "1.0000000001s", "1e3s", "37ms"] {
            assert_eq!(protobuf_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_region_block_is_not_permitted_and_no_billing_is_quota() {
        let region = r#"{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}"#;
        assert_eq!(error_report(region.as_bytes()).hint, BodyHint::NotPermitted);
        let billing = r#"{"error":{"code":400,"message":"Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.","status":"FAILED_PRECONDITION"}}"#;
        assert_eq!(error_report(billing.as_bytes()).hint, BodyHint::InsufficientQuota);
    }

    #[test]
    fn a_leaked_key_is_refused_and_other_permission_errors_are_left_to_the_status() {
        let leaked = r#"{"error":{"code":403,"message":"Your API key was reported as leaked. Please use another API key.","status":"PERMISSION_DENIED"}}"#;
        assert_eq!(error_report(leaked.as_bytes()).hint, BodyHint::InvalidCredential);
        let other = r#"{"error":{"code":403,"message":"The caller does not have permission","status":"PERMISSION_DENIED"}}"#;
        assert_eq!(error_report(other.as_bytes()).hint, BodyHint::None);
    }

    #[test]
    fn a_safety_refusal_is_a_policy_refusal() {
        let body = r#"{"error":{"code":400,"message":"The request was blocked because it violates the content policy (SAFETY).","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(error_report(body.as_bytes()).hint, BodyHint::ContentPolicy);
    }

    #[test]
    fn an_unsupported_feature_is_the_requests_doing() {
        let body = r#"{"error":{"code":400,"message":"Function calling is not enabled for models/gemma-3-27b-it","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(error_report(body.as_bytes()).hint, BodyHint::UnsupportedFeature);
    }

    #[test]
    fn a_per_day_quota_is_exhausted() {
        let body = PER_MINUTE.replace("PerMinute", "PerDay");
        assert_eq!(error_report(body.as_bytes()).hint, BodyHint::InsufficientQuota);
    }

    #[test]
    fn context_and_model_errors_are_recognised_in_an_array_wrapper() {
        let long = r#"[{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]"#;
        assert_eq!(error_report(long.as_bytes()).hint, BodyHint::ContextLengthExceeded);
        let model = r#"{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}"#;
        assert_eq!(error_report(model.as_bytes()).hint, BodyHint::ModelNotFound);
        let bad =
            r#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}"#;
        // Gemini refuses a bad key with a 400: the hint is what makes it an auth failure.
        assert_eq!(error_report(bad.as_bytes()).hint, BodyHint::InvalidCredential);
    }
}
