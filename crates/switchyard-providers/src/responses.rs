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
pub use self::request::{encode_request, parse_request, parse_request_to};
pub use self::response::{decode_ending, decode_response, encode_response};
pub use self::stream::{StreamDecoder, StreamEncoder};
use crate::chat::{Part, StopReason, Thinking};

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

/// A response id for an answer this router made: `resp_` and 128 random bits in hex.
///
/// Never derived from the upstream's id: a local server's ids (`chatcmpl-<0..999>` from
/// Ollama) repeat within a few dozen turns, and a repeated id would continue the wrong
/// conversation (`previous_response_id`).
pub(crate) fn response_id() -> String {
    let mut random = [0_u8; 16];
    if getrandom::fill(&mut random).is_err() {
        // Not seen on any supported OS; a per-process keyed hash of a counter still differs
        // from every other id this process made, and from another process's.
        random = fallback_random();
    }
    random.iter().fold(String::with_capacity(5 + 32), |mut id, b| {
        if id.is_empty() {
            id.push_str("resp_");
        }
        let _ = write!(id, "{b:02x}");
        id
    })
}

/// 128 bits from the standard library's per-process random hash keys and a counter.
fn fallback_random() -> [u8; 16] {
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = [0_u8; 16];
    for (half, chunk) in out.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(n);
        hasher.write_usize(half);
        chunk.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    out
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
    fn response_ids_are_128_random_bits_whatever_the_upstream_called_its_answer() {
        let made = response_id();
        assert!(made.starts_with("resp_") && made.len() == "resp_".len() + 32, "{made}");
        assert!(made["resp_".len()..].bytes().all(|b| b.is_ascii_hexdigit()), "{made}");
        let many: std::collections::HashSet<String> = (0..1000).map(|_| response_id()).collect();
        assert_eq!(many.len(), 1000);
        let fallback: std::collections::HashSet<[u8; 16]> =
            (0..1000).map(|_| fallback_random()).collect();
        assert_eq!(fallback.len(), 1000, "the fallback differs from call to call too");
    }
}
