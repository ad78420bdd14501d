//! OpenAI Chat Completions, both as the client dialect (`/v1/chat/completions`) and as the
//! upstream dialect of every OpenAI-compatible server.
//!
//! One wire, two directions: requests are parsed from clients and encoded for upstreams,
//! responses and streams are decoded from upstreams and encoded for clients.
//!
//! Compatibility choices, each because some widely used server needs it:
//! - System prompts become one `system` message with the blocks joined by a blank line: many
//!   local chat templates accept a single system message only.
//! - Content that is one text part is sent as a plain string.
//! - A stream asks for `stream_options.include_usage`, so usage is known even when the client
//!   did not ask for it.
//! - Streamed tool calls are keyed by index *and* id: some servers reuse index 0 for every
//!   parallel call.
//! - `reasoning_content` (DeepSeek, vLLM, ...) and `reasoning` (OpenRouter) are read as
//!   thinking; clients get `reasoning_content`.

mod error;
mod request;
mod response;
mod stream;

pub use self::error::{error_body, error_report};
pub(crate) use self::request::image_source;
pub use self::request::{encode_request, parse_request, parse_request_to};
pub use self::response::{decode_ending, decode_response, encode_response};
pub use self::stream::{StreamDecoder, StreamEncoder};
use crate::chat::StopReason;

/// Relative to a base URL that includes the API version (`https://api.openai.com/v1`).
pub const PATH: &str = "chat/completions";

fn stop_reason(finish_reason: &str) -> StopReason {
    match finish_reason {
        "stop" | "eos" | "end_turn" => StopReason::EndTurn,
        "length" | "max_tokens" => StopReason::MaxTokens,
        "tool_calls" | "function_call" | "tool_use" => StopReason::ToolUse,
        "content_filter" | "refusal" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::PauseTurn
        | StopReason::Other => "stop",
        StopReason::MaxTokens => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::ContentFilter => "content_filter",
    }
}
