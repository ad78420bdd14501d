//! Malformed input, generated: the client request parsers, the response decoders, the SSE
//! decoder and the stream translators of every dialect get arbitrary bytes and near-valid
//! inputs (the golden fixtures with fields replaced by wrong types, huge numbers, unicode,
//! deep nesting, removed or unknown keys; streams cut anywhere). None may panic or hang, every
//! output stays within a constant factor of its input, and what should round-trip does.
//!
//! The budget is fixed so CI stays fast: `PROPTEST_CASES` (default [`CASES`]) cases per
//! property, each bounded by a per-case timeout.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use switchyard_providers::dialect::{
    Caching, ClientDialect, Depth, Dialect, EncodeOptions, ResponseMeta,
};
use switchyard_providers::error::{ErrorKind, ProviderError};
use switchyard_providers::sse::{SseDecoder, SseItem, write_event};
use switchyard_providers::stream::{Progress, StreamEnd, StreamTranslator};

/// Cases per property unless `PROPTEST_CASES` says otherwise: a few seconds each in debug.
const CASES: u32 = 256;
const UPSTREAMS: [Dialect; 4] =
    [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini, Dialect::Responses];
const CLIENTS: [ClientDialect; 3] =
    [ClientDialect::OpenAi, ClientDialect::Anthropic, ClientDialect::Responses];
const OPTIONS: EncodeOptions<'static> = EncodeOptions {
    model: "upstream-model",
    default_max_tokens: 4096,
    system_in_place: false,
    reasoning: true,
    stream_usage: true,
    caching: Caching::NONE,
};
const META: ResponseMeta<'static> = ResponseMeta { model: "served-model", created: 1_700_000_000 };
/// An output may be this many times its input, plus [`SLACK`]: translation renames and
/// re-wraps, it never multiplies.
const FACTOR: usize = 8;
const SLACK: usize = 4096;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(CASES);
    ProptestConfig { cases, timeout: 10_000, ..ProptestConfig::default() }
}

/// The `in.<dialect>.<ext>` inputs of every golden fixture of `kind`.
fn corpus(kind: &str, ext: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(kind);
    let mut inputs = Vec::new();
    for case in fs::read_dir(&root).unwrap() {
        for file in fs::read_dir(case.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if let Some(dialect) =
                name.strip_prefix("in.").and_then(|n| n.strip_suffix(&format!(".{ext}")))
            {
                inputs.push((dialect.to_owned(), fs::read(&path).unwrap()));
            }
        }
    }
    inputs.sort();
    assert!(!inputs.is_empty(), "no {kind} fixtures");
    inputs
}

fn upstream(name: &str) -> Dialect {
    UPSTREAMS.into_iter().find(|d| d.as_str() == name).unwrap()
}

fn client(name: &str) -> Option<ClientDialect> {
    CLIENTS.into_iter().find(|d| d.dialect().as_str() == name)
}

/// JSON a parser does not expect: every type, extreme numbers, awkward strings, some depth.
fn wild_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(1e308)),
        Just(json!(-0.0)),
        Just(json!(4_294_967_296_u64)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        Just(json!("\u{0}\u{FEFF}\u{202E}🚂\r\n\"\\")),
        Just(json!("user")),
        Just(json!("assistant")),
        Just(json!("tool")),
        Just(json!("text")),
        Just(json!("image")),
        Just(json!("tool_use")),
        Just(json!("{\"a\":")),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One change to a JSON document.
#[derive(Clone, Debug)]
enum Mutation {
    Replace(Index, Value),
    Remove(Index),
    AddKey(Index, String, Value),
    /// The value wrapped in this many arrays: past any recursion limit.
    Bury(Index, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), wild_json()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => any::<Index>().prop_map(Mutation::Remove),
        2 => (any::<Index>(), "[a-z_]{1,12}", wild_json())
            .prop_map(|(i, k, v)| Mutation::AddKey(i, k, v)),
        1 => (any::<Index>(), 1..3000_usize).prop_map(|(i, n)| Mutation::Bury(i, n)),
    ]
}

