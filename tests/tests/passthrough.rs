//! The two paths through the router (ARCHITECTURE.md): a request to an upstream of the
//! client's own dialect goes as the client wrote it, `model` aside; to another dialect it is
//! translated, and what cannot be carried is named in the routing trace. Plus the rest of the
//! surface Claude Code touches: `HEAD /` and `count_tokens`.

use serde_json::{Value, json};
use switchyard_e2e::harness::{
    Harness, LOCAL_KEY, anthropic_stream_text, header, sse_data, sse_events,
};
use switchyard_testkit::Behavior;

/// The shape of a Claude Code 2.1 turn: fields this router has no model for, a system message
/// in the middle of the conversation, prompt caching, adaptive thinking.
fn claude_code_body(model: &str) -> Value {
    json!({
        "model": model,
        "max_tokens": 32000,
        "stream": true,
        "system": [
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what is in this folder?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}]},
            {"role": "system", "content": "The user switched to plan mode."},
            {"role": "user", "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]}
        ],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": "user_0123"},
        "a_field_from_next_month": {"nested": [1, 2.50, "x"]}
    })
}

const BETAS: &str = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,mid-conversation-system-2026-04-07";

async fn send_claude_code(h: &Harness, model: &str) -> reqwest::Response {
    h.http
        .post(h.url("/v1/messages?beta=true"))
        .header("x-api-key", LOCAL_KEY)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", BETAS)
        .json(&claude_code_body(model))
        .send()
        .await
        .unwrap()
}

/// The last request log entry's routing trace.
async fn last_trace(h: &Harness) -> Value {
    let (status, log) = h.api_get("/api/requests").await;
    assert_eq!(status, 200, "{log}");
    let entries = log.as_array().or_else(|| log["requests"].as_array()).expect("a list").clone();
    let last = entries.first().expect("a logged request").clone();
    match &last["trace"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    }
}

/// The trace's last attempt: the one that served (`used` lines, what each attempt used, follow).
fn last_attempt(trace: &Value) -> Value {
    let entries = trace.as_array().expect("a trace");
    entries.iter().rev().find(|e| e["event"] == "attempted").expect("an attempt").clone()
}

#[tokio::test]
async fn an_anthropic_request_reaches_an_anthropic_upstream_unchanged_but_for_its_model() {
    let h = Harness::start("").await;
    h.mock.script("claude-up", [Behavior::reply("Plain answer.")]);
    let response = send_claude_code(&h, "an/claude-up").await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "an/claude-up");
    let text = response.text().await.unwrap();
    assert_eq!(anthropic_stream_text(&text), "Plain answer.");
    assert_eq!(sse_events(&text).last(), Some(&"message_stop"), "{text}");
    let start = &sse_data(&text)[0];
    assert_eq!(start["message"]["model"], "an/claude-up", "the model that served: {text}");

    let attempts = h.mock.attempts_for("claude-up");
    assert_eq!(attempts.len(), 1);
    let sent = &attempts[0];
    assert_eq!(sent.query.as_deref(), Some("beta=true"));
    assert_eq!(sent.header("anthropic-beta"), Some(BETAS));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    let mut expected = claude_code_body("claude-up");
    expected["model"] = json!("claude-up");
    assert_eq!(sent.body, expected, "every field the client sent, and only the model changed");

    let trace = last_trace(&h).await;
    let served = last_attempt(&trace);
    assert_eq!(served["path"], "passthrough", "{trace}");
}

#[tokio::test]
async fn the_same_request_to_an_openai_target_is_translated_and_the_trace_names_what_was_dropped() {
    let h = Harness::start("").await;
    h.mock.script("gpt-4o", [Behavior::reply("Translated answer.")]);
    let response = send_claude_code(&h, "oa/gpt-4o").await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert_eq!(anthropic_stream_text(&text), "Translated answer.", "{text}");
    assert_eq!(sse_events(&text).last(), Some(&"message_stop"), "{text}");

    let sent = &h.mock.attempts_for("gpt-4o")[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    let messages = sent.body["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are Claude Code.\n\nThe user switched to plan mode."}),
        "a compatible host gets the late system message merged into the leading one"
    );
    assert!(messages[1..].iter().all(|m| m["role"] != "system"), "{messages:?}");
    assert!(
        sent.body.get("reasoning_effort").is_none(),
        "gpt-4o takes no reasoning parameters: it would refuse the whole turn"
    );
    for absent in ["context_management", "metadata", "thinking", "a_field_from_next_month"] {
        assert!(sent.body.get(absent).is_none(), "{absent} reached an OpenAI upstream");
    }

    let trace = last_trace(&h).await;
    let served = last_attempt(&trace);
    assert_eq!(served["path"], "translated", "{trace}");
    let dropped: Vec<&str> =
        served["dropped"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for name in [
        "context_management",
        "metadata",
        "a_field_from_next_month",
        "cache_control",
        "reasoning (the model takes no reasoning parameters)",
    ] {
        assert!(dropped.contains(&name), "{name} not named in {dropped:?}");
    }
}

