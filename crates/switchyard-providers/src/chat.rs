//! The canonical chat model: the one shape every dialect is translated to and from.
//!
//! A request is parsed once from the client's body and encoded once per upstream attempt, so
//! the model borrows from that body (`'a`) wherever the wire allows: text without escapes,
//! base64 image data, tool schemas, tool inputs and vendor fields are never copied. Responses
//! and stream events borrow from the upstream's body or event in the same way.
//!
//! Invariants every parser upholds and every encoder relies on:
//! - The leading system prompt lives in [`ChatRequest::system`]. A system message in the middle
//!   of the conversation (Anthropic's mid-conversation system messages, an OpenAI `system` or
//!   `developer` message after the first turn) stays in place as a [`Role::System`] message of
//!   text only; each encoder decides where its upstream can take it.
//! - [`Part::ToolResult`] appears only in [`Role::Tool`] messages, and a tool message holds
//!   nothing else. Its own `content` holds only [`Part::Text`], [`Part::Image`] and
//!   [`Part::Opaque`].
//! - Tool arguments are JSON text as the model produced it. It is almost always a JSON object;
//!   encoders whose wire needs an object (Anthropic, Gemini) substitute `{}` for text that is
//!   not one rather than fail a whole conversation over one bad call in its history.
//! - [`Usage`] keeps uncached input, cache reads, cache writes and output apart (reasoning is a
//!   subset of output), so no token is counted twice whatever the dialect; OpenAI's, Gemini's
//!   and Responses' encoders fold the cache buckets back into their prompt count.
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
    /// How hard the model should think, when the client said so in any dialect's words.
    pub reasoning: Option<Reasoning>,
    /// The shape the answer must have (JSON, JSON of a schema), in any dialect's words.
    pub response_format: Option<ResponseFormat<'a>>,
    /// A Responses client's `previous_response_id`: the conversation so far is the one that
    /// response ended. Only a Responses upstream (or the router's own store, which expands it
    /// into `messages` and clears it) can make sense of it; other encoders name it as dropped.
    pub previous_response_id: Option<Cow<'a, str>>,
    pub vendor: VendorFields<'a>,
}

/// Structured output: what the client asked the answer to be. Encoders of another dialect
/// than the client's translate it (Chat `response_format`, Responses `text.format`, Gemini
/// `responseMimeType` + `responseJsonSchema`, Anthropic `output_config.format`).
#[derive(Clone, Debug, PartialEq)]
pub enum ResponseFormat<'a> {
    /// Plain text: the default, said outright.
    Text,
    /// Any JSON object.
    JsonObject,
    JsonSchema {
        name: Cow<'a, str>,
        description: Option<Cow<'a, str>>,
        schema: Option<RawJson<'a>>,
        strict: Option<bool>,
    },
}

/// A client's request for reasoning ("thinking"), in no dialect's words. Encoders of another
/// dialect than the client's translate it (Anthropic `thinking` and `output_config.effort`,
/// OpenAI `reasoning_effort`, Gemini `thinkingConfig`); the client's own dialect gets its
/// fields verbatim instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reasoning {
    /// `None`: thinking is on at the model's own discretion (Anthropic's `adaptive`).
    pub effort: Option<Effort>,
    /// An explicit budget in tokens (Anthropic `budget_tokens`, Gemini `thinkingBudget`).
    pub budget_tokens: Option<u32>,
}

impl Reasoning {
    /// The effort, said outright or read off the budget; `None` when neither was given.
    pub fn level(self) -> Option<Effort> {
        self.effort.or(self.budget_tokens.map(Effort::from_budget))
    }

    /// A budget in tokens, given or derived from the effort.
    pub fn budget(self) -> Option<u32> {
        self.budget_tokens.or(self.effort.map(Effort::budget))
    }
}

/// Reasoning effort levels, the union of what the dialects name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effort {
    /// No reasoning at all (Anthropic `thinking: disabled`, OpenAI `none`, a budget of 0).
    Off,
    Minimal,
    Low,
    Medium,
    High,
    /// Anthropic's `max`; OpenAI's highest is `high`.
    Max,
}

