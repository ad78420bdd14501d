//! The resilience layers over time, end to end (RESILIENCE.md §3–§6): rate limits that bench
//! one key or one model until the upstream's time, a flapping provider whose breaker opens and
//! closes again, a silent upstream, and state that survives a restart.
//!
//! Cooldowns are stepped over with a [`ManualClock`]; only request deadlines run on real time.

use std::time::Duration;

use switchyard_core::ManualClock;
use switchyard_core::outcome::{BreakerFault, OutcomeKind};
use switchyard_core::resilience::{BreakerState, CredentialStatus};
use switchyard_e2e::harness::{
    FALLBACK, Harness, Setup, T0, WATCHDOG, ask, header, is_probe, json_parts, keys_of,
    user_requests,
};
use switchyard_testkit::{Behavior, ErrorKind, MockUpstream, Reply, Status};
use tokio::time::{Instant, timeout};

/// Which target served each of `n` requests for `model`.
async fn served_by(h: &Harness, model: &str, n: usize) -> Vec<String> {
    let mut served = Vec::with_capacity(n);
    for _ in 0..n {
        let (status, headers, body) = ask(h, model).await;
        assert_eq!(status, 200, "{body}");
        served.push(header(&headers, "x-switchyard-target").to_owned());
    }
    served
}

#[tokio::test]
async fn a_429_on_one_model_locks_only_that_model_on_that_key_for_the_retry_after_time() {
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock("", &clock).await;
    h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(20)));
    let response = h.anthropic("oa/gpt-4o", false).send().await.unwrap();
    let (status, _, body) = json_parts(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.app.locked(), ["oa/gpt-4o@oa-1"]);
    let lock = h.app.lockout("oa", "oa-1", "gpt-4o").unwrap();
    assert_eq!(lock.reason.map(|r| (r.kind, r.status)), Some((OutcomeKind::RateLimit, Some(429))));
    assert_eq!(lock.remaining_ms, 20_000);
    assert_eq!(h.app.snapshot().credentials, [], "the key itself is not benched");

    // The other model keeps its first key; this model keeps its second.
    assert_eq!(served_by(&h, "oa/gpt-4o-mini", 1).await, ["oa/gpt-4o-mini"]);
    assert_eq!(keys_of(&h.mock.attempts_for("gpt-4o-mini")), ["oa-1"]);
    h.mock.clear();
    clock.advance(Duration::from_secs(19));
    served_by(&h, "oa/gpt-4o", 2).await;
    assert_eq!(keys_of(&h.mock.attempts_for("gpt-4o")), ["oa-2", "oa-2"]);
    // The lock has run out: the request stays on the second key while a one-token probe asks
    // the first; its answer gives the first key its place back.
    clock.advance(Duration::from_secs(1));
    served_by(&h, "oa/gpt-4o", 1).await;
    h.app.probes_settled().await;
    served_by(&h, "oa/gpt-4o", 1).await;
    let attempts = h.mock.attempts_for("gpt-4o");
    let seen: Vec<(String, bool)> =
        attempts.iter().map(|a| (a.api_key().unwrap().to_owned(), is_probe(a))).collect();
    let key = |k: &str, probe| (k.to_owned(), probe);
    assert_eq!(
        seen,
        [
            key("oa-2", false),
            key("oa-2", false),
            key("oa-2", false),
            key("oa-1", true),
            key("oa-1", false)
        ]
    );
}