#[tokio::test]
async fn a_provider_with_passthrough_off_gets_the_request_re_encoded() {
    let h = Harness::start(
        r#"
[[providers]]
id = "strict"
kind = "anthropic"
base_url = "{mock}"
passthrough = false
"#,
    )
    .await;
    h.mock.script("claude-strict", [Behavior::reply("Re-encoded.")]);
    let response = send_claude_code(&h, "strict/claude-strict").await;
    assert_eq!(response.status(), 200);
    assert_eq!(anthropic_stream_text(&response.text().await.unwrap()), "Re-encoded.");
    let sent = &h.mock.attempts_for("claude-strict")[0];
    assert_eq!(sent.query, None, "the client's query is for passthrough only");
    assert_eq!(sent.body["context_management"], claude_code_body("x")["context_management"]);
    assert_eq!(
        sent.body["messages"][2],
        json!({"role": "system", "content": [{"type": "text", "text": "The user switched to plan mode."}]}),
        "an Anthropic client's own mid-conversation system message stays in place"
    );
    let trace = last_trace(&h).await;
    assert_eq!(last_attempt(&trace)["path"], "translated", "{trace}");
}

#[tokio::test]
async fn a_non_streamed_passthrough_answer_is_the_upstreams_body_with_the_served_model() {
    let h = Harness::start("").await;
    h.mock.script("claude-up", [Behavior::reply("Whole answer.")]);
    let mut body = claude_code_body("an/claude-up");
    body["stream"] = json!(false);
    let response = h
        .http
        .post(h.url("/v1/messages"))
        .header("x-api-key", LOCAL_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["model"], "an/claude-up");
    assert_eq!(answer["content"][0]["text"], "Whole answer.");
    assert_eq!(answer["stop_reason"], "end_turn");
}

