//! `/api`: the management API (a first slice: health, resets, lockouts, lockout settings, the
//! request log) and `/metrics`. Handlers parse, call one service, render. Invalid input gets a
//! 4xx naming the field and changes nothing.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_core::CandidateKey;
use switchyard_core::resilience::registry::ResetScope;

use super::ServerState;
use super::error::{ApiError, Dialect};

fn invalid(field: &str, problem: impl std::fmt::Display) -> Response {
    let mut error = ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_request_error",
        format!("{field}: {problem}"),
    );
    error.detail = Some(json!({ "field": field }));
    error.into_response_in(Dialect::OpenAi)
}

/// `GET /api/monitoring/health`: every breaker, benched credential and active lockout.
pub(super) async fn health(State(state): State<ServerState>) -> Response {
    Json(state.services.health()).into_response()
}

/// `POST /api/resilience/reset` with `{"scope": "all" | "provider" | "credential" | "model" | "lockout", ...}`.
pub(super) async fn reset(State(state): State<ServerState>, body: axum::body::Bytes) -> Response {
    let scope: ResetScope = match serde_json::from_slice(&body) {
        Ok(scope) => scope,
        Err(error) => return invalid("scope", error),
    };
    Json(state.services.reset(&scope)).into_response()
}

/// `GET /api/resilience/lockouts`: the active lockouts with remaining time.
pub(super) async fn lockouts(State(state): State<ServerState>) -> Response {
    Json(state.services.lockouts()).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LockoutQuery {
    provider: Option<String>,
    credential: Option<String>,
    model: Option<String>,
}

/// `DELETE /api/resilience/lockouts`: all of them, or one with `?provider=&credential=&model=`.
pub(super) async fn clear_lockouts(
    State(state): State<ServerState>,
    query: Result<Query<LockoutQuery>, QueryRejection>,
) -> Response {
    let Ok(Query(q)) = query else {
        return invalid("query", "expected provider, credential and model, or nothing");
    };
    let key = match (q.provider, q.credential, q.model) {
        (None, None, None) => None,
        (Some(p), Some(c), Some(m)) => Some(CandidateKey::new(p, c, m)),
        _ => {
            return invalid(
                "query",
                "give provider, credential and model together, or none of them for all",
            );
        }
    };
    Json(json!({ "cleared": state.services.clear_lockouts(key) })).into_response()
}

/// `GET /api/settings/model_lockouts`.
pub(super) async fn lockout_settings(State(state): State<ServerState>) -> Response {
    Json(state.services.lockout_settings()).into_response()
}

/// `PATCH /api/settings/model_lockouts`: applied live, saved, or refused with the field named.
pub(super) async fn patch_lockout_settings(
    State(state): State<ServerState>,
    body: axum::body::Bytes,
) -> Response {
    let patch: Value = match serde_json::from_slice(&body) {
        Ok(patch) => patch,
        Err(error) => return invalid("model_lockouts", error),
    };
    match state.services.patch_lockout_settings(&patch).await {
        Ok(settings) => Json(settings).into_response(),
        Err(error) => invalid(&error.field, error.problem),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Page {
    limit: Option<usize>,
}

/// `GET /api/requests?limit=N`: the newest requests with their routing traces.
pub(super) async fn requests(
    State(state): State<ServerState>,
    query: Result<Query<Page>, QueryRejection>,
) -> Response {
    let Ok(Query(page)) = query else { return invalid("limit", "expected a number") };
    let limit = page.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return invalid("limit", format!("{limit} is out of range; allowed 1..=1000"));
    }
    let records: Vec<Value> = state
        .services
        .requests(limit)
        .into_iter()
        .map(|r| {
            json!({
                "at": r.at, "dialect": r.dialect, "model": r.model, "served_by": r.served_by,
                "status": r.status, "attempts": r.attempts, "duration_ms": r.duration_ms,
                "trace": serde_json::from_str::<Value>(&r.trace).unwrap_or(Value::Null),
            })
        })
        .collect();
    Json(records).into_response()
}

/// `GET /metrics`: Prometheus text.
pub(super) async fn metrics(State(state): State<ServerState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.services.metrics())
        .into_response()
}