/// With a fallback, a primary whose request failed twice in a row (the attempt and its retry)
/// is suspect and gets no more users (RESILIENCE.md §3), so its breaker opens from users only
/// when its threshold is that low: then the fallback serves while it is open, and the half-open
/// probe, the proxy's own, brings the traffic back.
#[tokio::test]
async fn a_failing_primary_opens_its_breaker_the_fallback_serves_and_a_probe_brings_traffic_back() {
    let clock = ManualClock::new(T0);
    let setup = Setup::new(FALLBACK)
        .clock(&clock)
        .breaker("{ failure_threshold = 2, degraded_threshold = 2 }");
    let h = Harness::start_with(setup).await;
    let bad = || Behavior::status(502);
    h.mock.script("gpt-4o", [bad(), bad()]);
    assert_eq!(served_by(&h, "smart", 1).await, ["an/claude-fallback"]);
    let oa = h.app.breaker("oa").expect("tracked");
    assert_eq!((oa.state, oa.last_fault), (BreakerState::Open, Some(BreakerFault::Transient)));
    assert_eq!(oa.retry_in_ms, 30_000);
    assert_eq!(h.mock.attempt_count("gpt-4o"), 2, "the attempt and its retry");

    // Open: the fallback serves and the primary is not touched at all, up to the last moment.
    h.mock.clear();
    assert_eq!(served_by(&h, "smart", 3).await, ["an/claude-fallback"; 3]);
    clock.advance(Duration::from_millis(29_999));
    assert_eq!(served_by(&h, "smart", 1).await, ["an/claude-fallback"]);
    assert_eq!(h.mock.attempt_count("gpt-4o"), 0, "an open breaker sends nothing upstream");

    // The cooldown is over: the next request still goes to the fallback, and the proxy probes
    // the primary alongside; the probe succeeds and closes the breaker.
    clock.advance(Duration::from_millis(1));
    assert_eq!(h.app.breaker("oa").map(|b| b.state), Some(BreakerState::HalfOpen));
    assert_eq!(served_by(&h, "smart", 1).await, ["an/claude-fallback"]);
    h.app.probes_settled().await;
    let probes = h.mock.attempts_for("gpt-4o");
    assert_eq!((probes.len(), probes.iter().all(is_probe)), (1, true), "one probe, no user");
    assert_eq!(probes[0].body["max_tokens"], 1, "{}", probes[0].body);
    assert_eq!(h.app.breaker("oa"), None, "closed with counters reset: nothing left to track");
    assert_eq!(served_by(&h, "smart", 3).await, ["oa/gpt-4o"; 3]);
    assert_eq!(h.mock.attempt_count("gpt-4o"), 4);
}

/// RESILIENCE.md §3: the failure count leaks with time too. A suspect primary that may not be
/// probed (`probe = false`) ranks last, so in a priority combo with a healthy fallback it gets
/// no users and no successes to leak its failures away; its count halves every
/// `reset_timeout` (30 s) since its last failure instead, and once it is spent the primary
/// leads again: 2 failures become 1 after one period and none after two.
#[tokio::test]
async fn a_suspect_primary_without_probes_leads_again_after_its_failures_decay() {
    const DECAY: &str = r#"
[[providers]]
id = "dp"
kind = "anthropic"
base_url = "{mock}"
models = [{ id = "decaying", probe = false }]
credentials = [{ id = "dp-1", secret = "env:AN_1" }]

[[combos]]
name = "decay"
targets = [{ target = "dp/decaying" }, { target = "an/claude-fallback" }]
"#;
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(DECAY, &clock).await;
    // One request fails, its retry too: two failures in a row, suspect, not degraded.
    h.mock.script("decaying", [502, 502].map(Behavior::status));
    assert_eq!(served_by(&h, "decay", 2).await, ["an/claude-fallback"; 2]);
    let dp = h.app.breaker("dp").expect("tracked");
    assert_eq!((dp.state, dp.failures), (BreakerState::Closed, 2));
    assert_eq!(h.mock.attempt_count("decaying"), 2, "the second request went elsewhere");

    clock.advance(Duration::from_secs(30));
    assert_eq!(h.app.breaker("dp").map(|b| b.failures), Some(1));
    assert_eq!(served_by(&h, "decay", 1).await, ["an/claude-fallback"], "still seen failing");
    clock.advance(Duration::from_secs(30));
    assert_eq!(h.app.breaker("dp"), None, "its count is spent");
    assert_eq!(served_by(&h, "decay", 2).await, ["dp/decaying"; 2]);
    assert!(h.mock.attempts_for("decaying").iter().all(|a| !is_probe(a)));
}

