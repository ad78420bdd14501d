//! The mock identity provider's HTTP side: accept loop, one hyper HTTP/1.1 connection per
//! socket, and the two routes.
//!
//! Invariants:
//! - Listens on 127.0.0.1 only, on port 0 in every test.
//! - While "unreachable", every new connection is dropped at once and every open one is
//!   closed (and counted out, so the switch can wait for it), so a client and its keep-alive
//!   pool see a transport failure and no request is recorded.
//! - Everything ends with the accept task: dropping the handle drops every connection.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinSet;
use url::form_urlencoded;

use super::idp::{AuthorizeAnswer, Idp, TokenAnswer};

/// State every connection shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) idp: Idp,
    /// `true` while the mock plays an unreachable identity provider.
    pub(super) unreachable: watch::Sender<bool>,
    /// Connections being served, so going unreachable can wait until none is left.
    pub(super) open: watch::Sender<usize>,
}

/// Counts one served connection for as long as it lives.
struct Open(Arc<Shared>);

impl Open {
    fn enter(shared: &Arc<Shared>) -> Self {
        shared.open.send_modify(|n| *n += 1);
        Self(Arc::clone(shared))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.send_modify(|n| *n -= 1);
    }
}

/// Accepts until told to stop; owns every connection task so they all end with it.
pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if *shared.unreachable.borrow() => {
                    // A reset: as close to a refused connection as a listening socket can get.
                    let _ = stream.set_zero_linger();
                    drop(stream);
                }
                Ok((stream, _)) => {
                    connections.spawn(serve(stream, Arc::clone(&shared)));
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next() => {}
        }
    }
    connections.shutdown().await;
}

async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    let _open = Open::enter(&shared);
    if *shared.unreachable.borrow() {
        // Accepted just before the switch: it must not serve anything either.
        let _ = stream.set_zero_linger();
        return;
    }
    let _ = stream.set_nodelay(true);
    let kill = Arc::new(Notify::new());
    let mut unreachable = shared.unreachable.subscribe();
    let service = {
        let kill = Arc::clone(&kill);
        service_fn(move |request| answer(Arc::clone(&shared), Arc::clone(&kill), request))
    };
    let connection = http1::Builder::new()
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        // Going unreachable wins over a request that arrived at the same moment.
        biased;
        _ = unreachable.wait_for(|u| *u) => {}
        () = kill.notified() => {}
        _ = connection => {}
    }
}

fn respond(
    status: u16,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(CONTENT_TYPE, content_type.parse().expect("static"));
    response.headers_mut().insert(CACHE_CONTROL, "no-store".parse().expect("static"));
    response
}

fn params(text: &[u8]) -> std::collections::BTreeMap<String, String> {
    form_urlencoded::parse(text).into_owned().collect()
}

async fn answer(
    shared: Arc<Shared>,
    kill: Arc<Notify>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(http_body_util::Collected::to_bytes) else {
        return Ok(respond(400, "text/plain", "unreadable body"));
    };
    let response = match (&parts.method, parts.uri.path()) {
        (&Method::GET, "/authorize") => {
            let query = parts.uri.query().unwrap_or_default();
            match shared.idp.authorize(params(query.as_bytes())) {
                AuthorizeAnswer::Redirect(location) => {
                    let mut response = respond(302, "text/plain", "");
                    if let Ok(value) = location.parse() {
                        response.headers_mut().insert(LOCATION, value);
                    }
                    response
                }
                AuthorizeAnswer::Page { status, text } => respond(status, "text/plain", text),
            }
        }
        (&Method::POST, "/token") => match shared.idp.token(params(&body)) {
            TokenAnswer::Json { status, body } => {
                respond(status, "application/json", body.to_string())
            }
            TokenAnswer::Drop => {
                kill.notify_one();
                std::future::pending().await
            }
            TokenAnswer::Hang => std::future::pending().await,
        },
        _ => respond(404, "text/plain", "mock identity provider: no such route"),
    };
    Ok(response)
}
