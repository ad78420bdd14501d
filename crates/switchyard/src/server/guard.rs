//! The front door of the localhost server, applied to every route before any handler runs:
//!
//! 1. `Host` must name this server on loopback (`127.0.0.1`, `localhost` or `[::1]` with our
//!    port). A page on another origin that resolves its own name to 127.0.0.1 (DNS rebinding)
//!    sends its own name as `Host`, and is refused here.
//! 2. No `Origin` header: browsers send one on cross-origin requests and on every `POST`;
//!    editors, agents and SDKs do not. We serve no CORS, so preflights fail too. The one
//!    exception is our own web UI, when the server serves one (`serve` does: the UI compiled
//!    in, or `--ui DIR`): its pages carry this server's own origin (`http://127.0.0.1:PORT`),
//!    which no other page can claim. Every `/v1*`, `/api` and `/metrics` path keeps its own
//!    rule whatever files are served beside it (`web_ui`).
//! 3. A local API key (`/v1`, `/v1beta`): `Authorization: Bearer KEY`, or `x-api-key: KEY` as
//!    Anthropic clients send it; on `/v1beta` only, also `x-goog-api-key: KEY` or `?key=KEY`
//!    as Google's clients send it (the query never reaches a log, which names the path alone,
//!    nor an upstream, which gets a URL of its own); the management token or a UI session
//!    (`/api`, `/metrics`), as [`Takes`] says per route. Every `/v1beta` path takes the key,
//!    whatever static files are served beside it. The UI's static files need neither: they hold no secret, and
//!    the UI signs in before it calls the API.
//! 4. A body sent to `/v1` or `/v1beta` is declared JSON (`Content-Type: application/json`, or any
//!    `+json` type). Every SDK declares it; a form or `text/plain` body is what a page can send
//!    without a preflight, so it is refused (`415`) even from a client that passed the rest.
//!
//! 5. Every route but the UI's files takes a request a browser marks `Sec-Fetch-Site:
//!    same-origin` (our own UI) or `none` (typed by the user), or one without the header (every
//!    non-browser client). `same-site` is refused: to a browser, a page on another localhost
//!    port is the same site, and such a page must not drive the API even with a token it
//!    somehow holds; and a page's `<img src=".../v1beta/models?key=...">` carries no `Origin`
//!    but does carry `Sec-Fetch-Site: cross-site`. Node's `fetch` (Gemini CLI, the JS SDKs)
//!    sends `Sec-Fetch-Mode: cors` and no `Sec-Fetch-Site` and no `Origin`: it is no browser
//!    and passes (docs/security.md says why that stays safe).
//!
//! Every answer, refusals included, carries [`PAGE_HEADERS`]: the web UI's content security
//! policy (the desktop's, with `connect-src 'self'` for the HTTP transport), no framing, no
//! MIME sniffing and no referrer, so a page of ours can neither be framed by another page nor
//! load or leak anything elsewhere.
//!
//! `HEAD /` (a connectivity check) needs no key: see [`front_door`].
//!
//! Refusals are answered in the dialect of the route (OpenAI or Anthropic error shape), and
//! nothing behind the guard (no upstream) is ever touched.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use std::future::Future;
use std::sync::Arc;

use tracing::Instrument as _;

use super::connections::{self, Connection};
use super::error::{ApiError, Dialect};
use super::ui_sessions::{CODE_LIFETIME, CODE_PREFIX, IDLE_TIMEOUT, SessionId, SignIn};
use super::{ServerState, web_ui};
use crate::keys::{self, LocalKey, SIDE_KEY_HEADER};

