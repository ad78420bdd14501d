//! The health registry through its public API: the three layers together, events, the memory
//! bound, and manual control.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use switchyard_core::outcome::{
    BodyHint, ClassifyPolicy, Outcome, StreamFault, Upstream, classify,
};
use switchyard_core::resilience::registry::{RegistryLimits, ResetScope};
use switchyard_core::resilience::{
    BreakerState, CredentialStatus, HealthEvent, HealthRegistry, SkipReason,
};
use switchyard_core::settings::LockoutSettings;
use switchyard_core::{CandidateKey, UnixMillis, Verdict};

const T0: UnixMillis = UnixMillis(1_700_000_000_000);
const SEC: Duration = Duration::from_secs(1);

fn status(code: u16) -> Verdict {
    status_with(code, &HeaderMap::new(), &ClassifyPolicy::default())
}

fn status_with(code: u16, headers: &HeaderMap, policy: &ClassifyPolicy) -> Verdict {
    let upstream = Upstream::Response { status: code, headers, body: BodyHint::None };
    classify(&Outcome::new(upstream), policy, T0)
}

fn retry_after(code: u16, secs: u64) -> Verdict {
    with_header(code, "retry-after", &secs.to_string())
}

fn with_header(code: u16, name: &'static str, value: &str) -> Verdict {
    let mut headers = HeaderMap::new();
    headers.insert(name, value.parse().unwrap());
    status_with(code, &headers, &ClassifyPolicy::default())
}

fn key(provider: &str, credential: &str, model: &str) -> CandidateKey {
    CandidateKey::new(provider, credential, model)
}

/// Admits and settles one attempt at `key`.
fn attempt(r: &Arc<HealthRegistry>, key: &CandidateKey, verdict: &Verdict, now: UnixMillis) {
    r.admit(key, now).expect("admitted").finish(verdict, now);
}

fn drain(rx: &mut tokio::sync::broadcast::Receiver<HealthEvent>) -> Vec<HealthEvent> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[test]
fn lockout_of_one_model_leaves_the_other_model_and_the_other_key_eligible() {
    let r = Arc::new(HealthRegistry::default());
    let a_4o = key("openai", "key-a", "gpt-4o");
    attempt(&r, &a_4o, &status(404), T0);

    assert_eq!(
        r.eligible(&a_4o, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 10_000, rate_limited: false })
    );
    assert_eq!(r.eligible(&key("openai", "key-a", "gpt-4o-mini"), T0), Ok(()));
    assert_eq!(r.eligible(&key("openai", "key-b", "gpt-4o"), T0), Ok(()));
    assert_eq!(r.eligible(&a_4o, T0.plus(10 * SEC)), Ok(()));
}

#[test]
fn rate_limit_locks_only_the_model_with_default_settings() {
    let r = Arc::new(HealthRegistry::default());
    attempt(&r, &key("openai", "a", "gpt-4o"), &retry_after(429, 20), T0);
    assert_eq!(
        r.eligible(&key("openai", "a", "gpt-4o"), T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 20_000, rate_limited: true })
    );
    assert_eq!(r.eligible(&key("openai", "a", "gpt-4o-mini"), T0), Ok(()));
}

#[test]
fn rate_limit_cools_the_whole_key_when_429_is_not_a_lockout_code() {
    let r = Arc::new(HealthRegistry::default());
    let settings = LockoutSettings { error_codes: vec![404, 503], ..LockoutSettings::default() };
    r.set_lockout_policy(settings.validate().unwrap());
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", "7".parse().unwrap());
    let verdict = status_with(429, &headers, &r.classify_policy());
    attempt(&r, &key("openai", "a", "gpt-4o"), &verdict, T0);

    let cooling = Err(SkipReason::CredentialCooling { retry_in_ms: 7_000 });
    assert_eq!(r.eligible(&key("openai", "a", "gpt-4o"), T0), cooling);
    assert_eq!(r.eligible(&key("openai", "a", "gpt-4o-mini"), T0), cooling);
    assert_eq!(r.eligible(&key("openai", "b", "gpt-4o"), T0), Ok(()));
}

