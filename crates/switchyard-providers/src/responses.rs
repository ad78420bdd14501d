//! OpenAI Responses (`POST /v1/responses`), both as the client dialect Codex CLI and the newest
//! OpenAI SDKs speak and as the upstream dialect of OpenAI models that have no other API.
//!
//! Wire formats as read from the sources that produce and consume them:
//! - what Codex sends and reads: `openai/codex`, `codex-rs/codex-api/src/common.rs`
//!   (`ResponsesApiRequest`: `instructions`, `input`, `tools`, `tool_choice`,
//!   `parallel_tool_calls`, `reasoning` (sent as `null` when unset), `store`, `stream`,
//!   `include`, `prompt_cache_key`, `text`), `codex-rs/protocol/src/models.rs` (`ResponseItem`:
//!   items are sent without their ids) and `codex-rs/codex-api/src/sse/responses.rs` (Codex
//!   takes whole items from `response.output_item.done`, text from `response.output_text.delta`,
//!   and ends a turn on `response.completed`, whose `response.id` and `usage` it reads;
//!   `response.failed` carries `response.error.code`);
//! - the event and object types: `openai/openai-python`, `src/openai/types/responses/`
//!   (`response_*_event.py`, `response.py`, `response_usage.py`), and the `responses.stream`
//!   helper in `src/openai/lib/streaming/responses/_responses.py`, which insists on
//!   `response.created` first, appends `output_item.added` items to the response's `output`
//!   and `content_part.added` parts to a message's `content`, and indexes both by
//!   `output_index` / `content_index`.
//!
//! Translation choices:
//! - Input items become canonical messages: consecutive model-side items (assistant messages,
//!   `function_call`, `custom_tool_call`, `reasoning`, item types this crate does not model)
//!   one assistant turn, consecutive `*_output` items one tool turn, leading `system` /
//!   `developer` messages the system prompt after `instructions`.
//! - `custom` (freeform) tools are [`ToolFormat::Freeform`](crate::chat::ToolFormat): other
//!   dialects see a function with one string argument `input`, and calls of it come back as
//!   `custom_tool_call`s (see [`ClientContext`](crate::dialect::ClientContext)).
//! - `reasoning` items are opaque (their `encrypted_content` means something to OpenAI only)
//!   and go to a Responses upstream only. Anthropic's signed thinking, streamed to a Responses
//!   client, rides in a reasoning item's `encrypted_content` under [`THINKING_PREFIX`], so it
//!   goes back to Anthropic signed when Codex returns the item.
//! - Built-in tools (`web_search`, `local_shell`, ...) reach a Responses upstream only and are
//!   dropped (and named) elsewhere.

mod error;
mod request;
mod response;
mod stream;

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub use self::error::{error_body, error_report};
pub use self::request::{encode_request, parse_request};
pub use self::response::{decode_response, encode_response};
pub use self::stream::{StreamDecoder, StreamEncoder};
use crate::chat::{Part, StopReason, Thinking};
use crate::dialect::ResponseMeta;

/// Relative to a base URL that includes the API version (`https://api.openai.com/v1`).
pub const PATH: &str = "responses";

/// `encrypted_content` of a reasoning item that carries Anthropic's signed thinking:
/// this prefix, then base64url of `{"thinking": ..., "signature": ...}`.
pub const THINKING_PREFIX: &str = "switchyard.anthropic.thinking.";
/// `encrypted_content` of a reasoning item that carries Anthropic's redacted thinking: this
/// prefix, then the block's `data` as it was.
pub const REDACTED_PREFIX: &str = "switchyard.anthropic.redacted.";

#[derive(serde::Serialize, serde::Deserialize)]
struct SignedThinking<'a> {
    #[serde(borrow)]
    thinking: Cow<'a, str>,
    #[serde(borrow)]
    signature: Cow<'a, str>,
}

/// Signed thinking as a reasoning item's `encrypted_content`.
fn wrap_thinking(thinking: &str, signature: &str) -> String {
    let json = serde_json::to_vec(&SignedThinking {
        thinking: Cow::Borrowed(thinking),
        signature: Cow::Borrowed(signature),
    })
    .expect("serialising to memory cannot fail");
    format!("{THINKING_PREFIX}{}", URL_SAFE_NO_PAD.encode(json))
}

