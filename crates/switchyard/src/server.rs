//! The localhost server: `/v1` for editors and agents, `/v1beta` for Gemini's clients.
//!
//! Middleware order (outermost first): a request span (method, path, status, latency; at
//! DEBUG, the headers, the credential ones marked sensitive and so redacted); the front door (`guard`: Host, Origin, local API key,
//! management token or UI session); then the handlers, which are thin: parse, hand over, render.
//! Connections are accepted and timed by [`connections`] (`TCP_NODELAY`, header read timeout).

mod api;
mod connections;
mod encoding;
mod error;
mod guard;
pub mod ipc;
mod ui_sessions;
mod v1;
mod v1beta;
mod web_ui;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::routing::{get, patch, post};
use tokio::net::TcpListener;

use self::api::catalog;
pub use self::connections::{HEADER_READ_TIMEOUT, Limits};
pub use self::error::{ApiError, Dialect, ErrorBody, ErrorInfo};
pub use self::ui_sessions::{
    CODE_LIFETIME, IDLE_TIMEOUT, MAX_CODES, MAX_SESSIONS, SignInCode, UiSessions,
};
pub use self::v1::MAX_BODY_BYTES;
pub use self::web_ui::WebUi;
use crate::descriptors::{self, ConnectionCap};
use crate::keys::{LocalKeys, SIDE_KEY_HEADER};
use crate::proxy::Proxy;
use crate::services::Services;
use switchyard_secrets::Secret;

/// What every handler can reach: [`Shared`] behind one `Arc`. axum clones the state for
/// every route and layer a request passes (eight times for a `/v1` request), and a clone of
/// the fields themselves was a dozen atomic counts each way.
///
/// It reads as [`Shared`]; a change through it (set-up: the builders below, `ipv6` once
/// bound) copies the fields if a clone shares them, so clones made before it do not see it.
#[derive(Clone, Debug)]
pub struct ServerState(Arc<Shared>);

impl From<Shared> for ServerState {
    fn from(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for ServerState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::ops::DerefMut for ServerState {
    fn deref_mut(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.0)
    }
}

/// The fields of a [`ServerState`].
#[derive(Clone, Debug)]
pub struct Shared {
    /// The port we are bound to: the only one `Host` may name.
    pub port: u16,
    /// Whether `[::1]:port` is ours too. When it is not, `Host: [::1]:port` is refused: it
    /// names a socket another program may hold.
    pub ipv6: bool,
    pub keys: LocalKeys,
    /// Who may call `/api` and `/metrics` over HTTP (the management token).
    pub management: LocalKeys,
    /// The web UI's sessions, opened with the management token (`POST /api/session`): this
    /// process's alone, so a restart ends them all.
    pub ui_sessions: UiSessions,
    pub proxy: Arc<Proxy>,
    pub services: Arc<Services>,
    /// The web UI served at `/`, if any: the one compiled in (`serve`) or a built one on disk
    /// (`serve --ui DIR`). Only then may a page of this very origin call the API (its requests
    /// carry `Origin: http://127.0.0.1:PORT`).
    pub ui: Option<WebUi>,
    /// The connection cap the accept loop enforces, and what it was sized from; set when the
    /// server starts serving over HTTP ([`serve_with_grace`]).
    pub connections: Option<ConnectionCap>,
}

impl ServerState {
    /// Accepts `token` for the management API, with a set of UI sessions of its own: the
    /// sessions opened with another token are not this one's.
    #[must_use]
    pub fn with_management_token(mut self, token: Secret) -> Self {
        self.management = LocalKeys::new(Some(token));
        self.ui_sessions = UiSessions::default();
        self
    }

    /// A link that opens the web UI signed in: `http://127.0.0.1:PORT/#code=CODE`, a code
    /// that opens one session, once, within [`CODE_LIFETIME`]. `None` without a management
    /// token (nothing could sign in) or when no randomness is to be had.
    pub fn sign_in_link(&self) -> Option<String> {
        let root = self.management.token_digest()?;
        match self.ui_sessions.issue_code(&root, self.services.now()) {
            Ok(code) => Some(format!("http://127.0.0.1:{}/#code={}", self.port, code.expose())),
            Err(error) => {
                tracing::warn!(%error, "cannot issue a sign-in code");
                None
            }
        }
    }

