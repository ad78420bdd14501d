//! What the mock does with one attempt: the scriptable vocabulary of success and failure.
//!
//! A [`Behavior`] is decided *before* the request is answered and is the same value whether it
//! came from a test (`mock.enqueue`), a script file or the `x-mock-behavior` request header, so
//! every form serialises with serde. Faults are split by where they strike:
//!
//! - before any response byte: [`Behavior::Status`], [`Behavior::Reset`], [`Behavior::Hang`],
//!   [`Behavior::RejectPrefill`];
//! - while a successful reply is delivered: a [`Reply`] carries its own pacing (chunk count,
//!   gaps, a slow first event with keep-alives) and at most one delivery [`Fault`].
//!
//! Invariants: the default value of every type is a plain, complete success, and every field of
//! a script has a default, so `{ reply = {} }` is a valid normal reply. Durations are whole
//! milliseconds on the wire (`*_ms`) and [`Duration`] in the builder methods.

mod retry_hint;
mod status;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::status::{AnthropicLimit, ErrorKind, Status};

/// The request header that scripts a single request, overriding the model's queue without
/// consuming it. Its value is a [`Behavior`] as JSON (see [`Behavior::header_value`]).
pub const BEHAVIOR_HEADER: &str = "x-mock-behavior";

/// What the mock does with one attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behavior {
    /// Answer successfully, streaming when the request asked for it.
    Reply(Reply),
    /// Answer with this status, headers and (by default) a realistic error body in the dialect.
    Status(Status),
    /// Close the connection with a TCP reset before any response byte: the client sees a
    /// connection error and no status.
    Reset,
    /// Read the request and never answer, until the client goes away (or the mock stops).
    Hang,
    /// Answer 400 when the conversation ends with an assistant turn (a prefill), as some
    /// models do; otherwise reply normally.
    RejectPrefill,
    /// Answer 200 with a body of filler bytes that is never a valid answer: a broken or hostile
    /// upstream trying to exhaust the reader's memory.
    Flood(Flood),
}

/// A successful status with a body far too large, see [`Behavior::Flood`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Flood {
    /// How many filler bytes the body has, sent in 64 KiB chunks made as they go out (the mock
    /// never holds them).
    pub bytes: u64,
    /// The `Content-Length` to announce, true or not; `None` sends the body chunked, with no
    /// length announced. After a body shorter than the length announced, the connection stays
    /// open and silent: only a reader that refuses the length early is not kept waiting.
    pub content_length: Option<u64>,
}

impl Flood {
    /// `bytes` of filler, chunked, with no length announced.
    pub fn chunked(bytes: u64) -> Self {
        Self { bytes, content_length: None }
    }

    /// Announces `content_length` and sends `bytes`.
    pub fn announcing(content_length: u64, bytes: u64) -> Self {
        Self { bytes, content_length: Some(content_length) }
    }
}

impl From<Flood> for Behavior {
    fn from(flood: Flood) -> Self {
        Self::Flood(flood)
    }
}

impl Default for Behavior {
    fn default() -> Self {
        Self::Reply(Reply::default())
    }
}

impl Behavior {
    /// A normal reply with this text.
    pub fn reply(text: impl Into<String>) -> Self {
        Reply::text(text).into()
    }

