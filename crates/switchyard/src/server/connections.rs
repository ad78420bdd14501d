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
//! - Out of file descriptors, an accept closes a connection before it tries again: one already
//!   told to close, else the oldest that has not authenticated, else (every one is an
//!   editor's) the new one, taken off the backlog with a reserve descriptor and closed at once
//!   ([`run`]). axum's listener would sleep a second and retry while the flood holds every
//!   descriptor, and the editor's connection would wait in the backlog until it timed out.
//!   Other accept errors are logged, and the next connection accepted without a pause.
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
use bytes::Bytes;
use futures_util::FutureExt as _;
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
use crate::descriptors;

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

/// The open connections, oldest first, and how many told to close have not closed yet.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Arc<Connection>>,
    /// Connections evicted whose tasks have not ended: their descriptors are still open.
    closing: usize,
}

impl Table {
    /// Makes room for one more connection under `max`, closing the oldest that has not
    /// authenticated; `None` when every open one has (the new one is then not served).
    fn admit(&mut self, max: usize) -> Option<(u64, Arc<Connection>)> {
        if self.open.len() >= max && !self.evict() {
            return None;
        }
        let id = self.next;
        self.next += 1;
        let connection = Arc::new(Connection::new());
        self.open.insert(id, Arc::clone(&connection));
        Some((id, connection))
    }

    /// Tells the oldest connection that has not made an authenticated request to close;
    /// `false` when every open one has.
    fn evict(&mut self) -> bool {
        let Some(oldest) = self
            .open
            .iter()
            .find(|(_, c)| !c.authenticated.load(Ordering::Relaxed))
            .map(|(&id, _)| id)
        else {
            return false;
        };
        if let Some(evicted) = self.open.remove(&oldest) {
            evicted.evicted.notify_one();
            self.closing += 1;
        }
        true
    }

    /// Out of descriptors: whether one will be freed by waiting for a connection's task to
    /// end (one already told to close, or the oldest unauthenticated, told now).
    fn free_one(&mut self) -> bool {
        self.closing > 0 || self.evict()
    }

    /// The task of connection `id` ended: its descriptor is closed.
    fn ended(&mut self, id: u64) {
        if self.open.remove(&id).is_none() {
            // It had been evicted.
            self.closing = self.closing.saturating_sub(1);
        }
    }
}

/// The table, with its one owner's wake-up: the accept loop admits and evicts, each
/// connection's task reports its end here.
#[derive(Debug, Default)]
struct Connections {
    table: Mutex<Table>,
    /// A connection's task ended (one permit is kept when nobody waits).
    ended: Notify,
}

impl Connections {
    fn ended(&self, id: u64) {
        self.table.lock().ended(id);
        self.ended.notify_one();
    }
}

/// How long the accept loop waits for a closing connection's task to end before it looks
/// again; a guard against a task that never ends, not a synchronisation.
const CLOSING_WAIT: Duration = Duration::from_secs(1);