#[tokio::test]
async fn a_failed_probe_reopens_the_breaker_for_twice_as_long() {
    let clock = ManualClock::new(T0);
    let setup = Setup::new(FALLBACK).clock(&clock).breaker("{ failure_threshold = 1 }");
    let h = Harness::start_with(setup).await;
    h.mock.script("gpt-4o", [Behavior::status(500), Behavior::status(500)]);
    assert_eq!(served_by(&h, "smart", 1).await, ["an/claude-fallback"]);
    assert_eq!(h.app.breaker("oa").map(|b| b.retry_in_ms), Some(30_000));
    clock.advance(Duration::from_secs(30));
    // The probe (the proxy's own, the user's request going to the fallback) fails: open again,
    // with the doubled cooldown.
    assert_eq!(served_by(&h, "smart", 1).await, ["an/claude-fallback"]);
    h.app.probes_settled().await;
    assert_eq!(user_requests(&h.mock.attempts_for("gpt-4o")).len(), 1, "only the first");
    let oa = h.app.breaker("oa").unwrap();
    assert_eq!((oa.state, oa.reopens, oa.retry_in_ms), (BreakerState::Open, 1, 60_000));
    assert_eq!(h.mock.attempt_count("gpt-4o"), 2, "one attempt each time, no retry while open");
}

#[tokio::test]
async fn a_silent_upstream_with_nobody_to_fall_back_to_ends_within_the_first_byte_deadline() {
    let setup = Setup::new("").timeouts(|t| {
        t.first_event_ms = 200;
        t.first_byte_ms = 600;
    });
    let h = Harness::start_with(setup).await;
    h.mock.set_default("claude-x", Behavior::hang());
    for anthropic_client in [false, true] {
        let started = Instant::now();
        let request = if anthropic_client {
            h.anthropic("an/claude-x", true)
        } else {
            h.openai("an/claude-x", true)
        };
        let (status, _, body) = json_parts(request.send().await.unwrap()).await;
        let took = started.elapsed();
        assert_eq!(status, 503, "{body}");
        assert!(took >= Duration::from_millis(600), "{took:?}");
        assert!(took < Duration::from_millis(2600), "{took:?}");
        let candidates = body["error"]["switchyard"]["candidates"].as_array().unwrap();
        assert_eq!(candidates[0]["outcome"], "timeout", "{body}");
        if anthropic_client {
            assert_eq!(body["type"], "error", "{body}");
        }
    }
    timeout(WATCHDOG, h.mock.wait_for_in_flight(0)).await.expect("every hung request let go");
}

#[tokio::test]
async fn a_restart_keeps_breaker_cooldown_and_lockout_state() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let setup = || Setup::new("").clock(&clock).breaker("{ failure_threshold = 1 }");
    let h = Harness::start_in_with(MockUpstream::start().await, dir.path(), setup()).await;

    // Gemini's breaker opens, Anthropic's only key runs out of credit, OpenAI's first key
    // loses gpt-4o.
    h.mock.enqueue("gemini-x", Status::new(500));
    assert_eq!(ask(&h, "ge/gemini-x").await.0, 503);
    h.mock.enqueue("claude-x", Behavior::error(ErrorKind::InsufficientQuota));
    assert_eq!(ask(&h, "an/claude-x").await.0, 503);
    h.mock.enqueue("gpt-4o", Status::new(404).retry_after(Duration::from_secs(300)));
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
    let before = h.app.snapshot();
    assert_eq!(
        (before.breakers.len(), before.credentials.len(), before.lockouts.len()),
        (1, 1, 1),
        "{before:?}"
    );

    let mock = h.stop().await;
    mock.clear();
    clock.advance(Duration::from_secs(5));
    let h = Harness::start_in_with(mock, dir.path(), setup()).await;

    let ge = h.app.breaker("ge").expect("the open breaker survived");
    assert_eq!((ge.state, ge.retry_in_ms), (BreakerState::Open, 25_000));
    let an = h.app.credential("an", "an-1").expect("the cooldown survived");
    assert_eq!((an.status, an.retry_in_ms), (CredentialStatus::QuotaExhausted, Some(3_595_000)));
    let lock = h.app.lockout("oa", "oa-1", "gpt-4o").expect("the lockout survived");
    assert_eq!(lock.remaining_ms, 295_000);

    // And they are enforced: nothing reaches the benched candidates.
    assert_eq!(ask(&h, "ge/gemini-x").await.0, 503);
    assert_eq!(ask(&h, "an/claude-x").await.0, 503);
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 200);
    assert_eq!(keys_of(&h.mock.attempts()), ["oa-2"]);
}

