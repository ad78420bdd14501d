//! One request and its answer: read it, choose a behaviour, record the attempt, answer.
//!
//! Invariants:
//! - The whole request body is read before anything else happens, so a reset never races the
//!   client's upload and every recorded attempt has its body.
//! - The attempt is recorded before the first response byte (see `record`).
//! - Malformed requests and malformed `x-mock-behavior` headers become realistic 400s in the
//!   request's dialect and do not consume the model's queue.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::Shared;
use super::cache::Cached;
use super::connection::ConnectionControl;
use super::route::{EmbedTarget, Route, Target};
use crate::behavior::{BEHAVIOR_HEADER, Behavior, ErrorKind, Flood, Reply, Status};
use crate::delivery::{Delivery, EventBody, Frames};
use crate::dialect::{Dialect, Failure, Turn, Usage, Wire};
use crate::record::{Attempt, Endpoint, InFlight};
use crate::script::Subject;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
const TEXT: &str = "text/plain; charset=utf-8";

/// The hyper service of every connection.
pub(super) async fn answer(
    shared: Arc<Shared>,
    connection: Arc<ConnectionControl>,
    request: http::Request<Incoming>,
) -> Result<Response<EventBody>, Infallible> {
    let mut in_flight = InFlight::enter(&shared.occupancy);
    let (parts, body) = request.into_parts();
    let route = Route::of(&parts.method, &parts.uri, &parts.headers);
    // An error means the client is gone (or broke HTTP): not an attempt, and nobody reads the
    // answer.
    let Ok(body) = body.collect().await.map(http_body_util::Collected::to_bytes) else {
        let answer = Answer::new(StatusCode::BAD_REQUEST, TEXT, Delivery::whole(Bytes::new()));
        return Ok(answer.into_response(&connection, in_flight));
    };
    if parts.headers.contains_key(PROBE_HEADER) {
        in_flight.count_in(&shared.probes, probe_group(&parts, &body));
    }
    if matches!(route, Route::Generate(_) | Route::Embed(_)) {
        in_flight.count_in(&shared.credentials, credential_of(&parts).to_owned());
    }
    let answer = match route {
        Route::Generate(target) => generate(&shared, &connection, parts, target, body).await,
        Route::Embed(target) => embed(&shared, &connection, parts, &target, body).await,
        Route::CountTokens => count_tokens(&body),
        Route::ListModels(dialect) => list_models(&shared, dialect),
        Route::Unknown => unknown(&parts),
    };
    Ok(answer.into_response(&connection, in_flight))
}

/// The header Switchyard marks its recovery probes with.
const PROBE_HEADER: &str = "x-switchyard-probe";

/// A probe's group for [`crate::record::Peaks`]: its credential and its model (from the body,
/// or the path where Gemini names it), as `credential model`.
fn probe_group(parts: &Parts, body: &[u8]) -> String {
    let credential = credential_of(parts);
    let model = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| b.get("model").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| parts.uri.path().to_owned());
    format!("{credential} {model}")
}

/// The key a request was sent with, in whichever header its dialect puts it.
fn credential_of(parts: &Parts) -> &str {
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    header("authorization")
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v))
        .or_else(|| header("x-api-key"))
        .or_else(|| header("x-goog-api-key"))
        .unwrap_or_default()
}

/// What to send, before it becomes a hyper response.
struct Answer {
    status: StatusCode,
    content_type: &'static str,
    headers: Vec<(HeaderName, HeaderValue)>,
    delivery: Delivery,
}

impl Answer {
    fn new(status: StatusCode, content_type: &'static str, delivery: Delivery) -> Self {
        Self { status, content_type, headers: Vec::new(), delivery }
    }

    fn json(status: StatusCode, body: &Value) -> Self {
        Self::new(status, JSON, Delivery::whole(to_bytes(body)))
    }

