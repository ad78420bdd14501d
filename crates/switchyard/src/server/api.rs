//! `/api`: the management API, and `/metrics`. Handlers parse, call one service, render.
//! Invalid input gets a 4xx naming the field and changes nothing.

pub(super) mod catalog;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_core::CandidateKey;
use switchyard_core::resilience::registry::ResetScope;
use ts_rs::TS;

use super::ServerState;
use super::error::{ApiError, Dialect};
use super::ui_sessions::{SessionId, SignIn};
use crate::config::{EditError, Problem};
use crate::descriptors::ConnectionCap;
use crate::services::{RequestQuery, RoutingState, Section, TryRequest, UsageFormat, UsageQuery};

/// What a `DELETE` removed.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub(crate) struct Deleted {
    pub deleted: String,
}

/// How many lockouts a `DELETE /api/resilience/lockouts` cleared.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub(crate) struct Cleared {
    pub cleared: usize,
}

/// The local API key a `DELETE /api/keys/{id}` revoked.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub(crate) struct Revoked {
    pub revoked: String,
}

fn invalid(field: &str, problem: impl std::fmt::Display) -> Response {
    refusal(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request_error", field, problem)
}

/// An error naming the field it is about, in `error.message` and in `error.switchyard.field`.
fn refusal(
    status: StatusCode,
    kind: &'static str,
    field: &str,
    problem: impl std::fmt::Display,
) -> Response {
    let mut error = ApiError::new(status, kind, format!("{field}: {problem}"));
    error.detail = Some(json!({ "field": field }));
    error.into_response_in(Dialect::OpenAi)
}

/// The response for a refused edit.
fn edit_error(error: &EditError) -> Response {
    match error {
        EditError::Invalid(p) => invalid(&p.field, &p.problem),
        EditError::NotFound(p) => {
            refusal(StatusCode::NOT_FOUND, "not_found_error", &p.field, &p.problem)
        }
        EditError::Conflict(p) => {
            refusal(StatusCode::CONFLICT, "conflict_error", &p.field, &p.problem)
        }
        EditError::Upstream(p) => {
            refusal(StatusCode::BAD_GATEWAY, "upstream_error", &p.field, &p.problem)
        }
        EditError::ReadOnly(message) => {
            refusal(StatusCode::CONFLICT, "read_only_error", "(config)", message)
        }
        EditError::Save(_) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "api_error", error.to_string())
                .into_response_in(Dialect::OpenAi)
        }
    }
}

/// A service's answer: the value as JSON, or the refusal.
fn answer<T: Serialize>(result: Result<T, EditError>) -> Response {
    result.map_or_else(|e| edit_error(&e), |value| Json(value).into_response())
}

/// A service's answer to a create: `201` with the value, or the refusal.
fn created<T: Serialize>(result: Result<T, EditError>) -> Response {
    result
        .map_or_else(|e| edit_error(&e), |value| (StatusCode::CREATED, Json(value)).into_response())
}

/// A JSON body as `T`, or the field that does not fit (render it with [`malformed`]).
fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        Problem::new(if path == "." { "(body)" } else { &path }, e.inner())
    })
}

/// The 422 for a body that does not fit its form.
fn malformed(problem: &Problem) -> Response {
    invalid(&problem.field, &problem.problem)
}

/// `GET /api/monitoring/health`: every breaker, benched credential and active lockout.
pub(super) async fn health(State(state): State<ServerState>) -> Response {
    Json(state.services.health()).into_response()
}

/// `GET /api/doctor`: every finding, with its evidence, digest and suggested action.
pub(super) async fn doctor(State(state): State<ServerState>) -> Response {
    Json(state.services.doctor()).into_response()
}

/// `POST /api/doctor/{id}/apply` with `{ "digest": ..., "dry_run": false }`: applies one finding
/// if its evidence is still the one shown (409 otherwise, nothing changed).
pub(super) async fn apply_finding(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    match body::<crate::services::ApplyRequest>(&bytes) {
        Ok(request) => answer(state.services.apply_finding(&id, &request).await),
        Err(problem) => malformed(&problem),
    }
}

/// Any other `/api/...`: a typed 404 (rather than an empty one), naming the path.
pub(super) async fn no_such_route(uri: http::Uri) -> Response {
    refusal(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "path",
        format!("no management API route {}; see docs/api.md", uri.path()),
    )
}

/// `GET /api/server`: where clients reach this server, and what it is.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub(crate) struct ServerInfo {
    /// The base URL editors and agents are pointed at: `http://127.0.0.1:PORT/v1`.
    pub endpoint: String,
    pub version: String,
    /// How many connections may be open at once, and the limits that set it; `null` when this
    /// router is not the one serving HTTP (the desktop window's in-process calls).
    pub connections: Option<ConnectionCap>,
}