/// Every JSON pointer in `value`, the root included.
fn pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    out.push(at.to_owned());
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, &format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                pointers(item, &format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        _ => {}
    }
}

/// `value` with `mutation` applied; deep burials are written as text (`serde_json`'s own
/// serialiser would need the depth it is testing).
fn mutate(value: &mut Value, mutation: &Mutation) -> Option<(String, usize)> {
    let mut all = Vec::new();
    pointers(value, "", &mut all);
    let pick = |i: &Index| all[i.index(all.len())].clone();
    match mutation {
        Mutation::Replace(i, v) => *value.pointer_mut(&pick(i)).unwrap() = v.clone(),
        Mutation::Remove(i) => {
            let path = pick(i);
            if let Some((parent, key)) = path.rsplit_once('/') {
                match value.pointer_mut(parent).unwrap() {
                    Value::Object(map) => {
                        map.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Value::Array(items) => {
                        items.remove(key.parse::<usize>().unwrap());
                    }
                    _ => {}
                }
            }
        }
        Mutation::AddKey(i, k, v) => {
            if let Value::Object(map) = value.pointer_mut(&pick(i)).unwrap() {
                map.insert(k.clone(), v.clone());
            }
        }
        Mutation::Bury(i, depth) => {
            let path = pick(i);
            *value.pointer_mut(&path).unwrap() = Value::String("\u{1}BURIED\u{1}".into());
            return Some(("\"\\u0001BURIED\\u0001\"".to_owned(), *depth));
        }
    }
    None
}

/// A fixture with up to three mutations, as bytes.
fn near_valid(seeds: Vec<(String, Vec<u8>)>) -> impl Strategy<Value = (String, Vec<u8>)> {
    (prop::sample::select(seeds), prop::collection::vec(mutation(), 1..4)).prop_map(
        |((dialect, bytes), mutations)| {
            let mut value: Value = serde_json::from_slice(&bytes).unwrap();
            let mut buried = None;
            for m in &mutations {
                buried = mutate(&mut value, m).or(buried);
            }
            let mut text = serde_json::to_string(&value).unwrap();
            if let Some((marker, depth)) = buried {
                let deep = format!("{}{marker}{}", "[".repeat(depth), "]".repeat(depth));
                text = text.replacen(&marker, &deep, 1);
            }
            (dialect, text.into_bytes())
        },
    )
}

/// Whether `bytes` is JSON. Vendor fields and tool schemas pass through verbatim, however deep,
/// so nesting past `serde_json`'s own recursion limit is not held against the encoder.
fn valid_json(bytes: &[u8]) -> Result<(), String> {
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Ok(()),
        Err(e) => Err(format!("encoded invalid JSON: {e}")),
    }
}

fn bounded(output: usize, input: usize) -> bool {
    output <= FACTOR * input + SLACK
}

/// Parses a client body and encodes it for every upstream; checks sizes and the same-dialect
/// round trip: what we send to an upstream of the client's own dialect parses back to a
/// request that encodes to the very same bytes.
fn check_request(client: ClientDialect, body: &[u8]) -> Result<(), TestCaseError> {
    let Ok(request) = client.parse_request(body) else { return Ok(()) };
    // A passthrough reads only to `Depth::Routing`: it must take whatever the whole parse takes.
    if let Err(error) = client.parse_request_to(body, Depth::Routing) {
        return Err(TestCaseError::fail(format!("the routing parse refused it: {error}")));
    }
    for upstream in UPSTREAMS {
        let Ok(encoded) = upstream.encode_request(&request, &OPTIONS) else { continue };
        prop_assert!(bounded(encoded.len(), body.len()), "{upstream}: {} bytes", encoded.len());
        valid_json(&encoded).map_err(|e| TestCaseError::fail(format!("{upstream}: {e}")))?;
        if upstream == client.dialect() {
            let again = client.parse_request(&encoded).map_err(|e| {
                TestCaseError::fail(format!("our own {upstream} body does not parse back: {e}"))
            })?;
            let twice = upstream.encode_request(&again, &OPTIONS).unwrap();
            prop_assert_eq!(
                String::from_utf8_lossy(&encoded),
                String::from_utf8_lossy(&twice),
                "{} does not round-trip",
                upstream
            );
        }
    }
    Ok(())
}

