//! The `/v1` front door's answers to what is not a plain request: an unknown path (a `404` in
//! the client's dialect), a compressed body (decoded, with the size cap on what it decodes
//! to), and a WebSocket upgrade on `/v1/responses` (`426`: use HTTP `POST`).

use std::io::Write as _;
use std::time::Duration;

use tokio::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, json_parts};

/// The body cap, on the decoded size (`switchyard::server::MAX_BODY_BYTES`).
const CAP: usize = switchyard::server::MAX_BODY_BYTES;

fn chat() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "model": "oa/gpt-4o", "stream": false,
        "messages": [{"role": "user", "content": "hi, compressed"}]
    }))
    .unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams::default();
    brotli::BrotliCompress(&mut &bytes[..], &mut out, &params).unwrap();
    out
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A zstd frame of `blocks` run-length blocks of 128 KiB of spaces (four bytes each: the
/// densest zstd there is), its window `2^window_log` bytes.
fn zstd_rle(blocks: u32, window_log: u8) -> Vec<u8> {
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (window_log - 10) << 3];
    for i in 0..blocks {
        let header = (128 * 1024) << 3 | 1 << 1 | u32::from(i + 1 == blocks);
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(b' ');
    }
    frame
}

/// `POST /v1/chat/completions` with `body` sent as `coding`.
fn compressed(h: &Harness, coding: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
    h.http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .header("content-type", "application/json")
        .header("content-encoding", coding)
        .body(body)
}

