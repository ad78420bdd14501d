//! The four upstream wire formats the mock speaks, behind one trait.
//!
//! A dialect only *renders*: given the facts of one turn (the request, the reply to give, the
//! finish reason) it produces a JSON document, a list of stream events or an error body.
//! Deciding what to send, and when, belongs to the exchange and to delivery, so each fault is
//! written once and applies to every dialect.
//!
//! Invariants: rendering is deterministic (ids come from the attempt's sequence number,
//! `created` is a constant), and each rendered stream event is exactly one complete SSE event.

mod anthropic;
mod gemini;
mod openai;
mod responses;
mod sse;

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::behavior::{ErrorKind, Finish, Reply};

/// Which provider's API a request spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// `POST /v1/chat/completions`, `GET /v1/models`; embeddings at `POST /v1/embeddings`.
    #[serde(rename = "openai")]
    OpenAi,
    /// `POST /v1/messages`, `GET /v1/models` with an `anthropic-version` header.
    Anthropic,
    /// `POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`;
    /// embeddings at `:embedContent` and `:batchEmbedContents`.
    Gemini,
    /// `POST /v1/responses` (OpenAI's Responses API, what Codex CLI speaks).
    Responses,
}

impl Dialect {
    pub(crate) fn wire(self) -> &'static dyn Wire {
        match self {
            Self::OpenAi => &openai::OpenAi,
            Self::Anthropic => &anthropic::Anthropic,
            Self::Gemini => &gemini::Gemini,
            Self::Responses => &responses::Responses,
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Responses => "responses",
        })
    }
}

/// The facts of one successful turn, as every dialect needs them.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    /// The attempt's sequence number: the source of every id in the answer.
    pub seq: u64,
    pub model: &'a str,
    pub request: &'a Value,
    pub reply: &'a Reply,
    /// `None` when the reply is truncated and must not report one.
    pub finish: Option<Finish>,
    pub usage: Usage,
}

/// Token counts: the reply's scripted ones, else a deterministic estimate (four bytes a
/// token) so tests can assert on them. `input` is the uncached prompt; see [`crate::Tokens`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Usage {
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
}

impl Usage {
    pub(crate) fn estimate(request_bytes: usize, reply: &Reply) -> Self {
        if let Some(t) = reply.usage {
            return Self {
                input: t.input,
                cache_read: t.cache_read,
                cache_write: t.cache_write,
                output: t.output,
                reasoning: t.reasoning,
            };
        }
        let output_bytes = reply.text.len()
            + reply.tool_call.as_ref().map_or(0, |call| call.arguments.to_string().len());
        Self { input: tokens(request_bytes), output: tokens(output_bytes), ..Self::default() }
    }

    /// Every prompt token, as OpenAI and Gemini count them (Anthropic leaves the cache out).
    pub(crate) fn prompt(self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    pub(crate) fn total(self) -> u64 {
        self.prompt() + self.output
    }
}

/// The mock's token estimate for this many bytes of text: four bytes a token, at least one.
pub(crate) fn tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4).max(1)).unwrap_or(u64::MAX)
}

/// An error answer's facts.
#[derive(Debug)]
pub(crate) struct Failure<'a> {
    pub kind: ErrorKind,
    pub code: u16,
    pub message: Option<&'a str>,
    pub model: &'a str,
}

