//! Gemini requests, parsed from clients (Gemini CLI, the `google-genai` SDKs).
//!
//! What the clients send, as read from their sources: `google-gemini/gemini-cli`
//! (`packages/core/src/core/geminiChat.ts`, `turn.ts`: `contents` with `functionCall` /
//! `functionResponse` parts, tool declarations as `parametersJsonSchema`, `thoughtSignature`
//! on the model's parts, a function response's `id` that the model's call may lack) and
//! `googleapis/python-genai` (`google/genai/models.py`: the same body, `parameters` in
//! Gemini's `OpenAPI` subset when a `Schema` object was given).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess};
use serde_json::value::RawValue;

use super::super::Method;
use crate::chat::{
    ChatRequest, Effort, Image, ImageSource, Message, Opaque, Part, RawJson, Reasoning,
    ResponseFormat, Role, Text, Tool, ToolChoice, ToolFormat, ToolResult, ToolUse,
};
use crate::dialect::Dialect;
use crate::error::ProviderError;
use crate::json::{self, Depth, Str};

/// Parses a client's `generateContent` body. The model and whether to stream are in the path
/// (`models/{model}:streamGenerateContent`), so `method` says the one and the router sets the
/// other. `safetySettings`, `cachedContent`, `labels` and the `generationConfig` fields no
/// other dialect has (`topK`, `seed`, `responseModalities`, ...) are kept for Gemini upstreams
/// and named as dropped for the others.
pub fn parse_request(body: &[u8], method: Method) -> Result<ChatRequest<'_>, ProviderError> {
    parse_request_to(body, method, Depth::Whole)
}

/// [`parse_request`] to `depth`.
pub fn parse_request_to(
    body: &[u8],
    method: Method,
    depth: Depth,
) -> Result<ChatRequest<'_>, ProviderError> {
    let mut request = json::parse_request::<Fields>(body, depth)?;
    request.stream = method.streams();
    Ok(request)
}

struct Fields;

impl json::RequestFields for Fields {
    const EXPECTING: &'static str = "a generateContent request object";

    fn read<'de, A: MapAccess<'de>>(
        mut map: A,
        depth: Depth,
    ) -> Result<ChatRequest<'de>, A::Error> {
        let mut request = ChatRequest::default();
        request.vendor.origin = Some(Dialect::Gemini);
        // Every Gemini chunk carries `usageMetadata`.
        request.stream_usage = true;
        let mut contents: Option<Vec<ContentIn<'de>>> = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "contents" | "systemInstruction" | "tools" if depth == Depth::Routing => {
                    json::skip(&mut map)?;
                }
                "contents" => contents = map.next_value()?,
                "systemInstruction" => {
                    if let Some(system) = map.next_value::<Option<SystemIn<'de>>>()? {
                        request.system = system.0;
                    }
                }
                "tools" => {
                    let tools: Option<Vec<ToolsIn<'de>>> = map.next_value()?;
                    request.tools =
                        tools.unwrap_or_default().into_iter().flat_map(|t| t.0).collect();
                }
                "toolConfig" => {
                    if let Some(config) = map.next_value::<Option<ToolConfigIn<'de>>>()? {
                        request.tool_choice = config.choice();
                    }
                }
                "generationConfig" => {
                    if let Some(config) = map.next_value::<Option<GenerationIn<'de>>>()? {
                        config.apply(&mut request).map_err(de::Error::custom)?;
                    }
                }
                // The model is in the path; a body that names it too is read for nothing.
                "model" => {
                    map.next_value::<&'de RawValue>()?;
                }
                _ => request.vendor.fields.push((key.0, map.next_value::<&'de RawValue>()?)),
            }
        }
        if depth == Depth::Routing {
            return Ok(request);
        }
        let contents = contents.ok_or_else(|| de::Error::missing_field("contents"))?;
        request.messages = messages(contents).map_err(de::Error::custom)?;
        Ok(request)
    }
}

