//! How an answer's bytes reach the wire: pacing, delivery faults, and the response body.
//!
//! [`Delivery`] is a pure schedule: given `now` it says what to do next (send an event, wait
//! until an instant, end, stall, or cut the connection). [`EventBody`] is the thin driver that
//! turns those steps into hyper body frames with one reusable timer. Every answer, error or
//! success, streamed or not, goes through this one body type.
//!
//! Invariants:
//! - Faults are applied to the event list once, up front; the schedule never inspects event
//!   contents.
//! - Keep-alives go out only while waiting for the first real event and are never counted as
//!   events.
//! - A cut first yields once so hyper flushes every event already produced; only then is the
//!   connection dropped, so the client always receives exactly the events before the cut.
//! - A request counts as in flight until its body has ended or been dropped.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::behavior::{Fault, Reply};
use crate::record::InFlight;
use crate::server::ConnectionControl;

/// A paced sequence of body chunks with at most one fault.
#[derive(Debug)]
pub(crate) struct Delivery {
    events: VecDeque<Bytes>,
    sent: usize,
    stop: Stop,
    first_delay: Duration,
    /// The first event goes out before `first_delay` (see `Reply::start_at_once`).
    start_at_once: bool,
    keep_alive: Option<(Duration, Bytes)>,
    gap: Duration,
    phase: Phase,
    exact_len: Option<u64>,
    /// The in-stream error event [`Stop::Error`] sends.
    error_event: Option<Bytes>,
}

/// Where the body stops early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Never,
    Cut(usize),
    Reset(usize),
    Stall(usize),
    /// Keep-alives only after this many events.
    Ping(usize),
    /// The in-stream error event after this many events, then the end.
    Error(usize),
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Nothing decided yet: the clock starts at the first poll, not at construction.
    Fresh,
    /// Headers are out; the first real event waits until `first_at`.
    Waiting { first_at: Instant, next_keep_alive: Option<Instant> },
    /// Events flow, each no earlier than `next_at`.
    Flowing { next_at: Option<Instant> },
}

/// How often [`Fault::PingAfter`] pings when the reply sets no keep-alive interval.
const PING_EVERY: Duration = Duration::from_millis(200);

/// The dialect's frames a fault may send instead of the reply's events.
pub(crate) struct Frames {
    pub(crate) keep_alive: Bytes,
    pub(crate) malformed: Bytes,
    pub(crate) error: Bytes,
}

/// What the body does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Send(Bytes),
    WaitUntil(Instant),
    End,
    Stall,
    Cut,
    Reset,
}

impl Delivery {
    /// One chunk at once, with its length announced: error bodies and model listings.
    pub(crate) fn whole(body: Bytes) -> Self {
        let len = body.len() as u64;
        Self::paced(VecDeque::from([body]), Stop::Never, Some(len))
    }

    /// A streamed reply: the dialect's events, its terminator unless the fault removes it, and
    /// the reply's pacing and fault.
    pub(crate) fn stream(
        events: Vec<Bytes>,
        terminator: Option<Bytes>,
        reply: &Reply,
        frames: Frames,
    ) -> Self {
        let Frames { keep_alive, malformed, error } = frames;
        let mut events = VecDeque::from(events);
        let stop = match reply.fault {
            Some(Fault::CutAfter(n)) => Stop::Cut(n),
            Some(Fault::ResetAfter(n)) => Stop::Reset(n),
            Some(Fault::StallAfter(n)) => Stop::Stall(n),
            Some(Fault::PingAfter(n)) => Stop::Ping(n),
            Some(Fault::ErrorAfter(n)) => Stop::Error(n),
            Some(Fault::ErrorAfterFinish) => Stop::Error(events.len()),
            Some(Fault::MalformedAt(at)) => {
                events.insert(at.min(events.len()), malformed);
                Stop::Never
            }
            None | Some(Fault::MissingDone | Fault::Truncated | Fault::EndWithoutFinish) => {
                Stop::Never
            }
        };
        let no_terminator = matches!(
            reply.fault,
            Some(Fault::MissingDone | Fault::Truncated | Fault::ErrorAfterFinish)
        );
        if !no_terminator {
            events.extend(terminator);
        }
        let mut delivery = Self::paced(events, stop, None);
        delivery.apply_pacing(reply);
        let every = match stop {
            Stop::Ping(_) => Some(reply.keep_alive_interval().unwrap_or(PING_EVERY)),
            _ => reply.keep_alive_interval(),
        };
        delivery.keep_alive = every.map(|every| (every, keep_alive));
        delivery.error_event = Some(error);
        delivery
    }