impl Effort {
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "none" | "disabled" => Self::Off,
            "minimal" => Self::Minimal,
            "low" => Self::Low,
            "medium" => Self::Medium,
            "high" => Self::High,
            "max" | "xhigh" => Self::Max,
            _ => return None,
        })
    }

    /// Budgets in the ranges the vendors document for these levels (Anthropic's minimum
    /// budget is 1,024 tokens; Gemini 2.5 Pro tops out at 32,768).
    pub fn budget(self) -> u32 {
        match self {
            Self::Off => 0,
            Self::Minimal => 1024,
            Self::Low => 2048,
            Self::Medium => 8192,
            Self::High => 16384,
            Self::Max => 32768,
        }
    }

    /// The nearest level for a budget.
    pub fn from_budget(budget: u32) -> Self {
        match budget {
            0 => Self::Off,
            1..=1024 => Self::Minimal,
            1025..=4096 => Self::Low,
            4097..=12288 => Self::Medium,
            12289..=24576 => Self::High,
            _ => Self::Max,
        }
    }
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

    /// The names of the fields an upstream speaking `dialect` does not get.
    pub fn left_out(&self, dialect: Dialect) -> impl Iterator<Item = &str> {
        let foreign = self.origin != Some(dialect);
        self.fields.iter().filter(move |_| foreign).map(|(name, _)| name.as_ref())
    }
}

impl<'a> ChatRequest<'a> {
    /// Only what routing needs (`model`, `stream`) from a body the full parser cannot read:
    /// enough to forward it as it is to an upstream of its own dialect. `None` when even
    /// that is missing.
    pub fn minimal(dialect: Dialect, body: &'a [u8]) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Minimal<'a> {
            // Gemini names it in the path; the router sets it.
            #[serde(borrow, default)]
            model: Option<Cow<'a, str>>,
            #[serde(default)]
            stream: Option<bool>,
            #[serde(borrow, default)]
            previous_response_id: Option<Cow<'a, str>>,
        }
        let minimal: Minimal<'a> = serde_json::from_slice(body).ok()?;
        let stream = minimal.stream.unwrap_or(false);
        let model = match minimal.model {
            Some(model) => model,
            None if dialect == Dialect::Gemini => Cow::Borrowed(""),
            None => return None,
        };
        Some(Self {
            model,
            stream,
            // Anthropic and Responses streams always end with usage.
            stream_usage: dialect != Dialect::OpenAi,
            previous_response_id: minimal.previous_response_id,
            vendor: VendorFields { origin: Some(dialect), fields: Vec::new() },
            ..Self::default()
        })
    }
}

impl ChatRequest<'_> {
    /// Whether any prompt-caching breakpoint is set (only Anthropic takes them).
    pub fn uses_cache_control(&self) -> bool {
        let part = |p: &Part<'_>| match p {
            Part::Text(t) => t.cache_control.is_some(),
            Part::Image(i) => i.cache_control.is_some(),
            Part::ToolUse(u) => u.cache_control.is_some(),
            Part::ToolResult(r) => r.cache_control.is_some(),
            _ => false,
        };
        self.system.iter().any(|t| t.cache_control.is_some())
            || self.tools.iter().any(|t| t.cache_control.is_some())
            || self.messages.iter().flat_map(|m| &m.content).any(part)
    }
}

/// A part's kind as the error messages and the routing trace name it.
pub fn part_kind<'p>(part: &'p Part<'_>) -> &'p str {
    match part {
        Part::Text(_) => "text",
        Part::Image(_) => "image",
        Part::ToolUse(_) => "tool_use",
        Part::ToolResult(_) => "tool_result",
        Part::Thinking(_) => "thinking",
        Part::RedactedThinking(_) => "redacted_thinking",
        Part::Opaque(opaque) => &opaque.kind,
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
    /// An instruction in the middle of the conversation; holds only [`Part::Text`].
    System,
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
    /// A vendor's built-in tool (Anthropic `web_search_20250305`, Responses `web_search`,
    /// ...) kept verbatim; it is sent only to an upstream of the same dialect. Elsewhere an
    /// Anthropic server tool is refused (the answer would not be the one asked for) and a
    /// Responses built-in is dropped and named (Codex sends them with every request).
    pub native: Option<Opaque<'a>>,
    /// How the model passes the tool its input.
    pub format: ToolFormat<'a>,
    /// The Responses `namespace` tool this one was declared in; then [`Tool::name`] is the
    /// flat name every other dialect knows it by.
    pub namespace: Option<Namespace<'a>>,
}

/// A Responses `namespace` tool: a named group of tools (Codex declares its MCP servers' and
/// sub-agents' tools so, and gets their calls back as `function_call`s with `namespace` set).
/// Other dialects know no namespaces: each member is a tool of its own under the flat name
/// Codex itself uses when a boundary cannot keep the split ([`flat_tool_name`]), and a call of
/// that name goes back to a Responses client as the namespaced call it expects.
#[derive(Clone, Debug, PartialEq)]
pub struct Namespace<'a> {
    pub name: Cow<'a, str>,
    pub description: Option<Cow<'a, str>>,
    /// The tool's own name inside the namespace.
    pub member: Cow<'a, str>,
}

