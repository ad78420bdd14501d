//! The driver of one request: performs the steps of its machine (`switchyard_core::request`)
//! and tells it what happened, until an answer is served, refused or nothing is left.
//!
//! The machine decides everything (which candidate, which role, when a racer starts, when to
//! wait in place); the driver owns the live attempts' futures and polls them together with the
//! machine's next timer, so a hedge or an early start is just a second live attempt. A loser is
//! cancelled by dropping its future: its connection closes and its
//! [`switchyard_core::resilience::Attempt`] is dropped unsettled, which charges no layer and
//! releases any half-open probe slot it held.
//!
//! Each attempt goes through the proxy's one runner in two stages: admitted (a concurrency slot,
//! the registry's admission and lease, the secret), then, once the machine lets it go, sent and
//! read to its first real event (a non-streamed one: its whole answer).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use smallvec::SmallVec;
use switchyard_core::CandidateKey;
use switchyard_core::request::{AttemptId, Cancelled, Event, Request, Role, Start, Step};
use switchyard_core::resilience::Attempt;
use switchyard_core::routing::Candidate;
use switchyard_core::routing::session::Shown;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::continuation::Rescue;
use super::exhausted::Trace;
use super::refusal::Refused;
use super::upstream::Presented;
use super::{Proxy, Sending, Tried, TriedResult, passthrough};

/// How a request's attempts came out.
pub(super) enum Driven {
    Served(Won),
    /// A verdict that allows no fallback: the upstream's error, as it gave it; with the
    /// attempts made.
    Refused(Refused, u32),
    /// Nothing served (the trace says why), after this many attempts.
    Exhausted(u32),
}

/// The attempt that served.
pub(super) struct Won {
    pub tried: Tried,
    pub candidate: Candidate,
    /// When it was sent.
    pub started: Instant,
    pub attempts: u32,
    pub fell_back: bool,
}

/// The stage an attempt is at. Its futures are kept here only when they must be polled beside
/// another's (a race, a timer); an attempt alone is awaited by the driver itself.
enum Stage<'s> {
    Admitting(Pin<Box<dyn Future<Output = Admitted> + Send + 's>>),
    /// Admitted and let go by the machine: sent when the driver next waits.
    Ready(Ready),
    /// Between two stages, for a moment.
    Moving,
    Sending(Pin<Box<dyn Future<Output = (Tried, Option<Presented>)> + Send + 's>>),
    /// Done; kept until the machine says what becomes of it (serve, refuse, refresh).
    Finished(Tried, Option<Presented>),
}

/// The attempts the driver holds: the one waited on on the stack, a racer beside it on the
/// heap.
type Attempts<'s> = SmallVec<[Running<'s>; 1]>;

/// One attempt the driver holds.
struct Running<'s> {
    id: AttemptId,
    candidate: usize,
    role: Role,
    /// When it was started, then sent.
    started: Instant,
    /// From `Start`: how long its first real event may take once sent.
    permit: Duration,
    /// Hands a streamed attempt's relay what a continuation needs, if this one serves.
    rescue: Option<oneshot::Sender<Rescue>>,
    stage: Stage<'s>,
}

/// An attempt to send: what the runner's second stage takes.
struct Ready {
    attempt: Attempt,
    secret: Option<Presented>,
    first_event: Instant,
    rescue: Option<(oneshot::Receiver<Rescue>, bool)>,
    /// Sent repaired ([`Role::Repair`]).
    repair: bool,
}

/// What admitting one candidate came to.
pub(super) struct Admitted {
    pub ready: Result<(Attempt, Option<Presented>), &'static str>,
    /// How long it waited in line for a concurrency slot, when it did.
    pub queued: Option<Duration>,
}

enum Progress {
    Admitted(Admitted),
    Tried(Tried, Option<Presented>),
}

/// Drives one request's machine over its attempts.
pub(super) struct Driver<'p, 's, 'b> {
    pub proxy: &'s Arc<Proxy>,
    pub sending: &'s Sending<'s, 'b>,
    pub trace: &'p mut Trace,
}

