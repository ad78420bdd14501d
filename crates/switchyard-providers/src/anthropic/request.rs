//! Anthropic requests: parsed from clients, encoded for upstreams.

use std::borrow::Cow;

use serde::de::{self, Deserializer, MapAccess};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use super::block::{BlockIn, BlockOut, Skip, block_out};
use crate::chat::{
    ChatRequest, Effort, Message, Opaque, Part, RawJson, Reasoning, ResponseFormat, Role, Text,
    Tool, ToolChoice, ToolFormat, part_kind,
};
use crate::dialect::{Dialect, Dropped, EncodeOptions, foreign_native};
use crate::error::ProviderError;
use crate::json::{self, Depth, Str, TextOr};

/// Parses a client's Messages body. Unknown top-level fields (`thinking`, `metadata`,
/// `top_k`, ...) are kept for Anthropic upstreams.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest<'_>, ProviderError> {
    parse_request_to(body, Depth::Whole)
}

/// [`parse_request`] to `depth`.
pub fn parse_request_to(body: &[u8], depth: Depth) -> Result<ChatRequest<'_>, ProviderError> {
    json::parse_request::<Fields>(body, depth)
}

struct Fields;

impl json::RequestFields for Fields {
    const EXPECTING: &'static str = "a messages request object";

    fn read<'de, A: MapAccess<'de>>(
        mut map: A,
        depth: Depth,
    ) -> Result<ChatRequest<'de>, A::Error> {
        let mut request = ChatRequest::default();
        request.vendor.origin = Some(Dialect::Anthropic);
        // Anthropic always reports usage at the end of a stream.
        request.stream_usage = true;
        let mut model = None;
        let mut messages: Option<Vec<MessageIn<'de>>> = None;
        let mut thinking: Option<ThinkingWire> = None;
        let mut effort = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "model" => model = Some(map.next_value::<Str<'de>>()?.into_cow()),
                "messages" | "system" | "tools" if depth == Depth::Routing => json::skip(&mut map)?,
                "messages" => messages = Some(map.next_value()?),
                "system" => {
                    request.system = match map
                        .next_value::<Option<TextOr<'de, SystemBlock<'de>>>>()?
                    {
                        None => Vec::new(),
                        Some(TextOr::Text(text)) => vec![Text::new(text)],
                        Some(TextOr::Items(blocks)) => blocks.into_iter().map(|b| b.0).collect(),
                    };
                }
                "tools" => {
                    let tools: Option<Vec<ToolIn<'de>>> = map.next_value()?;
                    request.tools = tools.unwrap_or_default().into_iter().map(|t| t.0).collect();
                }
                "tool_choice" => {
                    if let Some(choice) = map.next_value::<Option<ToolChoiceIn<'de>>>()? {
                        request.tool_choice = Some(choice.choice);
                        if choice.disable_parallel {
                            request.parallel_tool_calls = Some(false);
                        }
                    }
                }
                "max_tokens" => request.sampling.max_tokens = map.next_value()?,
                "temperature" => request.sampling.temperature = map.next_value()?,
                "top_p" => request.sampling.top_p = map.next_value()?,
                "stop_sequences" => {
                    let stops: Option<Vec<Str<'de>>> = map.next_value()?;
                    request.sampling.stop =
                        stops.unwrap_or_default().into_iter().map(Str::into_cow).collect();
                }
                "stream" => request.stream = map.next_value::<Option<bool>>()?.unwrap_or(false),
                // Kept verbatim for Anthropic upstreams, and read for everyone else's.
                "thinking" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    thinking = serde_json::from_str(raw.get()).ok();
                    request.vendor.fields.push((key.0, raw));
                }
                "output_config" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    let config = serde_json::from_str::<OutputConfigWire<'de>>(raw.get()).ok();
                    let (effort_word, format) = match config {
                        Some(config) => (config.effort, config.format),
                        None => (None, None),
                    };
                    effort = effort_word.and_then(|e| Effort::parse(&e.0));
                    request.response_format =
                        format.filter(|f| f.kind.0 == "json_schema").map(|f| {
                            ResponseFormat::JsonSchema {
                                name: Cow::Borrowed("response"),
                                description: None,
                                schema: f.schema.map(RawJson),
                                strict: Some(true),
                            }
                        });
                    request.vendor.fields.push((key.0, raw));
                }
                _ => request.vendor.fields.push((key.0, map.next_value::<&'de RawValue>()?)),
            }
        }
        request.reasoning = reasoning(thinking, effort);
        request.model = model.ok_or_else(|| de::Error::missing_field("model"))?;
        if depth == Depth::Routing {
            return Ok(request);
        }
        let messages = messages.ok_or_else(|| de::Error::missing_field("messages"))?;
        request.messages = messages.into_iter().flat_map(|m| m.0).collect();
        Ok(request)
    }
}

