//! Anthropic Messages: `message` documents with `text` / `tool_use` content blocks, named-event
//! streams, and `{"type": "error", "error": {type, message}}` errors.
//!
//! Stream shape, as the real API sends it: `message_start` (usage with the input tokens), a
//! `ping`, then per content block `content_block_start`, its deltas (`text_delta` or
//! `input_json_delta`) and `content_block_stop`; then `message_delta` with the stop reason and
//! output tokens, and `message_stop` as the terminator. The error `type` follows the status code
//! (Anthropic maps them one to one); the message follows the kind.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Failure, Turn, Wire, content_text, last_role, last_with_role, pieces, sse};
use crate::behavior::{ErrorKind, Finish};

#[derive(Debug)]
pub(super) struct Anthropic;

impl Wire for Anthropic {
    fn document(&self, turn: &Turn<'_>) -> Value {
        let reply = turn.reply;
        let mut content = Vec::new();
        if !reply.text.is_empty() {
            content.push(json!({ "type": "text", "text": reply.text }));
        }
        if let Some(call) = &reply.tool_call {
            content.push(json!({
                "type": "tool_use",
                "id": tool_id(turn),
                "name": call.name,
                "input": call.object_arguments(),
            }));
        }
        json!({
            "id": message_id(turn),
            "type": "message",
            "role": "assistant",
            "model": turn.model,
            "content": content,
            "stop_reason": turn.finish.map(stop_reason),
            "stop_sequence": null,
            "usage": {
                "input_tokens": turn.usage.input,
                "output_tokens": turn.usage.output,
                "cache_creation_input_tokens": turn.usage.cache_write,
                "cache_read_input_tokens": turn.usage.cache_read,
            },
        })
    }

