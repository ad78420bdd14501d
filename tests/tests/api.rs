//! The management API's first slice end to end: health, resets, lockouts, lockout settings,
//! the request log and `/metrics`. Every invalid input gets a 4xx naming the field, and a read
//! afterwards shows nothing changed.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, MANAGEMENT_TOKEN, ask};
use switchyard_testkit::Status;

/// Locks `gpt-4o` on key `oa-1` with a 404 (the second key then serves).
async fn lock_one(h: &Harness) {
    h.mock.enqueue("gpt-4o", Status::new(404));
    let r = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn health_lists_the_active_lockout_with_its_remaining_time_and_reason() {
    let h = Harness::start("").await;
    lock_one(&h).await;
    let (status, body) = h.api_get("/api/monitoring/health").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["persistence"]["durable"], true);
    let saved_to = &body["config_saved_to"];
    assert_eq!(saved_to["to"], "file", "{body}");
    assert!(saved_to["path"].as_str().unwrap().ends_with("harness.toml"), "{body}");
    let lockouts = body["lockouts"].as_array().unwrap();
    assert_eq!(lockouts.len(), 1, "{body}");
    assert_eq!(lockouts[0]["key"]["model"], "gpt-4o");
    assert_eq!(lockouts[0]["key"]["credential"], "oa-1");
    assert_eq!(lockouts[0]["reason"]["status"], 404);
    assert!(lockouts[0]["remaining_ms"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_lockout_can_be_cleared_alone_or_with_all_the_others() {
    let h = Harness::start("").await;
    lock_one(&h).await;
    let one = "/api/resilience/lockouts?provider=oa&credential=oa-1&model=gpt-4o";
    let (status, body) = h.api(reqwest::Method::DELETE, one, &Value::Null).await;
    assert_eq!((status, body["cleared"].as_u64()), (200, Some(1)));
    let (_, list) = h.api_get("/api/resilience/lockouts").await;
    assert_eq!(list.as_array().unwrap().len(), 0);
    // The cleared key serves again at once.
    let r = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(h.mock.attempts_for("gpt-4o").last().unwrap().api_key(), Some("oa-1"));

    lock_one(&h).await;
    let (status, body) =
        h.api(reqwest::Method::DELETE, "/api/resilience/lockouts", &Value::Null).await;
    assert_eq!((status, body["cleared"].as_u64()), (200, Some(1)));
}

#[tokio::test]
async fn a_half_named_lockout_is_refused_and_nothing_is_cleared() {
    let h = Harness::start("").await;
    lock_one(&h).await;
    let (status, body) =
        h.api(reqwest::Method::DELETE, "/api/resilience/lockouts?provider=oa", &Value::Null).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("query:"), "{body}");
    let (_, list) = h.api_get("/api/resilience/lockouts").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn reset_by_provider_clears_its_state_and_an_unknown_scope_is_refused() {
    let h = Harness::start("").await;
    lock_one(&h).await;
    let (status, body) = h
        .api(reqwest::Method::POST, "/api/resilience/reset", &json!({"scope": "everything"}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("scope:"), "{body}");
    let (_, health) = h.api_get("/api/monitoring/health").await;
    assert_eq!(health["lockouts"].as_array().unwrap().len(), 1, "nothing changed");

    let (status, body) = h
        .api(
            reqwest::Method::POST,
            "/api/resilience/reset",
            &json!({"scope": "provider", "provider": "oa"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["lockouts"], 1);
    let (_, health) = h.api_get("/api/monitoring/health").await;
    assert_eq!(health["lockouts"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn lockout_settings_apply_live_and_invalid_ones_name_the_field_and_change_nothing() {
    let h = Harness::start("").await;
    let (status, before) = h.api_get("/api/settings/model_lockouts").await;
    assert_eq!(status, 200);
    assert_eq!(before["error_codes"], json!([404, 429, 503]));

    for (patch, field) in [
        (
            json!({"base_cooldown_ms": 60000, "max_cooldown_ms": 1000}),
            "model_lockouts.max_cooldown_ms",
        ),
        (json!({"error_codes": [404, 418]}), "model_lockouts.error_codes[1]"),
        (json!({"failure_threshold": "three"}), "model_lockouts.failure_threshold"),
        (json!({"no_such_setting": true}), "model_lockouts"),
    ] {
        let (status, body) =
            h.api(reqwest::Method::PATCH, "/api/settings/model_lockouts", &patch).await;
        assert_eq!(status, 422, "{patch}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().starts_with(field), "{patch}: {body}");
        let (_, now) = h.api_get("/api/settings/model_lockouts").await;
        assert_eq!(now, before, "{patch} changed nothing");
    }

    // Live: with 404 no longer... still locking (404 always locks), but 503 stops locking.
    let (status, after) = h
        .api(reqwest::Method::PATCH, "/api/settings/model_lockouts", &json!({"error_codes": [404]}))
        .await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["error_codes"], json!([404]));
    h.mock.enqueue("gpt-4o", Status::new(503));
    let r = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert!(r.status().is_success() || r.status() == 503);
    let (_, health) = h.api_get("/api/monitoring/health").await;
    assert_eq!(health["lockouts"].as_array().unwrap().len(), 0, "503 no longer locks: {health}");
}

#[tokio::test]
async fn the_request_log_shows_each_request_with_its_trace() {
    let h = Harness::start("").await;
    lock_one(&h).await;
    let (status, body) = h.api_get("/api/requests?limit=5").await;
    assert_eq!(status, 200, "{body}");
    let first = &body[0];
    assert_eq!(first["served_by"], "oa/gpt-4o");
    assert_eq!(first["attempts"], 2);
    assert_eq!(first["trace"][0]["event"], "attempted");
    assert_eq!(first["trace"][0]["outcome"], "model_unavailable");
    assert_eq!(first["trace"][0]["credential"], "oa-1");
    // The attempt that served is in the trace too, so the log says which key answered.
    let served = &first["trace"][1];
    assert_eq!(served["event"], "attempted", "{first}");
    assert_eq!(served["outcome"], "success", "{first}");
    assert_eq!((&served["target"], &served["credential"]), (&json!("oa/gpt-4o"), &json!("oa-2")));
    assert_eq!(served["status"], 200, "{first}");
    // The request's session (one of its own: a first turn), bound where it was served.
    let session = &first["trace"][2];
    assert_eq!((&session["event"], &session["pin"]), (&json!("session"), &json!("new")), "{first}");
    assert_eq!(session["credential"], "oa-2", "{first}");
    // Then what the attempt that answered used (the failed one reported nothing).
    let used = &first["trace"][3];
    assert_eq!((&used["event"], &used["credential"]), (&json!("used"), &json!("oa-2")), "{first}");
    assert_eq!(first["trace"].as_array().map(Vec::len), Some(4), "{first}");
    let (status, body) = h.api_get("/api/requests?limit=0").await;
    assert_eq!(status, 422, "{body}");
}

#[tokio::test]
async fn the_request_log_filters_and_pages() {
    let h = Harness::start("").await;
    lock_one(&h).await; // oa/gpt-4o: a fallback to the second key, 200
    assert_eq!(ask(&h, "an/claude-x").await.0, 200);
    h.mock.enqueue("gemini-x", Status::new(400));
    assert_eq!(ask(&h, "ge/gemini-x").await.0, 400);
    assert_eq!(ask(&h, "nope").await.0, 404);

    let models = |body: &Value| -> Vec<String> {
        body.as_array().unwrap().iter().map(|r| r["model"].as_str().unwrap().to_owned()).collect()
    };
    for (query, expected) in [
        ("", vec!["nope", "ge/gemini-x", "an/claude-x", "oa/gpt-4o"]),
        ("?limit=2", vec!["nope", "ge/gemini-x"]),
        ("?limit=2&offset=2", vec!["an/claude-x", "oa/gpt-4o"]),
        ("?outcome=ok", vec!["an/claude-x", "oa/gpt-4o"]),
        ("?outcome=error", vec!["nope", "ge/gemini-x"]),
        ("?provider=an", vec!["an/claude-x"]),
        ("?fallback=true", vec!["oa/gpt-4o"]),
        ("?model=ge/gemini-x", vec!["ge/gemini-x"]),
        ("?outcome=ok&provider=oa", vec!["oa/gpt-4o"]),
    ] {
        let (status, body) = h.api_get(&format!("/api/requests{query}")).await;
        assert_eq!(status, 200, "{query}: {body}");
        assert_eq!(models(&body), expected, "{query}");
    }
    for (query, field) in [
        ("?outcome=maybe", "query"),
        ("?fallback=2", "query"),
        ("?colour=red", "query"),
        ("?limit=1001", "limit"),
    ] {
        let (status, body) = h.api_get(&format!("/api/requests{query}")).await;
        assert_eq!(status, 422, "{query}: {body}");
        assert_eq!(body["error"]["switchyard"]["field"], field, "{query}: {body}");
    }
}

#[tokio::test]
#[expect(clippy::float_cmp, reason = "the samples compared are small whole counts")]
async fn metrics_parse_as_prometheus_text() {
    let h = Harness::start("").await;
    lock_one(&h).await;
    let r = h.http.get(h.url("/metrics")).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    // Every sample belongs to a family declared (HELP, then TYPE) before it; values are numbers.
    let mut types: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut samples: Vec<(String, String, f64)> = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "declared twice: {line}"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "{line}");
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
        assert!(metric.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                metric
                    .strip_suffix(suffix)
                    .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(metric);
        assert!(types.contains_key(family), "sample before its TYPE: {line}");
        let value = value.parse::<f64>().unwrap_or_else(|_| panic!("not a number: {line}"));
        samples.push((metric.to_owned(), labels.to_owned(), value));
    }
    let value = |metric: &str, labels: &str| {
        samples.iter().find(|(m, l, _)| m == metric && l == labels).map(|s| s.2)
    };
    assert_eq!(value("switchyard_requests_total", ""), Some(1.0), "{text}");
    assert_eq!(value("switchyard_attempts_total", ""), Some(2.0), "{text}");
    assert_eq!(value("switchyard_fallbacks_total", ""), Some(1.0), "{text}");
    assert_eq!(value("switchyard_active_lockouts", ""), Some(1.0), "{text}");
    for histogram in
        ["switchyard_request_duration_seconds", "switchyard_upstream_first_event_seconds"]
    {
        let buckets: Vec<f64> = samples
            .iter()
            .filter(|(m, _, _)| *m == format!("{histogram}_bucket"))
            .map(|s| s.2)
            .collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative buckets: {text}");
        let count = value(&format!("{histogram}_count"), "").unwrap();
        assert_eq!(value(&format!("{histogram}_bucket"), "le=\"+Inf\"}"), Some(count), "{text}");
        assert_eq!(count, 1.0, "one request, served by one attempt: {text}");
        assert!(value(&format!("{histogram}_sum"), "").unwrap() > 0.0, "{text}");
    }
}

#[tokio::test]
async fn the_management_api_wants_the_management_token_not_a_local_key() {
    let h = Harness::start("").await;
    let r =
        h.http.get(h.url("/api/monitoring/health")).bearer_auth(LOCAL_KEY).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = h.http.get(h.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(MANAGEMENT_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "and the token is no key for /v1");
}

#[tokio::test]
async fn a_key_created_over_the_api_works_at_once_and_stops_working_when_revoked() {
    let h = Harness::start("").await;
    let (status, created) =
        h.api(reqwest::Method::POST, "/api/keys", &json!({"name": "editor"})).await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let (_, listed) = h.api_get("/api/keys").await;
    let listed = listed.to_string();
    assert!(
        listed.contains("editor") && !listed.contains(&key),
        "the secret is shown once: {listed}"
    );

    let chat = |key: String| {
        h.http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&json!({"model": "oa/gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    assert_eq!(chat(key.clone()).await.unwrap().status(), 200);
    let id = created["id"].as_str().unwrap();
    let (status, _) =
        h.api(reqwest::Method::DELETE, &format!("/api/keys/{id}"), &Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(chat(key).await.unwrap().status(), 401);

    let (status, body) = h.api(reqwest::Method::POST, "/api/keys", &json!({"name": ""})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("name:"), "{body}");
    let (status, _) = h.api(reqwest::Method::DELETE, "/api/keys/key_nope", &Value::Null).await;
    assert_eq!(status, 404);
}

/// `GET /api/events`, open: its answer has left, so everything from now on is on it. The
/// stream takes a UI session, not the management token (`tests/tests/ui_sessions.rs`).
async fn event_stream(
    h: &Harness,
) -> impl futures_util::Stream<Item = reqwest::Result<impl AsRef<[u8]>>> + Unpin {
    let (status, session) = h.api(reqwest::Method::POST, "/api/session", &Value::Null).await;
    assert_eq!(status, 201, "{session}");
    let token = session["token"].as_str().expect("a session token");
    let response = h.http.get(h.url("/api/events")).bearer_auth(token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes_stream()
}

/// What the stream sends until `done` says it has what it waits for (each chunk within 5 s).
async fn read_until<B: AsRef<[u8]>>(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<B>> + Unpin),
    done: impl Fn(&str) -> bool,
) -> String {
    use futures_util::StreamExt as _;
    let mut seen = String::new();
    while !done(&seen) {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
            .await
            .expect("a frame within 5 s")
            .expect("the stream stays open")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(chunk.as_ref()));
    }
    seen
}

#[tokio::test]
async fn the_event_stream_carries_each_state_change() {
    let h = Harness::start("").await;
    let mut stream = event_stream(&h).await;
    lock_one(&h).await;
    let seen = read_until(&mut stream, |seen| seen.contains("\"layer\":\"lockout\"")).await;
    assert!(seen.contains("\"model\":\"gpt-4o\""), "{seen}");
}

#[tokio::test]
async fn the_event_stream_says_when_a_request_completed_so_usage_can_be_reread() {
    let h = Harness::start("").await;
    let mut stream = event_stream(&h).await;
    // A plain success changes no layer's state: only the request frame tells of it.
    let r = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    let at = log[0]["at"].as_u64().unwrap();
    let seen =
        read_until(&mut stream, |seen| seen.contains("event: request\n") && seen.ends_with("\n\n"))
            .await;
    assert!(seen.contains(&format!("event: request\ndata: {{\"at\":{at}}}\n\n")), "{seen}");
}