/// `thinking`: `{"type": "enabled", "budget_tokens": N}`, `{"type": "adaptive"}` or
/// `{"type": "disabled"}`.
#[derive(Deserialize)]
struct ThinkingWire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    budget_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct OutputConfigWire<'a> {
    #[serde(borrow, default)]
    effort: Option<Str<'a>>,
    #[serde(borrow, default)]
    format: Option<OutputFormatWire<'a>>,
}

/// `output_config.format`: `{"type": "json_schema", "schema": {...}}`.
#[derive(Deserialize)]
struct OutputFormatWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    schema: Option<&'a RawValue>,
}

/// The request's reasoning in canonical terms: `output_config.effort` sets the level, and
/// `thinking` says whether it is on and with which budget.
fn reasoning(thinking: Option<ThinkingWire>, effort: Option<Effort>) -> Option<Reasoning> {
    match thinking {
        Some(t) if t.kind == "disabled" => {
            Some(Reasoning { effort: Some(Effort::Off), budget_tokens: None })
        }
        Some(t) => Some(Reasoning { effort, budget_tokens: t.budget_tokens }),
        None => effort.map(|effort| Reasoning { effort: Some(effort), budget_tokens: None }),
    }
}

#[derive(Deserialize)]
struct SystemBlockWire<'a> {
    #[serde(borrow)]
    text: Str<'a>,
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
}

struct SystemBlock<'a>(Text<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for SystemBlock<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = SystemBlockWire::deserialize(deserializer)?;
        Ok(Self(Text {
            text: wire.text.into_cow(),
            cache_control: wire.cache_control.map(RawJson),
        }))
    }
}

/// `system` (and `developer`, as OpenAI-minded clients write it) in the middle of the
/// conversation: Claude Code sends those under the `mid-conversation-system` beta.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RoleIn {
    User,
    Assistant,
    #[serde(alias = "developer")]
    System,
}

#[derive(Deserialize)]
struct MessageWire<'a> {
    role: RoleIn,
    #[serde(borrow)]
    content: TextOr<'a, BlockIn<'a>>,
}

/// One Anthropic turn as canonical messages: a user turn's `tool_result` blocks become a tool
/// message of their own, in order.
struct MessageIn<'a>(Vec<Message<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for MessageIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = MessageWire::deserialize(deserializer)?;
        let parts: Vec<Part<'de>> = match wire.content {
            TextOr::Text(text) => vec![Part::Text(Text::new(text))],
            TextOr::Items(blocks) => blocks.into_iter().map(|b| b.0).collect(),
        };
        match wire.role {
            RoleIn::Assistant => {
                return Ok(Self(vec![Message { role: Role::Assistant, content: parts }]));
            }
            RoleIn::System => {
                if let Some(other) = parts.iter().find(|p| !matches!(p, Part::Text(_))) {
                    return Err(de::Error::custom(format!(
                        "a system message may only contain text, not {}",
                        part_kind(other)
                    )));
                }
                return Ok(Self(vec![Message { role: Role::System, content: parts }]));
            }
            RoleIn::User => {}
        }
        let mut messages: Vec<Message<'de>> = Vec::new();
        for part in parts {
            let role = if matches!(part, Part::ToolResult(_)) { Role::Tool } else { Role::User };
            match messages.last_mut() {
                Some(last) if last.role == role => last.content.push(part),
                _ => messages.push(Message { role, content: vec![part] }),
            }
        }
        if messages.is_empty() {
            messages.push(Message { role: Role::User, content: Vec::new() });
        }
        Ok(Self(messages))
    }
}

