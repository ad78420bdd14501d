//! Responses requests: parsed from clients, encoded for upstreams.

use std::borrow::Cow;

use serde::de::{self, Deserializer, MapAccess};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use super::unwrap_thinking;
use crate::chat::{
    ChatRequest, Effort, Image, ImageSource, Message, Namespace, Opaque, Part, RawJson, Reasoning,
    ResponseFormat, Role, Text, Tool, ToolChoice, ToolFormat, ToolResult, ToolUse, flat_tool_name,
    freeform_arguments, freeform_input, part_kind,
};
use crate::dialect::{Dialect, Dropped, EncodeOptions};
use crate::error::ProviderError;
use crate::json::{self, Depth, Str, TextOr};

/// Parses a client's Responses body. Unknown top-level fields (`store`, `include`,
/// `prompt_cache_key`, `metadata`, `truncation`, ...) are kept for Responses upstreams;
/// `tool_choice`, `reasoning` and `text` are kept verbatim for them too, and read for everyone
/// else's.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest<'_>, ProviderError> {
    parse_request_to(body, Depth::Whole)
}

/// [`parse_request`] to `depth`.
pub fn parse_request_to(body: &[u8], depth: Depth) -> Result<ChatRequest<'_>, ProviderError> {
    json::parse_request::<Fields>(body, depth)
}

struct Fields;

impl json::RequestFields for Fields {
    const EXPECTING: &'static str = "a responses request object";

    fn read<'de, A: MapAccess<'de>>(
        mut map: A,
        depth: Depth,
    ) -> Result<ChatRequest<'de>, A::Error> {
        let mut request = ChatRequest::default();
        request.vendor.origin = Some(Dialect::Responses);
        // `response.completed` always carries usage.
        request.stream_usage = true;
        let mut model = None;
        let mut instructions = None;
        let mut input: Option<TextOr<'de, ItemIn<'de>>> = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "model" => model = Some(map.next_value::<Str<'de>>()?.into_cow()),
                "instructions" | "input" | "tools" if depth == Depth::Routing => {
                    json::skip(&mut map)?;
                }
                "instructions" => instructions = map.next_value::<Option<Str<'de>>>()?,
                "input" => input = map.next_value()?,
                "tools" => {
                    let tools: Option<Vec<ToolIn<'de>>> = map.next_value()?;
                    request.tools =
                        tools.unwrap_or_default().into_iter().flat_map(|t| t.0).collect();
                }
                "parallel_tool_calls" => request.parallel_tool_calls = map.next_value()?,
                "max_output_tokens" => request.sampling.max_tokens = map.next_value()?,
                "temperature" => request.sampling.temperature = map.next_value()?,
                "top_p" => request.sampling.top_p = map.next_value()?,
                "stream" => request.stream = map.next_value::<Option<bool>>()?.unwrap_or(false),
                "previous_response_id" => {
                    request.previous_response_id =
                        map.next_value::<Option<Str<'de>>>()?.map(Str::into_cow);
                }
                // Kept verbatim for Responses upstreams, and read for everyone else's.
                "tool_choice" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    request.tool_choice = tool_choice(raw);
                    request.vendor.fields.push((key.0, raw));
                }
                "reasoning" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    request.reasoning =
                        serde_json::from_str::<Option<ReasoningWire<'_>>>(raw.get())
                            .ok()
                            .flatten()
                            .and_then(|r| r.effort)
                            .and_then(|e| Effort::parse(&e.0))
                            .map(|effort| Reasoning { effort: Some(effort), budget_tokens: None });
                    request.vendor.fields.push((key.0, raw));
                }
                "text" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    request.response_format =
                        serde_json::from_str::<Option<TextWire<'de>>>(raw.get())
                            .ok()
                            .flatten()
                            .and_then(|t| t.format)
                            .and_then(FormatWire::into_canonical);
                    request.vendor.fields.push((key.0, raw));
                }
                _ => request.vendor.fields.push((key.0, map.next_value::<&'de RawValue>()?)),
            }
        }
        request.model = model.ok_or_else(|| de::Error::missing_field("model"))?;
        if depth == Depth::Routing {
            return Ok(request);
        }
        if let Some(instructions) = instructions.filter(|i| !i.0.is_empty()) {
            request.system.push(Text::new(instructions.into_cow()));
        }
        match input {
            None => {}
            Some(TextOr::Text(text)) => request
                .messages
                .push(Message { role: Role::User, content: vec![Part::Text(Text::new(text))] }),
            Some(TextOr::Items(items)) => {
                for item in items {
                    add_item(&mut request, item);
                }
            }
        }
        Ok(request)
    }
}

/// Places one input item in the canonical conversation (see the module invariants of
/// [`crate::chat`] and the grouping rules in [`super`]).
fn add_item<'a>(request: &mut ChatRequest<'a>, item: ItemIn<'a>) {
    let (role, parts) = match item {
        ItemIn::System(texts) if request.messages.is_empty() => {
            request.system.extend(texts);
            return;
        }
        ItemIn::System(texts) => {
            request.messages.push(Message {
                role: Role::System,
                content: texts.into_iter().map(Part::Text).collect(),
            });
            return;
        }
        ItemIn::User(parts) => {
            request.messages.push(Message { role: Role::User, content: parts });
            return;
        }
        ItemIn::Model(parts) => (Role::Assistant, parts),
        ItemIn::Result(result) => (Role::Tool, vec![Part::ToolResult(result)]),
    };
    match request.messages.last_mut() {
        Some(last) if last.role == role => last.content.extend(parts),
        _ => request.messages.push(Message { role, content: parts }),
    }
}

#[derive(Deserialize)]
struct ReasoningWire<'a> {
    #[serde(borrow, default)]
    effort: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct TextWire<'a> {
    #[serde(borrow, default)]
    format: Option<FormatWire<'a>>,
}

