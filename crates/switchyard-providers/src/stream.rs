//! Streams: decoding an upstream's events into canonical [`StreamEvent`]s, encoding those as
//! the client's SSE, and telling a complete stream from a truncated one (RESILIENCE.md §7).
//!
//! Invariants:
//! - A malformed upstream event produces no canonical event and no client bytes: decoders
//!   parse the whole event before emitting anything.
//! - How a stream ended is decided by `switchyard_core::ending` alone, from what the
//!   translator has seen ([`StreamTranslator::seen`]): a finish reason makes it complete, an end
//!   marker does not (unless the provider is trusted with its own). A relayed upstream end
//!   marker (`[DONE]`, `message_stop`) is held back until that decision accepts it, so a
//!   truncated answer never reaches a client with its dialect's normal end.
//! - Once an encoder has written its end or its error, it writes nothing more.

use std::borrow::Cow;

use switchyard_core::continuation::{Relayed, Seam};
use switchyard_core::ending::{self, Ending, Exit, Seen, Trust};

use crate::chat::{ChatRequest, StreamEvent, Usage};
use crate::dialect::{ClientContext, ClientDialect, Dialect, ResponseMeta};
use crate::error::{ErrorKind, ProviderError, UpstreamError};
use crate::sse::SseEvent;
use crate::{anthropic, gemini, openai, responses};

/// Whether the upstream has said it is finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStatus {
    /// A finish (stop) reason arrived.
    pub finish_seen: bool,
    /// The dialect's end marker arrived (`[DONE]`, `message_stop`; Gemini has none).
    pub end_seen: bool,
}

impl StreamStatus {
    /// Where a reader that reached the end of the body stopped: at the end marker, or at the
    /// bare end of the body.
    pub fn exit_at_end(self) -> Exit {
        if self.end_seen { Exit::EndMarker } else { Exit::Eof }
    }
}

/// What one upstream event meant for the stream as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Keep reading.
    Continue,
    /// The upstream's end marker: nothing more will come, stop reading.
    End,
}

/// The decoder of one upstream stream; see each dialect's `StreamDecoder`.
#[derive(Debug)]
pub enum StreamDecoder {
    OpenAi(openai::StreamDecoder),
    Anthropic(anthropic::StreamDecoder),
    Gemini(gemini::StreamDecoder),
    Responses(responses::StreamDecoder),
}

impl StreamDecoder {
    /// Decodes one SSE event, handing each canonical event to `emit` in order. Events that
    /// emit nothing (pings, empty chunks) are keep-alives as far as the caller is concerned.
    ///
    /// Errors: [`ProviderError::MalformedEvent`] (drop the event, log it, go on) and
    /// [`ProviderError::UpstreamStream`] (the upstream reported an error: the stream is over).
    pub fn decode<'e>(
        &mut self,
        event: &SseEvent<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Result<Progress, ProviderError> {
        match self {
            Self::OpenAi(decoder) => decoder.decode(event, emit),
            Self::Anthropic(decoder) => decoder.decode(event, emit),
            Self::Gemini(decoder) => decoder.decode(event, emit),
            Self::Responses(decoder) => decoder.decode(event, emit),
        }
    }

    /// Where the event just decoded wrote its `model`, quotes included, in its data, when the
    /// decoder read it there (OpenAI chunks, which all name it): a relay rewrites it in place.
    pub fn model_at(&self) -> Option<std::ops::Range<usize>> {
        match self {
            Self::OpenAi(decoder) => decoder.model_at(),
            Self::Anthropic(_) | Self::Gemini(_) | Self::Responses(_) => None,
        }
    }

    /// What was seen of the answer, for the one decision of how it ended
    /// (`switchyard_core::ending`): `content` as the reader counted real events.
    pub fn seen(&self, content: bool) -> Seen {
        Seen { content, finish: self.status().finish_seen }
    }

    pub fn status(&self) -> StreamStatus {
        match self {
            Self::OpenAi(decoder) => decoder.status(),
            Self::Anthropic(decoder) => decoder.status(),
            Self::Gemini(decoder) => decoder.status(),
            Self::Responses(decoder) => decoder.status(),
        }
    }
}

/// The encoder of one client stream; see each dialect's `StreamEncoder`.
#[derive(Debug)]
pub enum StreamEncoder {
    OpenAi(openai::StreamEncoder),
    Anthropic(anthropic::StreamEncoder),
    Responses(responses::StreamEncoder),
    Gemini(gemini::StreamEncoder),
}

