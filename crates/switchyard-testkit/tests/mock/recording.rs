//! The attempt log, the script queues and the per-request header.

use serde_json::json;
use switchyard_testkit::{ANY_MODEL, Behavior, Dialect, MockUpstream, Script};

use crate::call::{ANTHROPIC_KEY, Call, GEMINI_KEY, OPENAI_KEY, client};
use crate::within;

#[tokio::test]
async fn every_attempt_is_recorded_with_what_a_test_needs_to_check() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-4o", Behavior::status(503));
    Call::new(Dialect::OpenAi, "gpt-4o").stream().send(&mock).await;
    Call::new(Dialect::Anthropic, "claude").send(&mock).await;
    Call::new(Dialect::Gemini, "gemini-2.5-pro").stream().send(&mock).await;

    let attempts = mock.attempts();
    assert_eq!(attempts.len(), 3);
    let [openai, anthropic, gemini] = &attempts[..] else { unreachable!() };

    assert_eq!((openai.seq, openai.dialect, openai.model.as_str()), (0, Dialect::OpenAi, "gpt-4o"));
    assert!(openai.stream);
    assert_eq!(openai.path, "/v1/chat/completions");
    assert_eq!(openai.api_key(), Some(OPENAI_KEY));
    assert_eq!(openai.body["messages"][0]["content"], "Hi");
    assert_eq!(openai.behavior, Behavior::status(503));

    assert_eq!((anthropic.dialect, anthropic.model.as_str()), (Dialect::Anthropic, "claude"));
    assert!(!anthropic.stream);
    assert_eq!(anthropic.api_key(), Some(ANTHROPIC_KEY));
    assert_eq!(anthropic.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(anthropic.behavior, Behavior::default());

    assert_eq!((gemini.dialect, gemini.model.as_str()), (Dialect::Gemini, "gemini-2.5-pro"));
    assert!(gemini.stream);
    assert_eq!(gemini.query.as_deref(), Some("alt=sse"));
    assert_eq!(gemini.api_key(), Some(GEMINI_KEY));

    assert!(openai.at <= anthropic.at && anthropic.at <= gemini.at);
    assert!(openai.elapsed <= gemini.elapsed);
}

#[tokio::test]
async fn a_gemini_key_in_the_query_is_found_too() {
    let mock = MockUpstream::start().await;
    client()
        .post(mock.url("/v1beta/models/g:generateContent?key=AIza-query"))
        .json(&json!({ "contents": [] }))
        .send()
        .await
        .unwrap();
    assert_eq!(mock.attempts()[0].api_key(), Some("AIza-query"));
}

#[tokio::test]
async fn queues_are_per_model_and_fall_back_to_normal_replies() {
    let mock = MockUpstream::start().await;
    mock.script("a", [Behavior::status(500), Behavior::status(429)]);
    mock.enqueue("b", Behavior::status(401));
    let a = Call::new(Dialect::OpenAi, "a");
    let b = Call::new(Dialect::OpenAi, "b");
    assert_eq!(b.json(&mock).await.0, 401);
    assert_eq!(a.json(&mock).await.0, 500);
    assert_eq!(b.json(&mock).await.0, 200);
    assert_eq!(a.json(&mock).await.0, 429);
    assert_eq!(a.json(&mock).await.0, 200);
    assert_eq!((mock.attempt_count("a"), mock.attempt_count("b")), (3, 2));
    assert_eq!(mock.attempts_for("b").len(), 2);
}

#[tokio::test]
async fn the_wildcard_answers_for_models_without_a_script() {
    let mock = MockUpstream::start().await;
    mock.set_default(ANY_MODEL, Behavior::status(503));
    mock.enqueue("own", Behavior::reply("mine"));
    assert_eq!(Call::new(Dialect::Gemini, "other").json(&mock).await.0, 503);
    assert_eq!(Call::new(Dialect::Gemini, "own").json(&mock).await.0, 200);
}

#[tokio::test]
async fn the_behavior_header_scripts_one_request_without_consuming_the_queue() {
    let mock = MockUpstream::start().await;
    mock.enqueue("m", Behavior::status(500));
    let call = Call::new(Dialect::Anthropic, "m");
    assert_eq!(call.clone().behavior(&Behavior::status(418)).json(&mock).await.0, 418);
    assert_eq!(call.json(&mock).await.0, 500);
    assert_eq!(mock.attempts()[0].behavior, Behavior::status(418));
}

