//! Responses non-streamed answers (the whole `response` object): decoded from upstreams,
//! encoded for clients. A stream's `response.completed` carries the same object, so the
//! stream encoder builds it with [`ResponseOut`] too.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, de};

use super::{item_id, response_id, status_of, stop_reason, wrap_thinking};
use crate::chat::{
    ChatResponse, Ending, Part, Text, Thinking, ToolUse, Usage, freeform_arguments, freeform_input,
};
use crate::dialect::{ClientContext, Dialect, ResponseMeta};
use crate::error::ProviderError;
use crate::json::{self, Str};

#[derive(Deserialize)]
pub(super) struct ResponseWire<'a> {
    #[serde(borrow, default)]
    pub(super) id: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) model: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) status: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) incomplete_details: Option<IncompleteWire<'a>>,
    #[serde(borrow, default)]
    pub(super) output: Vec<OutputItemWire<'a>>,
    #[serde(default)]
    pub(super) usage: Option<UsageWire>,
}

#[derive(Deserialize)]
pub(super) struct IncompleteWire<'a> {
    #[serde(borrow, default)]
    pub(super) reason: Option<Str<'a>>,
}

/// An output item, of any type; which fields are set depends on it.
#[derive(Deserialize)]
pub(super) struct OutputItemWire<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Str<'a>,
    #[serde(borrow, default)]
    pub(super) content: Option<Vec<ContentWire<'a>>>,
    #[serde(borrow, default)]
    pub(super) summary: Option<Vec<ContentWire<'a>>>,
    #[serde(borrow, default)]
    pub(super) call_id: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) arguments: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) input: Option<Str<'a>>,
}

/// A message's `output_text` / `refusal`, a reasoning item's `summary_text` / `reasoning_text`.
#[derive(Deserialize)]
pub(super) struct ContentWire<'a> {
    #[serde(borrow, default)]
    pub(super) text: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) refusal: Option<Str<'a>>,
}

impl<'a> ContentWire<'a> {
    pub(super) fn into_text(self) -> Option<Cow<'a, str>> {
        self.text.or(self.refusal).map(Str::into_cow)
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(super) struct UsageWire {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetailsWire>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetailsWire>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct InputDetailsWire {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct OutputDetailsWire {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl UsageWire {
    /// OpenAI's counts already include cached input and reasoning output, as canonical ones do.
    pub(super) fn usage(self) -> Usage {
        let cached = self.input_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0);
        Usage {
            uncached_input: self.input_tokens.unwrap_or(0).saturating_sub(cached),
            cache_read: cached,
            cache_write: 0,
            output: self.output_tokens.unwrap_or(0),
            reasoning: self.output_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
            estimated: false,
        }
    }
}

/// One output item as canonical parts: message text, a function or custom tool call, reasoning
/// summaries as thinking. Built-in tool calls (`web_search_call`, ...) were the upstream's own
/// work and are left out.
pub(super) fn item_parts<'a>(item: OutputItemWire<'a>, parts: &mut Vec<Part<'a>>) {
    match item.kind.0.as_ref() {
        "message" => {
            for content in item.content.unwrap_or_default() {
                if let Some(text) = content.into_text().filter(|t| !t.is_empty()) {
                    parts.push(Part::Text(Text::new(text)));
                }
            }
        }
        "function_call" => parts.push(Part::ToolUse(ToolUse {
            id: item.call_id.map(Str::into_cow).unwrap_or_default(),
            name: item.name.map(Str::into_cow).unwrap_or_default(),
            arguments: item.arguments.map_or(Cow::Borrowed("{}"), Str::into_cow),
            cache_control: None,
        })),
        "custom_tool_call" => parts.push(Part::ToolUse(ToolUse {
            id: item.call_id.map(Str::into_cow).unwrap_or_default(),
            name: item.name.map(Str::into_cow).unwrap_or_default(),
            arguments: Cow::Owned(freeform_arguments(item.input.as_ref().map_or("", |i| &i.0))),
            cache_control: None,
        })),
        "reasoning" => {
            let texts: Vec<Cow<'a, str>> = item
                .summary
                .filter(|s| !s.is_empty())
                .or(item.content)
                .unwrap_or_default()
                .into_iter()
                .filter_map(ContentWire::into_text)
                .collect();
            if !texts.is_empty() {
                let text = if texts.len() == 1 {
                    texts.into_iter().next().unwrap_or_default()
                } else {
                    Cow::Owned(texts.join("\n\n"))
                };
                parts.push(Part::Thinking(Thinking { text, signature: None }));
            }
        }
        _ => {}
    }
}

/// What a relayed Responses body needs read of it (see [`crate::chat::Ending`]).
pub fn decode_ending(body: &[u8]) -> Result<Ending<'_>, ProviderError> {
    #[derive(Deserialize)]
    struct EndingWire<'a> {
        // The whole decode's fields, in its order (a JSON array fills them in turn), the ones
        // not read skipped.
        #[serde(rename = "id", default)]
        _id: de::IgnoredAny,
        #[serde(borrow, default)]
        model: Option<Str<'a>>,
        #[serde(borrow, default)]
        status: Option<Str<'a>>,
        #[serde(borrow, default)]
        incomplete_details: Option<IncompleteWire<'a>>,
        #[serde(rename = "output", default)]
        _output: de::IgnoredAny,
        #[serde(default)]
        usage: Option<UsageWire>,
    }
    let wire: EndingWire<'_> = json::parse_answer(body, Dialect::Responses)?;
    let status = wire.status.as_ref().map_or("completed", |s| &s.0);
    let incomplete = wire.incomplete_details.as_ref().and_then(|d| d.reason.as_ref());
    // Whether the answer ended does not depend on its tool calls, only which way it did.
    let finished = stop_reason(status, incomplete.map(|r| r.0.as_ref()), false).is_some();
    Ok(Ending {
        finished,
        usage: wire.usage.map(UsageWire::usage).unwrap_or_default(),
        model: wire.model.map(Str::into_cow),
    })
}