    /// A non-streamed reply: one JSON document, sent in two halves when a fault needs a point
    /// in the middle of it. Truncation is already in the document (a null finish reason).
    pub(crate) fn document(body: Bytes, reply: &Reply) -> Self {
        let full = body.len() as u64;
        let half = body.len() / 2;
        let (events, stop, announced) = match reply.fault {
            // A whole document has no place for an error event: it is cut instead.
            Some(Fault::CutAfter(n) | Fault::ErrorAfter(n)) => {
                (halves(&body, half), Stop::Cut(n.min(1)), full)
            }
            // The whole document was sent: a late error has nowhere to go.
            Some(Fault::ErrorAfterFinish) => (VecDeque::from([body]), Stop::Never, full),
            Some(Fault::ResetAfter(n)) => (halves(&body, half), Stop::Reset(n.min(1)), full),
            Some(Fault::StallAfter(n) | Fault::PingAfter(n)) => {
                (halves(&body, half), Stop::Stall(n.min(1)), full)
            }
            Some(Fault::MalformedAt(_)) => {
                (VecDeque::from([body.slice(..half)]), Stop::Never, half as u64)
            }
            None | Some(Fault::MissingDone | Fault::Truncated | Fault::EndWithoutFinish) => {
                (VecDeque::from([body]), Stop::Never, full)
            }
        };
        let mut delivery = Self::paced(events, stop, Some(announced));
        delivery.apply_pacing(reply);
        delivery
    }

    /// `bytes` of filler in 64 KiB chunks, with no length announced: every chunk shares one
    /// static buffer, so a flood of gigabytes costs the mock nothing. With `stall`, the body
    /// then sends nothing more and never ends (what a body shorter than its announced length
    /// looks like to a reader that trusts the length).
    pub(crate) fn flood(bytes: u64, stall: bool) -> Self {
        static FILLER: [u8; 64 * 1024] = [b' '; 64 * 1024];
        let whole = Bytes::from_static(&FILLER);
        let size = FILLER.len() as u64;
        let mut events: VecDeque<Bytes> = (0..bytes / size).map(|_| whole.clone()).collect();
        let rest = usize::try_from(bytes % size).expect("less than 64 KiB");
        if rest > 0 {
            events.push_back(whole.slice(..rest));
        }
        let stop = if stall { Stop::Stall(events.len()) } else { Stop::Never };
        Self::paced(events, stop, None)
    }

    fn paced(events: VecDeque<Bytes>, stop: Stop, exact_len: Option<u64>) -> Self {
        Self {
            events,
            sent: 0,
            stop,
            first_delay: Duration::ZERO,
            start_at_once: false,
            keep_alive: None,
            gap: Duration::ZERO,
            phase: Phase::Fresh,
            exact_len,
            error_event: None,
        }
    }

    fn apply_pacing(&mut self, reply: &Reply) {
        self.first_delay = reply.first_event_delay();
        self.start_at_once = reply.start_at_once;
        self.gap = reply.gap();
    }

    /// The body length when it is known up front (it becomes `Content-Length`); `None` for
    /// streams, which go out chunked.
    pub(crate) fn exact_len(&self) -> Option<u64> {
        self.exact_len
    }

    /// Whether the schedule may need to drop the connection (so the body must hold a handle).
    pub(crate) fn may_cut(&self) -> bool {
        matches!(self.stop, Stop::Cut(_) | Stop::Reset(_))
    }