/// Decodes an upstream body and encodes it for every client; checks sizes.
fn check_response(upstream: Dialect, body: &[u8]) -> Result<(), TestCaseError> {
    let _ = upstream.error_report(body);
    let Ok(response) = upstream.decode_response(body) else { return Ok(()) };
    // A relayed answer is read only for its ending: it must be the ending the whole decode reads.
    let ending = upstream.decode_ending(body).map_err(|e| {
        TestCaseError::fail(format!("{upstream}: decoded whole, but not its ending: {e}"))
    })?;
    prop_assert_eq!(ending.finished, response.stop_reason.is_some(), "{}: finished", upstream);
    prop_assert_eq!(ending.usage, response.usage, "{}: usage", upstream);
    prop_assert_eq!(
        ending.model.unwrap_or_default(),
        response.model.clone(),
        "{}: model",
        upstream
    );
    for client in CLIENTS {
        let encoded = client.encode_response(&response, &META);
        prop_assert!(bounded(encoded.len(), body.len()), "{client:?}: {} bytes", encoded.len());
        valid_json(&encoded).map_err(|e| TestCaseError::fail(format!("{client:?}: {e}")))?;
    }
    Ok(())
}

/// Runs `bytes`, cut at `cuts`, through the SSE decoder and a translator to every client, as
/// the router does. Checks sizes, and that a stream ends exactly once: nothing after the end
/// or a terminal error, and a truncated stream never ends like a complete one.
fn check_stream(upstream: Dialect, bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    for client in CLIENTS {
        let mut decoder = SseDecoder::new(64 * 1024);
        let mut translator = StreamTranslator::new(upstream, client, &META, true);
        let mut out = Vec::new();
        let mut ended = false;
        let mut from = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.sort_unstable();
        points.push(bytes.len());
        'feed: for to in points {
            decoder.push(&bytes[from..to.max(from)]);
            from = to.max(from);
            while let Some(item) = decoder.next_item() {
                let Ok(SseItem::Event(event)) = item else { continue };
                match translator.translate(&event, &mut out) {
                    Ok(t) if t.progress == Progress::End => {
                        ended = true;
                        break 'feed;
                    }
                    Ok(_) | Err(ProviderError::MalformedEvent { .. }) => {}
                    Err(_) => {
                        translator.fail(ErrorKind::Internal, "upstream error", &mut out);
                        ended = true;
                        break 'feed;
                    }
                }
            }
        }
        if !ended {
            decoder.close();
            while let Some(item) = decoder.next_item() {
                if let Ok(SseItem::Event(event)) = item {
                    let _ = translator.translate(&event, &mut out);
                }
            }
        }
        let before_end = out.len();
        let end = translator.end(&mut out);
        let text = String::from_utf8_lossy(&out);
        if end == StreamEnd::Truncated && !ended {
            prop_assert!(!text.contains("data: [DONE]"), "a truncated stream ended with [DONE]");
            prop_assert!(
                !text.contains("event: message_stop"),
                "a truncated stream ended with message_stop"
            );
            prop_assert!(
                !text.contains("event: response.completed"),
                "a truncated stream ended with response.completed"
            );
        }
        let after = out.len();
        translator.end(&mut out);
        translator.fail(ErrorKind::Internal, "again", &mut out);
        prop_assert_eq!(out.len(), after, "{:?} wrote past its end", client);
        prop_assert!(bounded(before_end, bytes.len()), "{client:?}: {before_end} bytes out");
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn client_request_parsers_survive_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..512)
    ) {
        for client in CLIENTS {
            check_request(client, &body)?;
        }
    }

    #[test]
    fn client_request_parsers_survive_near_valid_requests_and_round_trip(
        (dialect, body) in near_valid(corpus("request", "json"))
    ) {
        if let Some(client) = client(&dialect) {
            check_request(client, &body)?;
        }
    }

    #[test]
    fn response_decoders_survive_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..512)
    ) {
        for upstream in UPSTREAMS {
            check_response(upstream, &body)?;
        }
    }

    #[test]
    fn response_decoders_survive_near_valid_responses(
        (dialect, body) in near_valid(corpus("response", "json"))
    ) {
        check_response(upstream(&dialect), &body)?;
    }

    #[test]
    fn stream_translators_survive_arbitrary_bytes_cut_anywhere(
        bytes in prop::collection::vec(any::<u8>(), 0..1024),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        for upstream in UPSTREAMS {
            check_stream(upstream, &bytes, &cuts)?;
        }
    }

    #[test]
    fn stream_translators_survive_near_valid_events_cut_anywhere(
        (dialect, bytes) in near_valid_stream(),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        check_stream(upstream(&dialect), &bytes, &cuts)?;
    }

    #[test]
    fn sse_events_written_and_read_back_are_the_same_in_any_chunking(
        events in prop::collection::vec(
            (prop::option::of("[a-z_]{1,12}"), "[^\r]{0,40}"), 1..8),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let mut bytes = Vec::new();
        for (name, data) in &events {
            write_event(&mut bytes, name.as_deref(), data);
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.sort_unstable();
        points.push(bytes.len());
        let mut decoder = SseDecoder::default();
        let mut read = Vec::new();
        let mut from = 0;
        for to in points {
            decoder.push(&bytes[from..to]);
            from = to;
            while let Some(item) = decoder.next_item() {
                if let Ok(SseItem::Event(e)) = item {
                    read.push((e.event.map(str::to_owned), e.data.to_owned()));
                }
            }
        }
        let written: Vec<_> = events.iter().map(|(n, d)| (n.clone(), d.clone())).collect();
        prop_assert_eq!(read, written);
    }

    #[test]
    fn the_sse_decoder_holds_at_most_one_event_plus_one_chunk(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..256), 0..64),
    ) {
        const LIMIT: usize = 512;
        let mut decoder = SseDecoder::new(LIMIT);
        let mut failed = false;
        for chunk in &chunks {
            decoder.push(chunk);
            while let Some(item) = decoder.next_item() {
                match item {
                    Ok(SseItem::Event(e)) => prop_assert!(e.data.len() <= 3 * LIMIT),
                    Ok(SseItem::KeepAlive) => {}
                    Err(_) => {
                        prop_assert!(!failed, "the limit error came twice");
                        failed = true;
                    }
                }
            }
        }
    }
}

