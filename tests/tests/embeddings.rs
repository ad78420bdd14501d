//! Embeddings end to end: `POST /v1/embeddings` and Gemini's `:embedContent` and
//! `:batchEmbedContents`, through combos, against the mock's deterministic vectors (a function
//! of the model and the text, so a vector shows which model made it). A combo falls back
//! between keys and hosts of one embedding space and never across models; usage is logged.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use switchyard_core::ManualClock;
use switchyard_e2e::harness::{Harness, LOCAL_KEY, T0, header, json_parts, keys_of};
use switchyard_testkit::{DEFAULT_DIMENSIONS, Endpoint, Status, embedding};

/// `emb`: OpenAI-dialect embedding models on two keys; `mirror`: the same small model under
/// another name on another host, declared `embeds_like` it; `ge` (the harness's Gemini).
const EMBEDDINGS: &str = r#"
[[providers]]
id = "emb"
kind = "openai"
base_url = "{mock}/v1"
models = ["text-embedding-3-small", "text-embedding-3-large"]
credentials = [{ id = "e-1", secret = "env:OA_1" }, { id = "e-2", secret = "env:OA_2" }]

[[providers]]
id = "mirror"
kind = "openai"
base_url = "{mock}/v1"
models = [{ id = "te3-small", embeds_like = "emb/text-embedding-3-small" }]
credentials = [{ id = "m-1", secret = "env:OA_1" }]

[[combos]]
name = "vectors"
targets = [{ target = "emb/text-embedding-3-small" }]

[[combos]]
name = "mixed"
targets = [{ target = "emb/text-embedding-3-small" }, { target = "emb/text-embedding-3-large" }, { target = "mirror/te3-small" }]

[[combos]]
name = "gvectors"
targets = [{ target = "ge/gemini-embedding-001" }]
"#;

const SMALL: &str = "text-embedding-3-small";

fn embed(h: &Harness, body: &Value) -> reqwest::RequestBuilder {
    h.http.post(h.url("/v1/embeddings")).bearer_auth(LOCAL_KEY).json(body)
}

fn gemini(h: &Harness, path: &str, body: &Value) -> reqwest::RequestBuilder {
    h.http.post(h.url(path)).header("x-goog-api-key", LOCAL_KEY).json(body)
}

/// The vectors of an OpenAI-shaped answer, in index order.
fn vectors(answer: &Value) -> Vec<Vec<f32>> {
    let data = answer["data"].as_array().unwrap_or_else(|| panic!("no data: {answer}"));
    data.iter()
        .enumerate()
        .map(|(at, datum)| {
            assert_eq!(datum["index"], at, "{answer}");
            match &datum["embedding"] {
                Value::String(text) => {
                    let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                        .collect()
                }
                floats => serde_json::from_value(floats.clone()).unwrap(),
            }
        })
        .collect()
}

fn floats(values: &Value) -> Vec<f32> {
    serde_json::from_value(values.clone()).unwrap()
}

#[tokio::test]
async fn a_rate_limited_key_falls_back_to_the_other_key_of_the_model_and_usage_is_logged() {
    let h = Harness::start(EMBEDDINGS).await;
    h.mock.enqueue(SMALL, Status::new(429).retry_after(Duration::from_secs(30)));
    let response =
        embed(&h, &json!({"model": "vectors", "input": ["alpha", "beta"]})).send().await.unwrap();
    let (status, headers, answer) = json_parts(response).await;
    assert_eq!(status, 200, "{answer}");
    let want = |text| embedding(SMALL, text, DEFAULT_DIMENSIONS);
    assert_eq!(vectors(&answer), [want("alpha"), want("beta")]);
    assert_eq!(header(&headers, "x-switchyard-target"), "emb/text-embedding-3-small");
    assert_eq!(answer["model"], "emb/text-embedding-3-small", "named for what served");
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens > 0, "{answer}");

    let sent = h.mock.embedding_attempts();
    assert_eq!(keys_of(&sent), ["oa-1", "oa-2"], "the benched key, then the other");
    assert_eq!(sent[1].body["input"], json!(["alpha", "beta"]), "passed through as sent");
    assert_eq!(sent[1].body["model"], SMALL);
    assert!(h.app.lockout("emb", "e-1", SMALL).is_some(), "the model is benched on e-1");

    let logged = h.newest_logged().await;
    assert_eq!((logged["status"].as_u64(), logged["attempts"].as_u64()), (Some(200), Some(2)));
    assert_eq!(logged["usage"]["uncached_input"].as_u64(), Some(prompt_tokens), "{logged}");
    assert_eq!(logged["model"], "vectors");

    // While e-1 cools down, the next request goes straight to e-2.
    let response =
        embed(&h, &json!({"model": "vectors", "input": "gamma", "encoding_format": "base64"}));
    let (status, _, answer) = json_parts(response.send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(vectors(&answer), [want("gamma")], "base64, as asked");
    assert_eq!(keys_of(&h.mock.embedding_attempts())[2], "oa-2");
}

