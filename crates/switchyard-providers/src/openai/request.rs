//! OpenAI requests: parsed from clients, encoded for upstreams.

use std::borrow::Cow;

use serde::de::{self, Deserializer, MapAccess};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::chat::{
    ChatRequest, Effort, Image, ImageSource, MaxTokensField, Message, Opaque, Part, RawJson,
    Reasoning, ResponseFormat, Role, Text, Tool, ToolChoice, ToolFormat, ToolResult, ToolUse,
    part_kind,
};
use crate::dialect::{Dialect, Dropped, EncodeOptions};
use crate::error::ProviderError;
use crate::json::{self, Depth, Str, TextOr};

/// Parses a client's Chat Completions body. Unknown top-level fields are kept for OpenAI
/// upstreams; `n` other than 1 is refused because only one answer is ever translated back.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest<'_>, ProviderError> {
    parse_request_to(body, Depth::Whole)
}

/// [`parse_request`] to `depth`.
pub fn parse_request_to(body: &[u8], depth: Depth) -> Result<ChatRequest<'_>, ProviderError> {
    json::parse_request::<Fields>(body, depth)
}

struct Fields;

impl json::RequestFields for Fields {
    const EXPECTING: &'static str = "a chat completion request object";

    fn read<'de, A: MapAccess<'de>>(
        mut map: A,
        depth: Depth,
    ) -> Result<ChatRequest<'de>, A::Error> {
        let mut request = ChatRequest::default();
        request.vendor.origin = Some(Dialect::OpenAi);
        let mut model = None;
        let mut messages: Option<Vec<MessageIn<'de>>> = None;
        let mut max_tokens = None;
        let mut max_completion_tokens = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "model" => model = Some(map.next_value::<Str<'de>>()?.into_cow()),
                "messages" | "tools" if depth == Depth::Routing => json::skip(&mut map)?,
                "messages" => messages = Some(map.next_value()?),
                "tools" => {
                    let tools: Option<Vec<ToolIn<'de>>> = map.next_value()?;
                    request.tools = tools.unwrap_or_default().into_iter().map(|t| t.0).collect();
                }
                "tool_choice" => {
                    request.tool_choice =
                        map.next_value::<Option<ToolChoiceIn<'de>>>()?.map(|c| c.0);
                }
                "parallel_tool_calls" => request.parallel_tool_calls = map.next_value()?,
                "max_tokens" => max_tokens = map.next_value()?,
                "max_completion_tokens" => max_completion_tokens = map.next_value()?,
                "temperature" => request.sampling.temperature = map.next_value()?,
                "top_p" => request.sampling.top_p = map.next_value()?,
                "stop" => {
                    request.sampling.stop =
                        match map.next_value::<Option<TextOr<'de, Str<'de>>>>()? {
                            None => Vec::new(),
                            Some(TextOr::Text(stop)) => vec![stop],
                            Some(TextOr::Items(stops)) => {
                                stops.into_iter().map(Str::into_cow).collect()
                            }
                        };
                }
                "stream" => request.stream = map.next_value::<Option<bool>>()?.unwrap_or(false),
                "stream_options" => {
                    let options: Option<StreamOptionsIn> = map.next_value()?;
                    request.stream_usage = options.and_then(|o| o.include_usage).unwrap_or(false);
                }
                "n" => {
                    map.next_value::<OneChoice>()?;
                }
                // Kept verbatim for OpenAI upstreams, and read for everyone else's.
                "reasoning_effort" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    request.reasoning = serde_json::from_str::<Str<'_>>(raw.get())
                        .ok()
                        .and_then(|word| Effort::parse(&word.0))
                        .map(|effort| Reasoning { effort: Some(effort), budget_tokens: None });
                    request.vendor.fields.push((key.0, raw));
                }
                "response_format" => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    request.response_format = chat_response_format(raw);
                    request.vendor.fields.push((key.0, raw));
                }
                _ => request.vendor.fields.push((key.0, map.next_value::<&'de RawValue>()?)),
            }
        }
        request.model = model.ok_or_else(|| de::Error::missing_field("model"))?;
        if let Some(limit) = max_completion_tokens {
            request.sampling.max_tokens = Some(limit);
            request.sampling.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        } else {
            request.sampling.max_tokens = max_tokens;
        }
        if depth == Depth::Routing {
            return Ok(request);
        }
        for message in messages.ok_or_else(|| de::Error::missing_field("messages"))? {
            match message {
                // Leading system messages are the system prompt; later ones stay in place.
                MessageIn::System(blocks) if request.messages.is_empty() => {
                    request.system.extend(blocks);
                }
                MessageIn::System(blocks) => request.messages.push(Message {
                    role: Role::System,
                    content: blocks.into_iter().map(Part::Text).collect(),
                }),
                MessageIn::Message(message) => request.messages.push(message),
            }
        }
        Ok(request)
    }
}