    /// A normal reply that calls one tool (no text).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Reply::text("").with_tool_call(name, arguments).into()
    }

    /// A normal reply that calls one freeform (custom) tool with this raw input (no text).
    pub fn custom_tool_call(name: impl Into<String>, input: impl Into<String>) -> Self {
        Reply::text("").with_custom_tool_call(name, input).into()
    }

    /// An error status with the dialect's realistic body for that code.
    pub fn status(code: u16) -> Self {
        Status::new(code).into()
    }

    /// A realistic error of this kind, with the status code the dialect itself uses for it.
    pub fn error(kind: ErrorKind) -> Self {
        Status::error(kind).into()
    }

    pub fn reset() -> Self {
        Self::Reset
    }

    pub fn hang() -> Self {
        Self::Hang
    }

    pub fn reject_prefill() -> Self {
        Self::RejectPrefill
    }

    /// Headers at once, the first real event after `delay`, nothing in between.
    pub fn slow_first_event(delay: Duration) -> Self {
        Reply::default().first_event_after(delay).into()
    }

    /// Headers at once, then a keep-alive (SSE comment, or Anthropic `ping`) every `every` until
    /// the first real event after `delay`.
    pub fn slow_first_event_with_keep_alive(delay: Duration, every: Duration) -> Self {
        Reply::default().first_event_after(delay).keep_alive_every(every).into()
    }

    /// See [`Fault::CutAfter`].
    pub fn cut_after(events: usize) -> Self {
        Reply::default().fault(Fault::CutAfter(events)).into()
    }

    /// See [`Fault::ResetAfter`].
    pub fn reset_after(events: usize) -> Self {
        Reply::default().fault(Fault::ResetAfter(events)).into()
    }

    /// See [`Fault::StallAfter`].
    pub fn stall_after(events: usize) -> Self {
        Reply::default().fault(Fault::StallAfter(events)).into()
    }

    /// See [`Fault::PingAfter`].
    pub fn ping_after(events: usize) -> Self {
        Reply::default().fault(Fault::PingAfter(events)).into()
    }

    /// See [`Fault::ErrorAfter`].
    pub fn error_after(events: usize) -> Self {
        Reply::default().fault(Fault::ErrorAfter(events)).into()
    }

    /// See [`Fault::MalformedAt`].
    pub fn malformed_at(position: usize) -> Self {
        Reply::default().fault(Fault::MalformedAt(position)).into()
    }

    /// See [`Fault::MissingDone`].
    pub fn missing_done() -> Self {
        Reply::default().fault(Fault::MissingDone).into()
    }

    /// See [`Fault::Truncated`].
    pub fn truncated() -> Self {
        Reply::default().fault(Fault::Truncated).into()
    }

    /// See [`Fault::EndWithoutFinish`].
    pub fn end_without_finish() -> Self {
        Reply::default().fault(Fault::EndWithoutFinish).into()
    }

    /// See [`Fault::ErrorAfterFinish`].
    pub fn error_after_finish() -> Self {
        Reply::default().fault(Fault::ErrorAfterFinish).into()
    }

    /// The behaviour as sent at `now`: a status's `{epoch+N}` header placeholders filled in
    /// (see [`Status::at`]); every other behaviour is the same at any time.
    #[must_use]
    pub fn at(self, now: switchyard_core::UnixMillis) -> Self {
        match self {
            Self::Status(status) => Self::Status(status.at(now)),
            other => other,
        }
    }

    /// The JSON form, for the [`BEHAVIOR_HEADER`] request header.
    pub fn header_value(&self) -> String {
        serde_json::to_string(self).expect("a behavior always serialises")
    }
}

impl From<Reply> for Behavior {
    fn from(reply: Reply) -> Self {
        Self::Reply(reply)
    }
}

impl From<Status> for Behavior {
    fn from(status: Status) -> Self {
        Self::Status(status)
    }
}

/// A successful answer and how it is delivered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Reply {
    /// The assistant's text; empty means no text block at all (useful with a tool call).
    pub text: String,
    pub tool_call: Option<ToolCall>,
    /// Why generation stopped; `None` means the natural reason (tool use when there is a tool
    /// call, otherwise a normal stop).
    pub finish: Option<Finish>,
    /// How many deltas the text is streamed in (at most one per character; at least one when
    /// there is text).
    pub chunks: usize,
    /// Pause before every streamed event after the first.
    pub chunk_gap_ms: u64,
    /// Pause between the response headers and the first real event.
    pub first_event_delay_ms: u64,
    /// Send the stream's first event (Anthropic's `message_start`, with the prompt's usage)
    /// before that pause rather than after, as Anthropic does: an attempt cancelled while it
    /// waits has still reported what its prompt used.
    pub start_at_once: bool,
    /// While waiting for the first event, send a keep-alive this often (streams only).
    pub keep_alive_every_ms: Option<u64>,
    pub fault: Option<Fault>,
    /// Replaces the dialect's keep-alive with this raw text, one complete SSE event or comment
    /// (OpenRouter's `: OPENROUTER PROCESSING\n\n`): a provider's own keep-alive, byte for byte.
    pub keep_alive_event: Option<String>,
    /// Replaces the in-stream error event [`Fault::ErrorAfter`] sends with this raw text, one
    /// complete SSE event: a provider's own error chunk (OpenRouter's numeric `code`, an
    /// OpenAI-style `{"error": ...}` chunk) rather than the dialect's usual one.
    pub error_event: Option<String>,
    /// The token counts to report instead of the four-bytes-a-token estimate, with cache and
    /// reasoning tokens each dialect writes its own way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Tokens>,
}