/// A fixture stream with some events' JSON mutated, the rest kept as is.
fn near_valid_stream() -> impl Strategy<Value = (String, Vec<u8>)> {
    let seeds = corpus("stream", "sse");
    (
        prop::sample::select(seeds),
        prop::collection::vec((any::<Index>(), prop::collection::vec(mutation(), 1..3)), 1..4),
    )
        .prop_map(|((dialect, bytes), changes)| {
            let text = String::from_utf8(bytes).unwrap();
            let mut events: Vec<String> =
                text.split("\n\n").map(str::to_owned).filter(|e| !e.is_empty()).collect();
            for (at, mutations) in changes {
                if events.is_empty() {
                    break;
                }
                let i = at.index(events.len());
                let Some((head, data)) = events[i].split_once("data: ") else { continue };
                let Ok(mut value) = serde_json::from_str::<Value>(data) else { continue };
                for m in &mutations {
                    if !matches!(m, Mutation::Bury(..)) {
                        mutate(&mut value, m);
                    }
                }
                events[i] = format!("{head}data: {value}");
            }
            let mut out = events.join("\n\n");
            out.push_str("\n\n");
            (dialect, out.into_bytes())
        })
}

#[test]
fn a_request_nested_past_any_recursion_limit_neither_overflows_the_stack_nor_grows() {
    for depth in [200, 10_000, 100_000] {
        let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let bodies = [
            (
                ClientDialect::OpenAi,
                format!(r#"{{"model":"m","messages":[{{"role":"user","content":{deep}}}]}}"#),
            ),
            (
                ClientDialect::OpenAi,
                format!(
                    r#"{{"model":"m","messages":[{{"role":"user","content":"x"}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{deep}}}}}]}}"#
                ),
            ),
            (
                ClientDialect::Anthropic,
                format!(
                    r#"{{"model":"m","max_tokens":1,"messages":[{{"role":"user","content":"x"}}],"metadata":{deep}}}"#
                ),
            ),
            (
                ClientDialect::Responses,
                format!(r#"{{"model":"m","input":[{{"type":"reasoning","summary":{deep}}}]}}"#),
            ),
            (
                ClientDialect::Responses,
                format!(r#"{{"model":"m","input":[{{"role":"user","content":{deep}}}]}}"#),
            ),
        ];
        for (client, body) in bodies {
            check_request(client, body.as_bytes()).unwrap();
        }
    }
}

#[test]
fn an_empty_object_is_an_error_in_every_parser() {
    for client in CLIENTS {
        assert!(client.parse_request(b"{}").is_err());
    }
}

/// Found by `stream_translators_survive_near_valid_events_cut_anywhere`: token counts are the
/// upstream's numbers, and adding them up (OpenAI's `total_tokens`, Anthropic's cache split,
/// Gemini's thinking tokens) overflowed: a panic in debug builds, a wrapped total in release.
#[test]
fn token_counts_near_u64_max_saturate_instead_of_overflowing() {
    let max = u64::MAX;
    let bodies = [
        (
            Dialect::OpenAi,
            format!(
                r#"{{"id":"x","model":"m","choices":[{{"index":0,"message":{{"role":"assistant","content":"hi"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{max},"completion_tokens":{max},"total_tokens":1}}}}"#
            ),
        ),
        (
            Dialect::Anthropic,
            format!(
                r#"{{"id":"x","type":"message","role":"assistant","model":"m","content":[{{"type":"text","text":"hi"}}],"stop_reason":"end_turn","usage":{{"input_tokens":{max},"output_tokens":{max},"cache_read_input_tokens":{max},"cache_creation_input_tokens":{max}}}}}"#
            ),
        ),
        (
            Dialect::Gemini,
            format!(
                r#"{{"candidates":[{{"content":{{"role":"model","parts":[{{"text":"hi"}}]}},"finishReason":"STOP"}}],"usageMetadata":{{"promptTokenCount":{max},"candidatesTokenCount":{max},"thoughtsTokenCount":{max},"cachedContentTokenCount":{max}}}}}"#
            ),
        ),
        (
            Dialect::Responses,
            format!(
                r#"{{"id":"resp_x","status":"completed","model":"m","output":[{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"hi"}}]}}],"usage":{{"input_tokens":{max},"output_tokens":{max},"input_tokens_details":{{"cached_tokens":{max}}}}}}}"#
            ),
        ),
    ];
    for (upstream, body) in bodies {
        let response = upstream.decode_response(body.as_bytes()).unwrap();
        let openai: Value =
            serde_json::from_slice(&ClientDialect::OpenAi.encode_response(&response, &META))
                .unwrap();
        assert_eq!(openai["usage"]["total_tokens"], json!(max), "{upstream}: {openai}");
        ClientDialect::Anthropic.encode_response(&response, &META);
        let stream = if upstream == Dialect::Responses {
            format!("data: {{\"type\":\"response.completed\",\"response\":{body}}}\n\n")
        } else {
            format!("data: {body}\n\n")
        };
        check_stream(upstream, stream.as_bytes(), &[]).unwrap();
    }
}