/// Issue 15's acceptance: a primary that answers 503 and then recovers. While it fails, no
/// user request is spent on it after the first: each time its lock lapses the request goes to
/// the fallback and a one-token probe goes to the primary. The first probe that finds it
/// healthy gives it its traffic back: the next user request goes to it, within 2 s (real time)
/// of that probe.
#[tokio::test]
async fn a_primary_that_recovers_gets_users_back_right_after_the_first_healthy_probe() {
    const HEAL: &str = r#"
[[combos]]
name = "heal"
targets = [{ target = "an/claude-primary" }, { target = "oa/gpt-4o-mini" }]
"#;
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(HEAL, &clock).await;
    h.mock.set_default("claude-primary", Behavior::status(503));

    // The first failure is a user's: nothing knew yet. 503 locks the model for 10 s.
    assert_eq!(served_by(&h, "heal", 3).await, ["oa/gpt-4o-mini"; 3]);
    assert_eq!(h.mock.attempt_count("claude-primary"), 1);
    // Each lapse: the user goes to the fallback, a probe to the primary, which fails and is
    // locked again for twice as long (10 s, 20 s, 40 s, then the 1 min cap).
    let mut lapse = Duration::from_secs(10);
    for round in 1..=4 {
        clock.advance(lapse);
        assert_eq!(served_by(&h, "heal", 1).await, ["oa/gpt-4o-mini"], "round {round}");
        h.app.probes_settled().await;
        assert_eq!(served_by(&h, "heal", 2).await, ["oa/gpt-4o-mini"; 2], "round {round}");
        let primary = h.mock.attempts_for("claude-primary");
        assert_eq!(user_requests(&primary).len(), 1, "round {round}: a user request hit it");
        assert_eq!(primary.len(), 1 + round, "round {round}: one probe per lapse");
        // Doubling, up to `max_cooldown_ms` (1 min by default).
        lapse = (lapse * 2).min(Duration::from_secs(60));
        let lock = h.app.lockout("an", "an-1", "claude-primary").expect("locked again");
        assert_eq!(lock.remaining_ms, u64::try_from(lapse.as_millis()).unwrap());
    }
    let probe = h.mock.attempts_for("claude-primary").pop().unwrap();
    assert!(is_probe(&probe));
    assert_eq!((probe.body["max_tokens"].as_u64(), probe.stream), (Some(1), false));
    assert!(!probe.body.to_string().contains("hi"), "never the user's prompt: {}", probe.body);

    // It heals. At the next lapse the probe finds it healthy and the bench is cleared.
    h.mock.set_default("claude-primary", Reply::default());
    clock.advance(lapse);
    assert_eq!(served_by(&h, "heal", 1).await, ["oa/gpt-4o-mini"]);
    h.app.probes_settled().await;
    assert_eq!(h.app.lockout("an", "an-1", "claude-primary").map(|l| l.remaining_ms), None);
    let (status, health) = h.api_get("/api/monitoring/health").await;
    assert_eq!(status, 200);
    let last = &health["probes"][0]["last"];
    assert_eq!(
        (last["healed"].as_bool(), last["status"].as_u64()),
        (Some(true), Some(200)),
        "{health}"
    );
    assert_eq!(served_by(&h, "heal", 3).await, ["an/claude-primary"; 3]);
    let primary = h.mock.attempts_for("claude-primary");
    let healthy_probe = primary.iter().rev().find(|a| is_probe(a)).unwrap();
    let back = primary.iter().find(|a| !is_probe(a) && a.seq > healthy_probe.seq).unwrap();
    let took = back.at.duration_since(healthy_probe.at);
    assert!(took < Duration::from_secs(2), "users came back {took:?} after the healthy probe");

    // The request that triggered the probe says so in its trace.
    let (_, log) = h.api_get("/api/requests").await;
    let probed = |entry: &serde_json::Value| {
        entry["event"] == "probe"
            && entry["bench"] == "model_lock_lapsed"
            && entry["target"] == "an/claude-primary"
    };
    let triggered = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["trace"].as_array().is_some_and(|t| t.iter().any(probed)));
    assert_eq!(triggered.count(), 5, "one per lapse: {log}");
}

