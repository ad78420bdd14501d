//! `/v1`: the client API, in the OpenAI (Chat, Responses, embeddings) and Anthropic dialects. Handlers only pick the dialect,
//! read the body (at most [`MAX_BODY_BYTES`], decoded first when it came compressed) and hand
//! it to the proxy. Every other `/v1` path answers a `404` in the client's dialect.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_providers::dialect::ClientDialect;
use switchyard_providers::embeddings::Shape;

use super::ServerState;
use super::encoding::{self, Coding, DecodeError};
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

/// `POST /v1/embeddings` (OpenAI): vectors of the input, from the model's route; a combo falls
/// back only between targets that embed into the same space.
pub(super) async fn embeddings(State(state): State<ServerState>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let caller = parts.extensions.remove::<LocalKey>();
    match read(body, &parts.headers, ClientDialect::OpenAi).await {
        Ok(body) => {
            Box::pin(state.proxy.embed(Shape::OpenAi, None, caller.as_ref(), &parts.headers, body))
                .await
                .into_response()
        }
        Err(refusal) => refusal,
    }
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
    match read(body, headers, client).await {
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

/// `GET /v1/responses`: the WebSocket transport of the Responses API (which Codex can be set
/// to try first) is not served. `426` says so at once, in the Responses error shape, so the client
/// falls back to HTTP `POST` rather than retrying an upgrade that cannot succeed; any other
/// `GET` is the wrong method.
pub(super) async fn responses_get(headers: HeaderMap) -> Response {
    let refusal = if is_websocket_upgrade(&headers) {
        ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "invalid_request_error",
            "Switchyard serves `/v1/responses` over HTTP only, not over WebSocket: send the \
             request as HTTP `POST /v1/responses` (in Codex, leave the provider's \
             `supports_websockets` off; see docs/api.md)",
        )
    } else {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "`GET /v1/responses` is not served: send `POST /v1/responses` (see docs/api.md)",
        )
    };
    let mut response = refusal.into_response_in(Dialect::OpenAi);
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    response
}

/// Whether a request asks to become a WebSocket: `Connection` lists `upgrade` and `Upgrade`
/// lists `websocket` (both case-insensitive, as RFC 6455 says).
fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    let lists = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    lists(header::CONNECTION, "upgrade") && lists(header::UPGRADE, "websocket")
}

/// Any other `/v1` path, with any method: a `404` in the client's dialect that names the path
/// and the routes there are, so an SDK shows that rather than a bare "Not Found".
pub(super) async fn no_such_route(method: http::Method, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path();
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        format!(
            "Switchyard serves no `{method} {path}`: its `/v1` routes are \
             `POST /v1/chat/completions`, `POST /v1/responses`, `POST /v1/messages`, \
             `POST /v1/messages/count_tokens`, `POST /v1/embeddings` and `GET /v1/models` \
             (see docs/api.md)"
        ),
    )
    .into_response_in(dialect_of(path, &headers))
}