impl StreamEncoder {
    /// Appends the client's bytes for one canonical event.
    pub fn encode(&mut self, event: &StreamEvent<'_>, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(encoder) => encoder.encode(event, out),
            Self::Anthropic(encoder) => encoder.encode(event, out),
            Self::Responses(encoder) => encoder.encode(event, out),
            Self::Gemini(encoder) => encoder.encode(event, out),
        }
    }

    /// Appends the dialect's proper end (`[DONE]`, `message_stop`). Only for a complete
    /// upstream stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(encoder) => encoder.finish(out),
            Self::Anthropic(encoder) => encoder.finish(out),
            Self::Responses(encoder) => encoder.finish(out),
            Self::Gemini(encoder) => encoder.finish(out),
        }
    }

    /// Appends the dialect's terminal error event, for a stream that broke after bytes were
    /// sent. Nothing follows it.
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(encoder) => encoder.fail(kind, message, out),
            Self::Anthropic(encoder) => encoder.fail(kind, message, out),
            Self::Responses(encoder) => encoder.fail(kind, message, out),
            Self::Gemini(encoder) => encoder.fail(kind, message, out),
        }
    }

    /// A relayed upstream event the client got: a Responses encoder follows its numbering.
    fn follow(&mut self, data: &str) {
        if let Self::Responses(encoder) = self {
            encoder.follow(data);
        }
    }

    /// A continuation takes over a relayed stream whose numbering this encoder followed.
    fn adopt_followed(&mut self) {
        if let Self::Responses(encoder) = self {
            encoder.adopt_followed();
        }
    }

    /// The client saw its open content block closed (Anthropic's `content_block_stop`);
    /// dialects without blocks have nothing to close.
    pub fn close_block(&mut self, out: &mut Vec<u8>) {
        if let Self::Anthropic(encoder) = self {
            encoder.close_block(out);
        }
    }

    /// Appends something the client ignores but that keeps its connection warm.
    pub fn keep_alive(&self, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(_) => openai::StreamEncoder::keep_alive(out),
            Self::Anthropic(_) => anthropic::StreamEncoder::keep_alive(out),
            Self::Responses(_) => responses::StreamEncoder::keep_alive(out),
            Self::Gemini(_) => gemini::StreamEncoder::keep_alive(out),
        }
    }
}

/// How a translated stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The client got the dialect's proper end.
    Complete,
    /// The upstream stopped without finishing; the client got a terminal error event.
    Truncated,
}

/// What one translated upstream event produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translated {
    /// Canonical events produced, `message_start` and usage included.
    pub events: usize,
    /// Of those, the ones that carry content (RESILIENCE.md §7): text, thinking, a tool
    /// call's start or arguments, a refusal. 0 means the upstream event was a keep-alive in
    /// disguise (`message_start`, a `ping`, a role-only or usage-only chunk) and must not
    /// count as the first real event.
    pub real: usize,
    pub progress: Progress,
}

/// The HTTP status an error event inside a 2xx stream stands for, read from its type so the
/// one classifier treats it as if the upstream had answered with that status (RESILIENCE.md
/// §2): Anthropic `overloaded_error` is a 529, a rate limit a 429, Gemini's
/// `INVALID_ARGUMENT` the client's own 400. An error of no known type counts as a 503.
pub fn error_status(error: &UpstreamError) -> u16 {
    let code = error.code.as_deref().unwrap_or("");
    match code {
        "overloaded_error" => 529,
        "rate_limit_error"
        | "rate_limit_exceeded"
        | "RESOURCE_EXHAUSTED"
        | "429"
        | "insufficient_quota" => 429,
        "api_error" | "server_error" | "INTERNAL" | "500" => 500,
        // Responses `response.failed` codes that are the request's own fault.
        "invalid_request_error"
        | "INVALID_ARGUMENT"
        | "FAILED_PRECONDITION"
        | "400"
        | "invalid_prompt"
        | "context_length_exceeded"
        | "invalid_image"
        | "invalid_image_url"
        | "invalid_base64_image"
        | "image_too_large" => 400,
        "authentication_error" | "UNAUTHENTICATED" | "401" => 401,
        "permission_error" | "PERMISSION_DENIED" | "403" => 403,
        "not_found_error" | "NOT_FOUND" | "404" => 404,
        "timeout_error" | "DEADLINE_EXCEEDED" => 504,
        // `UNAVAILABLE`, `503`, and whatever else.
        _ => 503,
    }
}

