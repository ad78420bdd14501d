//! The management API in process, for the desktop shell ("one API, two transports").
//!
//! The window's calls arrive over Tauri IPC as [`ApiCall`]s and go through the very router
//! `serve` runs, front door included, with a token made for this process alone: it is never
//! written anywhere and never leaves memory, so the window needs no token and no network hop,
//! and what the window can do is exactly what `/api` allows. Only `/api/*` is reachable this
//! way; `/v1` stays for clients with a local API key.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower::ServiceExt as _;
use ts_rs::TS;

use super::ServerState;
use super::error::{ApiError, Dialect};
use crate::keys::{self, KeyError};
use switchyard_secrets::Secret;

/// The most of a response body an IPC reply carries (the largest is a config export).
const MAX_REPLY: usize = 16 * 1024 * 1024;

/// One management API call from the window.
#[derive(Clone, Debug, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct ApiCall {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// `/api/...`, with the query string if any.
    pub path: String,
    /// The body, if the route takes one: JSON, or a string sent as text (a config file).
    #[serde(default)]
    #[ts(optional, type = "unknown")]
    pub body: Option<Value>,
}

/// The answer to an [`ApiCall`]: the HTTP status and the body as it would have come over HTTP
/// (JSON parsed; text, such as a TOML export, as a string; nothing as `null`).
#[derive(Clone, Debug, Serialize, TS)]
#[ts(export)]
pub struct ApiReply {
    pub status: u16,
    #[ts(type = "unknown")]
    pub body: Value,
}

/// The management API, callable in process.
#[derive(Clone, Debug)]
pub struct InProcess {
    router: Router,
    host: HeaderValue,
    authorization: HeaderValue,
}

impl InProcess {
    /// The router of `state`, answering to a token of its own instead of the HTTP one.
    pub fn new(state: ServerState) -> Result<Self, KeyError> {
        let token = keys::generate()?;
        let host = HeaderValue::from_str(&format!("127.0.0.1:{}", state.port))
            .expect("a loopback address is a valid header value");
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", token.expose())).expect("tokens are hex");
        authorization.set_sensitive(true);
        let router = super::router(state.with_management_token(Secret::new(token.expose())));
        Ok(Self { router, host, authorization })
    }

    /// Runs one call through the router.
    pub async fn call(&self, call: ApiCall) -> ApiReply {
        match self.request(call) {
            Ok(request) => {
                let response =
                    self.router.clone().oneshot(request).await.expect("the router is infallible");
                reply(response).await
            }
            Err(refusal) => reply(refusal.into_response_in(Dialect::OpenAi)).await,
        }
    }

    fn request(&self, call: ApiCall) -> Result<Request<Body>, ApiError> {
        let method = Method::from_bytes(call.method.to_ascii_uppercase().as_bytes())
            .ok()
            .filter(|m| {
                [Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(m)
            })
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "method: {:?} is not one of GET, POST, PUT, PATCH, DELETE",
                    call.method
                ))
            })?;
        if !call.path.starts_with("/api/") {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                format!(
                    "path: {:?} is not under /api/ (only the management API is reachable in the app)",
                    call.path
                ),
            ));
        }
        if call.path.split('?').next() == Some("/api/events") {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "path: /api/events is a stream; in the app, listen to the `health` and `request` events",
            ));
        }
        let mut request = Request::builder()
            .method(method)
            .uri(&call.path)
            .header(header::HOST, self.host.clone())
            .header(header::AUTHORIZATION, self.authorization.clone());
        // A string is a text body as it is (a config file to import), as the browser sends
        // it; anything else is JSON.
        let body = match call.body {
            Some(Value::String(text)) => {
                request = request.header(header::CONTENT_TYPE, "text/plain; charset=utf-8");
                Body::from(text)
            }
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        request.body(body).map_err(|e| ApiError::bad_request(format!("path: {e}")))
    }
}

async fn reply(response: axum::response::Response) -> ApiReply {
    let status = response.status().as_u16();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let body = match axum::body::to_bytes(response.into_body(), MAX_REPLY).await {
        Ok(bytes) if bytes.is_empty() => Value::Null,
        Ok(bytes) if json => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        Ok(bytes) => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
        Err(error) => {
            return ApiReply {
                status: 500,
                body: serde_json::json!({ "error": { "message": format!("cannot read the reply: {error}"), "type": "api_error", "code": 500, "switchyard": null } }),
            };
        }
    };
    ApiReply { status, body }
}