#[tokio::test]
async fn a_combo_never_falls_back_to_another_model_only_to_one_that_embeds_like_it() {
    let h = Harness::start(EMBEDDINGS).await;
    // Both keys of the small model are rate-limited: the large model is another space and is
    // passed over; the mirror declares it serves the small model's vectors.
    h.mock.enqueue(SMALL, Status::new(429));
    h.mock.enqueue(SMALL, Status::new(429));
    let (status, headers, answer) =
        json_parts(embed(&h, &json!({"model": "mixed", "input": "alpha"})).send().await.unwrap())
            .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "mirror/te3-small");
    let models: Vec<String> = h
        .mock
        .embedding_attempts()
        .iter()
        .map(|a| a.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models, [SMALL, SMALL, "te3-small"], "the large model is never asked");
    let logged = h.newest_logged().await;
    let trace = &logged["trace"];
    let passed = trace.as_array().unwrap().iter().any(|entry| {
        entry["target"] == "emb/text-embedding-3-large"
            && entry["reason"] == "other_embedding_space"
    });
    assert!(passed, "the trace names the model passed over: {trace}");

    // With the small model's keys cooling down and the mirror failing too, nothing of the space
    // is left: the error says why the large model was not asked.
    h.mock.enqueue("te3-small", Status::new(503));
    let before = h.mock.embedding_attempts().len();
    let (status, _, answer) =
        json_parts(embed(&h, &json!({"model": "mixed", "input": "beta"})).send().await.unwrap())
            .await;
    assert!(status == 503 || status == 429, "{status}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("other_embedding_space") && message.contains("emb/text-embedding-3-large"),
        "{message}"
    );
    assert!(message.contains("embeds_like"), "{message}");
    let asked: Vec<Value> =
        h.mock.embedding_attempts()[before..].iter().map(|a| a.body["model"].clone()).collect();
    assert!(!asked.contains(&json!("text-embedding-3-large")), "{asked:?}");
}

