//! Every fault does what it says, in every dialect it applies to.

use std::error::Error as _;
use std::io;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::{Behavior, Dialect, Fault, MockUpstream, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::call::Call;
use crate::transcript::{Frame, Transcript, frames};
use crate::within;

/// Reads a body to its end or its first error, keeping every byte that arrived.
async fn read_to_end_or_error(
    mut response: reqwest::Response,
) -> (Vec<u8>, Option<reqwest::Error>) {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => return (body, None),
            Err(e) => return (body, Some(e)),
        }
    }
}

fn is_connection_reset(error: &reqwest::Error) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        if cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::ConnectionReset)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

#[tokio::test]
async fn reset_gives_every_dialect_a_connection_error_and_no_status() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::reset());
    for call in Call::each("m") {
        let error = call.request(&mock).send().await.expect_err("no response at all");
        assert!(error.status().is_none());
        assert!(!error.is_timeout());
        assert!(is_connection_reset(&error), "{:?}: {error:?}", call.dialect);
    }
    assert_eq!(mock.attempt_count("m"), 4);
    within(mock.wait_for_in_flight(0)).await;
}

#[tokio::test]
async fn reset_is_a_tcp_rst_before_any_response_byte() {
    let mock = MockUpstream::start().await;
    let body = r#"{"model":"m","messages":[]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\nx-mock-behavior: \"reset\"\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(mock.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let error = within(stream.read(&mut buf)).await.expect_err("RST, not EOF and not bytes");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
}

#[tokio::test]
async fn hang_holds_the_request_until_the_client_gives_up() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::hang());
    for call in Call::each("m").into_iter().map(Call::stream) {
        let request = call.request(&mock).timeout(Duration::from_millis(100));
        let error = request.send().await.expect_err("no answer");
        assert!(error.is_timeout(), "{:?}: {error:?}", call.dialect);
    }
    assert_eq!(mock.attempt_count("m"), 4);
    within(mock.wait_for_in_flight(0)).await;
}

#[tokio::test]
async fn a_hanging_request_is_visible_in_flight_while_it_hangs() {
    let mock = MockUpstream::start().await;
    mock.enqueue("m", Behavior::hang());
    let request = tokio::spawn(Call::new(Dialect::Anthropic, "m").request(&mock).send());
    within(mock.wait_for_attempts(1)).await;
    within(mock.wait_for_in_flight(1)).await;
    request.abort();
    within(mock.wait_for_in_flight(0)).await;
}

#[tokio::test]
async fn a_slow_first_event_sends_headers_then_keep_alives_then_the_stream() {
    let delay = Duration::from_millis(150);
    let mock = MockUpstream::start().await;
    mock.set_default(
        "m",
        Behavior::slow_first_event_with_keep_alive(delay, Duration::from_millis(40)),
    );
    for call in [
        Call::new(Dialect::OpenAi, "m"),
        Call::new(Dialect::Anthropic, "m"),
        Call::new(Dialect::Responses, "m"),
    ] {
        let started = Instant::now();
        let response = call.clone().stream().send(&mock).await;
        assert_eq!(response.status(), 200, "headers come first");
        let (body, error) = read_to_end_or_error(response).await;
        assert!(error.is_none());
        assert!(started.elapsed() >= delay);
        let frames = frames(&body);
        let first_real = frames
            .iter()
            .position(|f| matches!(f, Frame::Event { name, .. } if name.as_deref() != Some("ping")))
            .unwrap();
        assert!(
            first_real >= 2,
            "{:?}: keep-alives before the first event: {frames:?}",
            call.dialect
        );
        let t = Transcript::read(call.dialect, &body);
        assert_eq!(t.text, "Hello from the mock upstream.");
        assert!(t.finish.is_some());
    }
}

#[tokio::test]
async fn a_slow_first_event_without_keep_alives_is_silent_until_it_comes() {
    let delay = Duration::from_millis(60);
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::slow_first_event(delay));
    for call in Call::each("m") {
        let started = Instant::now();
        let response = call.clone().stream().send(&mock).await;
        let mut response = response;
        let first = within(response.chunk()).await.unwrap().unwrap();
        assert!(started.elapsed() >= delay, "{:?}", call.dialect);
        assert!(
            first.starts_with(b"data: ")
                || first.starts_with(b"event: message_start")
                || first.starts_with(b"event: response.created"),
            "{:?}",
            call.dialect
        );
        // Non-streaming: the document arrives after the delay too.
        let started = Instant::now();
        let (status, _) = call.json(&mock).await;
        assert_eq!(status, 200);
        assert!(started.elapsed() >= delay);
    }
}