    fn into_response(
        self,
        connection: &Arc<ConnectionControl>,
        in_flight: InFlight,
    ) -> Response<EventBody> {
        let mut response = Response::new(EventBody::new(self.delivery, connection, in_flight));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        if self.content_type == EVENT_STREAM {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        response
    }
}

async fn generate(
    shared: &Shared,
    connection: &ConnectionControl,
    parts: Parts,
    target: Target,
    body: Bytes,
) -> Answer {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = target
        .model
        .or_else(|| request.get("model").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    let stream = target
        .stream
        .unwrap_or_else(|| request.get("stream").and_then(Value::as_bool) == Some(true));
    let subject = Subject { wire: target.dialect.wire(), body: &request, stream };
    // Placeholders filled in before the attempt is recorded: its record holds what was sent.
    let behavior = choose(shared, &parts, subject, &model, target.problem).at(shared.clock.now());
    let seq = shared.journal.next_seq();
    let arrived = tokio::time::Instant::now();
    let quota = shared.quota.lock().expect("never poisoned").get(credential_of(&parts)).cloned();
    let cached = matches!(behavior, Behavior::Reply(_))
        .then(|| shared.prompt_cache.serve(credential_of(&parts), target.dialect, &request))
        .flatten();
    // Rendered before recording so the request can move into the record without a copy; no
    // byte leaves before the record is written either way.
    let scene = Scene {
        wire: target.dialect.wire(),
        seq,
        model: &model,
        request: &request,
        request_len: body.len(),
        stream,
        cached,
    };
    let answer = match &behavior {
        Behavior::Reply(reply) => Some(scene.reply(&continued(target.dialect, &request, reply))),
        Behavior::Status(status) => Some(scene.status(status)),
        Behavior::RejectPrefill if scene.wire.ends_with_assistant(&request) => {
            Some(scene.status(&Status::error(ErrorKind::PrefillRejected)))
        }
        Behavior::RejectPrefill => Some(scene.reply(&Reply::default())),
        Behavior::Flood(flood) => Some(flooded(*flood)),
        Behavior::Reset | Behavior::Hang => None,
    };
    let attempt = Attempt {
        seq,
        dialect: target.dialect,
        endpoint: Endpoint::Generation,
        model,
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        stream,
        headers: parts.headers,
        body: request,
        raw_body: body,
        behavior,
        at: arrived,
        elapsed: arrived - shared.journal.started(),
    };
    conclude(shared, connection, attempt, answer, quota).await
}

/// Records the attempt, then gives its answer (with the credential's quota headers), or resets
/// the connection, or hangs, as its behaviour says.
async fn conclude(
    shared: &Shared,
    connection: &ConnectionControl,
    attempt: Attempt,
    answer: Option<Answer>,
    quota: Option<super::Quota>,
) -> Answer {
    let reset = attempt.behavior == Behavior::Reset;
    // A record the test will look for and not find: say so in the answer, where the failing
    // test shows it, instead of answering as scripted.
    if let Err(e) = shared.journal.record(attempt) {
        return misscripted(&format!("cannot write the attempt's record file: {e}"));
    }
    if let Some(mut answer) = answer {
        if let Some(quota) = quota {
            answer.headers.extend(quota.headers());
        }
        return answer;
    }
    if reset {
        connection.reset();
    }
    // Hang, or wait for the reset: the connection's end drops this future.
    std::future::pending().await
}

/// An embeddings request, an attempt like a generation: the header's behaviour, else the
/// real API's 400 for a request it would refuse (consuming nothing), else the model's next
/// scripted behaviour (content rules see the body through the dialect's generation reader, so
/// only `request_contains` and `has_tools = false` can match one); recorded before it is
/// answered.
///
/// What each behaviour does to an embeddings answer:
/// - a [`Reply`] answers the embeddings (its text, tool call, chunks and finish reason are not
///   used; a scripted `usage` gives OpenAI's `prompt_tokens`), delivered as one document as a
///   non-streamed generation is: its first-event delay holds the whole answer back, and its
///   fault strikes the document as [`crate::Fault`] says for a non-streaming reply (cut, reset
///   or stall after the first half; a malformed document is its first half). Truncation, a
///   missing `[DONE]` and an end without finish change nothing: an embeddings document has no
///   finish reason. A reply whose request the real API would refuse answers that 400 instead;
/// - a [`Status`], [`Behavior::Reset`], [`Behavior::Hang`] and [`Behavior::Flood`] are as for a
///   generation, the error in the dialect's shape;
/// - [`Behavior::RejectPrefill`] is a normal answer: there is no conversation to end with an
///   assistant turn.
async fn embed(
    shared: &Shared,
    connection: &ConnectionControl,
    parts: Parts,
    target: &EmbedTarget,
    body: Bytes,
) -> Answer {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = target
        .model
        .clone()
        .or_else(|| request.get("model").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    let wire = target.dialect().wire();
    let read = if model.is_empty() && target.model.is_some() {
        Err(Status::error(ErrorKind::BadRequest).message("mock upstream: the path names no model"))
    } else {
        target.call.read(&model, &request)
    };
    let chosen = header_behavior(&parts)
        .or_else(|| read.as_ref().err().map(|refusal| refusal.clone().into()))
        .unwrap_or_else(|| {
            shared.scripts.next(&model, &Subject { wire, body: &request, stream: false })
        });
    let behavior = match (chosen, &read) {
        (Behavior::Reply(_) | Behavior::RejectPrefill, Err(refusal)) => refusal.clone().into(),
        (chosen, _) => chosen,
    }
    .at(shared.clock.now());
    let seq = shared.journal.next_seq();
    let arrived = tokio::time::Instant::now();
    let document = |reply: &Reply| match &read {
        Ok(embeddings) => {
            let document = Bytes::from(target.call.document(&model, embeddings, reply));
            Answer::new(StatusCode::OK, JSON, Delivery::document(document, reply))
        }
        Err(refusal) => status_answer(wire, &model, refusal),
    };
    let answer = match &behavior {
        Behavior::Reply(reply) => Some(document(reply)),
        Behavior::RejectPrefill => Some(document(&Reply::default())),
        Behavior::Status(status) => Some(status_answer(wire, &model, status)),
        Behavior::Flood(flood) => Some(flooded(*flood)),
        Behavior::Reset | Behavior::Hang => None,
    };
    let quota = shared.quota.lock().expect("never poisoned").get(credential_of(&parts)).cloned();
    let attempt = Attempt {
        seq,
        dialect: target.dialect(),
        endpoint: Endpoint::Embeddings,
        model,
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        stream: false,
        headers: parts.headers,
        body: request,
        raw_body: body,
        behavior,
        at: arrived,
        elapsed: arrived - shared.journal.started(),
    };
    conclude(shared, connection, attempt, answer, quota).await
}

/// A continuation request (its dialect's mechanism, RESILIENCE.md §10) is answered with the
/// reply's text minus the answer so far it was given, the way a model continues its own answer:
/// tests can then assert the exact text end to end. Otherwise the reply as scripted.
fn continued<'r>(
    dialect: Dialect,
    request: &Value,
    reply: &'r Reply,
) -> std::borrow::Cow<'r, Reply> {
    let rest = crate::dialect::continued_prefix(dialect, request)
        .and_then(|prefix| reply.text.strip_prefix(prefix.as_str()).map(str::to_owned));
    match rest {
        Some(rest) => std::borrow::Cow::Owned(Reply { text: rest, ..reply.clone() }),
        None => std::borrow::Cow::Borrowed(reply),
    }
}

/// The behaviour for this attempt: the header's, a 400 for a request the real API would
/// refuse, or the next one from the script.
fn choose(
    shared: &Shared,
    parts: &Parts,
    request: Subject<'_>,
    model: &str,
    problem: Option<&str>,
) -> Behavior {
    let invalid = |message: String| Status::error(ErrorKind::BadRequest).message(message).into();
    if let Some(behavior) = header_behavior(parts) {
        return behavior;
    }
    if let Some(problem) = problem {
        return invalid(format!("mock upstream: {problem}"));
    }
    if !request.body.is_object() {
        return invalid("mock upstream: the request body is not a JSON object".to_owned());
    }
    if model.is_empty() {
        return invalid("mock upstream: the request names no model".to_owned());
    }
    shared.scripts.next(model, &request)
}

/// The behaviour the [`BEHAVIOR_HEADER`] asks for (a 400 when it cannot be read), if sent.
fn header_behavior(parts: &Parts) -> Option<Behavior> {
    let header = parts.headers.get(BEHAVIOR_HEADER)?;
    Some(serde_json::from_slice(header.as_bytes()).unwrap_or_else(|e| {
        Status::error(ErrorKind::BadRequest)
            .message(format!("mock upstream: invalid {BEHAVIOR_HEADER} header: {e}"))
            .into()
    }))
}

/// Everything the answer to one generation request depends on.
struct Scene<'a> {
    wire: &'static dyn Wire,
    seq: u64,
    model: &'a str,
    request: &'a Value,
    request_len: usize,
    stream: bool,
    /// What the prompt read from and wrote to the credential's cache, when it keeps one.
    cached: Option<Cached>,
}