/// `probe = false` on a model billed per request: no probes, it gets a user's request when its
/// lock lapses, as before.
#[tokio::test]
async fn a_model_marked_probe_false_gets_no_probe_and_is_tried_by_a_user_request_again() {
    const NO_PROBE: &str = r#"
[[providers]]
id = "pr"
kind = "anthropic"
base_url = "{mock}"
models = [{ id = "per-request", probe = false }]
credentials = [{ id = "pr-1", secret = "env:AN_1" }]

[[combos]]
name = "paid"
targets = [{ target = "pr/per-request" }, { target = "oa/gpt-4o-mini" }]
"#;
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(NO_PROBE, &clock).await;
    h.mock.enqueue("per-request", Status::new(503));
    assert_eq!(served_by(&h, "paid", 2).await, ["oa/gpt-4o-mini"; 2]);
    clock.advance(Duration::from_secs(10));
    assert_eq!(served_by(&h, "paid", 1).await, ["pr/per-request"]);
    assert!(h.mock.attempts_for("per-request").iter().all(|a| !is_probe(a)));
}

/// Issue 25's acceptance (RESILIENCE.md §3, "back within seconds of healing"): a primary
/// answers `failing` for 12 s and then heals, with one user request every 1.5 s (the manual
/// clock paces them; the mock heals when the clock says so) and default lock and breaker
/// settings. Every request is served; no user request reaches the primary after the first
/// failed one (whose same-target retry is the same request); once the first wait has run out
/// the primary is probed at least every 5 s; and users are back on it within 5 s of healing.
async fn users_are_back_within_5_s_of_healing(failing: Behavior) {
    const HEAL: &str = r#"
[[combos]]
name = "heal"
targets = [{ target = "an/claude-primary" }, { target = "oa/gpt-4o-mini" }]
"#;
    const PACE: Duration = Duration::from_millis(1500);
    const OUTAGE: Duration = Duration::from_secs(12);
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(HEAL, &clock).await;
    h.mock.set_default("claude-primary", failing);
    let mut elapsed = Duration::ZERO;
    let mut first_users = None;
    let mut probed_at: Vec<Duration> = Vec::new();
    let mut back = None;
    while elapsed < OUTAGE + Duration::from_secs(12) {
        if elapsed >= OUTAGE && back.is_none() {
            h.mock.set_default("claude-primary", Reply::default());
        }
        let (status, headers, body) = ask(&h, "heal").await;
        assert_eq!(status, 200, "at {elapsed:?}: {body}");
        let target = header(&headers, "x-switchyard-target").to_owned();
        h.app.probes_settled().await;
        let primary = h.mock.attempts_for("claude-primary");
        let users = user_requests(&primary).len();
        let probes = primary.len() - users;
        if probes > probed_at.len() {
            assert_eq!(probes, probed_at.len() + 1, "one probe at a time, at {elapsed:?}");
            probed_at.push(elapsed);
        }
        match (first_users, elapsed < OUTAGE) {
            (None, _) => {
                assert_eq!(target, "oa/gpt-4o-mini", "the first failure is a user's");
                first_users = Some(users);
            }
            (Some(first), true) => {
                assert_eq!(target, "oa/gpt-4o-mini", "at {elapsed:?}");
                assert_eq!(
                    users, first,
                    "a user request reached the failing primary at {elapsed:?}"
                );
            }
            (Some(_), false) if target == "an/claude-primary" => {
                back.get_or_insert(elapsed);
            }
            (Some(_), false) => {
                assert!(back.is_none(), "users left the healed primary again at {elapsed:?}");
            }
        }
        clock.advance(PACE);
        elapsed += PACE;
    }
    let back = back.expect("users came back to the healed primary").saturating_sub(OUTAGE);
    assert!(back <= Duration::from_secs(5), "users back {back:?} after healing");
    assert!(!probed_at.is_empty(), "the failing primary was probed");
    for pair in probed_at.windows(2) {
        let gap = pair[1].saturating_sub(pair[0]);
        assert!(gap <= Duration::from_secs(5), "probes at {probed_at:?}");
    }
    for probe in h.mock.attempts_for("claude-primary").iter().filter(|a| is_probe(a)) {
        assert_eq!(probe.body["max_tokens"], 1, "{}", probe.body);
    }
}

