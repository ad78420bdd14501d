//! Embeddings: OpenAI's `/v1/embeddings` and Gemini's `:embedContent` and
//! `:batchEmbedContents`, answered, refused, scripted and recorded like generations.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use switchyard_testkit::{
    BEHAVIOR_HEADER, Behavior, DEFAULT_DIMENSIONS, Dialect, Endpoint, MockUpstream, Reply, Status,
    embedding, embedding_base64,
};

use crate::call::{GEMINI_KEY, OPENAI_KEY, client};
use crate::within;

const OPENAI_MODEL: &str = "text-embedding-3-small";
const GEMINI_MODEL: &str = "gemini-embedding-001";

/// Posts `body` to `path` with OpenAI's bearer key and returns the status and JSON body.
async fn openai(mock: &MockUpstream, path: &str, body: &Value) -> (u16, Value) {
    let response = client()
        .post(mock.url(path))
        .bearer_auth(OPENAI_KEY)
        .json(body)
        .send()
        .await
        .expect("the mock answers");
    (response.status().as_u16(), response.json().await.expect("a JSON body"))
}

/// Posts `body` to Gemini's `{model}:{method}` with its key header.
async fn gemini(mock: &MockUpstream, model: &str, method: &str, body: &Value) -> (u16, Value) {
    let response = client()
        .post(mock.url(&format!("/v1beta/models/{model}:{method}")))
        .header("x-goog-api-key", GEMINI_KEY)
        .json(body)
        .send()
        .await
        .expect("the mock answers");
    (response.status().as_u16(), response.json().await.expect("a JSON body"))
}

fn floats(value: &Value) -> Vec<f32> {
    serde_json::from_value(value.clone()).expect("a list of numbers")
}

#[tokio::test]
async fn openai_embeddings_have_openais_shape_and_the_models_vectors() {
    let mock = MockUpstream::start().await;
    let body = json!({ "model": OPENAI_MODEL, "input": ["The food was delicious", "ok"] });
    let (status, answer) = openai(&mock, "/v1/embeddings", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "list");
    assert_eq!(answer["model"], OPENAI_MODEL);
    // 22 bytes: 6 tokens; 2 bytes: 1 token.
    assert_eq!(answer["usage"], json!({ "prompt_tokens": 7, "total_tokens": 7 }));
    let data = answer["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, (item, text)) in data.iter().zip(["The food was delicious", "ok"]).enumerate() {
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], i);
        assert_eq!(floats(&item["embedding"]), embedding(OPENAI_MODEL, text, DEFAULT_DIMENSIONS));
    }

    let other = json!({ "model": "text-embedding-3-large", "input": "ok" });
    let (_, large) = openai(&mock, "/v1/embeddings", &other).await;
    assert_ne!(floats(&large["data"][0]["embedding"]), floats(&data[1]["embedding"]));
    let (_, again) = openai(&mock, "/v1/embeddings", &body).await;
    assert_eq!(again, answer, "the same request, the same answer");
}

#[tokio::test]
async fn base64_dimensions_and_token_inputs_round_trip() {
    let mock = MockUpstream::start().await;
    let body = json!({
        "model": OPENAI_MODEL,
        "input": "round trip",
        "encoding_format": "base64",
        "dimensions": 5,
        "user": "u-1",
    });
    let (status, answer) = openai(&mock, "/v1/embeddings", &body).await;
    assert_eq!(status, 200, "{answer}");
    let text = answer["data"][0]["embedding"].as_str().expect("base64 is a string");
    assert_eq!(text, embedding_base64(OPENAI_MODEL, "round trip", 5));
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
    let decoded: Vec<f32> =
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(decoded, embedding(OPENAI_MODEL, "round trip", 5));

    let tokens = json!({ "model": OPENAI_MODEL, "input": [[1, 2, 3], [4]] });
    let (status, answer) = openai(&mock, "/v1/embeddings", &tokens).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["usage"]["prompt_tokens"], 4, "a token array counts its length");
    assert_eq!(floats(&answer["data"][0]["embedding"]), embedding(OPENAI_MODEL, "[1,2,3]", 8));
}