/// Decodes a 2xx Responses body. A response that is not `completed` or `incomplete` (failed,
/// cancelled, still in progress) has no stop reason: the router treats it as cut short. See
/// [`decode_ending`] for what a relayed one needs.
pub fn decode_response(body: &[u8]) -> Result<ChatResponse<'_>, ProviderError> {
    let wire: ResponseWire<'_> = json::parse_answer(body, Dialect::Responses)?;
    let mut content = Vec::new();
    for item in wire.output {
        item_parts(item, &mut content);
    }
    let has_calls = content.iter().any(|p| matches!(p, Part::ToolUse(_)));
    let status = wire.status.as_ref().map_or("completed", |s| &s.0);
    let incomplete = wire.incomplete_details.as_ref().and_then(|d| d.reason.as_ref());
    let stop_reason = stop_reason(status, incomplete.map(|r| r.0.as_ref()), has_calls);
    Ok(ChatResponse {
        id: wire.id.map(Str::into_cow).unwrap_or_default(),
        model: wire.model.map(Str::into_cow).unwrap_or_default(),
        content,
        stop_reason,
        stop_sequence: None,
        usage: wire.usage.map(UsageWire::usage).unwrap_or_default(),
    })
}

// ---------------------------------------------------------------------------------------------
// Encoding for a client.

/// The `response` object, as the SDKs' `Response` type has it. Request parameters the router
/// does not echo have their defaults.
#[derive(Serialize)]
pub(super) struct ResponseOut<'r> {
    pub(super) id: &'r str,
    pub(super) object: &'static str,
    pub(super) created_at: u64,
    pub(super) status: &'static str,
    pub(super) error: Option<ErrorOut<'r>>,
    pub(super) incomplete_details: Option<IncompleteOut>,
    pub(super) instructions: Option<()>,
    pub(super) max_output_tokens: Option<()>,
    pub(super) model: &'r str,
    pub(super) output: &'r [ItemOut],
    pub(super) parallel_tool_calls: bool,
    pub(super) previous_response_id: Option<()>,
    pub(super) reasoning: ReasoningOut,
    pub(super) store: bool,
    pub(super) temperature: Option<()>,
    pub(super) text: TextOut,
    pub(super) tool_choice: &'static str,
    pub(super) tools: [(); 0],
    pub(super) top_p: Option<()>,
    pub(super) truncation: &'static str,
    pub(super) usage: Option<UsageOut>,
    pub(super) user: Option<()>,
    pub(super) metadata: Empty,
}

impl<'r> ResponseOut<'r> {
    pub(super) fn new(id: &'r str, meta: &'r ResponseMeta<'r>, output: &'r [ItemOut]) -> Self {
        Self {
            id,
            object: "response",
            created_at: meta.created,
            status: "in_progress",
            error: None,
            incomplete_details: None,
            instructions: None,
            max_output_tokens: None,
            model: meta.model,
            output,
            parallel_tool_calls: true,
            previous_response_id: None,
            reasoning: ReasoningOut { effort: None, summary: None },
            store: false,
            temperature: None,
            text: TextOut { format: FormatOut { kind: "text" } },
            tool_choice: "auto",
            tools: [],
            top_p: None,
            truncation: "disabled",
            usage: None,
            user: None,
            metadata: Empty {},
        }
    }
}

