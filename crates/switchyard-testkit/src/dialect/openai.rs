//! OpenAI Chat Completions: `chat.completion` documents, `chat.completion.chunk` streams ending
//! in `data: [DONE]`, and `{"error": {message, type, param, code}}` errors.
//!
//! Stream shape, as the real API sends it: a first chunk with the assistant role, one chunk per
//! text piece, a tool call as a header chunk (id, name, empty arguments) followed by argument
//! fragments, a chunk with an empty delta and the finish reason, a usage chunk with no choices
//! only when the request set `stream_options.include_usage`, then `[DONE]`.

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Failure, Turn, Wire, content_text, last_role, last_with_role, pieces, sse};
use crate::behavior::{ErrorKind, Finish};

/// Chat Completions has no clock in its answers that tests care about; a constant keeps every
/// answer byte-for-byte reproducible.
const CREATED: u64 = 1_700_000_000;

#[derive(Debug)]
pub(super) struct OpenAi;

impl Wire for OpenAi {
    fn document(&self, turn: &Turn<'_>) -> Value {
        let reply = turn.reply;
        let mut message = json!({
            "role": "assistant",
            "content": if reply.text.is_empty() && reply.tool_call.is_some() {
                Value::Null
            } else {
                Value::from(reply.text.as_str())
            },
            "refusal": null,
            "annotations": [],
        });
        if let Some(call) = &reply.tool_call {
            message["tool_calls"] = json!([{
                "id": call_id(turn),
                "type": "function",
                "function": { "name": call.name, "arguments": call.object_arguments().to_string() },
            }]);
        }
        json!({
            "id": completion_id(turn),
            "object": "chat.completion",
            "created": CREATED,
            "model": turn.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": turn.finish.map(finish_reason),
            }],
            "usage": usage(turn),
            "service_tier": "default",
            "system_fingerprint": "fp_mock",
        })
    }

    fn events(&self, turn: &Turn<'_>) -> Vec<Bytes> {
        let reply = turn.reply;
        let id = completion_id(turn);
        let chunk = |delta: Value, finish: Option<Finish>| {
            sse::data(&Chunk {
                choices: &[ChunkChoice {
                    delta,
                    finish_reason: finish.map(finish_reason),
                    index: 0,
                    logprobs: None,
                }],
                id: &id,
                model: turn.model,
                usage: None,
                ..Chunk::default()
            })
        };
        let mut events =
            vec![chunk(json!({ "role": "assistant", "content": "", "refusal": null }), None)];
        for piece in pieces(&reply.text, reply.chunks) {
            events.push(chunk(json!({ "content": piece }), None));
        }
        if let Some(call) = &reply.tool_call {
            events.push(chunk(
                json!({ "tool_calls": [{
                    "index": 0,
                    "id": call_id(turn),
                    "type": "function",
                    "function": { "name": call.name, "arguments": "" },
                }]}),
                None,
            ));
            for fragment in pieces(&call.object_arguments().to_string(), 2) {
                events.push(chunk(
                    json!({ "tool_calls": [{ "index": 0, "function": { "arguments": fragment } }] }),
                    None,
                ));
            }
        }
        if let Some(finish) = turn.finish {
            events.push(chunk(json!({}), Some(finish)));
            if include_usage(turn.request) {
                let usage = Some(StreamUsage::of(turn));
                events.push(sse::data(&Chunk {
                    id: &id,
                    model: turn.model,
                    usage,
                    ..Chunk::default()
                }));
            }
        }
        events
    }

    fn terminator(&self) -> Option<Bytes> {
        Some(Bytes::from_static(b"data: [DONE]\n\n"))
    }

    fn keep_alive(&self) -> Bytes {
        sse::comment("keep-alive")
    }

    fn malformed(&self) -> Bytes {
        Bytes::from_static(
            b"data: {\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"\n\n",
        )
    }

    /// OpenRouter's mid-stream error: the error beside a choice whose `finish_reason` is
    /// `"error"` (<https://openrouter.ai/docs/api-reference/streaming>).
    fn stream_error(&self) -> Bytes {
        Bytes::from_static(
            b"data: {\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"mock\",\"error\":{\"code\":\"server_error\",\"message\":\"Provider disconnected unexpectedly\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n",
        )
    }

    fn ends_with_assistant(&self, request: &Value) -> bool {
        last_role(request.get("messages"), "role") == Some("assistant")
    }

    fn last_user_text(&self, request: &Value) -> String {
        last_with_role(request.get("messages"), "role", "user")
            .map(|message| content_text(&message["content"]))
            .unwrap_or_default()
    }

    /// The `tool` messages that end the conversation.
    fn last_tool_results(&self, request: &Value) -> Vec<String> {
        let messages = request.get("messages").and_then(Value::as_array);
        let mut results: Vec<String> = messages
            .into_iter()
            .flatten()
            .rev()
            .take_while(|message| message["role"] == "tool")
            .map(|message| content_text(&message["content"]))
            .collect();
        results.reverse();
        results
    }

    fn code_for(&self, kind: ErrorKind) -> u16 {
        match kind {
            ErrorKind::BadRequest
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::ContentPolicy
            | ErrorKind::PrefillRejected => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::ModelNotFound => 404,
            ErrorKind::RateLimited | ErrorKind::InsufficientQuota => 429,
            ErrorKind::ServerError => 500,
            ErrorKind::Overloaded => 503,
        }
    }

    fn error(&self, failure: &Failure<'_>) -> Value {
        let model = failure.model;
        let (kind, param, code, message) = match failure.kind {
            ErrorKind::BadRequest => (
                "invalid_request_error",
                None,
                None,
                "Invalid request: the mock upstream was scripted to reject it.".to_owned(),
            ),
            ErrorKind::Unauthorized => (
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
                "Incorrect API key provided: sk-mock***. You can find your API key at https://platform.openai.com/account/api-keys.".to_owned(),
            ),
            ErrorKind::PermissionDenied => (
                "invalid_request_error",
                None,
                Some("unsupported_country_region_territory"),
                "Country, region, or territory not supported".to_owned(),
            ),
            ErrorKind::ModelNotFound => (
                "invalid_request_error",
                None,
                Some("model_not_found"),
                format!("The model `{model}` does not exist or you do not have access to it."),
            ),
            ErrorKind::RateLimited => (
                "requests",
                None,
                Some("rate_limit_exceeded"),
                format!("Rate limit reached for {model} in organization org-mock on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more."),
            ),
            ErrorKind::InsufficientQuota => (
                "insufficient_quota",
                None,
                Some("insufficient_quota"),
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.".to_owned(),
            ),
            ErrorKind::ContextLengthExceeded => (
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.".to_owned(),
            ),
            ErrorKind::ContentPolicy => (
                "invalid_request_error",
                None,
                Some("content_policy_violation"),
                "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.".to_owned(),
            ),
            ErrorKind::PrefillRejected => (
                "invalid_request_error",
                Some("messages"),
                None,
                "This model does not support assistant message prefill. The conversation must end with a user message.".to_owned(),
            ),
            ErrorKind::ServerError => (
                "server_error",
                None,
                None,
                "The server had an error while processing your request. Sorry about that!".to_owned(),
            ),
            ErrorKind::Overloaded => (
                "server_error",
                None,
                None,
                "The engine is currently overloaded, please try again later.".to_owned(),
            ),
        };
        json!({
            "error": {
                "message": failure.message.map_or(message, str::to_owned),
                "type": kind,
                "param": param,
                "code": code,
            }
        })
    }

    fn models(&self, names: &[String], _embedding: &dyn Fn(&str) -> bool) -> Value {
        let data: Vec<Value> = names
            .iter()
            .map(|name| json!({ "id": name, "object": "model", "created": CREATED, "owned_by": "mock" }))
            .collect();
        json!({ "object": "list", "data": data })
    }
}

