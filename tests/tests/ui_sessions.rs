//! The web UI's sessions: the UI exchanges the management token once for a
//! session token that lives in this server process alone, so a restart ends it and a page
//! that sends it to whoever holds the port afterwards gives away nothing. The event stream
//! (the request a page repeats on its own) takes only a session; the management token keeps
//! working for the CLI and scripts everywhere else.

use reqwest::Method;
use serde_json::Value;
use switchyard::server::IDLE_TIMEOUT;
use switchyard_core::{ManualClock, UnixMillis};
use switchyard_e2e::harness::{Harness, MANAGEMENT_TOKEN, Setup, header, json_parts};

/// `POST /api/session` with `credential`: the status, the headers and the body.
async fn open_session(h: &Harness, credential: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = h.http.post(h.url("/api/session")).bearer_auth(credential).send().await.unwrap();
    json_parts(response).await
}

/// A session opened with the management token: its token.
async fn session(h: &Harness) -> String {
    let (status, headers, body) = open_session(h, MANAGEMENT_TOKEN).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(header(&headers, "cache-control"), "no-store", "the answer carries a secret");
    body["token"].as_str().expect("a token").to_owned()
}

/// `GET path` with `credential`: the status and the error message, if any.
async fn get(h: &Harness, path: &str, credential: &str) -> (u16, String) {
    let response = h.http.get(h.url(path)).bearer_auth(credential).send().await.unwrap();
    let status = response.status().as_u16();
    if status == 200 {
        return (status, String::new());
    }
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, body["error"]["message"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_ui_session_is_refused_by_the_next_server_on_the_same_data_while_the_management_token_still_works()
 {
    let data = tempfile::tempdir().unwrap();
    let h =
        Harness::start_in(switchyard_testkit::MockUpstream::start().await, data.path(), "").await;
    let old = session(&h).await;
    let hex = old.strip_prefix("sy-ui-").expect("a session token says what it is");
    assert_eq!(hex.len(), 32, "128 random bits");
    assert_ne!(old, MANAGEMENT_TOKEN);
    assert_eq!(get(&h, "/api/monitoring/health", &old).await.0, 200);
    assert_eq!(get(&h, "/api/providers", &old).await.0, 200);

    // A restart: the same data directory, the same management token, a new process's state.
    let mock = h.stop().await;
    let h = Harness::start_in(mock, data.path(), "").await;
    let (status, message) = get(&h, "/api/monitoring/health", &old).await;
    assert_eq!(status, 401, "{message}");
    assert!(message.contains("ends when the server restarts"), "{message}");
    let (status, message) = get(&h, "/api/events", &old).await;
    assert_eq!(status, 401, "the stream does not take it either: {message}");
    // The management token outlives the restart for the CLI and scripts.
    assert_eq!(get(&h, "/api/monitoring/health", MANAGEMENT_TOKEN).await.0, 200);
    let new = session(&h).await;
    assert_ne!(new, old);
    assert_eq!(get(&h, "/api/monitoring/health", &new).await.0, 200);
}

#[tokio::test]
async fn the_event_stream_takes_a_ui_session_and_refuses_the_management_token_naming_the_fix() {
    let h = Harness::start("").await;
    let (status, message) = get(&h, "/api/events", MANAGEMENT_TOKEN).await;
    assert_eq!(status, 403, "{message}");
    assert!(message.contains("POST /api/session"), "{message}");

    let token = session(&h).await;
    let response = h.http.get(h.url("/api/events")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "content-type"), "text/event-stream");
}

#[tokio::test]
async fn the_management_token_and_a_session_both_work_on_the_rest_of_the_api() {
    let h = Harness::start("").await;
    let token = session(&h).await;
    for credential in [MANAGEMENT_TOKEN, token.as_str()] {
        for path in ["/api/server", "/api/monitoring/health", "/api/settings", "/metrics"] {
            let (status, message) = get(&h, path, credential).await;
            assert_eq!(status, 200, "{path}: {message}");
        }
        let response = h
            .http
            .put(h.url("/api/routing"))
            .bearer_auth(credential)
            .json(&serde_json::json!({"paused": false}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "a change, not only reads");
    }
    let wrong = get(&h, "/api/monitoring/health", "sy-ui-00000000000000000000000000000000").await;
    assert_eq!(wrong.0, 401, "{}", wrong.1);
}

#[tokio::test]
async fn a_session_opens_no_other_session_and_signing_out_ends_it() {
    let h = Harness::start("").await;
    let token = session(&h).await;
    let (status, _, body) = open_session(&h, &token).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("management token"), "{body}");
    let (status, _, body) = open_session(&h, "sy-wrong").await;
    assert_eq!(status, 401, "{body}");

    let out = |credential: &str| {
        h.http.request(Method::DELETE, h.url("/api/session")).bearer_auth(credential).send()
    };
    assert_eq!(out(MANAGEMENT_TOKEN).await.unwrap().status(), 403, "no session to end");
    assert_eq!(out(&token).await.unwrap().status(), 204);
    assert_eq!(get(&h, "/api/monitoring/health", &token).await.0, 401);
    assert_eq!(out(&token).await.unwrap().status(), 401, "signed out once");
}

#[tokio::test]
async fn a_session_idle_longer_than_the_timeout_ends_and_each_request_keeps_it_alive() {
    let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
    let h = Harness::start_with(Setup::new("").clock(&clock)).await;
    let token = session(&h).await;
    clock.advance(IDLE_TIMEOUT);
    assert_eq!(get(&h, "/api/server", &token).await.0, 200, "just in time");
    clock.advance(IDLE_TIMEOUT);
    assert_eq!(get(&h, "/api/server", &token).await.0, 200, "the last request restarted it");
    clock.advance(IDLE_TIMEOUT + std::time::Duration::from_millis(1));
    assert_eq!(get(&h, "/api/server", &token).await.0, 401);
    assert_eq!(get(&h, "/api/server", MANAGEMENT_TOKEN).await.0, 200);
}

#[tokio::test]
async fn rotating_the_management_token_ends_the_sessions_opened_with_the_old_one() {
    let h = Harness::start_with(Setup::new("").management_token_file()).await;
    let file = h.data_dir().join(switchyard::keys::MANAGEMENT_FILE);
    let old = std::fs::read_to_string(&file).unwrap();
    let (status, _, body) = open_session(&h, &old).await;
    assert_eq!(status, 201, "{body}");
    let token = body["token"].as_str().unwrap().to_owned();
    assert_eq!(get(&h, "/api/server", &token).await.0, 200);

    let new = switchyard::keys::rotate_management_token(h.data_dir()).unwrap();
    assert_eq!(get(&h, "/api/server", &token).await.0, 401, "its token was rotated");
    assert_eq!(get(&h, "/api/server", &old).await.0, 401);
    let (status, _, body) = open_session(&h, new.expose()).await;
    assert_eq!(status, 201, "{body}");
    let token = body["token"].as_str().unwrap();
    assert_eq!(get(&h, "/api/server", token).await.0, 200);
}

#[tokio::test]
async fn a_browser_on_another_port_cannot_open_a_session_even_with_the_token() {
    let ui = tempfile::tempdir().unwrap();
    std::fs::write(ui.path().join("index.html"), "<!doctype html>").unwrap();
    let h = Harness::start_with(Setup::new("").ui(ui.path())).await;
    let own = format!("http://127.0.0.1:{}", h.port);
    let attempt = |origin: &str, site: &str| {
        h.http
            .post(h.url("/api/session"))
            .bearer_auth(MANAGEMENT_TOKEN)
            .header("origin", origin)
            .header("sec-fetch-site", site)
            .send()
    };
    let other = format!("http://127.0.0.1:{}", h.port.wrapping_add(1));
    assert_eq!(attempt(&other, "same-site").await.unwrap().status(), 403);
    assert_eq!(attempt(&own, "same-site").await.unwrap().status(), 403);
    assert_eq!(attempt(&own, "same-origin").await.unwrap().status(), 201, "the UI itself");
}