#[tokio::test]
async fn the_gemini_front_door_embeds_through_openai_and_an_openai_client_through_gemini() {
    let h = Harness::start(EMBEDDINGS).await;
    let want = |model, text| embedding(model, text, DEFAULT_DIMENSIONS);
    // Gemini's shapes to an OpenAI-dialect target: translated both ways.
    let one = json!({"content": {"parts": [{"text": "alpha"}]}, "taskType": "RETRIEVAL_QUERY"});
    let (status, _, answer) =
        json_parts(gemini(&h, "/v1beta/models/vectors:embedContent", &one).send().await.unwrap())
            .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(floats(&answer["embedding"]["values"]), want(SMALL, "alpha"));
    let sent = h.mock.embedding_attempts();
    assert_eq!(
        sent[0].body,
        json!({"model": SMALL, "input": ["alpha"], "encoding_format": "float"})
    );

    let batch = json!({"requests": [
        {"model": "models/vectors", "content": {"parts": [{"text": "alpha"}]}, "outputDimensionality": 4},
        {"model": "models/vectors", "content": {"parts": [{"text": "beta"}]}, "outputDimensionality": 4},
    ]});
    let path = "/v1beta/models/vectors:batchEmbedContents";
    let (status, _, answer) = json_parts(gemini(&h, path, &batch).send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    let got: Vec<Vec<f32>> =
        answer["embeddings"].as_array().unwrap().iter().map(|e| floats(&e["values"])).collect();
    assert_eq!(got, [embedding(SMALL, "alpha", 4), embedding(SMALL, "beta", 4)]);

    // An OpenAI client to a Gemini target: a batch of Gemini's, answered in OpenAI's shape.
    let body = json!({"model": "gvectors", "input": ["alpha", "beta"], "dimensions": 4});
    let (status, _, answer) = json_parts(embed(&h, &body).send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    let gemini_model = "gemini-embedding-001";
    assert_eq!(
        vectors(&answer),
        [embedding(gemini_model, "alpha", 4), embedding(gemini_model, "beta", 4)]
    );
    assert_eq!(answer["model"], "ge/gemini-embedding-001");
    let last = h.mock.embedding_attempts().pop().unwrap();
    assert!(
        last.path.ends_with("/models/gemini-embedding-001:batchEmbedContents"),
        "{}",
        last.path
    );
    assert_eq!(last.body["requests"][1]["model"], "models/gemini-embedding-001");

    // Gemini to Gemini: the client's own batch, its model renamed for the target.
    let batch = json!({"requests": [{"model": "models/gvectors", "content": {"parts": [{"text": "alpha"}]}, "title": "doc"}]});
    let path = "/v1beta/models/gvectors:batchEmbedContents";
    let (status, _, answer) = json_parts(gemini(&h, path, &batch).send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(floats(&answer["embeddings"][0]["values"]), want(gemini_model, "alpha"));
    let last = h.mock.embedding_attempts().pop().unwrap();
    assert_eq!(last.body["requests"][0]["title"], "doc", "passed through: {}", last.body);
    assert_eq!(last.body["requests"][0]["model"], "models/gemini-embedding-001");
}

#[tokio::test]
async fn bad_embeddings_input_is_refused_naming_the_field_and_nothing_is_sent() {
    let h = Harness::start(EMBEDDINGS).await;
    let rows = [
        (json!({"model": "vectors"}), "input"),
        (json!({"model": "vectors", "input": ["a", ""]}), "input[1]"),
        (json!({"model": "vectors", "input": "a", "encoding_format": "int8"}), "encoding_format"),
        (json!({"input": "a"}), "model"),
    ];
    for (body, field) in rows {
        let (status, _, answer) = json_parts(embed(&h, &body).send().await.unwrap()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{field}:")), "{body}: {message}");
    }
    let (status, _, answer) =
        json_parts(embed(&h, &json!({"model": "nope", "input": "a"})).send().await.unwrap()).await;
    assert_eq!(status, 404, "{answer}");
    assert!(h.mock.embedding_attempts().is_empty());
}

/// A recovery probe is a chat request, which an embedding model would refuse: once a benched
/// key's lock lapses, an embeddings request of its own brings it back, and no probe is sent.
#[tokio::test]
async fn a_benched_embedding_key_comes_back_by_serving_not_by_a_chat_probe() {
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(EMBEDDINGS, &clock).await;
    h.mock.enqueue(SMALL, Status::new(429).retry_after(Duration::from_secs(30)));
    let body = json!({"model": "vectors", "input": "alpha"});
    assert_eq!(embed(&h, &body).send().await.unwrap().status(), 200);
    assert!(h.app.lockout("emb", "e-1", SMALL).is_some());
    clock.advance(Duration::from_secs(31));
    for _ in 0..2 {
        assert_eq!(embed(&h, &body).send().await.unwrap().status(), 200);
    }
    h.app.probes_settled().await;
    let sent = h.mock.attempts();
    assert!(sent.iter().all(|a| a.endpoint == Endpoint::Embeddings), "no chat probe: {sent:?}");
    assert_eq!(keys_of(&sent)[2], "oa-1", "the lapsed key serves the next request itself");
    assert!(h.app.lockout("emb", "e-1", SMALL).is_none(), "and is no longer benched");
}
