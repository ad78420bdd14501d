//! Gemini error bodies, read from upstreams.

use serde_json::Value;
use switchyard_core::outcome::BodyHint;

use crate::error::UpstreamError;

/// Reads a Google API error (`{"error": {"code", "message", "status", "details"}}`, sometimes
/// wrapped in an array).
///
/// `RESOURCE_EXHAUSTED` is Gemini's 429 for every quota, and its message always says "check
/// your plan and billing details": read as text it would bench a key for an hour over a
/// per-minute limit. Only a per-day quota (in `details[].violations[].quotaId`) is treated as
/// exhausted; anything else is a plain rate limit.
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
    let hint = match status {
        Some("RESOURCE_EXHAUSTED") => {
            if daily_quota(error) {
                BodyHint::InsufficientQuota
            } else {
                BodyHint::None
            }
        }
        Some("INVALID_ARGUMENT")
            if lower.contains("input token count")
                || lower.contains("exceeds the maximum number of tokens") =>
        {
            BodyHint::ContextLengthExceeded
        }
        Some("NOT_FOUND") if lower.contains("model") => BodyHint::ModelNotFound,
        Some(
            "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED" | "UNAUTHENTICATED"
            | "PERMISSION_DENIED",
        ) => BodyHint::None,
        _ => BodyHint::sniff(&message),
    };
    UpstreamError { hint, code: status.map(str::to_owned), message }
}

fn daily_quota(error: &Value) -> bool {
    let details = error.get("details").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    details
        .iter()
        .filter_map(|detail| detail.get("violations").and_then(Value::as_array))
        .flatten()
        .filter_map(|violation| violation.get("quotaId").and_then(Value::as_str))
        .any(|quota| quota.contains("PerDay"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PER_MINUTE: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"10"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"23s"}]}}"#;

    #[test]
    fn a_per_minute_quota_is_a_rate_limit_even_though_it_mentions_billing() {
        let report = error_report(PER_MINUTE.as_bytes());
        assert_eq!(report.hint, BodyHint::None);
        assert_eq!(report.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
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