/// Token counts a reply reports, by bucket: `input` is the uncached prompt, `output` every
/// generated token with `reasoning` among them. Each dialect folds them into its own fields
/// (OpenAI's `prompt_tokens` include the cache reads, Anthropic's `input_tokens` do not,
/// Gemini's `candidatesTokenCount` leaves the thoughts out). Dialects without cache writes
/// (all but Anthropic) count `cache_write` as ordinary prompt tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tokens {
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
}

impl Default for Reply {
    fn default() -> Self {
        Self {
            text: "Hello from the mock upstream.".to_owned(),
            tool_call: None,
            finish: None,
            chunks: 3,
            chunk_gap_ms: 0,
            first_event_delay_ms: 0,
            start_at_once: false,
            keep_alive_every_ms: None,
            fault: None,
            keep_alive_event: None,
            error_event: None,
            usage: None,
        }
    }
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: text.into(), ..Self::default() }
    }

    #[must_use]
    pub fn with_tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_call = Some(ToolCall { name: name.into(), arguments });
        self
    }

    /// A call to a freeform tool (Responses `custom` tools, such as Codex's `apply_patch`):
    /// its input is raw text, not JSON. See [`ToolCall::arguments`].
    #[must_use]
    pub fn with_custom_tool_call(self, name: impl Into<String>, input: impl Into<String>) -> Self {
        self.with_tool_call(name, Value::String(input.into()))
    }

    #[must_use]
    pub fn finish(mut self, finish: Finish) -> Self {
        self.finish = Some(finish);
        self
    }

    #[must_use]
    pub fn chunks(mut self, chunks: usize) -> Self {
        self.chunks = chunks;
        self
    }

    #[must_use]
    pub fn chunk_gap(mut self, gap: Duration) -> Self {
        self.chunk_gap_ms = millis(gap);
        self
    }

    #[must_use]
    pub fn first_event_after(mut self, delay: Duration) -> Self {
        self.first_event_delay_ms = millis(delay);
        self
    }

    #[must_use]
    pub fn keep_alive_every(mut self, every: Duration) -> Self {
        self.keep_alive_every_ms = Some(millis(every));
        self
    }

    #[must_use]
    pub fn fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// See [`Reply::keep_alive_event`].
    #[must_use]
    pub fn keep_alive_event(mut self, event: impl Into<String>) -> Self {
        self.keep_alive_event = Some(event.into());
        self
    }

    /// See [`Reply::error_event`]; sent by [`Fault::ErrorAfter`].
    #[must_use]
    pub fn error_event(mut self, event: impl Into<String>) -> Self {
        self.error_event = Some(event.into());
        self
    }

    /// The reason the reply reports, or `None` when the fault is that it never reports one.
    pub(crate) fn effective_finish(&self) -> Option<Finish> {
        if matches!(self.fault, Some(Fault::Truncated | Fault::EndWithoutFinish)) {
            return None;
        }
        Some(self.finish.unwrap_or(if self.tool_call.is_some() {
            Finish::ToolUse
        } else {
            Finish::Stop
        }))
    }

    pub(crate) fn gap(&self) -> Duration {
        Duration::from_millis(self.chunk_gap_ms)
    }

    pub(crate) fn first_event_delay(&self) -> Duration {
        Duration::from_millis(self.first_event_delay_ms)
    }

    /// `None` also for a zero interval, which would otherwise flood the client.
    pub(crate) fn keep_alive_interval(&self) -> Option<Duration> {
        self.keep_alive_every_ms.filter(|&ms| ms > 0).map(Duration::from_millis)
    }
}

