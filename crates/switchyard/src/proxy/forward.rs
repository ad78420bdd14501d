//! Relaying a streamed answer (RESILIENCE.md §7).
//!
//! The client's response is held back until the upstream's first real event: keep-alives do
//! not count, malformed events are dropped. Until then any failure may still fall back, because
//! the client has seen nothing. From the first byte on, the stream is relayed by a task of its
//! own as chunks arrive, with an idle deadline between events.
//!
//! Every exit of the reading (end marker, end of body, stall, cut, error event, client gone),
//! before the first byte and after, asks the one decision of `switchyard_core::ending`: an
//! answer is complete only after a finish reason, so the client gets its dialect's proper end
//! only then (an upstream end marker is held until the decision accepts it); an answer with no
//! content falls back; an answer with content and no finish is continued or ends with a
//! terminal error event, never with a "successful" truncated answer. The task settles the
//! attempt on the registry when the stream is over, including when the client goes away.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use switchyard_core::Clock;
use switchyard_core::ending::{Ending, Exit, Trust, ending};
use switchyard_core::outcome::{
    BodyHint, ClassifyPolicy, Outcome, StreamFault, TimeoutPhase, Upstream, classify,
};
use switchyard_core::resilience::Attempt;
use switchyard_providers::dialect::Dialect;
use switchyard_providers::error::{ErrorKind, ProviderError, UpstreamError};
use switchyard_providers::executor::SendFailure;
use switchyard_providers::sse::{SseDecoder, SseItem};
use switchyard_providers::stream::{Progress, StreamTranslator, TRUNCATED_MESSAGE, is_real};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout_at};

pub(crate) type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, SendFailure>> + Send>>;

/// Chunks for the client's response body.
pub(crate) type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>>;

/// The upstream stream, read up to its first real event.
pub(crate) enum Opened {
    /// Relaying; the body starts with the first event.
    Relaying(BodyStream),
    /// Failed before the client saw anything: the attempt may fall back. The attempt comes
    /// back unsettled, for the caller to classify and record.
    Failed(Failure, Box<Settle>),
}

/// How a stream failed before its first byte, as the classifier's input.
pub(crate) enum Failure {
    Upstream(Upstream<'static>),
    /// The upstream reported an error inside a 2xx stream (Anthropic `overloaded_error`, ...).
    ErrorEvent(UpstreamError),
}

impl Failure {
    /// What the classifier is told: an error event stands for the status its type names
    /// (RESILIENCE.md §2), as if the upstream had answered with it.
    pub(crate) fn upstream<'a>(&'a self, no_headers: &'a http::HeaderMap) -> Upstream<'a> {
        match self {
            Self::Upstream(upstream) => *upstream,
            Self::ErrorEvent(report) => Upstream::Response {
                status: switchyard_providers::stream::error_status(report),
                headers: no_headers,
                body: report.hint,
            },
        }
    }
}

/// Reads `chunks` until the first real event or `first_event` passes. Whatever stops the
/// reading first is put to the one decision (`switchyard_core::ending`): an answer with nothing
/// in it fails here and may fall back; a complete one, or one with content, is relayed.
pub(crate) async fn open(
    chunks: Chunks,
    mut translator: StreamTranslator,
    first_event: Instant,
    idle: Duration,
    settle: Settle,
) -> Opened {
    let mut chunks = chunks;
    let mut sse = SseDecoder::default();
    let mut out = Vec::new();
    let mut settle = settle;
    // One timer for the whole wait, not one per chunk read.
    let deadline = tokio::time::sleep_until(first_event);
    let mut deadline = std::pin::pin!(deadline);
    let stop = loop {
        match drain(&mut sse, &mut translator, &mut out, &mut settle.meter) {
            Drained::Events => break None,
            Drained::Nothing => {}
            Drained::Stop(stop) => break Some(stop),
        }
        let next = tokio::select! {
            biased;
            next = chunks.next() => next,
            () = &mut deadline => break Some(Stop::Stalled),
        };
        match next {
            Some(Ok(chunk)) => sse.push(&chunk),
            Some(Err(_)) => break Some(Stop::Cut),
            None => break Some(end_of_body(&mut sse, &mut translator, &mut out, &mut settle)),
        }
    };
    if let Some(stop) = &stop
        && translator.ending(stop.exit()) == Ending::Unanswered
    {
        let failure = match stop {
            Stop::Stalled => Failure::Upstream(Upstream::Timeout(TimeoutPhase::FirstEvent)),
            Stop::Cut => Failure::Upstream(Upstream::Stream(StreamFault::Cut)),
            Stop::EndMarker | Stop::Eof => {
                Failure::Upstream(Upstream::Stream(StreamFault::Truncated))
            }
            Stop::ErrorEvent(error) => Failure::ErrorEvent(error.clone()),
        };
        settle.meter.void();
        return Opened::Failed(failure, Box::new(settle));
    }
    // The upstream answers: a half-open probe settles now, not when a long stream ends.
    let now = settle.clock.now();
    let empty = http::HeaderMap::new();
    let answered = Upstream::Response { status: 200, headers: &empty, body: BodyHint::None };
    settle.attempt.answered(&classify(&Outcome::new(answered), &settle.policy, now), now);
    // The events read so far open the body itself, so the connection writes them with the
    // answer's head, in one write, without waiting for the relay's task to run and hand them
    // over. The relay sends the rest.
    let first = Bytes::from(std::mem::take(&mut out));
    if let Some(tap) = &mut settle.tap {
        tap.observe(&first);
    }
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    tokio::spawn(relay(Relay { chunks, sse, translator, out, stop, idle, tx }, settle));
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    });
    let first = (!first.is_empty()).then_some(Ok(first));
    Opened::Relaying(Box::pin(futures_util::stream::iter(first).chain(rest)))
}