/// The headers every answer carries (see the module's documentation). The policy is
/// `src-tauri/tauri.conf.json`'s, with `connect-src 'self'` in place of the IPC schemes: in a
/// browser the UI talks HTTP to the server that served it.
pub(super) const PAGE_HEADERS: [(HeaderName, HeaderValue); 4] = [
    (
        HeaderName::from_static("content-security-policy"),
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'",
        ),
    ),
    (HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff")),
    (HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer")),
    // `frame-ancestors` for browsers that predate it.
    (HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY")),
];

pub(crate) async fn front_door(
    State(state): State<ServerState>,
    request: Request,
    next: Next,
) -> Response {
    answer(&state, request, |request| next.run(request)).await
}

/// The front door of a `/v1` route the connection dispatches itself ([`super::v1::direct`]):
/// the same checks and headers as [`front_door`], then the handler, without the router's
/// dispatch and layers in between.
pub(crate) async fn direct(
    state: ServerState,
    request: Request,
    client: switchyard_providers::dialect::ClientDialect,
) -> Response {
    answer(&state, request, |request| super::v1::proxied(client, State(state.clone()), request))
        .await
}

/// Everything the front door does to a request and its answer; `run` makes the answer of a
/// request it admits.
async fn answer<F: Future<Output = Response>>(
    state: &ServerState,
    mut request: Request,
    run: impl FnOnce(Request) -> F,
) -> Response {
    let started = tokio::time::Instant::now();
    let span = super::request_span(&mut request);
    let mut response = admit(state, request, run).instrument(span.clone()).await;
    span.in_scope(|| super::log_response(response.status(), started));
    let headers = response.headers_mut();
    headers.reserve(PAGE_HEADERS.len());
    // Names and values made once, at compile time: an `&str` name is checked byte by byte
    // on every insert.
    for (name, value) in PAGE_HEADERS {
        headers.insert(name, value);
    }
    response
}

async fn admit<F: Future<Output = Response>>(
    state: &ServerState,
    mut request: Request,
    run: impl FnOnce(Request) -> F,
) -> Response {
    let path = request.uri().path();
    let dialect = Dialect::of_path(path);
    let gemini = dialect == Dialect::Gemini;
    let door = if path == "/api" || path.starts_with("/api/") || path == "/metrics" {
        Door::Management(Takes::of(request.method(), path))
    } else if web_ui::is_api_path(path) || gemini || state.ui.is_none() {
        Door::Client
    } else {
        Door::Files
    };
    // `HEAD /` is a connectivity check (Claude Code sends one before its first request): it
    // passes the Host and Origin checks like everything else, needs no key, and reveals
    // nothing but that the server is up.
    if request.method() == http::Method::HEAD && path == "/" {
        return match check(state, request.headers(), Door::Files, None) {
            Ok(_) => StatusCode::OK.into_response(),
            Err(refusal) => refusal.into_response_in(dialect),
        };
    }
    let google = gemini.then(|| GoogleKey(query_key(request.uri().query())));
    let checked = check(state, request.headers(), door, google).and_then(|caller| {
        let body_to_v1 =
            (path.starts_with("/v1/") || gemini) && request.method() == http::Method::POST;
        if body_to_v1 { json_body(request.headers()).map(|()| caller) } else { Ok(caller) }
    });
    match checked {
        Ok(caller) => {
            // A request with a credential keeps its connection open until its answer ends,
            // and marks the connection as an editor's (see `connections`); the UI's files
            // do not.
            let in_flight = (!matches!(caller, Caller::Anyone))
                .then(|| request.extensions().get::<Arc<Connection>>().map(Connection::admitted))
                .flatten();
            // The handlers learn who made the request from here, the one place that checked
            // it: which local key (the request log, usage and budgets go by it), which UI
            // session (to sign it out), or that the management token opens a session.
            match caller {
                Caller::Anyone => {}
                Caller::Client(key) => {
                    request.extensions_mut().insert(key);
                }
                Caller::Manager(sign_in) => {
                    request.extensions_mut().insert(sign_in);
                }
                Caller::Session(session) => {
                    request.extensions_mut().insert(session);
                }
            }
            let response = run(request).await;
            match in_flight {
                Some(in_flight) => connections::hold(response, in_flight),
                None => response,
            }
        }
        Err(refusal) => {
            tracing::warn!(path = %request.uri().path(), reason = refusal.message, "request refused at the front door");
            refusal.into_response_in(dialect)
        }
    }
}

/// Which key a request needs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Door {
    /// `/v1`: a local API key.
    Client,
    /// `/api`, `/metrics`: the management token or a UI session, as the route takes.
    Management(Takes),
    /// The web UI's files: no key.
    Files,
}

/// What a management route takes: the management token (the file's, the same across
/// restarts: CLI, scripts, and the UI once, to sign in) or a UI session (this process's
/// alone: see `ui_sessions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Takes {
    /// Either: every route but those below.
    Either,
    /// `POST /api/session`: the management token or a sign-in code (`ui_sessions`), never a
    /// session, since a session opens no other session (one stolen from a page cannot outlive
    /// it by minting more).
    SignIn,
    /// `POST /api/session/code` (a new sign-in link): the management token only, for the
    /// same reason, and so that a code opens nothing but one session.
    Token,
    /// `GET /api/events` and `DELETE /api/session`: a UI session only. The event stream is
    /// the request a page sends again on its own, with no one watching, for as long as it is
    /// open; whatever credential it carries goes to whoever holds the port when it does. Only
    /// a credential that ends with this process may be in it, so the management token is
    /// refused there even from a client that means well: a script that wants the stream opens
    /// a session first.
    Session,
}

