//! `/v1`: the client API, in the OpenAI and Anthropic dialects. Handlers only pick the dialect
//! and hand the body to the proxy.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_providers::dialect::ClientDialect;

use super::ServerState;

/// `POST /v1/chat/completions` (OpenAI).
pub(super) async fn chat_completions(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.proxy.handle(ClientDialect::OpenAi, &headers, body).await
}

/// `POST /v1/messages` (Anthropic).
pub(super) async fn messages(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.proxy.handle(ClientDialect::Anthropic, &headers, body).await
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