#[derive(Deserialize)]
struct ToolWire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    description: Option<Str<'a>>,
    #[serde(borrow, default)]
    input_schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
}

/// A tool definition; built-in tools (`web_search_20250305`, `bash_20250124`, ...) are kept
/// verbatim.
struct ToolIn<'a>(Tool<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ToolIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let wire: ToolWire<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        let native = match wire.kind {
            Some(kind) if kind.0 != "custom" => {
                Some(Opaque { dialect: Dialect::Anthropic, kind: kind.0, raw: RawJson(raw) })
            }
            _ => None,
        };
        Ok(Self(Tool {
            name: wire.name.into_cow(),
            description: wire.description.map(Str::into_cow),
            parameters: wire.input_schema.map(RawJson),
            strict: None,
            cache_control: wire.cache_control.map(RawJson),
            native,
            format: ToolFormat::Function,
            namespace: None,
        }))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ToolChoiceType {
    Auto,
    Any,
    Tool,
    None,
}

#[derive(Deserialize)]
struct ToolChoiceWire<'a> {
    #[serde(rename = "type")]
    kind: ToolChoiceType,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(default)]
    disable_parallel_tool_use: Option<bool>,
}

struct ToolChoiceIn<'a> {
    choice: ToolChoice<'a>,
    disable_parallel: bool,
}

impl<'de: 'a, 'a> Deserialize<'de> for ToolChoiceIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ToolChoiceWire::deserialize(deserializer)?;
        let choice = match wire.kind {
            ToolChoiceType::Auto => ToolChoice::Auto,
            ToolChoiceType::Any => ToolChoice::Required,
            ToolChoiceType::None => ToolChoice::None,
            ToolChoiceType::Tool => ToolChoice::Tool(
                wire.name.ok_or_else(|| de::Error::custom("`type: tool` needs `name`"))?.into_cow(),
            ),
        };
        Ok(Self { choice, disable_parallel: wire.disable_parallel_tool_use.unwrap_or(false) })
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding for an upstream.

#[derive(Serialize)]
struct RequestOut<'r> {
    model: &'r str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<BlockOut<'r>>,
    messages: Vec<MessageOut<'r>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoiceOut<'r>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'r [Cow<'r, str>],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfigOut<'r>>,
    #[serde(flatten)]
    vendor: VendorOut<'r>,
}

struct VendorOut<'r>(&'r [(Cow<'r, str>, &'r RawValue)]);

impl Serialize for VendorOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, value)| (key, value)))
    }
}

#[derive(Serialize)]
struct MessageOut<'r> {
    role: &'static str,
    content: Vec<BlockOut<'r>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolOut<'r> {
    Custom {
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<Cow<'r, str>>,
        input_schema: &'r RawValue,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<RawJson<'r>>,
    },
    Native(RawJson<'r>),
}

impl<'r> ToolOut<'r> {
    /// Where this tool's `cache_control` goes; `None` for a server tool passed as it was.
    fn cache_control(&mut self) -> Option<&mut Option<RawJson<'r>>> {
        match self {
            Self::Custom { cache_control, .. } => Some(cache_control),
            Self::Native(_) => None,
        }
    }
}

#[derive(Serialize)]
struct ToolChoiceOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'r str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

fn no_arguments_schema() -> &'static RawValue {
    serde_json::from_str(r#"{"type":"object","properties":{}}"#).expect("static JSON")
}

fn foreign(opaque: &Opaque<'_>) -> ProviderError {
    ProviderError::Untranslatable {
        dialect: Dialect::Anthropic,
        message: format!(
            "`{}` content from {} has no Anthropic equivalent",
            opaque.kind, opaque.dialect
        ),
    }
}

