//! Same dialect in and out: the client's bytes are the request (ARCHITECTURE.md, "Two paths
//! through the router").
//!
//! A request forwarded to an upstream of its own dialect is not re-encoded: re-serialising
//! would drop every field this crate does not model, and clients ship new ones every month.
//! Only the `model` value is replaced, by a targeted edit of the bytes that hold it, and the
//! upstream's stream events are relayed as they come with the same edit to the `model` they
//! name (RESILIENCE.md §1.5: the client learns which `provider/model` served).
//!
//! The one other edit: a streamed Chat request that did not ask for usage is made to
//! (`stream_options.include_usage`), so the router learns what the stream used; the client
//! never sees the extra chunk (see `StreamTranslator::strip_usage_chunks`).
//!
//! Invariant: an edit changes nothing but the one JSON value it targets; every other byte
//! (key order, whitespace, escapes, numbers) is the sender's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::dialect::Dialect;
use crate::error::ProviderError;

/// The body a same-dialect upstream gets for `model`: [`rewrite_model`]'s, except for
/// Gemini, which names the model in the path and gets the client's bytes untouched.
/// `parsed` is the `model` the client parser read from `body`, see [`rewrite_model`].
pub fn request_body(
    dialect: Dialect,
    body: &[u8],
    model: &str,
    parsed: Option<&str>,
) -> Result<Vec<u8>, ProviderError> {
    if dialect == Dialect::Gemini { Ok(body.to_vec()) } else { rewrite_model(body, model, parsed) }
}

/// `body` with its top-level `model` replaced by `model`. Errors when the body is not a JSON
/// object with a string `model` (the client parser refuses such a body first).
///
/// `parsed`: the top-level `model` as the client parser read it from `body`. When it is a slice
/// of `body` itself (the parser borrows a string without escapes) between quotes, that is
/// where the value is, and the body is not scanned again: an 86 KB agent turn's second scan
/// cost as much as the rest of the relay. Anything else is looked for.
pub fn rewrite_model(
    body: &[u8],
    model: &str,
    parsed: Option<&str>,
) -> Result<Vec<u8>, ProviderError> {
    let invalid = |message: &str| ProviderError::InvalidRequest {
        path: "model".into(),
        message: message.to_owned(),
    };
    let span = if let Some(span) = parsed.and_then(|p| quoted_in(body, p)) {
        span
    } else {
        let text = std::str::from_utf8(body).map_err(|_| invalid("the body is not UTF-8"))?;
        string_span(text, &["model"]).ok_or_else(|| invalid("missing or not a string"))?
    };
    Ok(splice(body, span, model))
}

/// The byte range, quotes included, of `part` in `whole` when `part` is a slice of `whole`
/// with a quote on each side.
pub(crate) fn quoted_in(whole: &[u8], part: &str) -> Option<Range<usize>> {
    let start = offset_in(whole, part.as_bytes())?.checked_sub(1)?;
    let end = start + part.len() + 2;
    (whole[start] == b'"' && whole.get(end - 1) == Some(&b'"')).then_some(start..end)
}

/// A Chat request `body` that asks for usage at the end of its stream: `stream_options` gains
/// `"include_usage": true` (the rest of it kept), or is added after the last member. A body
/// that already asks, or is not an object, comes back as it was.
///
/// `body` is one the client parser accepted: most name no `stream_options` anywhere, and the
/// member is added before their closing brace without parsing them again. A key can
/// be spelled with escapes, so a body with any `\u` is parsed too.
pub fn ask_stream_usage(mut body: Vec<u8>) -> Vec<u8> {
    const MEMBER: &[u8] = br#","stream_options":{"include_usage":true}"#;
    let unnamed = |needle: &[u8]| memchr::memmem::find(&body, needle).is_none();
    if unnamed(b"stream_options") && unnamed(b"\\u") {
        let first = body.iter().position(|b| !b.is_ascii_whitespace());
        let last = body.iter().rposition(|b| !b.is_ascii_whitespace());
        if let (Some(first), Some(last)) = (first, last)
            && body[first] == b'{'
            && body[last] == b'}'
        {
            body.splice(last..last, MEMBER.iter().copied());
            return body;
        }
    }
    let Ok(text) = std::str::from_utf8(&body) else { return body };
    let Ok(top) = serde_json::from_str::<HashMap<Cow<'_, str>, &RawValue>>(text) else {
        return body;
    };
    let edited = if let Some(options) = top.get("stream_options") {
        let Ok(mut object) =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(options.get())
        else {
            return body;
        };
        if object.get("include_usage") == Some(&serde_json::Value::Bool(true)) {
            return body;
        }
        object.insert("include_usage".to_owned(), serde_json::Value::Bool(true));
        let Some(start) = offset_in(text.as_bytes(), options.get().as_bytes()) else { return body };
        let encoded = serde_json::to_string(&object).expect("a map serialises");
        format!("{}{encoded}{}", &text[..start], &text[start + options.get().len()..])
    } else {
        // The body parsed as an object, so its last `}` closes it; `model` makes it
        // non-empty, so a comma joins the new member.
        let Some(end) = text.rfind('}') else { return body };
        format!(r#"{},"stream_options":{{"include_usage":true}}{}"#, &text[..end], &text[end..])
    };
    edited.into_bytes()
}