/// The dialect of a request to no known route: Anthropic's under `/v1/messages` or when it
/// carries what only Anthropic's clients send (`anthropic-version`, or the key in
/// `x-api-key`), else OpenAI's, which every other `/v1` client reads.
fn dialect_of(path: &str, headers: &HeaderMap) -> Dialect {
    match Dialect::of_path(path) {
        Dialect::OpenAi
            if headers.contains_key("anthropic-version") || headers.contains_key("x-api-key") =>
        {
            Dialect::Anthropic
        }
        dialect => dialect,
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
    match read(body, &headers, ClientDialect::Anthropic).await {
        Ok(body) => state
            .proxy
            .count_tokens(Counting::Anthropic, &headers, uri.query(), body)
            .await
            .into_response(),
        Err(refusal) => refusal,
    }
}

/// The whole body, decoded when it was sent compressed (`Content-Encoding`, see
/// [`encoding`]), or the refusal in the route's dialect: `413` past [`MAX_BODY_BYTES`] (told
/// by `Content-Length` before anything is read, else once the limit is crossed; for a
/// compressed body, the limit is on what it decodes to), `415` for a coding not served, `400`
/// when the client stopped sending halfway or the body is not in the coding it claims.
pub(super) async fn read(
    body: Body,
    headers: &HeaderMap,
    client: ClientDialect,
) -> Result<Bytes, Response> {
    plain_body(body, headers)
        .await
        .map_err(|refusal| refusal.into_response_in(Dialect::from(client)))
}

/// [`read`]'s work, its refusal not yet rendered.
async fn plain_body(body: Body, headers: &HeaderMap) -> Result<Bytes, ApiError> {
    // Checked before the body is read: an unknown coding is refused without waiting for it.
    let coding = Coding::of(headers.get(header::CONTENT_ENCODING).map(HeaderValue::as_bytes))
        .map_err(|refused| decode_refusal(&refused))?;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = axum::body::HttpBody::size_hint(&body).lower();
    if usize::try_from(declared).map_or(true, |n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let sent = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(error) if past_limit(&error) => return Err(too_large()),
        Err(error) => {
            return Err(ApiError::bad_request(format!("cannot read the request body: {error}")));
        }
    };
    if coding == Coding::Identity {
        return Ok(sent);
    }
    // Decoding is CPU work of up to tens of milliseconds (32 MiB out): off the runtime's
    // threads, so other requests' streams keep flowing meanwhile.
    let decoded = tokio::task::spawn_blocking(move || {
        encoding::decode(coding, &sent, MAX_BODY_BYTES).map(|plain| plain.map_or(sent, Bytes::from))
    })
    .await;
    match decoded {
        Ok(Ok(plain)) => Ok(plain),
        Ok(Err(refused)) => Err(decode_refusal(&refused)),
        Err(error) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            format!("decoding the request body failed: {error}"),
        )),
    }
}

/// The answer to a body that could not be decoded: the status says whose fault and what kind.
fn decode_refusal(refused: &DecodeError) -> ApiError {
    let status = match *refused {
        DecodeError::Unsupported(_) | DecodeError::Stacked(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        DecodeError::TooLarge { .. } | DecodeError::WindowTooLarge { .. } => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        DecodeError::Corrupt { .. } => StatusCode::BAD_REQUEST,
    };
    let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "request_too_large"
    } else {
        "invalid_request_error"
    };
    ApiError::new(status, kind, refused.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|&(name, value)| (name.parse().unwrap(), HeaderValue::from_static(value)))
            .collect()
    }

    #[test]
    fn an_unknown_path_is_answered_in_the_dialect_its_path_or_headers_show() {
        let rows = [
            ("/v1/nothing", headers(&[("authorization", "Bearer k")]), Dialect::OpenAi),
            ("/v1/messages/batches", headers(&[("authorization", "Bearer k")]), Dialect::Anthropic),
            ("/v1/complete", headers(&[("x-api-key", "k")]), Dialect::Anthropic),
            ("/v1/files", headers(&[("anthropic-version", "2023-06-01")]), Dialect::Anthropic),
            ("/v1", HeaderMap::new(), Dialect::OpenAi),
        ];
        for (path, headers, dialect) in rows {
            assert_eq!(dialect_of(path, &headers), dialect, "{path}");
        }
    }

    #[test]
    fn only_a_request_naming_both_upgrade_and_websocket_is_a_websocket_upgrade() {
        let rows = [
            (headers(&[("connection", "Upgrade"), ("upgrade", "websocket")]), true),
            (headers(&[("connection", "keep-alive, upgrade"), ("upgrade", "WebSocket")]), true),
            (headers(&[("upgrade", "websocket")]), false),
            (headers(&[("connection", "upgrade"), ("upgrade", "h2c")]), false),
            (HeaderMap::new(), false),
        ];
        for (headers, upgrade) in rows {
            assert_eq!(is_websocket_upgrade(&headers), upgrade, "{headers:?}");
        }
    }
}
