//! The front door of the localhost server, applied to every route before any handler runs:
//!
//! 1. `Host` must name this server on loopback (`127.0.0.1`, `localhost` or `[::1]` with our
//!    port). A page on another origin that resolves its own name to 127.0.0.1 (DNS rebinding)
//!    sends its own name as `Host`, and is refused here.
//! 2. No `Origin` header at all: browsers send one on cross-origin requests and on every
//!    `POST`; editors, agents and SDKs do not. We serve no CORS, so preflights fail too.
//! 3. A local API key: `Authorization: Bearer KEY`, or `x-api-key: KEY` as Anthropic clients
//!    send it.
//!
//! Refusals are answered in the dialect of the route (OpenAI or Anthropic error shape), and
//! nothing behind the guard (no upstream) is ever touched.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::ServerState;
use super::error::{ApiError, Dialect};

pub(crate) async fn front_door(
    State(state): State<ServerState>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let dialect = Dialect::of_path(path);
    let management = path.starts_with("/api/") || path == "/metrics";
    if let Err(refusal) = check(&state, request.headers(), management) {
        tracing::warn!(path = %request.uri().path(), reason = refusal.message, "request refused at the front door");
        return refusal.into_response_in(dialect);
    }
    next.run(request).await
}

fn check(state: &ServerState, headers: &HeaderMap, management: bool) -> Result<(), ApiError> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !is_loopback_host(host, state.port) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "the Host header does not name this local server",
        ));
    }
    if headers.contains_key(header::ORIGIN) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "requests from web pages are not served",
        ));
    }
    let presented =
        bearer(headers).or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
    // The management API takes the management token; the client API a local API key.
    let keys = if management { &state.management } else { &state.keys };
    match presented {
        Some(key) if keys.accepts(key.trim()) => Ok(()),
        Some(_) if management => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid management token",
        )),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid local API key",
        )),
        None if management => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing management token: send `Authorization: Bearer <token>` (the token is in the data directory's `management-token` file)",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing local API key: send `Authorization: Bearer <key>` (create one with `switchyard keys create`)",
        )),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// `127.0.0.1:PORT`, `localhost:PORT` or `[::1]:PORT`, exactly.
fn is_loopback_host(host: &str, port: u16) -> bool {
    let Some((name, host_port)) = host.rsplit_once(':') else { return false };
    host_port.parse::<u16>().ok() == Some(port)
        && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost") || name == "[::1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_with_our_port_pass() {
        for ok in ["127.0.0.1:4141", "localhost:4141", "LOCALHOST:4141", "[::1]:4141"] {
            assert!(is_loopback_host(ok, 4141), "{ok}");
        }
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
            assert!(!is_loopback_host(bad, 4141), "{bad}");
        }
    }
}