pub(super) async fn server_info(State(state): State<ServerState>) -> Response {
    Json(ServerInfo {
        endpoint: format!("http://127.0.0.1:{}/v1", state.port),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        connections: state.connections,
    })
    .into_response()
}

/// `GET /api/catalogue`: the provider presets and their models' facts compiled into this
/// binary (`switchyard-catalogue`), for "Add from catalogue" and the first-run flow.
pub(super) async fn catalogue() -> Response {
    Json(switchyard_catalogue::catalogue()).into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LocalQuery {
    /// `SERVER:PORT` pairs to probe instead of the app's (`LocalPorts` syntax).
    #[serde(default)]
    ports: Option<String>,
}

/// `GET /api/local-servers[?ports=ollama:11434,...]`: the model servers that answer on this
/// machine's loopback ports (`LocalServers`), for "Runs on this machine" and `switchyard
/// providers detect`. Always `200`: a port where nothing answers is an answer too.
pub(super) async fn local_servers(
    State(state): State<ServerState>,
    query: Result<Query<LocalQuery>, QueryRejection>,
) -> Response {
    use switchyard_catalogue::local::LocalPorts;
    let Ok(Query(q)) = query else { return invalid("query", "only ports is accepted") };
    let ports = match q.ports.as_deref().map(LocalPorts::parse).transpose() {
        Ok(ports) => ports,
        Err(problem) => return invalid("ports", problem),
    };
    Json(state.services.local_servers(ports.as_ref()).await).into_response()
}

/// What `POST /api/connect` fills the lines in with; both optional.
#[derive(Debug, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConnectRequest {
    /// A combo or `provider/model` [default: the first combo].
    #[serde(default)]
    #[ts(optional)]
    pub model: Option<String>,
    /// A local key [default: a placeholder].
    #[serde(default)]
    #[ts(optional)]
    pub key: Option<String>,
}

/// `POST /api/connect`: the "Connect your tools" lines of every tool (`ConnectGuide[]`) for
/// this server's port. A POST so a key travels in the body, never in a URL or a log line.
pub(super) async fn connect(
    State(state): State<ServerState>,
    bytes: axum::body::Bytes,
) -> Response {
    use crate::connect::{Endpoint, PLACEHOLDER_KEY, PLACEHOLDER_MODEL, Tool, guide};
    let request = if bytes.is_empty() {
        ConnectRequest { model: None, key: None }
    } else {
        match body::<ConnectRequest>(&bytes) {
            Ok(request) => request,
            Err(problem) => return malformed(&problem),
        }
    };
    let model = request
        .model
        .or_else(|| state.services.combos().first().map(|c| c.name.clone()))
        .unwrap_or_else(|| PLACEHOLDER_MODEL.to_owned());
    let key = request.key.unwrap_or_else(|| PLACEHOLDER_KEY.to_owned());
    let endpoint = Endpoint { port: state.port, key, model };
    Json(Tool::ALL.map(|tool| guide(tool, &endpoint))).into_response()
}

/// `GET /api/routing`: whether routing is paused.
pub(super) async fn routing(State(state): State<ServerState>) -> Response {
    Json(state.services.routing()).into_response()
}

/// `PUT /api/routing` with `{"paused": true | false}`.
pub(super) async fn set_routing(
    State(state): State<ServerState>,
    bytes: axum::body::Bytes,
) -> Response {
    match body::<RoutingState>(&bytes) {
        Ok(routing) => Json(state.services.set_routing(routing)).into_response(),
        Err(problem) => malformed(&problem),
    }
}

/// `POST /api/try` with `{"model", "prompt"}`: the answer and its routing trace.
pub(super) async fn try_model(
    State(state): State<ServerState>,
    bytes: axum::body::Bytes,
) -> Response {
    match body::<TryRequest>(&bytes) {
        Ok(request) => answer(state.services.try_model(request).await),
        Err(problem) => malformed(&problem),
    }
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
    Json(Cleared { cleared: state.services.clear_lockouts(key) }).into_response()
}

/// `GET /api/settings`: every section.
pub(super) async fn settings(State(state): State<ServerState>) -> Response {
    Json(state.services.settings()).into_response()
}

fn section(name: &str) -> Result<Section, Box<Response>> {
    Section::parse(name).ok_or_else(|| {
        let known: Vec<&str> = Section::ALL.iter().map(|s| s.name()).collect();
        let problem = format!("no settings section \"{name}\"; sections: {known:?}");
        Box::new(refusal(StatusCode::NOT_FOUND, "not_found_error", "section", problem))
    })
}

