//! One request as a machine (RESILIENCE.md §1, §2, §7, §8, §10): every decision about its
//! attempts, and nothing that sends.
//!
//! The proxy builds a [`Request`] from the plan, then asks it for one [`Step`] at a time and tells
//! it what happened. The machine decides which candidate goes next and in which [`Role`] (first
//! try, same-target retry, fallback, hedge, early start, continuation), when a slow first event
//! gets company, when to wait in place, when a verdict forbids any other target from answering,
//! and when nothing is left; the proxy's one attempt runner only performs. A hedge, an early
//! start and a continuation are attempts of the same state, so `max_attempts`, the providers a
//! race saw fail and a no-fallback verdict hold across all of them.
//!
//! Invariants:
//! - Pure: time is the request's own (`now`, the time since it arrived), the shared retry budget
//!   and the measured times to first event are asked through [`World`].
//! - At most two attempts are live at once: the one the request waits on and one racer (a hedge,
//!   or the early start of the fallback). The first real event wins; every other live attempt is
//!   cancelled ([`Step::Cancel`]) before the winner is served, and charged nothing.
//! - A candidate is started at most once, but for its one same-target retry.
//! - Only an attempt's own failure rules its provider out, and only when the verdict charges the
//!   provider or allows no other key of it.

use std::time::Duration;

use smallvec::SmallVec;

use crate::continuation::{self, Continuation, Relayed, RequestShape};
use crate::ids::CandidateKey;
use crate::outcome::{Fallback, RetrySame, Verdict};
use crate::routing::attempts::AttemptState;
use crate::routing::hedge::{HedgeAfter, PERCENTILE_FLOOR};
use crate::routing::{Candidate, Combo};

/// The percentile of a fallback's recent time to first event that its early start allows for.
pub const EARLY_PERCENTILE: u8 = 95;

/// One planned candidate, with the facts of its target the decisions read.
#[derive(Clone, Debug)]
pub struct Offer {
    pub candidate: Candidate,
    /// Tokens, when known: a `context_length_exceeded` moves only to larger windows.
    pub window: Option<u32>,
    pub continuation: Continuation,
}

impl Offer {
    pub fn key(&self) -> &CandidateKey {
        &self.candidate.key
    }

    /// The offers of `candidates`, each with its target's facts from `combo`.
    pub fn all(combo: &Combo, candidates: Vec<Candidate>) -> Vec<Self> {
        candidates
            .into_iter()
            .map(|candidate| {
                let target = &combo.targets[candidate.target];
                Self { window: target.context_window, continuation: target.continuation, candidate }
            })
            .collect()
    }
}

/// The limits one request runs under: the config's, read when it arrived.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_attempts: u32,
    /// No attempt starts after this, from the request's arrival.
    pub total: Duration,
    /// A streamed attempt's first-event deadline when another candidate could serve.
    pub first_event: Duration,
    /// A streamed attempt's deadline when nobody else could.
    pub first_byte: Duration,
    /// A non-streamed attempt's deadline, head and body together.
    pub non_stream: Duration,
    pub stream: bool,
    /// The combo's hedging rule; `None` never hedges.
    pub hedge: Option<HedgeAfter>,
}

/// What the machine asks of the world around it, at the moment it decides.
pub trait World {
    /// Withdraws one retry from the shared budget (RESILIENCE.md §8); `false` when spent.
    fn afford_retry(&mut self) -> bool;
    /// How long `key`'s target may go without its first real event by `rule`, from its recent
    /// times (`HedgeAfter::delay`); `None` when not trusted yet.
    fn first_event_delay(&self, key: &CandidateKey, rule: HedgeAfter) -> Option<Duration>;
    /// Whether `key`'s credential can be refreshed (an OAuth token) after a 401.
    fn refreshable(&self, key: &CandidateKey) -> bool;
    /// Whether `key`'s target refused a continuation before.
    fn incapable(&self, key: &CandidateKey) -> bool;
}

/// One attempt of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttemptId(u32);