/// A whole (non-streamed) answer with its top-level `model` (Gemini: `modelVersion`)
/// replaced; unchanged when it names none. `parsed`: that field as the answer's decoder read
/// it from `body`, which spares a second scan as in [`rewrite_model`].
pub fn rewrite_answer_model(
    dialect: Dialect,
    body: &[u8],
    model: &str,
    parsed: Option<&str>,
) -> Vec<u8> {
    let key = if dialect == Dialect::Gemini { "modelVersion" } else { "model" };
    let found = || std::str::from_utf8(body).ok().and_then(|text| string_span(text, &[key]));
    match parsed.and_then(|p| quoted_in(body, p)).or_else(found) {
        Some(span) => splice(body, span, model),
        None => body.to_vec(),
    }
}

/// A stream event's data with the `model` it names replaced, or `None` when this event names
/// none: Anthropic names it once, in `message_start`; OpenAI in every chunk; Responses in each
/// event that carries the whole `response`.
///
/// `read` is where the stream's decoder read the event's `model`, quotes included, when it
/// did (OpenAI chunks): it is rewritten there, without parsing the event again.
pub fn rewrite_event_model<'d>(
    dialect: Dialect,
    data: &'d str,
    model: &str,
    read: Option<Range<usize>>,
) -> Cow<'d, str> {
    let found = || {
        let path: &[&str] = match dialect {
            Dialect::Anthropic => &["message", "model"],
            Dialect::OpenAi => &["model"],
            // Every chunk names it.
            Dialect::Gemini => &["modelVersion"],
            // `response.created`, `response.in_progress`, `response.completed`, ...
            Dialect::Responses => &["response", "model"],
        };
        // Cheap test first: most events (text deltas) never mention a model.
        let last = path.last().expect("a path has a key");
        data.contains(last).then(|| string_span(data, path)).flatten()
    };
    match read.or_else(found) {
        Some(span) => Cow::Owned(
            String::from_utf8(splice(data.as_bytes(), span, model))
                .expect("a string replaced between its quotes leaves UTF-8 whole"),
        ),
        None => Cow::Borrowed(data),
    }
}

/// What only one credential can read, dropped from a Responses request's `input` by
/// [`without_credential_bound_items`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unbound {
    /// `reasoning` items with `encrypted_content`: OpenAI decrypts them for the organisation
    /// that produced them only.
    pub reasoning: usize,
    /// Codex's `compaction` items (the history it compacted, encrypted the same way).
    pub compaction: usize,
}

impl Unbound {
    /// The trace's names of what was dropped.
    pub fn names(self) -> Vec<String> {
        let mut names = Vec::new();
        if self.reasoning > 0 {
            names.push(format!(
                "{} encrypted reasoning item(s) of another credential",
                self.reasoning
            ));
        }
        if self.compaction > 0 {
            names.push(format!("{} compaction item(s) of another credential", self.compaction));
        }
        names
    }
}

/// A Responses request `body` without the `input` items only the credential that produced
/// them can read (a session moved to another credential: RESILIENCE.md §11), every other byte
/// kept; `None` when it has none (or is not an object with an `input` array).
pub fn without_credential_bound_items(body: &[u8]) -> Option<(Vec<u8>, Unbound)> {
    #[derive(serde::Deserialize)]
    struct Item<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        encrypted_content: Option<&'a RawValue>,
    }
    // Cheap test first: most turns carry neither.
    const MARKS: [&[u8]; 2] = [b"encrypted_content", b"compaction"];
    if !MARKS.iter().any(|mark| memchr::memmem::find(body, mark).is_some()) {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    let top: HashMap<Cow<'_, str>, &RawValue> = serde_json::from_str(text).ok()?;
    let input = top.get("input")?.get();
    let items: Vec<&RawValue> = serde_json::from_str(input).ok()?;
    let mut unbound = Unbound::default();
    let kept: Vec<&str> = items
        .iter()
        .filter(|raw| {
            let Ok(item) = serde_json::from_str::<Item<'_>>(raw.get()) else { return true };
            match item.kind.as_deref() {
                Some("reasoning") if item.encrypted_content.is_some() => unbound.reasoning += 1,
                Some("compaction" | "compaction_summary") => unbound.compaction += 1,
                _ => return true,
            }
            false
        })
        .map(|raw| raw.get())
        .collect();
    if unbound == Unbound::default() {
        return None;
    }
    let start = offset_in(text.as_bytes(), input.as_bytes())?;
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..start]);
    out.push('[');
    out.push_str(&kept.join(","));
    out.push(']');
    out.push_str(&text[start + input.len()..]);
    Some((out.into_bytes(), unbound))
}

