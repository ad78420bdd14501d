//! Streaming end to end (RESILIENCE.md §7): a stream ends either properly (`[DONE]`,
//! `message_stop`) or with a terminal error event in the client's dialect, never as a
//! "successful" truncated answer; malformed events are dropped; keep-alives do not count as a
//! first event; and the fallback that served is named in every chunk.

use std::time::Duration;

use switchyard_core::outcome::BreakerFault;
use switchyard_e2e::harness::{
    Harness, Setup, anthropic_stream_text, header, json_parts, openai_stream_text, sse_data,
    sse_events,
};
use switchyard_e2e::streaming::Client;
use switchyard_testkit::{Behavior, Reply, Status};
use tokio::time::{Instant, timeout};

const FALLBACK: &str = r#"
[[combos]]
name = "smart"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-fallback" }]
"#;

/// A fallback that cannot continue a broken answer (Gemini has no mechanism): a break after
/// bytes ends with the terminal error (RESILIENCE.md §10; `continuation.rs` covers rescues).
const NO_RESCUE: &str = r#"
[[combos]]
name = "smart"
targets = [{ target = "oa/gpt-4o" }, { target = "ge/gemini-fallback" }]
"#;

const TEXT: &str = "Hello from the mock upstream.";

const WATCHDOG: Duration = Duration::from_secs(10);

/// A streamed request for `target` in the client dialect, and its whole body.
async fn stream(h: &Harness, anthropic_client: bool, target: &str) -> (String, String) {
    // A conversation of its own each time: the same one again would be a retry of a session
    // that just broke, which starts elsewhere (RESILIENCE.md §11).
    let client = if anthropic_client { Client::Anthropic } else { Client::Chat };
    let request = client.send(h, target, &client.fresh_conversation());
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{target}");
    let served = header(response.headers(), "x-switchyard-target").to_owned();
    (served, response.text().await.unwrap())
}

/// The body ends with a terminal error event in the client's dialect and nothing that says
/// "complete".
fn assert_ends_with_error(anthropic_client: bool, text: &str) {
    if anthropic_client {
        assert!(!text.contains("message_stop"), "{text}");
        assert_eq!(sse_events(text).last(), Some(&"error"), "{text}");
        let last = sse_data(text).pop().unwrap();
        assert_eq!(last["type"], "error", "{text}");
    } else {
        assert!(!text.contains("[DONE]"), "{text}");
        let last = sse_data(text).pop().unwrap();
        assert!(last["error"]["message"].is_string(), "{text}");
        assert!(
            sse_data(text).iter().all(|chunk| chunk["choices"][0]["finish_reason"].is_null()),
            "no chunk may claim the answer finished: {text}"
        );
    }
}

/// The body ends properly in the client's dialect and carries the whole text.
fn assert_complete(anthropic_client: bool, text: &str) {
    if anthropic_client {
        assert_eq!(sse_events(text).last(), Some(&"message_stop"), "{text}");
        assert_eq!(anthropic_stream_text(text), TEXT, "{text}");
        assert!(!sse_events(text).contains(&"error"), "{text}");
    } else {
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert_eq!(openai_stream_text(text), TEXT, "{text}");
        assert!(sse_data(text).iter().all(|c| c.get("error").is_none()), "{text}");
    }
}

/// Every `data:` line is JSON (or `[DONE]`): nothing malformed reached the client.
fn assert_no_garbage(text: &str) {
    for line in text.lines().filter_map(|l| l.strip_prefix("data:")) {
        let data = line.trim_start();
        assert!(
            data == "[DONE]" || serde_json::from_str::<serde_json::Value>(data).is_ok(),
            "garbage reached the client: {data:?}"
        );
    }
}

#[tokio::test]
async fn a_stalled_stream_ends_with_an_error_event_at_the_idle_deadline_in_each_dialect() {
    let h = Harness::start_with(Setup::new(NO_RESCUE).timeouts(|t| t.idle_ms = 300)).await;
    h.mock.script("gpt-4o", [Behavior::stall_after(3), Behavior::stall_after(3)]);
    for anthropic_client in [false, true] {
        let started = Instant::now();
        let (served, text) = stream(&h, anthropic_client, "smart").await;
        let took = started.elapsed();
        assert_eq!(served, "oa/gpt-4o");
        assert_ends_with_error(anthropic_client, &text);
        assert!(took >= Duration::from_millis(300), "ended before the idle deadline: {took:?}");
        assert!(took < Duration::from_millis(2300), "{took:?}");
    }
    timeout(WATCHDOG, h.mock.wait_for_in_flight(0)).await.expect("the stalled upstream is let go");
    assert_eq!(h.mock.attempt_count("gemini-fallback"), 0, "bytes were sent: no fallback");
    let oa = h.app.breaker("oa").expect("charged");
    assert_eq!((oa.failures, oa.last_fault), (2, Some(BreakerFault::StreamBroken)));
}

#[tokio::test]
async fn a_malformed_event_is_dropped_and_the_rest_of_the_stream_arrives_complete() {
    let h = Harness::start("").await;
    for (target, model) in
        [("oa/gpt-4o", "gpt-4o"), ("an/claude-x", "claude-x"), ("ge/gemini-x", "gemini-x")]
    {
        for anthropic_client in [false, true] {
            h.mock.enqueue(model, Behavior::malformed_at(2));
            let (_, text) = stream(&h, anthropic_client, target).await;
            assert_no_garbage(&text);
            assert_complete(anthropic_client, &text);
        }
    }
    assert_eq!(h.mock.total_attempts(), 6, "no retries: every stream was served");
}