/// `response_format`: `{"type": "json_schema", "json_schema": {"name", "schema", "strict",
/// "description"}}`, `{"type": "json_object"}` or `{"type": "text"}`.
fn chat_response_format(raw: &RawValue) -> Option<ResponseFormat<'_>> {
    #[derive(Deserialize)]
    struct Wire<'a> {
        #[serde(rename = "type", borrow)]
        kind: Str<'a>,
        #[serde(borrow, default)]
        json_schema: Option<SchemaWire<'a>>,
    }
    #[derive(Deserialize)]
    struct SchemaWire<'a> {
        #[serde(borrow, default)]
        name: Option<Str<'a>>,
        #[serde(borrow, default)]
        description: Option<Str<'a>>,
        #[serde(borrow, default)]
        schema: Option<&'a RawValue>,
        #[serde(default)]
        strict: Option<bool>,
    }
    let wire: Wire<'_> = serde_json::from_str::<Option<Wire<'_>>>(raw.get()).ok()??;
    Some(match (wire.kind.0.as_ref(), wire.json_schema) {
        ("text", _) => ResponseFormat::Text,
        ("json_object", _) => ResponseFormat::JsonObject,
        ("json_schema", Some(schema)) => ResponseFormat::JsonSchema {
            name: schema.name.map_or(Cow::Borrowed("response"), Str::into_cow),
            description: schema.description.map(Str::into_cow),
            schema: schema.schema.map(RawJson),
            strict: schema.strict,
        },
        _ => return None,
    })
}

#[derive(Deserialize)]
struct StreamOptionsIn {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// `n`: only absent, null or 1 is accepted.
struct OneChoice;

impl<'de> Deserialize<'de> for OneChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Option::<u64>::deserialize(deserializer)? {
            None | Some(1) => Ok(Self),
            Some(_) => Err(de::Error::custom("only one choice (n = 1) is supported")),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RoleIn {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Deserialize)]
struct MessageWire<'a> {
    role: RoleIn,
    #[serde(borrow, default)]
    content: Option<TextOr<'a, PartIn<'a>>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallWire<'a>>>,
    #[serde(borrow, default)]
    tool_call_id: Option<Str<'a>>,
}

