//! The HTTP executor: one pooled HTTP client (rustls) that sends an encoded upstream request
//! and reports what happened in the terms the classifier understands.
//!
//! Deadlines (RESILIENCE.md §7): `connect` is the client's connect timeout; `headers` bounds
//! the wait for response headers here. The first-event and idle deadlines belong to whoever
//! reads the body, because only a dialect decoder can tell a real event from a keep-alive.
//! Error bodies are read here, bounded, so the caller can pass them to the body sniffers.

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

/// The largest successful answer read whole (a non-streamed completion). Far above any real
/// answer (a million tokens of text is about 4 MiB), far below what would hurt the machine.
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// The largest model list read. OpenRouter's full list, the longest known, is about 1 MiB.
pub const MAX_MODEL_LIST: usize = 4 * 1024 * 1024;

/// The largest OAuth token response read: a few tokens and numbers, never more than a few KiB.
pub const MAX_TOKEN_RESPONSE: usize = 64 * 1024;

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
    /// A successful answer larger than the reader's cap (`Content-Length` said so, or the body
    /// kept coming): the upstream is broken or hostile, and nothing more of it is read.
    #[error("the answer is larger than the {} limit", size(*.0))]
    TooLarge(usize),
}

/// `bytes` for a message: whole MiB or KiB when it is one.
pub fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
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

/// The environment variables that name a proxy for reqwest's client (upper and lower case).
const PROXY_VARIABLES: [&str; 6] =
    ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"];

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
            .redirect(reqwest::redirect::Policy::none());
        // The proxies of the environment (`HTTPS_PROXY`, `ALL_PROXY`, ...) are read here, once,
        // as the client would; with none set, no request asks which proxy it goes through.
        let client = if PROXY_VARIABLES.iter().any(|v| std::env::var_os(v).is_some()) {
            client
        } else {
            client.no_proxy()
        }
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
            // The headers are taken, not copied: the body does not need them.
            Ok(Ok(mut body)) => {
                let headers = std::mem::take(body.headers_mut());
                Ok(Response { status: body.status(), headers, body })
            }
        }
    }
}

impl Response {
    /// The body as it arrives.
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, SendFailure>> + Send {
        self.body.bytes_stream().map(|chunk| chunk.map_err(|e| classify_error(&e)))
    }

    /// The whole body, up to `deadline`. A successful body larger than `cap` is refused with
    /// [`SendFailure::TooLarge`]: at once when its `Content-Length` says so, otherwise as soon
    /// as the bytes read pass the cap, so an upstream can never grow memory past it. Error
    /// bodies are not refused but cut at 64 KiB: their start says all a sniffer needs.
    pub async fn into_bytes(self, deadline: Duration, cap: usize) -> Result<Bytes, SendFailure> {
        let success = self.status.is_success();
        let announced = self.body.content_length();
        if success && announced.is_some_and(|len| len > cap as u64) {
            return Err(SendFailure::TooLarge(cap));
        }
        let limit = if success { cap } else { MAX_ERROR_BODY };
        let read = async {
            let mut stream = self.into_stream();
            // A body that comes in one piece (most answers) is that piece, not a copy of it.
            let mut first = None;
            let mut body = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                let held = first.as_ref().map_or(body.len(), Bytes::len);
                if success && held + chunk.len() > limit {
                    return Err(SendFailure::TooLarge(cap));
                }
                match first.take() {
                    None if body.is_empty() && chunk.len() < limit => {
                        first = Some(chunk);
                        continue;
                    }
                    Some(piece) => body.extend_from_slice(&piece),
                    None => {}
                }
                body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]);
                if !success && body.len() >= limit {
                    break;
                }
            }
            Ok(match first {
                Some(first) => first,
                None => Bytes::from(body),
            })
        };
        tokio::time::timeout(deadline, read)
            .await
            .unwrap_or(Err(SendFailure::Timeout(TimeoutPhase::FirstEvent)))
    }
}

/// Maps a client error onto the classifier's transport faults by walking its source chain.
fn classify_error(error: &reqwest::Error) -> SendFailure {
    if error.is_timeout() {
        return SendFailure::Timeout(if error.is_connect() {
            TimeoutPhase::Connect
        } else {
            TimeoutPhase::Headers
        });
    }
    transport_fault(error, error.is_connect())
}