impl Scene<'_> {
    fn reply(&self, reply: &Reply) -> Answer {
        let turn = Turn {
            seq: self.seq,
            model: self.model,
            request: self.request,
            reply,
            finish: reply.effective_finish(),
            usage: match (self.cached, reply.usage) {
                (Some(cached), None) => Usage {
                    input: cached.fresh,
                    cache_read: cached.read,
                    cache_write: cached.written,
                    ..Usage::estimate(self.request_len, reply)
                },
                _ => Usage::estimate(self.request_len, reply),
            },
        };
        if self.stream {
            let raw = |event: &Option<String>| event.clone().map(Bytes::from);
            let frames = Frames {
                keep_alive: raw(&reply.keep_alive_event).unwrap_or_else(|| self.wire.keep_alive()),
                malformed: self.wire.malformed(),
                error: raw(&reply.error_event).unwrap_or_else(|| self.wire.stream_error()),
            };
            let delivery =
                Delivery::stream(self.wire.events(&turn), self.wire.terminator(), reply, frames);
            Answer::new(StatusCode::OK, EVENT_STREAM, delivery)
        } else {
            let document = to_bytes(&self.wire.document(&turn));
            Answer::new(StatusCode::OK, JSON, Delivery::document(document, reply))
        }
    }

    fn status(&self, status: &Status) -> Answer {
        status_answer(self.wire, self.model, status)
    }
}

