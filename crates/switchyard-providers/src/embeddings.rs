//! Embeddings: OpenAI's `POST /v1/embeddings` and Gemini's `models/{model}:embedContent` and
//! `:batchEmbedContents`, read into one [`EmbedRequest`] and written for either dialect.
//!
//! A request goes to a target of its own dialect as it was sent (the model rewritten; a Gemini
//! batch's `requests[].model` too, which the API checks against the path), and translated to
//! the other; the answer comes back the same way. Translation keeps what changes the vectors
//! (the texts, the dimensions) and refuses a request it cannot carry whole: token-array input
//! to Gemini, a Gemini batch whose requests ask for different sizes to OpenAI. What only
//! shapes the answer (`encoding_format`) is done here; Gemini's `taskType` and `title`, which
//! OpenAI has no words for, are named as dropped.

use std::borrow::Cow;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_core::usage::Usage;

use crate::dialect::{Dialect, Dropped};
use crate::error::ProviderError;
use crate::passthrough;

/// The shape a client asked in, and answers are written back in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `POST /v1/embeddings`.
    OpenAi,
    /// `models/{model}:embedContent`: one content, one `embedding`.
    GeminiOne,
    /// `models/{model}:batchEmbedContents`: `requests[]`, answered with `embeddings[]`.
    GeminiBatch,
}

impl Shape {
    /// The upstream dialect that takes this shape as it is.
    pub fn dialect(self) -> Dialect {
        match self {
            Self::OpenAi => Dialect::OpenAi,
            Self::GeminiOne | Self::GeminiBatch => Dialect::Gemini,
        }
    }
}

/// What is embedded.
#[derive(Clone, Debug, PartialEq)]
pub enum Input<'a> {
    Texts(Vec<Cow<'a, str>>),
    /// Token ids (OpenAI only: the ids of its own tokenizer), one array per input.
    Tokens(Vec<Vec<u32>>),
}

impl Input<'_> {
    pub fn len(&self) -> usize {
        match self {
            Self::Texts(texts) => texts.len(),
            Self::Tokens(tokens) => tokens.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One embeddings request, in either client shape.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedRequest<'a> {
    pub shape: Shape,
    /// As the client named it (the path's, for Gemini).
    pub model: Cow<'a, str>,
    pub input: Input<'a>,
    /// The size of each vector, when the client chose one (`dimensions`,
    /// `outputDimensionality`).
    pub dimensions: Option<u32>,
    /// The client wants each vector as base64 of little-endian `f32`s (OpenAI's
    /// `encoding_format: "base64"`, what its SDKs ask by default).
    pub base64: bool,
    /// Gemini's `taskType` (`RETRIEVAL_QUERY`, ...), sent on to Gemini targets only.
    pub task_type: Option<Cow<'a, str>>,
}

/// An upstream's answer, read.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedded {
    /// One vector per input, in the input's order.
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens, when the upstream said.
    pub usage: Option<Usage>,
}

impl<'a> EmbedRequest<'a> {
    /// Reads a client's body in `shape`; `path_model` is the model a Gemini path names. The
    /// error names the field.
    pub fn parse(
        shape: Shape,
        body: &'a [u8],
        path_model: Option<&'a str>,
    ) -> Result<Self, ProviderError> {
        match shape {
            Shape::OpenAi => parse_openai(body),
            Shape::GeminiOne | Shape::GeminiBatch => {
                let model = path_model.ok_or_else(|| invalid("model", "missing from the path"))?;
                parse_gemini(shape, body, model)
            }
        }
    }

    /// The upstream body for `model` in `dialect`: the client's own bytes with the model
    /// rewritten when `passthrough`, else translated; what translation could not carry goes to
    /// `dropped`.
    pub fn encode_for(
        &self,
        dialect: Dialect,
        model: &str,
        client_body: &[u8],
        passthrough: bool,
        dropped: &mut Dropped,
    ) -> Result<Vec<u8>, ProviderError> {
        if passthrough {
            return match self.shape {
                Shape::OpenAi => {
                    passthrough::rewrite_model(client_body, model, Some(self.model.as_ref()))
                }
                Shape::GeminiOne => Ok(client_body.to_vec()),
                Shape::GeminiBatch => rename_batch(client_body, model),
            };
        }
        match dialect {
            Dialect::OpenAi => Ok(self.to_openai(model, dropped)),
            Dialect::Gemini => self.to_gemini(model),
            other => Err(ProviderError::Untranslatable {
                dialect: other,
                message: format!("{other} serves no embeddings"),
            }),
        }
    }