#[tokio::test]
async fn a_cut_stream_delivers_exactly_n_events_then_breaks() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::cut_after(3));
    for call in Call::each("m").into_iter().map(Call::stream) {
        let response = call.send(&mock).await;
        assert_eq!(response.status(), 200);
        let (body, error) = read_to_end_or_error(response).await;
        assert!(error.is_some(), "{:?}: the body must fail, not end", call.dialect);
        assert_eq!(frames(&body).len(), 3, "{:?}", call.dialect);
        assert!(Transcript::read(call.dialect, &body).finish.is_none());
    }
    within(mock.wait_for_in_flight(0)).await;
}

#[tokio::test]
async fn a_reset_stream_delivers_exactly_n_events_then_a_tcp_reset() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::reset_after(2));
    for call in Call::each("m").into_iter().map(Call::stream) {
        let response = call.send(&mock).await;
        assert_eq!(response.status(), 200);
        let (body, error) = read_to_end_or_error(response).await;
        let error = error.unwrap_or_else(|| panic!("{:?}: the body must fail", call.dialect));
        assert!(is_connection_reset(&error), "{:?}: {error:?}", call.dialect);
        assert_eq!(frames(&body).len(), 2, "{:?}", call.dialect);
    }
    // A document breaks the same way, after its first half.
    for call in Call::each("m") {
        let dialect = call.dialect;
        let (body, error) = read_to_end_or_error(call.send(&mock).await).await;
        assert!(error.as_ref().is_some_and(is_connection_reset), "{dialect:?}: {error:?}");
        assert!(serde_json::from_slice::<Value>(&body).is_err());
    }
    within(mock.wait_for_in_flight(0)).await;
}

#[tokio::test]
async fn a_cut_document_breaks_mid_body() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::cut_after(1));
    for call in Call::each("m") {
        let response = call.send(&mock).await;
        assert_eq!(response.status(), 200);
        let (body, error) = read_to_end_or_error(response).await;
        assert!(error.is_some(), "{:?}", call.dialect);
        assert!(serde_json::from_slice::<Value>(&body).is_err());
    }
}

#[tokio::test]
async fn a_stalled_stream_sends_n_events_then_nothing_while_staying_open() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::stall_after(2));
    for call in Call::each("m").into_iter().map(Call::stream) {
        let mut response = call.send(&mock).await;
        let mut body = Vec::new();
        while frames(&body).len() < 2 {
            body.extend_from_slice(&within(response.chunk()).await.unwrap().unwrap());
        }
        assert_eq!(frames(&body).len(), 2);
        let next = tokio::time::timeout(Duration::from_millis(150), response.chunk()).await;
        assert!(next.is_err(), "{:?}: nothing more, and no end either", call.dialect);
        assert_eq!(mock.in_flight(), 1);
        drop(response);
        within(mock.wait_for_in_flight(0)).await;
    }
}

#[tokio::test]
async fn a_malformed_event_sits_among_good_ones() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::malformed_at(2));
    for call in Call::each("m").into_iter().map(Call::stream) {
        let body = call.send(&mock).await.bytes().await.unwrap();
        let t = Transcript::read(call.dialect, &body);
        assert_eq!(t.malformed, 1, "{:?}", call.dialect);
        assert_eq!(t.text, "Hello from the mock upstream.");
        assert!(t.finish.is_some());
        assert_eq!(t.done, matches!(call.dialect, Dialect::OpenAi | Dialect::Anthropic));
    }
    // Non-streaming: the document itself is not JSON.
    let response = Call::new(Dialect::OpenAi, "m").send(&mock).await;
    assert_eq!(response.status(), 200);
    assert!(serde_json::from_slice::<Value>(&response.bytes().await.unwrap()).is_err());
}

#[tokio::test]
async fn missing_done_keeps_the_finish_reason_and_drops_only_the_terminator() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::missing_done());
    for call in Call::each("m").into_iter().map(Call::stream) {
        let (body, error) = read_to_end_or_error(call.send(&mock).await).await;
        assert!(error.is_none(), "the body ends cleanly");
        let t = Transcript::read(call.dialect, &body);
        assert!(t.finish.is_some(), "{:?}", call.dialect);
        assert!(!t.done, "{:?}", call.dialect);
        assert_eq!(t.text, "Hello from the mock upstream.");
    }
}

