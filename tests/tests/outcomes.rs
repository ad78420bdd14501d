//! RESILIENCE.md §2 row by row, through the real proxy: for each upstream outcome, what the
//! client gets, which layer is charged (read back from the health registry) and which targets
//! the mock saw (so "fell back", "retried once" and "not tried again" are counted, not assumed).
//!
//! Most tests use the combo `smart` (`oa/gpt-4o`, keys `oa-1` then `oa-2`, falling back to
//! `an/claude-fallback`), so one request shows the retry on the same target, the skip of the
//! failed provider's other key and the fallback at once.

use std::time::Duration;

use switchyard_core::ManualClock;
use switchyard_core::outcome::{BreakerFault, CredentialFault, OutcomeKind};
use switchyard_core::resilience::{BreakerState, CredentialStatus};
use switchyard_e2e::harness::{
    FALLBACK, Harness, Setup, T0, WATCHDOG, anthropic_stream_text, ask, closed_port, header,
    is_probe, json_parts, keys_of, openai_stream_text, openai_text, sse_data, sse_events,
};
use switchyard_e2e::streaming::Client;
use switchyard_testkit::{Behavior, ErrorKind, Reply, Status};
use tokio::time::{Instant, timeout};

/// The key of every attempt at `model`, in order.
/// The keys users' requests for `model` presented upstream, in order (recovery probes left out).
fn keys(h: &Harness, model: &str) -> Vec<String> {
    keys_of(&h.mock.attempts_for(model).into_iter().filter(|a| !is_probe(a)).collect::<Vec<_>>())
}

/// The keys the proxy's recovery probes for `model` presented, in order.
fn probed(h: &Harness, model: &str) -> Vec<String> {
    keys_of(&h.mock.attempts_for(model).into_iter().filter(is_probe).collect::<Vec<_>>())
}

#[tokio::test]
async fn every_client_dialect_is_served_by_every_upstream_dialect_streamed_or_not() {
    let h = Harness::start("").await;
    for target in ["oa/gpt-4o", "an/claude-x", "ge/gemini-x"] {
        let (status, headers, body) = ask(&h, target).await;
        assert_eq!(status, 200, "{target}: {body}");
        assert_eq!(openai_text(&body), "Hello from the mock upstream.", "{target}: {body}");
        assert_eq!(body["model"], target);
        assert_eq!(header(&headers, "x-switchyard-target"), target);

        let response = h.anthropic(target, false).send().await.unwrap();
        let (status, _, body) = json_parts(response).await;
        assert_eq!(status, 200, "{target}: {body}");
        assert_eq!(body["content"][0]["text"], "Hello from the mock upstream.", "{body}");
        assert_eq!(body["model"], target);

        let text = h.openai(target, true).send().await.unwrap().text().await.unwrap();
        assert!(text.ends_with("data: [DONE]\n\n"), "{target}: {text}");
        assert_eq!(openai_stream_text(&text), "Hello from the mock upstream.", "{text}");
        let text = h.anthropic(target, true).send().await.unwrap().text().await.unwrap();
        assert_eq!(sse_events(&text).last(), Some(&"message_stop"), "{target}: {text}");
        assert_eq!(anthropic_stream_text(&text), "Hello from the mock upstream.", "{text}");
    }
    assert_eq!(h.mock.total_attempts(), 12);
    assert_eq!(h.app.snapshot().breakers, [], "a success charges nothing");
}

#[tokio::test]
async fn a_success_after_a_transient_failure_is_recorded_and_lowers_the_breaker_count() {
    let h = Harness::start("").await;
    h.mock.enqueue("gpt-4o", Status::new(500));
    let (status, headers, body) = ask(&h, "oa/gpt-4o").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-1"], "retried once on the same target");
    // The failure counted one, the success took it back: the breaker is pristine again and no
    // longer tracked.
    assert_eq!(h.app.breaker("oa"), None);
    assert_eq!(h.app.snapshot().lockouts, []);
}

#[tokio::test]
async fn a_refused_connection_charges_the_breaker_and_falls_back_without_a_retry() {
    let port = closed_port();
    let h = Harness::start(&format!(
        r#"
[[providers]]
id = "dead"
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
credentials = [{{ id = "dead-1", secret = "env:OA_1" }}]

[[combos]]
name = "lifeboat"
targets = [{{ target = "dead/gpt-4o" }}, {{ target = "oa/gpt-4o" }}]
"#
    ))
    .await;
    let (status, headers, body) = ask(&h, "lifeboat").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "oa/gpt-4o");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2", "no retry on a refused connect");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1"]);
    let dead = h.app.breaker("dead").expect("the dead provider's breaker is charged");
    assert_eq!((dead.failures, dead.last_fault), (1, Some(BreakerFault::Connect)));
    assert_eq!(h.app.breaker("oa"), None);
}

