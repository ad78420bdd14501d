//! Hedged first token (RESILIENCE.md §10): a streamed attempt slow to its first real event gets
//! a second one on another provider; the first real event wins, the loser's connection is
//! closed and it is charged nothing. Off unless the combo asks; a percentile is not trusted
//! before 20 samples; a hedge is an attempt and spends the retry budget; never on the same
//! provider.

use std::time::Duration;

use tokio::time::Instant;

use serde_json::Value;
use switchyard_core::ManualClock;
use switchyard_core::resilience::first_event::WINDOW;
use switchyard_e2e::harness::{
    Harness, MANAGEMENT_TOKEN, Setup, T0, WATCHDOG, header, openai_stream_text,
};
use switchyard_testkit::{Behavior, Fault, Reply};

const SLOW: Duration = Duration::from_secs(5);

/// An `an/slow-1` primary, an `oa/gpt-4o` secondary, `hedge` written into the combo.
async fn harness(hedge: &str, routing: &str) -> Harness {
    let extra = format!(
        r#"
[[combos]]
name = "hedged"
targets = [{{ target = "an/slow-1" }}, {{ target = "oa/gpt-4o" }}]
{hedge}

[settings.routing]
{routing}
"#
    );
    Harness::start_with(Setup::new(&extra).timeouts(|t| {
        t.first_event_ms = 10_000;
        t.first_byte_ms = 10_000;
    }))
    .await
}

/// Sends a streamed request; returns the time to its response (the proxy holds the headers
/// until the first real event), its served target, attempts and text.
async fn stream(h: &Harness) -> (Duration, String, String, String) {
    let sent = Instant::now();
    let response = h.openai("hedged", true).send().await.unwrap();
    let first = sent.elapsed();
    assert_eq!(response.status(), 200);
    let target = header(response.headers(), "x-switchyard-target").to_owned();
    let attempts = header(response.headers(), "x-switchyard-attempts").to_owned();
    let text = openai_stream_text(&response.text().await.unwrap());
    (first, target, attempts, text)
}

fn hedge_lines(entry: &Value) -> Vec<String> {
    entry["trace"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["event"] == "hedge")
        .map(|e| format!("{} {}", e["target"].as_str().unwrap(), e["hedge"].as_str().unwrap()))
        .collect()
}

async fn metric(h: &Harness, line: &str) -> u64 {
    let r = h.http.get(h.url("/metrics")).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
    let text = r.text().await.unwrap();
    let found = text
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .unwrap_or_else(|| panic!("{line} in {text}"));
    found.trim().parse().unwrap()
}

#[tokio::test]
async fn a_slow_first_event_is_hedged_and_the_loser_is_closed_and_charged_nothing() {
    let h = harness("hedge_after_ms = 200", "").await;
    h.mock.script("slow-1", [Behavior::slow_first_event(SLOW)]);
    let before = h.app.snapshot();

    let (first, target, attempts, text) = stream(&h).await;

    assert!(first < Duration::from_secs(2), "first token after {first:?}");
    assert!(first >= Duration::from_millis(200), "not before the hedge delay: {first:?}");
    assert_eq!(target, "oa/gpt-4o");
    assert_eq!(attempts, "2", "the hedge counts as an attempt");
    assert_eq!(text, "Hello from the mock upstream.");
    // The primary's connection is let go long before its first event was due, unfinished.
    tokio::time::timeout(Duration::from_secs(2), h.mock.wait_for_in_flight(0))
        .await
        .expect("the loser's request is abandoned, not waited for");
    assert_eq!(h.mock.unfinished_answers(), 1, "only the loser's answer was cut short");
    assert_eq!(h.mock.attempt_count("slow-1"), 1);
    // Nothing charged to the loser: no breaker, cooldown or lockout entry appeared.
    let after = h.app.snapshot();
    assert_eq!(after.breakers, before.breakers);
    assert_eq!(after.credentials, before.credentials);
    assert_eq!(after.lockouts, before.lockouts);
    assert!(h.app.breaker("an").is_none(), "{:?}", h.app.breaker("an"));

    let entry = h.newest_logged().await;
    assert_eq!(
        hedge_lines(&entry),
        ["oa/gpt-4o started", "an/slow-1 lost", "oa/gpt-4o won"],
        "{entry}"
    );
    assert_eq!(metric(&h, "switchyard_hedges_total{result=\"started\"}").await, 1);
    assert_eq!(metric(&h, "switchyard_hedges_total{result=\"won\"}").await, 1);
    assert_eq!(metric(&h, "switchyard_fallbacks_total").await, 1, "a hedge that won is one");
}