/// `GET /api/settings/{section}`.
pub(super) async fn settings_section(
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Response {
    match section(&name) {
        Ok(section) => Json(state.services.section(section)).into_response(),
        Err(response) => *response,
    }
}

/// `PATCH /api/settings/{section}` with the fields to change: applied live, saved, or refused
/// with the field named.
pub(super) async fn patch_settings_section(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    let section = match section(&name) {
        Ok(section) => section,
        Err(response) => return *response,
    };
    let patch: Value = match serde_json::from_slice(&bytes) {
        Ok(patch) => patch,
        Err(error) => return invalid(section.name(), error),
    };
    answer(state.services.patch_section(section, &patch).await)
}

/// `GET /api/requests?limit=&offset=&model=&provider=&outcome=&fallback=`: the newest requests
/// with their routing traces.
pub(super) async fn requests(
    State(state): State<ServerState>,
    query: Result<Query<RequestQuery>, QueryRejection>,
) -> Response {
    let query = match query {
        Ok(Query(query)) => query,
        Err(rejection) => return invalid("query", rejection.body_text()),
    };
    match query.limit() {
        Ok(limit) => Json(state.services.requests(&query, limit).await).into_response(),
        Err(problem) => invalid("limit", problem),
    }
}

/// The query of `GET /api/usage`, or the parameter at fault.
fn usage_query(
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<UsageQuery, Problem> {
    let Query(pairs) = query.map_err(|r| Problem::new("query", r.body_text()))?;
    UsageQuery::from_pairs(&pairs)
}

/// The `400` for a usage query parameter that does not fit, naming it.
fn bad_parameter(p: &Problem) -> Response {
    refusal(StatusCode::BAD_REQUEST, "invalid_request_error", &p.field, &p.problem)
}

/// `GET /api/usage?from=&to=&bucket=&group_by=&key=&combo=&provider=&model=&format=`: the
/// usage aggregates as chart series (`UsageReport`), or as CSV with `format=csv`.
pub(super) async fn usage(
    State(state): State<ServerState>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    match usage_query(query) {
        Ok(query) if query.format == Some(UsageFormat::Csv) => usage_csv_of(&state, &query).await,
        Ok(query) => match state.services.usage(&query).await {
            Ok(report) => Json(report).into_response(),
            Err(p) => bad_parameter(&p),
        },
        Err(p) => bad_parameter(&p),
    }
}

/// `GET /api/usage.csv?…`: the same report as CSV, with a header row.
pub(super) async fn usage_csv(
    State(state): State<ServerState>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    match usage_query(query) {
        Ok(query) => usage_csv_of(&state, &query).await,
        Err(p) => bad_parameter(&p),
    }
}

async fn usage_csv_of(state: &ServerState, query: &UsageQuery) -> Response {
    match state.services.usage_csv(query).await {
        Ok(text) => (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (header::CONTENT_DISPOSITION, "attachment; filename=\"switchyard-usage.csv\""),
            ],
            text,
        )
            .into_response(),
        Err(p) => bad_parameter(&p),
    }
}

/// `GET /api/usage/budgets`: every configured budget and what it has spent (`BudgetView[]`).
pub(super) async fn budgets(State(state): State<ServerState>) -> Response {
    Json(state.services.budgets()).into_response()
}

/// `GET /metrics`: Prometheus text.
pub(super) async fn metrics(State(state): State<ServerState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.services.metrics())
        .into_response()
}

/// `GET /api/events`: server-sent events, one per state change (`data:` is the change as JSON).
/// A consumer that falls behind gets an `event: resync` and should re-read the health page.
/// Requests that completed arrive as `event: request` (`data: {"at": ms}`, the newest one's
/// time, or `{}` when only missed ones remain), one frame per burst
/// of them, so a chart of usage can re-read without polling however busy the proxy is.
pub(super) async fn events(State(state): State<ServerState>) -> Response {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let receivers = (state.services.events(), state.services.requests_done());
    let stream = futures_util::stream::unfold(receivers, |(mut health, mut done)| async move {
        let frame = tokio::select! {
            event = health.recv() => match event {
                Ok(event) => {
                    format!("data: {}\n\n", serde_json::to_string(&event).unwrap_or_default())
                }
                Err(RecvError::Lagged(_)) => "event: resync\ndata: {}\n\n".to_owned(),
                Err(RecvError::Closed) => return None,
            },
            record = done.recv() => {
                let mut at = match record {
                    Ok(record) => Some(record.at),
                    // Missed some: they completed all the same.
                    Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return None,
                };
                // Whatever else already completed joins this frame.
                loop {
                    match done.try_recv() {
                        Ok(record) => at = Some(record.at),
                        Err(TryRecvError::Lagged(_)) => {}
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
                }
                match at {
                    Some(at) => format!("event: request\ndata: {{\"at\":{}}}\n\n", at.0),
                    None => "event: request\ndata: {}\n\n".to_owned(),
                }
            }
        };
        Some((Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(frame)), (health, done)))
    });
    let mut response = axum::body::Body::from_stream(stream).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
    response
}