#[tokio::test]
async fn a_reset_before_headers_is_retried_once_on_the_same_target_then_falls_back() {
    let h = Harness::start(FALLBACK).await;
    h.mock.script("gpt-4o", [Behavior::reset(), Behavior::reset()]);
    let (status, headers, body) = ask(&h, "smart").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "an/claude-fallback");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "3");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-1"], "once more on the same target, not oa-2");
    assert_eq!(h.mock.attempt_count("claude-fallback"), 1);
    let oa = h.app.breaker("oa").expect("charged");
    assert_eq!((oa.failures, oa.last_fault), (2, Some(BreakerFault::Reset)));
}

#[tokio::test]
async fn a_single_reset_before_headers_is_healed_by_the_retry_on_the_same_target() {
    let h = Harness::start(FALLBACK).await;
    h.mock.enqueue("gpt-4o", Behavior::reset());
    let (status, headers, body) = ask(&h, "smart").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "oa/gpt-4o");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-1"]);
    assert_eq!(h.mock.attempt_count("claude-fallback"), 0);
}

/// Sends `request` to an upstream that never answers, and checks that the proxy gave up on it
/// after `deadline` (not before, not much later) and that the fallback served.
async fn silent_primary_is_abandoned(h: &Harness, stream: bool, deadline: Duration) {
    h.mock.enqueue("gpt-4o", Behavior::hang());
    let started = Instant::now();
    let response = h.openai("smart", stream).send().await.unwrap();
    let took = started.elapsed();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "an/claude-fallback");
    assert!(took >= deadline, "gave up before the deadline ({deadline:?}): {took:?}");
    assert!(took < deadline + Duration::from_secs(2), "waited far past {deadline:?}: {took:?}");
    assert_eq!(keys(h, "gpt-4o"), ["oa-1"], "a timeout is not retried on the same provider");
    timeout(WATCHDOG, h.mock.wait_for_in_flight(0)).await.expect("the hung request is let go");
    let oa = h.app.breaker("oa").expect("charged");
    assert_eq!((oa.failures, oa.last_fault), (1, Some(BreakerFault::Timeout)));
}

#[tokio::test]
async fn a_stream_whose_upstream_sends_no_headers_falls_back_at_the_first_event_deadline() {
    let setup = Setup::new(FALLBACK).timeouts(|t| {
        t.first_event_ms = 400;
        t.first_byte_ms = 5000;
    });
    let h = Harness::start_with(setup).await;
    silent_primary_is_abandoned(&h, true, Duration::from_millis(400)).await;
}

#[tokio::test]
async fn a_non_streamed_request_whose_upstream_sends_no_headers_falls_back_at_the_non_stream_deadline()
 {
    let setup = Setup::new(FALLBACK).timeouts(|t| {
        t.first_event_ms = 200;
        t.first_byte_ms = 300;
        t.non_stream_ms = 1000;
    });
    let h = Harness::start_with(setup).await;
    silent_primary_is_abandoned(&h, false, Duration::from_millis(1000)).await;
}

/// Anthropic and OpenAI send a non-streamed answer's headers only with the finished body: a
/// generation longer than the stream deadlines is not a dead host (RESILIENCE.md §7).
#[tokio::test]
async fn a_slow_non_streamed_answer_is_waited_for_past_the_stream_deadlines() {
    let setup = Setup::new(FALLBACK).timeouts(|t| {
        t.first_event_ms = 200;
        t.first_byte_ms = 300;
        t.idle_ms = 300;
        t.non_stream_ms = 5000;
    });
    let h = Harness::start_with(setup).await;
    h.mock.enqueue("gpt-4o", Behavior::slow_first_event(Duration::from_millis(900)));
    let (status, headers, body) = ask(&h, "smart").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "oa/gpt-4o", "the slow generation is the answer");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "1");
    assert_eq!(h.mock.attempt_count("claude-fallback"), 0);
    assert!(h.app.breaker("oa").is_none_or(|b| b.failures == 0), "nothing charged");
}

