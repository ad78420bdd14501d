//! Golden translations: every fixture under `tests/fixtures/` goes through every dialect pair
//! and the result is compared with a reviewed file beside it.
//!
//! - `request/<case>/in.<client>.json` → `out.<upstream>.json` for each upstream dialect (or
//!   `out.<upstream>.error.txt` when that dialect cannot express the request), or a single
//!   `out.parse-error.txt` when the client body is invalid.
//! - `response/<case>/in.<upstream>.json` → `out.<client>.json` for each client dialect.
//! - `stream/<case>/in.<upstream>.sse` → `out.<client>.sse` for each client dialect, plus
//!   `trace.txt`: what each upstream event meant and how the stream ended. A Gemini client
//!   gets both its framings: `out.gemini.sse` (`alt=sse`) and `out.gemini-array.json` (one
//!   JSON array written element by element).
//!
//! JSON goldens are pretty-printed in the order the encoder wrote the keys, and a duplicate
//! key fails the test. Inputs are pretty-printed for review, so raw JSON that passes through
//! verbatim (a tool input becoming an OpenAI `arguments` string) keeps their whitespace; real
//! upstreams send it compact. Every stream is also fed in 1, 2, 7 and 64-byte chunks and must
//! come out byte-identical. Responses and streams answer a client request that declared
//! `apply_patch` a freeform tool (as Codex does), so a Responses client gets its calls back as
//! `custom_tool_call`s. Regenerate with
//! `UPDATE_GOLDENS=1 cargo test -p switchyard-providers --test golden`, then review the diff.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use switchyard_providers::chat::{ChatRequest, Tool, ToolFormat};
use switchyard_providers::dialect::{
    Caching, ClientDialect, Depth, Dialect, Dropped, EncodeOptions, ResponseMeta,
};
use switchyard_providers::error::{ErrorKind, ProviderError};
use switchyard_providers::gemini::Method;
use switchyard_providers::sse::{SseDecoder, SseItem};
use switchyard_providers::stream::{Progress, StreamEnd, StreamTranslator};

const UPSTREAMS: [Dialect; 4] =
    [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini, Dialect::Responses];
/// Each client dialect once, Gemini as `generateContent` (its streams: see [`STREAM_CLIENTS`]).
const CLIENTS: [ClientDialect; 4] = [
    ClientDialect::OpenAi,
    ClientDialect::Anthropic,
    ClientDialect::Responses,
    ClientDialect::Gemini(Method::Generate),
];
/// Every client stream framing.
const STREAM_CLIENTS: [ClientDialect; 5] = [
    ClientDialect::OpenAi,
    ClientDialect::Anthropic,
    ClientDialect::Responses,
    ClientDialect::Gemini(Method::StreamSse),
    ClientDialect::Gemini(Method::StreamArray),
];

/// The golden file a client stream is compared with.
fn stream_golden(client: ClientDialect) -> String {
    match client {
        ClientDialect::Gemini(Method::StreamArray) => "out.gemini-array.json".to_owned(),
        client => format!("out.{}.sse", client.dialect().as_str()),
    }
}
const OPTIONS: EncodeOptions<'static> = EncodeOptions {
    model: "upstream-model",
    default_max_tokens: 4096,
    system_in_place: false,
    reasoning: true,
    stream_usage: true,
    caching: Caching::NONE,
};
const META: ResponseMeta<'static> = ResponseMeta { model: "served-model", created: 1_700_000_000 };

/// The client request every golden answer answers: it declares `apply_patch` freeform.
fn client_request() -> ChatRequest<'static> {
    let mut patch = Tool::function("apply_patch");
    patch.format = ToolFormat::Freeform(None);
    ChatRequest { tools: vec![patch], stream_usage: true, ..ChatRequest::default() }
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(kind);
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("readable fixture directory").path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no fixtures under {}", root.display());
    cases
}

/// The single `in.<dialect>.<ext>` file of a case, and its dialect name.
fn input(case: &Path, ext: &str) -> (String, Vec<u8>) {
    let mut inputs: Vec<(String, PathBuf)> = fs::read_dir(case)
        .expect("readable case")
        .map(|entry| entry.expect("readable case entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let dialect = name.strip_prefix("in.")?.strip_suffix(&format!(".{ext}"))?.to_owned();
            Some((dialect, path))
        })
        .collect();
    assert_eq!(inputs.len(), 1, "{}: exactly one in.<dialect>.{ext}", case.display());
    let (dialect, path) = inputs.remove(0);
    (dialect, fs::read(path).expect("readable input"))
}

