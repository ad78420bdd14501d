//! A model's own `api` (`[[providers.models]]`): one OpenAI key is one provider whichever API
//! a model needs. Requests for a model go out in the model's API, passthrough included, and
//! its answer is read in that API.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, json_parts, openai_text};
use switchyard_testkit::Behavior;

/// One `openai` provider on Chat Completions, with one model that answers only on Responses.
const ONE_PROVIDER: &str = r#"
[[providers]]
id = "one"
kind = "openai"
base_url = "{mock}/v1"
api = "chat"
models = ["gpt-4o", { id = "gpt-5-codex", api = "responses" }]
"#;

/// A Responses (Codex-style) request for `model`, with a field this router has no model for.
fn responses_body(model: &str) -> Value {
    json!({
        "model": model,
        "stream": false,
        "store": false,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "a_field_from_next_month": {"nested": true}
    })
}

async fn send_responses(h: &Harness, model: &str) -> (u16, Value) {
    let response = h
        .http
        .post(h.url("/v1/responses"))
        .bearer_auth(LOCAL_KEY)
        .json(&responses_body(model))
        .send()
        .await
        .unwrap();
    let (status, _, body) = json_parts(response).await;
    (status, body)
}

#[tokio::test]
async fn a_chat_client_reaches_each_model_over_the_api_the_model_names() {
    let h = Harness::start(ONE_PROVIDER).await;
    h.mock.script("gpt-4o", [Behavior::reply("Over Chat.")]);
    h.mock.script("gpt-5-codex", [Behavior::reply("Over Responses.")]);

    let (status, _, body) = json_parts(h.openai("one/gpt-4o", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(openai_text(&body), "Over Chat.");
    assert_eq!(h.mock.attempts_for("gpt-4o")[0].path, "/v1/chat/completions");

    let (status, _, body) =
        json_parts(h.openai("one/gpt-5-codex", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(openai_text(&body), "Over Responses.", "the Responses answer, read as Responses");
    let sent = &h.mock.attempts_for("gpt-5-codex")[0];
    assert_eq!(sent.path, "/v1/responses", "the model's own api wins over the provider's");
    assert!(sent.body.get("messages").is_none(), "translated to Responses: {}", sent.body);
}

#[tokio::test]
async fn a_responses_client_passes_through_to_a_responses_model_and_is_translated_for_a_chat_one() {
    let h = Harness::start(ONE_PROVIDER).await;
    h.mock.script("gpt-5-codex", [Behavior::reply("Passed through.")]);
    h.mock.script("gpt-4o", [Behavior::reply("Translated.")]);

    let (status, body) = send_responses(&h, "one/gpt-5-codex").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("Passed through."), "{body}");
    let sent = &h.mock.attempts_for("gpt-5-codex")[0];
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(
        sent.body,
        responses_body("gpt-5-codex"),
        "same dialect: every field the client sent, only the model changed"
    );

    let (status, body) = send_responses(&h, "one/gpt-4o").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("Translated."), "{body}");
    let sent = &h.mock.attempts_for("gpt-4o")[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert!(sent.body.get("a_field_from_next_month").is_none(), "{}", sent.body);
}