/// The transport fault behind a client error that is not a timeout.
///
/// TLS is recognised by type: a `rustls::Error` anywhere in the chain is the TLS protocol
/// failing (a certificate refused, an alert, a peer speaking something else), which may open
/// the breaker at once (RESILIENCE.md §2). An I/O error whose text merely mentions TLS is not:
/// a pooled connection the server closed without `close_notify` reports "peer closed connection
/// without sending TLS `close_notify`" (`UnexpectedEof`), which is a plain reset, and a reset must
/// never trip a breaker on its own. The words in a message are used only to tell DNS from a
/// refused connection, where nothing better is exposed and both charge the same fault.
fn transport_fault(error: &(dyn std::error::Error + 'static), is_connect: bool) -> SendFailure {
    let mut chain = String::new();
    let mut source = error.source();
    while let Some(e) = source {
        if is_tls_error(e) {
            return SendFailure::Transport(TransportFault::Tls);
        }
        if is_connect && is_out_of_descriptors(e) {
            return SendFailure::Transport(TransportFault::OutOfDescriptors);
        }
        chain.push_str(&e.to_string().to_ascii_lowercase());
        chain.push_str(": ");
        source = e.source();
    }
    if is_connect {
        let dns = chain.contains("dns") || chain.contains("resolve") || chain.contains("lookup");
        return SendFailure::Transport(if dns {
            TransportFault::Dns
        } else {
            TransportFault::ConnectRefused
        });
    }
    SendFailure::Transport(TransportFault::ResetBeforeHeaders)
}

/// An I/O error saying this process (`EMFILE`) or the system (`ENFILE`) has no file
/// descriptor left, on its own or inside `io::Error`s: the socket was never opened, so the
/// upstream is not to blame. The numbers are the same on Linux, macOS and the BSDs.
fn is_out_of_descriptors(error: &(dyn std::error::Error + 'static)) -> bool {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    let mut current = Some(error);
    while let Some(e) = current {
        let Some(io) = e.downcast_ref::<std::io::Error>() else { return false };
        if cfg!(unix) && matches!(io.raw_os_error(), Some(EMFILE | ENFILE)) {
            return true;
        }
        current = io.get_ref().map(|inner| inner as &(dyn std::error::Error + 'static));
    }
    false
}

/// A `rustls::Error`, on its own or inside `io::Error`s (tokio-rustls wraps it in one, and the
/// connector in another). An `io::Error`'s `source` skips the error it wraps, so the wrappers
/// are opened by hand.
fn is_tls_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<rustls::Error>() {
            return true;
        }
        current = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .map(|inner| inner as &(dyn std::error::Error + 'static));
    }
    false
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    /// A client error as hyper builds one: a message, and the cause as its source.
    #[derive(Debug)]
    struct Wrapped(&'static str, Box<dyn std::error::Error + Send + Sync>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.1)
        }
    }

    /// `error` as the source of a client error, as reqwest reports it.
    fn fault(error: impl std::error::Error + Send + Sync + 'static, connect: bool) -> SendFailure {
        let client =
            Wrapped("error sending request", Box::new(Wrapped("client error", Box::new(error))));
        transport_fault(&client, connect)
    }

    fn tls_io(error: rustls::Error) -> io::Error {
        // How a handshake failure reaches reqwest: tokio-rustls wraps it in an `InvalidData`
        // I/O error, the connector wraps that in another.
        io::Error::other(io::Error::new(io::ErrorKind::InvalidData, error))
    }

    #[test]
    fn a_stale_pooled_connection_closed_without_close_notify_is_a_reset_not_a_tls_fault() {
        let eof = io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "peer closed connection without sending TLS close_notify: \
             https://docs.rs/rustls/latest/rustls/manual/_03_howto/index.html#unexpected-eof",
        );
        assert_eq!(fault(eof, false), SendFailure::Transport(TransportFault::ResetBeforeHeaders));
    }

    #[test]
    fn rustls_handshake_errors_are_tls_faults_by_type() {
        let cases = [
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
            rustls::Error::InvalidCertificate(rustls::CertificateError::Expired),
            rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure),
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            rustls::Error::NoCertificatesPresented,
        ];
        for error in cases {
            let shown = format!("{error:?}");
            assert_eq!(
                fault(tls_io(error), true),
                SendFailure::Transport(TransportFault::Tls),
                "{shown}"
            );
        }
    }

    #[test]
    fn a_message_that_merely_mentions_tls_or_a_handshake_is_not_a_tls_fault() {
        let refused = io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "connection refused by the tls-terminating proxy during handshake",
        );
        assert_eq!(fault(refused, true), SendFailure::Transport(TransportFault::ConnectRefused));
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "certificate store reloaded");
        assert_eq!(fault(reset, false), SendFailure::Transport(TransportFault::ResetBeforeHeaders));
    }

    #[cfg(unix)]
    #[test]
    fn a_connect_that_finds_no_file_descriptor_is_a_local_fault_not_a_refusal() {
        for (errno, name) in [(24, "EMFILE"), (23, "ENFILE")] {
            let failure = fault(io::Error::from_raw_os_error(errno), true);
            assert_eq!(failure, SendFailure::Transport(TransportFault::OutOfDescriptors), "{name}");
            // As a connector may wrap it.
            let wrapped = io::Error::other(io::Error::from_raw_os_error(errno));
            assert_eq!(
                fault(wrapped, true),
                SendFailure::Transport(TransportFault::OutOfDescriptors),
                "{name} wrapped"
            );
        }
        let refused = io::Error::from_raw_os_error(111);
        assert_eq!(fault(refused, true), SendFailure::Transport(TransportFault::ConnectRefused));
    }

    /// A server that answers one request with `head`, then writes `chunk` `times` times, and
    /// then holds the connection open: a body that ends early is never mistaken for a refusal.
    async fn answering(
        head: &str,
        chunk: Vec<u8>,
        times: usize,
    ) -> (Url, tokio::task::JoinHandle<()>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let head = head.to_owned();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(head.as_bytes()).await;
            for _ in 0..times {
                if socket.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            std::future::pending::<()>().await;
        });
        (url, server)
    }

    async fn read(url: Url, cap: usize) -> Result<Bytes, SendFailure> {
        let executor = Executor::new(Duration::from_secs(5)).unwrap();
        let request = UpstreamRequest { url, headers: Vec::new(), body: Bytes::new() };
        let response = executor.send(request, Duration::from_secs(5)).await?;
        // A long deadline: only a refusal, never the deadline, may end these reads.
        response.into_bytes(Duration::from_secs(10), cap).await
    }

    const KIB_64: usize = 64 * 1024;

    #[tokio::test]
    async fn a_content_length_over_the_cap_is_refused_before_any_body_is_read() {
        let head = "HTTP/1.1 200 OK\r\ncontent-length: 1073741824\r\n\r\n";
        let (url, server) = answering(head, Vec::new(), 0).await;
        assert_eq!(read(url, 1024).await, Err(SendFailure::TooLarge(1024)));
        server.abort();
    }

    #[tokio::test]
    async fn a_body_that_keeps_coming_past_the_cap_is_refused_at_the_cap() {
        // Chunked, so no length is announced: 4 MiB in 64 KiB chunks, then silence.
        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let mut chunk = format!("{KIB_64:x}\r\n").into_bytes();
        chunk.extend(std::iter::repeat_n(b'x', KIB_64));
        chunk.extend(b"\r\n");
        let (url, server) = answering(head, chunk, 64).await;
        assert_eq!(read(url, 4 * KIB_64).await, Err(SendFailure::TooLarge(4 * KIB_64)));
        server.abort();
    }

    #[tokio::test]
    async fn a_body_of_exactly_the_cap_is_read_whole_and_an_error_body_is_cut_not_refused() {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 2 * KIB_64);
        let (url, server) = answering(&head, vec![b'x'; KIB_64], 2).await;
        assert_eq!(read(url, 2 * KIB_64).await.unwrap().len(), 2 * KIB_64);
        server.abort();
        let head = "HTTP/1.1 500 Oops\r\ncontent-length: 1073741824\r\n\r\n";
        let (url, server) = answering(head, vec![b'x'; KIB_64], 2).await;
        assert_eq!(read(url, 1024).await.unwrap().len(), MAX_ERROR_BODY);
        server.abort();
    }

    #[test]
    fn sizes_read_as_whole_units() {
        assert_eq!(size(MAX_ANSWER), "64 MiB");
        assert_eq!(size(MAX_TOKEN_RESPONSE), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[tokio::test]
    async fn a_server_that_answers_a_client_hello_with_plain_http_is_a_tls_fault() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; 512];
            let _ = socket.read(&mut hello).await;
            let _ =
                socket.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
            let _ = socket.shutdown().await;
        });
        let executor = Executor::new(Duration::from_secs(5)).unwrap();
        let url = Url::parse(&format!("https://127.0.0.1:{port}/v1/messages")).unwrap();
        let request = UpstreamRequest { url, headers: Vec::new(), body: Bytes::from_static(b"{}") };
        let failure = executor.send(request, Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(failure, SendFailure::Transport(TransportFault::Tls));
        server.await.unwrap();
    }
}