#[tokio::test]
async fn a_body_newer_than_the_parser_still_passes_through_but_is_refused_for_translation() {
    let h = Harness::start(
        r#"
[[combos]]
name = "mixed"
targets = [{ target = "an/claude-up" }]

[[combos]]
name = "openai-only"
targets = [{ target = "oa/gpt-4o" }]
"#,
    )
    .await;
    // A role no dialect has yet: the canonical model cannot hold it.
    let body = json!({"model": "mixed", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"}, {"role": "oracle", "content": "psst"}]});
    let send = |body: Value| {
        h.http.post(h.url("/v1/messages")).header("x-api-key", LOCAL_KEY).json(&body).send()
    };
    let response = send(body.clone()).await.unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(h.mock.attempts_for("claude-up")[0].body["messages"][1]["role"], "oracle");

    let mut body = body;
    body["model"] = json!("openai-only");
    let response = send(body).await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("messages[1].role"), "the field is named: {message}");
    assert!(h.mock.attempts_for("gpt-4o").is_empty());
}

#[tokio::test]
async fn head_of_the_root_answers_without_a_key_and_nothing_else_does() {
    let h = Harness::start("").await;
    let response = h.http.head(h.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.content_length(), Some(0));
    let response = h.http.get(h.url("/v1/models")).send().await.unwrap();
    assert_eq!(response.status(), 401, "every other route keeps the key check");
    let response =
        h.http.head(h.url("/")).header("origin", "https://evil.example").send().await.unwrap();
    assert_eq!(response.status(), 403, "the Origin check still holds");
}

#[tokio::test]
async fn count_tokens_is_an_estimate_marked_as_such_when_no_anthropic_target_can_count() {
    let h = Harness::start("").await;
    let response = h
        .http
        .post(h.url("/v1/messages/count_tokens?beta=true"))
        .header("x-api-key", LOCAL_KEY)
        .json(&json!({"model": "oa/gpt-4o", "messages": [{"role": "user", "content": "how many tokens is this sentence?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-estimate"), "true");
    let counted: Value = response.json().await.unwrap();
    assert!(counted["input_tokens"].as_u64().unwrap() >= 5, "{counted}");
    assert!(h.mock.attempts().is_empty(), "nothing was sent to an OpenAI upstream");
}

/// A real Claude Code 2.1.197 main turn, exactly as it was sent (captured by the recording
/// mock, ids redacted), and the headers it came with.
const REAL_REQUEST: &str = include_str!(
    "../../crates/switchyard-providers/tests/fixtures/real/claude-code-2.1.197.request.json"
);
const REAL_HEADERS: &str = include_str!(
    "../../crates/switchyard-providers/tests/fixtures/real/claude-code-2.1.197.headers.json"
);

#[tokio::test]
async fn a_real_claude_code_turn_reaches_the_upstream_byte_for_byte_except_its_model() {
    let h = Harness::start(
        r#"
[[combos]]
name = "combo-main"
targets = [{ target = "an/claude-real" }]
"#,
    )
    .await;
    let captured: Value = serde_json::from_str(REAL_HEADERS).unwrap();
    let mut request = h
        .http
        .post(h.url(&format!("/v1/messages?{}", captured["query"].as_str().unwrap())))
        .header("x-api-key", LOCAL_KEY)
        .body(REAL_REQUEST);
    for (name, value) in captured["headers"].as_object().unwrap() {
        if !matches!(name.as_str(), "x-api-key" | "accept-encoding") {
            request = request.header(name, value.as_str().unwrap());
        }
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert_eq!(sse_events(&text).last(), Some(&"message_stop"), "{text}");

    let sent = &h.mock.attempts_for("claude-real")[0];
    let expected = REAL_REQUEST.replacen(r#""model":"combo-main""#, r#""model":"claude-real""#, 1);
    assert_ne!(expected, REAL_REQUEST, "the fixture names its model as the test expects");
    assert!(
        sent.raw_body == expected.as_bytes(),
        "the upstream got other bytes than the client sent, model aside"
    );
    assert_eq!(sent.query.as_deref(), Some("beta=true"));
    for name in ["anthropic-beta", "anthropic-version"] {
        assert_eq!(sent.header(name), captured["headers"][name].as_str(), "{name}");
    }
}

#[tokio::test]
async fn count_tokens_is_answered_by_the_routes_anthropic_target() {
    let h = Harness::start(
        r#"
[[combos]]
name = "mixed"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-count" }]
"#,
    )
    .await;
    let response = h
        .http
        .post(h.url("/v1/messages/count_tokens?beta=true"))
        .header("x-api-key", LOCAL_KEY)
        .header("anthropic-beta", BETAS)
        .json(&json!({"model": "mixed", "messages": [{"role": "user", "content": "count me"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "an/claude-count");
    assert!(response.headers().get("x-switchyard-estimate").is_none());
    let counted: Value = response.json().await.unwrap();
    assert!(counted["input_tokens"].is_u64(), "{counted}");
    assert!(h.mock.attempts_for("gpt-4o").is_empty(), "the OpenAI target is not asked");
}

/// An OpenAI-compatible host with an Anthropic endpoint beside its own (Kimi, GLM, DeepSeek,
/// `MiniMax`, Qwen): Claude Code's request reaches the Anthropic one as it was sent but for
/// `model`, with the provider's key in `x-api-key`; an OpenAI client reaches the OpenAI one,
/// also untranslated.
#[tokio::test]
async fn a_host_with_both_apis_takes_each_clients_request_in_its_own_dialect() {
    let extra = r#"
[[providers]]
id = "dual"
kind = "openai"
base_url = "{mock}/v1"
anthropic_base_url = "{mock}"
credentials = [{ id = "d-1", secret = "env:OA_1" }]
"#;
    let h = Harness::start(extra).await;
    h.mock.script(
        "glm",
        [Behavior::reply("From its Anthropic side."), Behavior::reply("From its OpenAI side.")],
    );
    let response = send_claude_code(&h, "dual/glm").await;
    assert_eq!(response.status(), 200);
    assert_eq!(anthropic_stream_text(&response.text().await.unwrap()), "From its Anthropic side.");
    let sent = h.mock.attempts_for("glm").pop().expect("sent");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.query.as_deref(), Some("beta=true"));
    assert_eq!(sent.header("x-api-key"), Some("oa-1"), "the provider's key, as Anthropic takes it");
    assert_eq!(sent.header("anthropic-beta"), Some(BETAS));
    let mut expected = claude_code_body("glm");
    expected["model"] = json!("glm");
    assert_eq!(sent.body, expected, "every field the client sent, and only the model changed");
    assert_eq!(last_attempt(&last_trace(&h).await)["path"], "passthrough");

    let chat =
        json!({"model": "dual/glm", "messages": [{"role": "user", "content": "hi"}], "seed": 7});
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = h.mock.attempts_for("glm").pop().expect("sent");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.body["seed"], 7, "passed through: {}", sent.body);
    assert_eq!(last_attempt(&last_trace(&h).await)["path"], "passthrough");
}