fn client_dialect(name: &str) -> ClientDialect {
    CLIENTS.into_iter().find(|c| c.dialect().as_str() == name).expect("a client dialect name")
}

fn upstream_dialect(name: &str) -> Dialect {
    UPSTREAMS.into_iter().find(|d| d.as_str() == name).expect("an upstream dialect name")
}

/// Compares `actual` with the golden file, or writes it under `UPDATE_GOLDENS`. Returns a
/// description of the mismatch, so one run reports every stale golden.
fn check(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        fs::write(path, actual).expect("writable golden");
        return;
    }
    match fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{} differs\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        )),
        Err(_) => {
            failures.push(format!("{} is missing; run with UPDATE_GOLDENS=1", path.display()));
        }
    }
}

/// `text` with every response id this router minted (`resp_` and 32 hex digits, and the item
/// ids made from it) written as `resp_MINTED`: they are random, the goldens are not.
fn minted_ids_named(text: &[u8]) -> Vec<u8> {
    const HEX: usize = 32;
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.windows(1).position(|w| w[0] == b'_') {
        let (head, tail) = rest.split_at(at + 1);
        out.extend_from_slice(head);
        let minted = tail.len() >= HEX
            && tail[..HEX].iter().all(u8::is_ascii_hexdigit)
            && tail.get(HEX).is_none_or(|b| !b.is_ascii_hexdigit());
        if minted {
            out.extend_from_slice(b"MINTED");
            rest = &tail[HEX..];
        } else {
            rest = tail;
        }
    }
    out.extend_from_slice(rest);
    out
}

fn finish(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} golden(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// What routing reads without the whole parse is what the whole parse reads, but
/// for the conversation, the system prompt and the tools: a setting the routing parse missed
/// would be a passthrough that routes, or refuses to continue, on the wrong facts.
#[test]
fn the_routing_parse_reads_every_top_level_setting_the_whole_parse_reads() {
    let mut checked = 0;
    for case in fixtures("request") {
        let (client, body) = input(&case, "json");
        let client = client_dialect(&client);
        let Ok(mut whole) = client.parse_request(&body) else { continue };
        let routing = client.parse_request_to(&body, Depth::Routing).unwrap_or_else(|error| {
            panic!(
                "{}: the routing parse refused what the whole parse read: {error}",
                case.display()
            )
        });
        assert!(
            routing.messages.is_empty() && routing.system.is_empty() && routing.tools.is_empty()
        );
        whole.messages.clear();
        whole.system.clear();
        whole.tools.clear();
        assert_eq!(format!("{routing:?}"), format!("{whole:?}"), "{}", case.display());
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} request fixtures parsed");
}

#[test]
fn client_requests_translate_to_every_upstream_dialect() {
    let mut failures = Vec::new();
    for case in fixtures("request") {
        let (client, body) = input(&case, "json");
        let request = match client_dialect(&client).parse_request(&body) {
            Ok(request) => request,
            Err(error) => {
                check(&case.join("out.parse-error.txt"), &format!("{error}\n"), &mut failures);
                continue;
            }
        };
        let mut dropped_report = String::new();
        for upstream in UPSTREAMS {
            let name = upstream.as_str();
            let mut dropped = Dropped::default();
            match upstream.encode_request_noting(&request, &OPTIONS, &mut dropped) {
                Ok(body) => {
                    check(&case.join(format!("out.{name}.json")), &pretty(&body), &mut failures);
                    let names: Vec<&str> = dropped.names().iter().map(AsRef::as_ref).collect();
                    let _ = writeln!(dropped_report, "{name}: {}", names.join(", "));
                }
                Err(error) => {
                    check(
                        &case.join(format!("out.{name}.error.txt")),
                        &format!("{error}\n"),
                        &mut failures,
                    );
                }
            }
        }
        // What each target could not carry: the routing trace names the same.
        check(&case.join("dropped.txt"), &dropped_report, &mut failures);
    }
    finish(&failures);
}

#[test]
fn upstream_responses_translate_to_every_client_dialect() {
    let mut failures = Vec::new();
    for case in fixtures("response") {
        let (upstream, body) = input(&case, "json");
        let upstream = upstream_dialect(&upstream);
        let response =
            upstream.decode_response(&body).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        // What a relayed answer is read for is what the whole decode reads.
        let ending = upstream.decode_ending(&body).unwrap();
        assert_eq!(ending.finished, response.stop_reason.is_some(), "{}", case.display());
        assert_eq!(ending.usage, response.usage, "{}", case.display());
        assert_eq!(ending.model.unwrap_or_default(), response.model.clone(), "{}", case.display());
        for client in CLIENTS {
            let body = client.encode_response_for(&client_request(), &response, &META);
            let name = client.dialect().as_str();
            check(
                &case.join(format!("out.{name}.json")),
                &String::from_utf8(minted_ids_named(pretty(&body).as_bytes())).unwrap(),
                &mut failures,
            );
        }
    }
    finish(&failures);
}

/// Runs one upstream stream through the SSE decoder and a translator, delivered in `chunk`
/// sized pieces, the way the router's streaming loop does.
fn translate_stream(
    upstream: Dialect,
    client: ClientDialect,
    bytes: &[u8],
    chunk: usize,
) -> (Vec<u8>, String) {
    let mut sse = SseDecoder::default();
    let mut translator = StreamTranslator::for_request(upstream, client, &META, &client_request());
    let mut out = Vec::new();
    let mut trace = String::new();
    let mut n = 0;
    let mut failed = false;
    let mut pieces = bytes.chunks(chunk.max(1));
    let mut closed = false;
    'read: while !closed {
        if let Some(piece) = pieces.next() {
            sse.push(piece);
        } else {
            sse.close();
            closed = true;
        }
        while let Some(item) = sse.next_item() {
            n += 1;
            let event = match item {
                Ok(SseItem::Event(event)) => event,
                Ok(SseItem::KeepAlive) => {
                    writeln!(trace, "{n}: keep-alive").unwrap();
                    continue;
                }
                Err(error) => panic!("{error}"),
            };
            match translator.translate(&event, &mut out) {
                Ok(t) => {
                    let what = if t.events == 0 {
                        "nothing".to_owned()
                    } else {
                        format!("{} event(s)", t.events)
                    };
                    writeln!(trace, "{n}: {what}").unwrap();
                    if t.progress == Progress::End {
                        writeln!(trace, "end marker: stop reading").unwrap();
                        break 'read;
                    }
                }
                Err(ProviderError::MalformedEvent { dialect, message }) => {
                    writeln!(trace, "{n}: dropped malformed {dialect} event: {message}").unwrap();
                }
                Err(error) => {
                    writeln!(trace, "{n}: {error}").unwrap();
                    translator.fail(ErrorKind::Internal, &error.to_string(), &mut out);
                    failed = true;
                    break 'read;
                }
            }
        }
    }
    let status = translator.status();
    if !failed {
        let end = translator.end(&mut out);
        writeln!(
            trace,
            "status: finish_seen={} end_seen={} -> {}",
            status.finish_seen,
            status.end_seen,
            if end == StreamEnd::Complete { "complete" } else { "truncated" }
        )
        .unwrap();
    }
    (minted_ids_named(&out), trace)
}