/// How long the accept loop pauses after an accept error that a retry at once would only
/// repeat (the kernel out of memory or buffers).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Serves `router` on `listener` until `shutdown` resolves, then drains the connections.
/// `state` is the router's: the `/v1` routes a connection answers itself need it.
///
/// Out of file descriptors (`EMFILE`, `ENFILE`), an accept frees one before it tries again:
/// it waits for a connection told to close, or tells the oldest one that has not
/// authenticated to close and waits for it. When every open connection is an editor's, it
/// closes its reserve descriptor, accepts the waiting connection and closes it at once, and
/// opens the reserve again: the backlog moves, nothing spins on it, and no editor's
/// connection is closed for a stranger's.
pub(super) async fn run(
    mut listener: super::Loopback,
    (router, state): (Router, ServerState),
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: Limits,
) {
    let graceful = GracefulShutdown::new();
    let connections = Arc::new(Connections::default());
    let mut reserve = Reserve::open();
    let mut short = false;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => tcp,
            Err(error) if descriptors::exhausted(&error) => {
                if !std::mem::replace(&mut short, true) {
                    tracing::warn!(%error, max_connections = limits.max_connections, "out of file descriptors: closing idle unauthenticated connections to accept new ones; raise the limit on open files (`ulimit -n`)");
                }
                if connections.table.lock().free_one() {
                    tokio::select! {
                        _ = tokio::time::timeout(CLOSING_WAIT, connections.ended.notified()) => {}
                        () = &mut shutdown => break,
                    }
                } else {
                    reserve.shed(&mut listener).await;
                }
                continue;
            }
            Err(error) if is_connection_error(&error) => {
                tracing::debug!(%error, "a connection failed before it was accepted");
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection");
                tokio::select! {
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    () = &mut shutdown => break,
                }
                continue;
            }
        };
        short = false;
        let Some((id, connection)) = connections.table.lock().admit(limits.max_connections) else {
            tracing::warn!(
                max_connections = limits.max_connections,
                "every connection is an authenticated client's; refusing a new one"
            );
            continue;
        };
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let connections = Arc::clone(&connections);
        let service = Marked {
            router: TowerToHyperService::new(router.clone()),
            state: state.clone(),
            connection,
        };
        let served = serve_connection(tcp, service, limits, graceful.watcher());
        tokio::spawn(async move {
            served.await;
            connections.ended(id);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// An accept error that is one connection's alone (it was reset or aborted while it waited):
/// the next one is accepted at once.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        error.kind(),
        K::ConnectionAborted | K::ConnectionReset | K::ConnectionRefused | K::Interrupted
    )
}

/// One descriptor held back, so that with nothing to close the accept loop can still take a
/// waiting connection off the backlog (and close it): otherwise the listener stays ready,
/// every accept fails the same way, and the loop spins.
#[derive(Debug)]
struct Reserve(Option<std::fs::File>);

impl Reserve {
    fn open() -> Self {
        #[cfg(unix)]
        let file = std::fs::File::open("/dev/null");
        #[cfg(not(unix))]
        let file = std::fs::File::open("NUL");
        match file {
            Ok(file) => Self(Some(file)),
            Err(error) => {
                tracing::debug!(%error, "cannot open the reserve descriptor");
                Self(None)
            }
        }
    }

    /// Frees the reserve, closes the connection waiting on `listener` with it, and takes the
    /// reserve back. Without a reserve (another thread took the descriptor first), pauses
    /// briefly instead and tries to take it back.
    async fn shed(&mut self, listener: &mut super::Loopback) {
        match self.0.take() {
            Some(file) => {
                drop(file);
                // Only a connection already waiting: the next one may find room.
                match listener.accept().now_or_never() {
                    Some(Ok((tcp, _))) => {
                        drop(tcp);
                        tracing::debug!(
                            "out of file descriptors and every connection is an editor's: closed a new one"
                        );
                    }
                    Some(Err(error)) => {
                        tracing::debug!(%error, "cannot accept with the reserve descriptor");
                    }
                    None => {}
                }
            }
            None => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
        *self = Self::open();
    }
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

    #[test]
    fn out_of_descriptors_the_table_waits_for_closing_connections_before_evicting_more() {
        let mut table = Table::default();
        let (editor, first) = table.admit(8).unwrap();
        drop(first.admitted());
        let (flood_1, _) = table.admit(8).unwrap();
        let (flood_2, _) = table.admit(8).unwrap();
        assert!(table.free_one(), "the oldest unauthenticated is told to close");
        assert_eq!(table.open.keys().copied().collect::<Vec<_>>(), [editor, flood_2]);
        assert!(table.free_one(), "it has not closed yet: wait for it, evict nothing more");
        assert_eq!(table.open.len(), 2);
        table.ended(flood_1);
        assert_eq!(table.closing, 0);
        assert!(table.free_one());
        table.ended(flood_2);
        assert!(!table.free_one(), "only the editor's is left: nothing to close");
        assert_eq!(table.open.keys().copied().collect::<Vec<_>>(), [editor]);
        table.ended(editor);
        assert!(table.open.is_empty());
        assert_eq!(table.closing, 0);
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