impl<'s, 'b> Driver<'_, 's, 'b> {
    /// Performs `machine`'s steps until it serves, refuses, or has nothing left.
    pub(super) async fn drive(mut self, mut machine: Box<Request>) -> Driven {
        let arrived = self.sending.arrived;
        let mut running = Attempts::new();
        loop {
            let now = arrived.elapsed();
            let step = machine.next(now, &mut self.proxy.world(self.sending.routes));
            // The hook per step: `SWITCHYARD_LOG=switchyard::proxy::driver=trace` shows every
            // decision of every request (checked against the level first: free when off).
            tracing::trace!(?step, at = ?now, "request step");
            match step {
                Step::Start(start) if running.iter().any(Running::pending) => {
                    running.push(self.start(&machine, &start));
                }
                Step::Start(start) => self.start_alone(&mut machine, &mut running, &start).await,
                Step::Pass { candidate, reason } => {
                    self.trace.skip(&machine.offer(candidate).candidate, reason);
                }
                Step::Wait { until } => {
                    let until = until.map(|u| arrived + u);
                    if !self.wait(&mut machine, &mut running, until).await {
                        return Driven::Exhausted(machine.attempts());
                    }
                }
                Step::Cancel { attempt, why } => {
                    if let Some(at) = running.iter().position(|r| r.id == attempt) {
                        self.cancelled(&machine, &running.swap_remove(at), why);
                    }
                }
                Step::Refresh { attempt } => {
                    let presented = presented(&machine, &mut running, attempt);
                    let ok = self.refresh(presented).await;
                    let now = arrived.elapsed();
                    let world = &mut self.proxy.world(self.sending.routes);
                    machine.on(attempt, Event::Refreshed(ok), now, world);
                }
                Step::Serve { attempt } => {
                    let Some(at) = running.iter().position(|r| r.id == attempt) else {
                        return Driven::Exhausted(machine.attempts());
                    };
                    return self.serve(machine, running.swap_remove(at));
                }
                Step::Refuse { attempt } => {
                    let at = running.iter().position(|r| r.id == attempt);
                    let finished = at.map(|at| running.swap_remove(at).stage);
                    let Some(Stage::Finished(Tried { result, .. }, _)) = finished else {
                        return Driven::Exhausted(machine.attempts());
                    };
                    let TriedResult::Failed { verdict, upstream } = result else {
                        return Driven::Exhausted(machine.attempts());
                    };
                    let refused = passthrough(self.sending.dialect, &verdict, upstream);
                    return Driven::Refused(refused, machine.attempts());
                }
                Step::Exhausted | Step::NotContinued { .. } => {
                    return Driven::Exhausted(machine.attempts());
                }
            }
        }
    }

    /// Admits `start`'s candidate with nothing else live: here, in this future, with nothing
    /// to race and nothing boxed.
    async fn start_alone(
        &mut self,
        machine: &mut Request,
        running: &mut Attempts<'s>,
        start: &Start,
    ) {
        let candidate = &machine.offer(start.candidate).candidate;
        let (proxy, sending) = (self.proxy, self.sending);
        let admission = (start.permit, start.queue);
        let (routes, login, deadline) = (sending.routes, sending.login, sending.deadline());
        let admitted = proxy.admit(routes, candidate, admission, login, deadline).await;
        running.push(Running::new(start, Stage::Moving));
        let at = running.len() - 1;
        self.admitted(machine, running, at, admitted);
    }

    /// Waits for the next live attempt's progress, or `until`; `false` when nothing is live
    /// and no timer is set: nothing will ever happen. One attempt alone with no timer is sent
    /// and awaited here; otherwise every attempt ready to send is kept in its stage and they
    /// are polled together with the timer.
    async fn wait(
        &mut self,
        machine: &mut Request,
        running: &mut Attempts<'s>,
        until: Option<Instant>,
    ) -> bool {
        let live = running.iter().filter(|r| r.pending()).count();
        if until.is_none() && live == 0 {
            return false;
        }
        let ready = running.iter().position(|r| matches!(r.stage, Stage::Ready(_)));
        if let (None, 1, Some(at)) = (until, live, ready) {
            let Ready { attempt, secret, first_event, rescue, repair } =
                take_ready(&mut running[at]);
            let candidate = &machine.offer(running[at].candidate).candidate;
            let target = &self.sending.combo.targets[candidate.target];
            // Boxed: the exchange's future is most of a request's, and every future above this
            // one (the driver's, the route's, the handler's) would carry it and copy it whole
            // each time one is made.
            let tried = Box::pin(self.proxy.attempt(
                self.sending,
                (candidate, target),
                secret.as_ref(),
                attempt,
                first_event,
                (rescue, repair),
            ))
            .await;
            self.progressed(machine, running, at, Progress::Tried(tried, secret));
            return true;
        }
        for entry in running.iter_mut() {
            if matches!(entry.stage, Stage::Ready(_)) {
                let candidate = machine.offer(entry.candidate).candidate.clone();
                let ready = take_ready(entry);
                entry.stage = Stage::Sending(Box::pin(self.send(candidate, ready)));
            }
        }
        if let Some((at, progress)) = next_progress(running, until).await {
            self.progressed(machine, running, at, progress);
        }
        true
    }

    /// Starts admitting `start`'s candidate beside the attempts already live.
    fn start(&self, machine: &Request, start: &Start) -> Running<'s> {
        let candidate = machine.offer(start.candidate).candidate.clone();
        Running::new(start, Stage::Admitting(Box::pin(self.admit(candidate, start))))
    }

    /// The attempt runner's first stage for `candidate`.
    fn admit(
        &self,
        candidate: Candidate,
        start: &Start,
    ) -> impl Future<Output = Admitted> + Send + use<'s, 'b> {
        let (proxy, sending) = (self.proxy, self.sending);
        let admission = (start.permit, start.queue);
        async move {
            let (routes, login) = (sending.routes, sending.login);
            proxy.admit(routes, &candidate, admission, login, sending.deadline()).await
        }
    }

    /// The attempt runner's second stage: `ready` sent to `candidate`.
    fn send(
        &self,
        candidate: Candidate,
        ready: Ready,
    ) -> impl Future<Output = (Tried, Option<Presented>)> + Send + use<'s, 'b> {
        let (proxy, sending) = (self.proxy, self.sending);
        async move {
            let Ready { attempt, secret, first_event, rescue, repair } = ready;
            let target = &sending.combo.targets[candidate.target];
            let tried = proxy
                .attempt(
                    sending,
                    (&candidate, target),
                    secret.as_ref(),
                    attempt,
                    first_event,
                    (rescue, repair),
                )
                .await;
            (tried, secret)
        }
    }

    /// Feeds one attempt's progress to the machine.
    fn progressed(
        &mut self,
        machine: &mut Request,
        running: &mut Attempts<'s>,
        at: usize,
        progress: Progress,
    ) {
        match progress {
            Progress::Admitted(admitted) => self.admitted(machine, running, at, admitted),
            Progress::Tried(tried, secret) => {
                let candidate = &machine.offer(running[at].candidate).candidate;
                let event = match &tried.result {
                    TriedResult::Served(..) => Event::Answered,
                    TriedResult::Failed { verdict, .. } => {
                        let took = running[at].started.elapsed();
                        self.trace.attempt(candidate, verdict, took, tried.carried.clone());
                        if let Some(shown) = Shown::of(verdict.kind) {
                            self.proxy.sessions.shown(&candidate.key, shown);
                        }
                        tracing::info!(target = %candidate.key, kind = verdict.kind.as_str(), status = ?verdict.status, "attempt failed");
                        Event::Failed(*verdict)
                    }
                };
                running[at].stage = Stage::Finished(tried, secret);
                let now = self.sending.arrived.elapsed();
                let world = &mut self.proxy.world(self.sending.routes);
                machine.on(running[at].id, event, now, world);
            }
        }
    }

    /// An attempt admitted (or not): sent when the machine lets it go.
    fn admitted(
        &mut self,
        machine: &mut Request,
        running: &mut Attempts<'s>,
        at: usize,
        Admitted { ready, queued }: Admitted,
    ) {
        // One reading of the clock: when it was admitted is when it is sent.
        let sent_at = Instant::now();
        let now = sent_at.saturating_duration_since(self.sending.arrived);
        let world = &mut self.proxy.world(self.sending.routes);
        let (id, index) = (running[at].id, running[at].candidate);
        if let Some(waited) = queued {
            self.proxy.counters.queued(waited, ready.is_ok());
            self.trace.queued(&machine.offer(index).candidate, waited);
        }
        let (attempt, secret) = match ready {
            Ok(ready) => ready,
            Err(reason) => {
                running.swap_remove(at);
                machine.on(id, Event::Skipped(reason), now, world);
                return;
            }
        };
        if !machine.admitted(id, now, world) {
            // Dropped unsettled: nothing charged, any probe slot released.
            drop(attempt);
            running.swap_remove(at);
            return;
        }
        let role = running[at].role;
        if role.races() {
            let candidate = &machine.offer(index).candidate;
            self.proxy.counters.hedges_started.fetch_add(1, Ordering::Relaxed);
            let what = if role == Role::Hedge { "started" } else { "started_early" };
            self.trace.hedge(candidate, what, now);
            tracing::info!(hedge = %candidate.key, role = role.as_str(), "racing a slow first event");
        }
        // A stream's relay is handed what a continuation needs, if this attempt serves.
        let (tx, rescue) = if self.sending.request.stream() {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some((rx, self.sending.keeps_for_continuation(machine, index))))
        } else {
            (None, None)
        };
        let first_event = (sent_at + running[at].permit).min(self.sending.deadline());
        let entry = &mut running[at];
        entry.rescue = tx;
        entry.started = sent_at;
        let repair = role == Role::Repair;
        entry.stage = Stage::Ready(Ready { attempt, secret, first_event, rescue, repair });
    }

    /// A live attempt dropped: it lost a race, or another's verdict forbids it to answer.
    fn cancelled(&mut self, machine: &Request, loser: &Running<'s>, why: Cancelled) {
        let candidate = &machine.offer(loser.candidate).candidate;
        let took = loser.started.elapsed();
        match why {
            Cancelled::Lost => {
                self.trace.hedge(candidate, "lost", took);
                // A lower bound of its time to first event (RESILIENCE.md §10): a target that
                // loses every race is still measured, so a sustained slowdown does not drain its
                // sketch below the samples a percentile needs and switch hedging off.
                if matches!(loser.stage, Stage::Sending(_)) {
                    self.proxy.observe_first_event(&candidate.key, took);
                }
            }
            Cancelled::Refused => self.trace.hedge(candidate, "cancelled", took),
        }
    }

    /// Refreshes the token an attempt presented, after its 401.
    async fn refresh(&self, presented: Option<(CandidateKey, Option<Presented>)>) -> bool {
        let Some((key, secret)) = presented else { return false };
        // Boxed: every request's future would hold the refresh.
        Box::pin(self.proxy.refreshed_after_unauthorized(&key, secret.as_ref())).await
    }

    /// The winner: its relay gets what a continuation needs (the machine, moved), and its
    /// answer goes to the client.
    fn serve(self, machine: Box<Request>, winner: Running<'s>) -> Driven {
        let Stage::Finished(tried, _) = winner.stage else {
            return Driven::Exhausted(machine.attempts());
        };
        if winner.role.races() {
            let candidate = &machine.offer(winner.candidate).candidate;
            self.proxy.counters.hedges_won.fetch_add(1, Ordering::Relaxed);
            self.trace.hedge(candidate, "won", self.sending.arrived.elapsed());
        }
        let (attempts, fell_back) = (machine.attempts(), machine.fell_back());
        let candidate = match winner.rescue {
            Some(rescue) => {
                let candidate = machine.offer(winner.candidate).candidate.clone();
                // A relay whose stream has already ended has dropped its receiver: nothing to
                // do then.
                let _ = rescue.send(self.sending.rescuer(self.proxy, machine, winner.candidate));
                candidate
            }
            None => machine.into_offer(winner.candidate).candidate,
        };
        Driven::Served(Won { tried, candidate, started: winner.started, attempts, fell_back })
    }
}

