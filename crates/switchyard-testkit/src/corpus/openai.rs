//! OpenAI Chat Completions failures: `{"error": {message, type, param, code}}` bodies and the
//! `x-ratelimit-*` headers every answer carries
//! (<https://platform.openai.com/docs/guides/error-codes>,
//! <https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers>).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Provider, Shape, answer};

const ERROR_CODES: &str = "https://platform.openai.com/docs/guides/error-codes";
const RATE_LIMIT_HEADERS: &str =
    "https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers";

/// The reset the requests-per-minute shape announces (`x-ratelimit-reset-requests: 20s`).
pub const REQUESTS_RESET: Duration = Duration::from_secs(20);
/// The reset the tokens-per-minute shape announces (`x-ratelimit-reset-tokens: 6m0s`, the
/// reference's own example).
pub const TOKENS_RESET: Duration = Duration::from_secs(360);

pub fn all() -> Vec<Shape> {
    vec![
        rate_limited_requests(),
        rate_limited_tokens(),
        insufficient_quota(),
        server_error(),
        overloaded(),
        invalid_api_key(),
        model_not_found(),
        context_length_exceeded(),
    ]
}

fn body(message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({ "error": { "message": message, "type": kind, "param": param, "code": code } })
}

/// 429 "Rate limit reached for requests": type `requests`, code `rate_limit_exceeded`; the
/// requests window is spent (resets in 20 s), the tokens window is not.
pub fn rate_limited_requests() -> Shape {
    Shape {
        name: "openai/429-rate-limit-requests",
        provider: Provider::OpenAi,
        source: RATE_LIMIT_HEADERS,
        streamed: false,
        behavior: answer(
            429,
            &[
                ("x-ratelimit-limit-requests", "500"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "20s"),
                ("x-ratelimit-limit-tokens", "30000"),
                ("x-ratelimit-remaining-tokens", "29900"),
                ("x-ratelimit-reset-tokens", "200ms"),
            ],
            body(
                "Rate limit reached for gpt-4o in organization org-mock on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms. Visit https://platform.openai.com/account/rate-limits to learn more.",
                "requests",
                None,
                Some("rate_limit_exceeded"),
            ),
        ),
    }
}

/// 429 on tokens per minute: type `tokens`; both reset headers as the reference shows them
/// (`x-ratelimit-reset-requests: 1s`, `x-ratelimit-reset-tokens: 6m0s`). The longer one is
/// the one that matters.
pub fn rate_limited_tokens() -> Shape {
    Shape {
        name: "openai/429-rate-limit-tokens",
        provider: Provider::OpenAi,
        source: RATE_LIMIT_HEADERS,
        streamed: false,
        behavior: answer(
            429,
            &[
                ("x-ratelimit-limit-requests", "60"),
                ("x-ratelimit-remaining-requests", "59"),
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-limit-tokens", "150000"),
                ("x-ratelimit-remaining-tokens", "0"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ],
            body(
                "Rate limit reached for gpt-4o in organization org-mock on tokens per min (TPM): Limit 150000, Used 149000, Requested 2300. Please try again in 6m0s. Visit https://platform.openai.com/account/rate-limits to learn more.",
                "tokens",
                None,
                Some("rate_limit_exceeded"),
            ),
        ),
    }
}

/// 429 "You exceeded your current quota": out of credit, not a rate limit.
pub fn insufficient_quota() -> Shape {
    Shape {
        name: "openai/429-insufficient-quota",
        provider: Provider::OpenAi,
        source: ERROR_CODES,
        streamed: false,
        behavior: answer(
            429,
            &[],
            body(
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "insufficient_quota",
                None,
                Some("insufficient_quota"),
            ),
        ),
    }
}

/// 500 "The server had an error while processing your request".
pub fn server_error() -> Shape {
    Shape {
        name: "openai/500-server-error",
        provider: Provider::OpenAi,
        source: ERROR_CODES,
        streamed: false,
        behavior: answer(
            500,
            &[],
            body(
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
                None,
                None,
            ),
        ),
    }
}

/// 503 "The engine is currently overloaded, please try again later".
pub fn overloaded() -> Shape {
    Shape {
        name: "openai/503-overloaded",
        provider: Provider::OpenAi,
        source: ERROR_CODES,
        streamed: false,
        behavior: answer(
            503,
            &[],
            body(
                "The engine is currently overloaded, please try again later.",
                "server_error",
                None,
                None,
            ),
        ),
    }
}

/// 401 "Incorrect API key provided": code `invalid_api_key`.
pub fn invalid_api_key() -> Shape {
    Shape {
        name: "openai/401-invalid-api-key",
        provider: Provider::OpenAi,
        source: ERROR_CODES,
        streamed: false,
        behavior: answer(
            401,
            &[],
            body(
                "Incorrect API key provided: sk-proj-****************abcd. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
            ),
        ),
    }
}

/// 404 `model_not_found`: a retired or unknown model, or one the organisation has no access to.
pub fn model_not_found() -> Shape {
    Shape {
        name: "openai/404-model-not-found",
        provider: Provider::OpenAi,
        source: ERROR_CODES,
        streamed: false,
        behavior: answer(
            404,
            &[],
            body(
                "The model `gpt-4o` does not exist or you do not have access to it.",
                "invalid_request_error",
                None,
                Some("model_not_found"),
            ),
        ),
    }
}

/// 400 `context_length_exceeded` on `messages`.
pub fn context_length_exceeded() -> Shape {
    Shape {
        name: "openai/400-context-length-exceeded",
        provider: Provider::OpenAi,
        source: ERROR_CODES,
        streamed: false,
        behavior: answer(
            400,
            &[],
            body(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.",
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            ),
        ),
    }
}