/// Reads a continuation's stream (RESILIENCE.md §10) up to its first real event, so that it
/// takes over the client's stream only once it answers: until then it may still fail and
/// another target be asked. The chunks read are given back in front of the rest, for the
/// relay's own decoder to read again. Where the reading stops first, the one decision
/// (`switchyard_core::ending`) says whether the continuation answered (a finish reason answers
/// too: a continuation may have nothing left to add). `Err` is the failure, as the
/// classifier's input.
pub(crate) async fn first_real_event(
    mut chunks: Chunks,
    dialect: Dialect,
    trust: Trust,
    until: Instant,
) -> Result<Chunks, Failure> {
    let mut decoder = dialect.stream_decoder();
    let mut sse = SseDecoder::default();
    let mut read = Vec::new();
    let mut real = false;
    let mut closed = false;
    let exit = loop {
        let mut stop = None;
        while let Some(item) = sse.next_item() {
            let Ok(SseItem::Event(event)) = item else { continue };
            let decoded = decoder.decode(&event, &mut |e| real |= is_real(&e));
            match decoded {
                Ok(Progress::End) => stop = Some(Exit::EndMarker),
                Err(ProviderError::UpstreamStream { error, .. }) => {
                    stop = Some(Exit::ErrorEvent);
                    if !decoder.seen(real).finish && !real {
                        return Err(Failure::ErrorEvent(error));
                    }
                }
                Ok(Progress::Continue) | Err(_) => {}
            }
            if real || decoder.seen(real).finish || stop.is_some() {
                break;
            }
        }
        if let Some(exit) = stop {
            break exit;
        }
        if real || decoder.seen(real).finish {
            let read = futures_util::stream::iter(read.into_iter().map(Ok));
            return Ok(Box::pin(read.chain(chunks)));
        }
        if closed {
            break Exit::Eof;
        }
        match timeout_at(until, chunks.next()).await {
            Err(_) => break Exit::Stalled,
            Ok(Some(Ok(chunk))) => {
                sse.push(&chunk);
                read.push(chunk);
            }
            Ok(Some(Err(_))) => break Exit::Cut,
            Ok(None) => {
                sse.close();
                closed = true;
            }
        }
    };
    match ending(decoder.seen(real), exit, trust) {
        Ending::Complete | Ending::Truncated => {
            let read = futures_util::stream::iter(read.into_iter().map(Ok));
            Ok(Box::pin(read.chain(chunks)))
        }
        Ending::Unanswered | Ending::ClientGone => Err(Failure::Upstream(match exit {
            Exit::Stalled => Upstream::Timeout(TimeoutPhase::FirstEvent),
            Exit::Cut => Upstream::Stream(StreamFault::Cut),
            _ => Upstream::Stream(StreamFault::Truncated),
        })),
    }
}

