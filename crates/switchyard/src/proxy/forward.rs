//! Relaying a streamed answer (RESILIENCE.md §7).
//!
//! The client's response is held back until the upstream's first real event: keep-alives do
//! not count, malformed events are dropped. Until then any failure may still fall back, because
//! the client has seen nothing. From the first byte on, the stream is relayed by a task of its
//! own as chunks arrive, with an idle deadline between events; it ends either properly (a
//! finish reason or the dialect's end marker) or with a terminal error event in the client's
//! dialect, never with a "successful" truncated answer. The task settles the attempt on the
//! registry when the stream is over, including when the client goes away.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use switchyard_core::Clock;
use switchyard_core::outcome::{
    BodyHint, ClassifyPolicy, Outcome, StreamFault, TimeoutPhase, Upstream, classify,
};
use switchyard_core::resilience::Attempt;
use switchyard_providers::error::{ErrorKind, ProviderError};
use switchyard_providers::executor::SendFailure;
use switchyard_providers::sse::{SseDecoder, SseItem};
use switchyard_providers::stream::{Progress, StreamEnd, StreamTranslator};
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
    ErrorEvent(switchyard_providers::error::UpstreamError),
}

/// Reads `chunks` until the first real event or `first_event` passes.
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
    let mut ended = false;
    let mut settle = settle;
    loop {
        match drain(&mut sse, &mut translator, &mut out, &mut settle.meter) {
            Drained::Events => break,
            Drained::End => {
                ended = true;
                break;
            }
            Drained::Nothing => {}
            Drained::ErrorEvent(error) => {
                return Opened::Failed(Failure::ErrorEvent(error), Box::new(settle));
            }
        }
        match timeout_at(first_event, chunks.next()).await {
            Err(_) => {
                return Opened::Failed(
                    Failure::Upstream(Upstream::Timeout(TimeoutPhase::FirstEvent)),
                    Box::new(settle),
                );
            }
            Ok(Some(Ok(chunk))) => sse.push(&chunk),
            Ok(Some(Err(_))) => {
                return Opened::Failed(
                    Failure::Upstream(Upstream::Stream(StreamFault::Cut)),
                    Box::new(settle),
                );
            }
            Ok(None) => {
                sse.close();
                let drained = drain(&mut sse, &mut translator, &mut out, &mut settle.meter);
                if let Drained::ErrorEvent(error) = drained {
                    return Opened::Failed(Failure::ErrorEvent(error), Box::new(settle));
                }
                if !translator.status().is_complete() {
                    return Opened::Failed(
                        Failure::Upstream(Upstream::Stream(StreamFault::Truncated)),
                        Box::new(settle),
                    );
                }
                ended = true;
                break;
            }
        }
    }
    // The upstream answers: a half-open probe settles now, not when a long stream ends.
    let now = settle.clock.now();
    let empty = http::HeaderMap::new();
    let answered = Upstream::Response { status: 200, headers: &empty, body: BodyHint::None };
    settle.attempt.answered(&classify(&Outcome::new(answered), &settle.policy, now), now);
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    tokio::spawn(relay(Relay { chunks, sse, translator, out, ended, idle, tx }, settle));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    });
    Opened::Relaying(Box::pin(body))
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
    pub rescue: Option<super::continuation::Rescue>,
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
    End,
    ErrorEvent(switchyard_providers::error::UpstreamError),
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
                Ok(t) if t.progress == Progress::End => return Drained::End,
                // Only content counts: `message_start`, pings, role-only and usage-only
                // chunks are held back with everything before the first real event.
                Ok(t) if t.real > 0 => drained = Drained::Events,
                Ok(_) => {}
                Err(ProviderError::UpstreamStream { error, .. }) => {
                    return Drained::ErrorEvent(error);
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
    /// The upstream already said it is done.
    ended: bool,
    idle: Duration,
    tx: mpsc::Sender<Bytes>,
}

