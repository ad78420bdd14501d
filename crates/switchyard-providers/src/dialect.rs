//! The dialects, and the one place that dispatches on them.
//!
//! [`Dialect`] is a wire format an upstream speaks; [`ClientDialect`] is the subset a client
//! may speak to Switchyard. The router holds one of each per attempt and calls through here,
//! so adding a dialect is one new module plus one arm per method below.

use std::borrow::Cow;
use std::fmt;

use crate::chat::{ChatRequest, ChatResponse, Ending};
use crate::error::{ErrorKind, ProviderError, UpstreamError};
pub use crate::json::Depth;
use crate::stream::{StreamDecoder, StreamEncoder};
use crate::{anthropic, gemini, openai, responses};

/// A wire format an upstream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI Chat Completions and everything compatible with it (Ollama, LM Studio, vLLM,
    /// OpenRouter, DeepSeek, Groq, ...).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent` (the Generative Language API).
    Gemini,
    /// OpenAI Responses (`POST /v1/responses`): what Codex CLI and the newest OpenAI SDKs
    /// speak, and the only API of some OpenAI models.
    Responses,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Responses => "responses",
        }
    }

    /// Where to send a request, relative to the provider's base URL. Always `POST` with
    /// `content-type: application/json`; the executor adds authentication (see
    /// [`Endpoint`]).
    pub fn endpoint(self, model: &str, stream: bool) -> Endpoint {
        match self {
            Self::OpenAi => Endpoint { path: Cow::Borrowed(openai::PATH), query: None },
            Self::Anthropic => Endpoint { path: Cow::Borrowed(anthropic::PATH), query: None },
            Self::Gemini => gemini::endpoint(model, stream),
            Self::Responses => Endpoint { path: Cow::Borrowed(responses::PATH), query: None },
        }
    }

    /// The upstream body for `request`.
    pub fn encode_request(
        self,
        request: &ChatRequest<'_>,
        options: &EncodeOptions<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        self.encode_request_noting(request, options, &mut Dropped::default())
    }

    /// [`Dialect::encode_request`], naming in `dropped` what this dialect could not carry.
    pub fn encode_request_noting(
        self,
        request: &ChatRequest<'_>,
        options: &EncodeOptions<'_>,
        dropped: &mut Dropped,
    ) -> Result<Vec<u8>, ProviderError> {
        match self {
            Self::OpenAi => openai::encode_request(request, options, dropped),
            Self::Anthropic => anthropic::encode_request(request, options, dropped),
            Self::Gemini => gemini::encode_request(request, options, dropped),
            Self::Responses => responses::encode_request(request, options, dropped),
        }
    }

    /// A 2xx non-streamed upstream body as a canonical response.
    pub fn decode_response(self, body: &[u8]) -> Result<ChatResponse<'_>, ProviderError> {
        match self {
            Self::OpenAi => openai::decode_response(body),
            Self::Anthropic => anthropic::decode_response(body),
            Self::Gemini => gemini::decode_response(body),
            Self::Responses => responses::decode_response(body),
        }
    }

    /// What a 2xx non-streamed upstream body relayed as it is needs read of it: the same
    /// finish, usage and model [`Dialect::decode_response`] reads, its content skipped.
    pub fn decode_ending(self, body: &[u8]) -> Result<Ending<'_>, ProviderError> {
        match self {
            Self::OpenAi => openai::decode_ending(body),
            Self::Anthropic => anthropic::decode_ending(body),
            Self::Gemini => gemini::decode_ending(body),
            Self::Responses => responses::decode_ending(body),
        }
    }

    /// A fresh decoder for one streamed upstream response.
    pub fn stream_decoder(self) -> StreamDecoder {
        match self {
            Self::OpenAi => StreamDecoder::OpenAi(openai::StreamDecoder::default()),
            Self::Anthropic => StreamDecoder::Anthropic(anthropic::StreamDecoder::default()),
            Self::Gemini => StreamDecoder::Gemini(gemini::StreamDecoder::default()),
            Self::Responses => StreamDecoder::Responses(responses::StreamDecoder::default()),
        }
    }

    /// What an upstream error body (any status) says, read from the provider's own error
    /// types, codes and documented phrases only (RESILIENCE.md §2: never a word anywhere).
    pub fn error_report(self, body: &[u8]) -> UpstreamError {
        match self {
            Self::OpenAi => openai::error_report(body),
            Self::Anthropic => anthropic::error_report(body),
            Self::Gemini => gemini::error_report(body),
            Self::Responses => responses::error_report(body),
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dialect a client may speak to Switchyard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientDialect {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1beta/models/{model}:generateContent` or `:streamGenerateContent`, which name
    /// the model in the path: the router sets [`ChatRequest::model`] from it.
    Gemini(gemini::Method),
}

impl ClientDialect {
    pub fn dialect(self) -> Dialect {
        match self {
            Self::OpenAi => Dialect::OpenAi,
            Self::Anthropic => Dialect::Anthropic,
            Self::Responses => Dialect::Responses,
            Self::Gemini(_) => Dialect::Gemini,
        }
    }

    /// Parses a client's body; the request borrows from it. Errors name the field.
    pub fn parse_request(self, body: &[u8]) -> Result<ChatRequest<'_>, ProviderError> {
        self.parse_request_to(body, Depth::Whole)
    }

    /// Parses a client's body to `depth`: at [`Depth::Routing`], the request has every
    /// top-level setting and no conversation, system prompt or tools.
    pub fn parse_request_to(
        self,
        body: &[u8],
        depth: Depth,
    ) -> Result<ChatRequest<'_>, ProviderError> {
        match self {
            Self::OpenAi => openai::parse_request_to(body, depth),
            Self::Anthropic => anthropic::parse_request_to(body, depth),
            Self::Responses => responses::parse_request_to(body, depth),
            Self::Gemini(method) => gemini::parse_request_to(body, method, depth),
        }
    }

    /// Whether the client names its model in the path rather than the body (Gemini).
    pub fn model_in_path(self) -> bool {
        matches!(self, Self::Gemini(_))
    }

    /// A canonical response as this dialect's JSON body, for a client whose request is not
    /// at hand; see [`ClientDialect::encode_response_for`].
    pub fn encode_response(self, response: &ChatResponse<'_>, meta: &ResponseMeta<'_>) -> Vec<u8> {
        self.encode_answer(response, meta, &ClientContext::default())
    }

    /// A canonical response as this dialect's JSON body, answering `request` (the client's
    /// parsed request): a Responses client gets its freeform tools' calls back as
    /// `custom_tool_call`s.
    pub fn encode_response_for(
        self,
        request: &ChatRequest<'_>,
        response: &ChatResponse<'_>,
        meta: &ResponseMeta<'_>,
    ) -> Vec<u8> {
        self.encode_answer(response, meta, &ClientContext::of(request))
    }

    fn encode_answer(
        self,
        response: &ChatResponse<'_>,
        meta: &ResponseMeta<'_>,
        context: &ClientContext,
    ) -> Vec<u8> {
        match self {
            Self::OpenAi => openai::encode_response(response, meta),
            Self::Anthropic => anthropic::encode_response(response, meta),
            Self::Responses => responses::encode_response(response, meta, context),
            Self::Gemini(_) => gemini::encode_response(response, meta),
        }
    }

    /// A fresh encoder for one streamed response to the client.
    pub fn stream_encoder(self, meta: &ResponseMeta<'_>, include_usage: bool) -> StreamEncoder {
        self.stream_encoder_in(meta, include_usage, ClientContext::default())
    }

    pub(crate) fn stream_encoder_in(
        self,
        meta: &ResponseMeta<'_>,
        include_usage: bool,
        context: ClientContext,
    ) -> StreamEncoder {
        match self {
            Self::OpenAi => StreamEncoder::OpenAi(openai::StreamEncoder::new(meta, include_usage)),
            Self::Anthropic => StreamEncoder::Anthropic(anthropic::StreamEncoder::new(meta)),
            Self::Responses => {
                StreamEncoder::Responses(responses::StreamEncoder::new(meta, context))
            }
            Self::Gemini(method) => StreamEncoder::Gemini(gemini::StreamEncoder::new(meta, method)),
        }
    }

    /// The non-streamed error body of this dialect.
    pub fn error_body(self, kind: ErrorKind, message: &str) -> Vec<u8> {
        match self {
            Self::OpenAi => openai::error_body(kind, message),
            Self::Anthropic => anthropic::error_body(kind, message),
            Self::Responses => responses::error_body(kind, message),
            Self::Gemini(_) => gemini::error_body(kind, message),
        }
    }
}

/// What a client encoder needs from the client's own request, owned so a stream can keep it:
/// the names of its freeform tools, whose calls a Responses client must get back as
/// `custom_tool_call`s (every other dialect carried them as functions), and of its namespaced
/// tools, whose calls it must get back with their namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientContext {
    pub freeform_tools: Vec<String>,
    /// `(flat name, namespace, name in the namespace)` of each namespaced tool.
    pub namespaced_tools: Vec<(String, String, String)>,
}

impl ClientContext {
    pub fn of(request: &ChatRequest<'_>) -> Self {
        Self {
            freeform_tools: request
                .tools
                .iter()
                .filter(|tool| tool.is_freeform())
                .map(|tool| tool.name.clone().into_owned())
                .collect(),
            namespaced_tools: request
                .tools
                .iter()
                .filter_map(|tool| {
                    let namespace = tool.namespace.as_ref()?;
                    Some((
                        tool.name.clone().into_owned(),
                        namespace.name.clone().into_owned(),
                        namespace.member.clone().into_owned(),
                    ))
                })
                .collect(),
        }
    }

    pub fn is_freeform(&self, name: &str) -> bool {
        self.freeform_tools.iter().any(|tool| tool == name)
    }

    /// A call's name as the client declared it: `(namespace, name)` for a namespaced tool's
    /// flat name, `(None, name)` otherwise.
    pub fn declared<'n>(&'n self, name: &'n str) -> (Option<&'n str>, &'n str) {
        match self.namespaced_tools.iter().find(|(flat, _, _)| flat == name) {
            Some((_, namespace, member)) => (Some(namespace), member),
            None => (None, name),
        }
    }
}

/// Where an upstream request goes. The method is always `POST`.
///
/// Base URL conventions and authentication (added by the executor):
/// - OpenAI: base includes the version (`https://api.openai.com/v1`,
///   `http://localhost:11434/v1`); `Authorization: Bearer <key>`.
/// - Anthropic: base without version (`https://api.anthropic.com`); `x-api-key: <key>` and
///   `anthropic-version: 2023-06-01`, plus the client's `anthropic-beta` header forwarded
///   as is (Claude Code turns features on with it).
/// - Gemini: base includes the version (`https://generativelanguage.googleapis.com/v1beta`);
///   `x-goog-api-key: <key>`.
/// - Responses: as OpenAI (`https://api.openai.com/v1`, `Authorization: Bearer <key>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Relative to the base URL, no leading slash.
    pub path: Cow<'static, str>,
    /// A query string to append (`alt=sse` for Gemini streams), without the `?`.
    pub query: Option<&'static str>,
}

/// What an upstream encoder needs besides the request.
#[derive(Clone, Copy, Debug)]
pub struct EncodeOptions<'a> {
    /// The upstream's own model id (the router has resolved aliases and combos).
    pub model: &'a str,
    /// Sent when the client set no limit and the dialect requires one (Anthropic).
    pub default_max_tokens: u32,
    /// The upstream takes a system message anywhere in the conversation (OpenAI's own API).
    /// Other OpenAI-compatible hosts often run chat templates that refuse a system message
    /// that is not first, so theirs are merged into the leading one.
    pub system_in_place: bool,
    /// The target model takes reasoning parameters (OpenAI `reasoning_effort`, Gemini
    /// `thinkingConfig`); models without reasoning refuse them with a 400. Another dialect's
    /// request for thinking is translated only when this is set, and named as dropped
    /// otherwise. Until models carry this as a fact of their own, the router guesses it from
    /// the model's name (see the app's `upstream::reasons`).
    pub reasoning: bool,
    /// A streamed OpenAI Chat request asks for usage (`stream_options.include_usage`), so a
    /// stream's tokens are known even when the client did not ask; off for hosts that
    /// refuse the field.
    pub stream_usage: bool,
    /// What a translation tells the upstream's prompt cache.
    pub caching: Caching<'a>,
}

/// What a request translated from another dialect tells the upstream's prompt cache, which the
/// client could not tell it in the upstream's words (a passthrough request is the client's own
/// bytes and tells what the client told).
#[derive(Clone, Copy, Debug, Default)]
pub struct Caching<'a> {
    /// Mark the prompt's prefix where the dialect caches only what is marked (Anthropic's
    /// `cache_control` on the last tool, the last system block and the last message, at most
    /// four breakpoints counting the client's own): without them every turn pays the whole
    /// prompt.
    pub breakpoints: bool,
    /// The session's key, sent as `prompt_cache_key` to an OpenAI upstream (Chat, Responses)
    /// that keys its cache by it.
    pub key: Option<&'a str>,
}

