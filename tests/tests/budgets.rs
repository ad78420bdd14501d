//! Budgets: a budget announces 80 % once and its limit once on the event
//! stream; once an enforced one is spent, requests are refused before any upstream is asked,
//! in the client's dialect (Chat, Responses, Anthropic), with `429`, `x-should-retry: false`,
//! no `Retry-After`, and a message naming the budget and when it resets. A key's budget stops
//! that key only; a budget that is not enforced only warns.

use serde_json::{Value, json};
use switchyard_core::ManualClock;
use switchyard_core::resilience::HealthEvent;
use switchyard_core::usage::budget::{BudgetPeriod, BudgetState, BudgetView};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, Setup, T0};
use switchyard_testkit::{Behavior, Reply, Tokens};
use tokio::sync::broadcast::Receiver;

/// Every answer costs $0.10: 1,000 prompt tokens at $100 per million, output free.
const PRICED: &str = r#"
[[combos]]
name = "paid"
targets = [{ target = "oa/gpt-4o", price = { input_per_mtok = 100.0, output_per_mtok = 0.0 } }]
"#;

fn reply() -> Behavior {
    let usage = Tokens { input: 1_000, output: 10, ..Tokens::default() };
    Behavior::Reply(Reply { usage: Some(usage), ..Reply::default() })
}

async fn start(budgets: &str) -> (Harness, ManualClock) {
    let clock = ManualClock::new(T0);
    let h = Harness::start_with(Setup::new(&format!("{PRICED}\n{budgets}")).clock(&clock)).await;
    h.mock.set_default("gpt-4o", reply());
    (h, clock)
}