/// The request's own `thinking`, or one translated from another dialect's reasoning effort:
/// Anthropic wants a budget of at least 1,024 tokens, below `max_tokens`.
#[derive(Serialize)]
struct ThinkingOut {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// Anthropic's minimum thinking budget.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The fields other dialects' parsers read into [`ChatRequest::reasoning`].
const REASONING_FIELDS: &[&str] = &[
    "reasoning_effort",
    "thinking",
    "output_config",
    "response_format",
    "reasoning",
    "text",
    "tool_choice",
];

/// The upstream body for `request`.
pub fn encode_request(
    request: &ChatRequest<'_>,
    options: &EncodeOptions<'_>,
    dropped: &mut Dropped,
) -> Result<Vec<u8>, ProviderError> {
    let own = request.vendor.origin == Some(Dialect::Anthropic);
    let mut system: Vec<BlockOut<'_>> = request
        .system
        .iter()
        .filter(|text| !text.text.is_empty())
        .map(|text| super::block::KnownBlock::Text {
            text: &text.text,
            cache_control: text.cache_control,
        })
        .map(BlockOut::Known)
        .collect();

    let mut messages: Vec<MessageOut<'_>> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        let role = match message.role {
            Role::Assistant => "assistant",
            // The client's own mid-conversation system message, under its own beta header.
            Role::System if own => "system",
            Role::System => {
                system.extend(message.content.iter().filter_map(|part| match part {
                    Part::Text(text) => Some(BlockOut::Known(super::block::KnownBlock::Text {
                        text: &text.text,
                        cache_control: text.cache_control,
                    })),
                    _ => None,
                }));
                continue;
            }
            Role::User | Role::Tool => "user",
        };
        let mut blocks = Vec::with_capacity(message.content.len());
        for part in &message.content {
            match block_out(part) {
                Ok(block) => blocks.push(block),
                Err(Skip::Drop) if matches!(part, Part::Text(_)) => {}
                Err(Skip::Drop) => dropped.note(format!("{} content", part_kind(part))),
                // The model's own server-side work from another vendor means nothing here.
                Err(Skip::Foreign(opaque)) if message.role == Role::Assistant => {
                    dropped.note(format!("{} content", opaque.kind));
                }
                Err(Skip::Foreign(opaque)) => return Err(foreign(opaque)),
            }
        }
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.append(&mut blocks),
            _ => messages.push(MessageOut { role, content: blocks }),
        }
    }

    let (mut tools, tool_choice) = tools_out(request, dropped)?;
    if !own {
        breakpoints(&mut tools, &mut system, &mut messages, options.caching.breakpoints, dropped);
    }

    let sampling = &request.sampling;
    let max_tokens = sampling.max_tokens.unwrap_or(options.default_max_tokens);
    let thinking = if own { None } else { thinking(request, max_tokens, dropped) };
    // Anthropic refuses sampling changes while thinking.
    let (temperature, top_p) = if thinking.is_some() {
        if sampling.temperature.is_some() || sampling.top_p.is_some() {
            dropped.note("temperature/top_p (not allowed with thinking)");
        }
        (None, None)
    } else {
        (sampling.temperature.map(|t| t.clamp(0.0, 1.0)), sampling.top_p)
    };
    let output_config = if own { None } else { output_config(request, dropped) };
    if request.previous_response_id.is_some() {
        dropped.note("previous_response_id");
    }
    dropped.vendor_fields(request, Dialect::Anthropic, REASONING_FIELDS);
    let body = RequestOut {
        model: options.model,
        max_tokens,
        system,
        messages,
        tools,
        tool_choice,
        stop_sequences: &sampling.stop,
        temperature,
        top_p,
        stream: request.stream,
        thinking,
        output_config,
        vendor: VendorOut(request.vendor.for_dialect(Dialect::Anthropic)),
    };
    Ok(serde_json::to_vec(&body).expect("serialising to memory cannot fail"))
}

/// Anthropic's limit on `cache_control` breakpoints in one request.
const MAX_BREAKPOINTS: usize = 4;