/// Whether a canonical event carries content the client must see (RESILIENCE.md §7).
pub fn is_real(event: &StreamEvent<'_>) -> bool {
    match event {
        StreamEvent::TextDelta(text) | StreamEvent::ThinkingDelta(text) => !text.is_empty(),
        StreamEvent::RedactedThinking(_)
        | StreamEvent::ToolCallStart { .. }
        | StreamEvent::ToolCallDelta { .. } => true,
        StreamEvent::Start { .. }
        | StreamEvent::ThinkingSignature(_)
        | StreamEvent::Finish { .. }
        | StreamEvent::Usage(_) => false,
    }
}

/// One upstream stream made into one client stream: the upstream's decoder, which tells
/// real events, errors and the end, and either the client's encoder (different dialects) or
/// a relay of the upstream's own events (the same dialect; see [`crate::passthrough`]).
#[derive(Debug)]
pub struct StreamTranslator {
    decoder: StreamDecoder,
    encoder: StreamEncoder,
    /// `Some` when the upstream's events are relayed as they are instead of re-encoded.
    relay: Option<Relay>,
    /// `Some` when a broken stream may be continued on another target (RESILIENCE.md §10).
    kept: Option<Box<Kept>>,
    /// The latest cumulative usage the upstream being read reported, as it reported it
    /// (a continuation's own, without the broken attempt's): what this attempt is billed.
    usage: Option<Usage>,
    /// A real event was translated into this client stream (by any attempt: a continuation
    /// goes on from content the client has).
    content: bool,
    /// Whether this upstream's end marker alone proves an answer whole.
    trust: Trust,
}

/// What a continuation needs from the stream so far, and how a continuation joins it.
#[derive(Debug, Default)]
struct Kept {
    relayed: Relayed,
    /// The latest cumulative usage of the stream being read.
    usage: Usage,
    /// Usage of the attempts before the stream being read: added to its own.
    before: Usage,
    /// Set once a continuation took over: whitespace the client already has.
    seam: Option<Seam>,
}

impl Kept {
    /// Notes a canonical event and adjusts it for the client: a continuation's text loses
    /// what the seam holds, its usage counts the broken attempt's too.
    fn pass<'e>(&mut self, event: StreamEvent<'e>) -> StreamEvent<'e> {
        match event {
            StreamEvent::TextDelta(text) => {
                let text = match &mut self.seam {
                    Some(seam) => match text {
                        Cow::Borrowed(t) => Cow::Borrowed(seam.admit(t)),
                        Cow::Owned(t) => Cow::Owned(seam.admit(&t).to_owned()),
                    },
                    None => text,
                };
                self.relayed.text(&text);
                StreamEvent::TextDelta(text)
            }
            StreamEvent::ThinkingDelta(thinking) => {
                self.relayed.thinking();
                StreamEvent::ThinkingDelta(thinking)
            }
            StreamEvent::ThinkingSignature(signature) => {
                self.relayed.signed();
                StreamEvent::ThinkingSignature(signature)
            }
            StreamEvent::RedactedThinking(data) => {
                self.relayed.signed();
                StreamEvent::RedactedThinking(data)
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.relayed.tool_call();
                StreamEvent::ToolCallStart { index, id, name }
            }
            StreamEvent::Usage(usage) => {
                self.usage = usage;
                StreamEvent::Usage(self.before + usage)
            }
            other => other,
        }
    }
}

/// A passthrough stream: what is needed to relay an upstream event faithfully.
#[derive(Debug)]
struct Relay {
    dialect: Dialect,
    /// Written into the events that name a model.
    model: String,
    /// The upstream's own end marker (`[DONE]`, `message_stop`) went to the client.
    end_relayed: bool,
    /// Chunks that carry only usage are not relayed: the proxy asked for them
    /// (`stream_options.include_usage`), the client did not.
    strip_usage: bool,
}

/// The message a client reads when its stream was cut short.
pub const TRUNCATED_MESSAGE: &str = "the upstream stream ended before the model finished";

impl StreamTranslator {
    pub fn new(
        upstream: Dialect,
        client: ClientDialect,
        meta: &ResponseMeta<'_>,
        include_usage: bool,
    ) -> Self {
        Self {
            decoder: upstream.stream_decoder(),
            encoder: client.stream_encoder(meta, include_usage),
            relay: None,
            kept: None,
            usage: None,
            content: false,
            trust: Trust::FinishReason,
        }
    }