#[tokio::test]
async fn transient_statuses_charge_the_breaker_and_lock_the_model_only_for_listed_codes() {
    // The default lockout list is [404, 429, 503].
    for code in [408, 500, 502, 503, 504, 529] {
        let h = Harness::start(FALLBACK).await;
        h.mock.set_default("gpt-4o", Status::new(code));
        let (status, _, body) = ask(&h, "smart").await;
        assert_eq!(status, 200, "{code}: {body}");
        assert_eq!(body["model"], "an/claude-fallback", "{code}");
        let oa = h.app.breaker("oa").unwrap_or_else(|| panic!("{code}: breaker not charged"));
        assert_eq!(oa.last_fault, Some(BreakerFault::Transient), "{code}");
        assert!(oa.failures >= 1, "{code}: {oa:?}");
        assert_eq!(h.app.snapshot().credentials, [], "{code}: the key is not to blame");
        if code == 503 {
            let lock = h.app.lockout("oa", "oa-1", "gpt-4o").expect("503 is in the list");
            assert_eq!(
                lock.reason.map(|r| (r.kind, r.status)),
                Some((OutcomeKind::Transient, Some(503)))
            );
        } else {
            assert_eq!(h.app.locked(), Vec::<String>::new(), "{code} is not in the lockout list");
            assert_eq!(
                keys(&h, "gpt-4o"),
                ["oa-1", "oa-1"],
                "{code}: retried once, then fell back"
            );
        }
    }
}

#[tokio::test]
async fn the_lockout_list_decides_which_transient_statuses_lock_the_model() {
    let extra = format!("{FALLBACK}\n[settings.model_lockouts]\nerror_codes = [500, 529]\n");
    for (code, locks) in [(500, true), (529, true), (502, false), (503, false)] {
        let h = Harness::start(&extra).await;
        h.mock.set_default("gpt-4o", Status::new(code));
        let (status, _, body) = ask(&h, "smart").await;
        assert_eq!(status, 200, "{code}: {body}");
        assert_eq!(h.app.lockout("oa", "oa-1", "gpt-4o").is_some(), locks, "{code}");
        assert_eq!(
            h.app.breaker("oa").and_then(|b| b.last_fault),
            Some(BreakerFault::Transient),
            "{code}: the breaker is charged either way"
        );
    }
}

/// RESILIENCE.md §2: a transient failure charges the *provider*; the attempt loop's own rule is
/// that "providers that failed this request on their own account are not tried again for it".
/// That must hold whether or not the status also locks the model.
#[tokio::test]
async fn a_transient_failure_that_locks_the_model_does_not_move_on_to_another_key_of_the_failed_provider()
 {
    let h = Harness::start(FALLBACK).await;
    h.mock.set_default("gpt-4o", Status::new(503));
    let (status, headers, body) = ask(&h, "smart").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "an/claude-fallback");
    assert_eq!(
        keys(&h, "gpt-4o"),
        ["oa-1"],
        "after oa failed with 503 (a provider fault), its second key must not be tried for this request"
    );
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
}

#[tokio::test]
async fn a_429_moves_to_the_next_key_which_serves_until_retry_after_has_passed() {
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock("", &clock).await;
    h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(60)));
    let (status, headers, body) = ask(&h, "oa/gpt-4o").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"], "no waiting in place while oa-2 exists");
    let lock = h.app.lockout("oa", "oa-1", "gpt-4o").expect("429 is in the lockout list");
    assert_eq!(lock.remaining_ms, 60_000, "Retry-After sets the length");
    assert_eq!(h.app.breaker("oa"), None, "a rate limit is not the provider's failure");

    clock.advance(Duration::from_millis(59_999));
    h.mock.clear();
    for _ in 0..3 {
        assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
    }
    assert_eq!(keys(&h, "gpt-4o"), ["oa-2", "oa-2", "oa-2"], "oa-1 rests until Retry-After");

    // The lock has run out: oa-2 serves once more while a probe asks oa-1, whose 2xx puts it
    // back in first place.
    clock.advance(Duration::from_millis(1));
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
    h.app.probes_settled().await;
    assert_eq!(probed(&h, "gpt-4o"), ["oa-1"]);
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
    assert_eq!(keys(&h, "gpt-4o").last().map(String::as_str), Some("oa-1"), "back in first place");
}