/// The breakpoint translation adds: the default five-minute lifetime.
fn ephemeral() -> RawJson<'static> {
    RawJson(serde_json::from_str(r#"{"type":"ephemeral"}"#).expect("static JSON"))
}

/// Keeps at most [`MAX_BREAKPOINTS`] of the client's own breakpoints (the first, in Anthropic's
/// order: tools, system, messages; the rest named in `dropped`, as Anthropic refuses a fifth),
/// then, when `add`, marks the last message, the last system block and the last tool, in that
/// order of worth, while there is room: the whole prefix up to each is then written once and
/// read by every later turn that starts with it.
fn breakpoints<'r>(
    tools: &mut [ToolOut<'r>],
    system: &mut [BlockOut<'r>],
    messages: &mut [MessageOut<'r>],
    add: bool,
    dropped: &mut Dropped,
) {
    let mut slots: Vec<&mut Option<RawJson<'r>>> = tools
        .iter_mut()
        .filter_map(ToolOut::cache_control)
        .chain(system.iter_mut().filter_map(BlockOut::cache_control))
        .chain(
            messages
                .iter_mut()
                .flat_map(|m| m.content.iter_mut())
                .filter_map(BlockOut::cache_control),
        )
        .collect();
    let mut marked = 0;
    let mut past = 0;
    for slot in &mut slots {
        if slot.is_some() {
            if marked < MAX_BREAKPOINTS {
                marked += 1;
            } else {
                **slot = None;
                past += 1;
            }
        }
    }
    if past > 0 {
        dropped.note(format!("cache_control past the fourth breakpoint ({past})"));
    }
    if !add {
        return;
    }
    drop(slots);
    let last_message = messages
        .last_mut()
        .and_then(|m| m.content.iter_mut().rev().find_map(BlockOut::cache_control));
    let last_system = system.iter_mut().rev().find_map(BlockOut::cache_control);
    let last_tool = tools.iter_mut().rev().find_map(ToolOut::cache_control);
    let places = ["the last message", "the last system block", "the last tool"];
    for (slot, place) in [last_message, last_system, last_tool].into_iter().zip(places) {
        if let Some(slot) = slot
            && marked < MAX_BREAKPOINTS
            && slot.is_none()
        {
            *slot = Some(ephemeral());
            marked += 1;
            dropped.add(format!("cache_control on {place}"));
        }
    }
}

/// The tools and `tool_choice`; another dialect's built-in tool is refused or dropped (see
/// [`foreign_native`]).
fn tools_out<'r>(
    request: &'r ChatRequest<'r>,
    dropped: &mut Dropped,
) -> Result<(Vec<ToolOut<'r>>, Option<ToolChoiceOut<'r>>), ProviderError> {
    let mut tools: Vec<ToolOut<'_>> = Vec::with_capacity(request.tools.len());
    for tool in &request.tools {
        tools.push(match &tool.native {
            Some(native) if native.dialect == Dialect::Anthropic => ToolOut::Native(native.raw),
            // A server tool Anthropic does not run would change what the answer can be; a
            // Responses built-in is dropped.
            Some(native) => {
                foreign_native(native, Dialect::Anthropic, dropped)?;
                continue;
            }
            None => ToolOut::Custom {
                name: &tool.name,
                description: tool.function_description(),
                input_schema: match tool.function_parameters() {
                    Some(schema) => schema.0,
                    None => no_arguments_schema(),
                },
                cache_control: tool.cache_control,
            },
        });
    }
    let disable_parallel = request.parallel_tool_calls == Some(false);
    let tool_choice = if tools.is_empty() {
        None
    } else {
        match (&request.tool_choice, disable_parallel) {
            (None, false) => None,
            (None | Some(ToolChoice::Auto), _) => Some(ToolChoiceOut {
                kind: "auto",
                name: None,
                disable_parallel_tool_use: disable_parallel,
            }),
            (Some(ToolChoice::None), _) => {
                Some(ToolChoiceOut { kind: "none", name: None, disable_parallel_tool_use: false })
            }
            (Some(ToolChoice::Required), _) => Some(ToolChoiceOut {
                kind: "any",
                name: None,
                disable_parallel_tool_use: disable_parallel,
            }),
            (Some(ToolChoice::Tool(name)), _) => Some(ToolChoiceOut {
                kind: "tool",
                name: Some(name),
                disable_parallel_tool_use: disable_parallel,
            }),
        }
    };
    Ok((tools, tool_choice))
}

/// `output_config.format`: Anthropic's structured outputs take a JSON schema only.
#[derive(Serialize)]
struct OutputConfigOut<'r> {
    format: FormatOut<'r>,
}

#[derive(Serialize)]
struct FormatOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    schema: RawJson<'r>,
}

