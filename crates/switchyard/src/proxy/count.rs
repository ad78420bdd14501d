//! `POST /v1/messages/count_tokens` and Gemini's `models/{model}:countTokens`: Claude Code
//! and Gemini CLI ask how large a conversation is before they send it. A target of the
//! client's own dialect counts exactly (Anthropic, Gemini), so the first eligible one of the
//! route answers; when the route has none (or none answers), the answer is an estimate and
//! says so in `x-switchyard-estimate`, so a client is never refused over a side question.
//!
//! Counting sends no prompt to a model and bills nothing, so its outcome charges no
//! resilience layer: a failure just moves on to the next target, then to the estimate.

use std::borrow::Cow;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use switchyard_core::routing::{Combo, plan};
use switchyard_core::text::check_model_name;
use switchyard_providers::chat::{ChatRequest, Part};
use switchyard_providers::dialect::{ClientDialect, Dialect};
use switchyard_providers::executor;
use switchyard_providers::gemini::Method;

use super::login::ClientLogin;
use super::refusal::{ApiError, Dialect as ErrorDialect, Refused};
use super::routes::Routes;
use super::upstream::{self, ClientRequest, Work};
use super::{ERROR_BODY_DEADLINE, Head, Proxy, refused_model};

/// Roughly four characters of English or code per token, the rule of thumb every vendor's
/// tokenizer documentation gives; an estimate is only ever used to budget a context.
const CHARS_PER_TOKEN: usize = 4;

/// Which counting a client asked for.
#[derive(Clone, Copy, Debug)]
pub enum Counting<'a> {
    /// Anthropic's `count_tokens`, the model in the body.
    Anthropic,
    /// Gemini's `countTokens`, the model in the path.
    Gemini { model: &'a str },
}

impl Counting<'_> {
    fn dialect(self) -> Dialect {
        match self {
            Self::Anthropic => Dialect::Anthropic,
            Self::Gemini { .. } => Dialect::Gemini,
        }
    }

    fn refused(self, error: ApiError) -> Refused {
        error.refused_in(match self {
            Self::Anthropic => ErrorDialect::Anthropic,
            Self::Gemini { .. } => ErrorDialect::Gemini,
        })
    }

    /// The estimate in the dialect's answer shape.
    fn estimated(self, body: &[u8]) -> serde_json::Value {
        match self {
            Self::Anthropic => json!({ "input_tokens": estimate(ClientDialect::Anthropic, body) }),
            Self::Gemini { .. } => json!({ "totalTokens": estimate_gemini(body) }),
        }
    }
}

/// Counts the tokens of a Messages body (or a Gemini `countTokens` body) for its model: the
/// first target of its route in the counting dialect that answers, else an estimate. Sent
/// through the proxy's one sender, but not an attempt of a client request: no plan beyond the
/// order, no trace, no retry, nothing charged.
pub(super) async fn count(
    proxy: &Proxy,
    counting: Counting<'_>,
    headers: &HeaderMap,
    query: Option<&str>,
    body: Bytes,
) -> Result<Response, Refused> {
    let routes = proxy.routes();
    let combo = combo_of(&routes, counting, &body).map_err(|refusal| counting.refused(refusal))?;
    let client = match counting {
        Counting::Anthropic => ClientDialect::Anthropic,
        Counting::Gemini { .. } => ClientDialect::Gemini(Method::Generate),
    };
    let inbound = ClientRequest {
        dialect: client,
        work: Work::Chat,
        model: None,
        body: &body,
        query,
        headers,
    };
    let now = proxy.clock.now();
    let plan = plan(&combo, |p| routes.roster(p), &proxy.orderer, &proxy.registry, now);
    let login = ClientLogin::of(headers, counting.dialect(), &proxy.login_salt);
    for candidate in &plan.candidates {
        let key = &candidate.key;
        let Some(provider) = routes.provider(&key.provider) else { continue };
        let model = combo.targets[candidate.target].model.as_str();
        let dialect = provider.dialect_for(model);
        if dialect != counting.dialect() {
            continue;
        }
        // A subscription counts with its caller's own login, as it answers.
        let login = login.as_ref();
        let Ok(secret) = proxy.secret_for(&routes, &key.provider, &key.credential, login).await
        else {
            continue;
        };
        let Ok(request) = upstream::count_tokens(provider, secret.as_ref(), model, &inbound) else {
            continue;
        };
        let wait = routes.config.timeouts.first_byte;
        match proxy.send(&routes, key, request, wait, dialect).await {
            Head::Answer(answer) => {
                if let Ok(counted) =
                    answer.into_bytes(ERROR_BODY_DEADLINE, executor::MAX_ANSWER).await
                {
                    let mut response =
                        ([(header::CONTENT_TYPE, "application/json")], counted).into_response();
                    if let Ok(label) = HeaderValue::from_str(&format!("{}/{model}", key.provider)) {
                        response.headers_mut().insert("x-switchyard-target", label);
                    }
                    return Ok(response);
                }
            }
            Head::Refused(refused) => {
                tracing::info!(target = %key, status = refused.status, "count_tokens refused; trying the next target");
            }
            Head::Unsent(_) => {
                tracing::info!(target = %key, "count_tokens failed; trying the next target");
            }
        }
    }
    let mut response = axum::Json(counting.estimated(&body)).into_response();
    response.headers_mut().insert("x-switchyard-estimate", HeaderValue::from_static("true"));
    Ok(response)
}