    /// [`StreamTranslator::new`] for a client whose parsed request is at hand: usage as it
    /// asked, and a Responses client's freeform tool calls given back as `custom_tool_call`s.
    pub fn for_request(
        upstream: Dialect,
        client: ClientDialect,
        meta: &ResponseMeta<'_>,
        request: &ChatRequest<'_>,
    ) -> Self {
        Self {
            decoder: upstream.stream_decoder(),
            encoder: client.stream_encoder_in(
                meta,
                request.stream_usage,
                ClientContext::of(request),
            ),
            relay: None,
            kept: None,
            usage: None,
            content: false,
            trust: Trust::FinishReason,
        }
    }

    /// A stream whose upstream speaks the client's own dialect: each event is relayed as the
    /// upstream wrote it, with only the `model` it names replaced by `meta.model`. The
    /// decoder still reads every event, to find the first real one, errors and the end.
    pub fn relay(client: ClientDialect, meta: &ResponseMeta<'_>) -> Self {
        let dialect = client.dialect();
        Self {
            decoder: dialect.stream_decoder(),
            encoder: client.stream_encoder(meta, true),
            relay: Some(Relay {
                dialect,
                model: meta.model.to_owned(),
                end_relayed: false,
                strip_usage: false,
            }),
            kept: None,
            usage: None,
            content: false,
            trust: Trust::FinishReason,
        }
    }

    /// A relayed OpenAI Chat stream whose usage the proxy asked for and the client did not:
    /// the chunk that carries only usage (empty `choices`) is held back from the client, which
    /// may not expect it. Other dialects always report usage; nothing changes for them.
    #[must_use]
    pub fn strip_usage_chunks(mut self) -> Self {
        if let Some(relay) = &mut self.relay {
            relay.strip_usage = relay.dialect == Dialect::OpenAi;
        }
        self
    }