    /// The next thing to do at `now`.
    pub(crate) fn step(&mut self, now: Instant) -> Step {
        loop {
            match self.phase {
                Phase::Fresh => {
                    self.phase = if self.first_delay.is_zero() {
                        Phase::Flowing { next_at: None }
                    } else {
                        Phase::Waiting {
                            first_at: now + self.first_delay,
                            next_keep_alive: self
                                .keep_alive
                                .as_ref()
                                .map(|(every, _)| now + *every),
                        }
                    };
                    if std::mem::take(&mut self.start_at_once)
                        && let Some(event) = self.events.pop_front()
                    {
                        self.sent += 1;
                        return Step::Send(event);
                    }
                }
                Phase::Waiting { first_at, next_keep_alive } => {
                    if now >= first_at {
                        self.phase = Phase::Flowing { next_at: None };
                        continue;
                    }
                    if let (Some(due), Some((every, frame))) = (next_keep_alive, &self.keep_alive) {
                        if now >= due {
                            self.phase =
                                Phase::Waiting { first_at, next_keep_alive: Some(now + *every) };
                            return Step::Send(frame.clone());
                        }
                        return Step::WaitUntil(first_at.min(due));
                    }
                    return Step::WaitUntil(first_at);
                }
                Phase::Flowing { next_at } => {
                    match self.stop {
                        Stop::Cut(n) if self.sent >= n => return Step::Cut,
                        Stop::Reset(n) if self.sent >= n => return Step::Reset,
                        Stop::Stall(n) if self.sent >= n => return Step::Stall,
                        Stop::Error(n) if self.sent >= n => {
                            return match self.error_event.take() {
                                Some(event) => Step::Send(event),
                                None => Step::End,
                            };
                        }
                        Stop::Ping(n) if self.sent >= n => {
                            let Some((every, frame)) = &self.keep_alive else { return Step::Stall };
                            if let Some(at) = next_at.filter(|&at| now < at) {
                                return Step::WaitUntil(at);
                            }
                            self.phase = Phase::Flowing { next_at: Some(now + *every) };
                            return Step::Send(frame.clone());
                        }
                        _ => {}
                    }
                    if let Some(at) = next_at.filter(|&at| now < at) {
                        return Step::WaitUntil(at);
                    }
                    let Some(event) = self.events.pop_front() else { return Step::End };
                    self.sent += 1;
                    let next_at = (!self.gap.is_zero()).then(|| now + self.gap);
                    self.phase = Phase::Flowing { next_at };
                    return Step::Send(event);
                }
            }
        }
    }
}

fn halves(body: &Bytes, at: usize) -> VecDeque<Bytes> {
    VecDeque::from([body.slice(..at), body.slice(at..)])
}

/// The response body of every answer the mock gives.
#[derive(Debug)]
pub(crate) struct EventBody {
    delivery: Delivery,
    /// Reused across waits so a paced stream allocates one timer, not one per event.
    timer: Option<Pin<Box<Sleep>>>,
    waiting: bool,
    cut_requested: bool,
    connection: Option<Arc<ConnectionControl>>,
    in_flight: Option<InFlight>,
    /// Bytes handed to hyper so far.
    sent: u64,
}

impl EventBody {
    pub(crate) fn new(
        delivery: Delivery,
        connection: &Arc<ConnectionControl>,
        in_flight: InFlight,
    ) -> Self {
        let connection = delivery.may_cut().then(|| Arc::clone(connection));
        Self {
            delivery,
            timer: None,
            waiting: false,
            cut_requested: false,
            connection,
            in_flight: Some(in_flight),
            sent: 0,
        }
    }

    /// The answer went out in full.
    fn finish(&mut self) {
        if let Some(in_flight) = self.in_flight.take() {
            in_flight.finish();
        }
    }

    fn wait_until(&mut self, deadline: Instant) {
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(deadline),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.waiting = true;
    }