#[derive(Serialize)]
pub(super) struct Empty {}

#[derive(Serialize)]
pub(super) struct ErrorOut<'r> {
    pub(super) code: &'static str,
    pub(super) message: &'r str,
}

#[derive(Serialize)]
pub(super) struct IncompleteOut {
    pub(super) reason: &'static str,
}

#[derive(Serialize)]
pub(super) struct ReasoningOut {
    effort: Option<()>,
    summary: Option<()>,
}

#[derive(Serialize)]
pub(super) struct TextOut {
    format: FormatOut,
}

#[derive(Serialize)]
struct FormatOut {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// An output item, owned: the stream encoder builds them up as deltas arrive.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ItemOut {
    Message {
        id: String,
        status: &'static str,
        role: &'static str,
        content: Vec<TextPartOut>,
    },
    Reasoning {
        id: String,
        summary: Vec<SummaryOut>,
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
    },
    FunctionCall {
        id: String,
        call_id: String,
        name: String,
        /// The namespace the client declared the tool in (see [`crate::chat::Namespace`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        arguments: String,
        status: &'static str,
    },
    CustomToolCall {
        id: String,
        call_id: String,
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        input: String,
    },
}

impl ItemOut {
    /// Takes the id another writer gave this item (a relayed upstream's).
    pub(super) fn set_id(&mut self, new: String) {
        match self {
            Self::Message { id, .. }
            | Self::Reasoning { id, .. }
            | Self::FunctionCall { id, .. }
            | Self::CustomToolCall { id, .. } => *id = new,
        }
    }
}

/// An `output_text` part.
#[derive(Clone, Debug, Serialize)]
pub(super) struct TextPartOut {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) text: String,
    pub(super) annotations: [(); 0],
    pub(super) logprobs: [(); 0],
}

impl TextPartOut {
    pub(super) fn new(text: String) -> Self {
        Self { kind: "output_text", text, annotations: [], logprobs: [] }
    }
}

/// A reasoning item's `summary_text` part.
#[derive(Clone, Debug, Serialize)]
pub(super) struct SummaryOut {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) text: String,
}

impl SummaryOut {
    pub(super) fn new(text: String) -> Self {
        Self { kind: "summary_text", text }
    }
}

#[derive(Serialize)]
pub(super) struct UsageOut {
    input_tokens: u64,
    input_tokens_details: InputDetailsOut,
    output_tokens: u64,
    output_tokens_details: OutputDetailsOut,
    total_tokens: u64,
}

#[derive(Serialize)]
struct InputDetailsOut {
    cached_tokens: u64,
    cache_write_tokens: u64,
}

#[derive(Serialize)]
struct OutputDetailsOut {
    reasoning_tokens: u64,
}

impl UsageOut {
    pub(super) fn new(usage: &Usage) -> Self {
        Self {
            input_tokens: usage.input(),
            input_tokens_details: InputDetailsOut {
                cached_tokens: usage.cache_read,
                cache_write_tokens: usage.cache_write,
            },
            output_tokens: usage.output,
            output_tokens_details: OutputDetailsOut { reasoning_tokens: usage.reasoning },
            total_tokens: usage.total(),
        }
    }
}