    /// An upstream configured with `trust_end_marker`: its end marker proves an answer whole
    /// even without a finish reason (RESILIENCE.md §7; docs/resilience.md says when).
    #[must_use]
    pub fn trusting(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// What this stream has shown so far: content in the client stream, a finish reason in
    /// the upstream being read.
    pub fn seen(&self) -> Seen {
        self.decoder.seen(self.content)
    }

    /// How the stream ends if the relay stops reading here (`switchyard_core::ending`).
    pub fn ending(&self, exit: Exit) -> Ending {
        ending::ending(self.seen(), exit, self.trust)
    }

    /// The latest usage the upstream being read reported, if it reported any: cumulative
    /// for this attempt alone (a continuation's, not the broken stream's before it).
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Keeps what a continuation needs from here on: the text relayed per block, the usage,
    /// and (for a relayed stream) the client encoder's state, fed the same events with its
    /// bytes thrown away, so a continuation can be encoded as if it had written the stream.
    pub fn keep_for_continuation(&mut self) {
        self.kept.get_or_insert_with(Box::default);
    }

    /// The answer relayed so far, when it is kept.
    pub fn relayed(&self) -> Option<&Relayed> {
        self.kept.as_deref().map(|k| &k.relayed)
    }

    /// A continuation on an upstream of `upstream`'s dialect takes over this client stream:
    /// its events are decoded afresh and encoded by this stream's encoder (the second
    /// `message_start` or first chunk's preamble is dropped there, block indices go on, ids
    /// stay), its text joined by `seam`, its usage added to what was used so far.
    pub fn take_over(&mut self, upstream: Dialect, seam: Seam) {
        self.decoder = upstream.stream_decoder();
        if self.relay.take().is_some() {
            self.encoder.adopt_followed();
        }
        let kept = self.kept.get_or_insert_with(Box::default);
        kept.before += kept.usage;
        kept.usage = Usage::default();
        kept.seam = Some(seam);
        self.usage = None;
    }

    /// Translates (or relays) one upstream event, appending client bytes to `out`. On error
    /// nothing was appended; see [`StreamDecoder::decode`] for which errors end the stream.
    pub fn translate(
        &mut self,
        event: &SseEvent<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Translated, ProviderError> {
        let (mut events, mut real) = (0, 0);
        let reported = &mut self.usage;
        if let Some(relay) = &mut self.relay {
            let (kept, encoder) = (&mut self.kept, &mut self.encoder);
            let mut unused = Vec::new();
            let mut usage_events = 0;
            let decoded = self.decoder.decode(event, &mut |canonical| {
                events += 1;
                real += usize::from(is_real(&canonical));
                if let StreamEvent::Usage(usage) = canonical {
                    *reported = Some(usage);
                    usage_events += 1;
                }
                if let Some(kept) = kept {
                    encoder.encode(&kept.pass(canonical), &mut unused);
                }
            });
            let progress = match decoded {
                Ok(progress) => progress,
                // An event this crate cannot read but that is well-formed JSON is news from
                // a newer API (a new block type, say): the client may know it.
                Err(ProviderError::MalformedEvent { .. })
                    if serde_json::from_str::<&serde_json::value::RawValue>(event.data).is_ok() =>
                {
                    Progress::Continue
                }
                Err(error) => return Err(error),
            };
            // The encoder follows the client's blocks: decoding has no event for a block's end.
            if self.kept.is_some()
                && relay.dialect == Dialect::Anthropic
                && event.event == Some("content_block_stop")
            {
                self.encoder.close_block(&mut unused);
            }
            if self.kept.is_some() && relay.dialect == Dialect::Responses {
                self.encoder.follow(event.data);
            }
            self.content |= real > 0;
            if progress == Progress::End {
                // The upstream's end marker reaches the client only once the one decision
                // accepts the answer as whole; otherwise it is held (and never sent).
                let seen = self.decoder.seen(self.content);
                let accepted =
                    ending::ending(seen, Exit::EndMarker, self.trust) == Ending::Complete;
                if accepted {
                    relay.write(&mut self.encoder, event, self.decoder.model_at(), out);
                    relay.end_relayed = true;
                }
            } else if !(relay.strip_usage && events > 0 && events == usage_events) {
                relay.write(&mut self.encoder, event, self.decoder.model_at(), out);
            }
            return Ok(Translated { events, real, progress });
        }
        let (kept, encoder) = (&mut self.kept, &mut self.encoder);
        let progress = self.decoder.decode(event, &mut |canonical| {
            if let StreamEvent::Usage(usage) = canonical {
                *reported = Some(usage);
            }
            let canonical = match kept {
                Some(kept) => kept.pass(canonical),
                None => canonical,
            };
            // Text the seam swallowed whole is no event for the client.
            if matches!(&canonical, StreamEvent::TextDelta(t) if t.is_empty()) {
                return;
            }
            events += 1;
            real += usize::from(is_real(&canonical));
            encoder.encode(&canonical, out);
        })?;
        self.content |= real > 0;
        Ok(Translated { events, real, progress })
    }

    pub fn status(&self) -> StreamStatus {
        self.decoder.status()
    }

    /// The upstream is gone (end marker or end of body): appends the proper end if the
    /// one decision finds the stream complete, the terminal error event if it does not.
    pub fn end(&mut self, out: &mut Vec<u8>) -> StreamEnd {
        if self.ending(self.status().exit_at_end()) == Ending::Complete {
            self.finish(out);
            StreamEnd::Complete
        } else {
            self.encoder.fail(ErrorKind::Internal, TRUNCATED_MESSAGE, out);
            StreamEnd::Truncated
        }
    }

    /// Appends the dialect's proper end (the upstream's held end marker, or the encoder's):
    /// only for a stream [`StreamTranslator::ending`] found complete.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match &mut self.relay {
            Some(relay) => relay.finish(&mut self.encoder, out),
            None => self.encoder.finish(out),
        }
    }

    /// Ends the client stream with an error (stalled upstream, upstream error event, cut
    /// connection, oversized event).
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        self.encoder.fail(kind, message, out);
    }

    pub fn keep_alive(&self, out: &mut Vec<u8>) {
        self.encoder.keep_alive(out);
    }
}

/// [`StreamTranslator::seen`] for a borrow that holds the relay.
impl Relay {
    /// The event as SSE, its model replaced (where the decoder read it, `model_at`, when it
    /// says). Multi-line data stays multi-line. A Gemini client's encoder frames it (SSE or
    /// one element of the array).
    fn write(
        &self,
        encoder: &mut StreamEncoder,
        event: &SseEvent<'_>,
        model_at: Option<std::ops::Range<usize>>,
        out: &mut Vec<u8>,
    ) {
        let data = crate::passthrough::rewrite_event_model(
            self.dialect,
            event.data,
            &self.model,
            model_at,
        );
        if let StreamEncoder::Gemini(encoder) = encoder {
            encoder.relay(&data, out);
            return;
        }
        if let Some(name) = event.event {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'\n');
        }
        for line in data.split('\n') {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
    }