#[tokio::test]
async fn a_429_cools_the_whole_key_when_429_is_not_in_the_lockout_list() {
    let clock = ManualClock::new(T0);
    let setup = Setup::new("[settings.model_lockouts]\nerror_codes = [404, 503]\n").clock(&clock);
    let h = Harness::start_with(setup).await;
    h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(30)));
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"]);
    let cooling = h.app.credential("oa", "oa-1").expect("the key is cooling");
    assert_eq!((cooling.status, cooling.retry_in_ms), (CredentialStatus::Cooling, Some(30_000)));
    assert_eq!(h.app.locked(), Vec::<String>::new());

    // The key, not the model: the other model avoids it too.
    assert_eq!(ask(&h, "oa/gpt-4o-mini").await.0, 200);
    assert_eq!(keys(&h, "gpt-4o-mini"), ["oa-2"]);
    // The cooldown has run out, its backoff standing: a probe (on this model) asks the key
    // first; anything but a 429 gives it its place back.
    clock.advance(Duration::from_secs(30));
    assert_eq!(ask(&h, "oa/gpt-4o-mini").await.0, 200);
    h.app.probes_settled().await;
    assert_eq!(probed(&h, "gpt-4o-mini"), ["oa-1"]);
    assert_eq!(ask(&h, "oa/gpt-4o-mini").await.0, 200);
    assert_eq!(keys(&h, "gpt-4o-mini"), ["oa-2", "oa-2", "oa-1"]);
    assert!(h.app.registry.records().credentials.is_empty(), "the backoff is cleared");
}

/// Issue 25, defect 5: a 429 on the last allowed attempt has no attempt left to wait for. It
/// used to wait out its `Retry-After` and spend a retry token, then give up without calling
/// anyone; the client gets the 429 with its `Retry-After` at once.
#[tokio::test]
async fn a_429_at_the_attempt_cap_is_returned_at_once_with_its_retry_after() {
    let h = Harness::start("[settings.routing]\nmax_attempts = 2\n").await;
    h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(60)));
    h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(5)));
    let started = Instant::now();
    let (status, headers, body) = ask(&h, "oa/gpt-4o").await;
    let took = started.elapsed();
    assert_eq!(status, 429, "{body}");
    let retry_after: u64 = header(&headers, "retry-after").parse().expect("Retry-After");
    assert!((1..=5).contains(&retry_after), "the earliest key back: {retry_after}");
    assert!(took < Duration::from_secs(4), "the 5 s Retry-After was waited out: {took:?}");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"], "two attempts, the cap");
}

#[tokio::test]
async fn a_refused_key_is_marked_invalid_and_never_used_again_while_the_other_key_serves() {
    // A 403 is about the key only when the body says so (RESILIENCE.md §2): see
    // `a_403_forbids_only_that_model_on_that_key_and_the_key_keeps_serving`.
    for code in [401] {
        let clock = ManualClock::new(T0);
        let h = Harness::start_with_clock(FALLBACK, &clock).await;
        h.mock.enqueue("gpt-4o", Status::new(code));
        let (status, headers, body) = ask(&h, "smart").await;
        assert_eq!(status, 200, "{code}: {body}");
        assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o", "{code}");
        assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"], "{code}");
        let invalid = h.app.credential("oa", "oa-1").expect("benched");
        assert_eq!((invalid.status, invalid.retry_in_ms), (CredentialStatus::Invalid, None));
        assert_eq!(h.app.breaker("oa"), None, "{code}: the provider is fine");

        // Invalid does not run out: a day later, any model, still never oa-1.
        clock.advance(Duration::from_secs(24 * 3600));
        for model in ["oa/gpt-4o", "oa/gpt-4o-mini"] {
            assert_eq!(ask(&h, model).await.0, 200);
        }
        let all = keys_of(&h.mock.attempts());
        assert_eq!(all.iter().filter(|k| *k == "oa-1").count(), 1, "{code}: {all:?}");
    }
}

/// RESILIENCE.md §2: a 403 that does not say the key is refused is `model_forbidden`: that
/// model on that key is locked for 10 minutes, the key keeps serving its other models, and the
/// request falls back (here to the other key).
#[tokio::test]
async fn a_403_forbids_only_that_model_on_that_key_and_the_key_keeps_serving() {
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(FALLBACK, &clock).await;
    h.mock.enqueue("gpt-4o", Status::new(403));
    let (status, headers, body) = ask(&h, "smart").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"]);
    assert!(h.app.credential("oa", "oa-1").is_none(), "the key is not benched");
    let lock = h.app.lockout("oa", "oa-1", "gpt-4o").expect("the model is locked on oa-1");
    assert_eq!(lock.reason.map(|r| r.kind), Some(OutcomeKind::ModelForbidden));
    assert_eq!(lock.remaining_ms, 600_000);
    assert_eq!(ask(&h, "oa/gpt-4o-mini").await.0, 200);
    assert_eq!(keys(&h, "gpt-4o-mini"), ["oa-1"], "oa-1 still serves its other models");
}