#[tokio::test]
async fn unknown_v1_paths_answer_404_in_the_clients_dialect_naming_the_path() {
    let h = Harness::start("").await;
    // (method, path, Anthropic's headers, Anthropic's shape expected)
    let rows: [(Method, &str, bool, bool); 9] = [
        (Method::GET, "/v1/nothing", false, false),
        (Method::POST, "/v1/embeddings/batch", false, false),
        (Method::DELETE, "/v1/chat", false, false),
        (Method::GET, "/v1", false, false),
        (Method::GET, "/v1/models/gpt-4o/extra", false, false),
        (Method::GET, "/v1/messages/batches", false, true),
        (Method::POST, "/v1/complete", true, true),
        (Method::GET, "/v1/files", true, true),
        (Method::PUT, "/v1/responses/resp_1/cancel", false, false),
    ];
    for (method, path, anthropic_client, anthropic_shape) in rows {
        let request = h.http.request(method.clone(), h.url(path));
        let request = if anthropic_client {
            request.header("x-api-key", LOCAL_KEY).header("anthropic-version", "2023-06-01")
        } else {
            request.bearer_auth(LOCAL_KEY)
        };
        let request =
            if method == Method::POST { request.json(&json!({"model": "m"})) } else { request };
        let (status, _, body) = json_parts(request.send().await.unwrap()).await;
        let row = format!("{method} {path}");
        assert_eq!(status, 404, "{row}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_else(|| panic!("{row}: {body}"));
        assert!(message.contains(&format!("`{method} {path}`")), "{row}: {message}");
        assert!(message.contains("docs/api.md"), "{row}: {message}");
        assert_eq!(body["error"]["type"], "not_found_error", "{row}: {body}");
        if anthropic_shape {
            assert_eq!(body["type"], "error", "{row}: Anthropic's shape: {body}");
        } else {
            assert_eq!(body["error"]["code"], 404, "{row}: OpenAI's shape: {body}");
            assert!(body.get("type").is_none(), "{row}: OpenAI's shape: {body}");
        }
    }
    // The front door comes first: no key, or a forged Host, is refused as anywhere else.
    let (status, _, body) =
        json_parts(h.http.get(h.url("/v1/nothing")).send().await.unwrap()).await;
    assert_eq!(status, 401, "{body}");
    let forged =
        h.http.get(h.url("/v1/nothing")).bearer_auth(LOCAL_KEY).header("host", "evil.example");
    let (status, _, body) = json_parts(forged.send().await.unwrap()).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn compressed_chat_requests_are_answered_and_go_upstream_as_plain_json() {
    let h = Harness::start("").await;
    let plain: Value = serde_json::from_slice(&chat()).unwrap();
    for (coding, body) in [
        ("zstd", zstd(&chat())),
        ("gzip", gzip(&chat())),
        ("br", brotli(&chat())),
        ("identity", chat()),
    ] {
        let (status, _, answer) =
            json_parts(compressed(&h, coding, body).send().await.unwrap()).await;
        assert_eq!(status, 200, "{coding}: {answer}");
        let attempts = h.mock.attempts();
        let sent = attempts.last().unwrap();
        assert_eq!(sent.body["messages"], plain["messages"], "{coding}: upstream got the JSON");
        assert_eq!(sent.header("content-encoding"), None, "{coding}: never the client's coding");
        assert_eq!(
            sent.header("content-length"),
            Some(sent.raw_body.len().to_string().as_str()),
            "{coding}: the length of what was sent, not of what the client sent"
        );
    }
    // An Anthropic client too, in its own route's reader.
    let body = serde_json::to_vec(&json!({
        "model": "oa/gpt-4o", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]
    }))
    .unwrap();
    let request = h
        .http
        .post(h.url("/v1/messages"))
        .header("x-api-key", LOCAL_KEY)
        .header("content-type", "application/json")
        .header("content-encoding", "zstd")
        .body(zstd(&body));
    let (status, _, answer) = json_parts(request.send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn a_decompression_bomb_is_refused_with_413_within_a_second() {
    let h = Harness::start("").await;
    // 257 blocks of 128 KiB: 32.1 MiB from about a kilobyte.
    let zstd_bomb = zstd_rle(257, 20);
    assert!(zstd_bomb.len() < 1100, "{}", zstd_bomb.len());
    // gzip members one after another decode as one body: 33 MiB from about 33 KB.
    let mebibyte = gzip(&vec![b' '; 1024 * 1024]);
    let gzip_bomb = mebibyte.repeat(CAP / (1024 * 1024) + 1);
    for (coding, bomb) in [("zstd", zstd_bomb), ("gzip", gzip_bomb)] {
        let started = Instant::now();
        let (status, _, body) =
            json_parts(compressed(&h, coding, bomb).send().await.unwrap()).await;
        let elapsed = started.elapsed();
        assert_eq!(status, 413, "{coding}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(coding) && message.contains(&CAP.to_string()), "{message}");
        assert!(elapsed < Duration::from_secs(1), "{coding}: refused after {elapsed:?}");
    }
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn zstd_windows_past_8_mib_and_unknown_codings_are_refused_by_name() {
    let h = Harness::start("").await;
    let (status, _, body) =
        json_parts(compressed(&h, "zstd", zstd_rle(1, 24)).send().await.unwrap()).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("8 MiB"), "{body}");

    let (status, _, body) =
        json_parts(compressed(&h, "compress", chat()).send().await.unwrap()).await;
    assert_eq!(status, 415, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    for named in ["compress", "zstd", "gzip", "br", "deflate"] {
        assert!(message.contains(named), "{message}");
    }

    let (status, _, body) = json_parts(compressed(&h, "gzip", chat()).send().await.unwrap()).await;
    assert_eq!(status, 400, "a body not in its coding: {body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("gzip"), "{body}");
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn a_websocket_upgrade_on_responses_gets_426_saying_to_post() {
    let h = Harness::start("").await;
    let upgrade = || {
        h.http
            .get(h.url("/v1/responses"))
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
    };
    let (status, _, body) =
        json_parts(upgrade().bearer_auth(LOCAL_KEY).send().await.unwrap()).await;
    assert_eq!(status, 426, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("POST /v1/responses") && message.contains("WebSocket"), "{message}");
    assert_eq!(body["error"]["code"], 426, "the Responses (OpenAI) shape: {body}");

    // Without the key, what any unauthenticated request gets.
    let (status, _, refused) = json_parts(upgrade().send().await.unwrap()).await;
    let (plain_status, _, plain) =
        json_parts(h.http.get(h.url("/v1/models")).send().await.unwrap()).await;
    assert_eq!((status, plain_status), (401, 401), "{refused} / {plain}");
    assert_eq!(refused["error"]["type"], plain["error"]["type"]);

    // A plain GET is the wrong method, said in the same shape.
    let (status, headers, body) =
        json_parts(h.http.get(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).send().await.unwrap())
            .await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(headers["allow"], "POST");
    assert_eq!(h.mock.total_attempts(), 0);
}