    /// A complete stream whose upstream left out its end marker gets the dialect's own.
    fn finish(&mut self, encoder: &mut StreamEncoder, out: &mut Vec<u8>) {
        if let StreamEncoder::Gemini(encoder) = encoder {
            // No end marker: only an array's bracket to close.
            encoder.close(out);
            return;
        }
        if std::mem::replace(&mut self.end_relayed, true) {
            return;
        }
        match self.dialect {
            Dialect::OpenAi => out.extend_from_slice(b"data: [DONE]\n\n"),
            Dialect::Anthropic => {
                out.extend_from_slice(
                    b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
                );
            }
            // `response.completed` is both the finish and the end.
            Dialect::Gemini | Dialect::Responses => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: ResponseMeta<'static> = ResponseMeta { model: "m", created: 0 };

    #[test]
    fn a_done_marker_without_a_finish_reason_ends_the_stream_with_an_error() {
        let mut translator =
            StreamTranslator::new(Dialect::OpenAi, ClientDialect::OpenAi, &META, false);
        let mut out = Vec::new();
        let done = SseEvent { event: None, data: "[DONE]", id: None };
        let translated = translator.translate(&done, &mut out).unwrap();
        assert_eq!(translated, Translated { events: 0, real: 0, progress: Progress::End });
        assert_eq!(translator.end(&mut out), StreamEnd::Truncated);
        assert!(!String::from_utf8(out).unwrap().contains("[DONE]"));
    }

    #[test]
    fn nothing_is_written_after_a_terminal_error() {
        for client in [ClientDialect::OpenAi, ClientDialect::Anthropic, ClientDialect::Responses] {
            let mut translator = StreamTranslator::new(Dialect::Gemini, client, &META, true);
            let mut out = Vec::new();
            translator.fail(ErrorKind::Timeout, "stalled", &mut out);
            let after_error = out.len();
            assert!(after_error > 0);
            translator.end(&mut out);
            translator.fail(ErrorKind::Internal, "again", &mut out);
            assert_eq!(out.len(), after_error, "{client:?} wrote past its terminal error");
        }
    }

    #[test]
    fn a_malformed_event_produces_no_client_bytes() {
        for upstream in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini, Dialect::Responses] {
            let mut translator =
                StreamTranslator::new(upstream, ClientDialect::Anthropic, &META, true);
            let mut out = Vec::new();
            let garbage = SseEvent { event: None, data: "{\"choices\": [", id: None };
            assert!(matches!(
                translator.translate(&garbage, &mut out),
                Err(ProviderError::MalformedEvent { .. })
            ));
            assert!(out.is_empty(), "{upstream} leaked bytes for a malformed event");
        }
    }
}

#[cfg(test)]
mod relay_tests {
    use super::*;

    const META: ResponseMeta<'static> = ResponseMeta { model: "an/claude-x", created: 0 };

    fn event<'a>(name: &'a str, data: &'a str) -> SseEvent<'a> {
        SseEvent { event: Some(name), data, id: None }
    }