#[tokio::test]
async fn openai_refusals_are_400s_in_openais_shape_and_consume_nothing() {
    let mock = MockUpstream::start().await;
    mock.enqueue(OPENAI_MODEL, Behavior::status(503));
    for body in [
        json!({ "input": "x" }),
        json!({ "model": OPENAI_MODEL }),
        json!({ "model": OPENAI_MODEL, "input": [] }),
        json!({ "model": OPENAI_MODEL, "input": "" }),
        json!({ "model": OPENAI_MODEL, "input": "x", "dimensions": 0 }),
    ] {
        let (status, answer) = openai(&mock, "/v1/embeddings", &body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["type"], "invalid_request_error", "{body}");
        assert!(answer["error"].get("param").is_some() && answer["error"].get("code").is_some());
    }
    let (status, _) =
        openai(&mock, "/v1/embeddings", &json!({ "model": OPENAI_MODEL, "input": "x" })).await;
    assert_eq!(status, 503, "the refusals left the queue alone");
    assert_eq!(mock.attempts().len(), 6, "refused requests are attempts too");
}

#[tokio::test]
async fn gemini_embeds_one_content_and_a_batch() {
    let mock = MockUpstream::start().await;
    let one = json!({
        "content": { "parts": [{ "text": "What is the meaning of life?" }] },
        "taskType": "RETRIEVAL_QUERY",
        "outputDimensionality": 16,
    });
    let (status, answer) = gemini(&mock, GEMINI_MODEL, "embedContent", &one).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        floats(&answer["embedding"]["values"]),
        embedding(GEMINI_MODEL, "What is the meaning of life?", 16)
    );
    assert_eq!(answer.as_object().unwrap().len(), 1, "only `embedding`: {answer}");

    let model = format!("models/{GEMINI_MODEL}");
    let batch = json!({ "requests": [
        { "model": model, "content": { "parts": [{ "text": "a" }] } },
        { "model": model, "content": { "parts": [{ "text": "b" }] }, "title": "t",
          "taskType": "RETRIEVAL_DOCUMENT", "outputDimensionality": 3 },
    ]});
    let (status, answer) = gemini(&mock, GEMINI_MODEL, "batchEmbedContents", &batch).await;
    assert_eq!(status, 200, "{answer}");
    let embeddings = answer["embeddings"].as_array().unwrap();
    assert_eq!(floats(&embeddings[0]["values"]), embedding(GEMINI_MODEL, "a", DEFAULT_DIMENSIONS));
    assert_eq!(floats(&embeddings[1]["values"]), embedding(GEMINI_MODEL, "b", 3));
}

#[tokio::test]
async fn a_batch_naming_another_model_is_refused_as_gemini_refuses_it() {
    let mock = MockUpstream::start().await;
    let batch = json!({ "requests": [
        { "model": format!("models/{GEMINI_MODEL}"), "content": { "parts": [{ "text": "a" }] } },
        { "model": "models/text-embedding-004", "content": { "parts": [{ "text": "b" }] } },
    ]});
    let (status, answer) = gemini(&mock, GEMINI_MODEL, "batchEmbedContents", &batch).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], 400);
    assert_eq!(answer["error"]["status"], "INVALID_ARGUMENT");
    assert!(answer["error"]["message"].as_str().unwrap().contains("requests[1].model"), "{answer}");
    let attempt = &mock.attempts()[0];
    assert_eq!(
        attempt.behavior,
        Behavior::Status(Status::new(400).message(answer["error"]["message"].as_str().unwrap()))
    );
}

