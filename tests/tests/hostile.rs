//! Hostile clients against the localhost server, end to end: forged `Host` names, browser
//! `Origin`s, preflights, missing, wrong and revoked keys, bodies of the wrong type or too
//! large, and slowloris connections. Each is refused with its status (or its connection cut at
//! the header read timeout), none reaches the upstream, and honest clients running at the same
//! time are served as if nothing happened.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_e2e::harness::{FALLBACK, Harness, LOCAL_KEY, MANAGEMENT_TOKEN, Setup, json_parts};
use switchyard_providers::executor;
use switchyard_testkit::Flood;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A request body both client routes accept.
fn body() -> Value {
    json!({"model": "oa/gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
}

/// Honest traffic beside the attack: one request after another until told to stop.
struct Honest {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<Duration>>,
}

impl Honest {
    fn start(h: &Harness) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let request = h.openai("oa/gpt-4o", false);
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !flag.load(Ordering::Relaxed) || latencies.len() < 5 {
                let started = Instant::now();
                let response = request.try_clone().unwrap().send().await.unwrap();
                assert_eq!(response.status(), 200, "an honest request failed during the attack");
                response.bytes().await.unwrap();
                latencies.push(started.elapsed());
            }
            latencies
        });
        Self { stop, task }
    }

    /// Stops the traffic; every request succeeded (or the task panicked). Returns how many
    /// there were and checks their latency stayed that of an idle server.
    async fn finish(self, why: &str) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let mut latencies = self.task.await.expect("honest traffic");
        latencies.sort_unstable();
        let median = latencies[latencies.len() / 2];
        let worst = latencies[latencies.len() - 1];
        // Loopback to a mock: a few milliseconds in debug builds on a busy machine. An attack
        // that stalls the server would show up as seconds.
        assert!(median < Duration::from_millis(250), "{why}: median {median:?}");
        assert!(worst < Duration::from_secs(2), "{why}: worst {worst:?} of {}", latencies.len());
        latencies.len()
    }
}

/// Status and body of a raw HTTP/1.1 exchange: `head` is sent as is, then `body`, then the
/// server's answer is read until it closes the connection.
async fn raw(port: u16, head: &str, body: &[u8]) -> (u16, String) {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    // The server may cut the connection with unread body bytes (a reset): what arrived counts.
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The error body is in the route's dialect.
fn assert_dialect(body: &Value, anthropic: bool, why: &str) {
    if anthropic {
        assert_eq!(body["type"], "error", "{why}: Anthropic shape: {body}");
    }
    assert!(body["error"]["message"].is_string(), "{why}: {body}");
}

#[tokio::test]
async fn hostile_requests_are_refused_with_their_status_and_honest_ones_flow_meanwhile() {
    let h = Harness::start("").await;
    let port = h.port;
    let honest = Honest::start(&h);

    let mut cases: Vec<(String, reqwest::RequestBuilder, u16)> = Vec::new();
    for path in ["/v1/chat/completions", "/v1/messages"] {
        let url = h.url(path);
        let post = || h.http.post(&url).bearer_auth(LOCAL_KEY).json(&body());
        for host in [
            "evil.example".to_owned(),
            format!("localhost.evil.example:{port}"),
            format!("127.0.0.1.nip.io:{port}"),
        ] {
            cases.push((format!("{path} Host {host}"), post().header("host", host), 403));
        }
        for origin in ["https://evil.example", "null"] {
            cases.push((format!("{path} Origin {origin}"), post().header("origin", origin), 403));
        }
        let no_key = h.http.post(&url).json(&body());
        cases.push((format!("{path} without a key"), no_key, 401));
        let wrong = h.http.post(&url).header("x-api-key", "sy-wrong").json(&body());
        cases.push((format!("{path} with a wrong key"), wrong, 401));
        for media in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"] {
            let typed = h
                .http
                .post(&url)
                .bearer_auth(LOCAL_KEY)
                .header("content-type", media)
                .body(body().to_string());
            cases.push((format!("{path} as {media}"), typed, 415));
        }
        let untyped = h.http.post(&url).bearer_auth(LOCAL_KEY).body(body().to_string());
        cases.push((format!("{path} without a content type"), untyped, 415));
    }
    for (why, request, status) in cases {
        let anthropic = why.starts_with("/v1/messages");
        let response = request.send().await.unwrap();
        assert!(response.headers().get("access-control-allow-origin").is_none(), "{why}");
        let (got, _, body) = json_parts(response).await;
        assert_eq!(got, status, "{why}: {body}");
        assert_dialect(&body, anthropic, &why);
    }

    // Preflights: refused, and nothing granted.
    for path in ["/v1/chat/completions", "/v1/messages", "/api/monitoring/health"] {
        let response = h
            .http
            .request(Method::OPTIONS, h.url(path))
            .header("origin", "https://evil.example")
            .header("access-control-request-method", "POST")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "preflight {path}");
        assert!(
            !response.headers().keys().any(|k| k.as_str().starts_with("access-control-")),
            "preflight {path}: {:?}",
            response.headers()
        );
    }

    // No Host at all: only a raw socket can send that.
    for path in ["/v1/chat/completions", "/v1/messages"] {
        let text = body().to_string();
        let head = format!(
            "POST {path} HTTP/1.1\r\nauthorization: Bearer {LOCAL_KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            text.len()
        );
        let (status, answer) = raw(port, &head, text.as_bytes()).await;
        assert!(status == 403 || status == 400, "{path} without Host: {status} {answer}");
    }

    // A body past the limit, declared up front: refused before it is read.
    for (path, anthropic) in [("/v1/chat/completions", false), ("/v1/messages", true)] {
        let declared = switchyard::server::MAX_BODY_BYTES + 1;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {LOCAL_KEY}\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
        );
        let (status, answer) = raw(port, &head, b"{\"model\":").await;
        assert_eq!(status, 413, "{path}: {answer}");
        assert_dialect(&serde_json::from_str(&answer).unwrap(), anthropic, path);
    }

    let served = honest.finish("during the refusals").await;
    assert_eq!(h.mock.total_attempts(), served, "only honest requests reached the upstream");
}

