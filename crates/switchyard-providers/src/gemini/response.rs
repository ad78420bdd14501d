//! Gemini responses: decoded from upstreams, encoded for clients. A stream sends the same
//! object in pieces, so [`ResponseWire`] and [`ResponseOut`] serve both.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, de};
use serde_json::value::RawValue;

use super::{call_id, finish_reason, stop_reason};
use crate::chat::{ChatResponse, Ending, Part, StopReason, Text, Thinking, ToolUse, Usage};
use crate::dialect::{Dialect, ResponseMeta};
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

/// What a relayed `generateContent` body needs read of it (see [`crate::chat::Ending`]).
pub fn decode_ending(body: &[u8]) -> Result<Ending<'_>, ProviderError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct EndingWire<'a> {
        // The whole decode's fields, in its order (a JSON array fills them in turn), the ones
        // not read skipped.
        #[serde(borrow, default)]
        candidates: Vec<CandidateEnding<'a>>,
        #[serde(default)]
        usage_metadata: Option<UsageWire>,
        #[serde(borrow, default)]
        model_version: Option<Str<'a>>,
        #[serde(rename = "responseId", default)]
        _response_id: de::IgnoredAny,
        #[serde(borrow, default)]
        prompt_feedback: Option<PromptFeedbackWire<'a>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct CandidateEnding<'a> {
        #[serde(rename = "content", default)]
        _content: de::IgnoredAny,
        #[serde(borrow, default)]
        finish_reason: Option<Str<'a>>,
        #[serde(default)]
        index: u32,
    }
    let wire: EndingWire<'_> = json::parse_answer(body, Dialect::Gemini)?;
    // The candidate `decode_response` reads: index 0, else the first.
    let first = wire.candidates.iter().find(|c| c.index == 0).or(wire.candidates.first());
    let finished = match first {
        Some(candidate) => candidate.finish_reason.is_some(),
        None => wire.prompt_feedback.as_ref().is_some_and(|f| f.block_reason.is_some()),
    };
    Ok(Ending {
        finished,
        usage: wire.usage_metadata.map(UsageWire::usage).unwrap_or_default(),
        model: wire.model_version.map(Str::into_cow),
    })
}

/// Decodes a 2xx `generateContent` body. A prompt Gemini blocked comes back as an empty
/// answer stopped for [`StopReason::ContentFilter`]. See [`decode_ending`] for what a relayed
/// one needs.
pub fn decode_response(body: &[u8]) -> Result<ChatResponse<'_>, ProviderError> {
    let mut wire: ResponseWire<'_> = json::parse_answer(body, Dialect::Gemini)?;
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

/// One `GenerateContentResponse` as a client reads it: a whole answer, or one stream chunk.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResponseOut<'r> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) candidates: Vec<CandidateOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) prompt_feedback: Option<PromptFeedbackOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) usage_metadata: Option<UsageOut>,
    pub(super) model_version: &'r str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(super) response_id: &'r str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CandidateOut<'r> {
    pub(super) content: ContentOut<'r>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) finish_reason: Option<&'static str>,
    pub(super) index: u32,
}

#[derive(Serialize)]
pub(super) struct ContentOut<'r> {
    pub(super) parts: Vec<PartOut<'r>>,
    pub(super) role: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum PartOut<'r> {
    Text {
        text: &'r str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        thought: bool,
    },
    FunctionCall {
        #[serde(rename = "functionCall")]
        function_call: FunctionCallOut<'r>,
    },
}

#[derive(Serialize)]
pub(super) struct FunctionCallOut<'r> {
    /// Gemini's own calls seldom carry one; ours always do, so the client's function response
    /// names the call it answers (Gemini CLI sends it back as the response's `id`).
    pub(super) id: &'r str,
    pub(super) name: &'r str,
    pub(super) args: &'r RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedbackOut {
    pub(super) block_reason: &'static str,
}

/// `usageMetadata`: the disjoint buckets folded back into Gemini's counts (see [`UsageWire`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
#[expect(clippy::struct_field_names, reason = "Gemini's field names")]
pub(super) struct UsageOut {
    prompt_token_count: u64,
    candidates_token_count: u64,
    total_token_count: u64,
    #[serde(skip_serializing_if = "is_zero")]
    cached_content_token_count: u64,
    #[serde(skip_serializing_if = "is_zero")]
    thoughts_token_count: u64,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl UsageOut {
    pub(super) fn new(usage: &Usage) -> Self {
        let prompt = usage.uncached_input + usage.cache_read + usage.cache_write;
        let thoughts = usage.reasoning.min(usage.output);
        Self {
            prompt_token_count: prompt,
            candidates_token_count: usage.output - thoughts,
            total_token_count: prompt + usage.output,
            cached_content_token_count: usage.cache_read,
            thoughts_token_count: thoughts,
        }
    }
}

/// A call's arguments as Gemini's `args` object.
pub(super) fn args(arguments: &str) -> &RawValue {
    json::object_or_empty(arguments)
}

/// Encodes a canonical response as a `generateContent` body for a client. Thinking goes out
/// as `thought` parts (without a signature: only Gemini's own would be checked, and those
/// come back by passthrough); a refusal with nothing said is a blocked prompt.
pub fn encode_response(response: &ChatResponse<'_>, meta: &ResponseMeta<'_>) -> Vec<u8> {
    let parts: Vec<PartOut<'_>> = response
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Text(text) => Some(PartOut::Text { text: &text.text, thought: false }),
            Part::Thinking(thinking) => Some(PartOut::Text { text: &thinking.text, thought: true }),
            Part::ToolUse(call) => Some(PartOut::FunctionCall {
                function_call: FunctionCallOut {
                    id: &call.id,
                    name: &call.name,
                    args: args(&call.arguments),
                },
            }),
            _ => None,
        })
        .collect();
    let stop = response.stop_reason.unwrap_or(StopReason::EndTurn);
    let blocked = stop == StopReason::ContentFilter && parts.is_empty();
    let body = ResponseOut {
        candidates: if blocked {
            Vec::new()
        } else {
            vec![CandidateOut {
                content: ContentOut { parts, role: "model" },
                finish_reason: Some(finish_reason(stop)),
                index: 0,
            }]
        },
        prompt_feedback: blocked.then_some(PromptFeedbackOut { block_reason: "SAFETY" }),
        usage_metadata: Some(UsageOut::new(&response.usage)),
        model_version: meta.model,
        response_id: &response.id,
    };
    serde_json::to_vec(&body).expect("serialising to memory cannot fail")
}