impl Takes {
    fn of(method: &http::Method, path: &str) -> Self {
        match (method, path) {
            (&http::Method::POST, "/api/session") => Self::SignIn,
            (&http::Method::POST, "/api/session/code") => Self::Token,
            (&http::Method::DELETE, "/api/session") | (_, "/api/events") => Self::Session,
            _ => Self::Either,
        }
    }
}

/// Who passed the front door.
enum Caller {
    /// A page's file, or `HEAD /`: nobody in particular.
    Anyone,
    /// A client with this local API key.
    Client(LocalKey),
    /// The management token, which may open a UI session.
    Manager(SignIn),
    /// The web UI, signed in.
    Session(SessionId),
}

// The request headers the front door reads, made at compile time: a name given as `&str` is
// parsed on every lookup.
const SIDE_KEY: HeaderName = HeaderName::from_static(SIDE_KEY_HEADER);
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");
const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");
const X_GOOG_API_KEY: HeaderName = HeaderName::from_static("x-goog-api-key");

/// The other places a `/v1beta` request may carry its local key, as Google's clients send
/// it: `x-goog-api-key`, or `?key=` (this, percent-decoded), the one place a key may come in
/// the URL.
struct GoogleKey(Option<String>);

/// Admits or refuses a request, saying who made it. `google` is `Some` on `/v1beta` only.
fn check(
    state: &ServerState,
    headers: &HeaderMap,
    door: Door,
    google: Option<GoogleKey>,
) -> Result<Caller, ApiError> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !is_loopback_host(host, state.port, state.ipv6) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "the Host header does not name this local server",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !(state.ui.is_some() && is_own_origin(origin.as_bytes(), state.port, state.ipv6))
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "requests from web pages are not served",
        ));
    }
    let takes = match door {
        Door::Files => return Ok(Caller::Anyone),
        Door::Client => None,
        Door::Management(takes) => Some(takes),
    };
    if let Some(site) = headers.get(&SEC_FETCH_SITE) {
        // `none`: the user typed the address or opened a bookmark; `same-origin`: our own UI.
        if !matches!(site.as_bytes(), b"none" | b"same-origin") {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "this server serves only its own pages and programs that are no browser: the \
                 browser marked the request `Sec-Fetch-Site` other than `same-origin` or `none` \
                 (a page on another port or site)",
            ));
        }
    }
    let presented = bearer(headers)
        .or_else(|| headers.get(&X_API_KEY).and_then(|v| v.to_str().ok()))
        .map(str::trim);
    // A client that keeps its own upstream login in `Authorization` / `x-api-key` (a
    // subscriber's Claude Code or Codex) sends the local key beside it: then only
    // that header is the local key, and the others are not checked as one.
    let side = headers.get(&SIDE_KEY).map(|v| v.to_str().map_or("", str::trim));
    match (takes, google) {
        (Some(takes), _) => manager(state, takes, presented),
        (None, _) if side.is_some() => {
            // The login's place holds a local key (an easy misconfiguration): it would go
            // upstream as the caller's login. It never leaves; the caller is told the fix.
            if presented.is_some_and(|login| state.keys.identify(login).is_some()) {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "authentication_error",
                    "`Authorization` (or `x-api-key`) carries a Switchyard local key beside `x-switchyard-key`: a login passed through is the client's own sign-in (Claude Code's or Codex's token), which Switchyard sends to the subscription; send the local key only in `x-switchyard-key`, or drop `x-switchyard-key` and send the local key as usual (docs/clients.md, \"Keep your subscription\")",
                ));
            }
            client(state, side)
        }
        (None, Some(GoogleKey(in_query))) => {
            let header = headers.get(&X_GOOG_API_KEY).and_then(|v| v.to_str().ok());
            client(state, presented.or(header.map(str::trim)).or(in_query.as_deref()))
        }
        (None, None) => client(state, presented),
    }
}

