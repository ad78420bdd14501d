//! Google Gemini `generateContent` / `streamGenerateContent`, both as an upstream dialect and
//! as the client dialect Gemini CLI and the `google-genai` SDKs speak (`/v1beta/models/...`).
//!
//! A client names the model and the method in the path, so [`Method`] rides on the client
//! dialect and the router sets the model. A client stream is SSE with `alt=sse` (what every
//! Google SDK asks for) and otherwise one JSON array written element by element; upstreams are
//! always asked for SSE.
//!
//! Translation choices:
//! - Tool schemas go out as `parametersJsonSchema`, which takes JSON Schema as is, instead of
//!   `parameters`, whose `OpenAPI` subset rejects what editors commonly send
//!   (`additionalProperties`, `$schema`, ...).
//! - Gemini answers tool calls by function *name*, so a tool result is matched to the call
//!   with its id earlier in the conversation; a result without one is refused.
//! - Gemini gives calls no ids; they are made from the response id and the call's position,
//!   which keeps them unique across a conversation.
//! - A stream has no end marker: it is complete when a `finishReason` arrived.

mod error;
mod request;
mod response;
mod stream;

use std::borrow::Cow;

pub use self::error::{error_body, error_report, status_name};
pub use self::request::{encode_request, parse_request, parse_request_to};
pub use self::response::{decode_ending, decode_response, encode_response};
pub use self::stream::{StreamDecoder, StreamEncoder};
use crate::chat::StopReason;
use crate::dialect::Endpoint;

/// The method a Gemini client called: what it wants back and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `:generateContent`: one whole answer.
    Generate,
    /// `:streamGenerateContent?alt=sse`: server-sent events, one chunk per event.
    StreamSse,
    /// `:streamGenerateContent` without `alt=sse`: one JSON array of chunks, written as they
    /// come (`[` chunk `,\r\n` chunk ... `]`).
    StreamArray,
}

impl Method {
    pub fn streams(self) -> bool {
        !matches!(self, Self::Generate)
    }
}

/// `models/{model}:generateContent`, or `:streamGenerateContent` with `alt=sse`, relative to
/// a base URL that includes the version (`https://generativelanguage.googleapis.com/v1beta`).
/// A model given with its resource prefix (`models/...`, `tunedModels/...`) is used as is.
pub fn endpoint(model: &str, stream: bool) -> Endpoint {
    let method = if stream { "streamGenerateContent" } else { "generateContent" };
    let path = if model.contains('/') {
        format!("{model}:{method}")
    } else {
        format!("models/{model}:{method}")
    };
    Endpoint { path: Cow::Owned(path), query: stream.then_some("alt=sse") }
}

/// A canonical stop reason in Gemini's words (`finishReason`).
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn
        | StopReason::ToolUse
        | StopReason::StopSequence
        | StopReason::PauseTurn => "STOP",
        StopReason::MaxTokens => "MAX_TOKENS",
        StopReason::ContentFilter => "SAFETY",
        StopReason::Other => "OTHER",
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            StopReason::ContentFilter
        }
        _ => StopReason::Other,
    }
}

/// A tool call id for the `n`-th call of a response: Gemini's own when it sent one, else made
/// from the response id (letters, digits, `_` and `-` only, as Anthropic requires).
fn call_id<'a>(own: Option<Cow<'a, str>>, response_id: &str, n: usize) -> Cow<'a, str> {
    match own {
        Some(id) if !id.is_empty() => id,
        _ => {
            let clean: String = response_id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            Cow::Owned(if clean.is_empty() {
                format!("call_{n}")
            } else {
                format!("call_{clean}_{n}")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_names_the_model_and_asks_for_sse_when_streaming() {
        assert_eq!(
            endpoint("gemini-2.5-flash", true),
            Endpoint {
                path: "models/gemini-2.5-flash:streamGenerateContent".into(),
                query: Some("alt=sse")
            }
        );
        assert_eq!(endpoint("tunedModels/mine", false).path, "tunedModels/mine:generateContent");
    }
}
