//! `previous_response_id`: every answer to a Responses client is kept in a bounded
//! store, so a conversation continues on any target. A Chat target gets the whole history; a
//! Responses upstream that kept the previous response gets the client's bytes on the same
//! credential; an unknown id is a 400 in the client's dialect that charges nobody. Ids of
//! answers Switchyard made are its own (128 random bits), and a response is known only to the
//! local key it answered.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, sse_data};
use switchyard_testkit::Behavior;

/// An OpenAI provider on the Responses API with two keys; `least_used` would take turns
/// between them if nothing held a conversation to one.
const RESPONSES_PROVIDER: &str = r#"
[[providers]]
id = "rs"
kind = "openai"
api = "responses"
base_url = "{mock}/v1"
selection = { strategy = "least_used" }
credentials = [{ id = "rs-1", secret = "env:OA_1" }, { id = "rs-2", secret = "env:OA_2" }]
"#;

async fn respond(h: &Harness, body: &Value) -> reqwest::Response {
    h.http.post(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).json(body).send().await.unwrap()
}

/// Sends `body` and returns the id of the response, streamed or not.
async fn response_id(h: &Harness, body: &Value) -> String {
    let response = respond(h, body).await;
    assert_eq!(response.status(), 200);
    if body["stream"] == true {
        let text = response.text().await.unwrap();
        let done = sse_data(&text)
            .into_iter()
            .find(|e| e["type"] == "response.completed")
            .unwrap_or_else(|| panic!("no response.completed in {text}"));
        done["response"]["id"].as_str().unwrap().to_owned()
    } else {
        let answer: Value = response.json().await.unwrap();
        answer["id"].as_str().unwrap().to_owned()
    }
}

fn roles_and_text(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap().to_owned(), content)
        })
        .collect()
}

#[tokio::test]
async fn a_conversation_continued_by_previous_response_id_reaches_a_chat_target_whole() {
    let h = Harness::start("").await;
    h.mock.script(
        "gpt-4o",
        [Behavior::reply("Paris."), Behavior::reply("About 2 million."), Behavior::reply("Yes.")],
    );
    // The first answer is streamed: the store reads it off the stream.
    let first = response_id(
        &h,
        &json!({"model": "oa/gpt-4o", "stream": true, "instructions": "Be brief.",
            "input": "What is the capital of France?"}),
    )
    .await;
    let second = response_id(
        &h,
        &json!({"model": "oa/gpt-4o", "previous_response_id": first, "instructions": "Be brief.",
            "input": [{"role": "user", "content": "How many people live there?"}]}),
    )
    .await;
    let sent = &h.mock.attempts_for("gpt-4o")[1];
    assert_eq!(sent.path, "/v1/chat/completions");
    let pair = |role: &str, text: &str| (role.to_owned(), text.to_owned());
    assert_eq!(
        roles_and_text(&sent.body["messages"]),
        [
            pair("system", "Be brief."),
            pair("user", "What is the capital of France?"),
            pair("assistant", "Paris."),
            pair("user", "How many people live there?"),
        ],
        "the mock sees the whole history in turn 2"
    );

    // A chain expands completely: turn 3 names only turn 2.
    response_id(
        &h,
        &json!({"model": "oa/gpt-4o", "previous_response_id": second, "input": "Is it big?"}),
    )
    .await;
    let sent = &h.mock.attempts_for("gpt-4o")[2];
    assert_eq!(
        roles_and_text(&sent.body["messages"]),
        [
            pair("user", "What is the capital of France?"),
            pair("assistant", "Paris."),
            pair("user", "How many people live there?"),
            pair("assistant", "About 2 million."),
            pair("user", "Is it big?"),
        ]
    );
}

#[tokio::test]
async fn a_response_kept_by_a_responses_upstream_is_continued_on_the_same_credential_as_sent() {
    let h = Harness::start(RESPONSES_PROVIDER).await;
    h.mock.script(
        "gpt-5",
        [Behavior::reply("One."), Behavior::reply("Two."), Behavior::reply("Three.")],
    );
    let mut previous =
        response_id(&h, &json!({"model": "rs/gpt-5", "input": "count with me"})).await;
    for (turn, stream) in [(1, true), (2, false)] {
        let body = json!({"model": "rs/gpt-5", "stream": stream,
            "previous_response_id": previous, "input": "next"});
        previous = response_id(&h, &body).await;
        let attempts = h.mock.attempts_for("gpt-5");
        assert_eq!(attempts.len(), turn + 1);
        assert_eq!(
            attempts[turn].api_key(),
            attempts[0].api_key(),
            "turn {turn} stays on the credential that keeps the conversation"
        );
        let mut expected = body.clone();
        expected["model"] = json!("gpt-5");
        assert_eq!(attempts[turn].body, expected, "the client's bytes, only the model changed");
    }
}