/// Relays the rest of the stream, then settles the attempt.
///
/// The idle deadline runs from the last real event, not the last byte: an upstream that only
/// sends keep-alives (pings, comments, usage) cannot hold the client (RESILIENCE.md §7). A
/// client that leaves is noticed at once, even while the upstream sends nothing.
async fn relay(mut r: Relay, mut settle: Settle) {
    let mut idle_until = Instant::now() + r.idle;
    let mut tap = settle.tap.take();
    let ending = loop {
        if r.ended {
            break finish(&mut r.translator, &mut r.out);
        }
        if !r.out.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut r.out));
            if let Some(tap) = &mut tap {
                tap.observe(&chunk);
            }
            if r.tx.send(chunk).await.is_err() {
                break Ending::ClientGone;
            }
        }
        let next = tokio::select! {
            next = timeout_at(idle_until, r.chunks.next()) => next,
            () = r.tx.closed() => break Ending::ClientGone,
        };
        match next {
            // The model had finished: what is missing is only the end marker (RESILIENCE.md
            // §7). The client gets a proper end and nobody is charged.
            Err(_) | Ok(Some(Err(_))) if r.translator.status().finish_seen => {
                break finish(&mut r.translator, &mut r.out);
            }
            Err(_) => {
                if continued(&mut r, &mut settle, StreamFault::Stalled, &mut idle_until).await {
                    continue;
                }
                r.translator.fail(
                    ErrorKind::Timeout,
                    "the upstream stalled mid-stream",
                    &mut r.out,
                );
                break Ending::Broken(StreamFault::Stalled);
            }
            Ok(Some(Err(_))) => {
                if continued(&mut r, &mut settle, StreamFault::Cut, &mut idle_until).await {
                    continue;
                }
                r.translator.fail(
                    ErrorKind::Internal,
                    "the upstream connection broke mid-stream",
                    &mut r.out,
                );
                break Ending::Broken(StreamFault::Cut);
            }
            Ok(Some(Ok(chunk))) => {
                r.sse.push(&chunk);
                match drain(&mut r.sse, &mut r.translator, &mut r.out, &mut settle.meter) {
                    Drained::End => r.ended = true,
                    Drained::ErrorEvent(error) => {
                        if continued(&mut r, &mut settle, StreamFault::Cut, &mut idle_until).await {
                            continue;
                        }
                        r.translator.fail(ErrorKind::Overloaded, &error.message, &mut r.out);
                        break Ending::Broken(StreamFault::Cut);
                    }
                    Drained::Events => idle_until = Instant::now() + r.idle,
                    Drained::Nothing => {}
                }
            }
            Ok(None) => {
                r.sse.close();
                let _ = drain(&mut r.sse, &mut r.translator, &mut r.out, &mut settle.meter);
                r.ended = true;
            }
        }
    };
    let client_gone = matches!(ending, Ending::ClientGone);
    let stream_outcome = match ending {
        Ending::Complete => StreamOutcome::Complete,
        Ending::Broken(_) => StreamOutcome::Broken,
        Ending::ClientGone => StreamOutcome::ClientGone,
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
    meter_end(&r.translator, &mut settle.meter);
    let headers = http::HeaderMap::new();
    let upstream = match ending {
        Ending::Complete => {
            Upstream::Response { status: 200, headers: &headers, body: BodyHint::None }
        }
        Ending::Broken(fault) => Upstream::Stream(fault),
        Ending::ClientGone => Upstream::Stream(StreamFault::Cut),
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
    // Nothing kept means no later target could continue: the rescue only says why.
    let relayed = r.translator.relayed().cloned().unwrap_or_default();
    let Some(takeover) = rescue(relayed).await else { return false };
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

/// Usage is final only when the upstream finished; otherwise it is what was reported.
fn meter_end(translator: &StreamTranslator, meter: &mut super::tally::Meter) {
    if translator.status().finish_seen {
        meter.settle(translator.usage());
    } else {
        meter.report(translator.usage());
    }
}

enum Ending {
    Complete,
    Broken(StreamFault),
    ClientGone,
}

fn finish(translator: &mut StreamTranslator, out: &mut Vec<u8>) -> Ending {
    match translator.end(out) {
        StreamEnd::Complete => Ending::Complete,
        StreamEnd::Truncated => Ending::Broken(StreamFault::Truncated),
    }
}