#[tokio::test]
async fn without_hedging_the_slow_primary_is_waited_for() {
    let h = harness("", "").await;
    let slow = Duration::from_millis(700);
    h.mock.script("slow-1", [Behavior::slow_first_event(slow)]);
    let (first, target, attempts, _) = stream(&h).await;
    assert!(first >= slow, "{first:?}");
    assert_eq!((target.as_str(), attempts.as_str()), ("an/slow-1", "1"));
    assert_eq!(h.mock.attempt_count("gpt-4o"), 0, "no hedge was sent");
}

#[tokio::test]
async fn a_percentile_is_not_used_before_twenty_samples() {
    let h = harness(r#"hedge_after = "p95""#, "").await;
    // 19 quick answers, then a slow one: 19 samples are not enough, so it is waited for.
    for _ in 0..19 {
        let (_, target, _, _) = stream(&h).await;
        assert_eq!(target, "an/slow-1");
    }
    let slow = Duration::from_millis(1500);
    h.mock.script("slow-1", [Behavior::slow_first_event(slow)]);
    let (first, target, _, _) = stream(&h).await;
    assert!(first >= slow, "{first:?}");
    assert_eq!(target, "an/slow-1", "no hedge before 20 samples");
    assert_eq!(h.mock.attempt_count("gpt-4o"), 0);
    // Twenty now: their p95 is quick, so the 1 s floor applies and the next slow one is hedged.
    h.mock.script("slow-1", [Behavior::slow_first_event(SLOW)]);
    let (first, target, _, _) = stream(&h).await;
    assert_eq!(target, "oa/gpt-4o", "hedged once 20 samples are in");
    assert!(first >= Duration::from_secs(1) && first < Duration::from_secs(3), "{first:?}");
}

#[tokio::test]
async fn a_hedge_respects_max_attempts() {
    let h = harness("hedge_after_ms = 100", "max_attempts = 1").await;
    let slow = Duration::from_millis(700);
    h.mock.script("slow-1", [Behavior::slow_first_event(slow)]);
    let (first, target, attempts, _) = stream(&h).await;
    assert!(first >= slow, "{first:?}");
    assert_eq!((target.as_str(), attempts.as_str()), ("an/slow-1", "1"));
    assert_eq!(h.mock.attempt_count("gpt-4o"), 0, "a second attempt is not allowed");
}

#[tokio::test]
async fn a_hedge_draws_from_the_retry_budget() {
    let h = harness(
        "hedge_after_ms = 100",
        "retry_budget_percent = 0\nretry_budget_min_per_second = 0",
    )
    .await;
    let slow = Duration::from_millis(700);
    h.mock.script("slow-1", [Behavior::slow_first_event(slow)]);
    let (first, target, attempts, _) = stream(&h).await;
    assert!(first >= slow, "{first:?}");
    assert_eq!((target.as_str(), attempts.as_str()), ("an/slow-1", "1"));
    assert_eq!(h.mock.attempt_count("gpt-4o"), 0, "the budget has nothing to spend");
}

#[tokio::test]
async fn no_hedge_is_started_on_the_same_provider() {
    let h = Harness::start_with(
        Setup::new(
            r#"
[[combos]]
name = "hedged"
targets = [{ target = "oa/gpt-4o" }, { target = "oa/gpt-4o-mini" }]
hedge_after_ms = 100
"#,
        )
        .timeouts(|t| {
            t.first_event_ms = 10_000;
            t.first_byte_ms = 10_000;
        }),
    )
    .await;
    let slow = Duration::from_millis(700);
    h.mock.script("gpt-4o", [Behavior::slow_first_event(slow)]);
    let (first, target, attempts, _) = stream(&h).await;
    assert!(first >= slow, "{first:?}");
    assert_eq!((target.as_str(), attempts.as_str()), ("oa/gpt-4o", "1"));
    assert_eq!(h.mock.attempt_count("gpt-4o-mini"), 0);
}

#[tokio::test]
async fn a_hedge_that_fails_leaves_the_primary_running() {
    let h = harness("hedge_after_ms = 100", "").await;
    let slow = Duration::from_millis(700);
    h.mock.script("slow-1", [Behavior::slow_first_event(slow)]);
    h.mock.script("gpt-4o", [Behavior::status(500)]);
    let (first, target, attempts, text) = stream(&h).await;
    assert!(first >= slow, "{first:?}");
    assert_eq!((target.as_str(), attempts.as_str()), ("an/slow-1", "2"));
    assert_eq!(text, "Hello from the mock upstream.");
    let entry = tokio::time::timeout(WATCHDOG, h.newest_logged()).await.unwrap();
    let outcomes: Vec<&str> =
        entry["trace"].as_array().unwrap().iter().filter_map(|e| e["outcome"].as_str()).collect();
    assert_eq!(outcomes, ["transient", "success"], "{entry}");
    let fallbacks = metric(&h, "switchyard_fallbacks_total").await;
    assert_eq!(fallbacks, 0, "served by the first attempt: a lost hedge is no fallback");
}

/// Hedging and continuation compose (RESILIENCE.md §10): `an/slow-1` is
/// hedged by `oa/gpt-4o`, and `an2/claude-rescue` (Anthropic prefill) or `ds/ds-chat`
/// (`prefix: true`) may continue a broken answer.
async fn composed(targets: &str, routing: &str) -> Harness {
    let extra = format!(
        r#"
[[providers]]
id = "an2"
kind = "anthropic"
base_url = "{{mock}}"

[[providers]]
id = "ds"
kind = "openai"
base_url = "{{mock}}/v1"
models = [{{ id = "ds-chat", continuation = "prefix" }}]

[[combos]]
name = "hedged"
targets = [{targets}]
hedge_after_ms = 200

[settings.routing]
{routing}
"#
    );
    let setup = Setup::new(&extra).breaker("{ enabled = false }").timeouts(|t| {
        t.first_event_ms = 10_000;
        t.first_byte_ms = 10_000;
        t.idle_ms = 300;
    });
    Harness::start_with(setup).await
}

/// The canonical text in six deltas, cut after four events.
fn cut() -> Behavior {
    Reply::default().chunks(6).fault(Fault::CutAfter(4)).into()
}

#[tokio::test]
async fn a_hedge_winners_mid_answer_break_is_continued_like_any_other() {
    let targets =
        r#"{ target = "an/slow-1" }, { target = "oa/gpt-4o" }, { target = "an2/claude-rescue" }"#;
    let h = composed(targets, "").await;
    h.mock.script("slow-1", [Behavior::slow_first_event(SLOW)]);
    h.mock.script("gpt-4o", [cut()]);
    let (_, target, _, text) = stream(&h).await;
    assert_eq!(target, "oa/gpt-4o", "the hedge won");
    assert_eq!(text, "Hello from the mock upstream.", "continued to the whole answer");
    let logged = h.newest_logged().await;
    let trace = logged["trace"].to_string();
    assert!(trace.contains("\"continued\""), "{trace}");
    assert_eq!(h.mock.attempt_count("claude-rescue"), 1);
}

#[tokio::test]
async fn primary_hedge_and_continuation_together_stay_within_max_attempts() {
    let targets =
        r#"{ target = "an/slow-1" }, { target = "oa/gpt-4o" }, { target = "an2/claude-rescue" }"#;
    let h = composed(targets, "max_attempts = 2").await;
    h.mock.script("slow-1", [Behavior::slow_first_event(SLOW)]);
    h.mock.script("gpt-4o", [cut()]);
    let (_, target, _, text) = stream(&h).await;
    assert_eq!(target, "oa/gpt-4o");
    assert!(text.len() < "Hello from the mock upstream.".len(), "not continued: {text}");
    assert_eq!(h.mock.attempt_count("claude-rescue"), 0, "a third attempt past the cap of 2");
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(trace.contains("no_attempts_left"), "{trace}");
}

#[tokio::test]
async fn a_primary_that_wins_after_its_hedge_failed_is_never_continued_on_the_hedges_provider() {
    let targets =
        r#"{ target = "an/slow-1" }, { target = "ds/ds-chat" }, { target = "an2/claude-rescue" }"#;
    let h = composed(targets, "").await;
    let slow_then_cut = Reply::default()
        .first_event_after(Duration::from_millis(700))
        .chunks(6)
        .fault(Fault::CutAfter(4));
    h.mock.script("slow-1", [slow_then_cut.into()]);
    h.mock.script("ds-chat", [Behavior::status(500)]);
    let (_, target, _, text) = stream(&h).await;
    assert_eq!(target, "an/slow-1", "the primary won after the hedge failed");
    assert_eq!(text, "Hello from the mock upstream.");
    assert_eq!(h.mock.attempt_count("ds-chat"), 1, "only the hedge: ds failed this request");
    assert_eq!(h.mock.attempt_count("claude-rescue"), 1, "continued on an2");
}

#[tokio::test]
async fn a_primary_refused_for_the_request_itself_during_the_race_is_not_answered_by_the_hedge() {
    let h = composed(r#"{ target = "an/slow-1" }, { target = "oa/gpt-4o" }"#, "").await;
    // The primary says, after the hedge started, that the request itself is invalid: no other
    // target may answer it instead (RESILIENCE.md §2: other 4xx do not fall back).
    let refusal = r#"event: error
data: {"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}

"#;
    let refused = Reply::default()
        .first_event_after(Duration::from_millis(600))
        .fault(Fault::ErrorAfter(0))
        .error_event(refusal);
    h.mock.script("slow-1", [refused.into()]);
    h.mock.script("gpt-4o", [Behavior::slow_first_event(Duration::from_secs(2))]);
    let response = h.openai("hedged", true).send().await.unwrap();
    assert_eq!(response.status(), 400, "the primary's refusal, not the hedge's answer");
    let body = response.text().await.unwrap();
    assert!(body.contains("must be non-empty"), "{body}");
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(trace.contains("cancelled"), "the hedge was cancelled: {trace}");
}

/// Issue 25, defect 3 (RESILIENCE.md §10): in a sustained slowdown every race is won by the
/// hedge, and only winners used to be measured, so the slow primary's sketch drained: once its
/// fast samples were two windows old it had none, `delay()` said "not enough samples", and the
/// next request waited out the slow primary unhedged. A loser's elapsed time is now recorded as
/// a lower bound of its time to first event, so the primary keeps its 20 samples and hedging
/// stays on. The app's clock is manual (the sketch's windows are ten minutes); the requests of
/// each step run at once.
#[tokio::test]
async fn percentile_hedging_stays_on_through_a_sustained_slowdown_of_the_primary() {
    let clock = ManualClock::new(T0);
    let extra = r#"
[[combos]]
name = "hedged"
targets = [{ target = "an/slow-1" }, { target = "oa/gpt-4o" }]
hedge_after = "p95"

[settings.routing]
retry_budget_min_per_second = 100
"#;
    let setup = Setup::new(extra).clock(&clock).timeouts(|t| {
        t.first_event_ms = 10_000;
        t.first_byte_ms = 10_000;
    });
    let h = Harness::start_with(setup).await;
    let burst = || futures_util::future::join_all((0..20).map(|_| stream(&h)));
    // Twenty quick answers: the primary's p95 is quick, so hedges start at the 1 s floor.
    for (_, target, _, _) in burst().await {
        assert_eq!(target, "an/slow-1");
    }
    // The primary slows down for good; a window on, every race goes to the hedge.
    h.mock.set_default("slow-1", Behavior::slow_first_event(SLOW));
    clock.advance(WINDOW);
    for (first, target, _, _) in burst().await {
        assert_eq!(target, "oa/gpt-4o", "hedged after {first:?}");
    }
    // Another window on, the quick samples are forgotten: only the lost races measure it.
    clock.advance(WINDOW);
    let (first, target, attempts, _) = stream(&h).await;
    assert_eq!((target.as_str(), attempts.as_str()), ("oa/gpt-4o", "2"), "after {first:?}");
    assert!(first < SLOW, "hedged, not waited out: {first:?}");
}

/// RESILIENCE.md §10, "rescued by the deadline, not after it": with hedging off, a primary
/// whose first token would come after the first-event deadline is not waited out; the fallback,
/// whose time to first token is known, starts early enough that its answer begins by the
/// deadline.
#[tokio::test]
async fn a_slow_first_token_is_rescued_by_the_deadline_not_after_it() {
    let deadline = Duration::from_secs(3);
    let h = Harness::start_with(
        Setup::new(
            r#"
[[combos]]
name = "hedged"
targets = [{ target = "an/slow-1" }, { target = "oa/gpt-4o" }]
"#,
        )
        .timeouts(|t| {
            t.first_event_ms = 3_000;
            t.first_byte_ms = 10_000;
        }),
    )
    .await;
    // The fallback's time to first token, measured: twenty quick answers.
    for _ in 0..20 {
        let response = h.openai("oa/gpt-4o", true).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap();
    }
    h.mock.script("slow-1", [Behavior::slow_first_event(Duration::from_secs(6))]);

    let (first, target, attempts, text) = stream(&h).await;

    assert!(first < deadline, "the first token came after the deadline: {first:?}");
    // Its p95 is floored at a second: started a second before the deadline, not earlier.
    assert!(first >= Duration::from_secs(2), "started too early: {first:?}");
    assert_eq!((target.as_str(), attempts.as_str()), ("oa/gpt-4o", "2"));
    assert_eq!(text, "Hello from the mock upstream.");
    let entry = h.newest_logged().await;
    assert_eq!(
        hedge_lines(&entry),
        ["oa/gpt-4o started_early", "an/slow-1 lost", "oa/gpt-4o won"],
        "{entry}"
    );
    assert!(h.app.breaker("an").is_none(), "the loser is charged nothing");
}