#[tokio::test]
async fn a_stream_with_a_finish_reason_but_no_end_marker_is_completed_properly() {
    let h = Harness::start("").await;
    for (target, model) in [("oa/gpt-4o", "gpt-4o"), ("an/claude-x", "claude-x")] {
        for anthropic_client in [false, true] {
            h.mock.enqueue(model, Behavior::missing_done());
            let (_, text) = stream(&h, anthropic_client, target).await;
            assert_complete(anthropic_client, &text);
        }
    }
    assert_eq!(h.app.breaker("oa"), None);
    assert_eq!(h.app.breaker("an"), None);
}

#[tokio::test]
async fn a_truncated_stream_ends_with_an_error_event_never_as_a_complete_answer() {
    let h = Harness::start("").await;
    let cases = [
        ("oa/gpt-4o", "gpt-4o", "oa"),
        ("an/claude-x", "claude-x", "an"),
        ("ge/gemini-x", "gemini-x", "ge"),
    ];
    for (target, model, provider) in cases {
        for anthropic_client in [false, true] {
            h.mock.enqueue(model, Behavior::truncated());
            let (_, text) = stream(&h, anthropic_client, target).await;
            assert_ends_with_error(anthropic_client, &text);
        }
        let breaker = h.app.breaker(provider).expect("a truncated stream blames the provider");
        assert_eq!(breaker.last_fault, Some(BreakerFault::StreamBroken), "{target}");
    }
}

#[tokio::test]
async fn keep_alives_are_not_a_first_event_so_a_primary_that_only_pings_falls_back() {
    let h = Harness::start_with(Setup::new(FALLBACK).timeouts(|t| t.first_event_ms = 400)).await;
    let pinging = Behavior::slow_first_event_with_keep_alive(
        Duration::from_secs(10),
        Duration::from_millis(50),
    );
    h.mock.enqueue("gpt-4o", pinging);
    let started = Instant::now();
    let (served, text) = stream(&h, false, "smart").await;
    assert!(started.elapsed() < Duration::from_millis(2400), "{:?}", started.elapsed());
    assert_eq!(served, "an/claude-fallback");
    assert_complete(false, &text);
    assert!(!text.contains("keep-alive"), "nothing of the abandoned primary reached the client");
    timeout(WATCHDOG, h.mock.wait_for_in_flight(0)).await.expect("the primary is let go");
}

#[tokio::test]
async fn a_streamed_answer_from_the_fallback_names_the_fallback_in_every_chunk_and_the_header() {
    let h = Harness::start(FALLBACK).await;
    h.mock.set_default("gpt-4o", Status::new(500));

    let (served, text) = stream(&h, false, "smart").await;
    assert_eq!(served, "an/claude-fallback");
    assert_complete(false, &text);
    let chunks = sse_data(&text);
    assert!(!chunks.is_empty());
    assert!(chunks.iter().all(|c| c["model"] == "an/claude-fallback"), "{text}");

    let (served, text) = stream(&h, true, "smart").await;
    assert_eq!(served, "an/claude-fallback");
    assert_complete(true, &text);
    let start = sse_data(&text).into_iter().find(|e| e["type"] == "message_start").unwrap();
    assert_eq!(start["message"]["model"], "an/claude-fallback", "{text}");
}

#[tokio::test]
async fn a_non_streamed_answer_cut_or_malformed_midway_is_never_returned_half() {
    for broken in [Behavior::cut_after(1), Behavior::malformed_at(0)] {
        // A fresh proxy each time: two failures in a row make the primary suspect, and the
        // next request would go to the fallback first (RESILIENCE.md §3).
        let h = Harness::start(FALLBACK).await;
        h.mock.script("gpt-4o", [broken.clone(), broken.clone()]);
        let (status, headers, body) =
            json_parts(h.openai("smart", false).send().await.unwrap()).await;
        assert_eq!(status, 200, "{broken:?}: {body}");
        assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-fallback", "{broken:?}");
        assert_eq!(body["choices"][0]["message"]["content"], TEXT, "{broken:?}");
        assert_eq!(h.mock.attempt_count("gpt-4o"), 2, "{broken:?}: retried once, then fell back");
    }
}

#[tokio::test]
async fn a_non_streamed_answer_without_a_finish_reason_is_not_presented_as_complete() {
    let h = Harness::start(FALLBACK).await;
    h.mock.script("gpt-4o", [Behavior::truncated(), Behavior::truncated()]);
    let (status, headers, body) = json_parts(h.openai("smart", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-fallback", "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
}

#[tokio::test]
async fn a_slow_stream_is_relayed_chunk_by_chunk_not_buffered() {
    let h = Harness::start("").await;
    let slow = Reply::text("abcdef").chunks(6).chunk_gap(Duration::from_millis(150));
    h.mock.enqueue("gpt-4o", slow);
    let mut response = h.openai("oa/gpt-4o", true).send().await.unwrap();
    let started = Instant::now();
    let first = response.chunk().await.unwrap().expect("a first chunk");
    // The whole answer takes 5 gaps (750 ms); the first bytes come well before its end.
    assert!(started.elapsed() < Duration::from_millis(600), "{:?}", started.elapsed());
    let mut text = String::from_utf8(first.to_vec()).unwrap();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(openai_stream_text(&text), "abcdef");
    assert!(text.ends_with("data: [DONE]\n\n"));
}
