//! Where an attempt loop goes next (RESILIENCE.md §2, §7): the short first-event deadline only
//! when someone else could still serve the request, so the last allowed attempt waits the long
//! one; and a refusal of the request itself moves to another provider, never to another key.

use std::time::Duration;

use switchyard_e2e::harness::{Harness, Setup, anthropic_stream_text, header};
use switchyard_testkit::{Behavior, Status};

#[tokio::test]
async fn the_last_allowed_attempt_waits_the_long_deadline_even_with_candidates_left() {
    let h = Harness::start_with(
        Setup::new(
            r#"
[[combos]]
name = "three"
targets = [{ target = "an/slow-1" }, { target = "oa/gpt-4o" }, { target = "ge/gemini-fast" }]

[settings.routing]
max_attempts = 2
"#,
        )
        .timeouts(|t| {
            t.first_event_ms = 300;
            t.first_byte_ms = 5000;
        }),
    )
    .await;
    let slow = Behavior::slow_first_event(Duration::from_millis(900));
    h.mock.script("slow-1", [slow.clone()]);
    h.mock.script("gpt-4o", [slow]);
    let response = h.anthropic("three", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "oa/gpt-4o");
    assert_eq!(header(response.headers(), "x-switchyard-attempts"), "2");
    let text = response.text().await.unwrap();
    assert_eq!(anthropic_stream_text(&text), "Hello from the mock upstream.", "{text}");
    assert!(h.mock.attempts_for("gemini-fast").is_empty(), "a third attempt is not allowed");
}

/// A 400 that names a parameter the client sent.
fn unsupported_parameter() -> Behavior {
    Status::new(400)
        .body_json(serde_json::json!({"error": {
            "message": "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_parameter"
        }}))
        .into()
}

#[tokio::test]
async fn a_refusal_of_the_request_itself_moves_to_another_provider_never_to_another_key() {
    let h = Harness::start(
        r#"
[[combos]]
name = "pair"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-other" }]

[[combos]]
name = "alone"
targets = [{ target = "oa/gpt-4o" }]
"#,
    )
    .await;
    h.mock.script("gpt-4o", [unsupported_parameter(), unsupported_parameter()]);
    let response = h.openai("pair", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "an/claude-other");
    let refused = h.mock.attempts_for("gpt-4o");
    assert_eq!(refused.len(), 1, "the second key of the same provider is not tried");

    let response = h.openai("alone", false).send().await.unwrap();
    assert_eq!(response.status(), 400, "with no other provider, the upstream's own error");
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("reasoning_effort"), "{body}");
    assert_eq!(h.mock.attempts_for("gpt-4o").len(), 2, "one attempt, no other key");
    assert!(h.app.breaker("oa").is_none_or(|b| b.failures == 0), "nothing charged");
}
