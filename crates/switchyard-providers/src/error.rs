//! The crate's one error type, what an upstream said when it failed, and the kinds of error a
//! client can be told about.

use switchyard_core::outcome::BodyHint;

use crate::dialect::Dialect;

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The client's body is not a valid request in its dialect. `path` names the field
    /// (`messages[2].content`), empty for the body as a whole. The client gets a 400.
    #[error("{}", with_path(path, message))]
    InvalidRequest { path: String, message: String },
    /// The request is valid but the chosen upstream dialect cannot express part of it (a PDF
    /// for a Gemini upstream, ...). A target of another dialect may still take it.
    #[error("cannot translate the request to {dialect}: {message}")]
    Untranslatable { dialect: Dialect, message: String },
    /// A 2xx upstream body that is not what its dialect promises.
    #[error("invalid {dialect} response: {message}")]
    InvalidResponse { dialect: Dialect, message: String },
    /// One stream event whose data is not valid for the dialect. Drop it and log it
    /// (RESILIENCE.md §7); the stream goes on.
    #[error("malformed {dialect} stream event: {message}")]
    MalformedEvent { dialect: Dialect, message: String },
    /// The upstream reported an error inside a 2xx stream: the stream is over.
    #[error("{dialect} stream error: {}", error.message)]
    UpstreamStream { dialect: Dialect, error: UpstreamError },
    /// One SSE event grew past the decoder's limit: the stream is over.
    #[error("stream event larger than {limit} bytes")]
    EventTooLarge { limit: usize },
}

fn with_path(path: &str, message: &str) -> String {
    if path.is_empty() { message.to_owned() } else { format!("{path}: {message}") }
}

/// What an upstream's error body said, as far as its dialect tells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpstreamError {
    /// The refinement the classifier takes (RESILIENCE.md §2).
    pub hint: BodyHint,
    /// The provider's own error type or code (`insufficient_quota`, `overloaded_error`,
    /// `RESOURCE_EXHAUSTED`), for logs and the routing trace.
    pub code: Option<String>,
    /// The provider's human-readable reason, passed through to the client for policy errors.
    pub message: String,
}

impl UpstreamError {
    /// An error body that is not JSON (a proxy's HTML page, plain text). Its text is passed on
    /// but proves nothing: no provider documents a plain-text error, and a word in a proxy's
    /// page ("billing", "quota") must not bench a key for an hour (RESILIENCE.md §2 notes). The
    /// status code alone decides.
    pub(crate) fn unparsed(text: &str) -> Self {
        Self { hint: BodyHint::None, code: None, message: text.trim().to_owned() }
    }
}

/// The errors Switchyard itself reports to a client, each rendered in the client's dialect by
/// [`ClientDialect::error_body`](crate::dialect::ClientDialect::error_body). The HTTP status
/// is the server's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidRequest,
    ContextLengthExceeded,
    ContentPolicy,
    Authentication,
    PermissionDenied,
    ModelNotFound,
    RequestTooLarge,
    RateLimited,
    QuotaExhausted,
    Overloaded,
    Timeout,
    /// Anything else that went wrong upstream or inside the proxy, including a stream that
    /// broke after bytes reached the client.
    Internal,
}