/// Where reading an upstream stopped, with what the client's terminal event needs.
#[derive(Clone, Debug)]
pub(crate) enum Stop {
    EndMarker,
    Eof,
    Stalled,
    Cut,
    ErrorEvent(UpstreamError),
}

impl Stop {
    pub(crate) fn exit(&self) -> Exit {
        match self {
            Self::EndMarker => Exit::EndMarker,
            Self::Eof => Exit::Eof,
            Self::Stalled => Exit::Stalled,
            Self::Cut => Exit::Cut,
            Self::ErrorEvent(_) => Exit::ErrorEvent,
        }
    }

    /// The client's terminal error event for an answer this stop truncated.
    fn terminal(&self) -> (ErrorKind, &str) {
        match self {
            Self::EndMarker | Self::Eof => (ErrorKind::Internal, TRUNCATED_MESSAGE),
            Self::Stalled => (ErrorKind::Timeout, "the upstream stalled mid-stream"),
            Self::Cut => (ErrorKind::Internal, "the upstream connection broke mid-stream"),
            Self::ErrorEvent(error) => (ErrorKind::Overloaded, &error.message),
        }
    }
}

/// The body ended: what its last buffered events said.
fn end_of_body(
    sse: &mut SseDecoder,
    translator: &mut StreamTranslator,
    out: &mut Vec<u8>,
    settle: &mut Settle,
) -> Stop {
    sse.close();
    match drain(sse, translator, out, &mut settle.meter) {
        Drained::Stop(stop) => stop,
        Drained::Events | Drained::Nothing if translator.status().end_seen => Stop::EndMarker,
        Drained::Events | Drained::Nothing => Stop::Eof,
    }
}

/// What the relay needs to settle the attempt when the stream is over.
pub(crate) struct Settle {
    pub attempt: Attempt,
    pub clock: Arc<dyn Clock>,
    pub policy: ClassifyPolicy,
    /// Told how the stream ended, once it has (the request log waits for it).
    pub ended: Option<oneshot::Sender<StreamOutcome>>,
    /// Reads a Responses client's stream, to keep the conversation once it is complete.
    pub tap: Option<super::conversations::Tap>,
    /// Finds another target to finish the answer when the stream breaks mid-answer
    /// (RESILIENCE.md §10); `None` when nothing could continue it.
    pub rescue: Option<oneshot::Receiver<super::continuation::Rescue>>,
    /// Told of a break after content before the client reads the stream's end, and of a
    /// whole answer (RESILIENCE.md §11).
    pub watch: Option<super::sessions::Watch>,
    /// Takes the usage the stream reports as it comes (the stream being read: a
    /// continuation brings its own).
    pub meter: super::tally::Meter,
}

/// How a relayed stream ended, as the request log and metrics record it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamOutcome {
    /// The upstream finished and the client got the proper end.
    Complete,
    /// Cut, stalled, truncated or an upstream error after the first byte: the client got a
    /// terminal error event.
    Broken,
    /// The client went away first.
    ClientGone,
}

impl StreamOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Broken => "broken",
            Self::ClientGone => "client_gone",
        }
    }
}

enum Drained {
    Nothing,
    Events,
    /// The end marker or an error event: nothing after it is read.
    Stop(Stop),
}

/// Translates every complete event buffered in `sse` into `out`, and meters the usage the
/// upstream reported on the way.
fn drain(
    sse: &mut SseDecoder,
    translator: &mut StreamTranslator,
    out: &mut Vec<u8>,
    meter: &mut super::tally::Meter,
) -> Drained {
    let drained = drain_events(sse, translator, out);
    meter.report(translator.usage());
    drained
}