fn completion_id(turn: &Turn<'_>) -> String {
    format!("chatcmpl-mock-{}", turn.seq)
}

fn call_id(turn: &Turn<'_>) -> String {
    format!("call_mock_{}", turn.seq)
}

fn finish_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolUse => "tool_calls",
        Finish::ContentFilter => "content_filter",
    }
}

fn usage(turn: &Turn<'_>) -> Value {
    json!({
        "prompt_tokens": turn.usage.prompt(),
        "completion_tokens": turn.usage.output,
        "total_tokens": turn.usage.total(),
        "prompt_tokens_details": { "cached_tokens": turn.usage.cache_read, "audio_tokens": 0 },
        "completion_tokens_details": {
            "reasoning_tokens": turn.usage.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    })
}

/// A `chat.completion.chunk`, its keys in the order `serde_json::Value` writes them
/// (alphabetical), so the bytes are those the `json!` it replaced wrote: typed, because the
/// mock builds a whole stream before its first byte, and a `json!` tree per chunk made the
/// usage chunk a proxy asks for cost it microseconds there.
#[derive(Serialize)]
struct Chunk<'a> {
    choices: &'a [ChunkChoice],
    created: u64,
    id: &'a str,
    model: &'a str,
    object: &'static str,
    system_fingerprint: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<StreamUsage>,
}

