//! The corpus's shapes reach the wire as written: the status, headers and body of an error
//! answer, and a provider's own keep-alive and in-stream error event.

use switchyard_core::UnixMillis;
use switchyard_testkit::corpus::{self, Shape, openrouter};
use switchyard_testkit::{Behavior, MockUpstream};

use crate::call::Call;
use crate::within;

fn call_for(shape: &Shape) -> Call {
    let call = Call::new(shape.provider.dialect(), "m").behavior(&shape.behavior);
    if shape.streamed { call.stream() } else { call }
}

#[tokio::test]
async fn every_error_answer_is_sent_with_its_status_headers_and_exact_body() {
    let mock = MockUpstream::start().await;
    for shape in corpus::all(UnixMillis(1_800_000_000_000)) {
        let Behavior::Status(status) = &shape.behavior else { continue };
        let response = call_for(&shape).send(&mock).await;
        assert_eq!(Some(response.status().as_u16()), status.code, "{}", shape.name);
        for (name, value) in &status.headers {
            let sent = response.headers().get(name).and_then(|v| v.to_str().ok());
            assert_eq!(sent, Some(value.as_str()), "{}: {name}", shape.name);
        }
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(Some(&body), status.body.as_ref(), "{}", shape.name);
    }
}

#[tokio::test]
async fn a_providers_own_error_event_ends_the_stream_in_its_place() {
    let mock = MockUpstream::start().await;
    let shape = openrouter::rate_limit_chunk_in_stream();
    let text = call_for(&shape).send(&mock).await.text().await.unwrap();
    let events: Vec<&str> = text.split_terminator("\n\n").collect();
    assert_eq!(events.len(), 2, "the role chunk, then the error: {text}");
    assert!(
        events[1].contains("\"code\":429") && events[1].contains("\"finish_reason\":\"error\"")
    );
    assert!(!text.contains("[DONE]"), "{text}");
}

#[tokio::test]
async fn a_providers_own_keep_alive_is_sent_while_the_first_event_waits() {
    let mock = MockUpstream::start().await;
    let shape = openrouter::processing_comments_only();
    let mut response = call_for(&shape).send(&mock).await;
    let mut seen = String::new();
    within(async {
        while seen.matches(openrouter::PROCESSING).count() < 2 {
            let chunk = response.chunk().await.unwrap().expect("the stream stays open");
            seen.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    })
    .await;
    assert_eq!(seen, openrouter::PROCESSING.repeat(2), "comments only, no content yet");
    drop(response);
    within(mock.wait_for_in_flight(0)).await;
}