/// One element of `messages`: system prompts are hoisted out of the conversation.
enum MessageIn<'a> {
    System(Vec<Text<'a>>),
    Message(Message<'a>),
}

impl<'de: 'a, 'a> Deserialize<'de> for MessageIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = MessageWire::deserialize(deserializer)?;
        let parts = match wire.content {
            None => Vec::new(),
            Some(TextOr::Text(text)) => vec![Part::Text(Text::new(text))],
            Some(TextOr::Items(parts)) => parts.into_iter().map(|p| p.0).collect(),
        };
        let only_text = |parts: Vec<Part<'de>>, role: &str| {
            parts
                .into_iter()
                .map(|part| match part {
                    Part::Text(text) => Ok(text),
                    _ => Err(de::Error::custom(format!("a {role} message may only contain text"))),
                })
                .collect::<Result<Vec<_>, D::Error>>()
        };
        Ok(match wire.role {
            RoleIn::System | RoleIn::Developer => Self::System(only_text(parts, "system")?),
            RoleIn::User => Self::Message(Message { role: Role::User, content: parts }),
            RoleIn::Assistant => {
                let mut content = parts;
                for call in wire.tool_calls.unwrap_or_default() {
                    content.push(Part::ToolUse(ToolUse {
                        id: call.id.into_cow(),
                        name: call.function.name.into_cow(),
                        arguments: call
                            .function
                            .arguments
                            .map_or(Cow::Borrowed("{}"), Str::into_cow),
                        cache_control: None,
                    }));
                }
                Self::Message(Message { role: Role::Assistant, content })
            }
            RoleIn::Tool => {
                let id = wire
                    .tool_call_id
                    .ok_or_else(|| de::Error::custom("a tool message needs `tool_call_id`"))?;
                let content = only_text(parts, "tool")?.into_iter().map(Part::Text).collect();
                Self::Message(Message {
                    role: Role::Tool,
                    content: vec![Part::ToolResult(ToolResult {
                        tool_use_id: id.into_cow(),
                        content,
                        is_error: false,
                        cache_control: None,
                    })],
                })
            }
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum PartType {
    Text,
    ImageUrl,
    /// An assistant's refusal in history; it is text the model wrote.
    Refusal,
}

#[derive(Deserialize)]
struct PartWire<'a> {
    #[serde(rename = "type")]
    kind: PartType,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    refusal: Option<Str<'a>>,
    #[serde(borrow, default)]
    image_url: Option<ImageUrlWire<'a>>,
    /// The common convention of OpenAI-format clients that reach Anthropic models (`OpenRouter`'s,
    /// `LiteLLM`'s): Anthropic's breakpoint on a content part, kept for an Anthropic target.
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ImageUrlWire<'a> {
    Object {
        #[serde(borrow)]
        url: Str<'a>,
        #[serde(borrow, default)]
        detail: Option<Str<'a>>,
    },
    Plain(#[serde(borrow)] Str<'a>),
}

struct PartIn<'a>(Part<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for PartIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = PartWire::deserialize(deserializer)?;
        let cache_control = wire.cache_control.map(RawJson);
        let part = match wire.kind {
            PartType::Text => Part::Text(Text {
                text: wire.text.ok_or_else(|| de::Error::missing_field("text"))?.into_cow(),
                cache_control,
            }),
            PartType::Refusal => Part::Text(Text::new(
                wire.refusal.ok_or_else(|| de::Error::missing_field("refusal"))?.into_cow(),
            )),
            PartType::ImageUrl => {
                let (url, detail) = match wire.image_url {
                    Some(ImageUrlWire::Object { url, detail }) => (url, detail),
                    Some(ImageUrlWire::Plain(url)) => (url, None),
                    None => return Err(de::Error::missing_field("image_url")),
                };
                Part::Image(Image {
                    source: image_source(url.into_cow()).map_err(de::Error::custom)?,
                    detail: detail.map(Str::into_cow),
                    cache_control,
                })
            }
        };
        Ok(Self(part))
    }
}

/// An image URL, with `data:` URLs split into media type and base64 payload (borrowed when
/// the URL was).
pub(crate) fn image_source(url: Cow<'_, str>) -> Result<ImageSource<'_>, &'static str> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(ImageSource::Url(url));
    };
    let (header, _) = rest.split_once(',').ok_or("a data URL needs a `,`")?;
    let media_type = header.strip_suffix(";base64").ok_or("only base64 data URLs are supported")?;
    let (media_start, data_start) = ("data:".len(), "data:".len() + header.len() + 1);
    let media_end = media_start + media_type.len();
    Ok(match url {
        Cow::Borrowed(url) => ImageSource::Base64 {
            media_type: Cow::Borrowed(&url[media_start..media_end]),
            data: Cow::Borrowed(&url[data_start..]),
        },
        Cow::Owned(mut url) => {
            let media_type = url[media_start..media_end].to_owned();
            url.drain(..data_start);
            ImageSource::Base64 { media_type: Cow::Owned(media_type), data: Cow::Owned(url) }
        }
    })
}