/// The combo the counted body's model names; the refusal when there is none.
fn combo_of<'r>(
    routes: &'r Routes,
    counting: Counting<'_>,
    body: &[u8],
) -> Result<Cow<'r, Combo>, ApiError> {
    let model = match counting {
        Counting::Gemini { model } => Cow::Borrowed(model),
        Counting::Anthropic => match ChatRequest::minimal(Dialect::Anthropic, body) {
            Some(request) => request.model,
            None => return Err(ApiError::bad_request("model: missing or not a string")),
        },
    };
    check_model_name(&model).map_err(|problem| refused_model(&problem))?;
    routes.resolve(&model).ok_or_else(|| {
        let message = routes.unknown_model(&model);
        ApiError::new(StatusCode::NOT_FOUND, "not_found_error", message)
    })
}

/// Tokens in a Gemini `countTokens` body: its `contents` (and the rest of a request), or the
/// whole request it wraps in `generateContentRequest`.
fn estimate_gemini(body: &[u8]) -> usize {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wrapped<'a> {
        #[serde(borrow)]
        generate_content_request: &'a serde_json::value::RawValue,
    }
    let client = ClientDialect::Gemini(Method::Generate);
    match serde_json::from_slice::<Wrapped<'_>>(body) {
        Ok(wrapped) => estimate(client, wrapped.generate_content_request.get().as_bytes()),
        Err(_) => estimate(client, body),
    }
}

/// Tokens in a request body of `client`'s dialect by the characters of its text, tool
/// definitions and tool calls; the raw body's size when it has no canonical form.
fn estimate(client: ClientDialect, body: &[u8]) -> usize {
    match client.parse_request(body) {
        Ok(request) => tokens_in(&request),
        Err(_) => body.len().div_ceil(CHARS_PER_TOKEN),
    }
}

/// Tokens in `request` by the characters of its text, tool definitions and tool calls: what
/// a count answers without an upstream, and what `auto` holds against a window.
pub(super) fn tokens_in(request: &ChatRequest<'_>) -> usize {
    let part_chars = |part: &Part<'_>| match part {
        Part::Text(text) => text.text.len(),
        Part::ToolUse(call) => call.name.len() + call.arguments.len(),
        Part::ToolResult(result) => result
            .content
            .iter()
            .map(|p| if let Part::Text(t) = p { t.text.len() } else { 0 })
            .sum(),
        Part::Thinking(thinking) => thinking.text.len(),
        _ => 0,
    };
    let chars: usize = request.system.iter().map(|t| t.text.len()).sum::<usize>()
        + request.messages.iter().flat_map(|m| &m.content).map(part_chars).sum::<usize>()
        + request
            .tools
            .iter()
            .map(|t| {
                t.name.len()
                    + t.description.as_ref().map_or(0, |d| d.len())
                    + t.parameters.map_or(0, |p| p.get().len())
            })
            .sum::<usize>();
    chars.div_ceil(CHARS_PER_TOKEN).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_grows_with_the_conversation_and_is_never_zero() {
        let small = br#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#;
        let large = br#"{"model":"m","max_tokens":1,"system":"you are a very careful engineer","messages":[{"role":"user","content":"please review this whole module for me"}]}"#;
        let estimate = |body| estimate(ClientDialect::Anthropic, body);
        assert_eq!(estimate(small), 1);
        assert!(estimate(large) > 10, "{}", estimate(large));
        let gemini = br#"{"contents":[{"role":"user","parts":[{"text":"please review this whole module for me"}]}]}"#;
        let wrapped = br#"{"generateContentRequest":{"model":"models/x","contents":[{"role":"user","parts":[{"text":"please review this whole module for me"}]}]}}"#;
        assert_eq!(estimate_gemini(gemini), 10);
        assert_eq!(estimate_gemini(wrapped), 10);
    }
}