fn key_error(error: &crate::keys::KeyError) -> Response {
    match error {
        crate::keys::KeyError::Name(_) => invalid("name", error),
        crate::keys::KeyError::NameTaken { .. } => {
            refusal(StatusCode::CONFLICT, "conflict_error", "name", error.to_string())
        }
        crate::keys::KeyError::Ambiguous { .. } => {
            refusal(StatusCode::CONFLICT, "conflict_error", "id", error.to_string())
        }
        _ => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "api_error", error.to_string())
            .into_response_in(Dialect::OpenAi),
    }
}

/// `POST /api/session` with the management token: a UI session (`UiSession`), for the web
/// UI to use instead of the token from then on. `no-store`: the answer carries a secret.
pub(super) async fn open_session(
    State(state): State<ServerState>,
    Extension(sign_in): Extension<SignIn>,
) -> Response {
    match state.ui_sessions.open(&sign_in, state.services.now()) {
        Ok(session) => (
            StatusCode::CREATED,
            [(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"))],
            Json(session),
        )
            .into_response(),
        Err(error) => key_error(&error),
    }
}

/// `POST /api/session/code`: a new sign-in link (`SignInLink`) for `switchyard link`.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub(crate) struct SignInLink {
    /// `http://127.0.0.1:PORT/#code=CODE`: opens the web UI signed in, once.
    pub link: String,
    /// How long the code in it may be exchanged.
    #[ts(type = "number")]
    pub expires_in_ms: u64,
}

/// `POST /api/session/code` with the management token: a sign-in link for the web UI, as
/// `serve` prints at start (a session may not mint one: it would outlive itself). `no-store`.
pub(super) async fn sign_in_link(State(state): State<ServerState>) -> Response {
    match state.sign_in_link() {
        Some(link) => (
            StatusCode::CREATED,
            [(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"))],
            Json(SignInLink {
                link,
                expires_in_ms: switchyard_core::clock::millis(super::CODE_LIFETIME),
            }),
        )
            .into_response(),
        None => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "code",
            "cannot issue a sign-in code (see the server's log)",
        ),
    }
}

/// `DELETE /api/session` with a UI session: signs it out.
pub(super) async fn close_session(
    State(state): State<ServerState>,
    Extension(session): Extension<SessionId>,
) -> Response {
    state.ui_sessions.close(&session);
    StatusCode::NO_CONTENT.into_response()
}

/// `GET /api/keys`: the local API keys (id, name, last four characters, state).
pub(super) async fn list_keys(State(state): State<ServerState>) -> Response {
    match state.services.keys().await {
        Ok(keys) => Json(keys).into_response(),
        Err(error) => key_error(&error),
    }
}

/// `POST /api/keys`.
#[derive(Debug, Deserialize, TS)]
#[serde(deny_unknown_fields)]
#[ts(export)]
pub(crate) struct NewKeyForm {
    pub name: String,
}

/// `POST /api/keys` with `{"name": ...}`: the key's secret is in this response and nowhere else.
pub(super) async fn create_key(
    State(state): State<ServerState>,
    body: axum::body::Bytes,
) -> Response {
    let form: NewKeyForm = match serde_json::from_slice(&body) {
        Ok(form) => form,
        Err(error) => return invalid("name", error),
    };
    match state.services.create_key(&form.name).await {
        Ok(new) => {
            state.services.refresh_keys(&state.keys).await;
            (StatusCode::CREATED, Json(new)).into_response()
        }
        Err(error) => key_error(&error),
    }
}

/// `DELETE /api/keys/{id}`: revokes by id or name.
pub(super) async fn revoke_key(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Response {
    match state.services.revoke_key(&id).await {
        Ok(true) => {
            state.services.refresh_keys(&state.keys).await;
            Json(Revoked { revoked: id }).into_response()
        }
        Ok(false) => ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            format!("id: no live key with id or name {id:?}"),
        )
        .into_response_in(Dialect::OpenAi),
        Err(error) => key_error(&error),
    }
}