#[tokio::test]
async fn a_body_past_the_limit_sent_without_a_length_is_refused_once_the_limit_is_crossed() {
    let h = Harness::start("").await;
    let mut tcp = TcpStream::connect(("127.0.0.1", h.port)).await.unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nx-api-key: {LOCAL_KEY}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        h.port
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 1024 * 1024];
    let mut sent = 0;
    let (reader, mut writer) = tcp.into_split();
    let writing = tokio::spawn(async move {
        while sent <= switchyard::server::MAX_BODY_BYTES + chunk.len() {
            let frame = format!("{:x}\r\n", chunk.len());
            let ok = writer.write_all(frame.as_bytes()).await.is_ok()
                && writer.write_all(&chunk).await.is_ok()
                && writer.write_all(b"\r\n").await.is_ok();
            if !ok {
                break;
            }
            sent += chunk.len();
        }
        sent
    });
    let mut reader = reader;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), reader.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"type\":\"error\""), "Anthropic shape: {text}");
    let sent = writing.await.unwrap();
    assert!(sent <= switchyard::server::MAX_BODY_BYTES + 2 * 1024 * 1024, "{sent} bytes taken");
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn a_revoked_local_key_is_refused_at_once() {
    let h = Harness::start("").await;
    let (status, created) = h.api(Method::POST, "/api/keys", &json!({"name": "editor"})).await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let id = created["id"].as_str().unwrap().to_owned();
    let ask = |key: &str| h.http.post(h.url("/v1/messages")).header("x-api-key", key).json(&body());
    assert_eq!(ask(&key).send().await.unwrap().status(), 200, "the new key works");
    let revoked = h
        .http
        .delete(h.url(&format!("/api/keys/{id}")))
        .bearer_auth(MANAGEMENT_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let (status, _, refusal) = json_parts(ask(&key).send().await.unwrap()).await;
    assert_eq!(status, 401, "{refusal}");
    assert_dialect(&refusal, true, "revoked key");
    let bearer = h.http.post(h.url("/v1/chat/completions")).bearer_auth(&key).json(&body());
    assert_eq!(bearer.send().await.unwrap().status(), 401);
    assert_eq!(h.mock.total_attempts(), 1, "only the request made before revoking");
}

/// Sends `bytes` one per second until the server closes the connection; returns how long
/// that took and how many bytes it had taken by then.
async fn trickle(port: u16, bytes: &[u8]) -> (Duration, usize) {
    let started = Instant::now();
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut sent = 0;
    let mut scratch = [0_u8; 256];
    for &byte in bytes {
        if tcp.write_all(&[byte]).await.is_err() {
            break;
        }
        sent += 1;
        // A second per byte, unless the server closes the connection first.
        match tokio::time::timeout(Duration::from_secs(1), tcp.read(&mut scratch)).await {
            Ok(Ok(0) | Err(_)) => return (started.elapsed(), sent),
            Ok(Ok(n)) => panic!("the server answered a partial head: {:?}", &scratch[..n]),
            Err(_) => {}
        }
    }
    // Everything sent: wait for the close.
    let closed = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut scratch)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "{closed:?}");
    (started.elapsed(), sent)
}