fn drain_events(
    sse: &mut SseDecoder,
    translator: &mut StreamTranslator,
    out: &mut Vec<u8>,
) -> Drained {
    let mut drained = Drained::Nothing;
    while let Some(item) = sse.next_item() {
        match item {
            Ok(SseItem::KeepAlive) => {}
            Ok(SseItem::Event(event)) => match translator.translate(&event, out) {
                Ok(t) if t.progress == Progress::End => return Drained::Stop(Stop::EndMarker),
                // Only content counts: `message_start`, pings, role-only and usage-only
                // chunks are held back with everything before the first real event.
                Ok(t) if t.real > 0 => drained = Drained::Events,
                Ok(_) => {}
                Err(ProviderError::UpstreamStream { error, .. }) => {
                    return Drained::Stop(Stop::ErrorEvent(error));
                }
                Err(error) => tracing::warn!(%error, "dropped an upstream stream event"),
            },
            Err(error) => tracing::warn!(%error, "dropped an upstream stream event"),
        }
    }
    drained
}

/// A stream past its first event.
struct Relay {
    chunks: Chunks,
    sse: SseDecoder,
    translator: StreamTranslator,
    /// Client bytes not sent yet.
    out: Vec<u8>,
    /// Where reading stopped, once it has: the next turn of the loop asks how the stream ended.
    stop: Option<Stop>,
    idle: Duration,
    tx: mpsc::Sender<Bytes>,
}

/// Relays the rest of the stream, then settles the attempt.
///
/// Every way the reading can stop (end marker, end of body, stall, cut, error event) becomes
/// a [`Stop`], and the one decision (`switchyard_core::ending`) says what it means: complete
/// (the proper end), truncated (a continuation, else the terminal error event) or, for a
/// continuation that has shown nothing yet, the same. The idle deadline runs from the last
/// real event, not the last byte: an upstream that only sends keep-alives (pings, comments,
/// usage) cannot hold the client (RESILIENCE.md §7). A client that leaves is noticed at once,
/// even while the upstream sends nothing.
async fn relay(mut r: Relay, mut settle: Settle) {
    let mut idle_until = Instant::now() + r.idle;
    let mut tap = settle.tap.take();
    let ending = loop {
        if let Some(stop) = r.stop.take() {
            match stopped(&mut r, &mut settle, &stop, &mut idle_until).await {
                Some(ended) => break ended,
                None => continue,
            }
        }
        if !r.out.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut r.out));
            if let Some(tap) = &mut tap {
                tap.observe(&chunk);
            }
            if r.tx.send(chunk).await.is_err() {
                break Ended::ClientGone;
            }
        }
        let next = tokio::select! {
            next = timeout_at(idle_until, r.chunks.next()) => next,
            () = r.tx.closed() => break Ended::ClientGone,
        };
        match next {
            Err(_) => r.stop = Some(Stop::Stalled),
            Ok(Some(Err(_))) => r.stop = Some(Stop::Cut),
            Ok(Some(Ok(chunk))) => {
                r.sse.push(&chunk);
                match drain(&mut r.sse, &mut r.translator, &mut r.out, &mut settle.meter) {
                    Drained::Stop(stop) => r.stop = Some(stop),
                    Drained::Events => idle_until = Instant::now() + r.idle,
                    Drained::Nothing => {}
                }
            }
            Ok(None) => {
                r.stop = Some(end_of_body(&mut r.sse, &mut r.translator, &mut r.out, &mut settle));
            }
        }
    };
    end(r, settle, tap, ending).await;
}

/// Where the reading stopped, put to the one decision: the stream's end (the proper one, or
/// the terminal error event written to the client), or `None` when a continuation took over.
async fn stopped(
    r: &mut Relay,
    settle: &mut Settle,
    stop: &Stop,
    idle_until: &mut Instant,
) -> Option<Ended> {
    match r.translator.ending(stop.exit()) {
        Ending::Complete => {
            if let Some(watch) = &settle.watch {
                watch.whole(settle.attempt.key(), settle.clock.now());
            }
            r.translator.finish(&mut r.out);
            Some(Ended::Complete)
        }
        Ending::ClientGone => Some(Ended::ClientGone),
        Ending::Truncated | Ending::Unanswered => {
            // Before the client can read the end: its retry must find the session moved
            // already, continued or not.
            if let Some(watch) = &settle.watch {
                watch.broke(settle.attempt.key(), settle.clock.now());
            }
            let fault = stop.exit().fault().unwrap_or(StreamFault::Cut);
            if continued(r, settle, fault, idle_until).await {
                return None;
            }
            let (kind, message) = stop.terminal();
            r.translator.fail(kind, message, &mut r.out);
            Some(Ended::Broken(fault))
        }
    }
}