    #[test]
    fn a_relayed_stream_keeps_every_event_and_renames_only_the_model() {
        let mut relay = StreamTranslator::relay(ClientDialect::Anthropic, &META);
        let mut out = Vec::new();
        let start = r#"{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":0},"future_field":1}}"#;
        let t = relay.translate(&event("message_start", start), &mut out).unwrap();
        assert_eq!(t.real, 0, "message_start is no real event");
        let t = relay.translate(&event("ping", r#"{"type":"ping"}"#), &mut out).unwrap();
        assert_eq!(t.real, 0, "a ping is no real event");
        let block =
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
        relay.translate(&event("content_block_start", block), &mut out).unwrap();
        let delta =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#;
        let t = relay.translate(&event("content_block_delta", delta), &mut out).unwrap();
        assert_eq!(t.real, 1);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "event: message_start\ndata: {}\n\nevent: ping\ndata: {{\"type\":\"ping\"}}\n\nevent: content_block_start\ndata: {block}\n\nevent: content_block_delta\ndata: {delta}\n\n",
                start.replace(r#""model":"claude-x""#, r#""model":"an/claude-x""#)
            )
        );
    }

    #[test]
    fn a_relayed_chat_chunk_has_its_model_rewritten_where_the_decoder_read_it() {
        // The oracle is the rewrite that parses the event itself (`model_at` = None); the relay
        // now rewrites where its decoder read `model`, and must write the very same bytes.
        let chunks = [
            r#"{"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"say \"model\":\"gpt-x\""}}],"model":"gpt-x"}"#,
            r#"{"model":"gpt\u002dx","choices":[{"index":0,"delta":{"content":"escaped"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"}}],"model":"gpt-x","model":"gpt-y"}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"b"}}]}"#,
            r#" {"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]} "#,
            "[DONE]",
        ];
        let mut relay = StreamTranslator::relay(ClientDialect::OpenAi, &META);
        for data in chunks {
            let mut out = Vec::new();
            let event = SseEvent { event: None, data, id: None };
            let _ = relay.translate(&event, &mut out);
            let oracle =
                crate::passthrough::rewrite_event_model(Dialect::OpenAi, data, META.model, None);
            let expected =
                if out.is_empty() { String::new() } else { format!("data: {oracle}\n\n") };
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{data}");
        }
        let first = chunks[0];
        let span = {
            let mut decoder = Dialect::OpenAi.stream_decoder();
            decoder.decode(&SseEvent { event: None, data: first, id: None }, &mut |_| {}).unwrap();
            decoder.model_at().expect("read where it is written")
        };
        assert_eq!(&first[span], r#""gpt-x""#);
    }

    #[test]
    fn a_relayed_event_of_an_unknown_shape_still_reaches_the_client() {
        let mut relay = StreamTranslator::relay(ClientDialect::Anthropic, &META);
        let mut out = Vec::new();
        let novel =
            r#"{"type":"content_block_start","index":"x","content_block":{"type":"hologram"}}"#;
        relay.translate(&event("content_block_start", novel), &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("hologram"));
        let mut out = Vec::new();
        let broken = r#"{"type":"content_block_delta","#;
        assert!(relay.translate(&event("content_block_delta", broken), &mut out).is_err());
        assert!(out.is_empty(), "broken JSON never reaches the client");
    }

    #[test]
    fn a_relayed_responses_stream_renames_the_model_and_counts_only_content_as_real() {
        let meta = ResponseMeta { model: "oa/gpt-5", created: 0 };
        let mut relay = StreamTranslator::relay(ClientDialect::Responses, &meta);
        let mut out = Vec::new();
        let created = r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"gpt-5","output":[],"future":true}}"#;
        let t = relay.translate(&event("response.created", created), &mut out).unwrap();
        assert_eq!(t.real, 0, "response.created is no real event");
        let delta = r#"{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"\"model\""}"#;
        let t = relay.translate(&event("response.output_text.delta", delta), &mut out).unwrap();
        assert_eq!(t.real, 1);
        let done = r#"{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","model":"gpt-5","status":"completed"}}"#;
        let t = relay.translate(&event("response.completed", done), &mut out).unwrap();
        assert_eq!(t.progress, Progress::End);
        assert_eq!(relay.end(&mut out), StreamEnd::Complete);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches(r#""model":"oa/gpt-5""#).count(), 2, "{text}");
        assert!(text.contains(delta), "a delta passes byte for byte");
        assert!(text.ends_with("\n\n") && !text.contains("[DONE]"), "{text}");
    }

    #[test]
    fn a_relayed_stream_complete_without_its_end_marker_gets_one() {
        let meta = ResponseMeta { model: "oa/gpt", created: 0 };
        let mut relay = StreamTranslator::relay(ClientDialect::OpenAi, &meta);
        let mut out = Vec::new();
        let chunk = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}"#;
        relay.translate(&SseEvent { event: None, data: chunk, id: None }, &mut out).unwrap();
        assert_eq!(relay.end(&mut out), StreamEnd::Complete);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""model":"oa/gpt""#), "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }

    const CHAT_TEXT: &str = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}"#;
    const CHAT_USAGE: &str = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4}}}"#;

    fn relayed(relay: StreamTranslator) -> (String, Option<Usage>) {
        let mut relay = relay;
        let mut out = Vec::new();
        for data in [CHAT_TEXT, CHAT_USAGE, "[DONE]"] {
            relay.translate(&SseEvent { event: None, data, id: None }, &mut out).unwrap();
        }
        relay.end(&mut out);
        (String::from_utf8(out).unwrap(), relay.usage())
    }

    #[test]
    fn a_usage_chunk_the_proxy_asked_for_is_held_back_and_still_counted() {
        let meta = ResponseMeta { model: "oa/gpt", created: 0 };
        let expected = Usage { uncached_input: 5, cache_read: 4, output: 2, ..Usage::default() };
        let (text, usage) =
            relayed(StreamTranslator::relay(ClientDialect::OpenAi, &meta).strip_usage_chunks());
        assert!(!text.contains("\"usage\""), "{text}");
        assert!(text.contains("\"content\":\"x\"") && text.ends_with("data: [DONE]\n\n"), "{text}");
        assert_eq!(usage, Some(expected));
        // A client that asked for usage itself gets the chunk.
        let (text, usage) = relayed(StreamTranslator::relay(ClientDialect::OpenAi, &meta));
        assert!(text.contains("\"prompt_tokens\":9"), "{text}");
        assert_eq!(usage, Some(expected));
    }

    #[test]
    fn a_translated_stream_reports_its_upstreams_usage() {
        let mut translator =
            StreamTranslator::new(Dialect::OpenAi, ClientDialect::Anthropic, &META, false);
        let mut out = Vec::new();
        assert_eq!(translator.usage(), None, "nothing reported yet");
        for data in [CHAT_TEXT, CHAT_USAGE] {
            translator.translate(&SseEvent { event: None, data, id: None }, &mut out).unwrap();
        }
        assert_eq!(translator.usage().map(|u| u.total()), Some(11));
    }
}