/// `text.format`: `{"type": "json_schema", "name", "schema", "strict", "description"}`,
/// `{"type": "json_object"}` or `{"type": "text"}`.
#[derive(Deserialize)]
struct FormatWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    description: Option<Str<'a>>,
    #[serde(borrow, default)]
    schema: Option<&'a RawValue>,
    #[serde(default)]
    strict: Option<bool>,
}

impl<'a> FormatWire<'a> {
    fn into_canonical(self) -> Option<ResponseFormat<'a>> {
        Some(match self.kind.0.as_ref() {
            "text" => ResponseFormat::Text,
            "json_object" => ResponseFormat::JsonObject,
            "json_schema" => ResponseFormat::JsonSchema {
                name: self.name.map_or(Cow::Borrowed("response"), Str::into_cow),
                description: self.description.map(Str::into_cow),
                schema: self.schema.map(RawJson),
                strict: self.strict,
            },
            _ => return None,
        })
    }
}

/// `tool_choice`: a mode, a named function or custom tool, `allowed_tools` (its mode), or a
/// built-in tool (which only a Responses upstream can force; elsewhere it is `auto`).
fn tool_choice(raw: &RawValue) -> Option<ToolChoice<'_>> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire<'a> {
        Mode(#[serde(borrow)] Str<'a>),
        Object {
            #[serde(rename = "type", borrow)]
            kind: Str<'a>,
            #[serde(borrow, default)]
            name: Option<Str<'a>>,
            #[serde(borrow, default)]
            mode: Option<Str<'a>>,
        },
    }
    let mode = |word: &str| match word {
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        _ => ToolChoice::Auto,
    };
    Some(match serde_json::from_str::<Option<Wire<'_>>>(raw.get()).ok()?? {
        Wire::Mode(word) => mode(&word.0),
        Wire::Object { kind, name: Some(name), .. }
            if kind.0 == "function" || kind.0 == "custom" =>
        {
            ToolChoice::Tool(name.into_cow())
        }
        Wire::Object { kind, mode: Some(word), .. } if kind.0 == "allowed_tools" => mode(&word.0),
        Wire::Object { .. } => ToolChoice::Auto,
    })
}

/// Just enough of an item to know what it is.
#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    role: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct MessageWire<'a> {
    #[serde(borrow)]
    content: TextOr<'a, ContentIn<'a>>,
}

#[derive(Deserialize)]
struct FunctionCallWire<'a> {
    #[serde(borrow)]
    call_id: Str<'a>,
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    namespace: Option<Str<'a>>,
    #[serde(borrow, default)]
    arguments: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct CustomCallWire<'a> {
    #[serde(borrow)]
    call_id: Str<'a>,
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    namespace: Option<Str<'a>>,
    #[serde(borrow, default)]
    input: Option<Str<'a>>,
}

/// A call's canonical name: the flat name of a namespaced tool (see [`Namespace`]).
fn call_name<'a>(name: Str<'a>, namespace: Option<Str<'a>>) -> Cow<'a, str> {
    match namespace {
        Some(namespace) => Cow::Owned(flat_tool_name(&namespace.0, &name.0)),
        None => name.into_cow(),
    }
}

#[derive(Deserialize)]
struct OutputWire<'a> {
    #[serde(borrow)]
    call_id: Str<'a>,
    #[serde(borrow, default)]
    output: Option<TextOr<'a, ContentIn<'a>>>,
}

#[derive(Deserialize)]
struct ReasoningItemWire<'a> {
    #[serde(borrow, default)]
    encrypted_content: Option<Str<'a>>,
}