/// `systemInstruction`: a `Content` (its role ignored), or a bare string as some SDKs allow.
struct SystemIn<'a>(Vec<Text<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for SystemIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Read raw first: parts are read raw too, which serde's untagged buffering cannot do.
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        if raw.get().starts_with('"') {
            let text: Str<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
            return Ok(Self(vec![Text::new(text.into_cow())]));
        }
        let content: ContentIn<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        Ok(Self(
            content
                .parts
                .into_iter()
                .filter_map(|part| match part {
                    PartIn::Text { text, thought: false, .. } => Some(Text::new(text)),
                    _ => None,
                })
                .collect(),
        ))
    }
}

#[derive(Deserialize)]
struct ContentIn<'a> {
    #[serde(borrow, default)]
    role: Option<Str<'a>>,
    #[serde(borrow, default)]
    parts: Vec<PartIn<'a>>,
}

/// One `Part`, by the field that says what it is.
enum PartIn<'a> {
    Text {
        text: Cow<'a, str>,
        thought: bool,
        /// Gemini's proof of its own reasoning, on any part of a model turn.
        signature: Option<&'a RawValue>,
    },
    InlineData {
        mime_type: Cow<'a, str>,
        data: Cow<'a, str>,
        raw: &'a RawValue,
    },
    FunctionCall {
        id: Option<Cow<'a, str>>,
        name: Cow<'a, str>,
        args: Option<&'a RawValue>,
        signature: Option<&'a RawValue>,
    },
    FunctionResponse {
        id: Option<Cow<'a, str>>,
        name: Cow<'a, str>,
        response: Option<&'a RawValue>,
    },
    /// `fileData`, `executableCode`, `codeExecutionResult`, `videoMetadata` and what comes
    /// next: kept for a Gemini upstream.
    Other {
        kind: Cow<'a, str>,
        raw: &'a RawValue,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartWire<'a> {
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(borrow, default)]
    thought_signature: Option<&'a RawValue>,
    #[serde(borrow, default)]
    inline_data: Option<BlobWire<'a>>,
    #[serde(borrow, default)]
    function_call: Option<CallWire<'a>>,
    #[serde(borrow, default)]
    function_response: Option<CallWire<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlobWire<'a> {
    #[serde(borrow)]
    mime_type: Str<'a>,
    #[serde(borrow)]
    data: Str<'a>,
}

#[derive(Deserialize)]
struct CallWire<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for PartIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let wire: PartWire<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        let signature = wire.thought_signature;
        if let Some(call) = wire.function_call {
            return Ok(Self::FunctionCall {
                id: call.id.map(Str::into_cow),
                name: call.name.into_cow(),
                args: call.args,
                signature,
            });
        }
        if let Some(result) = wire.function_response {
            return Ok(Self::FunctionResponse {
                id: result.id.map(Str::into_cow),
                name: result.name.into_cow(),
                response: result.response,
            });
        }
        if let Some(blob) = wire.inline_data {
            return Ok(Self::InlineData {
                mime_type: blob.mime_type.into_cow(),
                data: blob.data.into_cow(),
                raw,
            });
        }
        if let Some(text) = wire.text {
            return Ok(Self::Text {
                text: text.into_cow(),
                thought: wire.thought == Some(true),
                signature,
            });
        }
        // The part's kind is its one field that is not metadata.
        let fields: BTreeMap<String, &'de RawValue> =
            json::parse_raw(raw).map_err(de::Error::custom)?;
        let kind = fields
            .into_keys()
            .find(|k| !matches!(k.as_str(), "thought" | "thoughtSignature" | "partMetadata"))
            .ok_or_else(|| {
                de::Error::custom(
                    "a part needs one of text, inlineData, fileData, functionCall, functionResponse",
                )
            })?;
        Ok(Self::Other { kind: Cow::Owned(kind), raw })
    }
}

