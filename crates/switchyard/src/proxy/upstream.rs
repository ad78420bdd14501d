//! Building the HTTP request for one candidate: URL, authentication and body.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use switchyard_providers::chat::ChatRequest;
use switchyard_providers::dialect::{Caching, ClientDialect, Dialect, Dropped, EncodeOptions};
use switchyard_providers::embeddings::{EmbedRequest, Shape};
use switchyard_providers::error::ProviderError;
use switchyard_providers::executor::{UpstreamRequest, Url};
use switchyard_providers::passthrough;

use std::sync::Arc;

use switchyard_secrets::Secret;

use super::login::ClientLogin;
use super::parsed::Parsed;
use crate::config::ProviderConfig;
use switchyard_core::text::bounded;

/// Anthropic's API version; the one every current feature is documented against.
const ANTHROPIC_VERSION: &str = "2023-06-01";
const ANTHROPIC_VERSION_HEADER: &str = "anthropic-version";
const ANTHROPIC_BETA_HEADER: &str = "anthropic-beta";

/// Output limit for upstreams that require one (Anthropic) when the client gave none.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// What an attempt presents upstream as its credential.
#[derive(Clone, Debug)]
pub(crate) enum Presented {
    /// A key or OAuth token of Switchyard's, sent the way the dialect wants it.
    Secret(Secret),
    /// The caller's own login (a `client` credential), sent as the caller sent it.
    Client(Arc<ClientLogin>),
}

impl Presented {
    /// The secret value itself: what an upstream's echo is scrubbed of, what a refresh after a
    /// 401 replaces.
    pub(crate) fn secret(&self) -> &Secret {
        match self {
            Self::Secret(secret) => secret,
            Self::Client(login) => login.token(),
        }
    }
}

/// What a client request asks of its targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// A model's answer: Chat, Messages, Responses, `generateContent`.
    Chat,
    /// Vectors of its input (`POST /v1/embeddings`, Gemini's `:embedContent` and
    /// `:batchEmbedContents`), answered in the client's shape.
    Embed(Shape),
}

/// What the client sent, as it sent it: a same-dialect upstream gets these bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientRequest<'a> {
    pub dialect: ClientDialect,
    pub work: Work,
    /// The model named in the path, for a dialect that names it there (Gemini).
    pub model: Option<&'a str>,
    pub body: &'a [u8],
    /// The query string (`beta=true` from Claude Code), without the `?`.
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
}

/// One attempt's upstream request, and how its answer is read.
#[derive(Debug)]
pub(crate) struct Built {
    pub request: UpstreamRequest,
    /// The client's own bytes went upstream: its answer is relayed, not translated.
    pub passthrough: bool,
    /// What translation could not carry (empty for passthrough).
    pub dropped: Dropped,
}

/// Whether `provider` gets `client`'s request for `model` as the client sent it
/// (ARCHITECTURE.md, "Two paths through the router").
pub(crate) fn passes_through(
    provider: &ProviderConfig,
    model: &str,
    client: ClientDialect,
) -> bool {
    provider.passthrough && provider.dialect_toward(model, client.dialect()) == client.dialect()
}