/// `body` with the JSON string at `span` (quotes included) replaced by `value`, encoded. The
/// rest is copied as bytes: a body is not checked to be UTF-8 to have one string replaced.
fn splice(body: &[u8], span: Range<usize>, value: &str) -> Vec<u8> {
    let encoded = serde_json::to_string(value).expect("a string serialises");
    let mut out = Vec::with_capacity(body.len() - span.len() + encoded.len());
    out.extend_from_slice(&body[..span.start]);
    out.extend_from_slice(encoded.as_bytes());
    out.extend_from_slice(&body[span.end..]);
    out
}

/// The byte range, quotes included, of the JSON string found by following the object keys
/// `path` from the top of `json`. `None` when a step is missing or the value is no string.
fn string_span(json: &str, path: &[&str]) -> Option<Range<usize>> {
    let mut span = 0..json.len();
    for key in path {
        let mut de = serde_json::Deserializer::from_str(&json[span.clone()]);
        let value = Field(key).deserialize(&mut de).ok()??.get();
        let start = offset_in(json.as_bytes(), value.as_bytes())?;
        span = start..start + value.len();
    }
    json[span.clone()].starts_with('"').then_some(span)
}

/// One field of a JSON object, read without building the object: every other member is
/// skipped in place (no map, no allocation for keys written without escapes). The last of
/// repeated keys wins, as in a map.
struct Field<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for Field<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        /// A key, borrowed from the input unless it holds escapes.
        #[derive(serde::Deserialize)]
        struct Key<'a>(#[serde(borrow)] Cow<'a, str>);
        let mut found = None;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if key == self.0 {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Where `part`, a slice borrowed from `whole`, starts in it.
fn offset_in(whole: &[u8], part: &[u8]) -> Option<usize> {
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
        let out = rewrite_model(body, "upstream-1", None).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{ "stream":true,"model" : "upstream-1",  "metadata":{"model":"keep"},"z":1.50 }"#
        );
    }

    #[test]
    fn the_model_the_parser_read_is_rewritten_where_it_was_read_without_a_second_scan() {
        for body in [
            &br#"{ "stream":true,"model" : "claude-x",  "metadata":{"model":"keep"}, "messages":[] }"#[..],
            br#"{"metadata":{"model":"claude-x"},"messages":[],"model":"claude-x"}"#,
            br#"{"model":"claude-x","messages":[{"role":"user","content":"model"}]}"#,
        ] {
            let text = std::str::from_utf8(body).unwrap();
            let parsed = crate::anthropic::parse_request(body).unwrap().model;
            let Cow::Borrowed(read) = parsed else { panic!("borrowed from the body: {text}") };
            let fast = rewrite_model(body, "up", Some(read)).unwrap();
            assert_eq!(fast, rewrite_model(body, "up", None).unwrap(), "{text}");
        }
        // A name not taken from the body (an alias, a path's) is looked for as before.
        let body = br#"{"model":"claude-x"}"#;
        assert_eq!(rewrite_model(body, "up", Some("claude-x")).unwrap(), br#"{"model":"up"}"#);
    }

    #[test]
    fn an_answer_is_rewritten_where_its_decoder_read_the_model() {
        let body = br#"{"id":"c1","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"model"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
        let answer = crate::openai::decode_response(body).unwrap();
        assert!(matches!(answer.model, Cow::Borrowed(_)));
        let fast = rewrite_answer_model(Dialect::OpenAi, body, "oa/gpt-x", Some(&answer.model));
        assert_eq!(fast, rewrite_answer_model(Dialect::OpenAi, body, "oa/gpt-x", None));
        assert!(String::from_utf8(fast).unwrap().contains(r#""model":"oa/gpt-x""#));
    }

    #[test]
    fn a_model_with_characters_json_must_escape_is_encoded() {
        let out = rewrite_model(br#"{"model":"a"}"#, "we\"ird\\name", None).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["model"], "we\"ird\\name");
    }

    #[test]
    fn a_body_without_a_string_model_is_refused_naming_the_field() {
        for body in [&br#"{"model":3}"#[..], br#"{"messages":[]}"#, b"[1]", b"\xff"] {
            let error = rewrite_model(body, "m", None).unwrap_err();
            assert!(error.to_string().starts_with("model:"), "{error}");
        }
    }

    #[test]
    fn anthropic_names_the_model_in_message_start_only() {
        let start =
            r#"{"type":"message_start","message":{"id":"msg_1","model":"claude-x","content":[]}}"#;
        assert_eq!(
            rewrite_event_model(Dialect::Anthropic, start, "an/claude-x", None),
            r#"{"type":"message_start","message":{"id":"msg_1","model":"an/claude-x","content":[]}}"#
        );
        let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"model\""}}"#;
        assert!(matches!(
            rewrite_event_model(Dialect::Anthropic, delta, "x", None),
            Cow::Borrowed(same) if same == delta
        ));
    }

    #[test]
    fn a_stream_is_asked_for_usage_and_nothing_else_changes() {
        let ask =
            |body: &str| String::from_utf8(ask_stream_usage(body.as_bytes().to_vec())).unwrap();
        assert_eq!(
            ask(r#"{"model":"m", "stream":true , "z":1.50 }"#),
            r#"{"model":"m", "stream":true , "z":1.50 ,"stream_options":{"include_usage":true}}"#
        );
        // Other options are kept; a `false` is overruled, since the proxy strips the chunk.
        let edited = ask(r#"{"model":"m","stream_options":{"include_usage":false,"x":1},"n":2}"#);
        let value: serde_json::Value = serde_json::from_str(&edited).unwrap();
        assert_eq!(value["stream_options"], serde_json::json!({"include_usage": true, "x": 1}));
        assert!(
            edited.starts_with(r#"{"model":"m","stream_options":"#)
                && edited.ends_with(r#","n":2}"#)
        );
        // A client that asked already is left byte for byte.
        let asked = r#"{"model":"m","stream_options": {"include_usage": true}}"#;
        assert_eq!(ask(asked), asked);
        // Spelled with escapes, it is still the same key: found, not added twice.
        let escaped = r#"{"model":"m","stream\u005foptions":{"include_usage":true}}"#;
        assert_eq!(ask(escaped), escaped);
        // Named only inside a message, it is added.
        assert_eq!(
            ask("{\"model\":\"m\",\"messages\":[\"stream_options\"]}\n"),
            "{\"model\":\"m\",\"messages\":[\"stream_options\"],\"stream_options\":{\"include_usage\":true}}\n"
        );
    }

    #[test]
    fn gemini_names_the_model_as_model_version_in_answers_and_every_chunk() {
        let chunk = r#"{"candidates":[{"content":{"parts":[{"text":"\"model\""}]}}],"modelVersion":"gemini-2.5-flash","responseId":"r"}"#;
        assert_eq!(
            rewrite_event_model(Dialect::Gemini, chunk, "ge/gemini-2.5-flash", None),
            chunk.replace(
                r#""modelVersion":"gemini-2.5-flash""#,
                r#""modelVersion":"ge/gemini-2.5-flash""#
            )
        );
        let answer = rewrite_answer_model(Dialect::Gemini, chunk.as_bytes(), "ge/x", None);
        assert!(String::from_utf8(answer).unwrap().contains(r#""modelVersion":"ge/x""#));
        let body = br#"{"contents":[]}"#;
        assert_eq!(request_body(Dialect::Gemini, body, "m", None).unwrap(), body);
    }

    #[test]
    fn every_openai_chunk_names_the_model() {
        let chunk = r#"{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[]}"#;
        assert_eq!(
            rewrite_event_model(Dialect::OpenAi, chunk, "oa/gpt-x", None),
            r#"{"id":"c","object":"chat.completion.chunk","model":"oa/gpt-x","choices":[]}"#
        );
    }

    #[test]
    fn a_moved_session_sends_no_item_only_its_old_credential_can_read() {
        let body = br#"{"model":"m", "input":[ {"role":"user","content":"q"},
            {"type":"reasoning","summary":[],"encrypted_content":"gAAA"},
            {"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},
            {"type":"compaction","encrypted_content":"gBBB"},
            {"role":"assistant","content":[{"type":"output_text","text":"a"}]} ],"store":false}"#;
        let (out, unbound) = without_credential_bound_items(body).unwrap();
        assert_eq!(unbound, Unbound { reasoning: 1, compaction: 1 });
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"model":"m", "input":[{"role":"user","content":"q"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},{"role":"assistant","content":[{"type":"output_text","text":"a"}]}],"store":false}"#
        );
        assert_eq!(
            unbound.names(),
            [
                "1 encrypted reasoning item(s) of another credential",
                "1 compaction item(s) of another credential"
            ]
        );
        let plain = br#"{"model":"m","input":[{"role":"user","content":"encrypted_content"}]}"#;
        assert_eq!(without_credential_bound_items(plain), None, "nothing to drop");
        assert_eq!(without_credential_bound_items(br#"{"model":"m","input":"hi"}"#), None);
    }
}