/// Contents as canonical messages. A user turn's `functionResponse` parts become a tool
/// message of their own, in order; each answers the earliest unanswered call of the model
/// turns before it with its `id` or, lacking a match (Gemini's calls often have none, and
/// Gemini CLI then makes one up for the response), with its name.
fn messages(contents: Vec<ContentIn<'_>>) -> Result<Vec<Message<'_>>, String> {
    let mut messages: Vec<Message<'_>> = Vec::with_capacity(contents.len());
    let mut open: Vec<OpenCall<'_>> = Vec::new();
    let mut calls = 0usize;
    for (turn, content) in contents.into_iter().enumerate() {
        let model = match content.role.as_ref().map(|r| r.0.as_ref()) {
            Some("model") => true,
            None | Some("user" | "function" | "tool") => false,
            Some(other) => {
                return Err(format!(
                    "contents[{turn}].role: `{other}` is not a role: use `user` or `model`"
                ));
            }
        };
        for part in content.parts {
            match part {
                PartIn::Text { text, thought, signature } => {
                    if model && thought {
                        push(
                            Role::Assistant,
                            Part::Thinking(crate::chat::Thinking { text, signature: None }),
                            &mut messages,
                        );
                    } else if !thought {
                        let role = if model { Role::Assistant } else { Role::User };
                        push(role, Part::Text(Text::new(text)), &mut messages);
                    }
                    if let Some(raw) = signature.filter(|_| model) {
                        push(Role::Assistant, signature_part(raw), &mut messages);
                    }
                }
                PartIn::InlineData { mime_type, data, raw } => {
                    let role = if model { Role::Assistant } else { Role::User };
                    let part = if mime_type.starts_with("image/") {
                        Part::Image(Image {
                            source: ImageSource::Base64 { media_type: mime_type, data },
                            detail: None,
                            cache_control: None,
                        })
                    } else {
                        opaque(Cow::Borrowed("inlineData"), raw)
                    };
                    push(role, part, &mut messages);
                }
                PartIn::FunctionCall { id, name, args, signature } => {
                    if !model {
                        return Err(format!(
                            "contents[{turn}]: a functionCall belongs in a `model` turn"
                        ));
                    }
                    let canonical = match &id {
                        Some(id) if !id.is_empty() => id.clone(),
                        _ => Cow::Owned(format!("call_{calls}")),
                    };
                    calls += 1;
                    open.push(OpenCall { id: canonical.clone(), own: id, name: name.clone() });
                    push(
                        Role::Assistant,
                        Part::ToolUse(ToolUse {
                            id: canonical,
                            name,
                            arguments: Cow::Borrowed(args.map_or("{}", RawValue::get)),
                            cache_control: None,
                        }),
                        &mut messages,
                    );
                    if let Some(raw) = signature {
                        push(Role::Assistant, signature_part(raw), &mut messages);
                    }
                }
                PartIn::FunctionResponse { id, name, response } => {
                    let Some(tool_use_id) = answered(&mut open, id.as_deref(), &name) else {
                        return Err(format!(
                            "contents[{turn}]: the functionResponse for `{name}` answers no earlier functionCall"
                        ));
                    };
                    let (content, is_error) = result_content(response);
                    push(
                        Role::Tool,
                        Part::ToolResult(ToolResult {
                            tool_use_id,
                            content,
                            is_error,
                            cache_control: None,
                        }),
                        &mut messages,
                    );
                }
                PartIn::Other { kind, raw } => {
                    let role = if model { Role::Assistant } else { Role::User };
                    push(role, opaque(kind, raw), &mut messages);
                }
            }
        }
    }
    Ok(messages)
}

/// A call of the model's not answered yet.
struct OpenCall<'a> {
    /// Its canonical id.
    id: Cow<'a, str>,
    /// The id the client gave it, if any.
    own: Option<Cow<'a, str>>,
    name: Cow<'a, str>,
}

/// The canonical id of the open call a function response answers (by the client's id, else
/// the earliest of that name), no longer open.
fn answered<'a>(
    open: &mut Vec<OpenCall<'a>>,
    id: Option<&str>,
    name: &str,
) -> Option<Cow<'a, str>> {
    let by_id = id.and_then(|id| open.iter().position(|c| c.own.as_deref() == Some(id)));
    let at = by_id.or_else(|| open.iter().position(|c| c.name == name))?;
    Some(open.remove(at).id)
}

/// Appends `part` to the last message when it has `role`, else in a message of its own.
fn push<'a>(role: Role, part: Part<'a>, messages: &mut Vec<Message<'a>>) {
    match messages.last_mut() {
        Some(last) if last.role == role => last.content.push(part),
        _ => messages.push(Message { role, content: vec![part] }),
    }
}

