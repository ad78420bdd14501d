//! Building the HTTP request for one candidate: URL, authentication and body.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use switchyard_providers::chat::ChatRequest;
use switchyard_providers::dialect::{Dialect, EncodeOptions};
use switchyard_providers::error::ProviderError;
use switchyard_providers::executor::{UpstreamRequest, Url};

use switchyard_secrets::Secret;

use crate::config::{ProviderConfig, ProviderKind};

/// Anthropic's API version header; the one every current feature is documented against.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Output limit for upstreams that require one (Anthropic) when the client gave none.
const DEFAULT_MAX_TOKENS: u32 = 8192;

pub(crate) fn dialect(kind: ProviderKind) -> Dialect {
    kind.dialect()
}

/// The request for `model` on `provider`, presenting `secret`. `client_headers` are the caller's;
/// only `anthropic-beta` is forwarded (to Anthropic), everything else stays here.
pub(crate) fn build(
    provider: &ProviderConfig,
    secret: Option<&Secret>,
    model: &str,
    request: &ChatRequest<'_>,
    client_headers: &HeaderMap,
) -> Result<UpstreamRequest, ProviderError> {
    let dialect = dialect(provider.kind);
    let body = dialect.encode_request(
        request,
        &EncodeOptions { model, default_max_tokens: DEFAULT_MAX_TOKENS },
    )?;
    let url = if let Some(url) = &provider.chat_url {
        url.clone()
    } else {
        let endpoint = dialect.endpoint(model, request.stream);
        let mut url = format!("{}/{}", provider.base_url, endpoint.path);
        if let Some(query) = endpoint.query {
            url.push('?');
            url.push_str(query);
        }
        Url::parse(&url).map_err(|e| ProviderError::Untranslatable {
            dialect,
            message: format!("model \"{model}\" makes no valid URL: {e}"),
        })?
    };

    let mut headers = Vec::with_capacity(4 + provider.headers.len());
    headers.push((header::CONTENT_TYPE, HeaderValue::from_static("application/json")));
    if request.stream {
        headers.push((header::ACCEPT, HeaderValue::from_static("text/event-stream")));
    }
    identify(&mut headers, provider, secret)?;
    if dialect == Dialect::Anthropic
        && let Some(beta) = client_headers.get("anthropic-beta")
    {
        headers.push((HeaderName::from_static("anthropic-beta"), beta.clone()));
    }
    Ok(UpstreamRequest { url, headers, body: Bytes::from(body) })
}

/// The URL and headers of `provider`'s model list, as the holder of `secret` sees it.
pub(crate) fn models_request(
    provider: &ProviderConfig,
    secret: Option<&Secret>,
) -> Result<(String, Vec<(HeaderName, HeaderValue)>), ProviderError> {
    let url = format!("{}/{}", provider.base_url, dialect(provider.kind).models_path());
    let mut headers = Vec::with_capacity(2 + provider.headers.len());
    identify(&mut headers, provider, secret)?;
    Ok((url, headers))
}

/// What every request to `provider` carries: the credential (marked sensitive, so no log or
/// debug print shows it), the API version where the dialect wants one, the configured extras.
fn identify(
    headers: &mut Vec<(HeaderName, HeaderValue)>,
    provider: &ProviderConfig,
    secret: Option<&Secret>,
) -> Result<(), ProviderError> {
    let dialect = dialect(provider.kind);
    if let Some(secret) = secret {
        let mut value = match dialect {
            Dialect::OpenAi => HeaderValue::from_str(&format!("Bearer {}", secret.expose())),
            Dialect::Anthropic | Dialect::Gemini => HeaderValue::from_str(secret.expose()),
        }
        .map_err(|_| ProviderError::Untranslatable {
            dialect,
            message: "the credential is not a valid header value".into(),
        })?;
        value.set_sensitive(true);
        let name = match dialect {
            Dialect::OpenAi => header::AUTHORIZATION,
            Dialect::Anthropic => HeaderName::from_static("x-api-key"),
            Dialect::Gemini => HeaderName::from_static("x-goog-api-key"),
        };
        headers.push((name, value));
    }
    if dialect == Dialect::Anthropic {
        headers.push((
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        ));
    }
    for (name, value) in &provider.headers {
        if let (Ok(name), Ok(value)) =
            (HeaderName::try_from(name.as_str()), HeaderValue::from_str(value))
        {
            headers.push((name, value));
        }
    }
    Ok(())
}
