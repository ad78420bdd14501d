//! What the desktop app and the web UI add to the management API: pausing routing, "try it",
//! the server's endpoint, notification settings, the web UI's files and its same-origin calls,
//! and the in-process transport the desktop window uses.

use serde_json::{Value, json};
use switchyard::server::ipc::ApiCall;
use switchyard_e2e::harness::{FALLBACK, Harness, LOCAL_KEY, MANAGEMENT_TOKEN, Setup};
use switchyard_testkit::Status;

fn call(method: &str, path: &str, body: Option<Value>) -> ApiCall {
    ApiCall { method: method.to_owned(), path: path.to_owned(), body }
}

#[tokio::test]
async fn paused_routing_refuses_client_requests_without_touching_an_upstream_until_resumed() {
    let h = Harness::start(FALLBACK).await;
    let (status, body) =
        h.api(reqwest::Method::PUT, "/api/routing", &json!({"paused": true})).await;
    assert_eq!((status, &body), (200, &json!({"paused": true})));
    let (_, health) = h.api_get("/api/monitoring/health").await;
    assert_eq!(health["paused"], true);

    let r = h.openai("smart", false).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "routing_paused", "{body}");
    let r = h.anthropic("smart", true).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(h.mock.total_attempts(), 0);

    let (status, _) = h.api(reqwest::Method::PUT, "/api/routing", &json!({"paused": false})).await;
    assert_eq!(status, 200);
    let r = h.openai("smart", false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(h.mock.total_attempts(), 1);
}

#[tokio::test]
async fn a_malformed_routing_state_is_refused_naming_the_field_and_changes_nothing() {
    let h = Harness::start("").await;
    for bad in [json!({"paused": "yes"}), json!({"pause": true}), json!([])] {
        let (status, body) = h.api(reqwest::Method::PUT, "/api/routing", &bad).await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert!(body["error"]["switchyard"]["field"].is_string(), "{body}");
    }
    assert_eq!(h.api_get("/api/routing").await, (200, json!({"paused": false})));
}

