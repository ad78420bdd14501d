//! Gemini requests: parsed from clients ([`parse`]), encoded for upstreams.

mod parse;

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::chat::{
    ChatRequest, Image, ImageSource, Opaque, Part, RawJson, ResponseFormat, Role, ToolChoice,
};
use crate::dialect::{Dialect, Dropped, EncodeOptions};
use crate::error::ProviderError;
use crate::json::object_or_empty;

pub use self::parse::{parse_request, parse_request_to};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestOut<'r> {
    contents: Vec<ContentOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<ContentOut<'r>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfigOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfigOut<'r>>,
}

#[derive(Serialize)]
struct ContentOut<'r> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: Vec<PartOut<'r>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum PartOut<'r> {
    Text(&'r str),
    InlineData {
        #[serde(rename = "mimeType")]
        mime_type: &'r str,
        data: &'r str,
    },
    FileData {
        #[serde(rename = "mimeType")]
        mime_type: &'r str,
        #[serde(rename = "fileUri")]
        file_uri: &'r str,
    },
    FunctionCall {
        name: &'r str,
        args: &'r RawValue,
    },
    FunctionResponse {
        name: &'r str,
        response: FunctionResult<'r>,
    },
}

/// Gemini wants an object: `{"output": ...}` for a result, `{"error": ...}` for a failure.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum FunctionResult<'r> {
    Output(Cow<'r, str>),
    Error(Cow<'r, str>),
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolOut<'r> {
    Functions {
        #[serde(rename = "functionDeclarations")]
        function_declarations: Vec<FunctionOut<'r>>,
    },
    /// A Gemini client's own built-in tool (`googleSearch`, ...), as it sent it.
    Native(RawJson<'r>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionOut<'r> {
    name: &'r str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Cow<'r, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters_json_schema: Option<RawJson<'r>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfigOut<'r> {
    function_calling_config: FunctionCallingOut<'r>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallingOut<'r> {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_function_names: Option<[&'r str; 1]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfigOut<'r> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'r [Cow<'r, str>],
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfigOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<RawJson<'r>>,
}

fn untranslatable(message: String) -> ProviderError {
    ProviderError::Untranslatable { dialect: Dialect::Gemini, message }
}

fn foreign(opaque: &Opaque<'_>) -> ProviderError {
    untranslatable(format!(
        "`{}` content from {} has no Gemini equivalent",
        opaque.kind, opaque.dialect
    ))
}

fn image_part<'r>(image: &'r Image<'r>) -> PartOut<'r> {
    match &image.source {
        ImageSource::Base64 { media_type, data } => {
            PartOut::InlineData { mime_type: media_type, data }
        }
        ImageSource::Url(url) => PartOut::FileData { mime_type: media_type_of(url), file_uri: url },
    }
}

/// Gemini wants a MIME type with every file reference; the extension is all there is.
fn media_type_of(url: &str) -> &'static str {
    let path = url.split(['?', '#']).next().unwrap_or(url).to_ascii_lowercase();
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("heic") => "image/heic",
        _ => "image/jpeg",
    }
}

/// The conversation as Gemini contents: same-role turns merged, tool results named after
/// their calls.
fn contents<'r>(
    request: &'r ChatRequest<'r>,
    dropped: &mut Dropped,
) -> Result<Vec<ContentOut<'r>>, ProviderError> {
    // Tool results name the function, not the call: remember each call's name by id.
    let mut calls: Vec<(&str, &str)> = Vec::new();
    let mut contents: Vec<ContentOut<'_>> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        // Gemini has one system instruction; `encode_request` moved these into it.
        if message.role == Role::System {
            continue;
        }
        let role = if message.role == Role::Assistant { "model" } else { "user" };
        let mut parts = Vec::with_capacity(message.content.len());
        let mut images = Vec::new();
        for part in &message.content {
            match part {
                Part::Text(text) if !text.text.is_empty() => parts.push(PartOut::Text(&text.text)),
                Part::Image(image) => parts.push(image_part(image)),
                Part::ToolUse(call) => {
                    calls.push((&call.id, &call.name));
                    parts.push(PartOut::FunctionCall {
                        name: &call.name,
                        args: object_or_empty(&call.arguments),
                    });
                }
                Part::ToolResult(result) => {
                    let name = calls
                        .iter()
                        .rev()
                        .find(|(id, _)| *id == result.tool_use_id)
                        .map(|(_, name)| *name)
                        .ok_or_else(|| {
                            untranslatable(format!(
                                "tool result `{}` answers no earlier tool call",
                                result.tool_use_id
                            ))
                        })?;
                    let mut texts = Vec::new();
                    for part in &result.content {
                        match part {
                            Part::Text(text) => texts.push(text.text.as_ref()),
                            // Images a tool returned follow its result as parts of their own.
                            Part::Image(image) => images.push(image_part(image)),
                            Part::Opaque(opaque) => return Err(foreign(opaque)),
                            _ => {}
                        }
                    }
                    let text = match texts.as_slice() {
                        [only] => Cow::Borrowed(*only),
                        many => Cow::Owned(many.join("\n")),
                    };
                    let response = if result.is_error {
                        FunctionResult::Error(text)
                    } else {
                        FunctionResult::Output(text)
                    };
                    parts.push(PartOut::FunctionResponse { name, response });
                }
                Part::Opaque(opaque) if message.role != Role::Assistant => {
                    return Err(foreign(opaque));
                }
                // Another vendor's server-side work (a Responses reasoning item, ...).
                Part::Opaque(opaque) => dropped.note(format!("{} content", opaque.kind)),
                // Empty text, thinking (Gemini takes none back) and another vendor's
                // server-side blocks.
                _ => {}
            }
        }
        parts.append(&mut images);
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some(last) if last.role == Some(role) => last.parts.append(&mut parts),
            _ => contents.push(ContentOut { role: Some(role), parts }),
        }
    }
    Ok(contents)
}