/// One input item, sorted by who wrote it.
enum ItemIn<'a> {
    /// A `system` or `developer` message.
    System(Vec<Text<'a>>),
    User(Vec<Part<'a>>),
    /// The model's own work: assistant text, calls, reasoning, items this crate does not model.
    Model(Vec<Part<'a>>),
    Result(ToolResult<'a>),
}

impl<'de: 'a, 'a> Deserialize<'de> for ItemIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        item(raw).map_err(de::Error::custom)
    }
}

fn item(raw: &RawValue) -> Result<ItemIn<'_>, String> {
    let head: ItemHead<'_> = json::parse_raw(raw)?;
    let kind = head.kind.map_or(Cow::Borrowed("message"), Str::into_cow);
    Ok(match kind.as_ref() {
        "message" => {
            let role = head.role.ok_or("a message needs `role`")?;
            let wire: MessageWire<'_> = json::parse_raw(raw)?;
            let parts = match wire.content {
                TextOr::Text(text) => vec![Part::Text(Text::new(text))],
                TextOr::Items(parts) => parts.into_iter().map(|p| p.0).collect(),
            };
            match role.0.as_ref() {
                "user" => ItemIn::User(parts),
                "assistant" => ItemIn::Model(parts),
                "system" | "developer" => ItemIn::System(
                    parts
                        .into_iter()
                        .map(|part| match part {
                            Part::Text(text) => Ok(text),
                            other => Err(format!(
                                "a {} message may only contain text, not {}",
                                role.0,
                                part_kind(&other)
                            )),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                other => {
                    return Err(format!(
                        "unknown role `{other}`, expected `user`, `assistant`, `system` or `developer`"
                    ));
                }
            }
        }
        "function_call" => {
            let wire: FunctionCallWire<'_> = json::parse_raw(raw)?;
            ItemIn::Model(vec![Part::ToolUse(ToolUse {
                id: wire.call_id.into_cow(),
                name: call_name(wire.name, wire.namespace),
                arguments: wire.arguments.map_or(Cow::Borrowed("{}"), Str::into_cow),
                cache_control: None,
            })])
        }
        "custom_tool_call" => {
            let wire: CustomCallWire<'_> = json::parse_raw(raw)?;
            let input = wire.input.map(Str::into_cow).unwrap_or_default();
            ItemIn::Model(vec![Part::ToolUse(ToolUse {
                id: wire.call_id.into_cow(),
                name: call_name(wire.name, wire.namespace),
                arguments: Cow::Owned(freeform_arguments(&input)),
                cache_control: None,
            })])
        }
        "function_call_output" | "custom_tool_call_output" => {
            let wire: OutputWire<'_> = json::parse_raw(raw)?;
            ItemIn::Result(ToolResult {
                tool_use_id: wire.call_id.into_cow(),
                content: match wire.output {
                    None => Vec::new(),
                    Some(TextOr::Text(text)) => vec![Part::Text(Text::new(text))],
                    Some(TextOr::Items(parts)) => parts.into_iter().map(|p| p.0).collect(),
                },
                is_error: false,
                cache_control: None,
            })
        }
        "reasoning" => {
            let wire: ReasoningItemWire<'_> = json::parse_raw(raw)?;
            let carried = wire.encrypted_content.and_then(|e| unwrap_thinking(&e.0));
            ItemIn::Model(vec![carried.unwrap_or_else(|| opaque(kind, raw))])
        }
        // Codex's request for a `compaction` item back (its remote compaction): the client's
        // ask, not the model's work, so another dialect refuses it rather than drop it and
        // answer without the item Codex waits for.
        kind if USER_ITEMS.contains(&kind) => {
            ItemIn::User(vec![opaque(Cow::Owned(kind.to_owned()), raw)])
        }
        // `local_shell_call`, `web_search_call`, `item_reference`, and what comes next.
        _ => ItemIn::Model(vec![opaque(kind, raw)]),
    })
}

/// Input items the client writes that are not messages, read as a user turn of their own.
const USER_ITEMS: [&str; 1] = ["compaction_trigger"];

/// A part that stands for one of [`USER_ITEMS`].
fn is_user_item(part: &Part<'_>) -> bool {
    matches!(part, Part::Opaque(o) if o.dialect == Dialect::Responses && USER_ITEMS.contains(&o.kind.as_ref()))
}

fn opaque<'a>(kind: Cow<'a, str>, raw: &'a RawValue) -> Part<'a> {
    Part::Opaque(Opaque { dialect: Dialect::Responses, kind, raw: RawJson(raw) })
}

#[derive(Deserialize)]
struct ContentWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    refusal: Option<Str<'a>>,
    #[serde(borrow, default)]
    image_url: Option<Str<'a>>,
    #[serde(borrow, default)]
    detail: Option<Str<'a>>,
    /// Anthropic's breakpoint on a content part, as OpenAI-format clients write it: kept for an
    /// Anthropic target.
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
}

/// One content part: text of any role, images by URL; files and images by `file_id` are
/// opaque (they mean something to OpenAI only).
struct ContentIn<'a>(Part<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ContentIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let wire: ContentWire<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        let kind = wire.kind.0;
        let cache_control = wire.cache_control.map(RawJson);
        let part = match kind.as_ref() {
            "input_text" | "output_text" | "text" | "summary_text" => Part::Text(Text {
                text: wire.text.ok_or_else(|| de::Error::missing_field("text"))?.into_cow(),
                cache_control,
            }),
            "refusal" => Part::Text(Text::new(
                wire.refusal.ok_or_else(|| de::Error::missing_field("refusal"))?.into_cow(),
            )),
            "input_image" if wire.image_url.is_some() => Part::Image(Image {
                source: crate::openai::image_source(
                    wire.image_url.map(Str::into_cow).unwrap_or_default(),
                )
                .map_err(de::Error::custom)?,
                detail: wire.detail.map(Str::into_cow),
                cache_control,
            }),
            _ => opaque(kind, raw),
        };
        Ok(Self(part))
    }
}

#[derive(Deserialize)]
struct ToolWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    description: Option<Str<'a>>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(default)]
    strict: Option<bool>,
    #[serde(borrow, default)]
    format: Option<&'a RawValue>,
    /// A `namespace` tool's members.
    #[serde(borrow, default)]
    tools: Option<Vec<&'a RawValue>>,
}

/// A tool definition: `function`, `custom` (freeform), the members of a `namespace` (each a
/// tool of its own, see [`Namespace`]), or a built-in kept verbatim.
struct ToolIn<'a>(Vec<Tool<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for ToolIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let wire: ToolWire<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        if wire.kind.0 != "namespace" {
            return tool(raw, wire).map(|tool| Self(vec![tool])).map_err(de::Error::custom);
        }
        let name = wire.name.ok_or_else(|| de::Error::missing_field("name"))?.into_cow();
        let description = wire.description.map(Str::into_cow);
        let mut tools = Vec::new();
        for member in wire.tools.unwrap_or_default() {
            let member_wire: ToolWire<'de> = json::parse_raw(member).map_err(de::Error::custom)?;
            let mut tool = tool(member, member_wire).map_err(de::Error::custom)?;
            // Only functions and freeform tools are callable by name from inside a namespace.
            if tool.native.is_some() {
                continue;
            }
            let flat = Cow::Owned(flat_tool_name(&name, &tool.name));
            let member = std::mem::replace(&mut tool.name, flat);
            tool.namespace =
                Some(Namespace { name: name.clone(), description: description.clone(), member });
            tools.push(tool);
        }
        Ok(Self(tools))
    }
}