    /// Whether `dialect` takes this request as it was sent.
    pub fn passes_to(&self, dialect: Dialect) -> bool {
        self.shape.dialect() == dialect
    }

    fn to_openai(&self, model: &str, dropped: &mut Dropped) -> Vec<u8> {
        if self.task_type.is_some() {
            dropped.note("taskType");
        }
        let input = match &self.input {
            Input::Texts(texts) => json!(texts),
            Input::Tokens(tokens) => json!(tokens),
        };
        let mut body = json!({ "model": model, "input": input, "encoding_format": "float" });
        if let Some(dimensions) = self.dimensions {
            body["dimensions"] = dimensions.into();
        }
        body.to_string().into_bytes()
    }

    fn to_gemini(&self, model: &str) -> Result<Vec<u8>, ProviderError> {
        let Input::Texts(texts) = &self.input else {
            return Err(ProviderError::Untranslatable {
                dialect: Dialect::Gemini,
                message: "input: token ids are OpenAI's tokenizer's; Gemini embeds text only"
                    .into(),
            });
        };
        let one = |text: &str| {
            let mut request = json!({ "content": { "parts": [{ "text": text }] } });
            if let Some(task) = &self.task_type {
                request["taskType"] = json!(task);
            }
            if let Some(dimensions) = self.dimensions {
                request["outputDimensionality"] = dimensions.into();
            }
            request
        };
        let body = match texts.as_slice() {
            [text] if self.shape != Shape::GeminiBatch => one(text),
            texts => {
                let name = resource(model);
                let requests: Vec<Value> = texts
                    .iter()
                    .map(|text| {
                        let mut request = one(text);
                        request["model"] = json!(name);
                        request
                    })
                    .collect();
                json!({ "requests": requests })
            }
        };
        Ok(body.to_string().into_bytes())
    }

    /// The path after `models/` of the Gemini method this request is sent with: `:embedContent`
    /// for one text asked as one, `:batchEmbedContents` otherwise.
    pub fn gemini_method(&self, passthrough: bool) -> &'static str {
        let one = match self.shape {
            Shape::GeminiOne => true,
            Shape::GeminiBatch => false,
            Shape::OpenAi => !passthrough && self.input.len() == 1,
        };
        if one { "embedContent" } else { "batchEmbedContents" }
    }

    /// The answer to the client in its shape, from a translated upstream's vectors.
    /// `label` names the target that served (OpenAI's `model`).
    pub fn encode_answer(&self, embedded: &Embedded, label: &str) -> Vec<u8> {
        let body = match self.shape {
            Shape::OpenAi => {
                let data: Vec<Value> = embedded
                    .vectors
                    .iter()
                    .enumerate()
                    .map(|(index, vector)| {
                        let embedding =
                            if self.base64 { json!(base64_of(vector)) } else { json!(vector) };
                        json!({ "object": "embedding", "index": index, "embedding": embedding })
                    })
                    .collect();
                let tokens = embedded.usage.map_or(0, |u| u.uncached_input);
                json!({
                    "object": "list",
                    "data": data,
                    "model": label,
                    "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
                })
            }
            Shape::GeminiOne => json!({
                "embedding": { "values": embedded.vectors.first().cloned().unwrap_or_default() },
            }),
            Shape::GeminiBatch => {
                let embeddings: Vec<Value> =
                    embedded.vectors.iter().map(|v| json!({ "values": v })).collect();
                json!({ "embeddings": embeddings })
            }
        };
        body.to_string().into_bytes()
    }
}

