//! The accept loop: one task per connection, with deadlines a slow or silent client cannot
//! stretch.
//!
//! `axum::serve` gives hyper no timer, and hyper then enforces no header read timeout at all:
//! a client that sends its request head one byte per second (slowloris), or nothing, holds its
//! connection and task forever. So the loop is ours:
//!
//! - HTTP/1: the whole request head must arrive within [`Limits::header_read_timeout`] of the
//!   moment hyper starts reading it (on a kept-alive connection: of the previous response),
//!   else hyper closes the connection. An idle kept-alive connection is closed after the same
//!   time, as most servers do.
//! - Before the first request (while the protocol is being detected, or an HTTP/2 preface and
//!   handshake drag on), the same deadline applies to the connection as a whole: no first
//!   request by then, and the socket is dropped.
//! - Accepted sockets get `TCP_NODELAY`, or streamed chunks would wait for delayed ACKs.
//! - On shutdown the listener stops accepting and every connection is told to finish the
//!   request it is serving and close; [`run`] returns when the last one has.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// How long a client may take to send a request head; see the module docs.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Deadlines of the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a client may take to send a request head, and how long a connection may stay
    /// idle between requests.
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { header_read_timeout: HEADER_READ_TIMEOUT }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains the connections.
pub(super) async fn run(
    mut listener: super::Loopback,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: Limits,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // `Listener::accept` retries failed accepts (out of file descriptors, ...) itself.
        let (tcp, _peer) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        tokio::spawn(serve_connection(tcp, router.clone(), limits, graceful.watcher()));
    }
    drop(listener);
    graceful.shutdown().await;
}

async fn serve_connection(tcp: TcpStream, router: Router, limits: Limits, watcher: Watcher) {
    let arrived = Arc::new(Notify::new());
    let service =
        FirstRequest { router: TowerToHyperService::new(router), arrived: Arc::clone(&arrived) };
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let connection = watcher.watch(builder.serve_connection(TokioIo::new(tcp), service));
    let mut connection = std::pin::pin!(connection);
    let first_request = tokio::time::timeout(limits.header_read_timeout, arrived.notified());
    let result = tokio::select! {
        result = &mut connection => result,
        arrived = first_request => {
            if arrived.is_err() {
                tracing::debug!("no request within the header read timeout; closing the connection");
                return;
            }
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// The router as a hyper service that also says when the connection's first request arrived.
#[derive(Clone, Debug)]
struct FirstRequest {
    router: TowerToHyperService<Router>,
    arrived: Arc<Notify>,
}

type Inner = TowerToHyperService<Router>;
type HyperRequest = http::Request<hyper::body::Incoming>;

impl hyper::service::Service<HyperRequest> for FirstRequest {
    type Response = <Inner as hyper::service::Service<HyperRequest>>::Response;
    type Error = <Inner as hyper::service::Service<HyperRequest>>::Error;
    type Future = <Inner as hyper::service::Service<HyperRequest>>::Future;

    fn call(&self, request: HyperRequest) -> Self::Future {
        self.arrived.notify_one();
        self.router.call(request)
    }
}