#[test]
fn skip_reasons_name_the_outermost_layer_first() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("anthropic", "a", "claude");
    attempt(&r, &k, &status(404), T0);
    attempt(&r, &key("anthropic", "a", "other"), &status(401), T0);
    assert_eq!(r.eligible(&k, T0), Err(SkipReason::CredentialInvalid));
    for _ in 0..5 {
        attempt(&r, &key("anthropic", "b", "x"), &status(502), T0);
    }
    assert!(matches!(r.eligible(&k, T0), Err(SkipReason::BreakerOpen { .. })));
}

#[test]
fn dropping_a_probe_attempt_releases_its_slot() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("groq", "a", "llama");
    for _ in 0..5 {
        attempt(&r, &k, &status(502), T0);
    }
    let half_open_at = T0.plus(30 * SEC);
    assert_eq!(r.breaker_state(&k.provider, half_open_at), BreakerState::HalfOpen);

    let probe = r.admit(&k, half_open_at).unwrap();
    assert!(probe.is_probe());
    assert!(matches!(r.admit(&k, half_open_at), Err(SkipReason::BreakerProbing { .. })));
    drop(probe);
    let probe = r.admit(&k, half_open_at).expect("slot was released on drop");
    probe.finish(&status(200), half_open_at);
    assert_eq!(r.breaker_state(&k.provider, half_open_at), BreakerState::Closed);
}

/// Issue 25, defect 2: a non-streamed half-open probe may take `non_stream_ms` (10 min). Its
/// slot used to last `probe_timeout` (2 min): its success came too late to close the breaker,
/// and another request became the probe every 2 minutes meanwhile.
#[test]
fn a_half_open_attempt_keeps_its_slot_for_its_own_deadline_and_its_late_success_closes() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("groq", "a", "llama");
    for _ in 0..5 {
        attempt(&r, &k, &status(502), T0);
    }
    let half_open_at = T0.plus(30 * SEC);
    let non_stream = Duration::from_secs(600);
    let probe = r.admit_until(&k, half_open_at, half_open_at.plus(non_stream)).unwrap();
    assert!(probe.is_probe());
    let later = half_open_at.plus(Duration::from_secs(180));
    assert!(
        matches!(r.admit(&k, later), Err(SkipReason::BreakerProbing { retry_in_ms: 420_000 })),
        "3 min on, past probe_timeout, the slot is still the slow probe's"
    );
    probe.finish(&status(200), later);
    assert_eq!(r.breaker_state(&k.provider, later), BreakerState::Closed);
}

#[test]
fn a_probe_settles_at_its_first_answer_and_a_later_break_is_still_charged() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("groq", "a", "llama");
    for _ in 0..5 {
        attempt(&r, &k, &status(502), T0);
    }
    let half_open_at = T0.plus(30 * SEC);
    let mut probe = r.admit(&k, half_open_at).unwrap();
    assert!(probe.is_probe());
    probe.answered(&status(200), half_open_at.plus(SEC));
    assert_eq!(
        r.breaker_state(&k.provider, half_open_at.plus(SEC)),
        BreakerState::Closed,
        "the first real event closes the breaker, not the end of a long stream"
    );
    assert!(r.admit(&k, half_open_at.plus(SEC)).is_ok(), "others are admitted at once");
    let cut = Outcome {
        upstream: Upstream::Stream(StreamFault::Cut),
        bytes_sent: true,
        client_aborted: false,
    };
    let broken = classify(&cut, &ClassifyPolicy::default(), half_open_at.plus(90 * SEC));
    probe.finish(&broken, half_open_at.plus(90 * SEC));
    let view = r.snapshot(half_open_at.plus(90 * SEC));
    let breaker = view.breakers.iter().find(|b| b.provider == k.provider).unwrap();
    assert_eq!(breaker.failures, 1, "the break after the answer is charged like any other");
}

#[test]
fn probe_dropped_by_a_panicking_task_releases_its_slot() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("groq", "a", "llama");
    for _ in 0..5 {
        attempt(&r, &k, &status(502), T0);
    }
    let at = T0.plus(30 * SEC);
    let r2 = Arc::clone(&r);
    let k2 = k.clone();
    let panicked = std::thread::spawn(move || {
        let _probe = r2.admit(&k2, at).unwrap();
        panic!("handler crashed mid-attempt");
    })
    .join();
    assert!(panicked.is_err());
    assert!(r.admit(&k, at).unwrap().is_probe());
}

