//! Embeddings, in the two upstream dialects Switchyard routes them to: OpenAI's
//! `POST /v1/embeddings` and Gemini's `POST /v1beta/models/{model}:embedContent` and
//! `:batchEmbedContents`.
//!
//! An embeddings request is an attempt like a generation (see `server/exchange.rs`): it is
//! recorded (with [`crate::Endpoint::Embeddings`]), takes the model's next scripted behaviour
//! and is answered with it. This module only reads the request (refusing, with the real API's
//! 400, what the real API refuses) and renders the successful answer.
//!
//! The vectors are a pure function of (model, text, dimensions), [`embedding`], so a test can
//! compute the vector an upstream model gave for a text and tell two models apart. Token counts
//! (OpenAI's `usage`) are the mock's usual estimate, four bytes of text a token and at least
//! one, summed over the inputs; a token-array input counts its length.
//!
//! Invariants: the answer's bytes depend on the request and the scripted reply only; every
//! vector has unit length (but for rounding to `f32`); a refused request names what is wrong
//! in the dialect's own words.

use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::behavior::{Reply, Status};
use crate::dialect::tokens;

/// The length of a vector when the request asks for none (`dimensions`,
/// `outputDimensionality`): short, so recorded answers stay readable.
pub const DEFAULT_DIMENSIONS: usize = 8;

/// The most dimensions a request may ask for; more is refused like a size the model does not
/// have (no real model gives more than 4096).
pub const MAX_DIMENSIONS: usize = 8192;

/// The vector the mock gives `model` for `text` at `dimensions` (at least 1): component `i` is
/// read from the SHA-256 of (model, text, i) as a number in [-1, 1], then the whole vector is
/// scaled to unit length. Different models embed the same text differently; the same model
/// always embeds it the same way.
///
/// How a request's input becomes `text`: an OpenAI string input is the text itself; an OpenAI
/// token-array input is its JSON form without spaces (`[1,2,3]`); a Gemini content is the
/// `text` of its parts joined by newlines.
pub fn embedding(model: &str, text: &str, dimensions: usize) -> Vec<f32> {
    let raw: Vec<f64> = (0..dimensions.max(1))
        .map(|i| {
            let mut hash = Sha256::new();
            for field in [model.as_bytes(), text.as_bytes()] {
                hash.update((field.len() as u64).to_le_bytes());
                hash.update(field);
            }
            hash.update((i as u64).to_le_bytes());
            let digest = hash.finalize();
            let word = u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]);
            f64::from(word) / f64::from(u32::MAX) * 2.0 - 1.0
        })
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
    #[expect(clippy::cast_possible_truncation, reason = "an embedding is f32 on the wire")]
    raw.iter().map(|x| if norm > 0.0 { x / norm } else { *x } as f32).collect()
}

/// [`embedding`] as OpenAI sends it for `encoding_format: "base64"`: the base64 of the
/// vector's little-endian `f32`s.
pub fn embedding_base64(model: &str, text: &str, dimensions: usize) -> String {
    encode_base64(&embedding(model, text, dimensions))
}

/// The base64 of `vector`'s little-endian `f32`s, as OpenAI's `encoding_format: "base64"`.
pub(crate) fn encode_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Whether a model the listings name is an embedding model when nobody said so: its name
/// mentions embedding (`text-embedding-3-small`, `gemini-embedding-001`, `nomic-embed-text`).
pub(crate) fn looks_like_embedding_model(name: &str) -> bool {
    name.to_ascii_lowercase().contains("embed")
}

/// Which embeddings endpoint a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// OpenAI `POST /v1/embeddings`.
    OpenAi,
    /// Gemini `POST /v1beta/models/{model}:embedContent`.
    GeminiOne,
    /// Gemini `POST /v1beta/models/{model}:batchEmbedContents`.
    GeminiBatch,
}

/// A request the mock can answer: what to embed, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Request {
    pub(crate) inputs: Vec<Input>,
    /// OpenAI's `encoding_format: "base64"`.
    pub(crate) base64: bool,
}

/// One thing to embed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Input {
    /// What [`embedding`] is given for it.
    pub(crate) text: String,
    pub(crate) tokens: u64,
    pub(crate) dimensions: usize,
}