/// The client API takes a local API key.
fn client(state: &ServerState, presented: Option<&str>) -> Result<Caller, ApiError> {
    let Some(presented) = presented else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing local API key: send `Authorization: Bearer <key>` (Gemini clients: `x-goog-api-key: <key>`; a client whose `Authorization` is its own login: `x-switchyard-key: <key>`; create one with `switchyard keys create`)",
        ));
    };
    state.keys.identify(presented).map(Caller::Client).ok_or_else(|| {
        ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", "invalid local API key")
    })
}

/// The management API takes the management token or a UI session, as the route [`Takes`].
fn manager(state: &ServerState, takes: Takes, presented: Option<&str>) -> Result<Caller, ApiError> {
    let Some(presented) = presented else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing management token: send `Authorization: Bearer <token>` (the token is in the data directory's `management-token` file)",
        ));
    };
    if state.management.accepts(presented) {
        if takes == Takes::Session {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "this route takes a UI session, not the management token: a stream that \
                 reconnects on its own must carry a credential that ends with this server. \
                 Open one with `POST /api/session` (the management token as the bearer token) \
                 and send the `token` it answers",
            ));
        }
        let root = Arc::from(keys::sha256_hex(presented));
        return Ok(Caller::Manager(SignIn { root }));
    }
    let root = state.management.token_digest();
    if presented.starts_with(CODE_PREFIX) {
        let now = state.services.now();
        return match state.ui_sessions.redeem_code(presented, root.as_deref(), now) {
            Some(sign_in) if takes == Takes::SignIn => Ok(Caller::Manager(sign_in)),
            _ => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                format!(
                    "this sign-in link was used already or has expired (a link opens one \
                     session, within {} minutes of being printed): print a new one with \
                     `switchyard link`, or sign in with the management token (the data \
                     directory's `management-token` file)",
                    CODE_LIFETIME.as_secs() / 60
                ),
            )),
        };
    }
    match state.ui_sessions.admit(presented, root.as_deref(), state.services.now()) {
        Some(_) if matches!(takes, Takes::SignIn | Takes::Token) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "a UI session opens no other session: `POST /api/session` takes the management token",
        )),
        Some(session) => Ok(Caller::Session(session)),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            format!(
                "invalid management token or UI session: a UI session ends when the server \
                 restarts, when it signs out, after {} hours without a request and when the \
                 management token is rotated (sign in again); the management token is in the \
                 data directory's `management-token` file",
                IDLE_TIMEOUT.as_secs() / 3600
            ),
        )),
    }
}

/// The body is declared JSON: `application/json` or `application/*+json`, any parameters.
fn json_body(headers: &HeaderMap) -> Result<(), ApiError> {
    let declared = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = declared.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let json = essence == "application/json"
        || essence.strip_prefix("application/").is_some_and(|sub| sub.ends_with("+json"));
    if json {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            format!(
                "the body must be sent as `Content-Type: application/json` (got {:?})",
                if declared.is_empty() { "none" } else { declared }
            ),
        ))
    }
}