#[test]
fn client_abort_on_a_probe_releases_it_and_blames_nobody() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("groq", "a", "llama");
    for _ in 0..5 {
        attempt(&r, &k, &status(502), T0);
    }
    let at = T0.plus(30 * SEC);
    let aborted = classify(
        &Outcome {
            client_aborted: true,
            ..Outcome::new(Upstream::Timeout(switchyard_core::outcome::TimeoutPhase::Headers))
        },
        &ClassifyPolicy::default(),
        at,
    );
    r.admit(&k, at).unwrap().finish(&aborted, at);
    assert_eq!(r.breaker_state(&k.provider, at), BreakerState::HalfOpen);
    assert!(r.admit(&k, at).unwrap().is_probe());
}

#[test]
fn a_response_that_does_not_blame_the_provider_closes_a_probing_breaker() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("groq", "a", "llama");
    for _ in 0..5 {
        attempt(&r, &k, &status(502), T0);
    }
    let at = T0.plus(30 * SEC);
    r.admit(&k, at).unwrap().finish(&status(400), at);
    assert_eq!(r.breaker_state(&k.provider, at), BreakerState::Closed);
}

#[test]
fn every_change_is_published_in_order_and_a_healthy_success_publishes_nothing() {
    let r = Arc::new(HealthRegistry::default());
    let mut rx = r.subscribe();
    let k = key("openai", "a", "gpt-4o");
    attempt(&r, &k, &status(200), T0);
    assert!(drain(&mut rx).is_empty(), "a success on healthy state is not a transition");

    attempt(&r, &k, &status(503), T0);
    let events = drain(&mut rx);
    // The breaker's first failure only ticks its count (RESILIENCE.md §6): not published.
    assert!(
        matches!(&events[..], [HealthEvent::Lockout { record: Some(l), .. }] if l.locked_until.is_some()),
        "only the model lockout is a transition: {events:?}"
    );

    // The lock runs out lazily, on the next read, and that is published too.
    let later = T0.plus(10 * SEC);
    assert_eq!(r.eligible(&k, later), Ok(()));
    let events = drain(&mut rx);
    assert!(
        matches!(&events[..], [HealthEvent::Lockout { record: Some(l), .. }] if l.locked_until.is_none())
    );
}

#[test]
fn sweep_forgets_idle_healthy_entries_so_memory_stays_flat() {
    let limits = RegistryLimits { sweep_budget: 4, ..RegistryLimits::default() };
    let r = Arc::new(HealthRegistry::new(limits));
    let step = Duration::from_millis(500);
    let mut now = T0;
    let mut peak = 0;
    // Five and a half hours of one-off 404s on ever new models, one every half second: each
    // lock expires after 10 s and nothing is reused. Without the sweep that is 40,000 entries.
    for i in 0..40_000 {
        attempt(&r, &key("openai", "a", &format!("model-{i}")), &status(404), now);
        now = now.plus(step);
        peak = peak.max(r.len());
    }
    // An entry is forgettable idle_ttl after its lock ends (7,220 steps); the sweep, visiting 4
    // entries per new one, settles where a quarter of what it visits is forgettable:
    // about 7,220 × 4/3 ≈ 9,630 entries.
    assert!(peak < 10_500, "peak {peak} tracked entries");
    now = now.plus(limits.idle_ttl).plus(Duration::from_secs(10));
    let full_pass = r.len();
    r.sweep(now, full_pass);
    assert!(r.is_empty(), "{} entries left after a full sweep", r.len());
}

#[test]
fn at_the_cap_healthy_entries_are_evicted_and_benched_ones_are_kept() {
    let limits = RegistryLimits { max_entries: 100, ..RegistryLimits::default() };
    let r = Arc::new(HealthRegistry::new(limits));
    // 100 long locks fill the registry.
    for i in 0..100 {
        attempt(&r, &key("p", "a", &format!("locked-{i}")), &retry_after(429, 3_000), T0);
    }
    assert_eq!(r.len(), 100);
    // With no room and nothing healthy to evict, a new failure fails open and is counted.
    let k = key("p", "a", "newcomer");
    attempt(&r, &k, &status(404), T0);
    assert_eq!(r.len(), 100);
    assert_eq!(r.eligible(&k, T0), Ok(()));
    assert_eq!(r.snapshot(T0).untracked, 1);
    assert!(matches!(
        r.eligible(&key("p", "a", "locked-0"), T0),
        Err(SkipReason::ModelLocked { .. })
    ));

    // Once those locks run out they are healthy and give way to new failures.
    let later = T0.plus(Duration::from_secs(3_000));
    attempt(&r, &k, &status(404), later);
    assert!(matches!(r.eligible(&k, later), Err(SkipReason::ModelLocked { .. })));
    assert!(r.len() <= 100);
}

