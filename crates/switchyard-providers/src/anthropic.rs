//! Anthropic Messages, both as the client dialect (`/v1/messages`) and as an upstream dialect.
//!
//! Anthropic to Anthropic is nearly lossless: prompt-caching breakpoints, signed thinking,
//! built-in tools and block types this crate does not model (documents, server tool results)
//! are carried verbatim. Choices made for everyone else's sake:
//! - Consecutive turns of the same role are merged, so OpenAI's run of `tool` messages
//!   becomes the one user turn of `tool_result` blocks Anthropic expects.
//! - Thinking without a signature (from another vendor) is dropped: Anthropic rejects it.
//! - `temperature` is clamped to Anthropic's 0..=1; `max_tokens`, which Anthropic requires,
//!   falls back to [`EncodeOptions::default_max_tokens`](crate::dialect::EncodeOptions).

mod block;
mod error;
mod request;
mod response;
mod stream;

pub use self::error::{error_body, error_report};
pub use self::request::{encode_request, parse_request, parse_request_to};
pub use self::response::{decode_ending, decode_response, encode_response};
pub use self::stream::{StreamDecoder, StreamEncoder};
use crate::chat::StopReason;

/// Relative to a base URL without the version (`https://api.anthropic.com`).
pub const PATH: &str = "v1/messages";

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::ContentFilter,
        "pause_turn" => StopReason::PauseTurn,
        _ => StopReason::Other,
    }
}

fn stop_reason_str(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::Other => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::ContentFilter => "refusal",
        StopReason::PauseTurn => "pause_turn",
    }
}