    /// Yield once so hyper flushes what it already has, then drop the connection: with a FIN,
    /// or with a RST when `reset`.
    fn cut(
        &mut self,
        cx: &Context<'_>,
        reset: bool,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.cut_requested {
            match &self.connection {
                Some(connection) if reset => connection.reset(),
                Some(connection) => connection.close(),
                None => {}
            }
        } else {
            self.cut_requested = true;
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        loop {
            if this.waiting {
                let timer = this.timer.as_mut().expect("a timer is armed while waiting");
                ready!(timer.as_mut().poll(cx));
                this.waiting = false;
            }
            match this.delivery.step(Instant::now()) {
                Step::Send(bytes) => {
                    // A body of known length is over once its last byte is handed to hyper,
                    // which may then drop it without asking for the end.
                    this.sent += bytes.len() as u64;
                    if this.delivery.exact_len().is_some_and(|len| this.sent >= len) {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Step::WaitUntil(deadline) => this.wait_until(deadline),
                Step::End => {
                    this.finish();
                    return Poll::Ready(None);
                }
                // No waker is registered: nothing will ever come. hyper still watches the socket,
                // so the connection (and this body) goes away when the client does.
                Step::Stall => return Poll::Pending,
                Step::Cut => return this.cut(cx, false),
                Step::Reset => return this.cut(cx, true),
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.delivery.exact_len().map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(n: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(format!("e{i}"))).collect()
    }

    fn sent(step: Step) -> String {
        match step {
            Step::Send(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
            other => panic!("expected a send, got {other:?}"),
        }
    }

    fn stream(reply: &Reply) -> Delivery {
        Delivery::stream(
            events(3),
            Some(Bytes::from_static(b"done")),
            reply,
            Frames {
                keep_alive: Bytes::from_static(b"ka"),
                malformed: Bytes::from_static(b"bad"),
                error: Bytes::from_static(b"err"),
            },
        )
    }

    #[test]
    fn ping_after_sends_only_keep_alives_once_its_events_are_out() {
        let mut d = stream(&Reply::default().fault(Fault::PingAfter(2)));
        let t0 = Instant::now();
        assert_eq!(sent(d.step(t0)), "e0");
        assert_eq!(sent(d.step(t0)), "e1");
        assert_eq!(sent(d.step(t0)), "ka");
        assert_eq!(d.step(t0), Step::WaitUntil(t0 + PING_EVERY));
        assert_eq!(sent(d.step(t0 + PING_EVERY)), "ka", "and again, never the rest");
    }

    #[test]
    fn error_after_sends_the_error_event_and_ends_without_the_terminator() {
        let mut d = stream(&Reply::default().fault(Fault::ErrorAfter(1)));
        let t0 = Instant::now();
        assert_eq!(sent(d.step(t0)), "e0");
        assert_eq!(sent(d.step(t0)), "err");
        assert_eq!(d.step(t0), Step::End);
    }

    #[test]
    fn an_unpaced_stream_sends_every_event_then_the_terminator_then_ends() {
        let now = Instant::now();
        let mut d = stream(&Reply::default());
        let got: Vec<String> = (0..4).map(|_| sent(d.step(now))).collect();
        assert_eq!(got, ["e0", "e1", "e2", "done"]);
        assert_eq!(d.step(now), Step::End);
    }

    #[test]
    fn a_slow_first_event_sends_keep_alives_until_the_delay_has_passed() {
        let t0 = Instant::now();
        let reply = Reply::default()
            .first_event_after(Duration::from_millis(100))
            .keep_alive_every(Duration::from_millis(40));
        let mut d = stream(&reply);
        assert_eq!(d.step(t0), Step::WaitUntil(t0 + Duration::from_millis(40)));
        assert_eq!(sent(d.step(t0 + Duration::from_millis(40))), "ka");
        assert_eq!(
            d.step(t0 + Duration::from_millis(40)),
            Step::WaitUntil(t0 + Duration::from_millis(80))
        );
        assert_eq!(sent(d.step(t0 + Duration::from_millis(80))), "ka");
        assert_eq!(
            d.step(t0 + Duration::from_millis(80)),
            Step::WaitUntil(t0 + Duration::from_millis(100))
        );
        assert_eq!(sent(d.step(t0 + Duration::from_millis(100))), "e0");
    }

    #[test]
    fn the_gap_separates_events_but_not_the_first() {
        let t0 = Instant::now();
        let gap = Duration::from_millis(10);
        let mut d = stream(&Reply::default().chunk_gap(gap));
        assert_eq!(sent(d.step(t0)), "e0");
        assert_eq!(d.step(t0), Step::WaitUntil(t0 + gap));
        assert_eq!(sent(d.step(t0 + gap)), "e1");
    }

    #[test]
    fn cut_reset_and_stall_strike_after_exactly_n_events() {
        let now = Instant::now();
        let faults = [
            (Fault::CutAfter(2), Step::Cut),
            (Fault::ResetAfter(2), Step::Reset),
            (Fault::StallAfter(2), Step::Stall),
        ];
        for (fault, last) in faults {
            let mut d = stream(&Reply::default().fault(fault));
            assert_eq!(sent(d.step(now)), "e0");
            assert_eq!(sent(d.step(now)), "e1");
            assert_eq!(d.step(now), last);
        }
    }

    #[test]
    fn a_malformed_event_is_inserted_among_good_ones() {
        let now = Instant::now();
        let mut d = stream(&Reply::default().fault(Fault::MalformedAt(1)));
        let got: Vec<String> = (0..5).map(|_| sent(d.step(now))).collect();
        assert_eq!(got, ["e0", "bad", "e1", "e2", "done"]);
    }

    #[test]
    fn missing_done_and_truncated_drop_the_terminator() {
        let now = Instant::now();
        for fault in [Fault::MissingDone, Fault::Truncated] {
            let mut d = stream(&Reply::default().fault(fault));
            let got: Vec<String> = (0..3).map(|_| sent(d.step(now))).collect();
            assert_eq!(got, ["e0", "e1", "e2"]);
            assert_eq!(d.step(now), Step::End);
        }
    }

    #[test]
    fn a_cut_document_announces_its_full_length_and_sends_half() {
        let now = Instant::now();
        let body = Bytes::from_static(b"{\"abcdef\":1}");
        let mut d = Delivery::document(body.clone(), &Reply::default().fault(Fault::CutAfter(5)));
        assert_eq!(d.exact_len(), Some(body.len() as u64));
        assert_eq!(sent(d.step(now)), "{\"abcd");
        assert_eq!(d.step(now), Step::Cut);
    }
}