    /// Serves the web UI built in `dir` at `/` (development: `serve --ui DIR`).
    #[must_use]
    pub fn with_ui(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.ui = Some(WebUi::Directory(Arc::from(dir.into())));
        self
    }

    /// Serves the web UI compiled into this binary at `/` (or, in a build without it, the page
    /// saying how to get it).
    #[must_use]
    pub fn with_embedded_ui(mut self) -> Self {
        self.ui = Some(WebUi::embedded());
        self
    }
}

/// Request headers that carry credentials: marked sensitive before anything can log them.
/// `x-switchyard-key` is the local key beside a client's own login.
const SENSITIVE_HEADERS: [header::HeaderName; 6] = [
    header::AUTHORIZATION,
    header::PROXY_AUTHORIZATION,
    header::COOKIE,
    header::HeaderName::from_static("x-api-key"),
    header::HeaderName::from_static("x-goog-api-key"),
    header::HeaderName::from_static(SIDE_KEY_HEADER),
];

/// The router with every route and the front door.
pub fn router(state: ServerState) -> Router {
    let routes = Router::new()
        .route("/v1/chat/completions", post(v1::chat_completions))
        .route("/v1/messages", post(v1::messages))
        .route("/v1/messages/count_tokens", post(v1::count_tokens))
        .route("/v1/responses", post(v1::responses).get(v1::responses_get))
        .route("/v1/embeddings", post(v1::embeddings))
        .route("/v1/models", get(v1::models))
        // Behind the front door like every route: an unknown path is told apart from a
        // known one only once the request has shown its key.
        .route("/v1", axum::routing::any(v1::no_such_route))
        .route("/v1/{*rest}", axum::routing::any(v1::no_such_route))
        .route("/v1beta/models", get(v1beta::models))
        .route("/v1beta/models/{*rest}", get(v1beta::model).post(v1beta::post_model))
        .route("/v1beta", axum::routing::any(v1beta::no_such_route))
        .route("/v1beta/{*rest}", axum::routing::any(v1beta::no_such_route))
        .route("/api/server", get(api::server_info))
        .route("/api/catalogue", get(api::catalogue))
        .route("/api/local-servers", get(api::local_servers))
        .route("/api/connect", post(api::connect))
        .route("/api/routing", get(api::routing).put(api::set_routing))
        .route("/api/try", post(api::try_model))
        .route("/api/monitoring/health", get(api::health))
        .route("/api/doctor", get(api::doctor))
        .route("/api/doctor/{id}/apply", post(api::apply_finding))
        .route("/api/resilience/reset", post(api::reset))
        .route("/api/resilience/lockouts", get(api::lockouts).delete(api::clear_lockouts))
        .route("/api/settings", get(api::settings))
        .route(
            "/api/settings/{section}",
            get(api::settings_section).patch(api::patch_settings_section),
        )
        .route("/api/providers", get(catalog::list_providers).post(catalog::create_provider))
        .route(
            "/api/providers/{id}",
            get(catalog::get_provider)
                .patch(catalog::update_provider)
                .delete(catalog::delete_provider),
        )
        .route("/api/providers/{id}/test", post(catalog::test_provider))
        .route("/api/providers/{id}/confirm", post(catalog::confirm_provider))
        .route(
            "/api/providers/{id}/credentials/{credential}/confirm",
            post(catalog::confirm_credential),
        )
        .route("/api/providers/{id}/models", get(catalog::discover_models))
        .route("/api/providers/{id}/credentials", post(catalog::create_credential))
        .route(
            "/api/providers/{id}/credentials/{credential}",
            patch(catalog::update_credential).delete(catalog::delete_credential),
        )
        .route("/api/providers/{id}/credentials/{credential}/login", post(catalog::start_login))
        .route("/api/providers/{id}/credentials/{credential}/retry", post(catalog::retry_secret))
        .route(
            "/api/providers/{id}/credentials/{credential}/oauth",
            get(catalog::oauth_status).delete(catalog::sign_out),
        )
        .route(
            "/api/providers/{id}/credentials/{credential}/oauth/refresh",
            post(catalog::oauth_retry),
        )
        .route(
            "/api/oauth/logins/{login}",
            get(catalog::login_status).delete(catalog::cancel_login),
        )
        .route("/api/combos", get(catalog::list_combos).post(catalog::create_combo))
        .route(
            "/api/combos/{name}",
            get(catalog::get_combo).put(catalog::replace_combo).delete(catalog::delete_combo),
        )
        .route("/api/combos/{name}/reorder", post(catalog::reorder_combo))
        .route("/api/aliases", get(catalog::aliases).put(catalog::replace_aliases))
        .route("/api/config/export", get(catalog::export_config))
        .route("/api/config/import", post(catalog::import_config))
        .route("/api/requests", get(api::requests))
        .route("/api/usage", get(api::usage))
        .route("/api/usage.csv", get(api::usage_csv))
        .route("/api/usage/budgets", get(api::budgets))
        .route("/api/events", get(api::events))
        .route("/api/session", post(api::open_session).delete(api::close_session))
        .route("/api/session/code", post(api::sign_in_link))
        .route("/api/keys", get(api::list_keys).post(api::create_key))
        .route("/api/keys/{id}", axum::routing::delete(api::revoke_key))
        .route("/metrics", get(api::metrics))
        .route("/api/{*rest}", axum::routing::any(api::no_such_route));
    // The UI's files: public (they hold no secret; the API asks for the token), GET only,
    // never an API path (`web_ui`).
    let routes = match state.ui.clone() {
        Some(ui) => routes.fallback(move |request: axum::extract::Request| async move {
            web_ui::serve(&ui, request).await
        }),
        None => routes,
    };
    routes
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::front_door))
        .with_state(state)
}