#[tokio::test]
async fn an_invalid_behavior_header_is_a_400_in_the_dialect() {
    let mock = MockUpstream::start().await;
    let call =
        Call::new(Dialect::Anthropic, "m").header(switchyard_testkit::BEHAVIOR_HEADER, "{nope");
    let (status, body) = call.json(&mock).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("x-mock-behavior"));
}

#[tokio::test]
async fn a_request_without_a_model_is_a_400_and_consumes_nothing() {
    let mock = MockUpstream::start().await;
    mock.enqueue("", Behavior::status(500));
    let call = Call::new(Dialect::OpenAi, "x").with_body(|body| body["model"] = json!(null));
    let (status, body) = call.json(&mock).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("names no model"));
}

#[tokio::test]
async fn waiting_for_attempts_wakes_when_they_arrive() {
    let mock = MockUpstream::start().await;
    let call = Call::new(Dialect::OpenAi, "m");
    let (first, second) = (call.request(&mock), call.request(&mock));
    let sender = tokio::spawn(async move {
        first.send().await.unwrap();
        second.send().await.unwrap();
    });
    let attempts = within(mock.wait_for_attempts(2)).await;
    assert_eq!(attempts.len(), 2);
    sender.await.unwrap();
}

#[tokio::test]
async fn clear_forgets_attempts_but_keeps_scripts() {
    let mock = MockUpstream::start().await;
    mock.script("m", [Behavior::status(500), Behavior::status(502)]);
    let call = Call::new(Dialect::OpenAi, "m");
    assert_eq!(call.json(&mock).await.0, 500);
    mock.clear();
    assert_eq!((mock.total_attempts(), mock.attempt_count("m")), (0, 0));
    assert!(mock.attempts().is_empty());
    assert_eq!(call.json(&mock).await.0, 502);
    assert_eq!(within(mock.wait_for_attempts(1)).await[0].seq, 1, "sequence numbers keep going");
    mock.clear_scripts();
    mock.enqueue("m", Behavior::status(504));
    assert_eq!(call.json(&mock).await.0, 504);
}

#[tokio::test]
async fn a_builder_script_is_loaded_at_start() {
    let script = Script::default().model("m", [Behavior::status(529)]);
    let mock = MockUpstream::builder().script(script).start().await.unwrap();
    assert_eq!(Call::new(Dialect::Anthropic, "m").json(&mock).await.0, 529);
}

#[tokio::test]
async fn forgetting_attempts_still_counts_them() {
    let mock = MockUpstream::builder().forget_attempts().start().await.unwrap();
    Call::new(Dialect::OpenAi, "m").send(&mock).await;
    assert_eq!((mock.total_attempts(), mock.attempt_count("m")), (1, 1));
    assert!(mock.attempts().is_empty());
}

#[tokio::test]
async fn shutdown_closes_the_listener_and_every_connection() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::hang());
    let addr = mock.addr();
    let hanging = tokio::spawn(Call::new(Dialect::OpenAi, "m").request(&mock).send());
    within(mock.wait_for_attempts(1)).await;
    within(mock.shutdown()).await;
    let error = within(hanging).await.unwrap().expect_err("the hanging request is dropped");
    assert!(error.status().is_none());
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "nobody listens any more");
}

#[tokio::test]
async fn every_mock_gets_its_own_port() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    assert_ne!(a.addr().port(), b.addr().port());
    assert!(a.base_url().starts_with("http://127.0.0.1:"));
}