impl<'s> Running<'s> {
    fn new(start: &Start, stage: Stage<'s>) -> Self {
        Running {
            id: start.attempt,
            candidate: start.candidate,
            role: start.role,
            started: Instant::now(),
            permit: start.permit,
            rescue: None,
            stage,
        }
    }

    fn pending(&self) -> bool {
        !matches!(self.stage, Stage::Finished(..))
    }
}

/// Takes an admitted attempt out of `entry` to send it.
fn take_ready(entry: &mut Running<'_>) -> Ready {
    let Stage::Ready(ready) = std::mem::replace(&mut entry.stage, Stage::Moving) else {
        unreachable!("taken only when ready")
    };
    ready
}

/// The credential a finished `attempt` was sent with, and the secret it presented (taken).
fn presented(
    machine: &Request,
    running: &mut [Running<'_>],
    attempt: AttemptId,
) -> Option<(CandidateKey, Option<Presented>)> {
    let entry = running.iter_mut().find(|r| r.id == attempt)?;
    let Stage::Finished(_, secret) = &mut entry.stage else { return None };
    Some((machine.offer(entry.candidate).candidate.key.clone(), secret.take()))
}

/// The next live attempt to progress, or `None` once `until` passes.
async fn next_progress(
    running: &mut [Running<'_>],
    until: Option<Instant>,
) -> Option<(usize, Progress)> {
    let mut timer = pin!(until.map(tokio::time::sleep_until));
    poll_fn(|cx| {
        for (at, entry) in running.iter_mut().enumerate() {
            let progress = match &mut entry.stage {
                Stage::Admitting(admitting) => admitting.as_mut().poll(cx).map(Progress::Admitted),
                Stage::Sending(sending) => {
                    sending.as_mut().poll(cx).map(|(tried, secret)| Progress::Tried(tried, secret))
                }
                Stage::Ready(_) | Stage::Moving | Stage::Finished(..) => continue,
            };
            if let Poll::Ready(progress) = progress {
                return Poll::Ready(Some((at, progress)));
            }
        }
        match timer.as_mut().as_pin_mut().map(|timer| timer.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    })
    .await
}