/// One tool call the assistant makes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    /// A JSON object for a function call; OpenAI receives it as a string, Anthropic and Gemini
    /// as an object. A JSON *string* is a freeform (custom) tool's raw input: Responses sends a
    /// `custom_tool_call` with it as `input`; the dialects without freeform tools receive it as
    /// a function call with one string argument, `{"input": text}`, the way a proxy carries a
    /// custom tool to them.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

impl ToolCall {
    /// The arguments as a JSON object, for the dialects without freeform tools.
    pub(crate) fn object_arguments(&self) -> Value {
        match &self.arguments {
            Value::String(input) => serde_json::json!({ "input": input }),
            arguments => arguments.clone(),
        }
    }
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Why generation stopped, in dialect-neutral terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// OpenAI `stop`, Anthropic `end_turn`, Gemini `STOP`.
    Stop,
    /// OpenAI `length`, Anthropic `max_tokens`, Gemini `MAX_TOKENS`.
    Length,
    /// OpenAI `tool_calls`, Anthropic `tool_use`, Gemini `STOP`.
    ToolUse,
    /// OpenAI `content_filter`, Anthropic `refusal`, Gemini `SAFETY`.
    ContentFilter,
}

/// What goes wrong while a successful reply is delivered. Positions count the events of the
/// stream as the dialect sends them (OpenAI chunks including `[DONE]`, every Anthropic event
/// including `message_start` and `ping`, Gemini chunks); keep-alives sent during a slow first
/// event are not counted.
///
/// A non-streaming reply is one JSON document: cut, reset and stall strike after its first half
/// (or right after the headers when the position is 0), a malformed document is its first half
/// sent as if complete, truncation sends a null finish reason, and a missing `[DONE]` changes
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Send this many events, then drop the connection mid-body (a normal close, FIN).
    CutAfter(usize),
    /// Send this many events, then drop the connection mid-body with a TCP reset (RST): what a
    /// crashing upstream host or a middlebox that gives up looks like.
    ResetAfter(usize),
    /// Send this many events, then keep the connection open and send nothing more.
    StallAfter(usize),
    /// Send this many events, then only keep-alives (Anthropic `ping`s, SSE comments) at the
    /// reply's keep-alive interval (200 ms when it has none), for ever: what an Anthropic
    /// stream looks like when generation hangs after `message_start`.
    PingAfter(usize),
    /// Send this many events, then the dialect's in-stream error event (Anthropic
    /// `overloaded_error`, OpenRouter's error chunk with `finish_reason: "error"`, Gemini
    /// `UNAVAILABLE`, Responses `response.failed`), then end the body: an overload reported
    /// inside a 200 stream.
    ErrorAfter(usize),
    /// Insert one event whose `data:` is not valid JSON at this position; the rest of the stream
    /// is complete and correct.
    MalformedAt(usize),
    /// Report a finish reason but never send the terminator (`[DONE]`, `message_stop`). Gemini
    /// has no terminator, so its stream is unchanged.
    MissingDone,
    /// Send all the content, then end the body cleanly with no finish reason and no terminator.
    Truncated,
    /// Send all the content with no finish reason, then the terminator (`[DONE]`,
    /// `message_stop`) as if the answer were complete: what a server that closes every stream
    /// with `[DONE]` sends when generation was cut short. Gemini and Responses have no
    /// terminator apart from their finish, so for them this is [`Fault::Truncated`].
    EndWithoutFinish,
    /// Send the whole answer, finish reason included, then the dialect's in-stream error event
    /// instead of the terminator: a gateway that reports a late failure after the model
    /// finished. The answer is complete.
    ErrorAfterFinish,
}

/// Whole milliseconds, saturating: scripts hold milliseconds, builders take durations.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
