//! Same dialect in and out: the client's bytes are the request (ARCHITECTURE.md, "Two paths
//! through the router").
//!
//! A request forwarded to an upstream of its own dialect is not re-encoded: re-serialising
//! would drop every field this crate does not model, and clients ship new ones every month.
//! Only the `model` value is replaced, by a targeted edit of the bytes that hold it, and the
//! upstream's stream events are relayed as they come with the same edit to the `model` they
//! name (RESILIENCE.md §1.5: the client learns which `provider/model` served).
//!
//! Invariant: an edit changes nothing but the one JSON string value it targets; every other
//! byte (key order, whitespace, escapes, numbers) is the sender's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use serde_json::value::RawValue;

use crate::dialect::Dialect;
use crate::error::ProviderError;

/// `body` with its top-level `model` replaced by `model`. Errors when the body is not a JSON
/// object with a string `model` (the client parser refuses such a body first).
pub fn rewrite_model(body: &[u8], model: &str) -> Result<Vec<u8>, ProviderError> {
    let invalid = |message: &str| ProviderError::InvalidRequest {
        path: "model".into(),
        message: message.to_owned(),
    };
    let text = std::str::from_utf8(body).map_err(|_| invalid("the body is not UTF-8"))?;
    let span = string_span(text, &["model"]).ok_or_else(|| invalid("missing or not a string"))?;
    Ok(splice(text, span, model).into_bytes())
}

/// A whole (non-streamed) answer with its top-level `model` replaced; unchanged when it names
/// none.
pub fn rewrite_answer_model(body: &[u8], model: &str) -> Vec<u8> {
    match std::str::from_utf8(body)
        .ok()
        .and_then(|text| Some((text, string_span(text, &["model"])?)))
    {
        Some((text, span)) => splice(text, span, model).into_bytes(),
        None => body.to_vec(),
    }
}

/// A stream event's data with the `model` it names replaced, or `None` when this event names
/// none: Anthropic names it once, in `message_start`; OpenAI in every chunk; Responses in each
/// event that carries the whole `response`.
pub fn rewrite_event_model<'d>(dialect: Dialect, data: &'d str, model: &str) -> Cow<'d, str> {
    // Cheap test first: most events (text deltas) never mention a model.
    if !data.contains("\"model\"") {
        return Cow::Borrowed(data);
    }
    let path: &[&str] = match dialect {
        Dialect::Anthropic => &["message", "model"],
        Dialect::OpenAi => &["model"],
        Dialect::Gemini => &["modelVersion"],
        // `response.created`, `response.in_progress`, `response.completed`, ...
        Dialect::Responses => &["response", "model"],
    };
    match string_span(data, path) {
        Some(span) => Cow::Owned(splice(data, span, model)),
        None => Cow::Borrowed(data),
    }
}

/// `text` with the JSON string at `span` (quotes included) replaced by `value`, encoded.
fn splice(text: &str, span: Range<usize>, value: &str) -> String {
    let encoded = serde_json::to_string(value).expect("a string serialises");
    let mut out = String::with_capacity(text.len() + encoded.len());
    out.push_str(&text[..span.start]);
    out.push_str(&encoded);
    out.push_str(&text[span.end..]);
    out
}

/// The byte range, quotes included, of the JSON string found by following the object keys
/// `path` from the top of `json`. `None` when a step is missing or the value is no string.
fn string_span(json: &str, path: &[&str]) -> Option<Range<usize>> {
    let mut span = 0..json.len();
    for key in path {
        // Keys are small and unescaped in practice; `Cow` keeps escaped ones correct too.
        let object: HashMap<Cow<'_, str>, &RawValue> =
            serde_json::from_str(&json[span.clone()]).ok()?;
        let value = object.get(*key)?.get();
        let start = offset_in(json, value)?;
        span = start..start + value.len();
    }
    json[span.clone()].starts_with('"').then_some(span)
}

/// Where `part`, a slice borrowed from `whole`, starts in it.
fn offset_in(whole: &str, part: &str) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (start + part.len() <= whole.len()).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_model_value_changes_and_every_other_byte_is_kept() {
        let body =
            br#"{ "stream":true,"model" : "claude-x",  "metadata":{"model":"keep"},"z":1.50 }"#;
        let out = rewrite_model(body, "upstream-1").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{ "stream":true,"model" : "upstream-1",  "metadata":{"model":"keep"},"z":1.50 }"#
        );
    }

    #[test]
    fn a_model_with_characters_json_must_escape_is_encoded() {
        let out = rewrite_model(br#"{"model":"a"}"#, "we\"ird\\name").unwrap();
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["model"], "we\"ird\\name");
    }

    #[test]
    fn a_body_without_a_string_model_is_refused_naming_the_field() {
        for body in [&br#"{"model":3}"#[..], br#"{"messages":[]}"#, b"[1]", b"\xff"] {
            let error = rewrite_model(body, "m").unwrap_err();
            assert!(error.to_string().starts_with("model:"), "{error}");
        }
    }

    #[test]
    fn anthropic_names_the_model_in_message_start_only() {
        let start =
            r#"{"type":"message_start","message":{"id":"msg_1","model":"claude-x","content":[]}}"#;
        assert_eq!(
            rewrite_event_model(Dialect::Anthropic, start, "an/claude-x"),
            r#"{"type":"message_start","message":{"id":"msg_1","model":"an/claude-x","content":[]}}"#
        );
        let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"model\""}}"#;
        assert!(matches!(
            rewrite_event_model(Dialect::Anthropic, delta, "x"),
            Cow::Borrowed(same) if same == delta
        ));
    }

    #[test]
    fn every_openai_chunk_names_the_model() {
        let chunk = r#"{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[]}"#;
        assert_eq!(
            rewrite_event_model(Dialect::OpenAi, chunk, "oa/gpt-x"),
            r#"{"id":"c","object":"chat.completion.chunk","model":"oa/gpt-x","choices":[]}"#
        );
    }
}