/// The lockout's path: 503 locks the model (10 s, then 20 s by the proxy's own backoff, which
/// probes go through).
#[tokio::test]
async fn a_primary_answering_503_for_12_s_has_its_users_back_within_5_s_of_healing() {
    users_are_back_within_5_s_of_healing(Behavior::status(503)).await;
}

/// The breaker's path: 500 charges only the breaker; the request and its retry failing in a row
/// make the provider suspect, and its probes' failures hold its count without opening it.
#[tokio::test]
async fn a_primary_answering_500_for_12_s_has_its_users_back_within_5_s_of_healing() {
    users_are_back_within_5_s_of_healing(Behavior::status(500)).await;
}

/// Issue 25, defect 2: a non-streamed half-open probe may take `non_stream_ms` (10 min). Its
/// slot lasted `probe_timeout` (2 min): past that another request became the probe, and the
/// slow probe's success was ignored. The slot now lasts as long as the request it rides on
/// may, so nobody else is let through meanwhile and the late success closes the breaker.
#[tokio::test]
async fn a_non_streamed_half_open_probe_slower_than_probe_timeout_still_closes_the_breaker() {
    let clock = ManualClock::new(T0);
    // The defaults a non-streamed answer runs on: 10 minutes for it, and for the request.
    let setup = Setup::new("").clock(&clock).breaker("{ failure_threshold = 1 }").timeouts(|t| {
        t.non_stream_ms = 600_000;
        t.total_ms = 600_000;
    });
    let h = Harness::start_with(setup).await;
    h.mock.enqueue("gpt-4o", Status::new(500));
    assert_eq!(ask(&h, "oa/gpt-4o").await.0, 503);
    assert_eq!(h.app.breaker("oa").map(|b| b.state), Some(BreakerState::Open));
    clock.advance(Duration::from_secs(30));

    // Half-open, and nobody else to serve: this user's request is the probe. Its answer is
    // slow; while it is on its way the app's clock passes `probe_timeout`.
    h.mock.enqueue("gpt-4o", Reply::default().first_event_after(Duration::from_millis(1500)));
    let meanwhile = async {
        h.mock.wait_for_attempts(2).await;
        clock.advance(Duration::from_secs(180));
        let (status, _, body) = ask(&h, "oa/gpt-4o").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.to_string().contains("breaker_probing"), "{body}");
    };
    let ((status, _, body), ()) = tokio::join!(ask(&h, "oa/gpt-4o"), meanwhile);
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.mock.attempt_count("gpt-4o"), 2, "nobody else went upstream meanwhile");
    assert_eq!(h.app.breaker("oa"), None, "closed by the late success, counters reset");
}