/// A `thoughtSignature`: only a Gemini upstream can check it (passthrough keeps it in place);
/// other encoders drop it and name it (`thoughtSignature content`).
fn signature_part(raw: &RawValue) -> Part<'_> {
    opaque(Cow::Borrowed("thoughtSignature"), raw)
}

fn opaque<'a>(kind: Cow<'a, str>, raw: &'a RawValue) -> Part<'a> {
    Part::Opaque(Opaque { dialect: Dialect::Gemini, kind, raw: RawJson(raw) })
}

/// A function response as a tool result: Gemini CLI's `{"output": "..."}` as its text,
/// `{"error": "..."}` as an error, anything else as its JSON.
fn result_content(response: Option<&RawValue>) -> (Vec<Part<'_>>, bool) {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    enum Said<'a> {
        #[serde(rename = "output")]
        Output(#[serde(borrow)] Str<'a>),
        #[serde(rename = "error")]
        Error(#[serde(borrow)] Str<'a>),
    }
    let Some(raw) = response else { return (Vec::new(), false) };
    match serde_json::from_str::<Said<'_>>(raw.get()) {
        Ok(Said::Output(text)) => (vec![Part::Text(Text::new(text.into_cow()))], false),
        Ok(Said::Error(text)) => (vec![Part::Text(Text::new(text.into_cow()))], true),
        Err(_) => {
            let is_error =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(raw.get())
                    .is_ok_and(|m| m.len() == 1 && m.contains_key("error"));
            (vec![Part::Text(Text::new(raw.get()))], is_error)
        }
    }
}

/// One element of `tools`: its function declarations, or one built-in tool (`googleSearch`,
/// `codeExecution`, `urlContext`, ...), kept for a Gemini upstream and refused elsewhere.
struct ToolsIn<'a>(Vec<Tool<'a>>);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeclarationWire<'a> {
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow, default)]
    description: Option<Str<'a>>,
    #[serde(borrow, default)]
    parameters_json_schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for ToolsIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let fields: BTreeMap<String, &'de RawValue> =
            json::parse_raw(raw).map_err(de::Error::custom)?;
        let mut tools = Vec::new();
        for (kind, value) in fields {
            if kind == "functionDeclarations" {
                let declarations: Vec<DeclarationWire<'de>> = json::parse_raw(value)
                    .map_err(|e| de::Error::custom(format!("functionDeclarations{e}")))?;
                for declaration in declarations {
                    let mut tool = Tool::function(declaration.name.into_cow());
                    tool.description = declaration.description.map(Str::into_cow);
                    tool.parameters =
                        declaration.parameters_json_schema.or(declaration.parameters).map(RawJson);
                    tool.format = ToolFormat::Function;
                    tools.push(tool);
                }
            } else {
                let mut tool = Tool::function(kind.clone());
                let kind = Cow::Owned(kind);
                tool.native = Some(Opaque { dialect: Dialect::Gemini, kind, raw: RawJson(raw) });
                tools.push(tool);
            }
        }
        Ok(Self(tools))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfigIn<'a> {
    #[serde(borrow, default)]
    function_calling_config: Option<CallingConfigWire<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallingConfigWire<'a> {
    #[serde(borrow, default)]
    mode: Option<Str<'a>>,
    #[serde(borrow, default)]
    allowed_function_names: Vec<Str<'a>>,
}

impl<'a> ToolConfigIn<'a> {
    fn choice(self) -> Option<ToolChoice<'a>> {
        let config = self.function_calling_config?;
        match config.mode.as_ref().map(|m| m.0.as_ref()) {
            Some("NONE") => Some(ToolChoice::None),
            Some("ANY") => match <[_; 1]>::try_from(config.allowed_function_names) {
                Ok([only]) => Some(ToolChoice::Tool(only.into_cow())),
                Err(_) => Some(ToolChoice::Required),
            },
            Some("AUTO" | "VALIDATED") => Some(ToolChoice::Auto),
            _ => None,
        }
    }
}

