//! `/v1`: the client API, in the OpenAI (Chat, Responses) and Anthropic dialects. Handlers only pick the dialect,
//! read the body (at most [`MAX_BODY_BYTES`]) and hand it to the proxy.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_providers::dialect::ClientDialect;

use super::ServerState;
use super::error::{ApiError, Dialect};
use crate::keys::LocalKey;
use crate::proxy::Counting;

/// The largest client body read. A conversation carries every earlier turn, screenshots
/// included (base64), so axum's 2 MB default refused ordinary coding-agent requests; 32 MiB is
/// what Anthropic's Messages API itself takes.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// `POST /v1/chat/completions` (OpenAI).
pub(super) async fn chat_completions(state: State<ServerState>, request: Request) -> Response {
    proxied(ClientDialect::OpenAi, state, request).await
}

/// `POST /v1/messages` (Anthropic). Claude Code adds `?beta=true`; the query goes upstream
/// with the body when the target speaks Anthropic.
pub(super) async fn messages(state: State<ServerState>, request: Request) -> Response {
    proxied(ClientDialect::Anthropic, state, request).await
}

/// `POST /v1/responses` (OpenAI Responses: Codex CLI, the newest SDKs).
pub(super) async fn responses(state: State<ServerState>, request: Request) -> Response {
    proxied(ClientDialect::Responses, state, request).await
}

/// The `/v1` route a connection answers itself, past the front door but not through the
/// router (`connections`): `POST` to one of the three paths above. Their handlers take nothing
/// but the state and the request, so calling them directly answers as the router would.
pub(super) fn direct(method: &http::Method, path: &str) -> Option<ClientDialect> {
    if method != http::Method::POST {
        return None;
    }
    match path {
        "/v1/chat/completions" => Some(ClientDialect::OpenAi),
        "/v1/messages" => Some(ClientDialect::Anthropic),
        "/v1/responses" => Some(ClientDialect::Responses),
        _ => None,
    }
}

/// One client request in `client`'s dialect, read and handed to the proxy with the local key
/// that made it (the front door put it in the request's extensions).
pub(super) async fn proxied(
    client: ClientDialect,
    State(state): State<ServerState>,
    request: Request,
) -> Response {
    // The request whole, not its `Uri` and `HeaderMap` extracted: those extractors copy them.
    let (mut parts, body) = request.into_parts();
    let caller = parts.extensions.remove::<LocalKey>();
    let (uri, headers) = (&parts.uri, &parts.headers);
    match read(body, client).await {
        // Boxed: the proxy's future is large, and axum's and hyper's layers move the
        // handler's future several times before and while it runs; a box moves as a pointer
        //.
        Ok(body) => {
            Box::pin(state.proxy.handle(client, caller.as_ref(), headers, uri.query(), body))
                .await
                .into_response()
        }
        Err(refusal) => refusal,
    }
}

/// `POST /v1/messages/count_tokens` (Anthropic): answered by an Anthropic target of the route,
/// else estimated (and marked so in `x-switchyard-estimate`).
pub(super) async fn count_tokens(
    State(state): State<ServerState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match read(body, ClientDialect::Anthropic).await {
        Ok(body) => state
            .proxy
            .count_tokens(Counting::Anthropic, &headers, uri.query(), body)
            .await
            .into_response(),
        Err(refusal) => refusal,
    }
}

/// The whole body, or the refusal in the route's dialect: `413` past [`MAX_BODY_BYTES`] (told
/// by `Content-Length` before anything is read, else once the limit is crossed), `400` when
/// the client stopped sending halfway.
pub(super) async fn read(body: Body, client: ClientDialect) -> Result<Bytes, Response> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = axum::body::HttpBody::size_hint(&body).lower();
    let refusal = if usize::try_from(declared).map_or(true, |n| n > MAX_BODY_BYTES) {
        too_large()
    } else {
        match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
            Ok(bytes) => return Ok(bytes),
            Err(error) if past_limit(&error) => too_large(),
            Err(error) => ApiError::bad_request(format!("cannot read the request body: {error}")),
        }
    };
    Err(refusal.into_response_in(Dialect::from(client)))
}

/// Whether reading failed because the body outgrew the limit.
fn past_limit(error: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// `GET /v1/models`: every combo and every listed provider model, in OpenAI's list shape
/// (which Anthropic's SDKs also read: `data[].id`).
pub(super) async fn models(State(state): State<ServerState>) -> Json<Value> {
    let routes = state.proxy.routes();
    let data: Vec<Value> = routes
        .model_names()
        .map(|id| json!({ "id": id, "object": "model", "created": 0, "owned_by": "switchyard", "type": "model", "display_name": id }))
        .collect();
    Json(json!({ "object": "list", "data": data, "has_more": false }))
}