/// Reads an upstream's 2xx answer in `dialect`: its vectors, which must be as many as the
/// request's inputs, and its usage.
pub fn decode_answer(
    dialect: Dialect,
    body: &[u8],
    inputs: usize,
) -> Result<Embedded, ProviderError> {
    let bad = |message: String| ProviderError::InvalidResponse { dialect, message };
    let embedded = match dialect {
        Dialect::OpenAi => {
            #[derive(Deserialize)]
            struct Answer {
                data: Vec<Datum>,
                #[serde(default)]
                usage: Option<OpenAiUsage>,
            }
            #[derive(Deserialize)]
            struct Datum {
                #[serde(default)]
                index: Option<usize>,
                embedding: Vector,
            }
            #[derive(Deserialize)]
            #[serde(untagged)]
            enum Vector {
                Floats(Vec<f32>),
                Base64(String),
            }
            let answer: Answer = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
            let mut data = answer.data;
            // `index` orders the vectors; an upstream that leaves it out lists them in order.
            data.sort_by_key(|d| d.index.unwrap_or(0));
            let vectors = data
                .into_iter()
                .map(|datum| match datum.embedding {
                    Vector::Floats(floats) => Ok(floats),
                    Vector::Base64(text) => floats_of(&text).ok_or_else(|| {
                        bad("an `embedding` is neither numbers nor base64 of f32s".into())
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Embedded { vectors, usage: answer.usage.map(OpenAiUsage::usage) }
        }
        Dialect::Gemini => {
            #[derive(Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Answer {
                #[serde(default)]
                embedding: Option<Values>,
                #[serde(default)]
                embeddings: Option<Vec<Values>>,
                #[serde(default)]
                usage_metadata: Option<GeminiUsage>,
            }
            #[derive(Deserialize)]
            struct Values {
                values: Vec<f32>,
            }
            #[derive(Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct GeminiUsage {
                #[serde(default)]
                prompt_token_count: u64,
            }
            let answer: Answer = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
            let vectors = match (answer.embedding, answer.embeddings) {
                (Some(one), None) => vec![one.values],
                (None, Some(many)) => many.into_iter().map(|v| v.values).collect(),
                _ => return Err(bad("neither `embedding` nor `embeddings`".into())),
            };
            let usage = answer
                .usage_metadata
                .map(|u| Usage { uncached_input: u.prompt_token_count, ..Usage::default() });
            Embedded { vectors, usage }
        }
        other => return Err(bad(format!("{other} serves no embeddings"))),
    };
    if embedded.vectors.len() != inputs {
        return Err(bad(format!("{} vectors for {inputs} inputs", embedded.vectors.len())));
    }
    Ok(embedded)
}

#[derive(Deserialize)]
struct OpenAiUsage {
    #[serde(default)]
    prompt_tokens: u64,
}

impl OpenAiUsage {
    fn usage(self) -> Usage {
        Usage { uncached_input: self.prompt_tokens, ..Usage::default() }
    }
}

fn invalid(path: &str, message: &str) -> ProviderError {
    ProviderError::InvalidRequest { path: path.to_owned(), message: message.to_owned() }
}

fn parse_openai(body: &[u8]) -> Result<EmbedRequest<'_>, ProviderError> {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        model: Option<Cow<'a, str>>,
        #[serde(default)]
        input: Option<Value>,
        #[serde(default)]
        dimensions: Option<Value>,
        #[serde(borrow, default)]
        encoding_format: Option<Cow<'a, str>>,
    }
    let parsed: Body<'_> = serde_json::from_slice(body)
        .map_err(|e| invalid("", &format!("not a JSON object: {e}")))?;
    let model = parsed.model.ok_or_else(|| invalid("model", "missing or not a string"))?;
    let input = match parsed.input {
        None | Some(Value::Null) => return Err(invalid("input", "missing")),
        Some(input) => openai_input(input)?,
    };
    let dimensions = parsed.dimensions.map(|d| positive(&d, "dimensions")).transpose()?;
    let base64 = match parsed.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(invalid(
                "encoding_format",
                &format!("\"{other}\" is neither \"float\" nor \"base64\""),
            ));
        }
    };
    Ok(EmbedRequest { shape: Shape::OpenAi, model, input, dimensions, base64, task_type: None })
}

