//! Real providers' failure shapes inside a 200 stream (RESILIENCE.md §2, §7): an
//! overload reported as a stream event before any content, and a stream that only pings. With
//! a fallback configured, none of them reaches the client; after content, the client gets one
//! terminal error and the request log says the stream broke.

use std::time::Duration;

use serde_json::Value;
use switchyard_e2e::harness::{
    Harness, Setup, anthropic_stream_text, header, openai_stream_text, sse_events,
};
use switchyard_testkit::Behavior;
use tokio::time::{Instant, timeout};

const TEXT: &str = "Hello from the mock upstream.";
const WATCHDOG: Duration = Duration::from_secs(10);

/// Each upstream dialect, a model on it, and how many of its events come before any content
/// (Anthropic `message_start` and a `ping`, OpenAI's role-only chunk; Gemini's first event
/// already carries text).
const PRE_CONTENT: [(&str, usize); 3] =
    [("an/claude-flaky", 2), ("oa/gpt-4o", 1), ("ge/gemini-flaky", 0)];

/// The fallback for `first`: on another provider, since a provider that failed a request on
/// its own account is not tried again for it.
fn fallback_of(first: &str) -> &'static str {
    if first.starts_with("an/") { "oa/gpt-4o-mini" } else { "an/claude-steady" }
}

fn combo(first: &str) -> String {
    let second = fallback_of(first);
    format!(
        r#"
[[combos]]
name = "rescued"
targets = [{{ target = "{first}" }}, {{ target = "{second}" }}]
"#
    )
}

fn model_of(target: &str) -> &str {
    target.split_once('/').unwrap().1
}

#[tokio::test]
async fn an_overload_reported_inside_the_stream_before_content_falls_back_in_every_dialect() {
    for (first, before_content) in PRE_CONTENT {
        for anthropic_client in [true, false] {
            let h = Harness::start(&combo(first)).await;
            // Twice: a transient failure may be retried once on the same target.
            let overload = Behavior::error_after(before_content);
            h.mock.script(model_of(first), [overload.clone(), overload]);
            let request = if anthropic_client {
                h.anthropic("rescued", true)
            } else {
                h.openai("rescued", true)
            };
            let response = timeout(WATCHDOG, request.send()).await.unwrap().unwrap();
            assert_eq!(response.status(), 200, "{first}");
            assert_eq!(header(response.headers(), "x-switchyard-target"), fallback_of(first));
            let text = response.text().await.unwrap();
            let relayed = if anthropic_client {
                anthropic_stream_text(&text)
            } else {
                openai_stream_text(&text)
            };
            assert_eq!(
                relayed, TEXT,
                "{first}: the client sees only the fallback's answer: {text}"
            );
            assert!(!text.contains("verloaded") && !text.contains("\"error\""), "{first}: {text}");
            let tried = h.mock.attempts_for(model_of(first)).len();
            assert!((1..=2).contains(&tried), "{first}: {tried} attempts");
        }
    }
}

#[tokio::test]
async fn an_anthropic_overload_event_is_classified_as_the_529_it_stands_for() {
    let h = Harness::start(&combo("an/claude-flaky")).await;
    let overload = Behavior::error_after(2);
    h.mock.script("claude-flaky", [overload.clone(), overload]);
    let response = h.anthropic("rescued", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.text().await.unwrap();
    let (_, log) = h.api_get("/api/requests").await;
    let trace = &log.as_array().unwrap()[0]["trace"];
    let first = &trace.as_array().unwrap()[0];
    assert_eq!(first["outcome"], "transient", "{trace}");
    assert_eq!(first["status"], 529, "{trace}");
}

#[tokio::test]
async fn a_stream_that_only_pings_after_message_start_falls_back_at_the_first_event_deadline() {
    let h = Harness::start_with(
        Setup::new(&combo("an/claude-flaky")).timeouts(|t| t.first_event_ms = 400),
    )
    .await;
    h.mock.script("claude-flaky", [Behavior::ping_after(1)]);
    let started = Instant::now();
    let response = timeout(WATCHDOG, h.anthropic("rescued", true).send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "oa/gpt-4o-mini");
    assert_eq!(anthropic_stream_text(&response.text().await.unwrap()), TEXT);
    assert!(started.elapsed() < Duration::from_secs(3), "pings did not hold the request");
}

#[tokio::test]
async fn pings_after_content_do_not_hold_the_client_past_the_idle_deadline() {
    let h = Harness::start_with(Setup::new("").timeouts(|t| t.idle_ms = 400)).await;
    // message_start, a ping, content_block_start, the first text delta: then pings only.
    h.mock.script("claude-pinger", [Behavior::ping_after(4)]);
    let started = Instant::now();
    let response = h.anthropic("an/claude-pinger", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = timeout(WATCHDOG, response.text()).await.expect("the stream ends").unwrap();
    assert_eq!(sse_events(&text).last(), Some(&"error"), "{text}");
    assert!(!text.contains("message_stop"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(4), "every ping reset the idle deadline");

    // The request log records how the stream ended, not its first byte.
    let entry = h.newest_logged().await;
    assert_eq!(entry["outcome"], "broken", "{entry}");
    assert_eq!(entry["status"], 200, "{entry}");
    let (duration, first_byte) = (entry["duration_ms"].as_u64(), entry["first_byte_ms"].as_u64());
    assert!(duration > first_byte, "{entry}: the duration runs to the stream's end");
    let _: &Value = &entry;
}