impl Call {
    /// Reads `body` as a request to `model` (the path's for Gemini; for OpenAI the body's, as
    /// the exchange read it), or the 400 the real API would answer.
    pub(crate) fn read(self, model: &str, body: &Value) -> Result<Request, Status> {
        match self {
            Self::OpenAi => read_openai(body).map_err(Refusal::openai),
            Self::GeminiOne => {
                let Some(body) = body.as_object() else {
                    return Err(gemini_refusal("Invalid JSON payload received."));
                };
                let input = read_gemini(body, "EmbedContentRequest").map_err(gemini_refusal)?;
                Ok(Request { inputs: vec![input], base64: false })
            }
            Self::GeminiBatch => read_gemini_batch(model, body).map_err(gemini_refusal),
        }
    }

    /// The successful answer to `request` for `model`, as bytes (typed, so each `f32` is
    /// written in its shortest form, as the real APIs write them). A reply with scripted
    /// usage reports its prompt tokens instead of the estimate (OpenAI only: Gemini's
    /// embeddings answers carry no usage).
    pub(crate) fn document(self, model: &str, request: &Request, reply: &Reply) -> Vec<u8> {
        let vector = |input: &Input| embedding(model, &input.text, input.dimensions);
        let written = match self {
            Self::OpenAi => {
                let data = request
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(index, input)| {
                        let vector = vector(input);
                        OpenAiEmbedding {
                            object: "embedding",
                            index,
                            embedding: if request.base64 {
                                Vector::Base64(encode_base64(&vector))
                            } else {
                                Vector::Floats(vector)
                            },
                        }
                    })
                    .collect();
                let prompt = reply.usage.map_or_else(
                    || request.inputs.iter().map(|input| input.tokens).sum(),
                    |t| t.input + t.cache_read + t.cache_write,
                );
                let usage = OpenAiUsage { prompt_tokens: prompt, total_tokens: prompt };
                serde_json::to_vec(&OpenAiList { object: "list", data, model, usage })
            }
            Self::GeminiOne => {
                let values = request.inputs.first().map(vector).unwrap_or_default();
                serde_json::to_vec(&GeminiOne { embedding: GeminiValues { values } })
            }
            Self::GeminiBatch => {
                let embeddings =
                    request.inputs.iter().map(|input| GeminiValues { values: vector(input) });
                serde_json::to_vec(&GeminiBatch { embeddings: embeddings.collect() })
            }
        };
        written.expect("an embeddings answer always serialises")
    }
}

#[derive(Serialize)]
struct OpenAiList<'a> {
    object: &'static str,
    data: Vec<OpenAiEmbedding>,
    model: &'a str,
    usage: OpenAiUsage,
}

#[derive(Serialize)]
struct OpenAiEmbedding {
    object: &'static str,
    index: usize,
    embedding: Vector,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Vector {
    Floats(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
struct OpenAiUsage {
    prompt_tokens: u64,
    total_tokens: u64,
}

#[derive(Serialize)]
struct GeminiOne {
    embedding: GeminiValues,
}

#[derive(Serialize)]
struct GeminiBatch {
    embeddings: Vec<GeminiValues>,
}

#[derive(Serialize)]
struct GeminiValues {
    values: Vec<f32>,
}

/// What OpenAI says about a request it refuses: `{"error": {message, type, param, code}}`.
struct Refusal {
    message: String,
    param: Option<&'static str>,
    code: Option<&'static str>,
}

impl Refusal {
    fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), param: None, code: None }
    }

    fn about(mut self, param: &'static str, code: &'static str) -> Self {
        self.param = Some(param);
        self.code = Some(code);
        self
    }

    fn openai(self) -> Status {
        Status::new(400).body_json(serde_json::json!({
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }))
    }
}

/// OpenAI's words for an `input` its schema does not accept.
const INVALID_INPUT: &str = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.";

/// How many inputs one OpenAI request may carry.
const OPENAI_MAX_INPUTS: usize = 2048;

/// How many requests one Gemini batch may carry.
const GEMINI_MAX_BATCH: usize = 100;