#[derive(Deserialize)]
struct ToolCallWire<'a> {
    #[serde(borrow)]
    id: Str<'a>,
    #[serde(borrow)]
    function: FunctionCallWire<'a>,
}

#[derive(Deserialize)]
struct FunctionCallWire<'a> {
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    arguments: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct ToolWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    function: Option<FunctionWire<'a>>,
}

#[derive(Deserialize)]
struct FunctionWire<'a> {
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    description: Option<Str<'a>>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(default)]
    strict: Option<bool>,
}

/// A tool definition; non-function tools (OpenAI's built-in ones) are kept verbatim.
struct ToolIn<'a>(Tool<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ToolIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let wire: ToolWire<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        if wire.kind.0 != "function" {
            return Ok(Self(Tool {
                name: wire.kind.0.clone(),
                description: None,
                parameters: None,
                strict: None,
                cache_control: None,
                native: Some(Opaque {
                    dialect: Dialect::OpenAi,
                    kind: wire.kind.0,
                    raw: RawJson(raw),
                }),
                format: ToolFormat::Function,
                namespace: None,
            }));
        }
        let function = wire.function.ok_or_else(|| de::Error::missing_field("function"))?;
        Ok(Self(Tool {
            name: function.name.into_cow(),
            description: function.description.map(Str::into_cow),
            parameters: function.parameters.map(RawJson),
            strict: function.strict,
            cache_control: None,
            native: None,
            format: ToolFormat::Function,
            namespace: None,
        }))
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolChoiceWire<'a> {
    Mode(#[serde(borrow)] Str<'a>),
    Named {
        #[serde(borrow)]
        function: NamedFunction<'a>,
    },
}

#[derive(Deserialize)]
struct NamedFunction<'a> {
    #[serde(borrow)]
    name: Str<'a>,
}

struct ToolChoiceIn<'a>(ToolChoice<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ToolChoiceIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let choice = match ToolChoiceWire::deserialize(deserializer).map_err(|_| {
            de::Error::custom(
                "expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
            )
        })? {
            ToolChoiceWire::Named { function } => ToolChoice::Tool(function.name.into_cow()),
            ToolChoiceWire::Mode(mode) => match mode.0.as_ref() {
                "auto" => ToolChoice::Auto,
                "none" => ToolChoice::None,
                "required" => ToolChoice::Required,
                other => {
                    return Err(de::Error::unknown_variant(other, &["auto", "none", "required"]));
                }
            },
        };
        Ok(Self(choice))
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding for an upstream.

#[derive(Serialize)]
struct RequestOut<'r> {
    model: &'r str,
    messages: Vec<MessageOut<'r>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoiceOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'r [Cow<'r, str>],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptionsOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormatOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'r str>,
    #[serde(flatten)]
    vendor: VendorOut<'r>,
}

#[derive(Serialize)]
struct StreamOptionsOut {
    include_usage: bool,
}

/// Vendor fields written as further top-level members.
struct VendorOut<'r>(&'r [(Cow<'r, str>, &'r RawValue)]);

impl Serialize for VendorOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, value)| (key, value)))
    }
}