/// A non-streamed request for `paid` in `dialect` through `key`: status, headers, body.
async fn ask(h: &Harness, dialect: &str, key: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let request = match dialect {
        "chat" => h.http.post(h.url("/v1/chat/completions")).bearer_auth(key).json(
            &json!({"model": "paid", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        "responses" => h
            .http
            .post(h.url("/v1/responses"))
            .bearer_auth(key)
            .json(&json!({"model": "paid", "input": "hi"})),
        "anthropic" => h.http.post(h.url("/v1/messages")).header("x-api-key", key).json(
            &json!({"model": "paid", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        other => unreachable!("{other}"),
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

/// The budget events published since the last call.
fn budget_events(events: &mut Receiver<HealthEvent>) -> Vec<BudgetView> {
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let HealthEvent::Budget { budget, .. } = event {
            seen.push(budget);
        }
    }
    seen
}

#[tokio::test]
async fn a_spent_enforced_budget_refuses_in_every_dialect_and_its_80_percent_is_announced_once() {
    // $0.33 a day: 30, 61, 91 (a warning), 121 % (reached), then refused.
    let (h, _clock) =
        start("[settings.budgets]\ndaily = { limit_usd = 0.33, enforce = true }").await;
    let mut events = h.app.registry.subscribe();
    let mut announced = Vec::new();
    for (i, dialect) in ["chat", "responses", "anthropic", "chat"].into_iter().enumerate() {
        let (status, _, body) = ask(&h, dialect, LOCAL_KEY).await;
        assert_eq!(status, 200, "request {i} ({dialect}) is within the budget: {body}");
        announced.extend(budget_events(&mut events));
    }
    let seen: Vec<(BudgetState, u32)> = announced.iter().map(|b| (b.state, b.percent)).collect();
    assert_eq!(seen, [(BudgetState::Warning, 90), (BudgetState::Reached, 121)]);
    assert!(announced.iter().all(|b| b.key.is_none() && b.period == BudgetPeriod::Daily));

    let upstream_before = h.mock.attempts().len();
    for dialect in ["chat", "responses", "anthropic"] {
        let (status, headers, body) = ask(&h, dialect, LOCAL_KEY).await;
        assert_eq!(status, 429, "{dialect}: {body}");
        assert_eq!(headers["x-should-retry"], "false", "{dialect}");
        assert!(headers.get("retry-after").is_none(), "{dialect}: no Retry-After");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("the daily budget is spent ($0.4 of $0.33)"),
            "{dialect}: {message}"
        );
        assert!(message.contains("resets at 2027-01-16T00:00:00Z"), "{dialect}: {message}");
        let kind = body["error"]["type"].as_str().unwrap_or_default();
        if dialect == "anthropic" {
            assert_eq!(body["type"], "error", "Anthropic's error shape: {body}");
            assert_eq!(kind, "rate_limit_error");
        } else {
            assert_eq!(kind, "insufficient_quota", "{dialect}: OpenAI's shape: {body}");
        }
        assert_eq!(body["error"]["switchyard"]["budget"]["state"], "reached", "{dialect}");
    }
    assert_eq!(h.mock.attempts().len(), upstream_before, "no upstream was asked");
    assert!(budget_events(&mut events).is_empty(), "refusals announce nothing more");

    let (status, budgets) = h.api_get("/api/usage/budgets").await;
    assert_eq!(status, 200);
    assert_eq!(budgets[0]["spent"], "0.4");
    assert_eq!(budgets[0]["limit"], "0.33");
    assert_eq!(budgets[0]["state"], "reached");
    // The refusals are logged, as errors, and counted in the aggregates.
    let (_, log) = h.api_get("/api/requests").await;
    assert_eq!(log[0]["status"], 429);
    let (_, usage) = h.api_get("/api/usage").await;
    assert_eq!(usage["total"]["requests"], 7);
    assert_eq!(usage["total"]["errors"], 3);
}

#[tokio::test]
async fn a_keys_budget_stops_that_key_only_and_resets_with_the_day() {
    let budgets = "[settings.budgets.keys.editor]\ndaily = { limit_usd = 0.15, enforce = true }";
    let (h, clock) = start(budgets).await;
    let (status, created) =
        h.api(reqwest::Method::POST, "/api/keys", &json!({"name": "editor"})).await;
    assert_eq!(status, 201);
    let editor = created["key"].as_str().unwrap().to_owned();
    for _ in 0..2 {
        assert_eq!(ask(&h, "chat", &editor).await.0, 200);
    }
    let (status, _, body) = ask(&h, "anthropic", &editor).await;
    assert_eq!(status, 429, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("the daily budget of key \"editor\" is spent"), "{message}");
    assert_eq!(ask(&h, "chat", LOCAL_KEY).await.0, 200, "another key is not stopped");

    // The next UTC day starts from zero.
    let midnight = 86_400_000 - T0.0 % 86_400_000;
    clock.advance(std::time::Duration::from_millis(midnight));
    assert_eq!(ask(&h, "chat", &editor).await.0, 200);
}

#[tokio::test]
async fn a_budget_that_is_not_enforced_only_warns() {
    let (h, _clock) = start("[settings.budgets]\nmonthly = { limit_usd = 0.1 }").await;
    let mut events = h.app.registry.subscribe();
    for _ in 0..3 {
        assert_eq!(ask(&h, "chat", LOCAL_KEY).await.0, 200);
    }
    let seen: Vec<(BudgetPeriod, BudgetState)> =
        budget_events(&mut events).iter().map(|b| (b.period, b.state)).collect();
    assert_eq!(seen, [(BudgetPeriod::Monthly, BudgetState::Reached)]);
    let (_, budgets) = h.api_get("/api/usage/budgets").await;
    assert_eq!(
        (budgets[0]["percent"].as_u64(), budgets[0]["enforce"].as_bool()),
        (Some(300), Some(false))
    );
}

#[tokio::test]
async fn budgets_are_settings_edited_live_and_refused_with_the_field_named() {
    let (h, _clock) = start("").await;
    let patch = json!({"daily": {"limit_usd": -1}});
    let (status, body) = h.api(reqwest::Method::PATCH, "/api/settings/budgets", &patch).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["switchyard"]["field"], "budgets.daily.limit_usd");
    let patch = json!({"daily": {"limit_usd": 0.05, "enforce": true}});
    let (status, body) = h.api(reqwest::Method::PATCH, "/api/settings/budgets", &patch).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ask(&h, "chat", LOCAL_KEY).await.0, 200);
    assert_eq!(ask(&h, "chat", LOCAL_KEY).await.0, 429, "applied at once");
    let off = json!({"tracking": false});
    let (status, body) = h.api(reqwest::Method::PATCH, "/api/settings/usage", &off).await;
    assert_eq!(status, 422, "budgets need tracking: {body}");
    assert_eq!(body["error"]["switchyard"]["field"], "usage.tracking");
    let (status, _) =
        h.api(reqwest::Method::PATCH, "/api/settings/budgets", &json!({"daily": null})).await;
    assert_eq!(status, 200);
    assert_eq!(ask(&h, "chat", LOCAL_KEY).await.0, 200, "lifted at once");
}

#[tokio::test]
async fn a_budget_set_while_running_counts_what_the_day_spent_before_it() {
    let (h, _clock) = start("").await;
    for _ in 0..2 {
        assert_eq!(ask(&h, "chat", LOCAL_KEY).await.0, 200);
    }
    // $0.20 spent before any budget existed: a $0.25 budget set now is 80 % spent.
    let patch = json!({"daily": {"limit_usd": 0.25}});
    let (status, body) = h.api(reqwest::Method::PATCH, "/api/settings/budgets", &patch).await;
    assert_eq!(status, 200, "{body}");
    let (_, budgets) = h.api_get("/api/usage/budgets").await;
    assert_eq!(
        (
            budgets[0]["spent"].as_str(),
            budgets[0]["percent"].as_u64(),
            budgets[0]["state"].as_str()
        ),
        (Some("0.2"), Some(80), Some("warning")),
        "{budgets}"
    );
}
