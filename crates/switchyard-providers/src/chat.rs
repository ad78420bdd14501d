//! The canonical chat model: the one shape every dialect is translated to and from.
//!
//! A request is parsed once from the client's body and encoded once per upstream attempt, so
//! the model borrows from that body (`'a`) wherever the wire allows: text without escapes,
//! base64 image data, tool schemas, tool inputs and vendor fields are never copied. Responses
//! and stream events borrow from the upstream's body or event in the same way.
//!
//! Invariants every parser upholds and every encoder relies on:
//! - System prompts live in [`ChatRequest::system`], never in `messages`.
//! - [`Part::ToolResult`] appears only in [`Role::Tool`] messages, and a tool message holds
//!   nothing else. Its own `content` holds only [`Part::Text`], [`Part::Image`] and
//!   [`Part::Opaque`].
//! - Tool arguments are JSON text as the model produced it. It is almost always a JSON object;
//!   encoders whose wire needs an object (Anthropic, Gemini) substitute `{}` for text that is
//!   not one rather than fail a whole conversation over one bad call in its history.
//! - [`Usage::input_tokens`] counts every prompt token, cached ones included (OpenAI's and
//!   Gemini's convention); the Anthropic encoder restores Anthropic's split.
//! - A stream's tool calls are numbered 0, 1, 2, ... in the order they start, whatever index
//!   the upstream used; encoders map that number to their own block or call index.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::dialect::Dialect;

/// A chat request in no particular dialect.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest<'a> {
    /// The model as the client named it. Upstream encoders write the upstream's own model id
    /// (from [`EncodeOptions`](crate::dialect::EncodeOptions)) instead.
    pub model: Cow<'a, str>,
    pub system: Vec<Text<'a>>,
    pub messages: Vec<Message<'a>>,
    pub tools: Vec<Tool<'a>>,
    pub tool_choice: Option<ToolChoice<'a>>,
    /// `Some(false)` forbids more than one tool call per turn.
    pub parallel_tool_calls: Option<bool>,
    pub sampling: Sampling<'a>,
    pub stream: bool,
    /// The client wants token usage reported at the end of a stream. Anthropic clients always
    /// get it; OpenAI clients only when they ask (`stream_options.include_usage`), because
    /// some of them choke on the extra chunk with empty `choices`.
    pub stream_usage: bool,
    pub vendor: VendorFields<'a>,
}

/// Top-level request fields the parser did not recognise, kept verbatim.
///
/// They are forwarded only to an upstream that speaks the same dialect as the client that
/// sent them: `seed` or `thinking` mean something to their own vendor and are at best ignored,
/// at worst a 400, anywhere else.
#[derive(Clone, Debug, Default)]
pub struct VendorFields<'a> {
    /// The dialect the fields were written in; `None` for a request built in code.
    pub origin: Option<Dialect>,
    pub fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> VendorFields<'a> {
    /// The fields to forward to an upstream speaking `dialect`: all of them or none.
    pub fn for_dialect(&self, dialect: Dialect) -> &[(Cow<'a, str>, &'a RawValue)] {
        if self.origin == Some(dialect) { &self.fields } else { &[] }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sampling<'a> {
    pub max_tokens: Option<u32>,
    pub max_tokens_field: MaxTokensField,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stop: Vec<Cow<'a, str>>,
}