/// The fields the client parsers read into [`ChatRequest::reasoning`].
const REASONING_FIELDS: &[&str] = &[
    "reasoning_effort",
    "thinking",
    "output_config",
    "response_format",
    "reasoning",
    "text",
    "tool_choice",
];

/// `generationConfig.thinkingConfig`: a budget of 0 turns thinking off.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfigOut {
    thinking_budget: u32,
}

/// A Gemini client's own built-in tools, as it sent them; another vendor's are dropped or
/// refused ([`foreign_native`](crate::dialect::foreign_native)).
fn native_tools<'r>(
    request: &'r ChatRequest<'r>,
    dropped: &mut Dropped,
) -> Result<Vec<ToolOut<'r>>, ProviderError> {
    let mut natives = Vec::new();
    for native in request.tools.iter().filter_map(|t| t.native.as_ref()) {
        if native.dialect == Dialect::Gemini {
            natives.push(ToolOut::Native(native.raw));
        } else {
            crate::dialect::foreign_native(native, Dialect::Gemini, dropped)?;
        }
    }
    Ok(natives)
}

/// The upstream body for `request`. The model and streaming are in the
/// [`endpoint`](super::endpoint), not the body.
pub fn encode_request(
    request: &ChatRequest<'_>,
    options: &EncodeOptions<'_>,
    dropped: &mut Dropped,
) -> Result<Vec<u8>, ProviderError> {
    let late_system = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| &m.content)
        .filter_map(|part| match part {
            Part::Text(text) => Some(text),
            _ => None,
        });
    let system: Vec<PartOut<'_>> = request
        .system
        .iter()
        .chain(late_system)
        .filter(|t| !t.text.is_empty())
        .map(|t| PartOut::Text(&t.text))
        .collect();
    let natives = native_tools(request, dropped)?;
    if request.uses_cache_control() {
        dropped.note("cache_control");
    }
    if request.previous_response_id.is_some() {
        dropped.note("previous_response_id");
    }
    dropped.vendor_fields(request, Dialect::Gemini, REASONING_FIELDS);
    let reasoning = request.reasoning.filter(|_| {
        if !options.reasoning && request.reasoning.is_some() {
            dropped.note("reasoning (the model takes no reasoning parameters)");
        }
        options.reasoning
    });
    let thinking_config = reasoning.and_then(|r| {
        let budget = r.budget();
        if budget.is_none() {
            dropped.note("thinking (adaptive: the model's default)");
        }
        budget.map(|budget| ThinkingConfigOut { thinking_budget: budget })
    });

    let contents = contents(request, dropped)?;

    let declarations: Vec<FunctionOut<'_>> = request
        .tools
        .iter()
        .filter(|tool| tool.native.is_none())
        .map(|tool| FunctionOut {
            name: &tool.name,
            description: tool.function_description(),
            parameters_json_schema: tool.function_parameters(),
        })
        .collect();
    let tool_config =
        request.tool_choice.as_ref().filter(|_| !declarations.is_empty()).map(|choice| {
            let (mode, allowed) = match choice {
                ToolChoice::Auto => ("AUTO", None),
                ToolChoice::None => ("NONE", None),
                ToolChoice::Required => ("ANY", None),
                ToolChoice::Tool(name) => ("ANY", Some([name.as_ref()])),
            };
            ToolConfigOut {
                function_calling_config: FunctionCallingOut {
                    mode,
                    allowed_function_names: allowed,
                },
            }
        });
    let mut tools = natives;
    if !declarations.is_empty() {
        tools.insert(0, ToolOut::Functions { function_declarations: declarations });
    }

    // Structured output: JSON, of a schema when there is one (`responseJsonSchema` takes JSON
    // Schema as is, like `parametersJsonSchema`).
    let (response_mime_type, response_json_schema) = match &request.response_format {
        None | Some(ResponseFormat::Text) => (None, None),
        Some(ResponseFormat::JsonObject) => (Some("application/json"), None),
        Some(ResponseFormat::JsonSchema { schema, .. }) => (Some("application/json"), *schema),
    };
    let sampling = &request.sampling;
    let generation_config = (sampling.max_tokens.is_some()
        || sampling.temperature.is_some()
        || sampling.top_p.is_some()
        || !sampling.stop.is_empty()
        || thinking_config.is_some()
        || response_mime_type.is_some())
    .then_some(GenerationConfigOut {
        max_output_tokens: sampling.max_tokens,
        temperature: sampling.temperature,
        top_p: sampling.top_p,
        stop_sequences: &sampling.stop,
        thinking_config,
        response_mime_type,
        response_json_schema,
    });

    let body = RequestOut {
        contents,
        system_instruction: (!system.is_empty())
            .then_some(ContentOut { role: None, parts: system }),
        tools,
        tool_config,
        generation_config,
    };
    Ok(serde_json::to_vec(&body).expect("serialising to memory cannot fail"))
}