#[test]
fn snapshot_shows_every_benched_thing_with_time_remaining() {
    let r = Arc::new(HealthRegistry::default());
    for _ in 0..5 {
        attempt(&r, &key("down", "a", "m"), &status(502), T0);
    }
    attempt(&r, &key("openai", "a", "gpt-4o"), &retry_after(429, 40), T0);
    attempt(&r, &key("openai", "b", "gpt-4o"), &status(401), T0);

    let snap = r.snapshot(T0.plus(10 * SEC));
    assert_eq!(snap.breakers.len(), 1);
    assert_eq!(snap.breakers[0].state, BreakerState::Open);
    assert_eq!(snap.breakers[0].retry_in_ms, 20_000);
    assert_eq!(snap.lockouts.len(), 1);
    assert_eq!(snap.lockouts[0].remaining_ms, 30_000);
    assert_eq!(snap.credentials.len(), 1);
    assert_eq!(snap.credentials[0].status, CredentialStatus::Invalid);
    assert_eq!(snap.credentials[0].retry_in_ms, None);
}

#[test]
fn reset_clears_exactly_the_scope_asked_for() {
    let r = Arc::new(HealthRegistry::default());
    let a4o = key("openai", "a", "gpt-4o");
    let b4o = key("openai", "b", "gpt-4o");
    let amini = key("openai", "a", "mini");
    for k in [&a4o, &b4o, &amini] {
        attempt(&r, k, &status(404), T0);
    }
    let counts = r.reset(&ResetScope::Lockout { key: a4o.clone() }, T0);
    assert_eq!(counts.lockouts, 1);
    assert_eq!(r.eligible(&a4o, T0), Ok(()));
    assert!(r.eligible(&b4o, T0).is_err());

    let counts =
        r.reset(&ResetScope::Model { provider: "openai".into(), model: "gpt-4o".into() }, T0);
    assert_eq!(counts.lockouts, 1);
    assert!(r.eligible(&amini, T0).is_err());

    let counts = r.reset(&ResetScope::All, T0);
    assert_eq!(counts.lockouts, 1);
    assert!(r.is_empty());
}

#[test]
fn restored_state_answers_exactly_like_the_original() {
    let r = Arc::new(HealthRegistry::default());
    for _ in 0..5 {
        attempt(&r, &key("down", "a", "m"), &status(502), T0);
    }
    attempt(&r, &key("openai", "a", "gpt-4o"), &retry_after(429, 40), T0);
    attempt(&r, &key("openai", "b", "gpt-4o"), &status(401), T0);
    attempt(&r, &key("openai", "c", "gpt-4o"), &status(402), T0);

    let restored = HealthRegistry::default();
    restored.restore(&r.records(), T0);
    for k in [
        key("down", "a", "m"),
        key("openai", "a", "gpt-4o"),
        key("openai", "a", "mini"),
        key("openai", "b", "gpt-4o"),
        key("openai", "c", "gpt-4o"),
        key("openai", "d", "gpt-4o"),
    ] {
        for at in [T0, T0.plus(35 * SEC), T0.plus(Duration::from_secs(7_200))] {
            assert_eq!(restored.eligible(&k, at), r.eligible(&k, at), "{k} at {at}");
        }
    }
}

#[test]
fn a_forbidden_model_is_locked_for_ten_minutes_and_the_key_keeps_serving_other_models() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("anthropic", "a", "claude-opus");
    attempt(&r, &k, &status(403), T0);
    assert_eq!(
        r.eligible(&k, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 600_000, rate_limited: false })
    );
    assert_eq!(r.eligible(&key("anthropic", "a", "claude-haiku"), T0), Ok(()));
    assert_eq!(r.eligible(&key("anthropic", "b", "claude-opus"), T0), Ok(()));
    assert!(r.snapshot(T0).credentials.is_empty(), "the key itself is not benched");
    assert_eq!(r.eligible(&k, T0.plus(600 * SEC)), Ok(()));
}

