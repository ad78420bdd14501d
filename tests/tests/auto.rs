//! `auto`: `model = "auto"` (and `auto:fast`, `auto:cheap`, `auto:smart`) routes to
//! the best configured model that fits the request, by a score whose factors the trace lists
//! and `x-switchyard-decision` summarises.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, header, json_parts};
use switchyard_testkit::Status;

/// Three models the mock answers, on their own providers, with facts that tell them apart:
/// `small` has a small window and no tools, `pricey` costs much, `cheap` costs little. Only
/// these are `auto`'s candidates.
const POOL: &str = r#"
[[providers]]
id = "p-small"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "s-1", secret = "env:OA_1" }]
models = [{ id = "small", context_window = 4000, tools = false, price = { input_per_mtok = 0.1, output_per_mtok = 0.2 } }]

[[providers]]
id = "p-pricey"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "p-1", secret = "env:OA_1" }]
models = [{ id = "pricey", context_window = 200000, tools = true, reasoning = true, price = { input_per_mtok = 15.0, output_per_mtok = 75.0 } }]

[[providers]]
id = "p-cheap"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "c-1", secret = "env:OA_1" }]
models = [{ id = "cheap", context_window = 128000, tools = true, price = { input_per_mtok = 0.15, output_per_mtok = 0.6 } }]

[settings.auto]
allow = ["p-small/*", "p-pricey/*", "p-cheap/*"]
"#;

async fn ask(h: &Harness, model: &str, body: Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut body = body;
    body["model"] = model.into();
    let request = h.http.post(h.url("/v1/chat/completions")).bearer_auth(LOCAL_KEY).json(&body);
    json_parts(request.send().await.unwrap()).await
}

fn chat(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

fn with_tools() -> Value {
    json!({
        "messages": [{"role": "user", "content": "list the files"}],
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
    })
}

async fn last_trace(h: &Harness) -> Vec<Value> {
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    log[0]["trace"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn auto_cheap_sends_a_small_request_to_the_cheapest_model_and_says_why() {
    let h = Harness::start(POOL).await;
    let (status, headers, answer) = ask(&h, "auto:cheap", chat("hi")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "p-small/small");
    let decision = header(&headers, "x-switchyard-decision");
    assert!(decision.starts_with("auto:cheap p-small/small score="), "{decision}");
    assert!(
        decision.contains(" margin=") && decision.contains(" next=p-cheap/cheap"),
        "{decision}"
    );
    // The trace lists the top candidates with each factor's value and weight.
    let trace = last_trace(&h).await;
    let ranked: Vec<&Value> = trace.iter().filter(|e| e["event"] == "ranked").collect();
    assert_eq!(ranked.len(), 3, "{trace:?}");
    assert_eq!(
        (ranked[0]["rank"].as_u64(), ranked[0]["target"].as_str()),
        (Some(1), Some("p-small/small"))
    );
    assert_eq!(ranked[0]["decision"], decision);
    let factors: Vec<&str> = ranked[0]["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        factors,
        ["health", "headroom", "affinity", "latency", "price", "fit", "capability"]
    );
    let price =
        ranked[0]["factors"].as_array().unwrap().iter().find(|f| f["name"] == "price").unwrap();
    assert_eq!(price["weight"], "6", "auto:cheap weighs price 6: {price}");
    // Under `auto:smart` the capable one wins instead.
    let (_, headers, _) = ask(&h, "auto:smart", chat("hi")).await;
    assert_eq!(header(&headers, "x-switchyard-target"), "p-pricey/pricey");
}

#[tokio::test]
async fn a_request_with_tools_skips_the_target_without_them() {
    let h = Harness::start(POOL).await;
    let (status, headers, answer) = ask(&h, "auto:cheap", with_tools()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "p-cheap/cheap");
    let trace = last_trace(&h).await;
    assert!(
        trace.iter().any(|e| e["target"] == "p-small/small" && e["reason"] == "auto_no_tools"),
        "{trace:?}"
    );
    assert!(h.mock.attempts_for("small").is_empty());
}

#[tokio::test]
async fn a_request_too_large_for_a_small_window_goes_to_a_larger_one() {
    let h = Harness::start(POOL).await;
    let long = "word ".repeat(8_000);
    let (status, headers, answer) = ask(&h, "auto:cheap", chat(&long)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "p-cheap/cheap");
    let trace = last_trace(&h).await;
    assert!(trace.iter().any(|e| e["reason"] == "auto_window_too_small"), "{trace:?}");
}

#[tokio::test]
async fn a_benched_target_never_wins() {
    let h = Harness::start(POOL).await;
    // The cheapest fails and is locked: the next request goes to the next best.
    h.mock.enqueue("small", Status::new(404));
    let (status, headers, _) = ask(&h, "auto:cheap", chat("hi")).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "p-cheap/cheap"));
    let (status, headers, _) = ask(&h, "auto:cheap", chat("hi again")).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "p-cheap/cheap"));
    let decision = header(&headers, "x-switchyard-decision");
    assert!(
        decision.starts_with("auto:cheap p-cheap/cheap"),
        "the benched one is not ranked: {decision}"
    );
    assert_eq!(h.mock.attempts_for("small").len(), 1, "tried once, then benched");
}

#[tokio::test]
async fn a_combo_may_rank_its_own_targets_by_auto() {
    let extra = format!(
        "{POOL}\n[[combos]]\nname = \"mine\"\nstrategy = \"auto\"\ntargets = [{{ target = \"p-pricey/pricey\" }}, {{ target = \"p-cheap/cheap\" }}]\n"
    );
    let h = Harness::start(&extra).await;
    let (status, headers, answer) = ask(&h, "mine", with_tools()).await;
    assert_eq!(status, 200, "{answer}");
    assert!(header(&headers, "x-switchyard-decision").starts_with("auto "), "{headers:?}");
}