impl Default for Chunk<'_> {
    fn default() -> Self {
        Self {
            choices: &[],
            created: CREATED,
            id: "",
            model: "",
            object: "chat.completion.chunk",
            system_fingerprint: "fp_mock",
            usage: None,
        }
    }
}

#[derive(Serialize)]
struct ChunkChoice {
    delta: Value,
    finish_reason: Option<&'static str>,
    index: u32,
    logprobs: Option<()>,
}

/// [`usage`]'s object, typed for the stream (keys in the same order).
#[derive(Serialize)]
struct StreamUsage {
    completion_tokens: u64,
    completion_tokens_details: CompletionDetails,
    prompt_tokens: u64,
    prompt_tokens_details: PromptDetails,
    total_tokens: u64,
}

#[derive(Serialize)]
#[expect(clippy::struct_field_names, reason = "the API's own names")]
struct CompletionDetails {
    accepted_prediction_tokens: u64,
    audio_tokens: u64,
    reasoning_tokens: u64,
    rejected_prediction_tokens: u64,
}

#[derive(Serialize)]
struct PromptDetails {
    audio_tokens: u64,
    cached_tokens: u64,
}

impl StreamUsage {
    fn of(turn: &Turn<'_>) -> Self {
        let usage = turn.usage;
        Self {
            completion_tokens: usage.output,
            completion_tokens_details: CompletionDetails {
                accepted_prediction_tokens: 0,
                audio_tokens: 0,
                reasoning_tokens: usage.reasoning,
                rejected_prediction_tokens: 0,
            },
            prompt_tokens: usage.prompt(),
            prompt_tokens_details: PromptDetails {
                audio_tokens: 0,
                cached_tokens: usage.cache_read,
            },
            total_tokens: usage.total(),
        }
    }
}

fn include_usage(request: &Value) -> bool {
    request.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behavior::Reply;
    use crate::dialect::Usage as Tokens;

    /// The typed chunks write the bytes the `json!` trees they replaced wrote: tests elsewhere
    /// hold relayed streams to the mock's exact bytes.
    #[test]
    fn typed_chunks_write_what_json_trees_wrote() {
        let request = json!({"stream_options": {"include_usage": true}});
        let reply = Reply::text("x");
        let counts =
            Tokens { input: 7, cache_read: 3, output: 2, reasoning: 1, ..Tokens::default() };
        let turn = Turn {
            seq: 4,
            model: "gpt-x",
            request: &request,
            reply: &reply,
            finish: Some(Finish::Stop),
            usage: counts,
        };
        let events = OpenAi.events(&turn);
        let wrote = |value: Value| sse::data(&value);
        let chunk = |delta: Value, finish: Option<&str>| {
            wrote(json!({
                "id": "chatcmpl-mock-4",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": "gpt-x",
                "system_fingerprint": "fp_mock",
                "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
            }))
        };
        assert_eq!(
            events[0],
            chunk(json!({ "role": "assistant", "content": "", "refusal": null }), None)
        );
        assert_eq!(events[1], chunk(json!({ "content": "x" }), None));
        assert_eq!(events[events.len() - 2], chunk(json!({}), Some("stop")));
        let usage_chunk = wrote(json!({
            "id": "chatcmpl-mock-4",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "gpt-x",
            "system_fingerprint": "fp_mock",
            "choices": [],
            "usage": usage(&turn),
        }));
        assert_eq!(events.last(), Some(&usage_chunk));
    }
}