/// Writes the stream's last bytes, keeps a whole Responses answer, and settles the attempt
/// and the usage as the stream ended.
async fn end(
    r: Relay,
    mut settle: Settle,
    mut tap: Option<super::conversations::Tap>,
    ending: Ended,
) {
    let client_gone = matches!(ending, Ended::ClientGone);
    let stream_outcome = match ending {
        Ended::Complete => StreamOutcome::Complete,
        Ended::Broken(_) => StreamOutcome::Broken,
        Ended::ClientGone => StreamOutcome::ClientGone,
    };
    if !r.out.is_empty() && !client_gone {
        if let Some(tap) = &mut tap {
            tap.observe(&r.out);
        }
        // A client that leaves now changes nothing: the verdict is already decided.
        let _ = r.tx.send(Bytes::from(r.out)).await;
    }
    if let (Some(tap), StreamOutcome::Complete) = (tap, stream_outcome) {
        tap.complete();
    }
    meter_end(&r.translator, matches!(ending, Ended::Complete), &mut settle.meter);
    let headers = http::HeaderMap::new();
    let upstream = match ending {
        Ended::Complete => {
            Upstream::Response { status: 200, headers: &headers, body: BodyHint::None }
        }
        Ended::Broken(fault) => Upstream::Stream(fault),
        Ended::ClientGone => Upstream::Stream(StreamFault::Cut),
    };
    let outcome = Outcome { upstream, bytes_sent: true, client_aborted: client_gone };
    let now = settle.clock.now();
    settle.attempt.finish(&classify(&outcome, &settle.policy, now), now);
    if let Some(ended) = settle.ended {
        let _ = ended.send(stream_outcome);
    }
}

/// Tries to finish a broken stream on another target (RESILIENCE.md §10). On success the
/// continuation's stream replaces the broken one under the same client stream, and the broken
/// attempt is settled as the break it was: the breaker is charged as if nothing had been
/// rescued. On refusal nothing changed and the caller ends the stream with its terminal error.
async fn continued(
    r: &mut Relay,
    settle: &mut Settle,
    fault: StreamFault,
    idle_until: &mut Instant,
) -> bool {
    let Some(rescue) = settle.rescue.take() else { return false };
    // Handed over once the request's driver has served this stream; never, when it lost a race.
    let Ok(rescue) = rescue.await else { return false };
    // Nothing kept means no later target could continue: the rescue only says why.
    let relayed = r.translator.relayed().cloned().unwrap_or_default();
    let Some(takeover) = rescue.run(relayed).await else { return false };
    let broken = std::mem::replace(&mut settle.attempt, takeover.attempt);
    let outcome =
        Outcome { upstream: Upstream::Stream(fault), bytes_sent: true, client_aborted: false };
    let now = settle.clock.now();
    broken.finish(&classify(&outcome, &settle.policy, now), now);
    // The broken half keeps what it reported, unsettled: its final count never came.
    settle.meter.report(r.translator.usage());
    settle.meter = takeover.meter;
    r.translator.take_over(takeover.dialect, takeover.seam);
    r.chunks = takeover.chunks;
    r.sse = SseDecoder::default();
    *idle_until = Instant::now() + r.idle;
    true
}

/// Usage is final only for a complete answer; otherwise it is what was reported.
fn meter_end(translator: &StreamTranslator, complete: bool, meter: &mut super::tally::Meter) {
    if complete {
        meter.settle(translator.usage());
    } else {
        meter.report(translator.usage());
    }
}

/// How the relay ended the client's stream.
enum Ended {
    Complete,
    Broken(StreamFault),
    ClientGone,
}