/// Encodes a canonical response as a Responses body for a client: one item per run of text,
/// per call and per piece of reasoning, in order. Calls of the client's freeform tools are
/// `custom_tool_call`s; Anthropic's signed thinking rides in `encrypted_content`.
pub fn encode_response(
    response: &ChatResponse<'_>,
    meta: &ResponseMeta<'_>,
    context: &ClientContext,
) -> Vec<u8> {
    let id = response_id();
    let mut output: Vec<ItemOut> = Vec::new();
    for part in &response.content {
        let n = output.len();
        match part {
            Part::Text(text) => {
                if let Some(ItemOut::Message { content, .. }) = output.last_mut() {
                    content[0].text.push_str(&text.text);
                } else {
                    output.push(ItemOut::Message {
                        id: item_id("msg", &id, n),
                        status: "completed",
                        role: "assistant",
                        content: vec![TextPartOut::new(text.text.clone().into_owned())],
                    });
                }
            }
            Part::Thinking(thinking) => output.push(ItemOut::Reasoning {
                id: item_id("rs", &id, n),
                summary: vec![SummaryOut::new(thinking.text.clone().into_owned())],
                encrypted_content: thinking
                    .signature
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .map(|signature| wrap_thinking(&thinking.text, signature)),
            }),
            Part::RedactedThinking(data) => output.push(ItemOut::Reasoning {
                id: item_id("rs", &id, n),
                summary: Vec::new(),
                encrypted_content: Some(format!("{}{data}", super::REDACTED_PREFIX)),
            }),
            Part::ToolUse(call) if context.is_freeform(&call.name) => {
                let (namespace, name) = context.declared(&call.name);
                output.push(ItemOut::CustomToolCall {
                    id: item_id("ctc", &id, n),
                    call_id: call.id.clone().into_owned(),
                    name: name.to_owned(),
                    namespace: namespace.map(str::to_owned),
                    input: freeform_input(&call.arguments).into_owned(),
                });
            }
            Part::ToolUse(call) => {
                let (namespace, name) = context.declared(&call.name);
                output.push(ItemOut::FunctionCall {
                    id: item_id("fc", &id, n),
                    call_id: call.id.clone().into_owned(),
                    name: name.to_owned(),
                    namespace: namespace.map(str::to_owned),
                    arguments: call.arguments.clone().into_owned(),
                    status: "completed",
                });
            }
            Part::Image(_) | Part::ToolResult(_) | Part::Opaque(_) => {}
        }
    }
    let (status, reason) = status_of(response.stop_reason);
    let mut body = ResponseOut::new(&id, meta, &output);
    body.status = status;
    body.incomplete_details = reason.map(|reason| IncompleteOut { reason });
    body.usage = Some(UsageOut::new(&response.usage));
    serde_json::to_vec(&body).expect("serialising to memory cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::StopReason;

    const META: ResponseMeta<'static> = ResponseMeta { model: "served", created: 9 };

    #[test]
    fn a_responses_body_decodes_with_its_calls_reasoning_and_usage() {
        let body = br#"{"id":"resp_1","object":"response","status":"completed","model":"gpt-5",
            "output":[
              {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"plan"}],"encrypted_content":"gAAA"},
              {"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]},
              {"type":"custom_tool_call","id":"ctc_1","call_id":"c1","name":"apply_patch","input":"*** Begin Patch"},
              {"type":"web_search_call","id":"ws_1","status":"completed"}],
            "usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":17}}"#;
        let response = decode_response(body).unwrap();
        assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(
            response.usage,
            Usage {
                uncached_input: 6,
                cache_read: 4,
                cache_write: 0,
                output: 7,
                reasoning: 3,
                estimated: false
            }
        );
        let kinds: Vec<&str> = response.content.iter().map(crate::chat::part_kind).collect();
        assert_eq!(kinds, ["thinking", "text", "tool_use"]);
        let Part::ToolUse(call) = &response.content[2] else { panic!() };
        assert_eq!(call.arguments, r#"{"input":"*** Begin Patch"}"#);
    }

    #[test]
    fn an_incomplete_response_stopped_at_the_output_limit() {
        let body = br#"{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}"#;
        assert_eq!(decode_response(body).unwrap().stop_reason, Some(StopReason::MaxTokens));
        let failed = br#"{"id":"r","status":"failed","error":{"code":"server_error","message":"x"},"output":[]}"#;
        assert_eq!(decode_response(failed).unwrap().stop_reason, None);
    }

    #[test]
    fn a_freeform_tool_call_is_given_back_as_a_custom_tool_call() {
        let response = ChatResponse {
            id: "chatcmpl-1".into(),
            content: vec![Part::ToolUse(ToolUse {
                id: "call_1".into(),
                name: "apply_patch".into(),
                arguments: r#"{"input":"*** Begin Patch\n"}"#.into(),
                cache_control: None,
            })],
            stop_reason: Some(StopReason::ToolUse),
            ..ChatResponse::default()
        };
        let context = ClientContext {
            freeform_tools: vec!["apply_patch".into()],
            ..ClientContext::default()
        };
        let body: serde_json::Value =
            serde_json::from_slice(&encode_response(&response, &META, &context)).unwrap();
        assert_ne!(body["id"], "resp_chatcmpl-1", "an id of our own, not the upstream's");
        assert!(body["id"].as_str().is_some_and(|id| id.starts_with("resp_")), "{body}");
        assert_eq!(body["status"], "completed");
        let id = body["id"].as_str().unwrap().strip_prefix("resp_").unwrap();
        assert_eq!(
            body["output"][0],
            serde_json::json!({"type": "custom_tool_call", "id": format!("ctc_{id}_0"),
                "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch\n"})
        );
    }
}