/// One tool that is not a namespace.
fn tool<'a>(raw: &'a RawValue, wire: ToolWire<'a>) -> Result<Tool<'a>, String> {
    let named = |wire: ToolWire<'a>| -> Result<Tool<'a>, String> {
        let mut tool = Tool::function(wire.name.ok_or("missing field `name`")?.0);
        tool.description = wire.description.map(Str::into_cow);
        Ok(tool)
    };
    let kind = wire.kind.0.clone();
    Ok(match kind.as_ref() {
        "function" => {
            let (parameters, strict) = (wire.parameters, wire.strict);
            let mut tool = named(wire)?;
            tool.parameters = parameters.map(RawJson);
            tool.strict = strict;
            tool
        }
        "custom" => {
            let format = wire.format.filter(|f| f.get() != "null").map(RawJson);
            let mut tool = named(wire)?;
            tool.format = ToolFormat::Freeform(format);
            tool
        }
        _ => {
            let mut tool = Tool::function(kind.clone());
            tool.native = Some(Opaque { dialect: Dialect::Responses, kind, raw: RawJson(raw) });
            tool
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Encoding for an upstream.

#[derive(Serialize)]
struct RequestOut<'r> {
    model: &'r str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<Cow<'r, str>>,
    input: Vec<ItemOut<'r>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoiceOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<ReasoningOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<TextOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_response_id: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<bool>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(flatten)]
    vendor: VendorOut<'r>,
}

/// Vendor fields written as further top-level members.
struct VendorOut<'r>(&'r [(Cow<'r, str>, &'r RawValue)]);

impl Serialize for VendorOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, value)| (key, value)))
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum ItemOut<'r> {
    Known(KnownItem<'r>),
    Raw(RawJson<'r>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum KnownItem<'r> {
    Message {
        role: &'static str,
        content: Vec<ContentOut<'r>>,
    },
    FunctionCall {
        call_id: &'r str,
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<&'r str>,
        arguments: &'r str,
    },
    CustomToolCall {
        call_id: &'r str,
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<&'r str>,
        input: Cow<'r, str>,
    },
    FunctionCallOutput {
        call_id: &'r str,
        output: OutputOut<'r>,
    },
    CustomToolCallOutput {
        call_id: &'r str,
        output: OutputOut<'r>,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum ContentOut<'r> {
    Known(KnownContent<'r>),
    Raw(RawJson<'r>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum KnownContent<'r> {
    InputText { text: &'r str },
    OutputText { text: &'r str },
    InputImage { image_url: UrlOut<'r>, detail: &'r str },
}

#[derive(Serialize)]
#[serde(untagged)]
enum OutputOut<'r> {
    Text(Cow<'r, str>),
    Parts(Vec<ContentOut<'r>>),
}

/// An image URL; base64 images are written as a `data:` URL straight into the output.
struct UrlOut<'r>(&'r ImageSource<'r>);

impl Serialize for UrlOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ImageSource::Url(url) => serializer.serialize_str(url),
            ImageSource::Base64 { media_type, data } => {
                serializer.collect_str(&format_args!("data:{media_type};base64,{data}"))
            }
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolOut<'r> {
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'r str>,
        parameters: RawJson<'r>,
        #[serde(skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
    Custom {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'r str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<RawJson<'r>>,
    },
    Namespace {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'r str>,
        tools: Vec<ToolOut<'r>>,
    },
    Native(RawJson<'r>),
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolChoiceOut<'r> {
    Mode(&'static str),
    Named {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'r str,
    },
}

#[derive(Serialize)]
struct ReasoningOut {
    effort: &'static str,
}

#[derive(Serialize)]
struct TextOut<'r> {
    format: FormatOut<'r>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FormatOut<'r> {
    Text,
    JsonObject,
    JsonSchema {
        name: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'r str>,
        schema: RawJson<'r>,
        #[serde(skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

/// The fields other dialects' parsers read into the canonical request.
const TRANSLATED_FIELDS: &[&str] =
    &["reasoning_effort", "thinking", "output_config", "response_format"];

fn no_arguments_schema() -> &'static RawValue {
    serde_json::from_str(r#"{"type":"object","properties":{}}"#).expect("static JSON")
}

fn untranslatable(opaque: &Opaque<'_>) -> ProviderError {
    ProviderError::Untranslatable {
        dialect: Dialect::Responses,
        message: format!(
            "`{}` content from {} has no Responses equivalent",
            opaque.kind, opaque.dialect
        ),
    }
}

/// The upstream body for `request`. A request of the Responses dialect keeps its own
/// `tool_choice`, `reasoning`, `text`, `store`, `include` and every other field verbatim; one
/// of another dialect gets them translated, and `store: false` (nothing it sends needs a
/// stored response).
pub fn encode_request(
    request: &ChatRequest<'_>,
    options: &EncodeOptions<'_>,
    dropped: &mut Dropped,
) -> Result<Vec<u8>, ProviderError> {
    let own = request.vendor.origin == Some(Dialect::Responses);
    let freeform = |name: &str| is_freeform(request, name);
    let input = input_items(request, dropped)?;
    let tools = tools_out(request, own)?;
    let has_tools = !tools.is_empty();
    let tool_choice = if own {
        None
    } else {
        request.tool_choice.as_ref().filter(|_| has_tools).map(|choice| match choice {
            ToolChoice::Auto => ToolChoiceOut::Mode("auto"),
            ToolChoice::None => ToolChoiceOut::Mode("none"),
            ToolChoice::Required => ToolChoiceOut::Mode("required"),
            ToolChoice::Tool(name) => ToolChoiceOut::Named {
                kind: if freeform(name) { "custom" } else { "function" },
                name,
            },
        })
    };
    let (reasoning, text) = if own {
        (None, None)
    } else {
        (
            reasoning(request.reasoning, dropped),
            text_format(request.response_format.as_ref(), dropped),
        )
    };
    if !own {
        if request.uses_cache_control() {
            dropped.note("cache_control");
        }
        if !request.sampling.stop.is_empty() {
            dropped.note("stop");
        }
    }
    dropped.vendor_fields(request, Dialect::Responses, TRANSLATED_FIELDS);
    let instructions = match request.system.as_slice() {
        [] => None,
        [only] => Some(Cow::Borrowed(only.text.as_ref())),
        many => {
            Some(Cow::Owned(many.iter().map(|t| t.text.as_ref()).collect::<Vec<_>>().join("\n\n")))
        }
    };
    let prompt_cache_key = options.caching.key_to_send(own, dropped);
    let body = RequestOut {
        model: options.model,
        instructions,
        input,
        tools,
        tool_choice,
        parallel_tool_calls: request.parallel_tool_calls.filter(|_| has_tools),
        max_output_tokens: request.sampling.max_tokens,
        temperature: request.sampling.temperature,
        top_p: request.sampling.top_p,
        reasoning,
        text,
        previous_response_id: request.previous_response_id.as_deref(),
        // A client of this dialect said its own, if any, among its fields.
        prompt_cache_key,
        store: (!own).then_some(false),
        stream: request.stream,
        vendor: VendorOut(request.vendor.for_dialect(Dialect::Responses)),
    };
    Ok(serde_json::to_vec(&body).expect("serialising to memory cannot fail"))
}

fn is_freeform(request: &ChatRequest<'_>, name: &str) -> bool {
    request.tools.iter().any(|t| t.is_freeform() && t.name == name)
}

/// The conversation as input items: each assistant turn's text one message, each call and
/// each opaque item (reasoning, ...) an item of its own, in order.
fn input_items<'r>(
    request: &'r ChatRequest<'r>,
    dropped: &mut Dropped,
) -> Result<Vec<ItemOut<'r>>, ProviderError> {
    let freeform = |name: &str| is_freeform(request, name);
    let mut input: Vec<ItemOut<'_>> = Vec::with_capacity(request.messages.len());
    // Calls of freeform tools, whose results go back as `custom_tool_call_output`.
    let mut custom_calls: Vec<&str> = Vec::new();
    for message in &request.messages {
        match message.role {
            Role::System => {
                let content = message
                    .content
                    .iter()
                    .filter_map(|part| match part {
                        Part::Text(text) => {
                            Some(ContentOut::Known(KnownContent::InputText { text: &text.text }))
                        }
                        _ => None,
                    })
                    .collect();
                input.push(ItemOut::Known(KnownItem::Message { role: "developer", content }));
            }
            // An item of the client's own that is not a message (Codex's `compaction_trigger`):
            // back as the item it was.
            Role::User if message.content.iter().all(is_user_item) => {
                for part in &message.content {
                    if let Part::Opaque(opaque) = part {
                        input.push(ItemOut::Raw(opaque.raw));
                    }
                }
            }
            Role::User => {
                let content = user_content(&message.content, dropped)?;
                input.push(ItemOut::Known(KnownItem::Message { role: "user", content }));
            }
            Role::Assistant => {
                let mut texts: Vec<ContentOut<'_>> = Vec::new();
                for part in &message.content {
                    let item = match part {
                        // Empty text too: a turn must not vanish, or a `developer` message
                        // after it would read as part of the system prompt.
                        Part::Text(text) => {
                            texts.push(ContentOut::Known(KnownContent::OutputText {
                                text: &text.text,
                            }));
                            continue;
                        }
                        Part::Image(image) => {
                            texts.push(ContentOut::Known(KnownContent::InputImage {
                                image_url: UrlOut(&image.source),
                                detail: image.detail.as_deref().unwrap_or("auto"),
                            }));
                            continue;
                        }
                        Part::ToolUse(call) if freeform(&call.name) => {
                            custom_calls.push(&call.id);
                            let (namespace, name) = declared(request, &call.name);
                            KnownItem::CustomToolCall {
                                call_id: &call.id,
                                name,
                                namespace,
                                input: freeform_input(&call.arguments),
                            }
                        }
                        Part::ToolUse(call) => {
                            let (namespace, name) = declared(request, &call.name);
                            KnownItem::FunctionCall {
                                call_id: &call.id,
                                name,
                                namespace,
                                arguments: &call.arguments,
                            }
                        }
                        Part::Opaque(opaque) if opaque.dialect == Dialect::Responses => {
                            flush_text(&mut texts, &mut input);
                            input.push(ItemOut::Raw(opaque.raw));
                            continue;
                        }
                        // Reasoning of another vendor and its server-side work mean nothing
                        // to OpenAI.
                        other => {
                            dropped.note(format!("{} content", part_kind(other)));
                            continue;
                        }
                    };
                    flush_text(&mut texts, &mut input);
                    input.push(ItemOut::Known(item));
                }
                flush_text(&mut texts, &mut input);
            }
            Role::Tool => {
                for part in &message.content {
                    let Part::ToolResult(result) = part else { continue };
                    let output = tool_output(&result.content, dropped)?;
                    let call_id: &str = &result.tool_use_id;
                    input.push(ItemOut::Known(if custom_calls.contains(&call_id) {
                        KnownItem::CustomToolCallOutput { call_id, output }
                    } else {
                        KnownItem::FunctionCallOutput { call_id, output }
                    }));
                }
            }
        }
    }
    Ok(input)
}

/// A call's name as its tool was declared: `(namespace, name)` for a namespaced tool's flat
/// name, `(None, name)` otherwise.
fn declared<'r>(request: &'r ChatRequest<'r>, name: &'r str) -> (Option<&'r str>, &'r str) {
    let namespaced =
        request.tools.iter().find(|t| t.name == name).and_then(|t| t.namespace.as_ref());
    match namespaced {
        Some(namespace) => (Some(&namespace.name), &namespace.member),
        None => (None, name),
    }
}

/// The tools: functions, freeform tools as `custom`, the members of a namespace in their
/// `namespace` again, Responses built-ins as they came.
fn tools_out<'r>(
    request: &'r ChatRequest<'r>,
    own: bool,
) -> Result<Vec<ToolOut<'r>>, ProviderError> {
    let mut tools: Vec<ToolOut<'_>> = Vec::with_capacity(request.tools.len());
    for tool in &request.tools {
        let name = tool.namespace.as_ref().map_or(tool.name.as_ref(), |n| n.member.as_ref());
        let out = match (&tool.native, tool.format) {
            (Some(native), _) if native.dialect == Dialect::Responses => {
                ToolOut::Native(native.raw)
            }
            // Another vendor's server tool would change what the answer can be.
            (Some(native), _) => {
                return Err(crate::dialect::native_tool(native, Dialect::Responses));
            }
            (None, ToolFormat::Freeform(format)) => ToolOut::Custom {
                kind: "custom",
                name,
                description: tool.description.as_deref(),
                format,
            },
            (None, ToolFormat::Function) => ToolOut::Function {
                kind: "function",
                name,
                description: tool.description.as_deref(),
                parameters: tool.parameters.unwrap_or(RawJson(no_arguments_schema())),
                // Responses functions are strict unless told otherwise; other dialects'
                // never were, and their schemas seldom meet strict mode's rules.
                strict: tool.strict.or((!own).then_some(false)),
            },
        };
        let Some(namespace) = &tool.namespace else {
            tools.push(out);
            continue;
        };
        let group = tools.iter_mut().find_map(|t| match t {
            ToolOut::Namespace { name, tools, .. } if *name == namespace.name => Some(tools),
            _ => None,
        });
        match group {
            Some(members) => members.push(out),
            None => tools.push(ToolOut::Namespace {
                kind: "namespace",
                name: &namespace.name,
                description: namespace.description.as_deref(),
                tools: vec![out],
            }),
        }
    }
    Ok(tools)
}

fn flush_text<'r>(texts: &mut Vec<ContentOut<'r>>, input: &mut Vec<ItemOut<'r>>) {
    if !texts.is_empty() {
        input.push(ItemOut::Known(KnownItem::Message {
            role: "assistant",
            content: std::mem::take(texts),
        }));
    }
}

fn content_part<'r>(
    part: &'r Part<'r>,
    dropped: &mut Dropped,
) -> Result<Option<ContentOut<'r>>, ProviderError> {
    Ok(Some(match part {
        Part::Text(text) => ContentOut::Known(KnownContent::InputText { text: &text.text }),
        Part::Image(image) => ContentOut::Known(KnownContent::InputImage {
            image_url: UrlOut(&image.source),
            detail: image.detail.as_deref().unwrap_or("auto"),
        }),
        Part::Opaque(opaque) if opaque.dialect == Dialect::Responses => ContentOut::Raw(opaque.raw),
        Part::Opaque(opaque) => return Err(untranslatable(opaque)),
        other => {
            dropped.note(format!("{} content", part_kind(other)));
            return Ok(None);
        }
    }))
}

fn user_content<'r>(
    parts: &'r [Part<'r>],
    dropped: &mut Dropped,
) -> Result<Vec<ContentOut<'r>>, ProviderError> {
    let mut content = Vec::with_capacity(parts.len());
    for part in parts {
        content.extend(content_part(part, dropped)?);
    }
    Ok(content)
}

/// A tool result's output: a string when it is text alone, content parts otherwise.
fn tool_output<'r>(
    parts: &'r [Part<'r>],
    dropped: &mut Dropped,
) -> Result<OutputOut<'r>, ProviderError> {
    if parts.iter().all(|p| matches!(p, Part::Text(_))) {
        let mut texts = parts.iter().filter_map(|p| match p {
            Part::Text(text) => Some(text.text.as_ref()),
            _ => None,
        });
        return Ok(OutputOut::Text(match (texts.next(), texts.next()) {
            (None, _) => Cow::Borrowed(""),
            (Some(only), None) => Cow::Borrowed(only),
            (Some(first), Some(second)) => {
                let mut joined = format!("{first}\n{second}");
                for text in texts {
                    joined.push('\n');
                    joined.push_str(text);
                }
                Cow::Owned(joined)
            }
        }));
    }
    user_content(parts, dropped).map(OutputOut::Parts)
}

