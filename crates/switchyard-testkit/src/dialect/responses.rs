//! OpenAI Responses: `response` documents whose `output` holds `message`, `function_call` and
//! `custom_tool_call` items, named-event streams where every event carries a `sequence_number`,
//! and the same `{"error": {message, type, param, code}}` errors and status codes as Chat
//! Completions.
//!
//! Stream shape, as the real API sends it: `response.created` and `response.in_progress` (the
//! response so far, empty `output`); per output item `response.output_item.added`, its parts and
//! deltas, `response.output_item.done` with the whole item; then `response.completed` (or
//! `response.incomplete` for a length or content-filter stop) with the whole response and its
//! usage. A text message streams `response.content_part.added`, one
//! `response.output_text.delta` per piece, `response.output_text.done` and
//! `response.content_part.done`; a function call streams
//! `response.function_call_arguments.delta` fragments and `.done`; a custom (freeform) tool
//! call streams `response.custom_tool_call_input.delta` and `.done`. There is no terminator
//! after the final event: it is the only sign of a complete stream, so a truncated reply simply
//! stops before it.
//!
//! A tool call whose `arguments` is a JSON string is a freeform tool's input (Codex's
//! `apply_patch`) and becomes a `custom_tool_call`; any other value is a `function_call` with
//! the arguments as a JSON string.

use bytes::Bytes;
use serde_json::{Value, json};

use super::openai::OpenAi;
use super::{Failure, Turn, Wire, pieces, sse};
use crate::behavior::{ErrorKind, Finish, ToolCall};

/// Constant for the same reason as Chat's `created`: reproducible answers.
const CREATED_AT: u64 = 1_700_000_000;

#[derive(Debug)]
pub(super) struct Responses;

impl Wire for Responses {
    fn document(&self, turn: &Turn<'_>) -> Value {
        let mut output = Vec::new();
        if !turn.reply.text.is_empty() {
            output.push(message(turn, &turn.reply.text, "completed"));
        }
        if let Some(call) = &turn.reply.tool_call {
            output.push(tool_item(turn, call, Done::Yes));
        }
        response(turn, status(turn.finish), &output, true)
    }

    fn events(&self, turn: &Turn<'_>) -> Vec<Bytes> {
        let mut stream = Stream { events: Vec::new(), seq: 0 };
        let started = response(turn, "in_progress", &[], false);
        stream.push("response.created", json!({ "response": started }));
        stream.push("response.in_progress", json!({ "response": started }));
        let mut output = Vec::new();
        if !turn.reply.text.is_empty() {
            let index = output.len();
            let id = message_id(turn);
            let text = &turn.reply.text;
            let empty_part = json!({ "type": "output_text", "text": "", "annotations": [] });
            let part = json!({ "type": "output_text", "text": text, "annotations": [] });
            let at = json!({ "item_id": id, "output_index": index, "content_index": 0 });
            stream.push(
                "response.output_item.added",
                json!({ "output_index": index, "item": message(turn, "", "in_progress") }),
            );
            stream.push("response.content_part.added", with(&at, "part", empty_part));
            for piece in pieces(text, turn.reply.chunks) {
                let mut delta = with(&at, "delta", Value::from(piece));
                delta["logprobs"] = json!([]);
                stream.push("response.output_text.delta", delta);
            }
            let mut done = with(&at, "text", Value::from(text.as_str()));
            done["logprobs"] = json!([]);
            stream.push("response.output_text.done", done);
            stream.push("response.content_part.done", with(&at, "part", part));
            let item = message(turn, text, "completed");
            stream
                .push("response.output_item.done", json!({ "output_index": index, "item": item }));
            output.push(item);
        }
        if let Some(call) = &turn.reply.tool_call {
            let index = output.len();
            let item = tool_item(turn, call, Done::Yes);
            let at = json!({ "item_id": item["id"], "output_index": index });
            stream.push(
                "response.output_item.added",
                json!({ "output_index": index, "item": tool_item(turn, call, Done::No) }),
            );
            let (kind, field, whole) = match &call.arguments {
                Value::String(input) => ("custom_tool_call_input", "input", input.clone()),
                arguments => ("function_call_arguments", "arguments", arguments.to_string()),
            };
            for fragment in pieces(&whole, 2) {
                stream.push(
                    &format!("response.{kind}.delta"),
                    with(&at, "delta", Value::from(fragment)),
                );
            }
            let mut done = with(&at, field, Value::from(whole));
            if field == "arguments" {
                done["name"] = Value::from(call.name.as_str());
            }
            stream.push(&format!("response.{kind}.done"), done);
            stream
                .push("response.output_item.done", json!({ "output_index": index, "item": item }));
            output.push(item);
        }
        if let Some(finish) = turn.finish {
            let status = status(Some(finish));
            let name =
                if status == "completed" { "response.completed" } else { "response.incomplete" };
            stream.push(name, json!({ "response": response(turn, status, &output, true) }));
        }
        stream.events
    }

