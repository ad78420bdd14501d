//! The accept loop: one task per connection, with deadlines a slow or silent client cannot
//! stretch, and a cap a flood of connections cannot lock an editor out with.
//!
//! `axum::serve` gives hyper no timer, and hyper then enforces no header read timeout at all:
//! a client that sends its request head one byte per second (slowloris), or nothing, holds its
//! connection and task forever. So the loop is ours:
//!
//! - HTTP/1: the whole request head must arrive within [`Limits::header_read_timeout`] of the
//!   moment hyper starts reading it (on a kept-alive connection: of the previous response),
//!   else hyper closes the connection.
//! - Every connection, HTTP/1 or HTTP/2: one without an authenticated request in flight (a
//!   request the front door admitted with a local key or the management token, from its head
//!   to the last byte of its answer) is closed after the same time. That covers a connection
//!   that never sends a request (or drags out protocol detection or the HTTP/2 handshake), a
//!   kept-alive one left idle, and an HTTP/2 one kept open by unauthenticated requests or by
//!   answering hyper's keep-alive PINGs, which alone never end a connection.
//! - At most [`Limits::max_connections`] connections are open at once. When a new one arrives
//!   with the table full, the oldest connection that has not made an authenticated request is
//!   closed to make room: a local process without a key can open many connections, but never
//!   one an editor needs. When every open connection has authenticated, the new one is closed.
//! - Accepted sockets get `TCP_NODELAY`, or streamed chunks would wait for delayed ACKs.
//! - On shutdown the listener stops accepting and every connection is told to finish the
//!   request it is serving and close; [`run`] returns when the last one has.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::serve::Listener;
use bytes::Bytes;
use futures_util::future::Either;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::ServerState;
use crate::config::DEFAULT_MAX_CONNECTIONS;

/// How long a client may take to send a request head; see the module docs.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Deadlines and bounds of the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a client may take to send a request head, and how long a connection may stay
    /// open without an authenticated request in flight.
    pub header_read_timeout: Duration,
    /// How many connections may be open at once (see the module docs).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { header_read_timeout: HEADER_READ_TIMEOUT, max_connections: DEFAULT_MAX_CONNECTIONS }
    }
}

/// One open connection, as the front door and the table see it. The front door finds it in
/// each request's extensions.
///
/// A request marks itself in flight with two atomic writes and wakes nothing: the idle watch
/// reads the marks when its timer fires, and sets the timer again if the connection was busy
/// since. (It used to be woken at each request's start and end, and to arm a new timer each
/// time; that was two extra polls of the connection's task per request.) An
/// HTTP/2 connection's requests run in tasks of their own, so a request that ends writes its
/// time before it releases its count, and the watch reads them in the other order.
#[derive(Debug)]
pub(crate) struct Connection {
    /// It made an authenticated request once: it is not the one closed to make room.
    authenticated: AtomicBool,
    /// Authenticated requests in flight, from their head to the end of their answer.
    in_flight: AtomicUsize,
    /// When the last of them ended, in nanoseconds after `opened` (0: none has).
    quiet_since: AtomicU64,
    opened: Instant,
    /// Told to close: the table needed its place.
    evicted: Notify,
}

impl Connection {
    fn new() -> Self {
        Self {
            authenticated: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(0),
            opened: Instant::now(),
            evicted: Notify::new(),
        }
    }

    /// The front door admitted a request with a key: the connection counts as an editor's,
    /// and stays open while the returned guard (held by the answer's body) lives.
    pub(crate) fn admitted(self: &Arc<Self>) -> InFlight {
        self.authenticated.store(true, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }

    /// Resolves once the connection has had no authenticated request in flight for `idle`.
    async fn idle_for(&self, idle: Duration) {
        let mut due = self.opened + idle;
        loop {
            tokio::time::sleep_until(due).await;
            if self.in_flight.load(Ordering::Acquire) > 0 {
                // Busy: asked again one `idle` from now, or sooner once it ends.
                due = Instant::now() + idle;
                continue;
            }
            let quiet = Duration::from_nanos(self.quiet_since.load(Ordering::Relaxed));
            due = self.opened + quiet + idle;
            if due <= Instant::now() {
                return;
            }
        }
    }
}

/// An authenticated request in flight on its connection.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let connection = &self.0;
        let since = u64::try_from(connection.opened.elapsed().as_nanos()).unwrap_or(u64::MAX);
        connection.quiet_since.store(since, Ordering::Relaxed);
        connection.in_flight.fetch_sub(1, Ordering::Release);
    }
}

/// `response` with its body holding `in_flight` until the body ends or is dropped: a long
/// stream keeps its connection open however long it runs.
pub(crate) fn hold(response: Response, in_flight: InFlight) -> Response {
    response.map(|body| Body::new(Held { body, _in_flight: in_flight }))
}

/// A body that keeps its request counted as in flight; everything else is the inner body's,
/// its size hint included (so a `Content-Length` stays one).
struct Held {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The open connections, oldest first.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Arc<Connection>>,
}