/// Another dialect's reasoning as Responses `reasoning.effort`.
fn reasoning(reasoning: Option<Reasoning>, dropped: &mut Dropped) -> Option<ReasoningOut> {
    let effort = match reasoning?.level() {
        None => {
            dropped.note("thinking (adaptive: the model's default)");
            return None;
        }
        Some(Effort::Off) => {
            dropped.note("thinking: disabled");
            return None;
        }
        Some(Effort::Minimal) => "minimal",
        Some(Effort::Low) => "low",
        Some(Effort::Medium) => "medium",
        Some(Effort::High | Effort::Max) => "high",
    };
    Some(ReasoningOut { effort })
}

fn text_format<'r>(
    format: Option<&'r ResponseFormat<'r>>,
    dropped: &mut Dropped,
) -> Option<TextOut<'r>> {
    let format = match format? {
        ResponseFormat::Text => FormatOut::Text,
        ResponseFormat::JsonObject => FormatOut::JsonObject,
        ResponseFormat::JsonSchema { schema: None, .. } => {
            dropped.note("response_format (a JSON schema without `schema`)");
            FormatOut::JsonObject
        }
        ResponseFormat::JsonSchema { name, description, schema: Some(schema), strict } => {
            FormatOut::JsonSchema {
                name,
                description: description.as_deref(),
                schema: *schema,
                strict: *strict,
            }
        }
    };
    Some(TextOut { format })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_for(request: &ChatRequest<'_>, dialect: Dialect) -> serde_json::Value {
        let body = dialect.encode_request(request, &EncodeOptions::new("up", 1024)).unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    #[test]
    fn a_string_input_is_one_user_message_and_instructions_are_the_system_prompt() {
        let request =
            parse_request(br#"{"model":"m","instructions":"be brief","input":"hi"}"#).unwrap();
        assert_eq!(request.system, [Text::new("be brief")]);
        assert_eq!(
            request.messages,
            [Message { role: Role::User, content: vec![Part::Text(Text::new("hi"))] }]
        );
    }

    #[test]
    fn calls_and_reasoning_join_one_assistant_turn_and_outputs_one_tool_turn() {
        let body = br#"{"model":"m","input":[
            {"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},
            {"role":"user","content":"go"},
            {"type":"reasoning","summary":[],"encrypted_content":"gAAA"},
            {"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"},
            {"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin"},
            {"type":"function_call_output","call_id":"c1","output":"ok"},
            {"type":"custom_tool_call_output","call_id":"c2","output":"done"},
            {"type":"message","role":"developer","content":"later"}]}"#;
        let request = parse_request(body).unwrap();
        assert_eq!(request.system, [Text::new("rules")]);
        let shape: Vec<(Role, Vec<&str>)> = request
            .messages
            .iter()
            .map(|m| (m.role, m.content.iter().map(part_kind).collect()))
            .collect();
        assert_eq!(
            shape,
            [
                (Role::User, vec!["text"]),
                (Role::Assistant, vec!["reasoning", "tool_use", "tool_use"]),
                (Role::Tool, vec!["tool_result", "tool_result"]),
                (Role::System, vec!["text"]),
            ]
        );
        let Part::ToolUse(patch) = &request.messages[1].content[2] else { panic!() };
        assert_eq!(patch.arguments, r#"{"input":"*** Begin"}"#);
    }

    #[test]
    fn a_custom_tool_is_one_string_argument_elsewhere_and_a_custom_tool_again_for_responses() {
        let body = br#"{"model":"m","tools":[
            {"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},
            {"type":"web_search"}],
            "input":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"p\n"},
                {"type":"custom_tool_call_output","call_id":"c","output":"ok"}]}"#;
        let request = parse_request(body).unwrap();
        let chat = encode_for(&request, Dialect::OpenAi);
        assert_eq!(
            chat["tools"],
            serde_json::json!([{"type": "function", "function": {"name": "apply_patch",
                "description": "Edit files.\n\nPass the whole input as raw text in the string argument `input`.",
                "parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}}}])
        );
        assert_eq!(
            chat["messages"][0]["tool_calls"][0]["function"]["arguments"],
            r#"{"input":"p\n"}"#
        );
        let mut foreign = request.clone();
        foreign.vendor.origin = None;
        let responses = encode_for(&foreign, Dialect::Responses);
        assert_eq!(
            responses["input"],
            serde_json::json!([
                {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "p\n"},
                {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"}])
        );
        assert_eq!(responses["tools"][0]["format"]["syntax"], "lark");
        assert_eq!(responses["tools"][1], serde_json::json!({"type": "web_search"}));
    }

    #[test]
    fn built_in_tools_are_dropped_for_other_dialects_while_anthropic_server_tools_are_refused() {
        let request = parse_request(
            br#"{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"local_shell"}]}"#,
        )
        .unwrap();
        for dialect in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini] {
            let mut dropped = Dropped::default();
            dialect
                .encode_request_noting(&request, &EncodeOptions::new("up", 1024), &mut dropped)
                .unwrap();
            assert!(
                dropped.names().iter().any(|n| n == "web_search tool")
                    && dropped.names().iter().any(|n| n == "local_shell tool"),
                "{dialect}: {:?}",
                dropped.names()
            );
        }
        let anthropic = crate::anthropic::parse_request(
            br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],
                "tools":[{"type":"web_search_20250305","name":"web_search"}]}"#,
        )
        .unwrap();
        assert!(matches!(
            Dialect::Responses.encode_request(&anthropic, &EncodeOptions::new("up", 1024)),
            Err(ProviderError::Untranslatable { .. })
        ));
    }

    #[test]
    fn effort_and_json_schema_output_are_translated_for_a_responses_upstream() {
        let chat = crate::openai::parse_request(
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low",
                "response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}},
                "tools":[{"type":"function","function":{"name":"f"}}]}"#,
        )
        .unwrap();
        let body = encode_for(&chat, Dialect::Responses);
        assert_eq!(body["reasoning"], serde_json::json!({"effort": "low"}));
        assert_eq!(
            body["text"],
            serde_json::json!({"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": true}})
        );
        assert_eq!(body["store"], false);
        assert_eq!(body["tools"][0]["strict"], false);
        assert_eq!(
            body["input"][0]["content"][0],
            serde_json::json!({"type": "input_text", "text": "hi"})
        );
    }

    #[test]
    fn signed_thinking_carried_by_a_reasoning_item_goes_back_to_anthropic_signed() {
        let encrypted = super::super::wrap_thinking("hmm", "sig");
        let body = format!(
            r#"{{"model":"m","input":[{{"role":"user","content":"q"}},
                {{"type":"reasoning","summary":[{{"type":"summary_text","text":"hmm"}}],"encrypted_content":"{encrypted}"}},
                {{"type":"function_call","call_id":"c","name":"f","arguments":"{{}}"}},
                {{"type":"function_call_output","call_id":"c","output":"1"}}],
                "reasoning":{{"effort":"high"}}}}"#
        );
        let request = parse_request(body.as_bytes()).unwrap();
        let anthropic = encode_for(&request, Dialect::Anthropic);
        assert_eq!(
            anthropic["messages"][1]["content"][0],
            serde_json::json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})
        );
    }

    #[test]
    fn thinking_is_turned_off_for_anthropic_when_the_tool_turn_carries_no_signed_thinking() {
        let request = parse_request(
            br#"{"model":"m","reasoning":{"effort":"high"},"input":[{"role":"user","content":"q"},
                {"type":"reasoning","summary":[],"encrypted_content":"gAAAA"},
                {"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
                {"type":"function_call_output","call_id":"c","output":"1"}]}"#,
        )
        .unwrap();
        let mut dropped = Dropped::default();
        let body = Dialect::Anthropic
            .encode_request_noting(&request, &EncodeOptions::new("up", 32000), &mut dropped)
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body.get("thinking"), None);
        assert!(
            dropped.names().iter().any(|n| n.starts_with("thinking (the last tool-use turn")),
            "{:?}",
            dropped.names()
        );
    }

    #[test]
    fn a_reasoning_item_of_openai_is_kept_for_responses_and_named_as_dropped_elsewhere() {
        let request = parse_request(
            br#"{"model":"m","input":[{"role":"user","content":"q"},
                {"type":"reasoning","summary":[],"encrypted_content":"gAAAA"},
                {"role":"assistant","content":[{"type":"output_text","text":"a"}]}]}"#,
        )
        .unwrap();
        let responses = encode_for(&request, Dialect::Responses);
        assert_eq!(responses["input"][1]["encrypted_content"], "gAAAA");
        let mut dropped = Dropped::default();
        Dialect::OpenAi
            .encode_request_noting(&request, &EncodeOptions::new("up", 1024), &mut dropped)
            .unwrap();
        assert!(dropped.names().iter().any(|n| n == "reasoning content"), "{:?}", dropped.names());
    }

    #[test]
    fn codex_s_compaction_trigger_passes_to_responses_and_is_refused_by_every_other_dialect() {
        let request = parse_request(
            br#"{"model":"m","input":[{"role":"user","content":"long story"},
                {"role":"assistant","content":[{"type":"output_text","text":"ok"}]},
                {"type":"compaction_trigger"}]}"#,
        )
        .unwrap();
        assert_eq!(
            encode_for(&request, Dialect::Responses)["input"][2]["type"],
            "compaction_trigger"
        );
        for dialect in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini] {
            let refused =
                dialect.encode_request(&request, &EncodeOptions::new("up", 1024)).unwrap_err();
            assert!(
                matches!(&refused, ProviderError::Untranslatable { message, .. } if message.contains("compaction_trigger")),
                "{dialect}: {refused}"
            );
        }
    }

    /// Codex's shape: MCP tools in a `namespace`, `tool_search` beside them, and a call of a
    /// namespaced tool in the history (`codex-rs/tools/src/responses_api.rs`).
    const CODEX_NAMESPACE: &[u8] = br#"{"model":"m","tools":[
        {"type":"namespace","name":"mcp__docs__","description":"Tools in the mcp__docs__ namespace.",
            "tools":[{"type":"function","name":"search","description":"Search the docs.","strict":false,
                "parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]},
        {"type":"tool_search","execution":"client","description":"Find tools.","parameters":{"type":"object"}}],
        "input":[{"role":"user","content":"look it up"},
            {"type":"function_call","call_id":"c1","name":"search","namespace":"mcp__docs__","arguments":"{\"q\":\"x\"}"},
            {"type":"function_call_output","call_id":"c1","output":"found"}]}"#;

    #[test]
    fn a_namespace_is_flattened_for_other_dialects_and_tool_search_is_dropped_and_named() {
        let request = parse_request(CODEX_NAMESPACE).unwrap();
        for dialect in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini] {
            let mut dropped = Dropped::default();
            dialect
                .encode_request_noting(&request, &EncodeOptions::new("up", 1024), &mut dropped)
                .unwrap();
            let names = dropped.names();
            assert!(names.iter().any(|n| n == "tool_search tool"), "{dialect}: {names:?}");
            assert!(!names.iter().any(|n| n.contains("namespace")), "{dialect}: {names:?}");
        }
        let chat = encode_for(&request, Dialect::OpenAi);
        assert_eq!(
            chat["tools"],
            serde_json::json!([{"type": "function", "function": {"name": "mcp__docs__search",
                "description": "Search the docs.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                "strict": false}}])
        );
        assert_eq!(chat["messages"][1]["tool_calls"][0]["function"]["name"], "mcp__docs__search");
        let anthropic = encode_for(&request, Dialect::Anthropic);
        assert_eq!(anthropic["tools"][0]["name"], "mcp__docs__search");
        assert_eq!(anthropic["messages"][1]["content"][0]["name"], "mcp__docs__search");
    }

    #[test]
    fn a_namespace_goes_back_to_a_responses_upstream_as_a_namespace() {
        let mut request = parse_request(CODEX_NAMESPACE).unwrap();
        request.vendor.origin = None;
        let body = encode_for(&request, Dialect::Responses);
        assert_eq!(
            body["tools"][0],
            serde_json::json!({"type": "namespace", "name": "mcp__docs__",
                "description": "Tools in the mcp__docs__ namespace.",
                "tools": [{"type": "function", "name": "search", "description": "Search the docs.",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                    "strict": false}]})
        );
        assert_eq!(
            body["input"][1],
            serde_json::json!({"type": "function_call", "call_id": "c1", "name": "search",
                "namespace": "mcp__docs__", "arguments": "{\"q\":\"x\"}"})
        );
    }

    #[test]
    fn a_call_of_a_flattened_tool_reaches_codex_as_the_namespaced_call_it_expects() {
        use crate::chat::{ChatResponse, StopReason};
        use crate::dialect::{ClientContext, ResponseMeta};
        let request = parse_request(CODEX_NAMESPACE).unwrap();
        let answer = ChatResponse {
            id: "chatcmpl-1".into(),
            content: vec![Part::ToolUse(ToolUse {
                id: "call_2".into(),
                name: "mcp__docs__search".into(),
                arguments: r#"{"q":"y"}"#.into(),
                cache_control: None,
            })],
            stop_reason: Some(StopReason::ToolUse),
            ..ChatResponse::default()
        };
        let meta = ResponseMeta { model: "oa/gpt-4o", created: 1 };
        let body = super::super::encode_response(&answer, &meta, &ClientContext::of(&request));
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["output"][0]["type"], "function_call");
        assert_eq!(body["output"][0]["name"], "search");
        assert_eq!(body["output"][0]["namespace"], "mcp__docs__");

        // Streamed, the item Codex takes from `response.output_item.done` says the same.
        let mut encoder = super::super::StreamEncoder::new(&meta, ClientContext::of(&request));
        let mut out = Vec::new();
        for event in [
            crate::chat::StreamEvent::ToolCallStart {
                index: 0,
                id: "call_2".into(),
                name: "mcp__docs__search".into(),
            },
            crate::chat::StreamEvent::ToolCallDelta { index: 0, arguments: "{}".into() },
        ] {
            encoder.encode(&event, &mut out);
        }
        encoder.finish(&mut out);
        let text = String::from_utf8(out).unwrap();
        let done = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .find(|e| e["type"] == "response.output_item.done")
            .unwrap();
        assert_eq!(done["item"]["name"], "search", "{text}");
        assert_eq!(done["item"]["namespace"], "mcp__docs__", "{text}");
    }

    #[test]
    fn an_unknown_role_is_refused_naming_the_item() {
        let error = parse_request(br#"{"model":"m","input":[{"role":"robot","content":"x"}]}"#)
            .unwrap_err();
        assert!(error.to_string().starts_with("input[0]: unknown role `robot`"), "{error}");
    }
}