/// Why an attempt is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The request's first attempt.
    First,
    /// The same target once more, after a retryable failure.
    Retry,
    /// The same target once more with the request repaired: what its credential could not
    /// read (another organisation's encrypted reasoning) left out.
    Repair,
    /// The next candidate, after the one before failed or was passed.
    Fallback,
    /// Company for a slow first event (the combo hedges).
    Hedge,
    /// The fallback of a slow first event, started so that its answer can begin by the
    /// deadline (the combo does not hedge).
    Early,
    /// Finishing a stream that broke after content reached the client.
    Continuation,
}

impl Role {
    /// Races a live attempt rather than following one.
    pub fn races(self) -> bool {
        matches!(self, Self::Hedge | Self::Early)
    }

    /// Paid from the retry budget and never waits for a concurrency slot.
    fn extra(self) -> bool {
        matches!(self, Self::Hedge | Self::Early | Self::Continuation)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::Retry => "retry",
            Self::Repair => "repair",
            Self::Fallback => "fallback",
            Self::Hedge => "hedge",
            Self::Early => "early",
            Self::Continuation => "continuation",
        }
    }
}

/// An attempt to start: admit, lease and find the secret of `candidate`, then report
/// [`Request::admitted`] (and send) or [`Event::Skipped`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    pub attempt: AttemptId,
    /// Index into the offers.
    pub candidate: usize,
    pub role: Role,
    /// By when its first real event (a non-streamed attempt: its whole answer) must come, from
    /// the request's arrival.
    pub first_event: Duration,
    /// How long a half-open probe slot it claims lasts.
    pub permit: Duration,
    /// May wait in line for a concurrency slot (within the request's deadline).
    pub queue: bool,
    /// For a continuation, how the target continues the answer so far.
    pub continuation: Option<continuation::Plan>,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Start(Start),
    /// A planned candidate not tried, and why (for the trace).
    Pass {
        candidate: usize,
        reason: &'static str,
    },
    /// Refresh the credential `attempt` presented (a 401 to an OAuth token), then report
    /// [`Event::Refreshed`].
    Refresh {
        attempt: AttemptId,
    },
    /// Wait for a live attempt's event, or until `until` (then ask for the next step).
    Wait {
        until: Option<Duration>,
    },
    /// Drop `attempt` unsettled: it lost a race, or another's verdict forbids it to answer.
    Cancel {
        attempt: AttemptId,
        why: Cancelled,
    },
    /// Return `attempt`'s answer to the client.
    Serve {
        attempt: AttemptId,
    },
    /// Return `attempt`'s error as the upstream gave it: its verdict allows no fallback.
    Refuse {
        attempt: AttemptId,
    },
    /// Nothing is left to try: the client gets the trace's error.
    Exhausted,
    /// A broken stream is not continued (`candidate`, when one is to blame): the client gets
    /// the terminal error event.
    NotContinued {
        candidate: Option<usize>,
        reason: &'static str,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// Another attempt's first real event came first.
    Lost,
    /// Another attempt's verdict allows no other target to answer.
    Refused,
}