impl<'a> Caching<'a> {
    /// Nothing told.
    pub const NONE: Self = Self { breakpoints: false, key: None };

    /// The `prompt_cache_key` an OpenAI encoder adds, named in `dropped` as added: none for a
    /// client of the upstream's own dialect (`own`), which says its own among its fields.
    pub(crate) fn key_to_send(&self, own: bool, dropped: &mut Dropped) -> Option<&'a str> {
        let key = self.key.filter(|_| !own);
        if key.is_some() {
            dropped.add("prompt_cache_key");
        }
        key
    }
}

impl<'a> EncodeOptions<'a> {
    /// Options for `model` with the conservative choices.
    pub fn new(model: &'a str, default_max_tokens: u32) -> Self {
        Self {
            model,
            default_max_tokens,
            system_in_place: false,
            reasoning: true,
            stream_usage: true,
            caching: Caching::NONE,
        }
    }
}

/// What an encoder could not carry to its upstream: request fields and kinds of content, each
/// named once, for the routing trace. Only what has no meaning on the other side ends up here;
/// what would change the answer's meaning is refused instead. Apart from it, what the encoder
/// added that the client did not write (cache breakpoints, `prompt_cache_key`), named too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped(Vec<Cow<'static, str>>, Vec<Cow<'static, str>>);