/// Gemini answers a bad key with 400 `INVALID_ARGUMENT` / `API_KEY_INVALID`, not 401: it is the
/// same auth failure and must be treated as one (RESILIENCE.md §2, "adapters may refine a
/// verdict from the body").
#[tokio::test]
async fn a_gemini_key_refused_as_api_key_invalid_is_marked_invalid_and_the_request_falls_back() {
    let h = Harness::start(
        r#"
[[combos]]
name = "gem"
targets = [{ target = "ge/gemini-x" }, { target = "oa/gpt-4o" }]
"#,
    )
    .await;
    h.mock.enqueue("gemini-x", Behavior::error(ErrorKind::Unauthorized));
    let (status, _, body) = ask(&h, "gem").await;
    assert_eq!(status, 200, "a bad Gemini key must fall back, not fail the request: {body}");
    assert_eq!(body["model"], "oa/gpt-4o");
    let invalid = h.app.credential("ge", "ge-1").map(|c| c.status);
    assert_eq!(invalid, Some(CredentialStatus::Invalid));
}

#[tokio::test]
async fn running_out_of_credit_benches_the_key_for_an_hour_and_falls_back() {
    // 402 by status; OpenAI's 429 `insufficient_quota`; Anthropic's 400 "credit balance". Each
    // primary has a fallback on the other provider.
    let cases = [
        ("oa", "oa-1", "gpt-4o", "an/claude-x", Behavior::status(402)),
        ("oa", "oa-1", "gpt-4o", "an/claude-x", Behavior::error(ErrorKind::InsufficientQuota)),
        ("an", "an-1", "claude-x", "oa/gpt-4o", Behavior::error(ErrorKind::InsufficientQuota)),
    ];
    for (provider, key, model, fallback, behavior) in cases {
        let clock = ManualClock::new(T0);
        let target = format!("{provider}/{model}");
        let combo = format!(
            "[[combos]]\nname = \"credit\"\ntargets = [{{ target = \"{target}\" }}, {{ target = \"{fallback}\" }}]\n"
        );
        let h = Harness::start_with_clock(&combo, &clock).await;
        h.mock.enqueue(model, behavior.clone());
        let (status, _, body) = ask(&h, "credit").await;
        assert_eq!(status, 200, "{behavior:?}: {body}");
        let benched = h.app.credential(provider, key).expect("benched");
        assert_eq!(
            (benched.status, benched.retry_in_ms),
            (CredentialStatus::QuotaExhausted, Some(3_600_000)),
            "{behavior:?}"
        );
        assert_eq!(h.app.breaker(provider), None, "{behavior:?}");
        assert_eq!(h.app.locked(), Vec::<String>::new(), "{behavior:?}");

        // A second short of the hour the key is still out (another key or the fallback
        // serves); on the hour it is back in first place.
        clock.advance(Duration::from_secs(3599));
        h.mock.clear();
        assert_eq!(ask(&h, "credit").await.0, 200);
        assert!(!keys(&h, model).iter().any(|k| k == key), "{behavior:?}: still benched");
        clock.advance(Duration::from_secs(1));
        assert_eq!(ask(&h, "credit").await.0, 200);
        assert_eq!(keys(&h, model).last().map(String::as_str), Some(key), "{behavior:?}");
    }
}