/// Codex's flattening of a namespaced tool name (`codex-rs/protocol/src/tool_name.rs`,
/// `canonical_flat_name`): the namespace without trailing `_`, `__`, the name without leading
/// `_`. `mcp__docs__` and `search` make `mcp__docs__search`.
pub fn flat_tool_name(namespace: &str, name: &str) -> String {
    format!("{}__{}", namespace.trim_end_matches('_'), name.trim_start_matches('_'))
}

/// How a tool takes its input.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ToolFormat<'a> {
    /// JSON arguments described by [`Tool::parameters`].
    #[default]
    Function,
    /// Free text (a Responses `custom` tool, such as Codex's `apply_patch`), with the
    /// Responses `format` object (a grammar, or plain text) kept verbatim for a Responses
    /// upstream. Every other dialect gets a function with one string argument, `input`
    /// ([`FREEFORM_PARAMETERS`]); calls carry `{"input": "..."}` as their arguments, and the
    /// Responses encoders turn them back into `custom_tool_call`s.
    Freeform(Option<RawJson<'a>>),
}

/// The parameters of a freeform tool as a function: one string, `input`.
pub const FREEFORM_PARAMETERS: &str =
    r#"{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}"#;

/// Said to the model of a freeform tool turned function, so it puts the raw text in `input`.
const FREEFORM_NOTE: &str = "Pass the whole input as raw text in the string argument `input`.";

impl<'a> Tool<'a> {
    /// A plain function tool.
    pub fn function(name: impl Into<Cow<'a, str>>) -> Self {
        Self {
            name: name.into(),
            description: None,
            parameters: None,
            strict: None,
            cache_control: None,
            native: None,
            format: ToolFormat::Function,
            namespace: None,
        }
    }

    pub fn is_freeform(&self) -> bool {
        matches!(self.format, ToolFormat::Freeform(_))
    }

    /// The JSON Schema of the arguments as a function-calling dialect sees the tool.
    pub fn function_parameters(&self) -> Option<RawJson<'a>> {
        match self.format {
            ToolFormat::Function => self.parameters,
            ToolFormat::Freeform(_) => Some(RawJson(freeform_parameters())),
        }
    }

    /// The description as a function-calling dialect sees the tool: a freeform tool's says
    /// where its input goes.
    pub fn function_description(&self) -> Option<Cow<'_, str>> {
        match (&self.format, self.description.as_deref()) {
            (ToolFormat::Function, description) => description.map(Cow::Borrowed),
            (ToolFormat::Freeform(_), None) => Some(Cow::Borrowed(FREEFORM_NOTE)),
            (ToolFormat::Freeform(_), Some(description)) => {
                Some(Cow::Owned(format!("{description}\n\n{FREEFORM_NOTE}")))
            }
        }
    }
}

fn freeform_parameters() -> &'static RawValue {
    serde_json::from_str(FREEFORM_PARAMETERS).expect("static JSON")
}

/// The text a freeform tool call carries, read from its `{"input": "..."}` arguments; the
/// arguments themselves when they are not of that shape (a model that ignored the schema).
pub fn freeform_input<'r>(arguments: &'r str) -> Cow<'r, str> {
    #[derive(serde::Deserialize)]
    struct Input<'a> {
        #[serde(borrow)]
        input: Cow<'a, str>,
    }
    match serde_json::from_str::<Input<'r>>(arguments) {
        Ok(parsed) => parsed.input,
        Err(_) => Cow::Borrowed(arguments),
    }
}

/// `{"input": text}`: a freeform tool call's input as function arguments.
pub fn freeform_arguments(input: &str) -> String {
    let mut arguments = String::with_capacity(input.len() + 12);
    arguments.push_str("{\"input\":");
    arguments.push_str(&serde_json::to_string(input).expect("a string serialises"));
    arguments.push('}');
    arguments
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

/// Token counts in disjoint buckets: each decoder maps its dialect's overlapping counts onto
/// them, each encoder folds them back (see the module invariants).
pub use switchyard_core::usage::Usage;

/// What a non-streamed answer relayed as it is needs read of it: whether it ended
/// (it names a finish reason, as [`ChatResponse::stop_reason`] is set), what it used and the
/// model it names. Its content is not read: it goes to the client as the upstream wrote it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ending<'a> {
    pub finished: bool,
    pub usage: Usage,
    /// The top-level model (Gemini: `modelVersion`), `None` when it names none.
    pub model: Option<Cow<'a, str>>,
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