/// The request for `model` on `provider`, presenting `secret`: the client's body with `model`
/// rewritten when the dialects match (and the provider allows it), else `request` read whole
/// and encoded for the provider's dialect. A body with no canonical form can only pass
/// through. `cache`: what a translation tells the upstream's prompt cache.
pub(crate) fn build(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
    (model, cache): (&str, Caching<'_>),
    request: &Parsed<'_>,
    client: &ClientRequest<'_>,
) -> Result<Built, ProviderError> {
    let passthrough =
        passes_through(provider, model, client.dialect) && !carries_foreign_reasoning(client);
    build_as(provider, secret, model, request, client, (passthrough, cache))
}

/// A continuation request (RESILIENCE.md §10): `request` (the client's plus the answer so far
/// as its last assistant message) always encoded, even for a same-dialect target, since the
/// client's bytes do not hold the prefill, then marked for `mechanism`.
pub(crate) fn build_continuation(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
    model: &str,
    request: ChatRequest<'_>,
    client: &ClientRequest<'_>,
    mechanism: switchyard_core::continuation::Continuation,
) -> Result<UpstreamRequest, ProviderError> {
    let request = Parsed::whole_from(request);
    let mut built = build_as(provider, secret, model, &request, client, (false, Caching::NONE))?;
    let marked = switchyard_providers::continuation::mark(&built.request.body, mechanism)?;
    built.request.body = Bytes::from(marked);
    Ok(built.request)
}

fn build_as(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
    model: &str,
    request: &Parsed<'_>,
    client: &ClientRequest<'_>,
    (passthrough, cache): (bool, Caching<'_>),
) -> Result<Built, ProviderError> {
    let dialect = provider.dialect_toward(model, client.dialect.dialect());
    let settings = request.settings();
    let mut dropped = Dropped::default();
    let body = if passthrough {
        let body = passthrough::request_body(dialect, client.body, model, Some(&settings.model))?;
        if asks_stream_usage(provider, dialect, settings) {
            passthrough::ask_stream_usage(body)
        } else {
            body
        }
    } else if settings.previous_response_id.is_some() {
        // The proxy's conversation store expands `previous_response_id` into `input` before a
        // request gets here; one that still names it can only go to the upstream keeping it.
        return Err(ProviderError::Untranslatable {
            dialect,
            message: "`previous_response_id` names a conversation only the upstream that answered it keeps; send the whole conversation in `input`".into(),
        });
    } else {
        let whole = request.whole().map_err(|problem| ProviderError::Untranslatable {
            dialect,
            message: format!("the request could only be forwarded as it is: {problem}"),
        })?;
        let options = EncodeOptions {
            model,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            system_in_place: is_openai_itself(&provider.base_url),
            reasoning: reasons(dialect, model),
            stream_usage: provider.stream_usage,
            caching: Caching { key: cache.key.filter(|_| provider.prompt_cache_key), ..cache },
        };
        dialect.encode_request_noting(whole, &options, &mut dropped)?
    };
    let url = if let Some(url) = provider.url_toward(model, dialect) {
        let mut url = url.clone();
        if passthrough {
            url.set_query(client.query);
        }
        url
    } else {
        endpoint_url(provider, dialect, model, settings.stream)?
    };

    let mut headers = Vec::with_capacity(5 + provider.headers.len());
    headers.push((header::CONTENT_TYPE, HeaderValue::from_static("application/json")));
    if settings.stream {
        headers.push((header::ACCEPT, HeaderValue::from_static("text/event-stream")));
    }
    let client_headers = (client.dialect.dialect() == dialect).then_some(client.headers);
    identify(&mut headers, provider, dialect, secret, client_headers)?;
    Ok(Built {
        request: UpstreamRequest { url, headers, body: Bytes::from(body) },
        passthrough,
        dropped,
    })
}

/// Whether a forwarded Chat stream is made to report usage the client did not ask for
///: the proxy then keeps the usage chunk from the client.
pub(crate) fn asks_stream_usage(
    provider: &ProviderConfig,
    dialect: Dialect,
    request: &ChatRequest<'_>,
) -> bool {
    provider.stream_usage && dialect == Dialect::OpenAi && request.stream && !request.stream_usage
}

/// The header that marks a recovery probe, so an upstream's logs (and the test mock) can tell
/// the proxy's own probes from its users' requests.
pub(crate) const PROBE_HEADER: &str = "x-switchyard-probe";

/// The recovery probe for `model` on `provider` (RESILIENCE.md §3): the cheapest request its
/// dialect accepts, one output token where the API allows it (OpenAI reasoning models refuse
/// `max_tokens` and take `max_completion_tokens`; the Responses API takes no fewer than 16),
/// a fixed one-word prompt (never a user's), not streamed.
pub(crate) fn probe(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
    model: &str,
) -> Result<UpstreamRequest, ProviderError> {
    const PROMPT: &str = "ping";
    let dialect = provider.dialect_for(model);
    let body = match dialect {
        Dialect::OpenAi => {
            let limit =
                if reasons(dialect, model) { "max_completion_tokens" } else { "max_tokens" };
            let mut body = serde_json::json!({
                "model": model,
                "messages": [{"role": "user", "content": PROMPT}],
                "stream": false,
            });
            body[limit] = 1.into();
            body
        }
        Dialect::Anthropic => serde_json::json!({
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 1,
        }),
        Dialect::Responses => serde_json::json!({
            "model": model,
            "input": PROMPT,
            "max_output_tokens": 16,
            "store": false,
        }),
        Dialect::Gemini => serde_json::json!({
            "contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
            "generationConfig": {"maxOutputTokens": 1},
        }),
    };
    let url = match provider.chat_url_for(model) {
        Some(url) => url.clone(),
        None => endpoint_url(provider, dialect, model, false)?,
    };
    let mut headers = Vec::with_capacity(4 + provider.headers.len());
    headers.push((header::CONTENT_TYPE, HeaderValue::from_static("application/json")));
    headers.push((HeaderName::from_static(PROBE_HEADER), HeaderValue::from_static("1")));
    identify(&mut headers, provider, dialect, secret, None)?;
    Ok(UpstreamRequest { url, headers, body: Bytes::from(body.to_string()) })
}

/// The URL of `model`'s chat endpoint in `dialect` when the provider has no fixed one (Gemini
/// names the model and the streaming mode in the path).
fn endpoint_url(
    provider: &ProviderConfig,
    dialect: Dialect,
    model: &str,
    stream: bool,
) -> Result<Url, ProviderError> {
    let endpoint = dialect.endpoint(model, stream);
    let refused = |why: String| ProviderError::Untranslatable {
        dialect,
        message: format!("model \"{}\" makes no valid URL: {why}", bounded(model)),
    };
    let mut url = Url::parse(&provider.base_url).map_err(|e| refused(e.to_string()))?;
    // The model becomes path segments, each percent-encoded (`?`, `#`, `%`, spaces), so no
    // model name can add a query or reach another path of the host; `.` and `..` would be
    // resolved away by the URL, so they are refused rather than encoded.
    let segments: Vec<&str> = endpoint.path.split('/').collect();
    if let Some(bad) = segments.iter().find(|s| matches!(**s, "" | "." | "..")) {
        return Err(refused(format!("the path segment \"{bad}\" is not allowed in a model name")));
    }
    url.path_segments_mut()
        .map_err(|()| refused("the base URL cannot have a path".to_owned()))?
        .pop_if_empty()
        .extend(segments);
    url.set_query(endpoint.query);
    Ok(url)
}

/// A Responses conversation that went through an Anthropic target carries Anthropic's signed
/// thinking inside its reasoning items (see the providers' `responses` module); a Responses
/// upstream would refuse those, so such a body is translated (which strips them) rather than
/// passed through.
fn carries_foreign_reasoning(client: &ClientRequest<'_>) -> bool {
    const MARK: &[u8] = b"switchyard.anthropic.";
    client.dialect == ClientDialect::Responses && memchr::memmem::find(client.body, MARK).is_some()
}

/// Whether `model` takes reasoning parameters, guessed from its name until models carry it as
/// a fact of their own (the catalogue). A model without reasoning answers `reasoning_effort`
/// or `thinkingConfig` with a 400, which would fail a Claude Code turn (it always asks for
/// thinking) on, say, `gpt-4o`; a reasoning model that is not recognised merely thinks at its
/// default level. Anthropic and Responses targets decide for themselves.
pub(crate) fn reasons(dialect: Dialect, model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    match dialect {
        Dialect::OpenAi => {
            ["o1", "o3", "o4", "gpt-5", "gpt-oss"].iter().any(|p| name.starts_with(p))
                || ["reason", "think", "-r1", "qwq", "magistral", "grok-3-mini", "grok-4"]
                    .iter()
                    .any(|part| name.contains(part))
        }
        // Gemini 2.5 and later think; 1.x and 2.0 refuse a thinking config.
        Dialect::Gemini => !["gemini-1", "gemini-2.0", "gemma"].iter().any(|p| name.starts_with(p)),
        Dialect::Anthropic | Dialect::Responses => true,
    }
}

/// OpenAI's own API, which takes system messages anywhere in a conversation.
fn is_openai_itself(base_url: &str) -> bool {
    Url::parse(base_url).is_ok_and(|url| url.host_str() == Some("api.openai.com"))
}

/// A token count on `provider` for the client's body, which speaks the provider's dialect:
/// Anthropic's `POST /v1/messages/count_tokens` (`model` rewritten, the client's Anthropic
/// headers), or Gemini's `models/{model}:countTokens` (the body as it is).
pub(crate) fn count_tokens(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
    model: &str,
    client: &ClientRequest<'_>,
) -> Result<UpstreamRequest, ProviderError> {
    let dialect = client.dialect.dialect();
    let body = passthrough::request_body(dialect, client.body, model, None)?;
    let url = if dialect == Dialect::Gemini {
        let mut url = endpoint_url(provider, dialect, model, false)?;
        let stem = url.path().strip_suffix(":generateContent").map(str::to_owned);
        if let Some(stem) = stem {
            url.set_path(&format!("{stem}:countTokens"));
        }
        url
    } else {
        Url::parse(&format!("{}/{COUNT_TOKENS_PATH}", provider.base_url))
            .map_err(|e| ProviderError::Untranslatable { dialect, message: e.to_string() })?
    };
    let mut headers = vec![(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    identify(&mut headers, provider, dialect, secret, Some(client.headers))?;
    Ok(UpstreamRequest { url, headers, body: Bytes::from(body) })
}

/// The embeddings request for `model` on `provider` (already known to embed in `dialect`:
/// OpenAI's `POST {base}/embeddings`, or Gemini's `models/{model}:embedContent` or
/// `:batchEmbedContents`), presenting `secret`; `passthrough` sends the client's own bytes,
/// the model renamed. What translation could not carry goes to `dropped`.
pub(crate) fn embeddings(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
    (model, dialect): (&str, Dialect),
    request: &EmbedRequest<'_>,
    client: &ClientRequest<'_>,
    (passthrough, dropped): (bool, &mut Dropped),
) -> Result<UpstreamRequest, ProviderError> {
    let body = request.encode_for(dialect, model, client.body, passthrough, dropped)?;
    let url = if dialect == Dialect::Gemini {
        let mut url = endpoint_url(provider, dialect, model, false)?;
        let stem = url.path().strip_suffix(":generateContent").map(str::to_owned);
        if let Some(stem) = stem {
            url.set_path(&format!("{stem}:{}", request.gemini_method(passthrough)));
        }
        url
    } else {
        Url::parse(&format!("{}/{EMBEDDINGS_PATH}", provider.base_url))
            .map_err(|e| ProviderError::Untranslatable { dialect, message: e.to_string() })?
    };
    let mut headers = vec![(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    identify(&mut headers, provider, dialect, secret, None)?;
    Ok(UpstreamRequest { url, headers, body: Bytes::from(body) })
}

/// OpenAI's embeddings endpoint, relative to the base URL (which ends in `/v1`).
const EMBEDDINGS_PATH: &str = "embeddings";

/// Anthropic's token counting endpoint, relative to the base URL.
const COUNT_TOKENS_PATH: &str = "v1/messages/count_tokens";

/// The URL and headers of `provider`'s model list, as the holder of `secret` sees it.
pub(crate) fn models_request(
    provider: &ProviderConfig,
    secret: Option<&Presented>,
) -> Result<(String, Vec<(HeaderName, HeaderValue)>), ProviderError> {
    let dialect = provider.dialect();
    let url = format!("{}/{}", provider.base_url, dialect.models_path());
    let mut headers = Vec::with_capacity(2 + provider.headers.len());
    identify(&mut headers, provider, dialect, secret, None)?;
    Ok((url, headers))
}

/// What every request to `provider` in `dialect` carries: the credential (marked sensitive, so
/// no log or debug print shows it), the API version where the dialect wants one, the
/// configured extras.
/// `client` is the client's headers when it speaks the provider's dialect: an Anthropic
/// client's `anthropic-version` and `anthropic-beta` go upstream exactly as sent (Claude Code
/// turns features on with them).
fn identify(
    headers: &mut Vec<(HeaderName, HeaderValue)>,
    provider: &ProviderConfig,
    dialect: Dialect,
    secret: Option<&Presented>,
    client: Option<&HeaderMap>,
) -> Result<(), ProviderError> {
    if let Some(Presented::Client(login)) = secret {
        headers.extend(login.headers());
    }
    if let Some(Presented::Secret(secret)) = secret {
        let mut value = match dialect {
            Dialect::OpenAi | Dialect::Responses => {
                let secret = secret.expose();
                let mut bearer = String::with_capacity(7 + secret.len());
                bearer.push_str("Bearer ");
                bearer.push_str(secret);
                HeaderValue::from_str(&bearer)
            }
            Dialect::Anthropic | Dialect::Gemini => HeaderValue::from_str(secret.expose()),
        }
        .map_err(|_| ProviderError::Untranslatable {
            dialect,
            message: "the credential is not a valid header value".into(),
        })?;
        value.set_sensitive(true);
        let name = match dialect {
            Dialect::OpenAi | Dialect::Responses => header::AUTHORIZATION,
            Dialect::Anthropic => HeaderName::from_static("x-api-key"),
            Dialect::Gemini => HeaderName::from_static("x-goog-api-key"),
        };
        headers.push((name, value));
    }
    if dialect == Dialect::Anthropic {
        let version = client.and_then(|h| h.get(ANTHROPIC_VERSION_HEADER)).cloned();
        headers.push((
            HeaderName::from_static(ANTHROPIC_VERSION_HEADER),
            version.unwrap_or(HeaderValue::from_static(ANTHROPIC_VERSION)),
        ));
        for beta in client.into_iter().flat_map(|h| h.get_all(ANTHROPIC_BETA_HEADER)) {
            headers.push((HeaderName::from_static(ANTHROPIC_BETA_HEADER), beta.clone()));
        }
    }
    headers.extend(provider.headers.iter().cloned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_parameters_go_only_to_models_that_take_them() {
        for model in ["o3-mini", "gpt-5.1-codex", "deepseek-reasoner", "openai/gpt-oss-120b"] {
            assert!(reasons(Dialect::OpenAi, model), "{model}");
        }
        for model in ["gpt-4o", "gpt-4.1-mini", "llama-3.3-70b", "deepseek-chat"] {
            assert!(!reasons(Dialect::OpenAi, model), "{model}");
        }
        assert!(reasons(Dialect::Gemini, "gemini-2.5-pro"));
        assert!(!reasons(Dialect::Gemini, "gemini-2.0-flash"));
    }

    #[test]
    fn a_probe_is_the_cheapest_valid_request_for_its_dialect_and_model() {
        let text = r#"
[[providers]]
id = "oa"
kind = "openai"
base_url = "https://api.example.com/v1"
credentials = [{ id = "k", secret = "env:KEY" }]

[[providers]]
id = "an"
kind = "anthropic"
base_url = "https://anthropic.example.com"
credentials = [{ id = "k", secret = "env:KEY" }]

[[providers]]
id = "ge"
kind = "gemini"
base_url = "https://gemini.example.com/v1beta"
credentials = [{ id = "k", secret = "env:KEY" }]
"#;
        let config = config(text);
        let body = |provider: &str, model: &str| {
            let p = config.provider(&provider.into()).unwrap();
            let request = probe(p, None, model).unwrap();
            let marked = request.headers.iter().any(|(n, v)| n == PROBE_HEADER && v == "1");
            assert!(marked, "{provider}/{model}: probes are marked");
            serde_json::from_slice::<serde_json::Value>(&request.body).unwrap()
        };
        let chat = body("oa", "gpt-4o");
        assert_eq!((chat["max_tokens"].as_u64(), chat["stream"].as_bool()), (Some(1), Some(false)));
        let reasoning = body("oa", "o3-mini");
        assert_eq!(reasoning["max_completion_tokens"], 1, "{reasoning}");
        assert!(reasoning.get("max_tokens").is_none(), "reasoning models refuse max_tokens");
        assert_eq!(body("an", "claude-x")["max_tokens"], 1);
        assert_eq!(body("ge", "gemini-2.5-flash")["generationConfig"]["maxOutputTokens"], 1);
    }

    fn gemini() -> crate::config::Config {
        let text = r#"
[[providers]]
id = "ge"
kind = "gemini"
base_url = "https://gemini.example.com/v1beta"
credentials = [{ id = "k", secret = "env:KEY" }]
"#;
        config(text)
    }

    /// A test config whose `env:` secrets all resolve.
    fn config(text: &str) -> crate::config::Config {
        let env = |_: &str| Some("sk-test".to_owned());
        crate::config::Config::parse(text, std::path::Path::new("t.toml"), &env)
            .expect("a valid config")
    }

    #[test]
    fn a_gemini_model_name_cannot_leave_the_models_path_or_add_a_query() {
        let config = gemini();
        let p = config.provider(&"ge".into()).unwrap();
        let url = |model: &str| endpoint_url(p, Dialect::Gemini, model, true);
        assert_eq!(
            url("gemini-2.5-flash").unwrap().as_str(),
            "https://gemini.example.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            url("tunedModels/mine").unwrap().as_str(),
            "https://gemini.example.com/v1beta/tunedModels/mine:streamGenerateContent?alt=sse"
        );
        for model in ["../../upload/v1beta/files?x=", "a/../../b", "./x", "a//b"] {
            let error = url(model).unwrap_err().to_string();
            assert!(error.contains("is not allowed in a model name"), "{model}: {error}");
        }
        // What is not a separator is encoded into the segment, never read as syntax.
        let odd = url("x?key=1#f%2F").unwrap();
        assert_eq!(odd.path(), "/v1beta/models/x%3Fkey=1%23f%252F:streamGenerateContent");
        assert_eq!(odd.query(), Some("alt=sse"));
    }
}