#[tokio::test]
async fn a_scripted_429_answers_the_next_embeddings_request_of_that_model() {
    let mock = MockUpstream::start().await;
    mock.enqueue(OPENAI_MODEL, Status::new(429).retry_after(Duration::from_secs(2)));
    mock.enqueue(GEMINI_MODEL, Behavior::status(429));
    let body = json!({ "model": OPENAI_MODEL, "input": "hi" });
    let response =
        client().post(mock.url("/v1/embeddings")).bearer_auth(OPENAI_KEY).json(&body).send();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "2");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "rate_limit_exceeded");
    let (status, _) = openai(&mock, "/v1/embeddings", &body).await;
    assert_eq!(status, 200, "the queue is consumed, then normal answers");

    let one = json!({ "content": { "parts": [{ "text": "hi" }] } });
    let (status, answer) = gemini(&mock, GEMINI_MODEL, "embedContent", &one).await;
    assert_eq!(status, 429);
    assert_eq!(answer["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(mock.attempt_count(OPENAI_MODEL), 2);
    assert_eq!(mock.attempt_count(GEMINI_MODEL), 1);
}

#[tokio::test]
async fn embeddings_attempts_are_recorded_with_their_endpoint_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockUpstream::builder().record_dir(dir.path()).start().await.unwrap();
    mock.enqueue("chat", Behavior::reply("x"));
    crate::call::Call::new(Dialect::OpenAi, "chat").send(&mock).await;
    let body = json!({ "model": OPENAI_MODEL, "input": "hi" });
    openai(&mock, "/t/acct-a/v1/embeddings", &body).await;
    let one = json!({ "content": { "parts": [{ "text": "hi" }] } });
    gemini(&mock, GEMINI_MODEL, "embedContent", &one).await;

    let embeddings = mock.embedding_attempts();
    assert_eq!(embeddings.len(), 2);
    let [openai, gemini] = &embeddings[..] else { unreachable!() };
    assert_eq!((openai.dialect, openai.endpoint), (Dialect::OpenAi, Endpoint::Embeddings));
    assert_eq!(openai.model, OPENAI_MODEL);
    assert_eq!(openai.path, "/t/acct-a/v1/embeddings");
    assert_eq!(openai.api_key(), Some(OPENAI_KEY));
    assert_eq!(openai.body, body);
    assert!(!openai.stream);
    assert_eq!((gemini.dialect, gemini.endpoint), (Dialect::Gemini, Endpoint::Embeddings));
    assert_eq!(gemini.model, GEMINI_MODEL);
    assert_eq!(gemini.api_key(), Some(GEMINI_KEY));
    assert_eq!(mock.attempts()[0].endpoint, Endpoint::Generation);

    let record: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("000001.json")).unwrap()).unwrap();
    assert_eq!(record["endpoint"], "embeddings");
    assert_eq!(record["dialect"], "openai");
    assert_eq!(record["headers"]["authorization"], "[redacted]");
}

#[tokio::test]
async fn the_behavior_header_and_reply_faults_apply_to_embeddings() {
    let mock = MockUpstream::start().await;
    let body = json!({ "model": OPENAI_MODEL, "input": "hi" });
    let response = client()
        .post(mock.url("/v1/embeddings"))
        .header(BEHAVIOR_HEADER, Behavior::status(503).header_value())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);

    mock.enqueue(OPENAI_MODEL, Reply::default().first_event_after(Duration::from_millis(50)));
    let started = tokio::time::Instant::now();
    let (status, _) = within(openai(&mock, "/v1/embeddings", &body)).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= Duration::from_millis(50), "the whole answer waited");

    mock.enqueue(OPENAI_MODEL, Behavior::cut_after(1));
    let response = client().post(mock.url("/v1/embeddings")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.bytes().await.is_err(), "cut after the first half of the document");

    mock.enqueue(OPENAI_MODEL, Behavior::hang());
    let hung = client()
        .post(mock.url("/v1/embeddings"))
        .timeout(Duration::from_millis(100))
        .json(&body)
        .send()
        .await;
    assert!(hung.unwrap_err().is_timeout());
}

#[tokio::test]
async fn listings_name_embedding_models_and_gemini_gives_them_their_methods() {
    let mock = MockUpstream::builder()
        .models(["gemini-2.5-flash"])
        .embedding_models(["my-embedder"])
        .start()
        .await
        .unwrap();
    mock.enqueue(GEMINI_MODEL, Behavior::default());
    let listed: Value =
        client().get(mock.url("/v1beta/models")).send().await.unwrap().json().await.unwrap();
    let methods = |name: &str| {
        listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == format!("models/{name}"))
            .unwrap_or_else(|| panic!("{name} is not listed: {listed}"))["supportedGenerationMethods"]
            .clone()
    };
    let embed = json!(["embedContent", "batchEmbedContents"]);
    assert_eq!(methods(GEMINI_MODEL), embed, "named for embedding");
    assert_eq!(methods("my-embedder"), embed, "declared");
    assert_eq!(methods("gemini-2.5-flash")[0], "generateContent");
    let openai: Value =
        client().get(mock.url("/v1/models")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> =
        openai["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["gemini-2.5-flash", GEMINI_MODEL, "my-embedder"]);
}