    fn terminator(&self) -> Option<Bytes> {
        None
    }

    fn keep_alive(&self) -> Bytes {
        sse::comment("keep-alive")
    }

    fn malformed(&self) -> Bytes {
        Bytes::from_static(
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":\"\n\n",
        )
    }

    /// The Responses API's `error` event (<https://platform.openai.com/docs/api-reference/responses-streaming/error>).
    fn stream_error(&self) -> Bytes {
        Bytes::from_static(
            b"event: error\ndata: {\"type\":\"error\",\"sequence_number\":99,\"code\":\"server_error\",\"message\":\"The server had an error while processing your request.\",\"param\":null}\n\n",
        )
    }

    fn ends_with_assistant(&self, request: &Value) -> bool {
        let Some(items) = request.get("input").and_then(Value::as_array) else { return false };
        items.last().and_then(|item| item.get("role")).and_then(Value::as_str) == Some("assistant")
    }

    /// `input` as a plain string, or the text parts (`input_text`, `output_text`, `text`) of
    /// the last item with role `user`.
    fn last_user_text(&self, request: &Value) -> String {
        match request.get("input") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .rev()
                .find(|item| item.get("role").and_then(Value::as_str) == Some("user"))
                .map(|item| parts_text(&item["content"]))
                .unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// The `function_call_output` and `custom_tool_call_output` items after the last user or
    /// assistant message: the calls of the same turn, reasoning and developer messages in
    /// between are passed over.
    fn last_tool_results(&self, request: &Value) -> Vec<String> {
        let items = request.get("input").and_then(Value::as_array);
        let mut results: Vec<String> = items
            .into_iter()
            .flatten()
            .rev()
            .take_while(|item| {
                !matches!(item.get("role").and_then(Value::as_str), Some("user" | "assistant"))
            })
            .filter(|item| {
                matches!(
                    item.get("type").and_then(Value::as_str),
                    Some("function_call_output" | "custom_tool_call_output")
                )
            })
            .map(|item| parts_text(&item["output"]))
            .collect();
        results.reverse();
        results
    }

    fn code_for(&self, kind: ErrorKind) -> u16 {
        OpenAi.code_for(kind)
    }

    fn error(&self, failure: &Failure<'_>) -> Value {
        OpenAi.error(failure)
    }

    fn models(&self, names: &[String], embedding: &dyn Fn(&str) -> bool) -> Value {
        OpenAi.models(names, embedding)
    }
}

/// Events in the making, numbered as they are pushed.
struct Stream {
    events: Vec<Bytes>,
    seq: u64,
}

impl Stream {
    fn push(&mut self, name: &str, mut data: Value) {
        data["type"] = Value::from(name);
        data["sequence_number"] = Value::from(self.seq);
        self.seq += 1;
        self.events.push(sse::event(name, &data));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Done {
    Yes,
    No,
}

/// `base` (an object) with one more field.
fn with(base: &Value, key: &str, value: Value) -> Value {
    let mut out = base.clone();
    out[key] = value;
    out
}

fn response_id(turn: &Turn<'_>) -> String {
    format!("resp_mock_{}", turn.seq)
}

fn message_id(turn: &Turn<'_>) -> String {
    format!("msg_mock_{}", turn.seq)
}

fn call_id(turn: &Turn<'_>) -> String {
    format!("call_mock_{}", turn.seq)
}

fn message(turn: &Turn<'_>, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{ "type": "output_text", "text": text, "annotations": [], "logprobs": [] }])
    } else {
        json!([])
    };
    json!({
        "id": message_id(turn),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    })
}

/// A `custom_tool_call` when the arguments are a string (a freeform tool's input), otherwise
/// a `function_call`; empty while in progress.
fn tool_item(turn: &Turn<'_>, call: &ToolCall, done: Done) -> Value {
    let status = if done == Done::Yes { "completed" } else { "in_progress" };
    match &call.arguments {
        Value::String(input) => json!({
            "id": format!("ctc_mock_{}", turn.seq),
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id(turn),
            "name": call.name,
            "input": if done == Done::Yes { input.as_str() } else { "" },
        }),
        arguments => json!({
            "id": format!("fc_mock_{}", turn.seq),
            "type": "function_call",
            "status": status,
            "call_id": call_id(turn),
            "name": call.name,
            "arguments": if done == Done::Yes { arguments.to_string() } else { String::new() },
        }),
    }
}

/// `completed`, `incomplete` for a stop that cut the answer short, and `in_progress` for a
/// truncated reply that reports no end at all.
fn status(finish: Option<Finish>) -> &'static str {
    match finish {
        Some(Finish::Stop | Finish::ToolUse) => "completed",
        Some(Finish::Length | Finish::ContentFilter) => "incomplete",
        None => "in_progress",
    }
}

fn incomplete_details(finish: Option<Finish>) -> Value {
    match finish {
        Some(Finish::Length) => json!({ "reason": "max_output_tokens" }),
        Some(Finish::ContentFilter) => json!({ "reason": "content_filter" }),
        Some(Finish::Stop | Finish::ToolUse) | None => Value::Null,
    }
}

/// The response object; `usage` only once it is over (it is `null` while in progress).
fn response(turn: &Turn<'_>, status: &str, output: &[Value], over: bool) -> Value {
    let request = turn.request;
    let usage = if over && turn.finish.is_some() {
        json!({
            "input_tokens": turn.usage.prompt(),
            "input_tokens_details": { "cached_tokens": turn.usage.cache_read },
            "output_tokens": turn.usage.output,
            "output_tokens_details": { "reasoning_tokens": turn.usage.reasoning },
            "total_tokens": turn.usage.total(),
        })
    } else {
        Value::Null
    };
    json!({
        "id": response_id(turn),
        "object": "response",
        "created_at": CREATED_AT,
        "status": status,
        "error": null,
        "incomplete_details": if over { incomplete_details(turn.finish) } else { Value::Null },
        "instructions": request.get("instructions").cloned().unwrap_or(Value::Null),
        "max_output_tokens": request.get("max_output_tokens").cloned().unwrap_or(Value::Null),
        "model": turn.model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls").cloned().unwrap_or(Value::Bool(true)),
        "previous_response_id": request.get("previous_response_id").cloned().unwrap_or(Value::Null),
        "reasoning": request.get("reasoning").cloned().unwrap_or(json!({ "effort": null, "summary": null })),
        "store": request.get("store").cloned().unwrap_or(Value::Bool(true)),
        "temperature": request.get("temperature").cloned().unwrap_or(Value::from(1.0)),
        "text": request.get("text").cloned().unwrap_or(json!({ "format": { "type": "text" } })),
        "tool_choice": request.get("tool_choice").cloned().unwrap_or(Value::from("auto")),
        "tools": request.get("tools").cloned().unwrap_or(json!([])),
        "top_p": request.get("top_p").cloned().unwrap_or(Value::from(1.0)),
        "truncation": "disabled",
        "usage": usage,
        "metadata": {},
    })
}

/// A message's `content` or a tool output: the string itself, or its text parts joined by
/// newlines (`input_text`, `output_text`, `text`; images and files skipped).
fn parts_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|part| {
                matches!(
                    part.get("type").and_then(Value::as_str),
                    Some("input_text" | "output_text" | "text")
                )
            })
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
