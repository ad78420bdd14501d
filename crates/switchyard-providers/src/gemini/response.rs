//! Gemini responses, decoded from upstreams. A stream sends the same object in pieces, so
//! [`ResponseWire`] serves both.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{call_id, stop_reason};
use crate::chat::{ChatResponse, Part, StopReason, Text, Thinking, ToolUse, Usage};
use crate::dialect::Dialect;
use crate::error::ProviderError;
use crate::json::{self, Str};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResponseWire<'a> {
    #[serde(borrow, default)]
    pub(super) candidates: Vec<CandidateWire<'a>>,
    #[serde(default)]
    pub(super) usage_metadata: Option<UsageWire>,
    #[serde(borrow, default)]
    pub(super) model_version: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) response_id: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) prompt_feedback: Option<PromptFeedbackWire<'a>>,
    #[serde(borrow, default)]
    pub(super) error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CandidateWire<'a> {
    #[serde(borrow, default)]
    pub(super) content: Option<ContentWire<'a>>,
    #[serde(borrow, default)]
    pub(super) finish_reason: Option<Str<'a>>,
    #[serde(default)]
    pub(super) index: u32,
}

#[derive(Deserialize)]
pub(super) struct ContentWire<'a> {
    #[serde(borrow, default)]
    pub(super) parts: Vec<PartWire<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PartWire<'a> {
    #[serde(borrow, default)]
    pub(super) text: Option<Str<'a>>,
    #[serde(default)]
    pub(super) thought: Option<bool>,
    #[serde(borrow, default)]
    pub(super) function_call: Option<FunctionCallWire<'a>>,
}

#[derive(Deserialize)]
pub(super) struct FunctionCallWire<'a> {
    #[serde(borrow, default)]
    pub(super) id: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) name: Str<'a>,
    #[serde(borrow, default)]
    pub(super) args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedbackWire<'a> {
    #[serde(borrow, default)]
    pub(super) block_reason: Option<Str<'a>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
#[expect(clippy::struct_field_names, reason = "Gemini's field names")]
pub(super) struct UsageWire {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    tool_use_prompt_token_count: Option<u64>,
}

impl UsageWire {
    /// `cachedContentTokenCount` is inside `promptTokenCount`; `thoughtsTokenCount` is outside
    /// `candidatesTokenCount` but billed as output, so it is added there; the prompt of a
    /// server tool (`toolUsePromptTokenCount`) is outside `promptTokenCount` and billed as
    /// input. The four add up to `totalTokenCount`.
    pub(super) fn usage(self) -> Usage {
        let cached = self.cached_content_token_count.unwrap_or(0);
        let thoughts = self.thoughts_token_count.unwrap_or(0);
        let tool_prompt = self.tool_use_prompt_token_count.unwrap_or(0);
        Usage {
            uncached_input: self
                .prompt_token_count
                .unwrap_or(0)
                .saturating_sub(cached)
                .saturating_add(tool_prompt),
            cache_read: cached,
            cache_write: 0,
            output: self.candidates_token_count.unwrap_or(0).saturating_add(thoughts),
            reasoning: thoughts,
            estimated: false,
        }
    }
}

impl<'a> ResponseWire<'a> {
    /// The first candidate; Switchyard never asks for more.
    pub(super) fn take_candidate(&mut self) -> Option<CandidateWire<'a>> {
        let first = self.candidates.iter().position(|c| c.index == 0).unwrap_or(0);
        (first < self.candidates.len()).then(|| self.candidates.swap_remove(first))
    }
}

/// Decodes a 2xx `generateContent` body. A prompt Gemini blocked comes back as an empty
/// answer stopped for [`StopReason::ContentFilter`].
pub fn decode_response(body: &[u8]) -> Result<ChatResponse<'_>, ProviderError> {
    let mut wire: ResponseWire<'_> = json::parse(body).map_err(|e| {
        ProviderError::InvalidResponse { dialect: Dialect::Gemini, message: e.describe() }
    })?;
    let id = wire.response_id.take().map(Str::into_cow).unwrap_or_default();
    let mut content = Vec::new();
    let mut stop = None;
    if let Some(candidate) = wire.take_candidate() {
        let mut calls = 0;
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            if let Some(call) = part.function_call {
                content.push(Part::ToolUse(ToolUse {
                    id: call_id(call.id.map(Str::into_cow), &id, calls),
                    name: call.name.into_cow(),
                    arguments: Cow::Borrowed(call.args.map_or("{}", RawValue::get)),
                    cache_control: None,
                }));
                calls += 1;
            } else if let Some(text) = part.text {
                content.push(if part.thought == Some(true) {
                    Part::Thinking(Thinking { text: text.into_cow(), signature: None })
                } else {
                    Part::Text(Text::new(text.into_cow()))
                });
            }
        }
        stop = candidate.finish_reason.map(|r| match stop_reason(&r.0) {
            StopReason::EndTurn if calls > 0 => StopReason::ToolUse,
            reason => reason,
        });
    } else if wire.prompt_feedback.as_ref().is_some_and(|f| f.block_reason.is_some()) {
        stop = Some(StopReason::ContentFilter);
    }
    Ok(ChatResponse {
        model: wire.model_version.map(Str::into_cow).unwrap_or_default(),
        id,
        content,
        stop_reason: stop,
        stop_sequence: None,
        usage: wire.usage_metadata.map(UsageWire::usage).unwrap_or_default(),
    })
}