/// Another dialect's structured output as Anthropic's `output_config.format`; JSON without a
/// schema has no Anthropic equivalent and is named as dropped.
fn output_config<'r>(
    request: &'r ChatRequest<'r>,
    dropped: &mut Dropped,
) -> Option<OutputConfigOut<'r>> {
    match request.response_format.as_ref()? {
        ResponseFormat::Text => None,
        ResponseFormat::JsonSchema { schema: Some(schema), .. } => {
            Some(OutputConfigOut { format: FormatOut { kind: "json_schema", schema: *schema } })
        }
        ResponseFormat::JsonObject | ResponseFormat::JsonSchema { schema: None, .. } => {
            dropped.note("response_format (JSON without a schema)");
            None
        }
    }
}

/// Anthropic refuses thinking when the last assistant turn made tool calls without starting
/// with its own signed thinking (another vendor's turn, or one whose thinking was not kept).
fn tool_turn_is_signed(request: &ChatRequest<'_>) -> bool {
    let Some(last) = request.messages.iter().rev().find(|m| m.role == Role::Assistant) else {
        return true;
    };
    if !last.content.iter().any(|p| matches!(p, Part::ToolUse(_))) {
        return true;
    }
    let first = last.content.iter().find(|p| !matches!(p, Part::Text(t) if t.text.is_empty()));
    match first {
        Some(Part::Thinking(thinking)) => {
            thinking.signature.as_deref().is_some_and(|s| !s.is_empty())
        }
        Some(Part::RedactedThinking(_)) => true,
        _ => false,
    }
}

