//! The Gemini front door: `/v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent` (SSE with `alt=sse`, one JSON array without), `:countTokens`, the
//! model list; the local key from `x-goog-api-key` or `?key=` (never forwarded); Gemini's
//! error shape on every `/v1beta` path; passthrough to a Gemini upstream byte for byte but for
//! the model, translation to the others; and Node's `fetch` (`sec-fetch-mode: cors`, no
//! `Origin`) admitted on every dialect while a browser's request is refused.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, header, sse_data};
use switchyard_testkit::Behavior;

/// A real Gemini CLI 0.61.0 turn, exactly as it was sent (paths redacted), and its headers.
const REAL_REQUEST: &str = include_str!(
    "../../crates/switchyard-providers/tests/fixtures/real/gemini-cli-0.61.0.request.json"
);
const REAL_HEADERS: &str = include_str!(
    "../../crates/switchyard-providers/tests/fixtures/real/gemini-cli-0.61.0.headers.json"
);

const COMBOS: &str = r#"
[[combos]]
name = "g-pass"
targets = [{ target = "ge/gemini-up" }]

[[combos]]
name = "g-anthropic"
targets = [{ target = "an/claude-up" }]

[[combos]]
name = "g-openai"
targets = [{ target = "oa/gpt-4o" }]

[[combos]]
name = "g-fallback"
targets = [{ target = "ge/gemini-down" }, { target = "an/claude-backup" }]

[[aliases]]
match = "gemini-*"
to = "g-anthropic"
"#;

fn hello() -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 1, "topK": 64}
    })
}

/// A `/v1beta` POST with the key in `x-goog-api-key`, as Gemini CLI sends it.
fn post(h: &Harness, path: &str, body: &Value) -> reqwest::RequestBuilder {
    h.http.post(h.url(path)).header("x-goog-api-key", LOCAL_KEY).json(body)
}

/// The text of a Gemini answer or stream chunks, thoughts left out.
fn text_of(chunks: &[Value]) -> String {
    chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"].as_array().cloned().unwrap_or_default()
        })
        .filter(|p| p["thought"] != true)
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_real_gemini_cli_turn_reaches_a_gemini_upstream_byte_for_byte_and_only_the_model_changes()
{
    let h = Harness::start(COMBOS).await;
    h.mock.script("gemini-up", [Behavior::reply("Passthrough answer.")]);
    let captured: Value = serde_json::from_str(REAL_HEADERS).unwrap();
    let mut request = h
        .http
        .post(h.url("/v1beta/models/g-pass:streamGenerateContent?alt=sse"))
        .header("x-goog-api-key", LOCAL_KEY)
        .body(REAL_REQUEST);
    for (name, value) in captured["headers"].as_object().unwrap() {
        if !matches!(
            name.as_str(),
            "x-goog-api-key" | "accept-encoding" | "host" | "content-length" | "connection"
        ) {
            request = request.header(name, value.as_str().unwrap());
        }
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "x-switchyard-target"), "ge/gemini-up");
    let text = response.text().await.unwrap();
    let chunks = sse_data(&text);
    assert_eq!(text_of(&chunks), "Passthrough answer.", "{text}");
    assert!(
        chunks.iter().all(|c| c["modelVersion"] == "ge/gemini-up"),
        "every chunk names what served: {text}"
    );
    assert!(chunks.last().unwrap()["candidates"][0]["finishReason"].is_string(), "{text}");

    let sent = &h.mock.attempts_for("gemini-up")[0];
    assert!(
        sent.raw_body == REAL_REQUEST.as_bytes(),
        "the upstream got other bytes than the client sent"
    );
    assert_eq!(sent.path, "/v1beta/models/gemini-up:streamGenerateContent");
    assert_eq!(sent.query.as_deref(), Some("alt=sse"));
    assert_eq!(
        sent.header("x-goog-api-key"),
        Some("ge-1"),
        "the provider's key, not the local one"
    );
}