#[test]
fn upstream_streams_translate_to_every_client_dialect_in_any_chunking() {
    let mut failures = Vec::new();
    for case in fixtures("stream") {
        let (upstream, bytes) = input(&case, "sse");
        let upstream = upstream_dialect(&upstream);
        let mut traces = Vec::new();
        for client in STREAM_CLIENTS {
            let (whole, trace) = translate_stream(upstream, client, &bytes, bytes.len());
            for chunk in [1, 2, 7, 64] {
                let (pieces, _) = translate_stream(upstream, client, &bytes, chunk);
                assert_eq!(
                    String::from_utf8_lossy(&pieces),
                    String::from_utf8_lossy(&whole),
                    "{}: {chunk}-byte chunks change the output",
                    case.display()
                );
            }
            let text = String::from_utf8(whole).expect("client SSE is UTF-8");
            check(&case.join(stream_golden(client)), &text, &mut failures);
            traces.push(trace);
        }
        assert!(traces.windows(2).all(|w| w[0] == w[1]), "decoding does not depend on the client");
        check(&case.join("trace.txt"), &traces[0], &mut failures);
    }
    finish(&failures);
}

/// Pretty JSON in the order written; panics on invalid JSON or duplicate keys.
fn pretty(body: &[u8]) -> String {
    let node: Node = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
    let mut text = serde_json::to_string_pretty(&node).expect("serialisable");
    text.push('\n');
    text
}

/// A JSON value that keeps key order and refuses duplicate keys.
enum Node {
    Scalar(serde_json::Value),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar(serde_json::Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries: Vec<(String, Node)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Node>()? {
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    entries.push((key, value));
                }
                Ok(Node::Object(entries))
            }
        }
        deserializer.deserialize_any(NodeVisitor)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Scalar(value) => value.serialize(serializer),
            Node::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}