/// A `/v1beta` request's `?key=` (percent-decoded), as Google's clients may send the key.
fn query_key(query: Option<&str>) -> Option<String> {
    let query = query?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "key")
        .map(|(_, value)| value.trim().to_owned())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// `127.0.0.1:PORT`, `localhost:PORT` or, when we serve IPv6 too, `[::1]:PORT`, exactly.
fn is_loopback_host(host: &str, port: u16, ipv6: bool) -> bool {
    let Some((name, host_port)) = host.rsplit_once(':') else { return false };
    host_port.parse::<u16>().ok() == Some(port)
        && (name == "127.0.0.1"
            || name.eq_ignore_ascii_case("localhost")
            || (ipv6 && name == "[::1]"))
}

/// `http://127.0.0.1:PORT`, `http://localhost:PORT` or `http://[::1]:PORT`: a page this server
/// served itself.
fn is_own_origin(origin: &[u8], port: u16, ipv6: bool) -> bool {
    std::str::from_utf8(origin)
        .ok()
        .and_then(|o| o.strip_prefix("http://"))
        .is_some_and(|host| is_loopback_host(host, port, ipv6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_servers_own_http_origin_counts_as_its_own() {
        for ok in ["http://127.0.0.1:4141", "http://localhost:4141", "http://[::1]:4141"] {
            assert!(is_own_origin(ok.as_bytes(), 4141, true), "{ok}");
        }
        for bad in [
            "null",
            "https://127.0.0.1:4141",
            "http://127.0.0.1:4142",
            "http://127.0.0.1",
            "http://evil.example",
            "http://localhost.evil.example:4141",
            "http://127.0.0.1:4141/",
            "http://127.0.0.1:4141.evil.example",
        ] {
            assert!(!is_own_origin(bad.as_bytes(), 4141, true), "{bad}");
        }
    }

    #[test]
    fn only_loopback_names_with_our_port_pass() {
        for ok in ["127.0.0.1:4141", "localhost:4141", "LOCALHOST:4141", "[::1]:4141"] {
            assert!(is_loopback_host(ok, 4141, true), "{ok}");
        }
        // `[::1]` names us only where we bound it; elsewhere another program may hold it.
        assert!(!is_loopback_host("[::1]:4141", 4141, false));
        assert!(is_loopback_host("127.0.0.1:4141", 4141, false));
        for bad in [
            "",
            "127.0.0.1",
            "127.0.0.1:4142",
            "evil.example:4141",
            "localhost.evil.example:4141",
            "127.0.0.1.nip.io:4141",
            "127.0.0.2:4141",
            "localhost:4141:4141",
        ] {
            assert!(!is_loopback_host(bad, 4141, true), "{bad}");
        }
    }

    #[test]
    fn the_stream_and_sign_out_take_a_session_only_and_sign_in_the_management_token_only() {
        use http::Method;
        for (method, path, takes) in [
            (Method::POST, "/api/session", Takes::SignIn),
            (Method::POST, "/api/session/code", Takes::Token),
            (Method::DELETE, "/api/session", Takes::Session),
            (Method::GET, "/api/events", Takes::Session),
            (Method::POST, "/api/events", Takes::Session),
            (Method::GET, "/api/session", Takes::Either),
            (Method::GET, "/api/events/", Takes::Either),
            (Method::GET, "/api/monitoring/health", Takes::Either),
            (Method::POST, "/api/keys", Takes::Either),
            (Method::GET, "/metrics", Takes::Either),
        ] {
            assert_eq!(Takes::of(&method, path), takes, "{method} {path}");
        }
    }

    #[test]
    fn only_json_media_types_pass_as_a_body() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            json_body(&headers).is_ok()
        };
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/vnd.api+json",
        ] {
            assert!(with(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "text/json+",
            "",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(json_body(&HeaderMap::new()).is_err(), "no content type at all");
    }
}
