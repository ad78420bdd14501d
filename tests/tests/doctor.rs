//! The doctor: `GET /api/doctor` names what is wrong with its evidence and a
//! suggested action; `POST /api/doctor/{id}/apply` applies one only with the digest of the
//! evidence it was shown (a changed state answers 409 and changes nothing); a dry run says
//! what would change. One test per finding: the state set up through the mock, named, fixed.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_core::{ManualClock, doctor};
use switchyard_e2e::harness::{Harness, Setup, T0};
use switchyard_testkit::{Behavior, ErrorKind, Status};

/// `oa/gpt-4o` first, `an/claude-x` after it; `solo` drives `oa` alone. No same-target retries,
/// and a breaker opens at the first failure.
const COMBOS: &str = r#"
[[combos]]
name = "smart"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-x" }]

[[combos]]
name = "mini"
targets = [{ target = "oa/gpt-4o-mini" }, { target = "an/claude-x" }]

[[combos]]
name = "solo"
targets = [{ target = "oa/gpt-4o" }]

[settings.routing]
retry_budget_percent = 0
retry_budget_min_per_second = 0
"#;

async fn start(clock: &ManualClock) -> Harness {
    Harness::start_with(Setup::new(COMBOS).clock(clock).breaker("{ failure_threshold = 1 }")).await
}

async fn findings(h: &Harness) -> Vec<Value> {
    let (status, body) = h.api_get("/api/doctor").await;
    assert_eq!(status, 200, "{body}");
    body.as_array().cloned().unwrap_or_default()
}

async fn finding(h: &Harness, id: &str) -> Value {
    let all = findings(h).await;
    all.iter().find(|f| f["id"] == id).cloned().unwrap_or_else(|| panic!("no {id} in {all:?}"))
}

async fn apply(h: &Harness, id: &str, digest: &Value, dry_run: bool) -> (u16, Value) {
    // Ids name their subject (`kind:combo/provider/model`): a path segment percent-encodes it.
    let path = format!("/api/doctor/{}/apply", id.replace('/', "%2F"));
    h.api(Method::POST, &path, &json!({ "digest": digest, "dry_run": dry_run })).await
}

#[tokio::test]
async fn a_healthy_proxy_has_no_finding() {
    let h = start(&ManualClock::new(T0)).await;
    assert_eq!(h.openai("smart", false).send().await.unwrap().status(), 200);
    assert_eq!(findings(&h).await, Vec::<Value>::new());
}

#[tokio::test]
async fn a_breaker_that_opens_again_and_again_is_moved_down_its_combo_and_a_stale_digest_is_refused()
 {
    let clock = ManualClock::new(T0);
    let h = start(&clock).await;
    // Open, then re-opened twice by failed half-open attempts (the combo of one is its probe).
    let mut wait = Duration::from_secs(30);
    for _ in 0..3 {
        h.mock.enqueue("gpt-4o", Status::new(503));
        assert_eq!(h.openai("solo", false).send().await.unwrap().status(), 503);
        clock.advance(wait);
        wait *= 2;
    }
    let id = "breaker_flapping:smart/oa/gpt-4o";
    let seen = finding(&h, id).await;
    assert_eq!(seen["action"]["kind"], "apply", "{seen}");
    assert!(seen["evidence"][0].as_str().unwrap().contains("re-opened 2 times"), "{seen}");

    // A dry run says what would change and changes nothing.
    let (status, dry) = apply(&h, id, &seen["digest"], true).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["says"], "move oa/gpt-4o to the end of combo \"smart\"");
    let (_, combo) = h.api_get("/api/combos/smart").await;
    assert_eq!(combo["targets"][0]["target"], "oa/gpt-4o", "unchanged by the dry run");

    // The evidence changes (one more re-open): the digest shown is refused, nothing changes.
    h.mock.enqueue("gpt-4o", Status::new(503));
    assert_eq!(h.openai("solo", false).send().await.unwrap().status(), 503);
    let (status, refused) = apply(&h, id, &seen["digest"], false).await;
    assert_eq!(status, 409, "{refused}");
    let (_, combo) = h.api_get("/api/combos/smart").await;
    assert_eq!(combo["targets"][0]["target"], "oa/gpt-4o", "unchanged by a refused apply");

    // With the digest of what it shows now, applied: the failing target goes last.
    let now = finding(&h, id).await;
    assert_ne!(now["digest"], seen["digest"]);
    let (status, applied) = apply(&h, id, &now["digest"], false).await;
    assert_eq!(status, 200, "{applied}");
    let (_, combo) = h.api_get("/api/combos/smart").await;
    let order: Vec<&str> = combo["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["an/claude-x", "oa/gpt-4o"]);
    assert!(findings(&h).await.iter().all(|f| f["id"] != id), "fixed");
}