/// Issue 28: a subscription's window that ran out (a Claude plan's 429 with the unified
/// limiter rejecting; Codex's `usage_limit_reached`) benches that credential until exactly the
/// window's reset, five hours or a week away (no one-hour cap on hints), the same request falls
/// back, and the subscription serves again at the reset.
#[tokio::test]
async fn a_subscriptions_spent_window_benches_it_until_its_reset_however_far_and_falls_back() {
    let at = |wait: Duration| (T0.0 / 1000 + wait.as_secs()).to_string();
    let five_hours = Duration::from_secs(5 * 3600);
    let week = Duration::from_secs(7 * 24 * 3600);
    let claude = Status::new(429)
        .header("anthropic-ratelimit-unified-status", "rejected")
        .header("anthropic-ratelimit-unified-5h-utilization", "1.0")
        .header("anthropic-ratelimit-unified-reset", at(five_hours));
    let codex = Status::new(429).body_json(serde_json::json!({"error": {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "plan_type": "plus",
        "resets_in_seconds": week.as_secs(),
    }}));
    let cases = [
        ("an", "an-1", "claude-x", "oa/gpt-4o", claude, five_hours),
        ("oa", "oa-1", "gpt-4o", "an/claude-x", codex, week),
    ];
    for (provider, key, model, fallback, behavior, reset) in cases {
        let clock = ManualClock::new(T0);
        let combo = format!(
            "[[combos]]\nname = \"plan\"\ntargets = [{{ target = \"{provider}/{model}\" }}, {{ target = \"{fallback}\" }}]\n"
        );
        let h = Harness::start_with_clock(&combo, &clock).await;
        h.mock.enqueue(model, behavior);
        let (status, _, body) = ask(&h, "plan").await;
        assert_eq!(status, 200, "{key}: the same request falls back: {body}");
        let benched = h.app.credential(provider, key).expect("benched");
        let until_reset = u64::try_from(reset.as_millis()).unwrap();
        assert_eq!(
            (benched.status, benched.retry_in_ms, benched.last_error),
            (
                CredentialStatus::QuotaExhausted,
                Some(until_reset),
                Some(CredentialFault::Subscription)
            ),
            "{key}"
        );
        assert_eq!(h.app.breaker(provider), None, "{key}: the provider is fine");
        assert_eq!(h.app.locked(), Vec::<String>::new(), "{key}: the credential, not a model");

        // A second before the reset it is still out; at the reset it serves again.
        clock.advance(reset.saturating_sub(Duration::from_secs(1)));
        h.mock.clear();
        assert_eq!(ask(&h, "plan").await.0, 200);
        assert!(!keys(&h, model).iter().any(|k| k == key), "{key}: still benched");
        clock.advance(Duration::from_secs(1));
        assert_eq!(ask(&h, "plan").await.0, 200);
        assert_eq!(
            keys(&h, model).last().map(String::as_str),
            Some(key),
            "{key}: back at the reset"
        );
    }
}

#[tokio::test]
async fn a_missing_or_retired_model_is_locked_for_that_model_on_that_key_only() {
    for code in [404, 410] {
        let h = Harness::start("").await;
        h.mock.enqueue("gpt-4o", Status::new(code));
        let (status, _, body) = ask(&h, "oa/gpt-4o").await;
        assert_eq!(status, 200, "{code}: {body}");
        assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"], "{code}");
        assert_eq!(h.app.locked(), ["oa/gpt-4o@oa-1"], "{code}");
        let lock = h.app.lockout("oa", "oa-1", "gpt-4o").unwrap();
        assert_eq!(lock.reason.map(|r| r.kind), Some(OutcomeKind::ModelUnavailable));
        assert_eq!(h.app.breaker("oa"), None, "{code}");
        assert_eq!(h.app.snapshot().credentials, [], "{code}");
        // The same key still serves the other model; the other key still serves this one.
        assert_eq!(ask(&h, "oa/gpt-4o-mini").await.0, 200);
        assert_eq!(keys(&h, "gpt-4o-mini"), ["oa-1"], "{code}");
        assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
        assert_eq!(keys(&h, "gpt-4o").last().map(String::as_str), Some("oa-2"), "{code}");
    }
}

#[tokio::test]
async fn a_gemini_model_that_is_not_found_is_locked_and_the_request_falls_back() {
    let h = Harness::start(
        r#"
[[combos]]
name = "gem"
targets = [{ target = "ge/gemini-x" }, { target = "an/claude-x" }]
"#,
    )
    .await;
    h.mock.enqueue("gemini-x", Behavior::error(ErrorKind::ModelNotFound));
    let (status, _, body) = ask(&h, "gem").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "an/claude-x");
    assert_eq!(h.app.locked(), ["ge/gemini-x@ge-1"]);
}

const WINDOWS: &str = r#"
[[combos]]
name = "long"
targets = [
  { target = "oa/gpt-4o", context_window = 128000 },
  { target = "an/claude-small", context_window = 100000 },
  { target = "ge/gemini-big", context_window = 1000000 },
]
[[combos]]
name = "short"
targets = [
  { target = "oa/gpt-4o", context_window = 128000 },
  { target = "an/claude-small", context_window = 100000 },
]
"#;

#[tokio::test]
async fn a_context_length_error_falls_back_only_to_a_target_with_a_larger_window() {
    let h = Harness::start(WINDOWS).await;
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::ContextLengthExceeded));
    let (status, headers, body) = ask(&h, "long").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "ge/gemini-big");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1"], "oa-2 has the same window: pointless");
    assert_eq!(h.mock.attempt_count("claude-small"), 0, "a smaller window is skipped");
    let snapshot = h.app.snapshot();
    assert_eq!(
        (snapshot.breakers.len(), snapshot.credentials.len(), snapshot.lockouts.len()),
        (0, 0, 0),
        "the request is too large, nobody is to blame"
    );
}