/// OpenAI's `input`: a string, an array of strings, an array of token ids, or an array of
/// such arrays.
fn openai_input(input: Value) -> Result<Input<'static>, ProviderError> {
    let empty = || invalid("input", "must not be empty");
    match input {
        Value::String(text) if text.is_empty() => Err(empty()),
        Value::String(text) => Ok(Input::Texts(vec![Cow::Owned(text)])),
        Value::Array(items) if items.is_empty() => Err(empty()),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let texts: Vec<Cow<'static, str>> = items
                .into_iter()
                .map(|item| match item {
                    Value::String(text) => Cow::Owned(text),
                    _ => unreachable!("all strings"),
                })
                .collect();
            if let Some(at) = texts.iter().position(|t| t.is_empty()) {
                return Err(invalid(&format!("input[{at}]"), "must not be an empty string"));
            }
            Ok(Input::Texts(texts))
        }
        Value::Array(items) if items.iter().all(Value::is_number) => {
            Ok(Input::Tokens(vec![token_ids(&items, "input")?]))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(at, item)| match item {
                Value::Array(ids) if !ids.is_empty() => token_ids(ids, &format!("input[{at}]")),
                _ => Err(invalid(
                    &format!("input[{at}]"),
                    "a list of inputs is all strings or all non-empty arrays of token ids",
                )),
            })
            .collect::<Result<_, _>>()
            .map(Input::Tokens),
        _ => Err(invalid("input", "must be a string, an array of strings or of token ids")),
    }
}

fn token_ids(items: &[Value], path: &str) -> Result<Vec<u32>, ProviderError> {
    items
        .iter()
        .enumerate()
        .map(|(at, id)| {
            id.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| invalid(&format!("{path}[{at}]"), "a token id is a whole number"))
        })
        .collect()
}

fn positive(value: &Value, path: &str) -> Result<u32, ProviderError> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(path, "must be a whole number of at least 1"))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiOne<'a> {
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default)]
    task_type: Option<Cow<'a, str>>,
    #[serde(default)]
    output_dimensionality: Option<Value>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Vec<TextPart<'a>>,
}

#[derive(Deserialize)]
struct TextPart<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

fn parse_gemini<'a>(
    shape: Shape,
    body: &'a [u8],
    model: &'a str,
) -> Result<EmbedRequest<'a>, ProviderError> {
    let not_json = |e: serde_json::Error| invalid("", &format!("not a JSON object: {e}"));
    let ones: Vec<GeminiOne<'a>> = if shape == Shape::GeminiBatch {
        #[derive(Deserialize)]
        struct Batch<'a> {
            #[serde(borrow, default)]
            requests: Vec<GeminiOne<'a>>,
        }
        let batch: Batch<'a> = serde_json::from_slice(body).map_err(not_json)?;
        if batch.requests.is_empty() {
            return Err(invalid("requests", "must not be empty"));
        }
        batch.requests
    } else {
        vec![serde_json::from_slice(body).map_err(not_json)?]
    };
    let prefix = |at: usize| {
        if shape == Shape::GeminiBatch { format!("requests[{at}].") } else { String::new() }
    };
    let mut texts = Vec::with_capacity(ones.len());
    let mut settings: Option<(Option<Cow<'a, str>>, Option<u32>)> = None;
    for (at, one) in ones.into_iter().enumerate() {
        let path = prefix(at);
        let content = one.content.ok_or_else(|| invalid(&format!("{path}content"), "missing"))?;
        let text: String = content.parts.iter().filter_map(|p| p.text.as_deref()).collect();
        if text.is_empty() {
            return Err(invalid(&format!("{path}content.parts"), "has no text to embed"));
        }
        texts.push(Cow::Owned(text));
        let dimensions = one
            .output_dimensionality
            .map(|d| positive(&d, &format!("{path}outputDimensionality")))
            .transpose()?;
        let these = (one.task_type, dimensions);
        match &settings {
            None => settings = Some(these),
            Some(first) if *first == these => {}
            Some(_) => {
                return Err(invalid(
                    &format!("{path}outputDimensionality"),
                    "every request of a batch routed by Switchyard asks for the same \
                     `taskType` and `outputDimensionality` (send the others as a batch of their own)",
                ));
            }
        }
    }
    let (task_type, dimensions) = settings.unwrap_or_default();
    Ok(EmbedRequest {
        shape,
        model: Cow::Borrowed(model),
        input: Input::Texts(texts),
        dimensions,
        base64: false,
        task_type,
    })
}

/// `models/{model}`, or the name as it is when it already names its resource.
fn resource(model: &str) -> String {
    if model.contains('/') { model.to_owned() } else { format!("models/{model}") }
}

/// A Gemini batch for `model`: each `requests[].model` renamed, every other field as sent.
fn rename_batch(body: &[u8], model: &str) -> Result<Vec<u8>, ProviderError> {
    let mut batch: Value =
        serde_json::from_slice(body).map_err(|e| invalid("", &format!("not JSON: {e}")))?;
    let name = resource(model);
    if let Some(requests) = batch.get_mut("requests").and_then(Value::as_array_mut) {
        for request in requests {
            if let Some(request) = request.as_object_mut() {
                request.insert("model".into(), json!(name));
            }
        }
    }
    Ok(batch.to_string().into_bytes())
}