/// The Anthropic thinking a reasoning item's `encrypted_content` carries, if it carries any.
fn unwrap_thinking(encrypted: &str) -> Option<Part<'static>> {
    if let Some(data) = encrypted.strip_prefix(REDACTED_PREFIX) {
        return Some(Part::RedactedThinking(Cow::Owned(data.to_owned())));
    }
    let json = URL_SAFE_NO_PAD.decode(encrypted.strip_prefix(THINKING_PREFIX)?).ok()?;
    let signed: SignedThinking<'_> = serde_json::from_slice(&json).ok()?;
    Some(Part::Thinking(Thinking {
        text: Cow::Owned(signed.thinking.into_owned()),
        signature: Some(Cow::Owned(signed.signature.into_owned())),
    }))
}

/// The response id a client sees: the upstream's own when it is a Responses id, else one
/// made from it (letters, digits, `_` and `-`), so ids stay unique for `previous_response_id`.
fn response_id(upstream: &str, meta: &ResponseMeta<'_>) -> String {
    if upstream.starts_with("resp_") {
        return upstream.to_owned();
    }
    let clean: String = upstream
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(64)
        .collect();
    if clean.is_empty() {
        let mut random = [0_u8; 8];
        // Without randomness the time alone still names the response.
        let _ = getrandom::fill(&mut random);
        let hex = random.iter().fold(String::with_capacity(16), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
        format!("resp_{}_{hex}", meta.created)
    } else {
        format!("resp_{clean}")
    }
}

/// The id of the `n`-th output item of response `id`: `msg_…`, `fc_…`, `ctc_…`, `rs_…`.
fn item_id(prefix: &str, response_id: &str, n: usize) -> String {
    format!("{prefix}_{}_{n}", response_id.strip_prefix("resp_").unwrap_or(response_id))
}

/// `status` and `incomplete_details.reason` for a stop reason.
fn status_of(reason: Option<StopReason>) -> (&'static str, Option<&'static str>) {
    match reason {
        Some(StopReason::MaxTokens) => ("incomplete", Some("max_output_tokens")),
        Some(StopReason::ContentFilter) => ("incomplete", Some("content_filter")),
        _ => ("completed", None),
    }
}

/// The stop reason of a finished response: `incomplete_details.reason` says why it stopped
/// early; otherwise its calls make it a tool-use turn.
fn stop_reason(status: &str, incomplete: Option<&str>, has_calls: bool) -> Option<StopReason> {
    match status {
        "completed" if has_calls => Some(StopReason::ToolUse),
        "completed" => Some(StopReason::EndTurn),
        "incomplete" => Some(match incomplete {
            Some("content_filter") => StopReason::ContentFilter,
            Some("max_output_tokens" | "max_tokens") | None => StopReason::MaxTokens,
            Some(_) => StopReason::Other,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: ResponseMeta<'static> = ResponseMeta { model: "m", created: 7 };

    #[test]
    fn signed_thinking_survives_a_trip_through_encrypted_content() {
        let wrapped = wrap_thinking("let me think \"hard\"", "sig/+=");
        assert!(wrapped.starts_with(THINKING_PREFIX));
        assert_eq!(
            unwrap_thinking(&wrapped),
            Some(Part::Thinking(Thinking {
                text: "let me think \"hard\"".into(),
                signature: Some("sig/+=".into())
            }))
        );
        assert_eq!(unwrap_thinking("gAAAAB-openai-own"), None);
    }

    #[test]
    fn response_ids_are_kept_or_made_from_the_upstream_id() {
        assert_eq!(response_id("resp_abc", &META), "resp_abc");
        assert_eq!(response_id("chatcmpl-1/x", &META), "resp_chatcmpl-1x");
        let made = response_id("", &META);
        assert!(made.starts_with("resp_7_") && made.len() == "resp_7_".len() + 16, "{made}");
        assert_ne!(made, response_id("", &META));
    }
}