#[tokio::test]
async fn try_it_answers_with_what_served_and_the_routing_trace() {
    let h = Harness::start(FALLBACK).await;
    h.mock.enqueue("gpt-4o", Status::new(500));
    h.mock.enqueue("gpt-4o", Status::new(500));
    let (status, body) =
        h.api(reqwest::Method::POST, "/api/try", &json!({"model": "smart", "prompt": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], 200, "{body}");
    assert_eq!(body["served_by"], "an/claude-fallback", "{body}");
    assert!(!body["answer"].as_str().unwrap().is_empty(), "{body}");
    assert!(body["error"].is_null());
    let trace = body["trace"].as_array().unwrap();
    assert_eq!(trace.first().unwrap()["target"], "oa/gpt-4o", "{body}");
    assert_eq!(trace.first().unwrap()["event"], "attempted", "{body}");
    // The last attempt served; `used` lines (what each attempt used) follow it.
    let served = trace.iter().rev().find(|e| e["event"] == "attempted").unwrap();
    assert_eq!(
        (&served["target"], &served["outcome"]),
        (&json!("an/claude-fallback"), &json!("success"))
    );
    assert_eq!(body["attempts"].as_u64(), Some(h.mock.total_attempts() as u64));
    // It went through the request log like any client request.
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    assert_eq!(log[0]["served_by"], "an/claude-fallback");
}

#[tokio::test]
async fn try_it_reports_the_clients_error_when_nothing_serves() {
    let h = Harness::start("").await;
    let (status, body) = h
        .api(reqwest::Method::POST, "/api/try", &json!({"model": "nope/none", "prompt": "hi"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], 404, "{body}");
    assert!(body["answer"].is_null());
    assert!(body["error"]["message"].as_str().unwrap().contains("unknown model"), "{body}");
}

#[tokio::test]
async fn try_it_refuses_an_empty_prompt_or_model_naming_the_field() {
    let h = Harness::start(FALLBACK).await;
    for (bad, field) in [
        (json!({"model": "smart", "prompt": "  "}), "prompt"),
        (json!({"model": "", "prompt": "hi"}), "model"),
        (json!({"model": "smart"}), "(body)"),
        (json!({"model": "smart", "prompt": "hi", "temperature": 2}), "temperature"),
    ] {
        let (status, body) = h.api(reqwest::Method::POST, "/api/try", &bad).await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert_eq!(body["error"]["switchyard"]["field"], field, "{bad}: {body}");
    }
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn the_server_names_the_endpoint_clients_use() {
    let h = Harness::start("").await;
    let (status, body) = h.api_get("/api/server").await;
    assert_eq!(status, 200);
    assert_eq!(body["endpoint"], format!("http://127.0.0.1:{}/v1", h.port));
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn notification_settings_default_on_change_live_and_refuse_bad_values() {
    let h = Harness::start("").await;
    let path = "/api/settings/notifications";
    assert_eq!(h.api_get(path).await, (200, json!({"breaker_open": true, "fallback": true})));
    let (status, body) = h.api(reqwest::Method::PATCH, path, &json!({"fallback": false})).await;
    assert_eq!((status, &body), (200, &json!({"breaker_open": true, "fallback": false})));
    let saved = std::fs::read_to_string(h.data_dir().join("harness.toml")).unwrap();
    assert!(saved.contains("[settings.notifications]"), "{saved}");

    let (status, body) = h.api(reqwest::Method::PATCH, path, &json!({"fallback": 3})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["switchyard"]["field"], "notifications.fallback", "{body}");
    assert_eq!(h.api_get(path).await.1, json!({"breaker_open": true, "fallback": false}));
}

/// A stand-in for `ui/dist`.
fn built_ui() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<!doctype html><title>Switchyard</title>")
        .unwrap();
    std::fs::create_dir(dir.path().join("assets")).unwrap();
    std::fs::write(dir.path().join("assets/app.js"), "console.log('ui')").unwrap();
    dir
}

#[tokio::test]
async fn the_web_ui_is_served_without_a_key_but_only_to_this_servers_own_name() {
    let ui = built_ui();
    let h = Harness::start_with(Setup::new("").ui(ui.path())).await;
    let r = h.http.get(h.url("/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("<title>Switchyard</title>"));
    let r = h.http.get(h.url("/assets/app.js")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().contains("javascript"));
    // Outside the UI's folder there is nothing, however the path is spelled.
    let r = h.http.get(h.url("/../harness.toml")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = h.http.get(h.url("/%2e%2e/harness.toml")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    // DNS rebinding: another name for 127.0.0.1 gets nothing, not even the files.
    let r = h.http.get(h.url("/")).header("host", "evil.example").send().await.unwrap();
    assert_eq!(r.status(), 403);
    // The API still wants the token, the proxy still wants a local key.
    let r = h.http.get(h.url("/api/monitoring/health")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = h.http.get(h.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn a_page_of_this_servers_own_origin_may_call_the_api_and_no_other_page_may() {
    let ui = built_ui();
    let h = Harness::start_with(Setup::new(FALLBACK).ui(ui.path())).await;
    let own = format!("http://127.0.0.1:{}", h.port);
    let r = h
        .http
        .put(h.url("/api/routing"))
        .bearer_auth(MANAGEMENT_TOKEN)
        .header("origin", &own)
        .json(&json!({"paused": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for foreign in [
        "https://evil.example",
        "null",
        "http://127.0.0.1:1",
        "https://127.0.0.1",
        &format!("https://127.0.0.1:{}", h.port),
    ] {
        let r = h
            .http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(LOCAL_KEY)
            .header("origin", foreign)
            .json(&json!({"model": "smart", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{foreign}");
        let r = h
            .http
            .get(h.url("/api/monitoring/health"))
            .bearer_auth(MANAGEMENT_TOKEN)
            .header("origin", foreign)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{foreign}");
    }
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn without_a_web_ui_even_this_servers_own_origin_is_refused() {
    let h = Harness::start("").await;
    let r = h
        .http
        .get(h.url("/api/monitoring/health"))
        .bearer_auth(MANAGEMENT_TOKEN)
        .header("origin", format!("http://127.0.0.1:{}", h.port))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = h.http.get(h.url("/")).bearer_auth(LOCAL_KEY).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn the_in_process_api_answers_as_http_does_without_a_token() {
    let h = Harness::start(FALLBACK).await;
    let ipc = h.in_process();
    let reply = ipc.call(call("GET", "/api/monitoring/health", None)).await;
    assert_eq!(reply.status, 200);
    let (_, mut over_http) = h.api_get("/api/monitoring/health").await;
    over_http["at"] = reply.body["at"].clone();
    assert_eq!(reply.body, over_http);

    let reply = ipc.call(call("put", "/api/routing", Some(json!({"paused": true})))).await;
    assert_eq!((reply.status, reply.body), (200, json!({"paused": true})));
    assert_eq!(h.api_get("/api/routing").await.1, json!({"paused": true}));

    // A refused edit comes back as the same typed error body, naming the field.
    let reply = ipc
        .call(call("PATCH", "/api/settings/timeouts", Some(json!({"first_byte_ms": "soon"}))))
        .await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.body["error"]["switchyard"]["field"], "timeouts.first_byte_ms");

    // Text answers arrive as a string.
    let reply = ipc.call(call("GET", "/api/config/export", None)).await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.as_str().unwrap().contains("[[combos]]"), "{}", reply.body);

    // A text body goes as it is: the exported file checks back in (the import dialog's dry run).
    let exported = reply.body.clone();
    let reply = ipc.call(call("POST", "/api/config/import?dry_run=true", Some(exported))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body["pairs"].is_array(), "{}", reply.body);

    // Queries pass through.
    let reply = ipc.call(call("GET", "/api/requests?limit=0", None)).await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.body["error"]["switchyard"]["field"], "limit");
}

#[tokio::test]
async fn the_in_process_api_reaches_the_management_api_and_nothing_else() {
    let h = Harness::start(FALLBACK).await;
    let ipc = h.in_process();
    let chat = json!({"model": "smart", "messages": [{"role": "user", "content": "hi"}]});
    for (call, status) in [
        (call("POST", "/v1/chat/completions", Some(chat)), 404),
        (call("GET", "/metrics", None), 404),
        (call("GET", "/", None), 404),
        (call("GET", "/api/events", None), 404),
        (call("TRACE", "/api/monitoring/health", None), 400),
        (call("GET", "/api/../v1/models", None), 404),
        (call("GET", "/api/nothing-here", None), 404),
    ] {
        let path = call.path.clone();
        let reply = ipc.call(call).await;
        assert_eq!(reply.status, status, "{path}: {}", reply.body);
        assert!(reply.body["error"]["message"].is_string(), "{path}: {}", reply.body);
    }
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn health_counts_each_combos_candidates_that_could_serve_now() {
    let h = Harness::start(FALLBACK).await;
    let combo = |health: &Value| health["combos"][0].clone();
    let (_, health) = h.api_get("/api/monitoring/health").await;
    let before = combo(&health);
    assert_eq!(before["name"], "smart");
    let all = before["candidates"].as_u64().unwrap();
    assert!(all >= 2, "{health}");
    assert_eq!(before["eligible"].as_u64(), Some(all));

    // A 404 locks gpt-4o on the key that got it; the other key serves.
    h.mock.enqueue("gpt-4o", Status::new(404));
    assert_eq!(h.openai("smart", false).send().await.unwrap().status(), 200);
    let (_, health) = h.api_get("/api/monitoring/health").await;
    assert_eq!(combo(&health)["eligible"].as_u64(), Some(all - 1), "{health}");
}