/// What happened to a started attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Not admitted, no slot, or no secret: not an attempt.
    Skipped(&'static str),
    /// Its first real event came (a non-streamed attempt: its whole answer).
    Answered,
    /// It failed before the client saw anything.
    Failed(Verdict),
    /// The refresh after its 401 worked (`true`) or not.
    Refreshed(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Started, waiting for [`Request::admitted`].
    Admitting,
    Sending,
}

#[derive(Clone, Copy, Debug)]
struct Live {
    id: AttemptId,
    candidate: usize,
    role: Role,
    phase: Phase,
    first_event: Duration,
    /// Another candidate could serve if this one fails.
    others_left: bool,
}

/// A timer that starts a racer for the attempt the request waits on.
#[derive(Clone, Copy, Debug)]
struct Race {
    at: Duration,
    role: Role,
    /// The first candidate the racer is looked for from.
    from: usize,
}

/// A same-target retry, due at `at`.
#[derive(Clone, Copy, Debug)]
struct Retry {
    candidate: usize,
    at: Duration,
    /// [`Role::Retry`], or [`Role::Repair`] for one sent repaired.
    role: Role,
}

/// A primary failure, decided on once the racer is done too.
#[derive(Clone, Copy, Debug)]
struct Failure {
    id: AttemptId,
    candidate: usize,
    verdict: Verdict,
    others_left: bool,
}

/// Where a continuation of the served stream stands.
#[derive(Clone, Debug)]
struct Rescue {
    /// The next candidate to consider.
    from: usize,
    relayed: Relayed,
    shape: RequestShape,
    /// The first candidate that may not continue, and why.
    refusal: Option<(usize, &'static str)>,
    last_failed: Option<usize>,
}

/// One request's attempts. See the module documentation.
#[derive(Clone, Debug)]
pub struct Request {
    offers: Vec<Offer>,
    limits: Limits,
    attempts: AttemptState,
    /// The next candidate in plan order.
    cursor: usize,
    /// Candidates started as racers: the plan order passes them.
    raced: Vec<usize>,
    /// At most two: the attempt waited on and a racer (more only for a moment).
    live: SmallVec<[Live; 2]>,
    retry: Option<Retry>,
    /// The candidate whose one same-target retry is spent.
    retried: Option<usize>,
    failure: Option<Failure>,
    race: Option<Race>,
    early_used: bool,
    first: Option<AttemptId>,
    served: Option<(AttemptId, usize)>,
    rescue: Option<Box<Rescue>>,
    next_id: u32,
    /// Steps decided and not yet asked for, first first.
    steps: SmallVec<[Step; 2]>,
}

impl Request {
    pub fn new(offers: Vec<Offer>, limits: Limits) -> Self {
        Self {
            offers,
            limits,
            attempts: AttemptState::new(limits.max_attempts),
            cursor: 0,
            raced: Vec::new(),
            live: SmallVec::new(),
            retry: None,
            retried: None,
            failure: None,
            race: None,
            early_used: false,
            first: None,
            served: None,
            rescue: None,
            next_id: 0,
            steps: SmallVec::new(),
        }
    }

    pub fn offers(&self) -> &[Offer] {
        &self.offers
    }

    pub fn offer(&self, candidate: usize) -> &Offer {
        &self.offers[candidate]
    }

    /// The machine, done: its offer at `candidate`.
    pub fn into_offer(mut self, candidate: usize) -> Offer {
        self.offers.swap_remove(candidate)
    }

    /// Upstream attempts started so far, of every role.
    pub fn attempts(&self) -> u32 {
        self.attempts.attempts()
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether the attempt that served was not the request's first (a fallback, a retry, a
    /// racer that won).
    pub fn fell_back(&self) -> bool {
        self.served.is_some_and(|(id, _)| Some(id) != self.first)
    }

    /// The candidate `attempt` was started on.
    pub fn candidate_of(&self, attempt: AttemptId) -> Option<usize> {
        self.live.iter().find(|l| l.id == attempt).map(|l| l.candidate)
    }

    /// What to do next, at `now` (since the request arrived).
    pub fn next(&mut self, now: Duration, world: &mut dyn World) -> Step {
        if !self.steps.is_empty() {
            return self.steps.remove(0);
        }
        if self.served.is_some() {
            return self.next_rescue(now, world);
        }
        if let Some(race) = self.race
            && self.live.len() == 1
            && self.live[0].phase == Phase::Sending
        {
            if now < race.at {
                return Step::Wait { until: Some(race.at) };
            }
            self.race = None;
            if let Some(start) = self.racer(race, now) {
                return Step::Start(start);
            }
        }
        if !self.live.is_empty() {
            return Step::Wait { until: None };
        }
        if let Some(retry) = self.retry {
            if now < retry.at {
                return Step::Wait { until: Some(retry.at) };
            }
            self.retry = None;
            if self.attempts.another_allowed() && now < self.limits.total {
                return Step::Start(self.start(retry.candidate, retry.role, now));
            }
            return Step::Exhausted;
        }
        loop {
            if self.cursor >= self.offers.len()
                || !self.attempts.another_allowed()
                || now >= self.limits.total
            {
                return Step::Exhausted;
            }
            let candidate = self.cursor;
            if self.raced.contains(&candidate) {
                self.cursor += 1;
                continue;
            }
            if let Some(reason) = self.screen(candidate) {
                self.cursor += 1;
                return Step::Pass { candidate, reason };
            }
            let role = if self.first.is_none() { Role::First } else { Role::Fallback };
            return Step::Start(self.start(candidate, role, now));
        }
    }

    /// `attempt` was admitted and has its secret: whether it may be sent. A racer or a
    /// continuation is paid from the retry budget, asked last so that a candidate refused for
    /// another reason spends nothing; every role counts against `max_attempts`. `false` drops
    /// it unsettled.
    pub fn admitted(&mut self, attempt: AttemptId, now: Duration, world: &mut dyn World) -> bool {
        let Some(at) = self.live.iter().position(|l| l.id == attempt) else { return false };
        let live = self.live[at];
        let go = if live.role.extra() {
            self.attempts.another_allowed() && world.afford_retry() && self.attempts.start()
        } else {
            self.attempts.start()
        };
        if !go {
            self.live.remove(at);
            self.after_racer(now, world);
            if live.role == Role::Continuation
                && let Some(rescue) = &mut self.rescue
            {
                let reason = if self.attempts.another_allowed() {
                    "retry_budget"
                } else {
                    "no_attempts_left"
                };
                rescue.from = self.offers.len();
                rescue.refusal = Some((live.candidate, reason));
                rescue.last_failed = None;
            }
            return false;
        }
        self.live[at].phase = Phase::Sending;
        self.first.get_or_insert(attempt);
        if !live.role.races() && live.role != Role::Continuation {
            self.race = self.race_for(&live, now, world);
        }
        true
    }

    /// Tells the machine what happened to `attempt`.
    pub fn on(&mut self, attempt: AttemptId, event: Event, now: Duration, world: &mut dyn World) {
        let Some(at) = self.live.iter().position(|l| l.id == attempt) else { return };
        match event {
            Event::Skipped(reason) => {
                let live = self.live.remove(at);
                self.skipped(live, reason, now, world);
            }
            Event::Answered => self.answered(at),
            Event::Failed(verdict) => {
                let live = self.live.remove(at);
                self.failed(live, verdict, now, world);
            }
            Event::Refreshed(ok) => {
                let live = self.live.remove(at);
                if ok {
                    self.retry_same(live.candidate, now, Role::Retry);
                } else {
                    self.advance(live.candidate);
                }
            }
        }
    }

    fn skipped(&mut self, live: Live, reason: &'static str, now: Duration, world: &mut dyn World) {
        match live.role {
            // A racer refused: the next candidate after it may race instead, at once.
            Role::Hedge | Role::Early => {
                if self.live.iter().any(|l| !l.role.races()) {
                    let from = live.candidate + 1;
                    self.race = Some(Race { at: Duration::ZERO, role: live.role, from });
                }
                self.after_racer(now, world);
            }
            Role::Continuation => {
                if let Some(rescue) = &mut self.rescue {
                    rescue.from = live.candidate + 1;
                }
            }
            Role::First | Role::Retry | Role::Repair | Role::Fallback => {
                self.steps.push(Step::Pass { candidate: live.candidate, reason });
                self.advance(live.candidate);
            }
        }
    }

    fn answered(&mut self, at: usize) {
        let live = self.live.remove(at);
        self.race = None;
        for other in std::mem::take(&mut self.live) {
            self.steps.push(Step::Cancel { attempt: other.id, why: Cancelled::Lost });
        }
        if live.role == Role::Continuation {
            self.rescue = None;
        }
        self.served = Some((live.id, live.candidate));
        self.steps.push(Step::Serve { attempt: live.id });
    }

    fn failed(&mut self, live: Live, verdict: Verdict, now: Duration, world: &mut dyn World) {
        let provider_done =
            verdict.charges.provider.is_some() || verdict.fallback == Fallback::OtherProviderOnly;
        if provider_done {
            self.attempts.rule_out(&self.offers[live.candidate].key().provider);
        }
        if live.role == Role::Continuation {
            // A continuation that failed before its first event: the next target may try.
            self.attempts.rule_out(&self.offers[live.candidate].key().provider);
            if let Some(rescue) = &mut self.rescue {
                rescue.from = live.candidate + 1;
                rescue.last_failed = Some(live.candidate);
            }
            return;
        }
        // A mend goes first: the verdict's fallback is for the request once repaired.
        if verdict.retry_same == RetrySame::Repaired {
            if live.role.races() {
                // The attempt it raced sent the same body: it answers, or is mended, itself.
                self.after_racer(now, world);
                return;
            }
            if self.retried != Some(live.candidate) && self.attempts.another_allowed() {
                self.race = None;
                self.retry_same(live.candidate, now, Role::Repair);
                return;
            }
        }
        if self.refuses(live.candidate, &verdict) {
            self.attempts.close();
            self.race = None;
            for other in std::mem::take(&mut self.live) {
                self.steps.push(Step::Cancel { attempt: other.id, why: Cancelled::Refused });
            }
            self.steps.push(Step::Refuse { attempt: live.id });
            return;
        }
        let failure = Failure {
            id: live.id,
            candidate: live.candidate,
            verdict,
            others_left: live.others_left,
        };
        if live.role.races() {
            // The attempt the request waits on goes on; once it is done too, its own failure
            // (kept) is decided on.
            self.after_racer(now, world);
            return;
        }
        if self.live.is_empty() {
            self.decide(failure, now, world);
        } else {
            // A racer is still live: it may yet answer.
            self.race = None;
            self.failure = Some(failure);
        }
    }

    /// A racer is gone without answering: when the attempt it raced failed already, that
    /// failure is decided on now.
    fn after_racer(&mut self, now: Duration, world: &mut dyn World) {
        if self.live.is_empty()
            && let Some(primary) = self.failure.take()
        {
            self.decide(primary, now, world);
        }
    }

    /// After the attempt the request waited on failed and nothing is live: retry the same
    /// target once (RESILIENCE.md §2, §8), or move on.
    fn decide(&mut self, failure: Failure, now: Duration, world: &mut dyn World) {
        let Failure { id, candidate, verdict, others_left } = failure;
        let may = self.retried != Some(candidate) && self.attempts.another_allowed();
        let key = self.offers[candidate].key();
        if may {
            match verdict.retry_same {
                RetrySame::AfterRefresh if world.refreshable(key) => {
                    // Kept live (not an attempt) until the refresh is reported.
                    self.live.push(Live {
                        id,
                        candidate,
                        role: Role::Retry,
                        phase: Phase::Admitting,
                        first_event: now,
                        others_left,
                    });
                    self.steps.push(Step::Refresh { attempt: id });
                    return;
                }
                RetrySame::OnceWithinBudget if world.afford_retry() => {
                    self.retry_same(candidate, now, Role::Retry);
                    return;
                }
                // Waiting in place only when nobody else could serve, the upstream said how
                // long, and the wait fits the request's deadline.
                RetrySame::WaitIfAlone => {
                    if let Some(wait) = verdict.retry_after
                        && !others_left
                        && now + wait < self.limits.total
                        && world.afford_retry()
                    {
                        self.retry_same(candidate, now + wait, Role::Retry);
                        return;
                    }
                }
                _ => {}
            }
        }
        self.advance(candidate);
    }

    /// `candidate` once more, at `at`: its one same-target retry.
    fn retry_same(&mut self, candidate: usize, at: Duration, role: Role) {
        self.retry = Some(Retry { candidate, at, role });
        self.retried = Some(candidate);
    }

    /// The plan goes on after `candidate`.
    fn advance(&mut self, candidate: usize) {
        self.retried = None;
        self.cursor = self.cursor.max(candidate + 1);
    }

    /// Whether `verdict` (on `candidate`) allows no other target to answer: a policy refusal,
    /// the client's own error, a refusal about the request that no other provider could take,
    /// a context refusal with no larger window left. Records the context refusal.
    fn refuses(&mut self, candidate: usize, verdict: &Verdict) -> bool {
        if verdict.fallback == Fallback::LargerContextOnly {
            let failed = &self.offers[candidate];
            self.attempts.context_mut().refused_by(&failed.key().model, failed.window);
        }
        let failed = self.offers[candidate].key();
        let mut rest = self.offers[candidate + 1..]
            .iter()
            .filter(|o| !self.attempts.failed().contains(&o.key().provider));
        match verdict.fallback {
            Fallback::Yes => false,
            Fallback::No => true,
            // The request itself was refused: another key of the same provider would refuse
            // it the same way, another provider may take it.
            Fallback::OtherProviderOnly => !rest.any(|o| o.key().provider != failed.provider),
            Fallback::LargerContextOnly => {
                let context = self.attempts.context();
                !rest.any(|o| context.admits(&o.key().model, o.window))
            }
        }
    }

    /// Why `candidate` is not tried though the registry would admit it.
    fn screen(&self, candidate: usize) -> Option<&'static str> {
        let offer = &self.offers[candidate];
        self.attempts.screen(&offer.key().provider, &offer.key().model, offer.window)
    }

    /// Whether a candidate after `candidate` could still serve if it fails.
    fn others_left(&self, candidate: usize) -> bool {
        self.attempts.left() > 1
            && (candidate + 1..self.offers.len())
                .any(|c| !self.raced.contains(&c) && self.screen(c).is_none())
    }

    fn start(&mut self, candidate: usize, role: Role, now: Duration) -> Start {
        let others_left = self.others_left(candidate);
        let wait = match (self.limits.stream, others_left) {
            (false, _) => self.limits.non_stream,
            (true, true) => self.limits.first_event,
            (true, false) => self.limits.first_byte,
        };
        self.launch(candidate, role, now, wait, others_left, None)
    }

    fn launch(
        &mut self,
        candidate: usize,
        role: Role,
        now: Duration,
        wait: Duration,
        others_left: bool,
        continuation: Option<continuation::Plan>,
    ) -> Start {
        let id = AttemptId(self.next_id);
        self.next_id += 1;
        let left = self.limits.total.saturating_sub(now);
        let first_event = now + wait.min(left);
        self.live.push(Live {
            id,
            candidate,
            role,
            phase: Phase::Admitting,
            first_event,
            others_left,
        });
        Start {
            attempt: id,
            candidate,
            role,
            first_event,
            permit: wait.min(left),
            queue: !role.extra(),
            continuation,
        }
    }

    /// When a racer starts for `live`, the attempt the request now waits on: at the combo's
    /// hedge delay, or (no hedging) early enough that the next candidate's answer can begin by
    /// `live`'s first-event deadline, never earlier than a hedge would, and once per request.
    fn race_for(&self, live: &Live, now: Duration, world: &dyn World) -> Option<Race> {
        if !self.limits.stream || !live.others_left {
            return None;
        }
        let from = live.candidate + 1;
        let key = self.offers[live.candidate].key();
        if let Some(rule) = self.limits.hedge {
            let delay = world.first_event_delay(key, rule)?;
            return Some(Race { at: now + delay, role: Role::Hedge, from });
        }
        if self.early_used {
            return None;
        }
        let next = self.racer_candidate(live.candidate, from)?;
        let theirs = world
            .first_event_delay(self.offers[next].key(), HedgeAfter::Percentile(EARLY_PERCENTILE))?;
        let ours = world
            .first_event_delay(key, HedgeAfter::Percentile(EARLY_PERCENTILE))
            .unwrap_or(PERCENTILE_FLOOR)
            .max(PERCENTILE_FLOOR);
        let at = live.first_event.saturating_sub(theirs).max(now + ours);
        (at < live.first_event).then_some(Race { at, role: Role::Early, from })
    }

    /// The next candidate from `from` that may race the attempt on `primary`: on another
    /// provider, not raced before, not ruled out.
    fn racer_candidate(&self, primary: usize, from: usize) -> Option<usize> {
        let provider = &self.offers[primary].key().provider;
        (from..self.offers.len()).find(|&c| {
            self.offers[c].key().provider != *provider
                && !self.raced.contains(&c)
                && self.screen(c).is_none()
        })
    }

    fn racer(&mut self, race: Race, now: Duration) -> Option<Start> {
        let primary = self.live[0];
        if now >= self.limits.total || !self.attempts.another_allowed() {
            return None;
        }
        let candidate = self.racer_candidate(primary.candidate, race.from)?;
        self.raced.push(candidate);
        if race.role == Role::Early {
            self.early_used = true;
        }
        let others_left = self.others_left(candidate);
        let wait = if others_left { self.limits.first_event } else { self.limits.first_byte };
        Some(self.launch(candidate, race.role, now, wait, others_left, None))
    }

    /// Why no candidate after `served` could continue its stream if it broke, read when it
    /// starts: only spares a stream nobody could continue from keeping its text. `None` when one
    /// may.
    pub fn continuation_ruled_out(
        &self,
        served: usize,
        shape: RequestShape,
    ) -> Option<&'static str> {
        use continuation::Refusal;
        if shape.json_output {
            Some(Refusal::JsonOutput.code())
        } else if shape.forced_tool {
            Some(Refusal::ForcedTool.code())
        } else if !self.attempts.another_allowed() {
            Some("no_attempts_left")
        } else if !self.offers[served + 1..].iter().any(|o| o.continuation.is_on()) {
            Some(Refusal::NoMechanism.code())
        } else {
            None
        }
    }

    /// The served stream broke after content reached the client, with `relayed` shown: its
    /// provider is out, and the candidates after it are asked in order to continue
    /// (RESILIENCE.md §10). Then ask [`Self::next`].
    pub fn broke(&mut self, relayed: Relayed, shape: RequestShape) {
        let Some((_, served)) = self.served else { return };
        self.attempts.rule_out(&self.offers[served].key().provider);
        self.rescue = Some(Box::new(Rescue {
            from: served + 1,
            relayed,
            shape,
            refusal: None,
            last_failed: None,
        }));
    }

    fn next_rescue(&mut self, now: Duration, world: &mut dyn World) -> Step {
        if !self.live.is_empty() {
            return Step::Wait { until: None };
        }
        let Some(rescue) = self.rescue.take() else { return Step::Exhausted };
        let mut rescue = rescue;
        while rescue.from < self.offers.len() {
            let candidate = rescue.from;
            rescue.from += 1;
            let offer = &self.offers[candidate];
            if self.attempts.failed().contains(&offer.key().provider) {
                continue;
            }
            let incapable = world.incapable(offer.key());
            let plan = match continuation::decide(
                &rescue.relayed,
                rescue.shape,
                offer.continuation,
                incapable,
            ) {
                Ok(plan) => plan,
                Err(why) => {
                    rescue.refusal.get_or_insert((candidate, why.code()));
                    continue;
                }
            };
            if !self.attempts.another_allowed() || now >= self.limits.total {
                return Step::NotContinued { candidate: None, reason: "no_attempts_left" };
            }
            rescue.from = candidate;
            self.rescue = Some(rescue);
            let wait = self.limits.first_event;
            return Step::Start(self.launch(
                candidate,
                Role::Continuation,
                now,
                wait,
                false,
                Some(plan),
            ));
        }
        match (rescue.last_failed, rescue.refusal) {
            (Some(candidate), _) => {
                Step::NotContinued { candidate: Some(candidate), reason: "continuation_failed" }
            }
            (None, Some((candidate, reason))) => {
                Step::NotContinued { candidate: Some(candidate), reason }
            }
            (None, None) => Step::NotContinued {
                candidate: None,
                reason: continuation::Refusal::NoMechanism.code(),
            },
        }
    }
}