fn read_openai(body: &Value) -> Result<Request, Refusal> {
    let Some(body) = body.as_object() else {
        return Err(Refusal::new(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.",
        ));
    };
    if body.get("model").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(Refusal::new("you must provide a model parameter"));
    }
    let dimensions = match body.get("dimensions") {
        None | Some(Value::Null) => DEFAULT_DIMENSIONS,
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => {
            match n.as_u64().and_then(|d| usize::try_from(d).ok()) {
                Some(d) if (1..=MAX_DIMENSIONS).contains(&d) => d,
                Some(d) if d > MAX_DIMENSIONS => {
                    return Err(Refusal::new(format!(
                        "This model does not support specifying dimensions greater than {MAX_DIMENSIONS}."
                    ))
                    .about("dimensions", "invalid_value"));
                }
                _ => {
                    return Err(Refusal::new(format!(
                        "Invalid value for 'dimensions' = {n}. Must be greater than or equal to 1."
                    ))
                    .about("dimensions", "invalid_value"));
                }
            }
        }
        Some(other) => {
            return Err(Refusal::new(format!(
                "Invalid type for 'dimensions': expected an integer, but got {} instead.",
                type_name(other)
            ))
            .about("dimensions", "invalid_type"));
        }
    };
    let base64 = match body.get("encoding_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(format)) if format == "float" => false,
        Some(Value::String(format)) if format == "base64" => true,
        Some(other) => {
            return Err(Refusal::new(format!(
                "Invalid value: {other}. Supported values are: 'float' and 'base64'."
            ))
            .about("encoding_format", "invalid_value"));
        }
    };
    let invalid = || Refusal::new(INVALID_INPUT);
    let text = |text: &str| Input { text: text.to_owned(), tokens: tokens(text.len()), dimensions };
    let token_array = |items: &[Value]| -> Option<Input> {
        if items.is_empty() || !items.iter().all(Value::is_u64) {
            return None;
        }
        let text = Value::Array(items.to_vec()).to_string();
        Some(Input { text, tokens: items.len() as u64, dimensions })
    };
    let inputs = match body.get("input") {
        None | Some(Value::Null) => {
            return Err(Refusal::new("Missing required parameter: 'input'.")
                .about("input", "missing_required_parameter"));
        }
        Some(Value::String(s)) if s.is_empty() => return Err(invalid()),
        Some(Value::String(s)) => vec![text(s)],
        Some(Value::Array(items)) if items.is_empty() || items.len() > OPENAI_MAX_INPUTS => {
            return Err(invalid());
        }
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .map(|item| item.as_str().filter(|s| !s.is_empty()).map(text))
            .collect::<Option<_>>()
            .ok_or_else(invalid)?,
        Some(Value::Array(items)) if items.iter().all(Value::is_number) => {
            vec![token_array(items).ok_or_else(invalid)?]
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_array().and_then(|tokens| token_array(tokens)))
            .collect::<Option<_>>()
            .ok_or_else(invalid)?,
        Some(_) => return Err(invalid()),
    };
    Ok(Request { inputs, base64 })
}

/// JSON's name for a value's type, as OpenAI's type errors spell it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a decimal",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A 400 `INVALID_ARGUMENT` in Gemini's error shape, with this message.
fn gemini_refusal(message: impl Into<String>) -> Status {
    Status::new(400).message(message)
}

/// The task types Gemini's `taskType` accepts.
const TASK_TYPES: &[&str] = &[
    "TASK_TYPE_UNSPECIFIED",
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
];

/// One `EmbedContentRequest`; `at` names it in messages the way Google's field errors do
/// (`BatchEmbedContentsRequest.requests[2]`).
fn read_gemini(request: &serde_json::Map<String, Value>, at: &str) -> Result<Input, String> {
    if let Some(task) = request.get("taskType").filter(|t| !t.is_null())
        && !task.as_str().is_some_and(|task| TASK_TYPES.contains(&task))
    {
        return Err(format!(
            "Invalid value at '{}' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), {task}",
            snake_path(at, "task_type")
        ));
    }
    let dimensions = match request.get("outputDimensionality") {
        None | Some(Value::Null) => DEFAULT_DIMENSIONS,
        Some(value) => match value.as_u64().and_then(|d| usize::try_from(d).ok()) {
            Some(d) if (1..=MAX_DIMENSIONS).contains(&d) => d,
            Some(d) if d > MAX_DIMENSIONS => {
                return Err(format!(
                    "* {at}.output_dimensionality: Output dimensionality must be at most {MAX_DIMENSIONS}, got {d}."
                ));
            }
            _ => {
                return Err(format!(
                    "* {at}.output_dimensionality: Output dimensionality must be a positive integer, got {value}."
                ));
            }
        },
    };
    let parts = request
        .get("content")
        .and_then(|content| content.get("parts"))
        .and_then(Value::as_array)
        .filter(|parts| !parts.is_empty())
        .ok_or_else(|| format!("* {at}.content.parts: contents.parts must not be empty.\n"))?;
    let texts: Vec<&str> = parts.iter().filter_map(|part| part.get("text")?.as_str()).collect();
    if texts.len() != parts.len() {
        return Err(format!("* {at}.content.parts: only text parts can be embedded.\n"));
    }
    let text = texts.join("\n");
    if text.is_empty() {
        return Err(format!("* {at}.content: the text to embed must not be empty.\n"));
    }
    Ok(Input { tokens: tokens(text.len()), text, dimensions })
}

