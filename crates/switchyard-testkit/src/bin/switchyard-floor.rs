//! `switchyard-floor`: the bare pass-through that `switchyard-bench` measures Switchyard
//! against. It does what no router can avoid and nothing else: read the request,
//! make one upstream call to the same path, relay the status, the headers and the bytes as they
//! arrive. Nothing is parsed, logged or counted.
//!
//! It runs as Switchyard's default does: one thread, HTTP/1.1, `TCP_NODELAY` on accepted
//! sockets, and a reqwest client with Switchyard's settings (`TCP_NODELAY`, keep-alive, no
//! redirects). Prints `listening on http://127.0.0.1:PORT/v1` when it is ready.
//!
//!     switchyard-floor --upstream http://127.0.0.1:PORT [--port 0]

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::serve::ListenerExt as _;
use clap::Parser;
use http_body_util::BodyExt as _;

#[derive(Debug, Parser)]
#[command(name = "switchyard-floor")]
struct Args {
    /// The upstream's base URL (no `/v1`); the request's path and query are appended.
    #[arg(long)]
    upstream: String,
    #[arg(long, default_value_t = 0)]
    port: u16,
}

#[derive(Clone)]
struct Upstream {
    base: String,
    http: reqwest::Client,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let upstream = Upstream { base: args.upstream.trim_end_matches('/').to_owned(), http };
    let app = axum::Router::new().fallback(relay).with_state(upstream);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    let address = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{address}/v1")?;
    stdout.flush()?;
    drop(stdout);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.context("serve")
}

async fn relay(State(upstream): State<Upstream>, request: Request) -> Response {
    match forward(&upstream, request).await {
        Ok(response) => response,
        Err(error) => (StatusCode::BAD_GATEWAY, format!("{error:#}")).into_response(),
    }
}

async fn forward(upstream: &Upstream, request: Request) -> anyhow::Result<Response> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = body.collect().await?.to_bytes();
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    // reqwest sets these for the body it sends.
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let answer = upstream
        .http
        .request(parts.method, format!("{}{path}", upstream.base))
        .headers(headers)
        .body(body)
        .send()
        .await?;
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        *headers = answer.headers().clone();
        strip_hop_by_hop(headers);
    }
    Ok(response.body(Body::from_stream(answer.bytes_stream()))?)
}

/// What belongs to one connection, not to the message.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    headers.remove(header::CONNECTION);
    headers.remove(header::TRANSFER_ENCODING);
}