/// How an OpenAI client spelled the output limit. An OpenAI upstream gets the same spelling:
/// OpenAI's reasoning models reject `max_tokens`, while many compatible servers only know it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    #[default]
    MaxTokens,
    MaxCompletionTokens,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Message<'a> {
    pub role: Role,
    pub content: Vec<Part<'a>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// Results of the assistant's tool calls; holds only [`Part::ToolResult`].
    Tool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Part<'a> {
    Text(Text<'a>),
    Image(Image<'a>),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
    /// The model's visible reasoning. Only Anthropic accepts it back (and requires it, signed,
    /// in tool-use turns while thinking is on); other encoders drop it.
    Thinking(Thinking<'a>),
    /// Reasoning the provider encrypted; opaque, Anthropic only.
    RedactedThinking(Cow<'a, str>),
    /// A block this model does not describe (an Anthropic `document`, a server tool result,
    /// ...), kept verbatim for an upstream of the same dialect.
    Opaque(Opaque<'a>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Text<'a> {
    pub text: Cow<'a, str>,
    /// Anthropic prompt-caching breakpoint, forwarded to Anthropic only.
    pub cache_control: Option<RawJson<'a>>,
}

impl<'a> Text<'a> {
    pub fn new(text: impl Into<Cow<'a, str>>) -> Self {
        Self { text: text.into(), cache_control: None }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Image<'a> {
    pub source: ImageSource<'a>,
    /// OpenAI's `detail` (`low`, `high`, `auto`), forwarded to OpenAI only.
    pub detail: Option<Cow<'a, str>>,
    pub cache_control: Option<RawJson<'a>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ImageSource<'a> {
    /// Fetched by the upstream (Switchyard never downloads anything).
    Url(Cow<'a, str>),
    Base64 {
        media_type: Cow<'a, str>,
        data: Cow<'a, str>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolUse<'a> {
    pub id: Cow<'a, str>,
    pub name: Cow<'a, str>,
    /// JSON text; see the module invariants.
    pub arguments: Cow<'a, str>,
    pub cache_control: Option<RawJson<'a>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult<'a> {
    pub tool_use_id: Cow<'a, str>,
    /// Text, images and opaque blocks only.
    pub content: Vec<Part<'a>>,
    pub is_error: bool,
    pub cache_control: Option<RawJson<'a>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Thinking<'a> {
    pub text: Cow<'a, str>,
    /// Anthropic's proof that the text is the model's own; required to send it back.
    pub signature: Option<Cow<'a, str>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Opaque<'a> {
    pub dialect: Dialect,
    /// The block's `type`, for error messages.
    pub kind: Cow<'a, str>,
    pub raw: RawJson<'a>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tool<'a> {
    pub name: Cow<'a, str>,
    pub description: Option<Cow<'a, str>>,
    /// JSON Schema of the arguments; `None` means "no arguments".
    pub parameters: Option<RawJson<'a>>,
    /// OpenAI structured-output `strict` flag, forwarded to OpenAI only.
    pub strict: Option<bool>,
    pub cache_control: Option<RawJson<'a>>,
    /// A vendor's built-in tool (Anthropic `web_search_20250305`, ...) kept verbatim; it is
    /// sent only to an upstream of the same dialect and dropped elsewhere, where it means
    /// nothing.
    pub native: Option<Opaque<'a>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice<'a> {
    Auto,
    None,
    /// Some tool must be called.
    Required,
    /// This tool must be called.
    Tool(Cow<'a, str>),
}

/// Borrowed raw JSON text with equality on the text, so canonical values can be compared in
/// tests.
#[derive(Clone, Copy, Debug)]
pub struct RawJson<'a>(pub &'a RawValue);

impl<'a> RawJson<'a> {
    pub fn get(self) -> &'a str {
        self.0.get()
    }
}

impl PartialEq for RawJson<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl serde::Serialize for RawJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// A complete (non-streamed) answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatResponse<'a> {
    pub id: Cow<'a, str>,
    /// The model as the upstream named it. Client encoders write the model the router says
    /// served instead (RESILIENCE.md §1.5).
    pub model: Cow<'a, str>,
    pub content: Vec<Part<'a>>,
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended the answer, when the upstream says which.
    pub stop_sequence: Option<Cow<'a, str>>,
    pub usage: Usage,
}

/// Why the model stopped. Each dialect maps its own vocabulary onto these and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// Natural end (`end_turn`, `stop`, `STOP`).
    EndTurn,
    /// Output limit (`max_tokens`, `length`, `MAX_TOKENS`), or the context window ran out.
    MaxTokens,
    StopSequence,
    /// The answer ends in tool calls the client must run.
    ToolUse,
    /// Refused or filtered (`content_filter`, `refusal`, `SAFETY`, a blocked prompt, ...).
    ContentFilter,
    /// Anthropic's server tools paused a long turn; the client should send it back to go on.
    PauseTurn,
    /// A reason no other dialect has a word for (Gemini `MALFORMED_FUNCTION_CALL`, ...).
    Other,
}

/// Token counts; see the module invariants for what `input_tokens` includes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache (a subset of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (a subset of `input_tokens`).
    pub cache_write_tokens: u64,
}

/// One step of a streamed answer, in the order a client needs them.
///
/// Decoders emit [`StreamEvent::Start`] before anything else. [`StreamEvent::Usage`] carries
/// the cumulative counts so far (not an increment) and may come before or after
/// [`StreamEvent::Finish`]; encoders that need usage at the end hold it until the stream ends.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent<'a> {
    Start {
        id: Cow<'a, str>,
        model: Cow<'a, str>,
    },
    TextDelta(Cow<'a, str>),
    ThinkingDelta(Cow<'a, str>),
    /// Anthropic's signature for the thinking just streamed.
    ThinkingSignature(Cow<'a, str>),
    RedactedThinking(Cow<'a, str>),
    /// A tool call begins; `index` counts tool calls from 0 in this answer.
    ToolCallStart {
        index: u32,
        id: Cow<'a, str>,
        name: Cow<'a, str>,
    },
    /// More of a tool call's arguments, as a fragment of JSON text.
    ToolCallDelta {
        index: u32,
        arguments: Cow<'a, str>,
    },
    Finish {
        reason: StopReason,
        stop_sequence: Option<Cow<'a, str>>,
    },
    Usage(Usage),
}