#[derive(Serialize)]
struct MessageOut<'r> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<ContentOut<'r>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCallOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'r str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ContentOut<'r> {
    Text(Cow<'r, str>),
    Parts(Vec<PartOut<'r>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum PartOut<'r> {
    Text { text: &'r str },
    ImageUrl { image_url: ImageUrlOut<'r> },
}

#[derive(Serialize)]
struct ImageUrlOut<'r> {
    url: UrlOut<'r>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'r str>,
}

/// An image URL; base64 images are written as a `data:` URL straight into the output, with no
/// intermediate copy of what may be megabytes.
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
pub(super) struct ToolCallOut<'r> {
    pub(super) id: &'r str,
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: FunctionCallOut<'r>,
}

#[derive(Serialize)]
pub(super) struct FunctionCallOut<'r> {
    pub(super) name: &'r str,
    pub(super) arguments: &'r str,
}

impl<'r> ToolCallOut<'r> {
    pub(super) fn new(call: &'r ToolUse<'_>) -> Self {
        Self {
            id: &call.id,
            kind: "function",
            function: FunctionCallOut { name: &call.name, arguments: &call.arguments },
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolOut<'r> {
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: FunctionOut<'r>,
    },
    Native(RawJson<'r>),
}

#[derive(Serialize)]
struct FunctionOut<'r> {
    name: &'r str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Cow<'r, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<RawJson<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolChoiceOut<'r> {
    Mode(&'static str),
    Named {
        #[serde(rename = "type")]
        kind: &'static str,
        function: NamedFunctionOut<'r>,
    },
}

#[derive(Serialize)]
struct NamedFunctionOut<'r> {
    name: &'r str,
}

/// The fields other dialects' parsers read into [`ChatRequest::reasoning`] and
/// [`ChatRequest::response_format`].
const REASONING_FIELDS: &[&str] =
    &["thinking", "output_config", "reasoning", "text", "tool_choice"];

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormatOut<'r> {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaOut<'r> },
}

#[derive(Serialize)]
struct JsonSchemaOut<'r> {
    name: &'r str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<RawJson<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

fn response_format<'r>(format: &'r ResponseFormat<'r>) -> ResponseFormatOut<'r> {
    match format {
        ResponseFormat::Text => ResponseFormatOut::Text,
        ResponseFormat::JsonObject => ResponseFormatOut::JsonObject,
        ResponseFormat::JsonSchema { name, description, schema, strict } => {
            ResponseFormatOut::JsonSchema {
                json_schema: JsonSchemaOut {
                    name,
                    description: description.as_deref(),
                    schema: *schema,
                    strict: *strict,
                },
            }
        }
    }
}

/// The upstream body for `request`. Thinking is dropped (OpenAI-compatible servers take no
/// reasoning back, and DeepSeek rejects it); content blocks only another dialect understands
/// are refused in user turns and dropped from assistant turns, where they were the model's
/// own server-side work.
pub fn encode_request(
    request: &ChatRequest<'_>,
    options: &EncodeOptions<'_>,
    dropped: &mut Dropped,
) -> Result<Vec<u8>, ProviderError> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    // Mid-conversation system messages join the leading one unless the host takes them in
    // place; the leading one is written when the whole system prompt is known.
    let mut system: Vec<&Text<'_>> = request.system.iter().collect();
    for message in &request.messages {
        match message.role {
            Role::User => messages.push(user_message(&message.content)?),
            Role::Assistant => messages.push(assistant_message(&message.content, dropped)),
            Role::Tool => tool_messages(&message.content, &mut messages)?,
            Role::System => {
                let texts = message.content.iter().filter_map(|part| match part {
                    Part::Text(text) => Some(text),
                    _ => None,
                });
                if options.system_in_place {
                    messages.push(MessageOut {
                        role: "system",
                        content: Some(ContentOut::Text(join_text(texts, "\n\n"))),
                        tool_calls: Vec::new(),
                        tool_call_id: None,
                    });
                } else {
                    system.extend(texts);
                }
            }
        }
    }
    if !system.is_empty() {
        messages.insert(
            0,
            MessageOut {
                role: "system",
                content: Some(ContentOut::Text(join_text(system.into_iter(), "\n\n"))),
                tool_calls: Vec::new(),
                tool_call_id: None,
            },
        );
    }