/// Base64 of a vector's little-endian `f32`s, as OpenAI writes `encoding_format: "base64"`.
fn base64_of(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn floats_of(text: &str) -> Option<Vec<f32>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    (bytes.len() % 4 == 0).then(|| {
        bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(value: &Value) -> Vec<u8> {
        value.to_string().into_bytes()
    }

    fn encoded(request: &EmbedRequest<'_>, dialect: Dialect) -> Value {
        let mut dropped = Dropped::default();
        let bytes = request.encode_for(dialect, "up", b"", false, &mut dropped).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn every_openai_input_form_is_read_and_bad_ones_name_the_field() {
        let rows: [(Value, Result<Input<'_>, &str>); 8] = [
            (json!("hi"), Ok(Input::Texts(vec!["hi".into()]))),
            (json!(["a", "b"]), Ok(Input::Texts(vec!["a".into(), "b".into()]))),
            (json!([1, 2]), Ok(Input::Tokens(vec![vec![1, 2]]))),
            (json!([[1], [2, 3]]), Ok(Input::Tokens(vec![vec![1], vec![2, 3]]))),
            (json!(""), Err("input")),
            (json!(["a", ""]), Err("input[1]")),
            (json!([[1], "a"]), Err("input[1]")),
            (json!({"text": "a"}), Err("input")),
        ];
        for (input, expected) in rows {
            let bytes = body(&json!({"model": "m", "input": input}));
            let parsed = EmbedRequest::parse(Shape::OpenAi, &bytes, None);
            match (parsed, expected) {
                (Ok(request), Ok(expected)) => assert_eq!(request.input, expected, "{input}"),
                (Err(ProviderError::InvalidRequest { path, .. }), Err(field)) => {
                    assert_eq!(path, field, "{input}");
                }
                (other, expected) => panic!("{input}: {other:?}, expected {expected:?}"),
            }
        }
        let missing = EmbedRequest::parse(Shape::OpenAi, br#"{"input":"a"}"#, None).unwrap_err();
        assert!(missing.to_string().starts_with("model:"), "{missing}");
        let format = br#"{"model":"m","input":"a","encoding_format":"int8"}"#;
        let refused = EmbedRequest::parse(Shape::OpenAi, format, None).unwrap_err();
        assert!(refused.to_string().contains("encoding_format"), "{refused}");
    }

    #[test]
    fn an_openai_request_goes_to_gemini_as_a_batch_with_its_dimensions() {
        let bytes = body(&json!({"model": "m", "input": ["a", "b"], "dimensions": 4}));
        let request = EmbedRequest::parse(Shape::OpenAi, &bytes, None).unwrap();
        assert_eq!(request.gemini_method(false), "batchEmbedContents");
        let gemini = encoded(&request, Dialect::Gemini);
        assert_eq!(gemini["requests"][1]["model"], "models/up");
        assert_eq!(gemini["requests"][1]["content"]["parts"][0]["text"], "b");
        assert_eq!(gemini["requests"][0]["outputDimensionality"], 4);
        let one =
            EmbedRequest::parse(Shape::OpenAi, br#"{"model":"m","input":"a"}"#, None).unwrap();
        assert_eq!(one.gemini_method(false), "embedContent");
        assert_eq!(encoded(&one, Dialect::Gemini)["content"]["parts"][0]["text"], "a");
        let tokens = EmbedRequest::parse(Shape::OpenAi, br#"{"model":"m","input":[1,2]}"#, None);
        let mut dropped = Dropped::default();
        let refused = tokens
            .unwrap()
            .encode_for(Dialect::Gemini, "up", b"", false, &mut dropped)
            .unwrap_err();
        assert!(matches!(refused, ProviderError::Untranslatable { .. }), "{refused}");
    }

    #[test]
    fn a_gemini_request_goes_to_openai_with_its_texts_and_names_what_it_drops() {
        let batch = body(&json!({"requests": [
            {"model": "models/g", "content": {"parts": [{"text": "a"}, {"text": "b"}]}, "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 3},
            {"model": "models/g", "content": {"parts": [{"text": "c"}]}, "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 3},
        ]}));
        let request = EmbedRequest::parse(Shape::GeminiBatch, &batch, Some("g")).unwrap();
        assert_eq!(request.input, Input::Texts(vec!["ab".into(), "c".into()]));
        let mut dropped = Dropped::default();
        let openai =
            request.encode_for(Dialect::OpenAi, "up", &batch, false, &mut dropped).unwrap();
        let openai: Value = serde_json::from_slice(&openai).unwrap();
        assert_eq!(
            openai,
            json!({"model": "up", "input": ["ab", "c"], "encoding_format": "float", "dimensions": 3})
        );
        assert_eq!(dropped.names(), ["taskType"]);
        let mixed = body(&json!({"requests": [
            {"content": {"parts": [{"text": "a"}]}, "outputDimensionality": 3},
            {"content": {"parts": [{"text": "c"}]}},
        ]}));
        let refused = EmbedRequest::parse(Shape::GeminiBatch, &mixed, Some("g")).unwrap_err();
        assert!(refused.to_string().starts_with("requests[1]."), "{refused}");
        let empty =
            EmbedRequest::parse(Shape::GeminiOne, br#"{"content":{"parts":[]}}"#, Some("g"));
        assert!(empty.unwrap_err().to_string().starts_with("content.parts"));
    }

    #[test]
    fn a_same_dialect_request_keeps_its_bytes_but_for_the_model() {
        let sent = br#"{"model":"mine","input":"a","user":"u-1","extra":{"x":1}}"#;
        let request = EmbedRequest::parse(Shape::OpenAi, sent, None).unwrap();
        let mut dropped = Dropped::default();
        let out = request.encode_for(Dialect::OpenAi, "up", sent, true, &mut dropped).unwrap();
        assert_eq!(out, br#"{"model":"up","input":"a","user":"u-1","extra":{"x":1}}"#);
        let batch = br#"{"requests":[{"model":"models/g","content":{"parts":[{"text":"a"}]},"title":"t"}]}"#;
        let request = EmbedRequest::parse(Shape::GeminiBatch, batch, Some("g")).unwrap();
        let out = request.encode_for(Dialect::Gemini, "real", batch, true, &mut dropped).unwrap();
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["requests"][0]["model"], "models/real");
        assert_eq!(out["requests"][0]["title"], "t");
        assert!(dropped.names().is_empty());
    }

    #[test]
    fn answers_are_read_in_either_dialect_and_written_in_the_clients_shape() {
        let openai = br#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5,1.0]},{"object":"embedding","index":0,"embedding":"AAAAPwAAgD8="}],"model":"x","usage":{"prompt_tokens":7,"total_tokens":7}}"#;
        let read = decode_answer(Dialect::OpenAi, openai, 2).unwrap();
        assert_eq!(read.vectors, [vec![0.5, 1.0], vec![0.5, 1.0]], "ordered by index, base64 read");
        assert_eq!(read.usage.unwrap().uncached_input, 7);
        assert!(decode_answer(Dialect::OpenAi, openai, 3).is_err(), "one vector per input");
        let gemini = br#"{"embeddings":[{"values":[0.25]},{"values":[0.75]}]}"#;
        let read = decode_answer(Dialect::Gemini, gemini, 2).unwrap();
        assert_eq!(read.usage, None);

        let bytes = body(&json!({"model": "m", "input": ["a", "b"], "encoding_format": "base64"}));
        let request = EmbedRequest::parse(Shape::OpenAi, &bytes, None).unwrap();
        let answer: Value = serde_json::from_slice(&request.encode_answer(&read, "p/up")).unwrap();
        assert_eq!(answer["model"], "p/up");
        assert_eq!(answer["data"][1]["index"], 1);
        let back = floats_of(answer["data"][1]["embedding"].as_str().unwrap()).unwrap();
        assert_eq!(back, [0.75]);
        let one = EmbedRequest::parse(
            Shape::GeminiOne,
            br#"{"content":{"parts":[{"text":"a"}]}}"#,
            Some("g"),
        );
        let single = Embedded { vectors: vec![vec![0.1]], usage: None };
        let answer: Value =
            serde_json::from_slice(&one.unwrap().encode_answer(&single, "p/up")).unwrap();
        assert_eq!(answer, json!({"embedding": {"values": [0.1_f32]}}));
    }
}
