//! `/v1beta`: the client API in Gemini's dialect (Gemini CLI, the `google-genai` SDKs).
//! Handlers only split `models/{model}:{method}`, read the body and hand both to the proxy.
//!
//! The model is in the path, so a Switchyard name with a slash (`provider/model`) is
//! `models/provider/model:generateContent`. The query (`alt=sse`, the `key` the front door
//! read) goes no further than here: upstreams get URLs of their own.

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse as _, Response};
use serde_json::{Value, json};
use switchyard_providers::dialect::ClientDialect;
use switchyard_providers::embeddings::Shape;
use switchyard_providers::gemini::Method;

use super::ServerState;
use super::error::{ApiError, Dialect};
use super::v1::read;
use crate::keys::LocalKey;
use crate::proxy::Counting;

/// What `POST /v1beta/models/{model}:{method}` asks.
#[derive(Debug, PartialEq, Eq)]
enum Call<'p> {
    Generate(&'p str, Method),
    CountTokens(&'p str),
    /// `:embedContent` or `:batchEmbedContents`.
    Embed(&'p str, Shape),
}

/// `{model}:{method}` (the part of the path after `models/`), and `alt=sse` from the query.
fn call<'p>(rest: &'p str, query: Option<&str>) -> Result<Call<'p>, ApiError> {
    let Some((model, method)) = rest.rsplit_once(':') else {
        return Err(not_found(format!(
            "`models/{rest}` names no method: post to `models/{{model}}:generateContent`, \
             `:streamGenerateContent`, `:countTokens`, `:embedContent` or `:batchEmbedContents`"
        )));
    };
    let sse = query.is_some_and(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .any(|(name, value)| name == "alt" && value == "sse")
    });
    match method {
        "generateContent" => Ok(Call::Generate(model, Method::Generate)),
        "streamGenerateContent" if sse => Ok(Call::Generate(model, Method::StreamSse)),
        "streamGenerateContent" => Ok(Call::Generate(model, Method::StreamArray)),
        "countTokens" => Ok(Call::CountTokens(model)),
        "embedContent" => Ok(Call::Embed(model, Shape::GeminiOne)),
        "batchEmbedContents" => Ok(Call::Embed(model, Shape::GeminiBatch)),
        other => Err(not_found(format!(
            "Switchyard does not serve `:{other}`; it serves `:generateContent`, \
             `:streamGenerateContent`, `:countTokens`, `:embedContent` and `:batchEmbedContents`"
        ))),
    }
}

fn not_found(message: String) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found_error", message)
}

/// `POST /v1beta/models/{model}:{method}`.
pub(super) async fn post_model(
    State(state): State<ServerState>,
    caller: Option<Extension<LocalKey>>,
    Path(rest): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let call = match call(&rest, uri.query()) {
        Ok(call) => call,
        Err(refusal) => return refusal.into_response_in(Dialect::Gemini),
    };
    let client = ClientDialect::Gemini(Method::Generate);
    let body = match read(body, &headers, client).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let caller = caller.map(|Extension(key)| key);
    match call {
        // Boxed, as `/v1`'s are (`v1::proxied`): the handler's future stays small.
        Call::Generate(model, method) => Box::pin(state.proxy.handle_named(
            ClientDialect::Gemini(method),
            model,
            caller.as_ref(),
            &headers,
            body,
        ))
        .await
        .into_response(),
        Call::CountTokens(model) => state
            .proxy
            .count_tokens(Counting::Gemini { model }, &headers, None, body)
            .await
            .into_response(),
        Call::Embed(model, shape) => {
            Box::pin(state.proxy.embed(shape, Some(model), caller.as_ref(), &headers, body))
                .await
                .into_response()
        }
    }
}

/// One model as Gemini lists it.
fn model_entry(id: &str) -> Value {
    json!({
        "name": format!("models/{id}"),
        "baseModelId": id,
        "version": "switchyard",
        "displayName": id,
        "description": "routed by Switchyard",
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}

/// `GET /v1beta/models`: every combo and listed provider model, in Gemini's list shape.
pub(super) async fn models(State(state): State<ServerState>) -> Response {
    let routes = state.proxy.routes();
    let models: Vec<Value> = routes.model_names().map(|id| model_entry(&id)).collect();
    axum::Json(json!({ "models": models })).into_response()
}

/// `GET /v1beta/models/{model}`: the model when a request for it would route somewhere.
pub(super) async fn model(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    let routes = state.proxy.routes();
    if routes.resolve(&name).is_some() {
        axum::Json(model_entry(&name)).into_response()
    } else {
        not_found(routes.unknown_model(&name)).into_response_in(Dialect::Gemini)
    }
}

/// Any other `/v1beta` path, or method: Gemini's 404.
pub(super) async fn no_such_route(uri: Uri) -> Response {
    not_found(format!(
        "Switchyard serves no `{}` in Gemini's API: it serves `GET /v1beta/models`, \
         `GET /v1beta/models/{{model}}` and `POST /v1beta/models/{{model}}:generateContent`, \
         `:streamGenerateContent`, `:countTokens`, `:embedContent` and `:batchEmbedContents`",
        uri.path()
    ))
    .into_response_in(Dialect::Gemini)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_names_the_model_and_the_method_and_alt_sse_picks_the_framing() {
        let generate = call("gemini-2.5-flash:generateContent", None).unwrap();
        assert_eq!(generate, Call::Generate("gemini-2.5-flash", Method::Generate));
        let sse = call("an/claude:streamGenerateContent", Some("alt=sse")).unwrap();
        assert_eq!(sse, Call::Generate("an/claude", Method::StreamSse));
        let array = call("m:streamGenerateContent", Some("key=k")).unwrap();
        assert_eq!(array, Call::Generate("m", Method::StreamArray));
        assert_eq!(call("m:countTokens", None).unwrap(), Call::CountTokens("m"));
        assert_eq!(call("m:embedContent", None).unwrap(), Call::Embed("m", Shape::GeminiOne));
        let batch = call("m:batchEmbedContents", None).unwrap();
        assert_eq!(batch, Call::Embed("m", Shape::GeminiBatch));
        let unknown = call("m:predict", None).unwrap_err();
        assert!(unknown.message.contains(":predict"), "{}", unknown.message);
        assert_eq!(call("m", None).unwrap_err().status, StatusCode::NOT_FOUND);
    }
}