    let mut tools: Vec<ToolOut<'_>> = Vec::with_capacity(request.tools.len());
    for tool in &request.tools {
        tools.push(match &tool.native {
            Some(native) if native.dialect == Dialect::OpenAi => ToolOut::Native(native.raw),
            // A server tool OpenAI does not run would change what the answer can be; a
            // Responses built-in is dropped.
            Some(native) => {
                crate::dialect::foreign_native(native, Dialect::OpenAi, dropped)?;
                continue;
            }
            None => ToolOut::Function {
                kind: "function",
                function: FunctionOut {
                    name: &tool.name,
                    description: tool.function_description(),
                    parameters: tool.function_parameters(),
                    strict: tool.strict,
                },
            },
        });
    }
    let has_tools = !tools.is_empty();
    let tool_choice =
        request.tool_choice.as_ref().filter(|_| has_tools).map(|choice| match choice {
            ToolChoice::Auto => ToolChoiceOut::Mode("auto"),
            ToolChoice::None => ToolChoiceOut::Mode("none"),
            ToolChoice::Required => ToolChoiceOut::Mode("required"),
            ToolChoice::Tool(name) => {
                ToolChoiceOut::Named { kind: "function", function: NamedFunctionOut { name } }
            }
        });

    let own = request.vendor.origin == Some(Dialect::OpenAi);
    let reasoning_effort = if own { None } else { reasoning_effort(request, options, dropped) };
    let response_format =
        if own { None } else { request.response_format.as_ref().map(response_format) };
    if !own && request.uses_cache_control() {
        dropped.note("cache_control");
    }
    if request.previous_response_id.is_some() {
        dropped.note("previous_response_id");
    }
    dropped.vendor_fields(request, Dialect::OpenAi, REASONING_FIELDS);
    let sampling = &request.sampling;
    let completion_field = sampling.max_tokens_field == MaxTokensField::MaxCompletionTokens;
    let prompt_cache_key = options.caching.key_to_send(own, dropped);
    let body = RequestOut {
        model: options.model,
        messages,
        tools,
        tool_choice,
        parallel_tool_calls: request.parallel_tool_calls.filter(|_| has_tools),
        max_tokens: sampling.max_tokens.filter(|_| !completion_field),
        max_completion_tokens: sampling.max_tokens.filter(|_| completion_field),
        temperature: sampling.temperature,
        top_p: sampling.top_p,
        stop: &sampling.stop,
        stream: request.stream,
        stream_options: (request.stream && options.stream_usage)
            .then_some(StreamOptionsOut { include_usage: true }),
        reasoning_effort,
        response_format,
        // A client of this dialect said its own, if any, among its fields.
        prompt_cache_key,
        vendor: VendorOut(request.vendor.for_dialect(Dialect::OpenAi)),
    };
    Ok(serde_json::to_vec(&body).expect("serialising to memory cannot fail"))
}

/// Another dialect's reasoning as OpenAI's `reasoning_effort`. Only a level the client chose
/// is sent: thinking "at the model's discretion" (Anthropic's `adaptive`) is OpenAI's default
/// already, and a model without reasoning refuses the field.
fn reasoning_effort(
    request: &ChatRequest<'_>,
    options: &EncodeOptions<'_>,
    dropped: &mut Dropped,
) -> Option<&'static str> {
    let reasoning = request.reasoning?;
    if !options.reasoning {
        dropped.note("reasoning (the model takes no reasoning parameters)");
        return None;
    }
    let level = reasoning.level();
    match level {
        None => {
            dropped.note("thinking (adaptive: the model's default)");
            None
        }
        Some(Effort::Off) => {
            dropped.note("thinking: disabled");
            None
        }
        Some(Effort::Minimal) => Some("minimal"),
        Some(Effort::Low) => Some("low"),
        Some(Effort::Medium) => Some("medium"),
        Some(Effort::High | Effort::Max) => Some("high"),
    }
}