impl Table {
    /// Makes room for one more connection under `max`, closing the oldest that has not
    /// authenticated; `None` when every open one has (the new one is then not served).
    fn admit(&mut self, max: usize) -> Option<(u64, Arc<Connection>)> {
        if self.open.len() >= max {
            let oldest = self
                .open
                .iter()
                .find(|(_, c)| !c.authenticated.load(Ordering::Relaxed))
                .map(|(&id, _)| id)?;
            if let Some(evicted) = self.open.remove(&oldest) {
                evicted.evicted.notify_one();
            }
        }
        let id = self.next;
        self.next += 1;
        let connection = Arc::new(Connection::new());
        self.open.insert(id, Arc::clone(&connection));
        Some((id, connection))
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains the connections.
/// `state` is the router's: the `/v1` routes a connection answers itself need it.
pub(super) async fn run(
    mut listener: super::Loopback,
    (router, state): (Router, ServerState),
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: Limits,
) {
    let graceful = GracefulShutdown::new();
    let table = Arc::new(Mutex::new(Table::default()));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // `Listener::accept` retries failed accepts (out of file descriptors, ...) itself.
        let (tcp, _peer) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        let Some((id, connection)) = table.lock().admit(limits.max_connections) else {
            tracing::warn!(
                max_connections = limits.max_connections,
                "every connection is an authenticated client's; refusing a new one"
            );
            continue;
        };
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let table = Arc::clone(&table);
        let service = Marked {
            router: TowerToHyperService::new(router.clone()),
            state: state.clone(),
            connection,
        };
        let served = serve_connection(tcp, service, limits, graceful.watcher());
        tokio::spawn(async move {
            served.await;
            table.lock().open.remove(&id);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

async fn serve_connection(tcp: TcpStream, service: Marked, limits: Limits, watcher: Watcher) {
    let connection = Arc::clone(&service.connection);
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let served = watcher.watch(builder.serve_connection(TokioIo::new(tcp), service));
    let result = tokio::select! {
        result = served => result,
        () = connection.idle_for(limits.header_read_timeout) => {
            tracing::debug!("no authenticated request in flight within the header read timeout; closing the connection");
            return;
        }
        () = connection.evicted.notified() => {
            tracing::debug!("closing an unauthenticated connection to make room for a new one");
            return;
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// The router as a hyper service that puts the connection in each request's extensions, and
/// answers a client's `POST` to `/v1` itself: the front door and the handler, without the
/// router's dispatch (the route's boxed service cloned, its future boxed again, extensions
/// added) in between.
#[derive(Clone, Debug)]
struct Marked {
    router: TowerToHyperService<Router>,
    state: ServerState,
    connection: Arc<Connection>,
}

type Inner = TowerToHyperService<Router>;
type HyperRequest = http::Request<hyper::body::Incoming>;
type Answered = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl hyper::service::Service<HyperRequest> for Marked {
    type Response = <Inner as hyper::service::Service<HyperRequest>>::Response;
    type Error = Infallible;
    type Future = Either<<Inner as hyper::service::Service<HyperRequest>>::Future, Answered>;

    fn call(&self, mut request: HyperRequest) -> Self::Future {
        request.extensions_mut().insert(Arc::clone(&self.connection));
        match super::v1::direct(request.method(), request.uri().path()) {
            Some(client) => {
                let (state, request) = (self.state.clone(), request.map(Body::new));
                Either::Right(Box::pin(async move {
                    Ok(super::guard::direct(state, request, client).await)
                }))
            }
            None => Either::Left(self.router.call(request)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_closes_its_oldest_unauthenticated_connection_and_never_an_editors() {
        let mut table = Table::default();
        let (editor, first) = table.admit(3).unwrap();
        drop(first.admitted());
        let (flood_1, _) = table.admit(3).unwrap();
        let (flood_2, _) = table.admit(3).unwrap();
        let (newest, latest) = table.admit(3).unwrap();
        let open = |table: &Table| table.open.keys().copied().collect::<Vec<_>>();
        assert_eq!(open(&table), [editor, flood_2, newest], "the oldest unauthenticated went");
        drop(latest.admitted());
        let (last, _) = table.admit(3).unwrap();
        assert_eq!(open(&table), [editor, newest, last]);
        assert!(!table.open[&last].authenticated.load(Ordering::Relaxed));
        drop(table.open[&last].admitted());
        assert!(table.admit(3).is_none(), "every open connection is an editor's");
        assert_eq!(open(&table), [editor, newest, last]);
        assert!(flood_1 < flood_2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_while_no_authenticated_request_is_in_flight() {
        let connection = Arc::new(Connection::new());
        let idle = Duration::from_secs(30);
        let in_flight = connection.admitted();
        let waiting = tokio::time::timeout(idle * 10, connection.idle_for(idle));
        assert!(waiting.await.is_err(), "not idle with a request in flight");
        drop(in_flight);
        let started = Instant::now();
        connection.idle_for(idle).await;
        assert_eq!(started.elapsed(), idle);
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_time_runs_from_the_end_of_the_last_request() {
        let connection = Arc::new(Connection::new());
        let idle = Duration::from_secs(30);
        let opened = Instant::now();
        let watch = tokio::spawn({
            let connection = Arc::clone(&connection);
            async move {
                connection.idle_for(idle).await;
                opened.elapsed()
            }
        });
        let at = |secs| tokio::time::sleep_until(opened + Duration::from_secs(secs));
        at(10).await;
        let first = connection.admitted();
        at(45).await; // the watch looked at 30 and found it busy
        drop(first);
        at(50).await;
        drop(connection.admitted());
        assert_eq!(watch.await.unwrap(), Duration::from_secs(80), "30 s after the last one ended");
    }
}