/// The request's span: at DEBUG, with its method, path and headers, the
/// [`SENSITIVE_HEADERS`] marked first so that it does not print their values (`Sensitive`).
/// The span is the only place request headers are logged, so they are marked only when it
/// records them. At the default level it is not made: the formatting subscriber writes a
/// span's fields out when the span is made, which cost every request a few microseconds for a
/// prefix on the few lines a request logs; those lines name their target and model
/// themselves.
///
/// The front door does this itself, where `tower_http`'s trace and sensitive-header layers did:
/// two layers, and a wrapper around every response body, for what is a no-op at the default
/// level.
fn request_span(request: &mut http::Request<Body>) -> tracing::Span {
    let span = tracing::debug_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        headers = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let headers = request.headers_mut();
        for name in &SENSITIVE_HEADERS {
            if let header::Entry::Occupied(mut entry) = headers.entry(name) {
                entry.iter_mut().for_each(|value| value.set_sensitive(true));
            }
        }
        span.record("headers", tracing::field::debug(request.headers()));
    }
    span
}

/// What the trace layer said of an answer: every one at DEBUG, and a server error at ERROR.
fn log_response(status: http::StatusCode, started: tokio::time::Instant) {
    let latency = started.elapsed();
    if status.is_server_error() {
        tracing::error!(%status, ?latency, "response failed");
    } else {
        tracing::debug!(%status, ?latency, "finished processing request");
    }
}

/// Binds `127.0.0.1:port` (0 picks a free port). Loopback only, always.
pub async fn bind(port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await
}

