//! The HTTP executor: one pooled HTTP client (rustls) that sends an encoded upstream request
//! and reports what happened in the terms the classifier understands.
//!
//! Deadlines (RESILIENCE.md §7): `connect` is the client's connect timeout; `headers` bounds
//! the wait for response headers here. The first-event and idle deadlines belong to whoever
//! reads the body, because only a dialect decoder can tell a real event from a keep-alive.
//! Error bodies are read here, bounded, so the caller can pass them to the body sniffers.

use std::error::Error as _;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use switchyard_core::outcome::{TimeoutPhase, TransportFault};
pub use url::Url;

/// Idle connections kept per upstream host, for reuse.
pub const MAX_IDLE_PER_HOST: usize = 64;

/// Error bodies larger than this are cut; the start says all a sniffer needs.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// One pooled client for every upstream.
#[derive(Clone, Debug)]
pub struct Executor {
    client: reqwest::Client,
    connect_timeout: Duration,
}

/// What to send.
#[derive(Debug)]
pub struct UpstreamRequest {
    pub url: Url,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

/// Why no response arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendFailure {
    #[error("transport failure: {0:?}")]
    Transport(TransportFault),
    #[error("no answer within the deadline ({0:?})")]
    Timeout(TimeoutPhase),
}

/// A response whose headers arrived.
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: reqwest::Response,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response").field("status", &self.status).finish_non_exhaustive()
    }
}

impl Executor {
    pub fn new(connect_timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(90))
            // A burst would otherwise leave one idle connection per request it had in flight,
            // each with its buffers (and a socket), for the whole idle timeout: a thousand
            // concurrent requests kept about 23 MB alive after they ended. Steady traffic reuses
            // far fewer than this at once.
            .pool_max_idle_per_host(MAX_IDLE_PER_HOST)
            // Upstream redirects are a misconfiguration we want to see, not follow.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { client, connect_timeout })
    }

    /// The connect timeout it was built with.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Sends `request` and waits up to `headers_deadline` for the response headers.
    pub async fn send(
        &self,
        request: UpstreamRequest,
        headers_deadline: Duration,
    ) -> Result<Response, SendFailure> {
        let builder = self.client.post(request.url).body(request.body);
        Self::exchange(builder, request.headers, headers_deadline).await
    }

    /// A `GET` (model lists), with the same deadlines and fault mapping as [`Executor::send`].
    pub async fn get(
        &self,
        url: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        headers_deadline: Duration,
    ) -> Result<Response, SendFailure> {
        Self::exchange(self.client.get(url), headers, headers_deadline).await
    }

    async fn exchange(
        mut builder: reqwest::RequestBuilder,
        headers: Vec<(HeaderName, HeaderValue)>,
        headers_deadline: Duration,
    ) -> Result<Response, SendFailure> {
        for (name, value) in headers {
            builder = builder.header(name, value);
        }
        match tokio::time::timeout(headers_deadline, builder.send()).await {
            Err(_) => Err(SendFailure::Timeout(TimeoutPhase::Headers)),
            Ok(Err(error)) => Err(classify_error(&error)),
            Ok(Ok(body)) => {
                Ok(Response { status: body.status(), headers: body.headers().clone(), body })
            }
        }
    }
}

impl Response {
    /// The body as it arrives.
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, SendFailure>> + Send {
        self.body.bytes_stream().map(|chunk| chunk.map_err(|e| classify_error(&e)))
    }

    /// The whole body, up to `deadline` (for non-streamed answers and error bodies; error bodies
    /// are cut at 64 KiB).
    pub async fn into_bytes(self, deadline: Duration) -> Result<Bytes, SendFailure> {
        let limit = if self.status.is_success() { usize::MAX } else { MAX_ERROR_BODY };
        let read = async {
            let mut stream = self.into_stream();
            let mut body = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len().min(limit))]);
                if body.len() >= limit {
                    break;
                }
            }
            Ok(Bytes::from(body))
        };
        tokio::time::timeout(deadline, read)
            .await
            .unwrap_or(Err(SendFailure::Timeout(TimeoutPhase::FirstEvent)))
    }
}

/// Maps a client error onto the classifier's transport faults by walking its source chain.
fn classify_error(error: &reqwest::Error) -> SendFailure {
    let mut chain = String::new();
    let mut source = error.source();
    while let Some(e) = source {
        chain.push_str(&e.to_string().to_ascii_lowercase());
        chain.push_str(": ");
        source = e.source();
    }
    if error.is_timeout() {
        return SendFailure::Timeout(if error.is_connect() {
            TimeoutPhase::Connect
        } else {
            TimeoutPhase::Headers
        });
    }
    if chain.contains("certificate") || chain.contains("tls") || chain.contains("handshake") {
        return SendFailure::Transport(TransportFault::Tls);
    }
    if error.is_connect() {
        let dns = chain.contains("dns") || chain.contains("resolve") || chain.contains("lookup");
        return SendFailure::Transport(if dns {
            TransportFault::Dns
        } else {
            TransportFault::ConnectRefused
        });
    }
    SendFailure::Transport(TransportFault::ResetBeforeHeaders)
}