#[cfg(test)]
mod takeover_tests {
    use switchyard_core::continuation::{Continuation, RequestShape, decide};

    use super::*;

    #[test]
    fn a_relayed_anthropic_block_the_upstream_closed_is_not_written_to_again() {
        let meta = ResponseMeta { model: "an/c", created: 0 };
        let mut t = StreamTranslator::relay(ClientDialect::Anthropic, &meta);
        t.keep_for_continuation();
        let mut out = Vec::new();
        let first = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
            ),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ];
        for (name, data) in first {
            t.translate(&SseEvent { event: Some(name), data, id: None }, &mut out).unwrap();
        }
        let plan =
            decide(t.relayed().unwrap(), RequestShape::default(), Continuation::Anthropic, false)
                .unwrap();
        t.take_over(Dialect::Anthropic, plan.seam);
        let mut after = Vec::new();
        let second = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":6,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#,
            ),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ];
        for (name, data) in second {
            t.translate(&SseEvent { event: Some(name), data, id: None }, &mut after).unwrap();
        }
        assert_eq!(t.end(&mut after), StreamEnd::Complete);
        let text = String::from_utf8(after).unwrap();
        assert!(!text.contains("message_start") && !text.contains("msg_2"), "{text}");
        assert!(text.contains(r#""index":1"#) && !text.contains(r#""index":0"#), "{text}");
        assert!(
            text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
            "{text}"
        );
    }

    const META: ResponseMeta<'static> = ResponseMeta { model: "oa/m", created: 0 };

    fn chunk(data: &str) -> SseEvent<'_> {
        SseEvent { event: None, data, id: None }
    }

    #[test]
    fn a_continuation_goes_on_in_the_same_message_with_the_seam_joined_and_usage_summed() {
        let mut t = StreamTranslator::new(Dialect::OpenAi, ClientDialect::Anthropic, &META, true);
        t.keep_for_continuation();
        let mut out = Vec::new();
        let first = [
            r#"{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello "}}]}"#,
            r#"{"id":"c1","model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}"#,
        ];
        for data in first {
            t.translate(&chunk(data), &mut out).unwrap();
        }
        let relayed = t.relayed().unwrap().clone();
        let plan =
            decide(&relayed, RequestShape::default(), Continuation::Anthropic, false).unwrap();
        assert_eq!(plan.prefill, "Hello");
        t.take_over(Dialect::OpenAi, plan.seam);
        let second = [
            r#"{"id":"c2","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":" world"}}]}"#,
            r#"{"id":"c2","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1}}"#,
            "[DONE]",
        ];
        for data in second {
            t.translate(&chunk(data), &mut out).unwrap();
        }
        assert_eq!(t.end(&mut out), StreamEnd::Complete);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("event: message_start").count(), 1, "{text}");
        assert_eq!(text.matches("event: content_block_start").count(), 1, "one text block: {text}");
        let deltas: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(deltas, "Hello world", "the seam's space is sent once: {text}");
        assert!(text.contains(r#""output_tokens":3"#), "usage of both attempts: {text}");
    }
}