impl Dropped {
    /// Names something the encoder added for the upstream's sake.
    pub fn add(&mut self, what: impl Into<Cow<'static, str>>) {
        let what = what.into();
        if !self.1.contains(&what) {
            self.1.push(what);
        }
    }

    /// What the encoder added, in order.
    pub fn added(&self) -> &[Cow<'static, str>] {
        &self.1
    }

    pub fn note(&mut self, what: impl Into<Cow<'static, str>>) {
        let what = what.into();
        if !self.0.contains(&what) {
            self.0.push(what);
        }
    }

    /// Notes every vendor field of `request` that `dialect` does not get, except those in
    /// `translated` (read into the canonical request and carried in the target's own words).
    pub fn vendor_fields(
        &mut self,
        request: &ChatRequest<'_>,
        dialect: Dialect,
        translated: &[&str],
    ) {
        for name in request.vendor.left_out(dialect) {
            if !translated.contains(&name) {
                self.note(name.to_owned());
            }
        }
    }

    pub fn names(&self) -> &[Cow<'static, str>] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the router knows about a response that the upstream does not say (or must not be
/// trusted to say).
#[derive(Clone, Copy, Debug)]
pub struct ResponseMeta<'a> {
    /// The model that really served, written into the client's `model` field
    /// (RESILIENCE.md §1.5).
    pub model: &'a str,
    /// Unix seconds, for OpenAI's `created`.
    pub created: u64,
}

/// A built-in tool of another vendor on its way to `target`. A Responses built-in
/// (`web_search`, `local_shell`, `file_search`, ...) is dropped and named: Codex sends them
/// with every request, and refusing them would refuse Codex everywhere but OpenAI. Any other
/// (an Anthropic server tool) is refused, see [`native_tool`].
pub(crate) fn foreign_native(
    native: &crate::chat::Opaque<'_>,
    target: Dialect,
    dropped: &mut Dropped,
) -> Result<(), ProviderError> {
    if native.dialect == Dialect::Responses {
        dropped.note(format!("{} tool", native.kind));
        Ok(())
    } else {
        Err(native_tool(native, target))
    }
}

/// A built-in (server) tool of another vendor: refused, since `target` cannot run it and the
/// answer would not be the one the client asked for.
pub(crate) fn native_tool(native: &crate::chat::Opaque<'_>, target: Dialect) -> ProviderError {
    ProviderError::Untranslatable {
        dialect: target,
        message: format!(
            "the {} built-in tool `{}` has no {target} equivalent; route this request to a target that speaks {}",
            native.dialect, native.kind, native.dialect
        ),
    }
}
