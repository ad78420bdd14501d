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
    /// Extra response headers, sent as given but for one placeholder: `{epoch+N}` (or
    /// `{epoch}`) becomes the Unix time in whole seconds N seconds after the answer is made,
    /// rounded up, so never sooner. A subscription's limit names its reset as an instant
    /// (`anthropic-ratelimit-unified-reset: 1767225603`), and a script file is static: this is
    /// how one says "the reset is 3 s after this answer" (see [`Status::at`]).
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

    /// The status as sent at `now`: every `{epoch+N}` placeholder of a header value (see
    /// [`Status::headers`]) filled in. The mock calls this before recording the attempt, so a
    /// record holds the instant that was sent; text that is not exactly such a placeholder is
    /// left as it is.
    #[must_use]
    pub fn at(mut self, now: UnixMillis) -> Self {
        for value in self.headers.values_mut() {
            if value.contains(EPOCH_PLACEHOLDER) {
                *value = fill_epochs(value, now);
            }
        }
        self
    }

    /// The kind the body describes: the one asked for, or the one the code implies.
    pub(crate) fn kind(&self) -> ErrorKind {
        self.error.unwrap_or_else(|| self.code.map_or(ErrorKind::ServerError, ErrorKind::for_code))
    }
}

/// How every placeholder of [`Status::headers`] starts.
const EPOCH_PLACEHOLDER: &str = "{epoch";

/// `value` with each `{epoch}` and `{epoch+N}` replaced by the Unix seconds N seconds after
/// `now`, rounded up.
fn fill_epochs(value: &str, now: UnixMillis) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find(EPOCH_PLACEHOLDER) {
        out.push_str(&rest[..start]);
        let after = &rest[start + EPOCH_PLACEHOLDER.len()..];
        let filled = after.find('}').and_then(|end| {
            let offset = match &after[..end] {
                "" => 0,
                plus => plus.strip_prefix('+')?.parse::<u64>().ok()?,
            };
            let seconds = now.0.div_ceil(1000).saturating_add(offset);
            Some((seconds.to_string(), &after[end + 1..]))
        });
        if let Some((seconds, tail)) = filled {
            out.push_str(&seconds);
            rest = tail;
        } else {
            out.push_str(EPOCH_PLACEHOLDER);
            rest = after;
        }
    }
    out.push_str(rest);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = UnixMillis(1_800_000_000_000);

    fn sent(value: &str, now: UnixMillis) -> String {
        let status = Status::new(429).header("anthropic-ratelimit-unified-reset", value).at(now);
        status.headers["anthropic-ratelimit-unified-reset"].clone()
    }

    #[test]
    fn an_epoch_placeholder_is_the_unix_seconds_that_many_seconds_after_the_answer() {
        assert_eq!(sent("{epoch+3}", NOW), "1800000003");
        assert_eq!(sent("{epoch}", NOW), "1800000000");
        assert_eq!(sent("reset at {epoch+60}, not before", NOW), "reset at 1800000060, not before");
    }

    #[test]
    fn a_reset_between_two_seconds_is_rounded_up_so_it_is_never_sooner_than_asked() {
        assert_eq!(sent("{epoch+3}", NOW.plus(Duration::from_millis(1))), "1800000004");
        assert_eq!(sent("{epoch}", NOW.plus(Duration::from_millis(999))), "1800000001");
    }

    #[test]
    fn text_that_is_not_exactly_a_placeholder_is_sent_as_written() {
        for value in ["{epoch + 3}", "{epoch-3}", "{epoch+x}", "{epoch+3", "{other}", "rejected"] {
            assert_eq!(sent(value, NOW), value);
        }
        assert_eq!(sent("{epoch+x} {epoch+1}", NOW), "{epoch+x} 1800000001");
    }
}