#[test]
fn a_long_retry_after_on_a_5xx_benches_the_model_at_once_whatever_the_threshold() {
    let r = Arc::new(HealthRegistry::default());
    r.set_lockout_policy(
        LockoutSettings { failure_threshold: 3, ..LockoutSettings::default() }.validate().unwrap(),
    );
    let k = key("anthropic", "a", "claude-opus");
    attempt(&r, &k, &retry_after(529, 30), T0);
    assert_eq!(
        r.eligible(&k, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 30_000, rate_limited: false })
    );
    assert_eq!(r.eligible(&key("anthropic", "a", "claude-haiku"), T0), Ok(()));
    assert_eq!(r.eligible(&k, T0.plus(30 * SEC)), Ok(()));
}

#[test]
fn a_rate_limit_reset_header_on_a_503_does_not_set_the_lock_length() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("openai", "a", "gpt-4o");
    attempt(&r, &k, &with_header(503, "x-ratelimit-reset-tokens", "6m0s"), T0);
    assert_eq!(
        r.eligible(&k, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 10_000, rate_limited: false })
    );
}

#[test]
fn a_404_with_a_tiny_reset_header_is_still_locked_for_the_normal_length() {
    let r = Arc::new(HealthRegistry::default());
    let k = key("openai", "a", "gpt-9");
    attempt(&r, &k, &with_header(404, "x-ratelimit-reset-requests", "17ms"), T0);
    assert_eq!(
        r.eligible(&k, T0.plus(SEC)),
        Err(SkipReason::ModelLocked { retry_in_ms: 9_000, rate_limited: false })
    );
}

#[test]
fn failure_count_ticks_below_a_threshold_are_not_transitions_and_publish_nothing() {
    let r = Arc::new(HealthRegistry::default());
    let mut rx = r.subscribe();
    let k = key("openai", "a", "gpt-4o");
    // 500 is not a lockout code: each one only ticks the breaker's failure count.
    attempt(&r, &k, &status(500), T0);
    attempt(&r, &k, &status(500), T0);
    assert!(drain(&mut rx).is_empty(), "two ticks below the degradation threshold");
    assert_eq!(r.snapshot(T0).breakers[0].failures, 2, "the count is kept in memory");

    // The third failure degrades the breaker: a transition, published with its count.
    attempt(&r, &k, &status(500), T0);
    let events = drain(&mut rx);
    assert!(
        matches!(&events[..], [HealthEvent::Breaker { record: Some(b), .. }]
            if b.state == BreakerState::Degraded && b.failures == 3),
        "{events:?}"
    );

    // A success back to closed is a transition; the next one only lowers the count.
    attempt(&r, &k, &status(200), T0);
    assert_eq!(drain(&mut rx).len(), 1, "degraded to closed");
    attempt(&r, &k, &status(200), T0);
    assert!(drain(&mut rx).is_empty(), "a success on a closed breaker writes nothing");
}

#[test]
fn lockout_failures_below_the_threshold_publish_nothing_until_the_lock() {
    let r = Arc::new(HealthRegistry::default());
    r.set_lockout_policy(
        LockoutSettings { failure_threshold: 2, ..LockoutSettings::default() }.validate().unwrap(),
    );
    let mut rx = r.subscribe();
    let k = key("openai", "a", "gpt-9");
    attempt(&r, &k, &status(404), T0);
    assert!(drain(&mut rx).is_empty(), "one 404 below a threshold of two");
    attempt(&r, &k, &status(404), T0);
    let events = drain(&mut rx);
    assert!(
        matches!(&events[..], [HealthEvent::Lockout { record: Some(l), .. }] if l.locked_until.is_some()),
        "{events:?}"
    );
}

#[test]
fn a_retry_after_on_a_404_lengthens_the_lock_but_never_shortens_it() {
    let r = Arc::new(HealthRegistry::default());
    let long = key("openai", "a", "gone");
    attempt(&r, &long, &retry_after(404, 3600), T0);
    assert_eq!(
        r.eligible(&long, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 3_600_000, rate_limited: false })
    );
    let short = key("openai", "a", "also-gone");
    attempt(&r, &short, &retry_after(404, 1), T0);
    assert_eq!(
        r.eligible(&short, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 10_000, rate_limited: false })
    );
    let forbidden = key("openai", "a", "forbidden");
    attempt(&r, &forbidden, &retry_after(403, 5), T0);
    assert_eq!(
        r.eligible(&forbidden, T0),
        Err(SkipReason::ModelLocked { retry_in_ms: 600_000, rate_limited: false })
    );
}