fn join_text<'r>(
    texts: impl Iterator<Item = &'r Text<'r>> + Clone,
    separator: &str,
) -> Cow<'r, str> {
    let mut iter = texts.clone();
    match (iter.next(), iter.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(&only.text),
        _ => Cow::Owned(texts.map(|t| t.text.as_ref()).collect::<Vec<_>>().join(separator)),
    }
}

fn untranslatable(opaque: &Opaque<'_>) -> ProviderError {
    ProviderError::Untranslatable {
        dialect: Dialect::OpenAi,
        message: format!(
            "`{}` content from {} has no OpenAI equivalent",
            opaque.kind, opaque.dialect
        ),
    }
}

fn user_message<'r>(content: &'r [Part<'r>]) -> Result<MessageOut<'r>, ProviderError> {
    let content = match content {
        [Part::Text(text)] => ContentOut::Text(Cow::Borrowed(&text.text)),
        parts => ContentOut::Parts(
            parts
                .iter()
                .filter_map(|part| match part {
                    Part::Text(text) => Some(Ok(PartOut::Text { text: &text.text })),
                    Part::Image(image) => Some(Ok(image_part(image))),
                    Part::Opaque(opaque) => Some(Err(untranslatable(opaque))),
                    _ => None,
                })
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok(MessageOut {
        role: "user",
        content: Some(content),
        tool_calls: Vec::new(),
        tool_call_id: None,
    })
}

fn image_part<'r>(image: &'r Image<'r>) -> PartOut<'r> {
    PartOut::ImageUrl {
        image_url: ImageUrlOut { url: UrlOut(&image.source), detail: image.detail.as_deref() },
    }
}

fn assistant_message<'r>(content: &'r [Part<'r>], dropped: &mut Dropped) -> MessageOut<'r> {
    for part in content {
        if !matches!(part, Part::Text(_) | Part::ToolUse(_)) {
            dropped.note(format!("{} content", part_kind(part)));
        }
    }
    let texts = content.iter().filter_map(|part| match part {
        Part::Text(text) => Some(text),
        _ => None,
    });
    let tool_calls: Vec<_> = content
        .iter()
        .filter_map(|part| match part {
            Part::ToolUse(call) => Some(ToolCallOut::new(call)),
            _ => None,
        })
        .collect();
    let text = join_text(texts, "");
    // OpenAI wants `content` or `tool_calls`; an empty string keeps a turn that held only
    // thinking valid.
    let content = (!text.is_empty() || tool_calls.is_empty()).then_some(ContentOut::Text(text));
    MessageOut { role: "assistant", content, tool_calls, tool_call_id: None }
}

/// One `tool` message per result. Images cannot go in a tool message, so they follow in a
/// user message of their own.
fn tool_messages<'r>(
    content: &'r [Part<'r>],
    messages: &mut Vec<MessageOut<'r>>,
) -> Result<(), ProviderError> {
    let mut images = Vec::new();
    for part in content {
        let Part::ToolResult(result) = part else { continue };
        let mut texts: Vec<&Text<'_>> = Vec::new();
        for part in &result.content {
            match part {
                Part::Text(text) => texts.push(text),
                Part::Image(image) => images.push(image_part(image)),
                Part::Opaque(opaque) => return Err(untranslatable(opaque)),
                _ => {}
            }
        }
        let content = match texts.as_slice() {
            [] => ContentOut::Text(Cow::Borrowed("")),
            [only] => ContentOut::Text(Cow::Borrowed(&only.text)),
            many => {
                ContentOut::Parts(many.iter().map(|t| PartOut::Text { text: &t.text }).collect())
            }
        };
        messages.push(MessageOut {
            role: "tool",
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: Some(&result.tool_use_id),
        });
    }
    if !images.is_empty() {
        messages.push(MessageOut {
            role: "user",
            content: Some(ContentOut::Parts(images)),
            tool_calls: Vec::new(),
            tool_call_id: None,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescaped_text_and_base64_images_borrow_from_the_body() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":[
            {"type":"text","text":"look"},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}"#;
        let request = parse_request(body).unwrap();
        let [Part::Text(text), Part::Image(image)] = request.messages[0].content.as_slice() else {
            panic!("{:?}", request.messages);
        };
        assert!(matches!(text.text, Cow::Borrowed("look")));
        let ImageSource::Base64 { media_type, data } = &image.source else { panic!() };
        assert!(matches!((media_type, data), (Cow::Borrowed("image/png"), Cow::Borrowed("AAAA"))));
    }

    #[test]
    fn a_data_url_with_escaped_slashes_is_split_all_the_same() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":[
            {"type":"image_url","image_url":"data:image\/png;base64,AA\/BB"}]}]}"#;
        let request = parse_request(body).unwrap();
        let [Part::Image(image)] = request.messages[0].content.as_slice() else { panic!() };
        assert_eq!(
            image.source,
            ImageSource::Base64 { media_type: "image/png".into(), data: "AA/BB".into() }
        );
    }

    #[test]
    fn leading_system_messages_are_the_prompt_and_later_ones_stay_in_place() {
        let body = br#"{"model":"m","messages":[{"role":"system","content":"a"},
            {"role":"developer","content":"b"},{"role":"user","content":"hi"},
            {"role":"developer","content":"c"}]}"#;
        let request = parse_request(body).unwrap();
        let system: Vec<&str> = request.system.iter().map(|t| t.text.as_ref()).collect();
        assert_eq!(system, ["a", "b"]);
        let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::System]);
    }

    #[test]
    fn a_stream_asks_for_usage_unless_the_host_refuses_the_field() {
        let request = parse_request(
            br#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        )
        .unwrap();
        let encode = |stream_usage| {
            let options = EncodeOptions { stream_usage, ..EncodeOptions::new("x", 8) };
            let body = encode_request(&request, &options, &mut Dropped::default()).unwrap();
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()["stream_options"].clone()
        };
        assert_eq!(encode(true), serde_json::json!({"include_usage": true}));
        assert_eq!(encode(false), serde_json::Value::Null);
    }

    #[test]
    fn a_late_system_message_is_kept_in_place_for_openai_and_merged_for_other_hosts() {
        let body = br#"{"model":"m","messages":[{"role":"system","content":"a"},
            {"role":"user","content":"hi"},{"role":"system","content":"b"}]}"#;
        let request = parse_request(body).unwrap();
        let encode = |system_in_place| {
            let options = EncodeOptions { system_in_place, ..EncodeOptions::new("x", 8) };
            let body = encode_request(&request, &options, &mut Dropped::default()).unwrap();
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()["messages"].clone()
        };
        assert_eq!(
            encode(true),
            serde_json::json!([{"role": "system", "content": "a"},
                {"role": "user", "content": "hi"}, {"role": "system", "content": "b"}])
        );
        assert_eq!(
            encode(false),
            serde_json::json!([{"role": "system", "content": "a\n\nb"},
                {"role": "user", "content": "hi"}])
        );
    }

    #[test]
    fn missing_fields_and_wrong_types_are_named() {
        let error = |body: &str| parse_request(body.as_bytes()).unwrap_err().to_string();
        assert_eq!(error(r#"{"messages":[]}"#), "missing field `model`");
        assert_eq!(
            error(r#"{"model":"m","messages":[{"role":"tool","content":"x"}]}"#),
            "messages[0]: a tool message needs `tool_call_id`"
        );
        assert_eq!(
            error(r#"{"model":"m","messages":[],"tool_choice":"sometimes"}"#),
            "tool_choice: unknown variant `sometimes`, expected one of `auto`, `none`, `required`"
        );
        assert_eq!(
            error(
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}"#
            ),
            "messages[0].content[0].type: unknown variant `input_audio`, expected one of `text`, `image_url`, `refusal`"
        );
    }
}