fn read_gemini_batch(model: &str, body: &Value) -> Result<Request, String> {
    let at = "BatchEmbedContentsRequest";
    let requests = body
        .get("requests")
        .and_then(Value::as_array)
        .filter(|requests| !requests.is_empty())
        .ok_or_else(|| format!("* {at}.requests: requests must not be empty.\n"))?;
    if requests.len() > GEMINI_MAX_BATCH {
        return Err(format!(
            "* {at}.requests: at most {GEMINI_MAX_BATCH} requests can be in one batch\n"
        ));
    }
    let inputs = requests
        .iter()
        .enumerate()
        .map(|(i, request)| {
            let at = format!("{at}.requests[{i}]");
            let request =
                request.as_object().ok_or_else(|| format!("* {at}: must be an object.\n"))?;
            let named = request.get("model").and_then(Value::as_str).unwrap_or_default();
            if named.is_empty() {
                return Err(format!("* {at}.model: unexpected model name format\n"));
            }
            if named.strip_prefix("models/").unwrap_or(named) != model {
                return Err(format!(
                    "* {at}.model: the model of each request must be the batch's (models/{model}), not {named}.\n"
                ));
            }
            read_gemini(request, &at)
        })
        .collect::<Result<_, _>>()?;
    Ok(Request { inputs, base64: false })
}