#[tokio::test]
async fn slowloris_connections_are_cut_at_the_header_read_timeout_while_others_are_served() {
    const TIMEOUT: Duration = Duration::from_secs(3);
    let h = Harness::start_with(Setup::default().header_read_timeout(TIMEOUT)).await;
    let port = h.port;
    let honest = Honest::start(&h);
    let http1 = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {LOCAL_KEY}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}"
    );
    // The HTTP/2 preface, one byte at a time: held in protocol detection unless timed.
    let h2 = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".repeat(2);
    let attackers: Vec<_> = (0..8)
        .map(|i| {
            let bytes = if i % 2 == 0 { http1.clone() } else { h2.clone() };
            tokio::spawn(async move { trickle(port, bytes.as_bytes()).await })
        })
        .collect();
    // One that connects and says nothing at all.
    let silent = tokio::spawn(async move {
        let started = Instant::now();
        let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut scratch = [0_u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut scratch)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
        started.elapsed()
    });
    for attacker in attackers {
        let (took, sent) = attacker.await.unwrap();
        assert!(took + Duration::from_millis(100) >= TIMEOUT, "cut early: {took:?}");
        assert!(took < TIMEOUT + Duration::from_secs(3), "held for {took:?}");
        assert!(sent < http1.len().min(h2.len()), "the whole head went through ({sent} bytes)");
    }
    let took = silent.await.unwrap();
    assert!(took < TIMEOUT + Duration::from_secs(3), "a silent connection was held {took:?}");

    let served = honest.finish("during the slowloris").await;
    assert_eq!(h.mock.total_attempts(), served, "only honest requests reached the upstream");
}