#[tokio::test]
async fn a_context_length_error_without_a_larger_target_is_returned_to_the_client() {
    let h = Harness::start(WINDOWS).await;
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::ContextLengthExceeded));
    let (status, _, body) = ask(&h, "short").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "context_length_exceeded", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("maximum context length is 128000 tokens"), "{message}");

    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::ContextLengthExceeded));
    let (status, _, body) = json_parts(h.anthropic("short", false).send().await.unwrap()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["type"], "error", "the Anthropic error shape: {body}");
    assert_eq!(body["error"]["type"], "context_length_exceeded", "{body}");

    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-1"]);
    assert_eq!(h.mock.attempt_count("claude-small"), 0);
    assert_eq!(h.app.snapshot().credentials, []);
}

/// Windows nobody wrote down (RESILIENCE.md §2): a target whose window is not known is tried
/// after a `context_length_exceeded`, but never the same model on another provider.
const UNKNOWN_WINDOWS: &str = r#"
[[providers]]
id = "oa2"
kind = "openai"
base_url = "{mock}/v1"
models = ["gpt-4o"]

[[combos]]
name = "unknown"
targets = [{ target = "oa/gpt-4o" }, { target = "oa2/gpt-4o" }, { target = "an/claude-x" }]

[[combos]]
name = "known-small"
targets = [
  { target = "oa/gpt-4o", context_window = 128000 },
  { target = "an/claude-small", context_window = 100000 },
  { target = "ge/gemini-unknown" },
]
"#;

#[tokio::test]
async fn a_context_length_error_falls_back_to_another_model_whose_window_is_not_known() {
    let h = Harness::start(UNKNOWN_WINDOWS).await;
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::ContextLengthExceeded));
    let (status, headers, body) = ask(&h, "unknown").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-x");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1"], "never the same model elsewhere (oa2)");

    // The failed target's window is known: a smaller one is skipped, an unknown one tried.
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::ContextLengthExceeded));
    let (status, headers, body) = ask(&h, "known-small").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "ge/gemini-unknown");
    assert_eq!(h.mock.attempt_count("claude-small"), 0, "known to be smaller");
    let logged = h.newest_logged().await;
    assert!(logged["trace"].to_string().contains("context_window_too_small"), "{logged}");
}

/// One content-policy refusal from `target`'s upstream, with a fallback configured behind it:
/// the refusal comes back to the client with the provider's own words and nothing falls back.
async fn content_policy_is_passed_through(target: &str, model: &str, reason: &str) {
    let h = Harness::start(&format!(
        r#"
[[combos]]
name = "careful"
targets = [{{ target = "{target}" }}, {{ target = "oa/gpt-4o-mini" }}]
"#
    ))
    .await;
    for anthropic_client in [false, true] {
        h.mock.enqueue(model, Behavior::error(ErrorKind::ContentPolicy));
        let request = if anthropic_client {
            h.anthropic("careful", false)
        } else {
            h.openai("careful", false)
        };
        let (status, _, body) = json_parts(request.send().await.unwrap()).await;
        assert_eq!(status, 400, "{target}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{target}: the provider's reason is kept: {body}");
        assert_eq!(body["error"]["type"], "content_policy_violation", "{target}: {body}");
    }
    assert_eq!(h.mock.attempt_count("gpt-4o-mini"), 0, "{target}: a refusal does not fall back");
    assert_eq!(h.mock.attempt_count(model), 2, "{target}: nor is it retried");
    let snapshot = h.app.snapshot();
    assert_eq!(
        (snapshot.breakers.len(), snapshot.credentials.len(), snapshot.lockouts.len()),
        (0, 0, 0),
        "{target}: a refusal charges nobody"
    );
}

#[tokio::test]
async fn an_openai_content_policy_refusal_is_returned_with_its_reason_and_does_not_fall_back() {
    content_policy_is_passed_through("oa/gpt-4o", "gpt-4o", "our safety system").await;
}

#[tokio::test]
async fn a_gemini_content_policy_refusal_is_returned_with_its_reason_and_does_not_fall_back() {
    content_policy_is_passed_through("ge/gemini-x", "gemini-x", "violates the content policy")
        .await;
}

#[tokio::test]
async fn a_content_policy_refusal_falls_back_when_the_config_allows_it() {
    let h = Harness::start(
        r#"
[settings.routing]
fallback_on_policy = true

[[combos]]
name = "careful"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-fallback" }]
"#,
    )
    .await;
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::ContentPolicy));
    let (status, headers, body) = ask(&h, "careful").await;
    assert_eq!(status, 200, "the refusal was not returned: {body}");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1", "oa-2"], "the next candidate served");
}

