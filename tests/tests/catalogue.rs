//! Catalogue presets end to end: a `preset = "deepseek"` provider whose base URL is
//! pointed at the mock routes, continues a broken stream by the catalogue's continuation
//! default, is ranked by the catalogue's prices under the `cost` strategy, serves a model
//! newer than the snapshot; and `GET /api/catalogue` serves the catalogue to the UI.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use switchyard_e2e::harness::{
    Harness, LOCAL_KEY, Setup, header, json_parts, openai_stream_text, openai_text,
};
use switchyard_testkit::{Behavior, Fault, Reply};

/// `ds` is the DeepSeek preset with nothing but its base URL overridden: no kind, no
/// continuation, no prices written. `oa/gpt-4o` (from the harness) is given a price above
/// DeepSeek's catalogue price, so `cost` must put `ds` first from the catalogue alone.
const CONFIG: &str = r#"
[[providers]]
id = "ds"
preset = "deepseek"
base_url = "{mock}/v1"

[[combos]]
name = "rescue"
targets = [{ target = "oa/gpt-4o" }, { target = "ds/deepseek-chat" }]

[[combos]]
name = "cheapest"
strategy = "cost"
targets = [
  { target = "oa/gpt-4o", price = { input_per_mtok = 50.0, output_per_mtok = 100.0 } },
  { target = "ds/deepseek-chat" },
]

[[combos]]
name = "priced-first"
strategy = "cost"
targets = [{ target = "ds/deepseek-v9-newer-than-the-snapshot" }, { target = "ds/deepseek-chat" }]
"#;

async fn start() -> Harness {
    Harness::start_with(
        Setup::new(CONFIG).timeouts(|t| t.idle_ms = 300).breaker("{ enabled = false }"),
    )
    .await
}

#[tokio::test]
async fn a_deepseek_preset_pointed_at_the_mock_continues_a_broken_stream_by_prefix() {
    let h = start().await;
    h.mock.enqueue("gpt-4o", Behavior::from(Reply::default().chunks(6).fault(Fault::CutAfter(4))));
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .json(&json!({"model": "rescue", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body =
        tokio::time::timeout(Duration::from_secs(10), response.text()).await.unwrap().unwrap();
    assert_eq!(openai_stream_text(&body), "Hello from the mock upstream.", "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let continued = h.mock.attempts_for("deepseek-chat");
    assert_eq!(continued.len(), 1);
    let last = continued[0].body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "assistant", "{last}");
    assert_eq!(last["prefix"], true, "the catalogue's continuation default for DeepSeek: {last}");
    assert_eq!(continued[0].path, "/v1/chat/completions", "the overridden base URL wins");
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(trace.contains("continued"), "{trace}");
}

#[tokio::test]
async fn the_cost_strategy_ranks_a_preset_model_by_its_catalogue_price() {
    let h = start().await;
    for _ in 0..3 {
        let (status, headers, body) =
            json_parts(h.openai("cheapest", false).send().await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "x-switchyard-target"), "ds/deepseek-chat", "{body}");
        assert_eq!(openai_text(&body), "Hello from the mock upstream.");
    }
    assert!(h.mock.attempts_for("gpt-4o").is_empty(), "the priced-higher target is never asked");
}

#[tokio::test]
async fn a_model_newer_than_the_snapshot_routes_normally_and_unpriced_goes_last_under_cost() {
    let h = start().await;
    let (status, headers, _) =
        json_parts(h.openai("ds/deepseek-v9-newer-than-the-snapshot", false).send().await.unwrap())
            .await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-switchyard-target"), "ds/deepseek-v9-newer-than-the-snapshot");
    let (status, headers, _) =
        json_parts(h.openai("priced-first", false).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-switchyard-target"), "ds/deepseek-chat", "unpriced goes last");
}

#[tokio::test]
async fn the_catalogue_api_serves_presets_with_model_facts_behind_the_management_token() {
    let h = start().await;
    let anonymous = h.http.get(h.url("/api/catalogue")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let (status, catalogue) = h.api_get("/api/catalogue").await;
    assert_eq!(status, 200, "{catalogue}");
    assert_eq!(catalogue["source"]["licence"], "MIT");
    let providers = catalogue["providers"].as_array().unwrap();
    let deepseek = providers.iter().find(|p| p["id"] == "deepseek").unwrap();
    assert_eq!(deepseek["kind"], "openai");
    assert_eq!(deepseek["continuation"], "prefix");
    let chat =
        deepseek["models"].as_array().unwrap().iter().find(|m| m["id"] == "deepseek-chat").unwrap();
    assert!(chat["context_window"].as_u64().unwrap() > 0, "{chat}");
    assert!(chat["price"]["input_per_mtok"].as_f64().is_some(), "{chat}");
    let ollama = providers.iter().find(|p| p["id"] == "ollama").unwrap();
    assert_eq!(ollama["discovered"], true);
    assert_eq!(ollama["models"], json!([]));
}

#[tokio::test]
async fn the_provider_view_names_the_preset_and_the_export_writes_it_without_catalogue_facts() {
    let h = start().await;
    let (status, view) = h.api_get("/api/providers/ds").await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["preset"], "deepseek");
    assert_eq!(view["kind"], "openai", "the preset's kind");
    assert_eq!(view["passthrough"], true);
    let exported = h.api_text("/api/config/export").await;
    assert!(exported.contains("preset = \"deepseek\""), "{exported}");
    assert!(!exported.contains("context_window") && !exported.contains("cache_read"), "{exported}");

    // A provider created from a preset through the API needs no kind.
    let created =
        json!({"id": "groq", "preset": "groq", "base_url": format!("{}/v1", h.mock.base_url())});
    let (status, view) = h.api(Method::POST, "/api/providers", &created).await;
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["kind"], "openai");
    let (status, refused) =
        h.api(Method::POST, "/api/providers", &json!({"id": "nope", "preset": "nope"})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["switchyard"]["field"], "preset", "{refused}");
}

#[tokio::test]
async fn the_connect_api_gives_every_tool_its_lines_for_this_port_with_the_key_from_the_body() {
    let h = start().await;
    let (status, guides) =
        h.api(Method::POST, "/api/connect", &json!({"key": "sy-from-the-body"})).await;
    assert_eq!(status, 200, "{guides}");
    let guides = guides.as_array().unwrap();
    assert_eq!(guides.len(), 13);
    let gemini = guides.iter().find(|g| g["tool"] == "gemini-cli").unwrap();
    let text = gemini["snippets"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:{}", h.port)),
        "{text}"
    );
    let claude = guides.iter().find(|g| g["tool"] == "claude-code").unwrap();
    let text = claude["snippets"][0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("ANTHROPIC_BASE_URL=http://127.0.0.1:{}\n", h.port)), "{text}");
    assert!(text.contains("ANTHROPIC_AUTH_TOKEN=sy-from-the-body"), "{text}");
    assert!(text.contains("ANTHROPIC_MODEL=rescue"), "the first combo: {text}");
    let cursor = guides.iter().find(|g| g["tool"] == "cursor").unwrap();
    assert_eq!(cursor["reachable"], false);
    let (status, refused) = h.api(Method::POST, "/api/connect", &json!({"combo": "x"})).await;
    assert_eq!(status, 422, "{refused}");
}