#[tokio::test]
async fn a_model_not_found_again_and_again_is_retired_from_its_provider_and_combo() {
    let clock = ManualClock::new(T0);
    let h = start(&clock).await;
    // Not found on one key, then on the other: gone, not one key's trouble.
    for _ in 0..2 {
        h.mock.enqueue("gpt-4o-mini", Status::new(404));
        assert_eq!(h.openai("mini", false).send().await.unwrap().status(), 200, "fell back");
    }
    assert_eq!(h.app.locked(), ["oa/gpt-4o-mini@oa-1", "oa/gpt-4o-mini@oa-2"]);
    let id = "model_retired:oa/gpt-4o-mini";
    let seen = finding(&h, id).await;
    let (status, applied) = apply(&h, id, &seen["digest"], false).await;
    assert_eq!(status, 200, "{applied}");
    let (_, provider) = h.api_get("/api/providers/oa").await;
    assert_eq!(provider["models"], json!(["gpt-4o"]), "{provider}");
    let (_, combo) = h.api_get("/api/combos/mini").await;
    assert_eq!(combo["targets"], json!([{ "target": "an/claude-x" }]), "{combo}");
    assert!(h.app.locked().is_empty(), "its lockouts went with it");
}

#[tokio::test]
async fn a_lockout_of_a_model_no_longer_listed_is_cleared() {
    let h = start(&ManualClock::new(T0)).await;
    h.mock.enqueue("gpt-4o-mini", Status::new(404));
    assert_eq!(h.openai("mini", false).send().await.unwrap().status(), 200);
    assert_eq!(h.app.locked(), ["oa/gpt-4o-mini@oa-1"]);
    // The user takes the model out of the provider's list (and the combo): the lock stays.
    let (status, body) = h
        .api(
            Method::PUT,
            "/api/combos/mini",
            &json!({"name": "mini", "targets": [{"target": "an/claude-x"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        h.api(Method::PATCH, "/api/providers/oa", &json!({"models": ["gpt-4o"]})).await;
    assert_eq!(status, 200, "{body}");
    let id = "stale_bench:oa/gpt-4o-mini@oa-1";
    let seen = finding(&h, id).await;
    let (status, applied) = apply(&h, id, &seen["digest"], false).await;
    assert_eq!(status, 200, "{applied}");
    assert!(h.app.locked().is_empty());
}

#[tokio::test]
async fn a_destination_waiting_for_confirmation_says_what_goes_where_and_is_confirmed() {
    let h = start(&ManualClock::new(T0)).await;
    // A host no provider uses yet: a destination never confirmed.
    let elsewhere = switchyard_testkit::MockUpstream::start().await;
    let base = format!("{}/v1", elsewhere.base_url());
    let (status, body) = h
        .api(
            Method::POST,
            "/api/providers",
            &json!({"id": "newp", "kind": "openai", "base_url": base, "models": ["m"]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let seen = finding(&h, "destination_unconfirmed:newp").await;
    assert!(
        seen["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("would send requests to http://127.0.0.1:"),
        "{seen}"
    );
    assert_ne!(h.openai("newp/m", false).send().await.unwrap().status(), 200, "not before");
    assert!(elsewhere.attempts().is_empty());
    assert_eq!(seen["action"]["change"]["change"], "confirm", "{seen}");
    let (status, applied) = apply(&h, "destination_unconfirmed:newp", &seen["digest"], false).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(
        h.openai("newp/m", false).send().await.unwrap().status(),
        200,
        "confirmed: it routes"
    );
    assert_eq!(elsewhere.attempts().len(), 1);
}

#[tokio::test]
async fn a_refused_key_and_a_combo_with_nothing_ready_are_advice_with_a_link_and_not_applied() {
    let h = start(&ManualClock::new(T0)).await;
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    let _ = h.openai("solo", false).send().await.unwrap();
    let _ = h.openai("solo", false).send().await.unwrap();
    let refused = finding(&h, "key_refused:oa/oa-1").await;
    assert_eq!(
        refused["action"],
        json!({"kind": "advice", "says": "enter the key of oa/oa-1 again on the Providers page", "link": "#/providers"})
    );
    let (status, body) = apply(&h, "key_refused:oa/oa-1", &refused["digest"], false).await;
    assert_eq!(status, 422, "advice is not applied: {body}");
    let nothing = finding(&h, "combo_nothing_ready:solo").await;
    assert_eq!(nothing["action"]["link"], "#/combos");
    let (status, _) = apply(&h, "no_such:finding", &json!("0"), false).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_lock_the_lockout_settings_no_longer_set_has_lost_its_cause_and_is_cleared() {
    let h = start(&ManualClock::new(T0)).await;
    // A rate limit that says an hour: the model is locked for an hour, the combo falls back.
    h.mock.enqueue("gpt-4o", Status::new(429).header("retry-after", "3600"));
    assert_eq!(h.openai("smart", false).send().await.unwrap().status(), 200);
    assert_eq!(h.app.locked(), ["oa/gpt-4o@oa-1"]);
    assert!(findings(&h).await.is_empty(), "a lock the settings still set is not stale");

    // The user stops locking on 429: the hour-long lock has lost its cause.
    let (status, body) = h
        .api(Method::PATCH, "/api/settings/model_lockouts", &json!({"error_codes": [404, 503]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let id = "stale_bench:oa/gpt-4o@oa-1";
    let seen = finding(&h, id).await;
    assert_eq!(
        seen["title"],
        "a lockout of oa/gpt-4o@oa-1, and Settings → Model Lockouts no longer locks on 429"
    );
    let (status, applied) = apply(&h, id, &seen["digest"], false).await;
    assert_eq!(status, 200, "{applied}");
    assert!(h.app.locked().is_empty());
    assert!(findings(&h).await.is_empty());
}

#[tokio::test]
async fn a_refused_key_entered_again_is_no_longer_benched() {
    let h = start(&ManualClock::new(T0)).await;
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    let _ = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert!(findings(&h).await.iter().any(|f| f["id"] == "key_refused:oa/oa-1"));
    // As the advice says: the key entered again. Its cause (that key) is gone, so is its bench.
    let (status, body) = h
        .api(
            Method::PATCH,
            "/api/providers/oa/credentials/oa-1",
            &json!({"secret_ref": "env:OA_1"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.app.credential("oa", "oa-1"), None);
    assert!(findings(&h).await.iter().all(|f| f["id"] != "key_refused:oa/oa-1"));
}

#[tokio::test]
async fn a_provider_far_slower_than_usual_to_its_first_token_is_advice() {
    let clock = ManualClock::new(T0);
    let h = start(&clock).await;
    let stream = |h: &Harness| {
        let request = h.openai("solo", true);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            let _ = response.bytes().await.unwrap();
        }
    };
    // Yesterday: 20 streams, each quick to its first token.
    for _ in 0..doctor::SLOW_MIN_USUAL {
        stream(&h).await;
    }
    // Today: 5 streams, each 600 ms to its first token. Yesterday's are no longer recent.
    clock.advance(Duration::from_secs(24 * 3600));
    for _ in 0..doctor::SLOW_MIN_RECENT {
        h.mock.enqueue("gpt-4o", Behavior::slow_first_event(Duration::from_millis(600)));
    }
    futures_util::future::join_all((0..doctor::SLOW_MIN_RECENT).map(|_| stream(&h))).await;
    h.logged(25).await;

    let slow = finding(&h, "slow_first_token:oa").await;
    assert_eq!(slow["action"]["kind"], "advice", "{slow}");
    let evidence = slow["evidence"].as_array().unwrap();
    assert!(evidence[0].as_str().unwrap().contains("over 5 streams"), "{slow}");
    assert!(evidence[1].as_str().unwrap().contains("over 25 streams in the last 7 days"), "{slow}");
}
