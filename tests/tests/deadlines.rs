//! Which deadline an attempt gets (RESILIENCE.md §7): the short first-event deadline only when
//! someone else could still serve the request; the last allowed attempt waits the long one.

use std::time::Duration;

use switchyard_e2e::harness::{Harness, Setup, anthropic_stream_text, header};
use switchyard_testkit::Behavior;

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
