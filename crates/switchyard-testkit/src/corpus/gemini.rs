//! Gemini API failures: Google's `{"error": {code, message, status, details}}`
//! (<https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes>), with
//! `google.rpc.QuotaFailure` and `google.rpc.RetryInfo` details on a 429
//! (<https://ai.google.dev/gemini-api/docs/rate-limits>).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Provider, Shape, answer};

const TROUBLESHOOTING: &str = "https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes";

/// The `RetryInfo.retryDelay` of the rate-limited answer ("37s").
pub const RETRY_DELAY: Duration = Duration::from_secs(37);

pub fn all() -> Vec<Shape> {
    vec![resource_exhausted(), unavailable(), invalid_argument(), permission_denied()]
}

fn body(code: u16, status: &str, message: &str, details: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message, "status": status });
    if let Some(details) = details {
        error["details"] = details;
    }
    json!({ "error": error })
}

/// 429 `RESOURCE_EXHAUSTED` on a per-minute quota, with the `QuotaFailure`, `Help` and
/// `RetryInfo` details the API sends: the message says "check your plan and billing details"
/// even though the wait is 37 s.
pub fn resource_exhausted() -> Shape {
    let details = json!([
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                "quotaDimensions": { "location": "global", "model": "gemini-2.0-flash" },
                "quotaValue": "15",
            }],
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{
                "description": "Learn more about Gemini API quotas",
                "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
            }],
        },
        { "@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s" },
    ]);
    Shape {
        name: "gemini/429-resource-exhausted-retry-info",
        provider: Provider::Gemini,
        source: "https://ai.google.dev/gemini-api/docs/rate-limits",
        streamed: false,
        behavior: answer(
            429,
            &[],
            body(
                429,
                "RESOURCE_EXHAUSTED",
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
                Some(details),
            ),
        ),
    }
}

/// 503 `UNAVAILABLE`: "The service may be temporarily overloaded or down".
pub fn unavailable() -> Shape {
    Shape {
        name: "gemini/503-unavailable",
        provider: Provider::Gemini,
        source: TROUBLESHOOTING,
        streamed: false,
        behavior: answer(
            503,
            &[],
            body(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", None),
        ),
    }
}

/// 400 `INVALID_ARGUMENT`: "The request body is malformed".
pub fn invalid_argument() -> Shape {
    Shape {
        name: "gemini/400-invalid-argument",
        provider: Provider::Gemini,
        source: TROUBLESHOOTING,
        streamed: false,
        behavior: answer(
            400,
            &[],
            body(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", None),
        ),
    }
}

/// 403 `PERMISSION_DENIED`: "Your API key doesn't have the required permissions", e.g. a
/// tuned model used without the right authentication.
pub fn permission_denied() -> Shape {
    Shape {
        name: "gemini/403-permission-denied",
        provider: Provider::Gemini,
        source: TROUBLESHOOTING,
        streamed: false,
        behavior: answer(
            403,
            &[],
            body(403, "PERMISSION_DENIED", "The caller does not have permission", None),
        ),
    }
}
