//! The proxy's own refusal: what a client request gets instead of an answer, in the dialect
//! of the route it came in on. The proxy returns it; the server renders it
//! (`server::error`), so routing never builds an HTTP error response itself.

use std::time::Duration;

use http::StatusCode;
use serde_json::Value;

/// The client dialect of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
    /// Google's `{"error": {"code", "message", "status"}}`, on every `/v1beta` path.
    Gemini,
}

impl Dialect {
    pub fn of_path(path: &str) -> Self {
        if path.starts_with("/v1/messages") {
            Self::Anthropic
        } else if path == "/v1beta" || path.starts_with("/v1beta/") {
            Self::Gemini
        } else {
            Self::OpenAi
        }
    }
}

/// An error for the client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable machine name (`authentication_error`, `invalid_request_error`, ...).
    pub kind: &'static str,
    pub message: String,
    pub retry_after: Option<Duration>,
    /// Extra detail for the body (e.g. why each candidate was skipped or failed).
    pub detail: Option<Value>,
    /// The request field at fault, as OpenAI's `error.param` (the SDKs show it).
    pub param: Option<&'static str>,
    /// Tells SDKs not to retry it (`x-should-retry: false`): a spent budget stays spent.
    pub final_answer: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            retry_after: None,
            detail: None,
            param: None,
            final_answer: false,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }
}

/// A refused client request: the error and the dialect it is rendered in.
#[derive(Debug)]
pub struct Refused {
    pub error: ApiError,
    pub dialect: Dialect,
}

impl ApiError {
    /// This error, for a client of `dialect`.
    pub fn refused_in(self, dialect: Dialect) -> Refused {
        Refused { error: self, dialect }
    }
}

impl From<switchyard_providers::dialect::ClientDialect> for Dialect {
    fn from(d: switchyard_providers::dialect::ClientDialect) -> Self {
        match d {
            // The Responses API reports errors in OpenAI's shape.
            switchyard_providers::dialect::ClientDialect::OpenAi
            | switchyard_providers::dialect::ClientDialect::Responses => Self::OpenAi,
            switchyard_providers::dialect::ClientDialect::Anthropic => Self::Anthropic,
            switchyard_providers::dialect::ClientDialect::Gemini(_) => Self::Gemini,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_v1beta_path_answers_in_geminis_shape() {
        for path in
            ["/v1beta", "/v1beta/models", "/v1beta/models/x:generateContent", "/v1beta/nope"]
        {
            assert_eq!(Dialect::of_path(path), Dialect::Gemini, "{path}");
        }
        assert_eq!(Dialect::of_path("/v1/messages"), Dialect::Anthropic);
        for path in ["/v1/chat/completions", "/v1betax", "/api/keys"] {
            assert_eq!(Dialect::of_path(path), Dialect::OpenAi, "{path}");
        }
    }
}