/// `generationConfig`, read for what other dialects can say; the rest is kept by name
/// (`generationConfig.topK`, ...) for the trace.
struct GenerationIn<'a> {
    fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for GenerationIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> de::Visitor<'de> for Fields {
            type Value = GenerationIn<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a generationConfig object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    fields.push((key.into_cow(), map.next_value::<&'de RawValue>()?));
                }
                Ok(GenerationIn { fields })
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfigWire<'a> {
    #[serde(default)]
    thinking_budget: Option<i64>,
    #[serde(borrow, default)]
    thinking_level: Option<Str<'a>>,
}

impl<'a> GenerationIn<'a> {
    fn apply(self, request: &mut ChatRequest<'a>) -> Result<(), String> {
        let at = |name: &str, e: serde_json::Error| {
            format!("generationConfig.{name}: {}", json::message(&e))
        };
        let mut mime = None;
        let mut schema = None;
        for (name, raw) in self.fields {
            let text = raw.get();
            match name.as_ref() {
                "temperature" => {
                    request.sampling.temperature =
                        serde_json::from_str(text).map_err(|e| at(&name, e))?;
                }
                "topP" => {
                    request.sampling.top_p =
                        serde_json::from_str(text).map_err(|e| at(&name, e))?;
                }
                "maxOutputTokens" => {
                    request.sampling.max_tokens =
                        serde_json::from_str(text).map_err(|e| at(&name, e))?;
                }
                "stopSequences" => {
                    let stops: Option<Vec<Str<'a>>> =
                        serde_json::from_str(text).map_err(|e| at(&name, e))?;
                    request.sampling.stop =
                        stops.unwrap_or_default().into_iter().map(Str::into_cow).collect();
                }
                "candidateCount" => {
                    let n: Option<u32> = serde_json::from_str(text).map_err(|e| at(&name, e))?;
                    if n.is_some_and(|n| n > 1) {
                        return Err("generationConfig.candidateCount: Switchyard returns one candidate; send 1 or leave it out".to_owned());
                    }
                }
                "responseMimeType" => {
                    mime =
                        serde_json::from_str::<Option<Str<'a>>>(text).map_err(|e| at(&name, e))?;
                }
                "responseJsonSchema" | "responseSchema" => schema = schema.or(Some(raw)),
                "thinkingConfig" => {
                    let config: ThinkingConfigWire<'a> =
                        serde_json::from_str(text).map_err(|e| at(&name, e))?;
                    request.reasoning = thinking(&config);
                    // `includeThoughts` and whatever else it holds mean something to Gemini only.
                    request
                        .vendor
                        .fields
                        .push((Cow::Borrowed("generationConfig.thinkingConfig"), raw));
                }
                _ => {
                    let named = Cow::Owned(format!("generationConfig.{name}"));
                    request.vendor.fields.push((named, raw));
                }
            }
        }
        request.response_format = match mime.as_ref().map(|m| m.0.as_ref()) {
            Some("application/json") => Some(match schema {
                Some(schema) => ResponseFormat::JsonSchema {
                    name: Cow::Borrowed("response"),
                    description: None,
                    schema: Some(RawJson(schema)),
                    strict: None,
                },
                None => ResponseFormat::JsonObject,
            }),
            Some("text/plain") => Some(ResponseFormat::Text),
            _ => None,
        };
        Ok(())
    }
}

/// `thinkingConfig` in canonical terms: a budget of `-1` is Gemini's dynamic thinking (the
/// model's own discretion), `0` none; `thinkingLevel` (Gemini 3) an effort.
fn thinking(config: &ThinkingConfigWire<'_>) -> Option<Reasoning> {
    let effort =
        config.thinking_level.as_ref().and_then(|l| Effort::parse(&l.0.to_ascii_lowercase()));
    match config.thinking_budget {
        Some(0) => Some(Reasoning { effort: Some(Effort::Off), budget_tokens: None }),
        Some(budget) if budget > 0 => {
            Some(Reasoning { effort, budget_tokens: u32::try_from(budget).ok() })
        }
        Some(_) => Some(Reasoning { effort, budget_tokens: None }),
        None => effort.map(|effort| Reasoning { effort: Some(effort), budget_tokens: None }),
    }
}