/// Another dialect's reasoning effort as Anthropic's extended thinking, when the output
/// limit leaves room for Anthropic's minimum budget; otherwise noted as dropped.
fn thinking(
    request: &ChatRequest<'_>,
    max_tokens: u32,
    dropped: &mut Dropped,
) -> Option<ThinkingOut> {
    let reasoning = request.reasoning?;
    let budget = reasoning.budget()?;
    if budget == 0 {
        return None;
    }
    if !tool_turn_is_signed(request) {
        dropped.note("thinking (the last tool-use turn carries no signed thinking)");
        return None;
    }
    let budget = budget.min(max_tokens.saturating_sub(1));
    if budget < MIN_THINKING_BUDGET {
        dropped.note("reasoning effort (max_tokens leaves no room for thinking)");
        return None;
    }
    Some(ThinkingOut { kind: "enabled", budget_tokens: budget })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `body` (an OpenAI Chat request) translated for Anthropic, with breakpoints asked or not.
    fn translated(body: &[u8], add: bool) -> (serde_json::Value, Dropped) {
        let request = crate::openai::parse_request(body).unwrap();
        let caching = crate::dialect::Caching { breakpoints: add, key: None };
        let options = EncodeOptions { caching, ..EncodeOptions::new("up", 64) };
        let mut dropped = Dropped::default();
        let out = encode_request(&request, &options, &mut dropped).unwrap();
        (serde_json::from_slice(&out).unwrap(), dropped)
    }

    fn marks(body: &serde_json::Value) -> Vec<String> {
        let mut found = Vec::new();
        let mut walk = |at: String, v: &serde_json::Value| {
            if v.get("cache_control").is_some() {
                found.push(at);
            }
        };
        for (n, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
            walk(format!("tools[{n}]"), tool);
        }
        for (n, block) in body["system"].as_array().into_iter().flatten().enumerate() {
            walk(format!("system[{n}]"), block);
        }
        for (m, message) in body["messages"].as_array().into_iter().flatten().enumerate() {
            for (n, block) in message["content"].as_array().into_iter().flatten().enumerate() {
                walk(format!("messages[{m}][{n}]"), block);
            }
        }
        found
    }

    #[test]
    fn translation_marks_the_last_tool_system_block_and_message_for_the_cache() {
        let body = br#"{"model":"m","tools":[
            {"type":"function","function":{"name":"a","parameters":{"type":"object"}}},
            {"type":"function","function":{"name":"b","parameters":{"type":"object"}}}],
            "messages":[{"role":"system","content":"be brief"},
            {"role":"user","content":"one"},{"role":"assistant","content":"two"},
            {"role":"user","content":[{"type":"text","text":"three"},{"type":"text","text":"four"}]}]}"#;
        let (plain, _) = translated(body, false);
        assert!(marks(&plain).is_empty(), "none unless asked");
        let (marked, dropped) = translated(body, true);
        assert_eq!(marks(&marked), ["tools[1]", "system[0]", "messages[2][1]"]);
        assert_eq!(
            marked["messages"][2]["content"][1]["cache_control"],
            serde_json::json!({"type": "ephemeral"})
        );
        assert!(dropped.names().is_empty(), "{:?}", dropped.names());
    }

    #[test]
    fn a_clients_own_breakpoints_arrive_where_it_put_them_and_never_more_than_four() {
        let own = |n: usize| {
            format!(r#"{{"type":"text","text":"part {n}","cache_control":{{"type":"ephemeral"}}}}"#)
        };
        let parts: Vec<String> = (0..6).map(own).collect();
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"system","content":[{}]}},{{"role":"user","content":[{}]}}]}}"#,
            parts[0],
            parts[1..].join(",")
        );
        let (two, _) = translated(
            format!(r#"{{"model":"m","messages":[{{"role":"user","content":[{},{{"type":"text","text":"x"}}]}}]}}"#, parts[1]).as_bytes(),
            true,
        );
        assert_eq!(
            marks(&two),
            ["messages[0][0]", "messages[0][1]"],
            "its own, then the last message"
        );
        let (capped, dropped) = translated(body.as_bytes(), true);
        assert_eq!(
            marks(&capped),
            ["system[0]", "messages[0][0]", "messages[0][1]", "messages[0][2]"]
        );
        assert!(
            dropped.names().iter().any(|n| n.contains("past the fourth")),
            "{:?}",
            dropped.names()
        );
    }

    #[test]
    fn a_user_turn_of_tool_results_and_text_becomes_a_tool_message_then_a_user_message() {
        let body = br#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[
            {"type":"tool_result","tool_use_id":"a","content":"1"},
            {"type":"tool_result","tool_use_id":"b","content":"2"},
            {"type":"text","text":"go on"}]}]}"#;
        let request = parse_request(body).unwrap();
        let roles: Vec<(Role, usize)> =
            request.messages.iter().map(|m| (m.role, m.content.len())).collect();
        assert_eq!(roles, [(Role::Tool, 2), (Role::User, 1)]);
    }

    #[test]
    fn tool_inputs_and_schemas_are_borrowed_verbatim() {
        let body = br#"{"model":"m","max_tokens":1,
            "tools":[{"name":"t","input_schema":{"type":"object"}}],
            "messages":[{"role":"assistant","content":[
                {"type":"tool_use","id":"x","name":"t","input":{"a": [1, 2]}}]}]}"#;
        let request = parse_request(body).unwrap();
        assert_eq!(request.tools[0].parameters.map(RawJson::get), Some(r#"{"type":"object"}"#));
        let [Part::ToolUse(call)] = request.messages[0].content.as_slice() else { panic!() };
        assert!(matches!(call.arguments, Cow::Borrowed(r#"{"a": [1, 2]}"#)));
    }

    #[test]
    fn unsigned_thinking_and_foreign_blocks_in_model_turns_are_dropped() {
        let mut request = parse_request(
            br#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#,
        )
        .unwrap();
        request.messages.push(Message {
            role: Role::Assistant,
            content: vec![
                Part::Thinking(crate::chat::Thinking { text: "hm".into(), signature: None }),
                Part::Text(Text::new("answer")),
            ],
        });
        let options = EncodeOptions::new("x", 8);
        let body: serde_json::Value = serde_json::from_slice(
            &encode_request(&request, &options, &mut Dropped::default()).unwrap(),
        )
        .unwrap();
        assert_eq!(
            body["messages"][1],
            serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "answer"}]})
        );
    }
}