#[tokio::test]
async fn an_anthropic_content_policy_refusal_is_returned_with_its_reason_and_does_not_fall_back() {
    content_policy_is_passed_through("an/claude-x", "claude-x", "content filtering policy").await;
}

#[tokio::test]
async fn other_client_errors_are_returned_as_is_without_fallback_or_charge() {
    let h = Harness::start(FALLBACK).await;
    for code in [400, 413, 415, 422] {
        h.mock.enqueue("gpt-4o", Status::new(code).message(format!("scripted {code}")));
        let (status, _, body) = ask(&h, "smart").await;
        assert_eq!(status, code, "{body}");
        assert_eq!(body["error"]["message"], format!("scripted {code}"), "{body}");

        h.mock.enqueue("gpt-4o", Status::new(code).message(format!("scripted {code}")));
        let (status, _, body) = json_parts(h.anthropic("smart", false).send().await.unwrap()).await;
        assert_eq!(status, code, "{body}");
        assert_eq!(body["error"]["message"], format!("scripted {code}"), "{body}");
    }
    assert_eq!(keys(&h, "gpt-4o"), ["oa-1"; 8], "never retried, never another key");
    assert_eq!(h.mock.attempt_count("claude-fallback"), 0, "never a fallback");
    let snapshot = h.app.snapshot();
    assert_eq!(
        (snapshot.breakers.len(), snapshot.credentials.len(), snapshot.lockouts.len()),
        (0, 0, 0),
        "the request itself was wrong: nobody is benched"
    );
}

#[tokio::test]
async fn a_stream_broken_after_bytes_ends_with_an_error_event_in_each_client_dialect() {
    // The fallback has no continuation mechanism (Gemini): a break cannot be rescued
    // (RESILIENCE.md §10; `continuation.rs` covers fallbacks that can continue).
    let h = Harness::start(
        "[[combos]]\nname = \"smart\"\ntargets = [{ target = \"oa/gpt-4o\" }, { target = \"ge/gemini-fallback\" }]\n",
    )
    .await;
    h.mock.script("gpt-4o", [Behavior::cut_after(3), Behavior::cut_after(3)]);

    // Two conversations: a retry of one that broke would start on the fallback (§11).
    let send = |client: Client| client.send(&h, "smart", &client.fresh_conversation()).send();
    let text = send(Client::Chat).await.unwrap().text().await.unwrap();
    assert!(!text.contains("[DONE]"), "{text}");
    let last = sse_data(&text).pop().expect("events");
    assert!(last["error"]["message"].is_string(), "the last event is the error: {text}");

    let text = send(Client::Anthropic).await.unwrap().text().await.unwrap();
    assert!(!text.contains("message_stop"), "{text}");
    assert!(text.trim_end().rsplit("\n\n").next().unwrap().starts_with("event: error"), "{text}");

    assert_eq!(h.mock.attempt_count("gemini-fallback"), 0, "bytes were sent: no fallback");
    let oa = h.app.breaker("oa").expect("charged");
    assert_eq!((oa.failures, oa.last_fault), (2, Some(BreakerFault::StreamBroken)));
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_after_the_probe_answered_charges_nothing() {
    let clock = ManualClock::new(T0);
    let setup = Setup::new("").clock(&clock).breaker("{ failure_threshold = 1 }");
    let h = Harness::start_with(setup).await;
    // Open oa's breaker, then let its cooldown pass: the next request is the half-open probe.
    h.mock.enqueue("gpt-4o", Status::new(500));
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 503);
    assert_eq!(h.app.breaker("oa").map(|b| b.state), Some(BreakerState::Open));
    clock.advance(Duration::from_secs(30));

    // A long, slow answer; the client reads the first bytes and hangs up.
    let slow = Reply::text("z".repeat(100)).chunks(100).chunk_gap(Duration::from_millis(50));
    h.mock.enqueue("gpt-4o", slow);
    let mut response = h.openai("oa/gpt-4o", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().expect("a first chunk");
    assert!(!first.is_empty());
    // The probe settled at its first real event (RESILIENCE.md §7): the provider answers again,
    // so the breaker closed (and a closed, healthy breaker is not tracked).
    assert_eq!(h.app.breaker("oa"), None, "closed at the probe's first real event");
    drop(response);
    // The proxy lets go of the upstream only after settling the attempt.
    timeout(WATCHDOG, h.mock.wait_for_in_flight(0)).await.expect("the upstream is let go");
    assert_eq!(h.app.breaker("oa"), None, "a client that leaves is nobody's failure");
    let (status, _, body) = ask(&h, "oa/gpt-4o").await;
    assert_eq!(status, 200, "{body}");
}