#[tokio::test]
async fn a_kept_alive_connection_is_still_served_within_the_timeout() {
    // The header read timeout must not cut an honest client that reuses its connection.
    let h = Harness::start_with(Setup::default().header_read_timeout(Duration::from_secs(3))).await;
    for _ in 0..3 {
        let response = h.openai("oa/gpt-4o", false).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(h.mock.total_attempts(), 3);
}

/// A non-loopback address of this machine, if it has one: the source address the kernel would
/// pick to reach a documentation address (nothing is sent).
fn local_non_loopback_ip() -> Option<IpAddr> {
    let probe = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    probe.connect(SocketAddr::from(([192, 0, 2, 1], 9))).ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn the_listener_is_bound_to_loopback_only() {
    let listener = switchyard::server::bind(0).await.unwrap();
    assert_eq!(listener.local_addr().unwrap().ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    drop(listener);

    let h = Harness::start("").await;
    match local_non_loopback_ip() {
        Some(ip) => {
            let connect = TcpStream::connect((ip, h.port)).await;
            assert!(connect.is_err(), "reachable on {ip}:{}", h.port);
        }
        None => {
            #[expect(clippy::print_stderr, reason = "a check that could not run says so")]
            {
                eprintln!("no non-loopback interface: only the bound address was checked");
            }
        }
    }
    let response = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 200, "loopback is served");
}

/// A hostile upstream answers the primary with a flood; the fallback serves. The flood is
/// read no further than the cap and not retried in place (the same upstream would flood
/// again), and the attempt's trace line blames the upstream, not the client.
async fn a_flooded_answer_falls_back_without_a_retry(flood: Flood) {
    let h = Harness::start(FALLBACK).await;
    h.mock.enqueue("gpt-4o", flood);
    let response = h.openai("smart", false).send().await.unwrap();
    let (status, headers, body) = json_parts(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-switchyard-target"], "an/claude-fallback");
    assert_eq!(h.mock.attempts_for("gpt-4o").len(), 1, "a flood is not retried in place");
    let logged = h.newest_logged().await;
    let first = &logged["trace"][0];
    assert_eq!(first["target"], "oa/gpt-4o", "{logged}");
    assert_eq!(first["outcome"], "transport", "{logged}");
}

#[tokio::test]
async fn an_answer_announcing_more_than_64_mib_is_refused_before_its_body_is_read() {
    // The announced length is a lie: 1 MiB follows, then silence. A reader that trusted the
    // length would wait out the deadline (a timeout); refused on its length, it is not.
    let flood = Flood::announcing(1 << 30, 1 << 20);
    a_flooded_answer_falls_back_without_a_retry(flood).await;
}

#[tokio::test]
async fn an_answer_growing_past_64_mib_without_a_length_is_refused_at_the_cap() {
    let flood = Flood::chunked(executor::MAX_ANSWER as u64 + (1 << 20));
    a_flooded_answer_falls_back_without_a_retry(flood).await;
}

#[tokio::test]
async fn a_model_list_larger_than_4_mib_is_refused_with_the_limit_named() {
    let h = Harness::start("").await;
    h.mock.flood_model_lists(Some(Flood::chunked(executor::MAX_MODEL_LIST as u64 + 1)));
    let (status, report) = h.api(Method::POST, "/api/providers/oa/test", &Value::Null).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ok"], false, "{report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(error.contains("larger than 4 MiB"), "{report}");
    h.mock.flood_model_lists(Some(Flood::announcing(1 << 30, 1 << 16)));
    let (status, body) = h.api_get("/api/providers/oa/models").await;
    assert_eq!(status, 502, "{body}");
    assert!(body.to_string().contains("larger than 4 MiB"), "{body}");
}

#[tokio::test]
async fn a_model_name_of_a_mebibyte_is_refused_in_the_clients_dialect_and_logged_bounded() {
    let h = Harness::start("").await;
    let huge = "m".repeat(1 << 20);
    let cases = [
        (h.url("/v1/chat/completions"), false, huge.clone()),
        (h.url("/v1/messages"), true, huge.clone()),
        (h.url("/v1/chat/completions"), false, "../../upload/x?x=".to_owned()),
        (h.url("/v1/messages"), true, "gpt 4o\n".to_owned()),
    ];
    for (url, anthropic, model) in cases {
        let body = json!({"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
        let request = h.http.post(url).bearer_auth(LOCAL_KEY).header("x-api-key", LOCAL_KEY);
        let (status, _, answer) = json_parts(request.json(&body).send().await.unwrap()).await;
        let why = &model[..model.len().min(20)];
        assert_eq!(status, 400, "{why}: {answer}");
        assert_dialect(&answer, anthropic, why);
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("`model`"), "{why}: {message}");
        assert!(message.len() < 200, "{why}: the refusal does not echo the name");
        if !anthropic {
            assert_eq!(answer["error"]["param"], "model", "{why}");
        }
        let logged = h.newest_logged().await;
        let kept = logged["model"].as_str().unwrap_or_default();
        assert!(kept.len() < 300 && !kept.contains('\n'), "{why}: logged {} bytes", kept.len());
    }
    assert_eq!(h.mock.total_attempts(), 0, "no refused name reached an upstream");
    let (_, log) = h.api_get("/api/requests").await;
    assert_eq!(log.as_array().map(Vec::len), Some(4), "{log}");
    // Token counting reads the same name, and refuses it the same way.
    let body = json!({"model": huge, "messages": [{"role": "user", "content": "hi"}]});
    let counting = h.http.post(h.url("/v1/messages/count_tokens")).header("x-api-key", LOCAL_KEY);
    let (status, _, answer) = json_parts(counting.json(&body).send().await.unwrap()).await;
    assert_eq!(status, 400, "{answer}");
    assert_dialect(&answer, true, "count_tokens");
}

/// Opens `n` connections one after another and says nothing on them.
async fn flood(port: u16, n: usize) -> Vec<TcpStream> {
    let mut sockets = Vec::with_capacity(n);
    for _ in 0..n {
        sockets.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    sockets
}

/// Whether the server closed `socket`: it reads the end of the stream (or a reset) within a
/// generous bound; one still open reads nothing until then.
async fn closed_by_server(mut socket: TcpStream) -> bool {
    let mut scratch = [0_u8; 16];
    matches!(
        tokio::time::timeout(Duration::from_secs(2), socket.read(&mut scratch)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Issue 26, point 5: a local process without a key opens far more connections than the cap;
/// the server keeps at most `max_connections` open, closing the oldest unauthenticated ones,
/// and an editor that connects after the flood is served.
#[tokio::test]
async fn a_connection_flood_is_bounded_and_an_editor_connecting_after_it_is_served() {
    const CAP: usize = 16;
    const FLOOD: usize = 40;
    let setup = Setup::new(&format!("[server]\nmax_connections = {CAP}\n"))
        .header_read_timeout(Duration::from_secs(60));
    let h = Harness::start_with(setup).await;
    let sockets = flood(h.port, FLOOD).await;
    // A client of its own, so it has no connection from before the flood.
    let editor = reqwest::Client::new();
    let response = editor
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .json(&json!({"model": "oa/gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
    let closed = futures_util::future::join_all(sockets.into_iter().map(closed_by_server)).await;
    let closed = closed.iter().filter(|c| **c).count();
    assert_eq!(
        closed,
        FLOOD - (CAP - 1),
        "the cap holds: the editor and the newest {} of the flood are open",
        CAP - 1
    );
}

/// Issue 26, point 5: an HTTP/2 connection whose only request was refused at the front door
/// is closed after the idle time, though its client answers every PING; one with an
/// authenticated stream in flight longer than that stays open until the stream ends.
#[tokio::test]
async fn an_http2_connection_without_an_authenticated_request_in_flight_is_closed_when_idle() {
    use http_body_util::{BodyExt as _, Full};
    use hyper::body::Bytes;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    const IDLE: Duration = Duration::from_secs(1);
    let h = Harness::start_with(Setup::default().header_read_timeout(IDLE)).await;
    let connect = || async {
        let tcp = TcpStream::connect(("127.0.0.1", h.port)).await.unwrap();
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap()
    };
    let host = format!("127.0.0.1:{}", h.port);

    // Unauthenticated: refused, then the connection is kept open by nothing but PINGs.
    let (mut sender, connection) = connect().await;
    let opened = Instant::now();
    let connection = tokio::spawn(connection);
    let refused = sender
        .send_request(
            http::Request::get(format!("http://{host}/v1/models"))
                .header("host", &host)
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let ended = tokio::time::timeout(Duration::from_secs(30), connection).await;
    assert!(ended.is_ok(), "the connection was still open after 30 s");
    assert!(opened.elapsed() + Duration::from_millis(100) >= IDLE, "{:?}", opened.elapsed());

    // Authenticated and streaming for three idle times: served to its end.
    h.mock.enqueue(
        "gpt-4o",
        switchyard_testkit::Reply::text("one two three four five six")
            .chunks(6)
            .chunk_gap(IDLE / 2),
    );
    let (mut sender, connection) = connect().await;
    let connection = tokio::spawn(connection);
    let body = json!({"model": "oa/gpt-4o", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let streamed = sender
        .send_request(
            http::Request::post(format!("http://{host}/v1/chat/completions"))
                .header("host", &host)
                .header("authorization", format!("Bearer {LOCAL_KEY}"))
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let started = Instant::now();
    let text = streamed.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&text);
    assert!(started.elapsed() > IDLE * 2, "the stream ran longer than the idle time");
    assert!(text.contains("[DONE]"), "served to its end: {text}");
    assert!(!connection.is_finished(), "open while the stream was in flight");
}