#[tokio::test]
async fn the_raw_body_is_kept_byte_for_byte_beside_the_parsed_one() {
    let mock = MockUpstream::start().await;
    // Key order, spacing and an escape that a parse-and-serialise round trip would all change.
    let raw = "{ \"model\":\"m\",  \"zeta\": 1, \"alpha\": \"\\u00e9\", \"messages\": [] }";
    client()
        .post(mock.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    let attempt = &mock.attempts()[0];
    assert_eq!(attempt.raw_body, raw.as_bytes());
    assert_eq!(attempt.body["alpha"], "é");
}

#[tokio::test]
async fn a_record_directory_gets_one_file_per_attempt_before_the_answer_with_credentials_redacted()
{
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let mock = MockUpstream::builder().record_dir(&records).start().await.unwrap();
    mock.enqueue("claude", Behavior::status(529));
    let call = Call::new(Dialect::Anthropic, "claude").header("anthropic-beta", "a-1,b-2");
    assert_eq!(call.json(&mock).await.0, 529);
    Call::new(Dialect::OpenAi, "gpt").send(&mock).await;

    let mut names: Vec<String> = std::fs::read_dir(&records)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["000000.json", "000001.json"]);
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(records.join(name)).unwrap()).unwrap()
    };
    let (anthropic, openai) = (read("000000.json"), read("000001.json"));
    assert_eq!(anthropic["model"], "claude");
    assert_eq!(anthropic["dialect"], "anthropic");
    assert_eq!(anthropic["path"], "/v1/messages");
    assert_eq!(anthropic["headers"]["anthropic-beta"], "a-1,b-2");
    assert_eq!(anthropic["headers"]["x-api-key"], "[redacted]");
    assert_eq!(anthropic["behavior"], serde_json::to_value(Behavior::status(529)).unwrap());
    let raw = anthropic["raw_body"].as_str().unwrap();
    assert_eq!(raw.as_bytes(), mock.attempts()[0].raw_body);
    assert_eq!(anthropic["body"], serde_json::from_str::<serde_json::Value>(raw).unwrap());
    assert_eq!(openai["headers"]["authorization"], "[redacted]");
    assert!(
        !String::from_utf8(std::fs::read(records.join("000001.json")).unwrap())
            .unwrap()
            .contains(OPENAI_KEY)
    );
}

#[tokio::test]
async fn count_tokens_is_answered_without_being_an_attempt() {
    let mock = MockUpstream::start().await;
    let answer: serde_json::Value = client()
        .post(mock.url("/v1/messages/count_tokens"))
        .json(&json!({ "model": "claude", "messages": [{ "role": "user", "content": "Hi" }] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(answer["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(mock.total_attempts(), 0);
}

#[tokio::test]
async fn a_record_that_cannot_be_written_is_a_500_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let mock = MockUpstream::builder().record_dir(&records).start().await.unwrap();
    std::fs::remove_dir(&records).unwrap();
    let response = Call::new(Dialect::Anthropic, "m").send(&mock).await;
    assert_eq!(response.status(), 500);
    let text = response.text().await.unwrap();
    assert!(text.contains("record file") && text.contains("000000.json"), "{text}");
    assert_eq!(mock.total_attempts(), 1, "the attempt is still kept in memory");
}

#[tokio::test]
async fn a_record_names_every_credential_a_request_carried_by_its_digest() {
    // A subscriber's client sends its own login in Authorization and Switchyard's key beside
    // it; a proxy that also added an API key would leave all three on the request.
    let dir = tempfile::tempdir().unwrap();
    let mock = MockUpstream::builder().record_dir(dir.path()).start().await.unwrap();
    let login = "sk-ant-oat01-subscriber-login";
    Call::new(Dialect::Anthropic, "claude")
        .header("authorization", &format!("Bearer {login}"))
        .header("x-switchyard-key", "sy-local-key")
        .header("chatgpt-account-id", "acct-1234")
        .send(&mock)
        .await;

    let text = std::fs::read_to_string(dir.path().join("000000.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    let digest = |secret: &str| {
        use sha2::Digest as _;
        use std::fmt::Write as _;
        sha2::Sha256::digest(secret.as_bytes())[..6].iter().fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
    };
    assert_eq!(
        record["credentials"],
        json!({
            "authorization": digest(login),
            "x-api-key": digest(ANTHROPIC_KEY),
            "x-switchyard-key": digest("sy-local-key"),
        })
    );
    assert_eq!(record["key"], digest(login), "`key` names the Authorization one first");
    assert_eq!(record["headers"]["x-switchyard-key"], "[redacted]");
    assert_eq!(record["headers"]["chatgpt-account-id"], "acct-1234", "an account id is no secret");
    for secret in [login, ANTHROPIC_KEY, "sy-local-key"] {
        assert!(!text.contains(secret), "the record holds {secret}");
    }

    client()
        .post(mock.url("/v1beta/models/g:generateContent?key=AIza-query"))
        .json(&json!({ "contents": [] }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        mock.attempts()[1].credentials()["?key"],
        digest("AIza-query"),
        "Gemini's query key"
    );
}