/// Binds `127.0.0.1:port` and, where the machine has IPv6, `[::1]` on the same port: a client
/// that resolves `localhost` to `::1` first must reach us, not whoever else could bind
/// `[::1]:port`. When `[::1]` cannot be bound, only IPv4 serves and the front door refuses
/// `Host: [::1]` ([`ServerState::ipv6`]).
pub async fn bind_loopback(port: u16) -> std::io::Result<Loopback> {
    let v4 = bind(port).await?;
    let port = v4.local_addr()?.port();
    let v6 = match TcpListener::bind(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))).await
    {
        Ok(v6) => Some(v6),
        Err(error) => {
            tracing::info!(port, %error, "[::1] is not served: 127.0.0.1 only");
            None
        }
    };
    Ok(Loopback { v4, v6 })
}

/// The loopback sockets a server accepts on: `127.0.0.1`, and `[::1]` where bound.
#[derive(Debug)]
pub struct Loopback {
    v4: TcpListener,
    v6: Option<TcpListener>,
}

impl From<TcpListener> for Loopback {
    fn from(v4: TcpListener) -> Self {
        Self { v4, v6: None }
    }
}

impl Loopback {
    /// The next connection on either socket. Unlike axum's listener this returns the errors
    /// too: the accept loop ([`connections`]) answers running out of file descriptors by
    /// closing a connection, where axum's would sleep a second and try again.
    pub(crate) async fn accept(&mut self) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
        match &mut self.v6 {
            Some(v6) => tokio::select! {
                accepted = self.v4.accept() => accepted,
                accepted = v6.accept() => accepted,
            },
            None => self.v4.accept().await,
        }
    }

    /// The `127.0.0.1` address, whose port `[::1]` shares.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.v4.local_addr()
    }

    /// Whether `[::1]` is served too.
    pub fn has_ipv6(&self) -> bool {
        self.v6.is_some()
    }
}

/// How long requests in flight (long streams above all) may run on after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Serves until `shutdown` resolves, then stops accepting and lets requests in flight finish,
/// for at most [`SHUTDOWN_GRACE`].
pub async fn serve(
    listener: impl Into<Loopback>,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_grace(listener, state, shutdown, SHUTDOWN_GRACE).await
}

/// [`serve`] with a chosen grace period. The connection cap is the config's (`[server]
/// max_connections`, read at start), or less where the limit on open files (raised first as
/// far as it goes) leaves room for fewer ([`ConnectionCap`]); the log and `GET /api/server`
/// say which.
pub async fn serve_with_grace(
    listener: impl Into<Loopback>,
    mut state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let cap = ConnectionCap::new(state.proxy.config().max_connections, descriptors::open_files());
    log_cap(&cap);
    state.connections = Some(cap);
    let limits = Limits { max_connections: cap.effective, ..Limits::default() };
    serve_with(listener, state, shutdown, grace, limits).await
}

/// The start line naming the connection cap, and what to do when the limit on open files is
/// what sets it.
fn log_cap(cap: &ConnectionCap) {
    let ConnectionCap { max_connections, effective, .. } = *cap;
    match cap.open_files {
        Some(open_files) if cap.limited_by_open_files() => tracing::warn!(
            open_files,
            max_connections,
            effective,
            "the limit on open files ({open_files}) leaves room for {effective} connections, \
             fewer than max_connections ({max_connections}); raise it (`ulimit -n`, \
             LimitNOFILE= in a systemd unit, launchctl limit maxfiles on macOS) for more"
        ),
        open_files => tracing::info!(
            ?open_files,
            max_connections,
            effective,
            "at most {effective} connections at once"
        ),
    }
}

/// [`serve`] with a chosen grace period and connection deadlines.
pub async fn serve_with(
    listener: impl Into<Loopback>,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    limits: Limits,
) -> std::io::Result<()> {
    let (draining_tx, draining) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = draining_tx.send(());
    };
    let server = connections::run(listener.into(), (router(state.clone()), state), signal, limits);
    let deadline = async {
        // Only a shutdown that began starts the clock; a dropped sender means the server ended.
        if draining.await.is_ok() {
            tokio::time::sleep(grace).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = server => Ok(()),
        () = deadline => {
            tracing::warn!(grace_secs = grace.as_secs(), "requests still in flight after the shutdown grace period; stopping anyway");
            Ok(())
        }
    }
}
