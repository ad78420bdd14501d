//! Streams: decoding an upstream's events into canonical [`StreamEvent`]s, encoding those as
//! the client's SSE, and telling a complete stream from a truncated one (RESILIENCE.md §7).
//!
//! Invariants:
//! - A malformed upstream event produces no canonical event and no client bytes: decoders
//!   parse the whole event before emitting anything.
//! - A stream is complete when the upstream sent a finish reason or its explicit end marker
//!   (`[DONE]`, `message_stop`). Anything else that ends is truncated, and the client gets a
//!   terminal error event, never its dialect's normal end.
//! - Once an encoder has written its end or its error, it writes nothing more.

use crate::chat::StreamEvent;
use crate::dialect::{ClientDialect, Dialect, ResponseMeta};
use crate::error::{ErrorKind, ProviderError};
use crate::sse::SseEvent;
use crate::{anthropic, gemini, openai};

/// Whether the upstream has said it is finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStatus {
    /// A finish (stop) reason arrived.
    pub finish_seen: bool,
    /// The dialect's end marker arrived (`[DONE]`, `message_stop`; Gemini has none).
    pub end_seen: bool,
}

impl StreamStatus {
    /// RESILIENCE.md §7: a finish reason without `[DONE]` is complete, and so is an explicit
    /// end marker; a stream with neither was cut short.
    pub fn is_complete(self) -> bool {
        self.finish_seen || self.end_seen
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
        }
    }

    pub fn status(&self) -> StreamStatus {
        match self {
            Self::OpenAi(decoder) => decoder.status(),
            Self::Anthropic(decoder) => decoder.status(),
            Self::Gemini(decoder) => decoder.status(),
        }
    }
}

/// The encoder of one client stream; see each dialect's `StreamEncoder`.
#[derive(Debug)]
pub enum StreamEncoder {
    OpenAi(openai::StreamEncoder),
    Anthropic(anthropic::StreamEncoder),
}

impl StreamEncoder {
    /// Appends the client's bytes for one canonical event.
    pub fn encode(&mut self, event: &StreamEvent<'_>, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(encoder) => encoder.encode(event, out),
            Self::Anthropic(encoder) => encoder.encode(event, out),
        }
    }

    /// Appends the dialect's proper end (`[DONE]`, `message_stop`). Only for a complete
    /// upstream stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(encoder) => encoder.finish(out),
            Self::Anthropic(encoder) => encoder.finish(out),
        }
    }

    /// Appends the dialect's terminal error event, for a stream that broke after bytes were
    /// sent. Nothing follows it.
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(encoder) => encoder.fail(kind, message, out),
            Self::Anthropic(encoder) => encoder.fail(kind, message, out),
        }
    }

    /// Appends something the client ignores but that keeps its connection warm.
    pub fn keep_alive(&self, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi(_) => openai::StreamEncoder::keep_alive(out),
            Self::Anthropic(_) => anthropic::StreamEncoder::keep_alive(out),
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
    /// Canonical events produced; 0 means the upstream event was a keep-alive in disguise
    /// (an Anthropic `ping`, an empty chunk) and must not count as the first real event.
    pub events: usize,
    pub progress: Progress,
}

/// One upstream stream translated into one client stream: the decoder and encoder glued
/// together, which is all the router's streaming loop needs besides the SSE decoder.
#[derive(Debug)]
pub struct StreamTranslator {
    decoder: StreamDecoder,
    encoder: StreamEncoder,
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
        }
    }

    /// Translates one upstream event, appending client bytes to `out`. On error nothing was
    /// appended; see [`StreamDecoder::decode`] for which errors end the stream.
    pub fn translate(
        &mut self,
        event: &SseEvent<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Translated, ProviderError> {
        let mut events = 0;
        let encoder = &mut self.encoder;
        let progress = self.decoder.decode(event, &mut |canonical| {
            events += 1;
            encoder.encode(&canonical, out);
        })?;
        Ok(Translated { events, progress })
    }

    pub fn status(&self) -> StreamStatus {
        self.decoder.status()
    }

    /// The upstream is gone (end marker or end of body): appends the proper end if the
    /// stream is complete, the terminal error event if it is not.
    pub fn end(&mut self, out: &mut Vec<u8>) -> StreamEnd {
        if self.decoder.status().is_complete() {
            self.encoder.finish(out);
            StreamEnd::Complete
        } else {
            self.encoder.fail(ErrorKind::Internal, TRUNCATED_MESSAGE, out);
            StreamEnd::Truncated
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

#[cfg(test)]
mod tests {
    use super::*;

    const META: ResponseMeta<'static> = ResponseMeta { model: "m", created: 0 };

    #[test]
    fn a_finish_reason_or_an_end_marker_makes_a_stream_complete() {
        let status = |finish_seen, end_seen| StreamStatus { finish_seen, end_seen }.is_complete();
        assert!(status(true, false), "a finish reason without [DONE] is complete");
        assert!(status(false, true), "an explicit end marker is complete");
        assert!(status(true, true));
        assert!(!status(false, false), "neither is a truncated stream");
    }

    #[test]
    fn a_done_marker_alone_ends_the_stream_properly() {
        let mut translator =
            StreamTranslator::new(Dialect::OpenAi, ClientDialect::OpenAi, &META, false);
        let mut out = Vec::new();
        let done = SseEvent { event: None, data: "[DONE]", id: None };
        let translated = translator.translate(&done, &mut out).unwrap();
        assert_eq!(translated, Translated { events: 0, progress: Progress::End });
        assert_eq!(translator.end(&mut out), StreamEnd::Complete);
        assert!(out.ends_with(b"data: [DONE]\n\n"));
    }

    #[test]
    fn nothing_is_written_after_a_terminal_error() {
        for client in [ClientDialect::OpenAi, ClientDialect::Anthropic] {
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
        for upstream in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini] {
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