#[tokio::test]
async fn a_truncated_stream_ends_cleanly_with_no_finish_reason_and_no_terminator() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Reply::text("partial answer").fault(Fault::Truncated));
    for call in Call::each("m") {
        let (body, error) = read_to_end_or_error(call.clone().stream().send(&mock).await).await;
        assert!(error.is_none(), "{:?}: the body ends cleanly", call.dialect);
        let t = Transcript::read(call.dialect, &body);
        assert_eq!(t.text, "partial answer");
        assert_eq!((t.finish, t.done, t.usage_chunks), (None, false, 0), "{:?}", call.dialect);
    }
    let (_, body) = Call::new(Dialect::OpenAi, "m").json(&mock).await;
    assert_eq!(body["choices"][0]["finish_reason"], Value::Null);
    let (_, body) = Call::new(Dialect::Anthropic, "m").json(&mock).await;
    assert_eq!(body["stop_reason"], Value::Null);
    let (_, body) = Call::new(Dialect::Gemini, "m").json(&mock).await;
    assert!(body["candidates"][0].get("finishReason").is_none());
    let (_, body) = Call::new(Dialect::Responses, "m").json(&mock).await;
    assert_eq!((&body["status"], &body["usage"]), (&json!("in_progress"), &Value::Null));
}

#[tokio::test]
async fn prefill_is_rejected_only_when_the_conversation_ends_with_the_assistant() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::reject_prefill());
    for call in Call::each("m") {
        assert_eq!(call.json(&mock).await.0, 200, "{:?}", call.dialect);
        let (status, body) = call.clone().prefill().json(&mock).await;
        assert_eq!(status, 400, "{:?}", call.dialect);
        let message = body.pointer("/error/message").and_then(Value::as_str).unwrap();
        assert!(message.contains("prefill") || message.contains("end with a user"), "{message}");
    }
}

#[tokio::test]
async fn the_chunk_gap_spaces_every_event_after_the_first() {
    let gap = Duration::from_millis(25);
    let mock = MockUpstream::start().await;
    mock.set_default("m", Reply::text("abc").chunks(3).chunk_gap(gap));
    let started = Instant::now();
    let body = Call::new(Dialect::OpenAi, "m").stream().send(&mock).await.bytes().await.unwrap();
    let t = Transcript::read(Dialect::OpenAi, &body);
    assert_eq!(t.events, 6);
    assert!(started.elapsed() >= gap * 5);
}

#[tokio::test]
async fn probes_open_at_once_are_counted_per_credential_and_model() {
    let mock = MockUpstream::start().await;
    for model in ["m", "n"] {
        mock.set_default(model, Behavior::hang());
    }
    let probe = |model: &'static str| {
        Call::new(Dialect::OpenAi, model).request(&mock).header("x-switchyard-probe", "1").send()
    };
    let open = [tokio::spawn(probe("m")), tokio::spawn(probe("m")), tokio::spawn(probe("n"))];
    within(mock.wait_for_in_flight(3)).await;
    let peaks = mock.probe_peaks();
    let key = Call::new(Dialect::OpenAi, "m").request(&mock).build().unwrap();
    let key = key.headers()["authorization"].to_str().unwrap().trim_start_matches("Bearer ");
    let peak = |model: &str| peaks.get(&format!("{key} {model}")).copied();
    assert_eq!((peak("m"), peak("n")), (Some(2), Some(1)), "{peaks:?}");
    for request in open {
        request.abort();
    }
    within(mock.wait_for_in_flight(0)).await;
    // A user's request is not a probe.
    mock.set_default("u", Reply::default());
    let _ = Call::new(Dialect::OpenAi, "u").request(&mock).send().await;
    assert_eq!(mock.probe_peaks().len(), 2);
}

#[tokio::test]
async fn a_probe_the_client_abandoned_is_not_counted_against_the_next_one() {
    let mock = MockUpstream::start().await;
    mock.enqueue("m", Behavior::hang());
    mock.set_default("m", Reply::default());
    let probe = || Call::new(Dialect::OpenAi, "m").request(&mock).header("x-switchyard-probe", "1");
    let abandoned = tokio::spawn(probe().send());
    within(mock.wait_for_in_flight(1)).await;
    // The next probe arrives and is answered while the mock still holds the first one: the
    // client gave up on it, the mock has not noticed yet.
    let answered = probe().send().await.unwrap();
    assert_eq!(answered.status(), 200);
    answered.text().await.unwrap();
    abandoned.abort();
    within(mock.wait_for_in_flight(0)).await;
    assert_eq!(mock.probe_peaks().values().copied().collect::<Vec<_>>(), [1]);
}
