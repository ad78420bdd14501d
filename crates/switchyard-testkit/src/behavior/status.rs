//! Error answers: a status code, rate-limit headers in every form upstreams use, and a body that
//! looks like the real provider's.
//!
//! The meaning of an error ([`ErrorKind`]) is separate from its status code because providers
//! disagree: an exhausted credit balance is a 429 at OpenAI and a 400 at Anthropic, a bad key is
//! a 401 at OpenAI and a 400 at Gemini. A [`Status`] without a code uses the dialect's own code
//! for its kind; one without a kind infers the kind from the code. Either way the body has the
//! dialect's exact shape, so the proxy's body-based refinements are exercised for real.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::UnixMillis;

use super::retry_hint;

/// An error answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Status {
    /// The HTTP status; `None` means the dialect's own code for [`Status::error`] (or 500 when
    /// that is not set either).
    pub code: Option<u16>,
    /// What the body says went wrong; `None` means inferred from the code.
    pub error: Option<ErrorKind>,
    /// Replaces the realistic message inside the dialect's error shape.
    pub message: Option<String>,
    /// Extra response headers, sent as given.
    pub headers: BTreeMap<String, String>,
    /// Replaces the whole body: a JSON string is sent as plain text, anything else as JSON.
    pub body: Option<Value>,
}

impl Status {
    /// This code, with the realistic body the dialect sends for it.
    pub fn new(code: u16) -> Self {
        Self { code: Some(code), ..Self::default() }
    }

    /// This kind of error, with the status code the dialect itself uses for it.
    pub fn error(kind: ErrorKind) -> Self {
        Self { error: Some(kind), ..Self::default() }
    }

    /// Keeps the code, changes what the body says.
    #[must_use]
    pub fn with_error(mut self, kind: ErrorKind) -> Self {
        self.error = Some(kind);
        self
    }

    #[must_use]
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into().to_ascii_lowercase(), value.into());
        self
    }

    #[must_use]
    pub fn body_json(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    #[must_use]
    pub fn body_text(mut self, body: impl Into<String>) -> Self {
        self.body = Some(Value::String(body.into()));
        self
    }

    /// `Retry-After` as delay-seconds: `2`, or `1.5` when the wait is not whole seconds (not in
    /// the RFC, but sent by some upstreams).
    #[must_use]
    pub fn retry_after(self, wait: Duration) -> Self {
        self.header("retry-after", retry_hint::decimal_seconds(wait))
    }

    /// `Retry-After` as an HTTP-date. Takes an absolute instant so tests stay deterministic:
    /// compute it from the same clock the proxy under test reads.
    #[must_use]
    pub fn retry_after_date(self, at: UnixMillis) -> Self {
        self.header("retry-after", retry_hint::http_date(at))
    }

    /// `retry-after-ms` (OpenAI, Azure): `1500`, or `1500.5` for sub-millisecond precision.
    #[must_use]
    pub fn retry_after_ms(self, wait: Duration) -> Self {
        self.header("retry-after-ms", retry_hint::decimal_millis(wait))
    }

    /// OpenAI's `x-ratelimit-reset-requests` as a Go duration (`1s`, `6m0s`, `17ms`).
    #[must_use]
    pub fn ratelimit_reset_requests(self, wait: Duration) -> Self {
        self.header("x-ratelimit-reset-requests", retry_hint::go_duration(wait))
    }

    /// OpenAI's `x-ratelimit-reset-tokens` as a Go duration.
    #[must_use]
    pub fn ratelimit_reset_tokens(self, wait: Duration) -> Self {
        self.header("x-ratelimit-reset-tokens", retry_hint::go_duration(wait))
    }

    /// Anthropic's `anthropic-ratelimit-{limit}-reset` as an RFC 3339 instant.
    #[must_use]
    pub fn anthropic_reset(self, limit: AnthropicLimit, at: UnixMillis) -> Self {
        self.header(
            format!("anthropic-ratelimit-{}-reset", limit.as_str()),
            retry_hint::rfc3339(at),
        )
    }

    /// The kind the body describes: the one asked for, or the one the code implies.
    pub(crate) fn kind(&self) -> ErrorKind {
        self.error.unwrap_or_else(|| self.code.map_or(ErrorKind::ServerError, ErrorKind::for_code))
    }
}

/// Which Anthropic limit a reset header is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnthropicLimit {
    Requests,
    Tokens,
    InputTokens,
    OutputTokens,
}

impl AnthropicLimit {
    fn as_str(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::Tokens => "tokens",
            Self::InputTokens => "input-tokens",
            Self::OutputTokens => "output-tokens",
        }
    }
}

/// What an error body says went wrong; each dialect renders it in its own words and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// A generic invalid request.
    BadRequest,
    /// A bad or missing key (Gemini: 400 `API_KEY_INVALID`).
    Unauthorized,
    PermissionDenied,
    /// The model does not exist or was retired.
    ModelNotFound,
    RateLimited,
    /// Out of credit (OpenAI: 429 `insufficient_quota`; Anthropic: 400 "credit balance is too
    /// low").
    InsufficientQuota,
    /// OpenAI `context_length_exceeded`, Anthropic "prompt is too long", Gemini's input token
    /// count message.
    ContextLengthExceeded,
    /// The provider's safety system refused the request.
    ContentPolicy,
    /// The conversation ends with an assistant turn and the model does not support prefill.
    PrefillRejected,
    ServerError,
    /// OpenAI 503, Anthropic 529 `overloaded_error`, Gemini 503 `UNAVAILABLE`.
    Overloaded,
}

impl ErrorKind {
    /// The kind a bare status code most likely means.
    pub fn for_code(code: u16) -> Self {
        match code {
            401 => Self::Unauthorized,
            402 => Self::InsufficientQuota,
            403 => Self::PermissionDenied,
            404 | 410 => Self::ModelNotFound,
            429 => Self::RateLimited,
            503 | 529 => Self::Overloaded,
            400..=499 => Self::BadRequest,
            _ => Self::ServerError,
        }
    }
}