/// An error answer in `wire`'s dialect, about `model`.
fn status_answer(wire: &dyn Wire, model: &str, status: &Status) -> Answer {
    let kind = status.kind();
    let code = status.code.unwrap_or_else(|| wire.code_for(kind));
    let Ok(code) = StatusCode::from_u16(code) else {
        return misscripted(&format!("status code {code} is not valid HTTP"));
    };
    let (content_type, body) = match &status.body {
        Some(Value::String(text)) => (TEXT, Bytes::from(text.clone())),
        Some(json) => (JSON, to_bytes(json)),
        None => {
            let failure =
                Failure { kind, code: code.as_u16(), message: status.message.as_deref(), model };
            (JSON, to_bytes(&wire.error(&failure)))
        }
    };
    let mut answer = Answer::new(code, content_type, Delivery::whole(body));
    for (name, value) in &status.headers {
        match (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            (Ok(name), Ok(value)) => answer.headers.push((name, value)),
            _ => return misscripted(&format!("header `{name}: {value}` is not valid HTTP")),
        }
    }
    answer
}

/// The same four-bytes-a-token estimate as a reply's usage, so the two agree.
fn count_tokens(body: &Bytes) -> Answer {
    let input = Usage::estimate(body.len(), &Reply::text("")).input;
    Answer::json(StatusCode::OK, &json!({ "input_tokens": input }))
}

/// A 200 whose body is `flood.bytes` of filler, announcing the flood's `Content-Length`.
fn flooded(flood: Flood) -> Answer {
    let short = flood.content_length.is_some_and(|length| length > flood.bytes);
    let mut answer = Answer::new(StatusCode::OK, JSON, Delivery::flood(flood.bytes, short));
    if let Some(length) = flood.content_length {
        answer.headers.push((CONTENT_LENGTH, HeaderValue::from(length)));
    }
    answer
}

fn list_models(shared: &Shared, dialect: Dialect) -> Answer {
    if let Some(flood) = *shared.listing_flood.lock().expect("the flood lock is never poisoned") {
        return flooded(flood);
    }
    let mut names = shared.scripts.names();
    names.extend(shared.listed_models.iter().cloned());
    names.extend(shared.embedding_models.iter().cloned());
    names.sort_unstable();
    names.dedup();
    let embedding = |name: &str| {
        shared.embedding_models.iter().any(|m| m == name)
            || crate::embedding::looks_like_embedding_model(name)
    };
    Answer::json(StatusCode::OK, &dialect.wire().models(&names, &embedding))
}

fn unknown(parts: &Parts) -> Answer {
    let message = format!("mock upstream: no route for {} {}", parts.method, parts.uri.path());
    Answer::json(
        StatusCode::NOT_FOUND,
        &json!({ "error": { "message": message, "type": "invalid_request_error", "code": "unknown_url" } }),
    )
}

/// A script that cannot be sent as HTTP: say so loudly, in plain text, so the failing test
/// shows why.
fn misscripted(problem: &str) -> Answer {
    let body = Bytes::from(format!("mock upstream misscripted: {problem}"));
    Answer::new(StatusCode::INTERNAL_SERVER_ERROR, TEXT, Delivery::whole(body))
}

fn to_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("a JSON value always serialises"))
}