/// `at`'s field path in the `snake_case` Google's enum errors name it with:
/// `BatchEmbedContentsRequest.requests[0]` and `task_type` become `requests[0].task_type`.
fn snake_path(at: &str, field: &str) -> String {
    match at.split_once('.') {
        Some((_, path)) => format!("{path}.{field}"),
        None => field.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::behavior::Tokens;

    fn decode(text: &str) -> Vec<f32> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    }

    fn refusal(call: Call, model: &str, body: &Value) -> Status {
        call.read(model, body).expect_err("refused")
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_differ_by_model_and_text() {
        let a = embedding("text-embedding-3-small", "hello", DEFAULT_DIMENSIONS);
        assert_eq!(a.len(), 8);
        assert_eq!(a, embedding("text-embedding-3-small", "hello", 8), "a pure function");
        let norm = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "{norm}");
        assert_ne!(a, embedding("gemini-embedding-001", "hello", 8), "another model");
        assert_ne!(a, embedding("text-embedding-3-small", "hello!", 8), "another text");
        assert_eq!(embedding("m", "x", 3).len(), 3);
        assert_eq!(embedding("m", "x", 0).len(), 1, "at least one dimension");
        // (model, text) is length-delimited: moving a byte across the boundary changes it.
        assert_ne!(embedding("ab", "c", 8), embedding("a", "bc", 8));
    }

    #[test]
    fn base64_is_the_little_endian_f32s() {
        let vector = embedding("m", "round trip", 5);
        assert_eq!(decode(&embedding_base64("m", "round trip", 5)), vector);
    }

    #[test]
    fn openai_inputs_of_every_form_are_read_with_their_token_counts() {
        let read = |input: Value| Call::OpenAi.read("m", &json!({"model": "m", "input": input}));
        let one = read(json!("abcdefghi")).unwrap();
        assert_eq!(one.inputs.len(), 1);
        assert_eq!((one.inputs[0].tokens, one.inputs[0].dimensions), (3, 8));
        let many = read(json!(["a", "bcdef"])).unwrap();
        assert_eq!(many.inputs.iter().map(|i| i.tokens).collect::<Vec<_>>(), [1, 2]);
        let tokens = read(json!([1, 2, 3])).unwrap();
        assert_eq!((tokens.inputs[0].text.as_str(), tokens.inputs[0].tokens), ("[1,2,3]", 3));
        let arrays = read(json!([[1, 2], [3]])).unwrap();
        assert_eq!(arrays.inputs.iter().map(|i| i.tokens).collect::<Vec<_>>(), [2, 1]);
        let sized = Call::OpenAi
            .read("m", &json!({"model": "m", "input": "x", "dimensions": 3, "encoding_format": "base64", "user": "u"}))
            .unwrap();
        assert_eq!((sized.inputs[0].dimensions, sized.base64), (3, true));
    }

    #[test]
    fn openai_refuses_what_openai_refuses() {
        let cases = [
            json!({"input": "x"}),
            json!({"model": "m"}),
            json!({"model": "m", "input": ""}),
            json!({"model": "m", "input": []}),
            json!({"model": "m", "input": ["a", ""]}),
            json!({"model": "m", "input": [[]]}),
            json!({"model": "m", "input": [1, "a"]}),
            json!({"model": "m", "input": [-1]}),
            json!({"model": "m", "input": 7}),
            json!({"model": "m", "input": "x", "dimensions": 0}),
            json!({"model": "m", "input": "x", "dimensions": -2}),
            json!({"model": "m", "input": "x", "dimensions": "8"}),
            json!({"model": "m", "input": "x", "dimensions": MAX_DIMENSIONS + 1}),
            json!({"model": "m", "input": "x", "encoding_format": "binary"}),
            json!("not an object"),
        ];
        for body in cases {
            let status = refusal(Call::OpenAi, "m", &body);
            assert_eq!(status.code, Some(400), "{body}");
            let error = &status.body.as_ref().expect("OpenAI's own body")["error"];
            assert_eq!(error["type"], "invalid_request_error", "{body}");
            assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
        }
        let missing = refusal(Call::OpenAi, "", &json!({"input": "x"})).body.unwrap();
        assert_eq!(missing["error"]["message"], "you must provide a model parameter");
        let zero =
            refusal(Call::OpenAi, "m", &json!({"model": "m", "input": "x", "dimensions": 0}));
        assert_eq!(zero.body.unwrap()["error"]["param"], "dimensions");
    }

    #[test]
    fn gemini_reads_one_content_and_a_batch_of_the_paths_model() {
        let one = Call::GeminiOne
            .read(
                "g",
                &json!({"content": {"parts": [{"text": "a"}, {"text": "b"}]}, "taskType": "RETRIEVAL_QUERY", "title": "t", "outputDimensionality": 4}),
            )
            .unwrap();
        assert_eq!((one.inputs[0].text.as_str(), one.inputs[0].dimensions), ("a\nb", 4));
        let batch = Call::GeminiBatch
            .read(
                "g",
                &json!({"requests": [
                    {"model": "models/g", "content": {"parts": [{"text": "x"}]}},
                    {"model": "models/g", "content": {"parts": [{"text": "y"}]}, "outputDimensionality": 2},
                ]}),
            )
            .unwrap();
        let dims: Vec<usize> = batch.inputs.iter().map(|i| i.dimensions).collect();
        assert_eq!(dims, [8, 2]);
    }

    #[test]
    fn gemini_refuses_a_batch_of_another_model_and_bad_contents() {
        let mismatch = refusal(
            Call::GeminiBatch,
            "g",
            &json!({"requests": [{"model": "models/other", "content": {"parts": [{"text": "x"}]}}]}),
        );
        assert_eq!((mismatch.code, mismatch.body.as_ref()), (Some(400), None), "Gemini's shape");
        assert!(mismatch.message.unwrap().contains("requests[0].model"));
        for body in [
            json!({"requests": []}),
            json!({"requests": [{"content": {"parts": [{"text": "x"}]}}]}),
            json!({"requests": [{"model": "models/g", "content": {"parts": []}}]}),
        ] {
            assert_eq!(refusal(Call::GeminiBatch, "g", &body).code, Some(400), "{body}");
        }
        for body in [
            json!({}),
            json!({"content": {"parts": [{"text": ""}]}}),
            json!({"content": {"parts": [{"inlineData": {}}]}}),
            json!({"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 0}),
            json!({"content": {"parts": [{"text": "x"}]}, "taskType": "NOPE"}),
            json!([]),
        ] {
            assert_eq!(refusal(Call::GeminiOne, "g", &body).code, Some(400), "{body}");
        }
    }

    #[test]
    fn openai_documents_have_openais_shape_and_usage() {
        let request =
            Call::OpenAi.read("m", &json!({"model": "m", "input": ["abcde", "fg"]})).unwrap();
        let document: Value =
            serde_json::from_slice(&Call::OpenAi.document("m", &request, &Reply::default()))
                .unwrap();
        assert_eq!(document["object"], "list");
        assert_eq!(document["model"], "m");
        assert_eq!(document["usage"], json!({"prompt_tokens": 3, "total_tokens": 3}));
        assert_eq!(document["data"][1]["object"], "embedding");
        assert_eq!(document["data"][1]["index"], 1);
        let floats: Vec<f32> = serde_json::from_value(document["data"][1]["embedding"].clone())
            .expect("a list of numbers");
        assert_eq!(floats, embedding("m", "fg", DEFAULT_DIMENSIONS));
        let scripted =
            Reply { usage: Some(Tokens { input: 42, ..Tokens::default() }), ..Reply::default() };
        let document: Value =
            serde_json::from_slice(&Call::OpenAi.document("m", &request, &scripted)).unwrap();
        assert_eq!(document["usage"]["prompt_tokens"], 42);
    }
}