#[tokio::test]
async fn a_response_the_upstream_was_told_not_to_store_is_expanded_for_whichever_credential() {
    let h = Harness::start(RESPONSES_PROVIDER).await;
    h.mock.script("gpt-5", [Behavior::reply("One."), Behavior::reply("Two.")]);
    let first =
        response_id(&h, &json!({"model": "rs/gpt-5", "store": false, "input": "count"})).await;
    response_id(
        &h,
        &json!({"model": "rs/gpt-5", "store": false, "previous_response_id": first, "input": "on"}),
    )
    .await;
    let sent = &h.mock.attempts_for("gpt-5")[1];
    assert_eq!(sent.body.get("previous_response_id"), None);
    assert_eq!(sent.body["store"], false);
    assert_eq!(
        sent.body["input"],
        json!([{"type": "message", "role": "user", "content": "count"},
            {"type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "One.", "annotations": [], "logprobs": []}]},
            {"type": "message", "role": "user", "content": "on"}])
    );
}

#[tokio::test]
async fn when_the_credential_keeping_the_conversation_fails_another_gets_it_expanded() {
    let h = Harness::start(RESPONSES_PROVIDER).await;
    h.mock
        .script("gpt-5", [Behavior::reply("One."), Behavior::status(429), Behavior::reply("Two.")]);
    let first = response_id(&h, &json!({"model": "rs/gpt-5", "input": "count"})).await;
    let response =
        respond(&h, &json!({"model": "rs/gpt-5", "previous_response_id": first, "input": "on"}))
            .await;
    assert_eq!(response.status(), 200);
    let attempts = h.mock.attempts_for("gpt-5");
    let (keeper, refused, other) = (&attempts[0], &attempts[1], attempts.last().unwrap());
    assert_eq!(refused.api_key(), keeper.api_key(), "the keeper is tried first");
    assert_eq!(refused.body["previous_response_id"], json!(first));
    assert_ne!(other.api_key(), keeper.api_key());
    assert_eq!(other.body.get("previous_response_id"), None, "the other key never saw it");
    assert_eq!(other.body["input"].as_array().unwrap().len(), 3, "{}", other.body);
}

#[tokio::test]
async fn an_unknown_previous_response_id_is_a_400_that_says_to_send_the_whole_input() {
    let h = Harness::start(RESPONSES_PROVIDER).await;
    let response = respond(
        &h,
        &json!({"model": "rs/gpt-5", "previous_response_id": "resp_from_elsewhere", "input": "hi"}),
    )
    .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(body["error"]["param"], "previous_response_id", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("resp_from_elsewhere"), "{message}");
    assert!(message.contains("Send the whole conversation in `input`"), "{message}");
    assert_eq!(h.mock.total_attempts(), 0, "no upstream was asked");
    let health = h.app.snapshot();
    assert!(
        health.breakers.is_empty() && health.credentials.is_empty() && health.lockouts.is_empty(),
        "nothing is charged: {health:?}"
    );
}

/// Two hosts that number their answers the same way (Ollama: `chatcmpl-<0..999>`; the mock:
/// `chatcmpl-mock-<n>`, from 0 on each mock) once gave two conversations one response id, and
/// continuing the first expanded the second's history.
#[tokio::test]
async fn conversations_on_hosts_that_reuse_answer_ids_never_continue_each_other() {
    let other = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start(&format!(
        r#"
[[providers]]
id = "second"
kind = "openai"
base_url = "{}/v1"
credentials = [{{ id = "s-1", secret = "env:OA_1" }}]
"#,
        other.base_url()
    ))
    .await;
    h.mock.script("gpt-4o", [Behavior::reply("alpha answer"), Behavior::reply("alpha again")]);
    other.script("gpt-4o", [Behavior::reply("beta answer")]);
    let alpha = response_id(&h, &json!({"model": "oa/gpt-4o", "input": "alpha secret"})).await;
    let beta = response_id(&h, &json!({"model": "second/gpt-4o", "input": "beta secret"})).await;
    assert_eq!(
        h.mock.attempts_for("gpt-4o")[0].path,
        "/v1/chat/completions",
        "both answers were made by Switchyard from Chat completions"
    );
    assert_ne!(alpha, beta);
    for id in [&alpha, &beta] {
        let hex = id.strip_prefix("resp_").unwrap_or_else(|| panic!("{id}"));
        assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    response_id(&h, &json!({"model": "oa/gpt-4o", "previous_response_id": alpha, "input": "on"}))
        .await;
    let sent = h.mock.attempts_for("gpt-4o")[1].body.to_string();
    assert!(sent.contains("alpha secret") && sent.contains("alpha answer"), "{sent}");
    assert!(!sent.contains("beta"), "the other conversation stays out: {sent}");
}

/// One tool's conversation is not another's to continue: key b naming key a's response is
/// told it is unknown, and no upstream sees a's words on b's behalf.
#[tokio::test]
async fn another_local_keys_response_is_unknown_and_nothing_is_sent() {
    let h = Harness::start(RESPONSES_PROVIDER).await;
    h.mock.script("gpt-5", (0..4).map(|_| Behavior::reply("a's answer")));
    let (status, created) =
        h.api(reqwest::Method::POST, "/api/keys", &json!({"name": "other tool"})).await;
    assert_eq!(status, 201, "{created}");
    let other = created["key"].as_str().unwrap();
    for stream in [false, true] {
        let first = response_id(
            &h,
            &json!({"model": "rs/gpt-5", "stream": stream, "input": "a's secret text"}),
        )
        .await;
        let attempts = h.mock.total_attempts();
        let response = h
            .http
            .post(h.url("/v1/responses"))
            .bearer_auth(other)
            .json(&json!({"model": "rs/gpt-5", "previous_response_id": first, "input": "more"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["param"], "previous_response_id", "{body}");
        assert_eq!(h.mock.total_attempts(), attempts, "no upstream was asked for b");
        // a itself continues it.
        response_id(
            &h,
            &json!({"model": "rs/gpt-5", "previous_response_id": first, "input": "on"}),
        )
        .await;
    }
}

/// A streamed answer larger than the whole conversation store (16 MiB) is let go as it
/// arrives, not held until `response.completed`: the client gets all of
/// it, and continuing it is answered like any unknown id.
#[tokio::test]
async fn a_50_mb_streamed_answer_reaches_the_client_whole_and_is_not_kept() {
    // The mock writes the whole answer before its first event: seconds in a debug build.
    let h = Harness::start_with(switchyard_e2e::harness::Setup::new("").timeouts(|t| {
        t.first_event_ms = 60_000;
        t.first_byte_ms = 60_000;
        t.idle_ms = 60_000;
        t.total_ms = 120_000;
    }))
    .await;
    let chunk = 50 * 1024;
    h.mock
        .enqueue("gpt-4o", switchyard_testkit::Reply::text("x".repeat(1000 * chunk)).chunks(1000));
    let response =
        respond(&h, &json!({"model": "oa/gpt-4o", "stream": true, "input": "go on"})).await;
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(std::time::Duration::from_secs(120), response.text())
        .await
        .expect("the stream ends")
        .unwrap();
    let events = sse_data(&text);
    let done = events.iter().find(|e| e["type"] == "response.completed").expect("completed");
    let deltas: usize = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap().len())
        .sum();
    assert_eq!(deltas, 1000 * chunk, "the client got every byte");
    let id = done["response"]["id"].as_str().unwrap();
    let again =
        respond(&h, &json!({"model": "oa/gpt-4o", "previous_response_id": id, "input": "?"})).await;
    assert_eq!(again.status(), 400, "too large to be kept");
}

/// Codex's remote compaction (a `compaction_trigger` item that waits for a `compaction` item
/// back) reaches a Responses target as sent; a combo with no such target refuses it at once with
/// a `400` that says how Codex compacts elsewhere, not a `5xx` Codex would retry for seconds.
#[tokio::test]
async fn a_compaction_trigger_passes_to_responses_and_is_refused_plainly_elsewhere() {
    let extra = format!(
        "{RESPONSES_PROVIDER}\n[[combos]]\nname = \"chat-only\"\ntargets = [{{ target = \"oa/gpt-4o\" }}, {{ target = \"an/claude\" }}]"
    );
    let h = Harness::start(&extra).await;
    let body = |model: &str| {
        json!({"model": model, "input": [
            {"role": "user", "content": "a long session"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {"type": "compaction_trigger"},
        ]})
    };
    let response = respond(&h, &body("rs/gpt-5")).await;
    assert_eq!(response.status(), 200);
    let sent = h.mock.attempts().pop().expect("sent");
    assert_eq!(sent.body["input"][2], json!({"type": "compaction_trigger"}), "as sent");

    let before = h.mock.attempts().len();
    let response = respond(&h, &body("chat-only")).await;
    assert_eq!(response.status(), 400);
    let answer: Value = response.json().await.unwrap();
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("compaction_trigger") && message.contains("\"OpenAI\""), "{message}");
    assert_eq!(h.mock.attempts().len(), before, "nothing was sent");
}