    fn events(&self, turn: &Turn<'_>) -> Vec<Bytes> {
        let reply = turn.reply;
        let mut events = vec![
            sse::event(
                "message_start",
                &json!({
                    "type": "message_start",
                    "message": {
                        "id": message_id(turn),
                        "type": "message",
                        "role": "assistant",
                        "model": turn.model,
                        "content": [],
                        "stop_reason": null,
                        "stop_sequence": null,
                        "usage": {
                            "input_tokens": turn.usage.input,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": turn.usage.cache_write,
                            "cache_read_input_tokens": turn.usage.cache_read,
                        },
                    },
                }),
            ),
            self.keep_alive(),
        ];
        let mut index = 0;
        if !reply.text.is_empty() {
            let start = json!({ "type": "text", "text": "" });
            let deltas = pieces(&reply.text, reply.chunks)
                .into_iter()
                .map(|piece| json!({ "type": "text_delta", "text": piece }));
            push_block(&mut events, index, &start, deltas);
            index += 1;
        }
        if let Some(call) = &reply.tool_call {
            let start =
                json!({ "type": "tool_use", "id": tool_id(turn), "name": call.name, "input": {} });
            let arguments = call.object_arguments().to_string();
            let deltas = pieces(&arguments, 2)
                .into_iter()
                .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }));
            push_block(&mut events, index, &start, deltas);
        }
        if let Some(finish) = turn.finish {
            events.push(sse::event(
                "message_delta",
                &json!({
                    "type": "message_delta",
                    "delta": { "stop_reason": stop_reason(finish), "stop_sequence": null },
                    "usage": { "output_tokens": turn.usage.output },
                }),
            ));
        }
        events
    }

    fn terminator(&self) -> Option<Bytes> {
        Some(Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
    }

    fn keep_alive(&self) -> Bytes {
        Bytes::from_static(b"event: ping\ndata: {\"type\":\"ping\"}\n\n")
    }

    fn malformed(&self) -> Bytes {
        Bytes::from_static(
            b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\n\n",
        )
    }

    /// <https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events>
    fn stream_error(&self) -> Bytes {
        Bytes::from_static(
            b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
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

    /// `tool_result` blocks of the last user or assistant message, when that is a user turn.
    /// Mid-conversation `system` messages (Claude Code sends them after the user's turn) are
    /// not turns of their own.
    fn last_tool_results(&self, request: &Value) -> Vec<String> {
        let messages = request.get("messages").and_then(Value::as_array);
        let last =
            messages.and_then(|m| m.iter().rev().find(|message| message["role"] != "system"));
        let Some(last) = last.filter(|message| message["role"] == "user") else {
            return Vec::new();
        };
        last["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "tool_result")
            .map(|block| content_text(&block["content"]))
            .collect()
    }

    fn code_for(&self, kind: ErrorKind) -> u16 {
        match kind {
            ErrorKind::BadRequest
            | ErrorKind::InsufficientQuota
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::ContentPolicy
            | ErrorKind::PrefillRejected => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::ModelNotFound => 404,
            ErrorKind::RateLimited => 429,
            ErrorKind::ServerError => 500,
            ErrorKind::Overloaded => 529,
        }
    }

    fn error(&self, failure: &Failure<'_>) -> Value {
        let message = match failure.kind {
            ErrorKind::BadRequest => {
                "Invalid request: the mock upstream was scripted to reject it.".to_owned()
            }
            ErrorKind::Unauthorized => "invalid x-api-key".to_owned(),
            ErrorKind::PermissionDenied => {
                "Your API key does not have permission to use the specified resource.".to_owned()
            }
            ErrorKind::ModelNotFound => format!("model: {}", failure.model),
            ErrorKind::RateLimited => "This request would exceed the rate limit for your organization (mock) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.".to_owned(),
            ErrorKind::InsufficientQuota => "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.".to_owned(),
            ErrorKind::ContextLengthExceeded => {
                "prompt is too long: 215000 tokens > 200000 maximum".to_owned()
            }
            ErrorKind::ContentPolicy => "Output blocked by content filtering policy".to_owned(),
            ErrorKind::PrefillRejected => "This model does not support assistant message prefill. The conversation must end with a user message.".to_owned(),
            ErrorKind::ServerError => "Internal server error".to_owned(),
            ErrorKind::Overloaded => "Overloaded".to_owned(),
        };
        json!({
            "type": "error",
            "error": {
                "type": error_type(failure.code),
                "message": failure.message.map_or(message, str::to_owned),
            },
            "request_id": "req_mock",
        })
    }

    fn models(&self, names: &[String], _embedding: &dyn Fn(&str) -> bool) -> Value {
        let data: Vec<Value> = names
            .iter()
            .map(|name| {
                json!({
                    "type": "model",
                    "id": name,
                    "display_name": name,
                    "created_at": "2025-01-01T00:00:00Z",
                })
            })
            .collect();
        json!({
            "data": data,
            "has_more": false,
            "first_id": names.first(),
            "last_id": names.last(),
        })
    }
}

/// One content block: start, deltas, stop.
fn push_block(
    events: &mut Vec<Bytes>,
    index: usize,
    start: &Value,
    deltas: impl Iterator<Item = Value>,
) {
    events.push(sse::event(
        "content_block_start",
        &json!({ "type": "content_block_start", "index": index, "content_block": start }),
    ));
    for delta in deltas {
        events.push(sse::event(
            "content_block_delta",
            &json!({ "type": "content_block_delta", "index": index, "delta": delta }),
        ));
    }
    events.push(sse::event(
        "content_block_stop",
        &json!({ "type": "content_block_stop", "index": index }),
    ));
}

fn message_id(turn: &Turn<'_>) -> String {
    format!("msg_mock_{}", turn.seq)
}

fn tool_id(turn: &Turn<'_>) -> String {
    format!("toolu_mock_{}", turn.seq)
}

fn stop_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "end_turn",
        Finish::Length => "max_tokens",
        Finish::ToolUse => "tool_use",
        Finish::ContentFilter => "refusal",
    }
}

/// Anthropic's error types correspond one to one with status codes.
fn error_type(code: u16) -> &'static str {
    match code {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}