/// One dialect's rendering.
pub(crate) trait Wire: Sync {
    /// The non-streaming answer.
    fn document(&self, turn: &Turn<'_>) -> Value;

    /// The streamed answer, one complete SSE event per element, without the terminator.
    fn events(&self, turn: &Turn<'_>) -> Vec<Bytes>;

    /// The event that ends a complete stream (`[DONE]`, `message_stop`), if the dialect has one.
    fn terminator(&self) -> Option<Bytes>;

    /// What the dialect sends to keep an idle stream open.
    fn keep_alive(&self) -> Bytes;

    /// An event whose `data:` is cut off mid-JSON.
    fn malformed(&self) -> Bytes;

    /// The dialect's documented in-stream report of an overload, sent inside a 200 stream.
    fn stream_error(&self) -> Bytes;

    /// Whether the conversation ends with an assistant (model) turn.
    fn ends_with_assistant(&self, request: &Value) -> bool;

    /// The text of the conversation's last user message (its text parts joined by newlines;
    /// tool results excluded), or empty. Read by content rules (`script::rule`).
    fn last_user_text(&self, request: &Value) -> String;

    /// The text of each tool result in the conversation's last turn, in order: what the client
    /// sends back after running the tools the previous answer called. Older tool results do not
    /// count, so a rule that answers a tool result does not fire again later in the same
    /// conversation.
    fn last_tool_results(&self, request: &Value) -> Vec<String>;

    /// The status code this dialect's provider uses for an error of this kind.
    fn code_for(&self, kind: ErrorKind) -> u16;

    /// The provider's error body.
    fn error(&self, failure: &Failure<'_>) -> Value;

    /// The answer to a model listing; `embedding` says which of the models are embedding
    /// models (only Gemini's listing tells them apart, by their methods).
    fn models(&self, names: &[String], embedding: &dyn Fn(&str) -> bool) -> Value;
}

/// `text` in `n` pieces of nearly equal length, split on character boundaries; fewer pieces
/// when there are fewer characters, none for empty text.
pub(crate) fn pieces(text: &str, n: usize) -> Vec<&str> {
    let chars = text.chars().count();
    let n = n.clamp(1, chars.max(1));
    if text.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n);
    let mut rest = text;
    for i in 0..n {
        let take = chars * (i + 1) / n - chars * i / n;
        let at = rest.char_indices().nth(take).map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(at);
        out.push(piece);
        rest = tail;
    }
    out
}

/// The last element of a JSON array of turns whose `role_key` is `role`.
fn last_with_role<'a>(turns: Option<&'a Value>, role_key: &str, role: &str) -> Option<&'a Value> {
    turns?
        .as_array()?
        .iter()
        .rev()
        .find(|turn| turn.get(role_key).and_then(Value::as_str) == Some(role))
}

/// The text of an OpenAI or Anthropic `content`: the string itself, or its `text` parts joined
/// by newlines (images, tool calls and tool results skipped).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The answer so far a continuation request asks this dialect to continue (RESILIENCE.md §10),
/// or `None` when the request is no continuation: an Anthropic conversation ending with an
/// assistant turn (a prefill); a Chat one whose last assistant message is marked `prefix` or
/// `partial`, or whose request says `continue_final_message` (vLLM). Other dialects have none.
pub(crate) fn continued_prefix(dialect: Dialect, request: &Value) -> Option<String> {
    let last = request.get("messages")?.as_array()?.last()?;
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let marked = |key: &str, on: &Value| on.get(key).and_then(Value::as_bool) == Some(true);
    let continues = match dialect {
        Dialect::Anthropic => true,
        Dialect::OpenAi => {
            marked("prefix", last)
                || marked("partial", last)
                || marked("continue_final_message", request)
        }
        Dialect::Gemini | Dialect::Responses => false,
    };
    continues.then(|| content_text(&last["content"]))
}

/// The role of the last element of a JSON array of turns, read at `role_key`.
fn last_role<'a>(turns: Option<&'a Value>, role_key: &str) -> Option<&'a str> {
    turns?.as_array()?.last()?.get(role_key)?.as_str()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Dialect, continued_prefix, pieces};

    #[test]
    fn a_continuation_is_recognised_only_by_its_dialects_mechanism() {
        let hi = json!({"role": "user", "content": "hi"});
        let prefill = json!({"role": "assistant", "content": [{"type": "text", "text": "Hel"}]});
        let anthropic = json!({"messages": [hi, prefill]});
        assert_eq!(continued_prefix(Dialect::Anthropic, &anthropic).as_deref(), Some("Hel"));
        let unmarked = json!({"messages": [hi, {"role": "assistant", "content": "Hel"}]});
        assert_eq!(continued_prefix(Dialect::OpenAi, &unmarked), None, "Chat needs a mark");
        for marked in [
            json!({"messages": [hi, {"role": "assistant", "content": "Hel", "prefix": true}]}),
            json!({"messages": [hi, {"role": "assistant", "content": "Hel", "partial": true}]}),
            json!({"messages": [hi, {"role": "assistant", "content": "Hel"}], "continue_final_message": true}),
        ] {
            assert_eq!(
                continued_prefix(Dialect::OpenAi, &marked).as_deref(),
                Some("Hel"),
                "{marked}"
            );
        }
        assert_eq!(continued_prefix(Dialect::Anthropic, &json!({"messages": [hi]})), None);
    }

    #[test]
    fn pieces_cover_the_text_exactly_in_order() {
        for (text, n) in [("Hello from the mock.", 3), ("héllo wörld", 4), ("ab", 5), ("x", 0)] {
            let parts = pieces(text, n);
            assert_eq!(parts.concat(), text);
            assert!(parts.iter().all(|p| !p.is_empty()), "{parts:?}");
            assert_eq!(parts.len(), n.clamp(1, text.chars().count()));
        }
    }

    #[test]
    fn empty_text_has_no_pieces() {
        assert!(pieces("", 3).is_empty());
    }
}
