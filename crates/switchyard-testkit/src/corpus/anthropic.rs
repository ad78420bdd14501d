//! Anthropic Messages API failures: `{"type": "error", "error": {type, message}, "request_id"}`
//! bodies whose `type` follows the status one to one, rate-limit headers, and the `error` event
//! and `ping`s of a 200 stream.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::UnixMillis;

use super::{Provider, Shape, answer};
use crate::behavior::{AnthropicLimit, Behavior, Fault, Reply, Status};

/// <https://docs.anthropic.com/en/api/errors>: the error body and the status of each type.
const ERRORS: &str = "https://docs.anthropic.com/en/api/errors";

/// How long the rate-limited answer asks to wait (`retry-after`, and the requests limit's
/// reset instant).
pub const RATE_LIMIT_WAIT: Duration = Duration::from_secs(20);

pub fn all(now: UnixMillis) -> Vec<Shape> {
    vec![rate_limited(now), overloaded(), api_error(), overloaded_in_stream(), pings_only()]
}

fn body(kind: &str, message: &str) -> Value {
    json!({
        "type": "error",
        "error": { "type": kind, "message": message },
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    })
}

/// 429 `rate_limit_error` with `retry-after` and the `anthropic-ratelimit-*` headers: the
/// requests limit is spent (resets in [`RATE_LIMIT_WAIT`]), the token limits are not
/// (<https://docs.anthropic.com/en/api/rate-limits#response-headers>; the Python SDK raises
/// `RateLimitError` on it and honours `retry-after`: `anthropic-sdk-python`,
/// `src/anthropic/_base_client.py`).
pub fn rate_limited(now: UnixMillis) -> Shape {
    let status = Status::new(429)
        .retry_after(RATE_LIMIT_WAIT)
        .header("anthropic-ratelimit-requests-limit", "50")
        .header("anthropic-ratelimit-requests-remaining", "0")
        .anthropic_reset(AnthropicLimit::Requests, now.plus(RATE_LIMIT_WAIT))
        .header("anthropic-ratelimit-tokens-limit", "40000")
        .header("anthropic-ratelimit-tokens-remaining", "38000")
        .anthropic_reset(AnthropicLimit::Tokens, now.plus(Duration::from_secs(2)))
        .header("anthropic-ratelimit-input-tokens-limit", "30000")
        .header("anthropic-ratelimit-input-tokens-remaining", "29000")
        .anthropic_reset(AnthropicLimit::InputTokens, now.plus(Duration::from_secs(2)))
        .header("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
        .body_json(body(
            "rate_limit_error",
            "This request would exceed the rate limit for your organization (b1d1d2e4-2d4c-4f9a-9b0e-6a3f5d7f8c21) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
        ));
    Shape {
        name: "anthropic/429-rate-limit",
        provider: Provider::Anthropic,
        source: "https://docs.anthropic.com/en/api/rate-limits#response-headers",
        streamed: false,
        behavior: status.into(),
    }
}

/// 529 `overloaded_error`: the API is overloaded for everyone, not this account
/// (<https://docs.anthropic.com/en/api/errors>).
pub fn overloaded() -> Shape {
    Shape {
        name: "anthropic/529-overloaded",
        provider: Provider::Anthropic,
        source: ERRORS,
        streamed: false,
        behavior: answer(529, &[], body("overloaded_error", "Overloaded")),
    }
}

/// 500 `api_error`: "An unexpected error has occurred internal to Anthropic's systems"
/// (<https://docs.anthropic.com/en/api/errors>).
pub fn api_error() -> Shape {
    Shape {
        name: "anthropic/500-api-error",
        provider: Provider::Anthropic,
        source: ERRORS,
        streamed: false,
        behavior: answer(500, &[], body("api_error", "Internal server error")),
    }
}

/// A 200 stream that sends `message_start`, then `event: error` with `overloaded_error` and
/// ends: "Error events: ... For example, during periods of high usage, you may receive an
/// `overloaded_error`, which would normally correspond to an HTTP 529 in a non-streaming context"
/// (<https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events>).
pub fn overloaded_in_stream() -> Shape {
    Shape {
        name: "anthropic/stream-overloaded-after-message-start",
        provider: Provider::Anthropic,
        source: "https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events",
        streamed: true,
        behavior: Reply::default()
            .fault(Fault::ErrorAfter(1))
            .error_event(
                "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            )
            .into(),
    }
}

/// A 200 stream that sends `message_start` and then only `ping`s: "Event streams may also
/// include any number of ping events"
/// (<https://docs.anthropic.com/en/docs/build-with-claude/streaming#ping-events>), and nothing
/// else while generation hangs.
pub fn pings_only() -> Shape {
    Shape {
        name: "anthropic/stream-pings-only",
        provider: Provider::Anthropic,
        source: "https://docs.anthropic.com/en/docs/build-with-claude/streaming#ping-events",
        streamed: true,
        behavior: Behavior::ping_after(1),
    }
}
