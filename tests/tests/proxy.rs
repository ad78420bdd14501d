//! The proxy end to end: a real server, a real state file, the mock upstream with scripted
//! faults. Each test is one promise of RESILIENCE.md.

use std::time::Duration;

use serde_json::Value;
use switchyard_e2e::harness::{FALLBACK, Harness, LOCAL_KEY, openai_text};
use switchyard_providers::executor::MAX_IDLE_PER_HOST;
use switchyard_testkit::{Behavior, Reply, Status};
use tokio::time::timeout;

async fn json(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.expect("a JSON body"))
}

fn header<'h>(headers: &'h reqwest::header::HeaderMap, name: &str) -> &'h str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn an_openai_request_is_served_by_an_openai_upstream_with_routing_headers() {
    let h = Harness::start("").await;
    let (status, headers, body) = json(h.openai("oa/gpt-4o", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert!(!openai_text(&body).is_empty(), "{body}");
    assert_eq!(body["model"], "oa/gpt-4o");
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "1");
    let attempts = h.mock.attempts_for("gpt-4o");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].api_key(), Some("oa-1"));
}

#[tokio::test]
async fn an_anthropic_client_is_served_by_a_gemini_upstream_streaming() {
    let h = Harness::start("").await;
    let response = h.anthropic("ge/gemini-2.5-flash", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("event: message_start"), "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    assert_eq!(h.mock.attempts_for("gemini-2.5-flash").len(), 1);
}

#[tokio::test]
async fn a_503_on_the_primary_falls_back_and_the_fallback_is_named() {
    let h = Harness::start(FALLBACK).await;
    h.mock.enqueue("gpt-4o", Status::new(503));
    h.mock.enqueue("gpt-4o", Status::new(503));
    let (status, headers, body) = json(h.openai("smart", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "an/claude-fallback");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-fallback");
    assert_eq!(h.mock.attempts_for("claude-fallback").len(), 1);
}

#[tokio::test]
async fn a_stream_is_held_until_its_first_event_so_a_slow_primary_falls_back() {
    let h = Harness::start(FALLBACK).await;
    h.mock.enqueue("gpt-4o", Behavior::slow_first_event(Duration::from_secs(10)));
    let response = h.openai("smart", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "an/claude-fallback");
    let text = response.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[tokio::test]
async fn a_stream_cut_after_the_first_byte_ends_with_an_error_event_never_done() {
    let h = Harness::start("").await;
    h.mock.enqueue("gpt-4o", Behavior::cut_after(2));
    let response = h.openai("oa/gpt-4o", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(!text.contains("[DONE]"), "{text}");
    assert!(text.contains("\"error\""), "{text}");
}

#[tokio::test]
async fn a_429_locks_that_model_on_that_key_only_and_the_next_key_serves() {
    let h = Harness::start("").await;
    h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(60)));
    let (status, headers, body) = json(h.openai("oa/gpt-4o", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
    let keys: Vec<_> = h
        .mock
        .attempts_for("gpt-4o")
        .iter()
        .map(|a| a.api_key().unwrap_or("").to_owned())
        .collect();
    assert_eq!(keys, ["oa-1", "oa-2"]);
    // The next request goes straight to the second key; the other model still uses the first.
    let (status, _, _) = json(h.openai("oa/gpt-4o", false).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(h.mock.attempts_for("gpt-4o").last().unwrap().api_key(), Some("oa-2"));
    let (status, _, _) = json(h.openai("oa/gpt-4o-mini", false).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(h.mock.attempts_for("gpt-4o-mini")[0].api_key(), Some("oa-1"));
}

#[tokio::test]
async fn when_every_candidate_is_rate_limited_the_client_gets_one_429_with_retry_after() {
    let h = Harness::start("").await;
    for _ in 0..2 {
        h.mock.enqueue("gpt-4o", Status::new(429).retry_after(Duration::from_secs(30)));
    }
    let (status, headers, body) = json(h.openai("oa/gpt-4o", false).send().await.unwrap()).await;
    assert_eq!(status, 429, "{body}");
    let retry_after: u64 = header(&headers, "retry-after").parse().unwrap();
    assert!((29..=30).contains(&retry_after), "{retry_after}");
    let candidates = body["error"]["switchyard"]["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 2, "{body}");
    // Benched: the next request does not reach the upstream at all.
    let before = h.mock.total_attempts();
    let (status, _, _) = json(h.openai("oa/gpt-4o", false).send().await.unwrap()).await;
    assert_eq!(status, 429);
    assert_eq!(h.mock.total_attempts(), before);
}

#[tokio::test]
async fn a_client_error_is_returned_as_is_without_fallback() {
    let h = Harness::start(FALLBACK).await;
    h.mock.enqueue("gpt-4o", Status::new(422));
    let (status, _, body) = json(h.openai("smart", false).send().await.unwrap()).await;
    assert_eq!(status, 422, "{body}");
    assert!(h.mock.attempts_for("claude-fallback").is_empty());
}

#[tokio::test]
async fn forged_host_browser_origin_and_missing_key_are_refused_before_any_upstream_attempt() {
    let h = Harness::start("").await;
    let forged = h.openai("oa/gpt-4o", false).header("host", "evil.example").send().await.unwrap();
    assert_eq!(forged.status(), 403);
    let browser =
        h.openai("oa/gpt-4o", false).header("origin", "https://evil.example").send().await.unwrap();
    assert_eq!(browser.status(), 403);
    let anonymous = h
        .http
        .post(h.url("/v1/chat/completions"))
        .json(&serde_json::json!({"model": "oa/gpt-4o", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong =
        h.http.post(h.url("/v1/messages")).header("x-api-key", "sy-nope").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let (_, _, body) = json(wrong).await;
    assert_eq!(body["type"], "error", "Anthropic error shape on /v1/messages: {body}");
    assert_eq!(h.mock.total_attempts(), 0);
    let _ = LOCAL_KEY;
}

#[tokio::test]
async fn models_lists_combos_and_provider_models() {
    let h = Harness::start(FALLBACK).await;
    let body: Value = h
        .http
        .get(h.url("/v1/models"))
        .bearer_auth(LOCAL_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> =
        body["data"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["smart", "oa/gpt-4o", "oa/gpt-4o-mini"]);
}

/// After a burst the proxy keeps a bounded pool of idle upstream connections, not one per
/// request it had in flight: each idle connection holds buffers and a socket for the pool's whole
/// idle timeout (found by the load test: a thousand concurrent requests left about 23 MB live).
#[tokio::test]
async fn after_a_burst_only_a_bounded_pool_of_idle_upstream_connections_stays_open() {
    let h = Harness::start("").await;
    // Slow enough that every request of the burst is in flight at once, each on a connection of
    // its own.
    let slow = Reply::default().first_event_after(Duration::from_millis(300));
    h.mock.set_default("gpt-4o", slow);
    let burst = 3 * MAX_IDLE_PER_HOST;
    let requests = (0..burst).map(|_| async {
        let response = h.openai("oa/gpt-4o", false).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    });
    futures_util::future::join_all(requests).await;
    assert_eq!(h.mock.attempt_count("gpt-4o"), burst);
    timeout(Duration::from_secs(10), h.mock.wait_for_open_connections_at_most(MAX_IDLE_PER_HOST))
        .await
        .unwrap_or_else(|_| {
            panic!("{} upstream connections still open after the burst", h.mock.open_connections())
        });
}

#[tokio::test]
async fn a_direct_request_for_a_model_the_providers_own_list_leaves_out_is_refused_naming_the_list()
{
    // `oa` lists gpt-4o and gpt-4o-mini; `an` lists nothing, so it takes any model.
    let h = Harness::start("").await;
    let (status, _, body) = json(h.openai("oa/gpt-5", false).send().await.unwrap()).await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("provider \"oa\" lists its models"), "{message}");
    assert!(message.contains("add \"gpt-5\" to the `models` of provider \"oa\""), "{message}");
    assert_eq!(h.mock.total_attempts(), 0, "nothing reached the upstream");
    let (status, _, body) = json(h.openai("an/any-model", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "a provider without a list serves any model: {body}");
}