#[tokio::test]
async fn a_key_in_the_query_is_taken_on_v1beta_only_and_never_forwarded() {
    let h = Harness::start(COMBOS).await;
    h.mock.script("gemini-up", [Behavior::reply("Keyed by the query.")]);
    let response = h
        .http
        .post(h.url(&format!("/v1beta/models/g-pass:generateContent?key={LOCAL_KEY}")))
        .json(&hello())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(text_of(std::slice::from_ref(&body)), "Keyed by the query.", "{body}");
    assert_eq!(body["modelVersion"], "ge/gemini-up", "{body}");
    let sent = &h.mock.attempts_for("gemini-up")[0];
    assert_eq!(sent.query, None, "nothing of the client's query goes upstream");
    assert!(!String::from_utf8_lossy(&sent.raw_body).contains(LOCAL_KEY));
    // Elsewhere a key in the URL is no key, and `x-goog-api-key` neither.
    let chat = json!({"model": "oa/gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let elsewhere = h
        .http
        .post(h.url(&format!("/v1/chat/completions?key={LOCAL_KEY}")))
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 401);
    let goog =
        h.http.post(h.url("/v1/chat/completions")).header("x-goog-api-key", LOCAL_KEY).json(&chat);
    assert_eq!(goog.send().await.unwrap().status(), 401);
    // And no log line holds the key.
    let logged = h.api_text("/api/requests").await;
    assert!(!logged.contains(LOCAL_KEY), "the request log holds the key");
}

#[tokio::test]
async fn every_v1beta_path_needs_the_key_and_answers_in_geminis_error_shape() {
    let h = Harness::start(COMBOS).await;
    let cases = [
        (
            h.http.post(h.url("/v1beta/models/g-pass:generateContent")).json(&hello()),
            401,
            "UNAUTHENTICATED",
        ),
        (h.http.get(h.url("/v1beta/anything/else")), 401, "UNAUTHENTICATED"),
        (
            h.http.get(h.url("/v1beta/anything/else")).header("x-goog-api-key", LOCAL_KEY),
            404,
            "NOT_FOUND",
        ),
        (post(&h, "/v1beta/models/g-pass:predict", &hello()), 404, "NOT_FOUND"),
        (
            post(&h, "/v1beta/models/nothing-routes-here:generateContent", &hello()),
            404,
            "NOT_FOUND",
        ),
        (
            post(
                &h,
                "/v1beta/models/g-anthropic:generateContent",
                &json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            h.http
                .get(h.url("/v1beta/models/nothing-routes-here"))
                .header("x-goog-api-key", LOCAL_KEY),
            404,
            "NOT_FOUND",
        ),
    ];
    for (request, status, name) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], status, "{body}");
        assert_eq!(body["error"]["status"], name, "{body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    }
    assert!(h.mock.attempts().is_empty(), "nothing reached an upstream");
}

#[tokio::test]
async fn a_translated_answer_is_in_geminis_shape_streamed_or_not() {
    let h = Harness::start(COMBOS).await;
    h.mock.script(
        "claude-up",
        [Behavior::reply("From Anthropic."), Behavior::reply("Streamed from Anthropic.")],
    );
    h.mock.script("gpt-4o", [Behavior::reply("From OpenAI.")]);
    let whole: Value = post(&h, "/v1beta/models/g-anthropic:generateContent", &hello())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(text_of(std::slice::from_ref(&whole)), "From Anthropic.", "{whole}");
    assert_eq!(whole["candidates"][0]["finishReason"], "STOP", "{whole}");
    assert_eq!(whole["modelVersion"], "an/claude-up");
    assert!(whole["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0, "{whole}");
    let sent: Value =
        serde_json::from_slice(&h.mock.attempts_for("claude-up")[0].raw_body).unwrap();
    assert_eq!(sent["system"][0]["text"], "Be brief.", "{sent}");

    let text = post(&h, "/v1beta/models/g-anthropic:streamGenerateContent?alt=sse", &hello())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text_of(&sse_data(&text)), "Streamed from Anthropic.", "{text}");

    // Without `alt=sse`: one JSON array, closed.
    let response =
        post(&h, "/v1beta/models/g-openai:streamGenerateContent", &hello()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let chunks: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(text_of(&chunks), "From OpenAI.", "{text}");
    assert_eq!(chunks.last().unwrap()["candidates"][0]["finishReason"], "STOP", "{text}");
}

#[tokio::test]
async fn gemini_model_names_route_through_an_alias_and_a_fallback_happens_before_the_first_event() {
    let h = Harness::start(COMBOS).await;
    h.mock.script("claude-up", [Behavior::reply("Aliased.")]);
    let text =
        post(&h, "/v1beta/models/gemini-3.5-flash-lite:streamGenerateContent?alt=sse", &hello())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
    assert_eq!(text_of(&sse_data(&text)), "Aliased.", "{text}");

    h.mock.script("gemini-down", [Behavior::status(503)]);
    h.mock.script("claude-backup", [Behavior::reply("Served after a 503.")]);
    let response = post(&h, "/v1beta/models/g-fallback:streamGenerateContent?alt=sse", &hello())
        .send()
        .await
        .unwrap();
    assert_eq!(header(response.headers(), "x-switchyard-target"), "an/claude-backup");
    let text = response.text().await.unwrap();
    assert_eq!(text_of(&sse_data(&text)), "Served after a 503.", "{text}");
    assert_eq!(h.mock.attempts_for("gemini-down").len(), 1);
}

#[tokio::test]
async fn count_tokens_and_the_model_list_answer_in_geminis_shape() {
    let h = Harness::start(COMBOS).await;
    let counted = post(
        &h,
        "/v1beta/models/g-anthropic:countTokens",
        &json!({"contents": hello()["contents"]}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(header(counted.headers(), "x-switchyard-estimate"), "true");
    let counted: Value = counted.json().await.unwrap();
    assert!(counted["totalTokens"].as_u64().unwrap() >= 1, "{counted}");
    assert!(h.mock.attempts().is_empty(), "an estimate asks nobody");

    let list: Value = h
        .http
        .get(h.url("/v1beta/models"))
        .header("x-goog-api-key", LOCAL_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> =
        list["models"].as_array().unwrap().iter().filter_map(|m| m["name"].as_str()).collect();
    assert!(names.contains(&"models/g-pass"), "{list}");
    let one: Value = h
        .http
        .get(h.url("/v1beta/models/g-pass"))
        .header("x-goog-api-key", LOCAL_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["name"], "models/g-pass");
}

#[tokio::test]
async fn node_fetch_without_origin_is_served_on_every_dialect_and_a_browser_is_refused() {
    let h = Harness::start(COMBOS).await;
    h.mock.script("claude-up", [Behavior::reply("a"), Behavior::reply("b"), Behavior::reply("c")]);
    // Exactly what Node's fetch adds to Gemini CLI's (and the JS SDKs') requests.
    let node = |request: reqwest::RequestBuilder| {
        request
            .header("sec-fetch-mode", "cors")
            .header("accept", "*/*")
            .header("accept-language", "*")
            .header("user-agent", "GeminiCLI-tui/0.61.0/g-anthropic (linux; x64; terminal)")
    };
    let gemini = || post(&h, "/v1beta/models/g-anthropic:generateContent", &hello());
    let anthropic = || {
        h.http.post(h.url("/v1/messages")).header("x-api-key", LOCAL_KEY).json(
            &json!({"model": "g-anthropic", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
        )
    };
    let openai = || {
        h.http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(LOCAL_KEY)
            .json(&json!({"model": "g-anthropic", "messages": [{"role": "user", "content": "hi"}]}))
    };
    for (name, request) in
        [("gemini", node(gemini())), ("anthropic", node(anthropic())), ("openai", node(openai()))]
    {
        assert_eq!(request.send().await.unwrap().status(), 200, "{name}");
    }
    // A page's request: an Origin (every cross-origin fetch), or no Origin but the browser's
    // own mark (an `<img>` or a form GET with the key in the URL).
    let browsers = [
        node(gemini())
            .header("origin", "https://evil.example")
            .header("sec-fetch-site", "cross-site"),
        node(openai()).header("origin", "http://localhost:3000"),
        h.http
            .get(h.url(&format!("/v1beta/models?key={LOCAL_KEY}")))
            .header("sec-fetch-mode", "no-cors")
            .header("sec-fetch-site", "cross-site"),
        node(gemini()).header("sec-fetch-site", "same-site"),
    ];
    for request in browsers {
        assert_eq!(request.send().await.unwrap().status(), 403);
    }
    assert_eq!(
        h.mock.attempts_for("claude-up").len(),
        3,
        "no browser request reached the upstream"
    );
}
