//! Anthropic non-streamed responses: decoded from upstreams, encoded for clients.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, de};

use super::block::{BlockIn, BlockOut, KnownBlock, block_out};
use super::{stop_reason, stop_reason_str};
use crate::chat::{ChatResponse, Ending, Part, StopReason, Usage};
use crate::dialect::{Dialect, ResponseMeta};
use crate::error::ProviderError;
use crate::json::{self, Str};

#[derive(Deserialize)]
struct ResponseWire<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(borrow, default)]
    content: Vec<BlockIn<'a>>,
    #[serde(borrow, default)]
    stop_reason: Option<Str<'a>>,
    #[serde(borrow, default)]
    stop_sequence: Option<Str<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

/// Anthropic's counts: `input_tokens` excludes what was read from or written to the cache.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[expect(clippy::struct_field_names, reason = "Anthropic's field names")]
pub(super) struct UsageWire {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl UsageWire {
    /// Overwrites the counts `newer` carries (a stream's `message_delta` repeats some).
    pub(super) fn update(&mut self, newer: &Self) {
        let take = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        take(&mut self.input_tokens, newer.input_tokens);
        take(&mut self.output_tokens, newer.output_tokens);
        take(&mut self.cache_creation_input_tokens, newer.cache_creation_input_tokens);
        take(&mut self.cache_read_input_tokens, newer.cache_read_input_tokens);
    }

    pub(super) fn usage(&self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let write = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            uncached_input: self.input_tokens.unwrap_or(0),
            cache_read: read,
            cache_write: write,
            output: self.output_tokens.unwrap_or(0),
            // Anthropic bills thinking as output and does not count it apart.
            reasoning: 0,
            estimated: false,
        }
    }
}

/// What a relayed Messages body needs read of it (see [`crate::chat::Ending`]).
pub fn decode_ending(body: &[u8]) -> Result<Ending<'_>, ProviderError> {
    #[derive(Deserialize)]
    struct EndingWire<'a> {
        // The whole decode's fields, in its order (a JSON array fills them in turn), the ones
        // not read skipped.
        #[serde(rename = "id", default)]
        _id: de::IgnoredAny,
        #[serde(borrow, default)]
        model: Option<Str<'a>>,
        #[serde(rename = "content", default)]
        _content: de::IgnoredAny,
        #[serde(borrow, default)]
        stop_reason: Option<Str<'a>>,
        #[serde(rename = "stop_sequence", default)]
        _stop_sequence: de::IgnoredAny,
        #[serde(default)]
        usage: Option<UsageWire>,
    }
    let wire: EndingWire<'_> = json::parse_answer(body, Dialect::Anthropic)?;
    Ok(Ending {
        finished: wire.stop_reason.is_some(),
        usage: wire.usage.unwrap_or_default().usage(),
        model: wire.model.map(Str::into_cow),
    })
}

/// Decodes a 2xx Messages body. See [`decode_ending`] for what a relayed one needs.
pub fn decode_response(body: &[u8]) -> Result<ChatResponse<'_>, ProviderError> {
    let wire: ResponseWire<'_> = json::parse_answer(body, Dialect::Anthropic)?;
    Ok(ChatResponse {
        id: wire.id.map(Str::into_cow).unwrap_or_default(),
        model: wire.model.map(Str::into_cow).unwrap_or_default(),
        content: wire.content.into_iter().map(|b| b.0).collect(),
        stop_reason: wire.stop_reason.map(|r| stop_reason(&r.0)),
        stop_sequence: wire.stop_sequence.map(Str::into_cow),
        usage: wire.usage.unwrap_or_default().usage(),
    })
}

#[derive(Serialize)]
struct ResponseOut<'r> {
    id: Cow<'r, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'r str,
    content: Vec<BlockOut<'r>>,
    stop_reason: &'static str,
    stop_sequence: Option<&'r str>,
    usage: UsageOut,
}

#[derive(Serialize)]
#[expect(clippy::struct_field_names, reason = "Anthropic's field names")]
pub(super) struct UsageOut {
    input_tokens: u64,
    output_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
}

impl UsageOut {
    pub(super) fn new(usage: &Usage) -> Self {
        Self {
            input_tokens: usage.uncached_input,
            output_tokens: usage.output,
            cache_creation_input_tokens: usage.cache_write,
            cache_read_input_tokens: usage.cache_read,
        }
    }
}

/// A message id for upstreams that gave none.
pub(super) fn message_id<'r>(id: &'r str, meta: &ResponseMeta<'_>) -> Cow<'r, str> {
    if id.is_empty() { Cow::Owned(format!("msg_{}", meta.created)) } else { Cow::Borrowed(id) }
}

/// Encodes a canonical response as a Messages body for a client. Thinking from vendors that
/// do not sign it is shown with an empty signature, which this crate drops again should the
/// client send it back.
pub fn encode_response(response: &ChatResponse<'_>, meta: &ResponseMeta<'_>) -> Vec<u8> {
    let content = response
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Thinking(thinking) => Some(BlockOut::Known(KnownBlock::Thinking {
                thinking: &thinking.text,
                signature: thinking.signature.as_deref().unwrap_or_default(),
            })),
            part => block_out(part).ok(),
        })
        .collect();
    let body = ResponseOut {
        id: message_id(&response.id, meta),
        kind: "message",
        role: "assistant",
        model: meta.model,
        content,
        stop_reason: stop_reason_str(response.stop_reason.unwrap_or(StopReason::EndTurn)),
        stop_sequence: response.stop_sequence.as_deref(),
        usage: UsageOut::new(&response.usage),
    };
    serde_json::to_vec(&body).expect("serialising to memory cannot fail")
}
