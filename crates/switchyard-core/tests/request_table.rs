//! The request machine (`switchyard_core::request`) as a table: each row scripts what the
//! world reports and states the steps the machine must ask for, in order. No sockets, no
//! sleeps: time is the request's own, set by the row.
//!
//! Steps are written as short lines: `start b/m first` (candidate `b/m` on its only key, or
//! `a/m#k2` on key `k2`), `pass a/m provider_failed_this_request`, `wait 200ms`, `wait`,
//! `cancel a/m lost`, `serve b/m`, `refuse a/m`, `refresh a/m`, `exhausted`,
//! `not continued: reason`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_core::continuation::{Continuation, Relayed, RequestShape};
use switchyard_core::outcome::{BodyHint, ClassifyPolicy, Outcome, Upstream, Verdict, classify};
use switchyard_core::request::{AttemptId, Cancelled, Event, Limits, Offer, Request, Step, World};
use switchyard_core::routing::{Candidate, HedgeAfter};
use switchyard_core::{CandidateKey, UnixMillis};

const NOW: UnixMillis = UnixMillis(1_795_976_400_000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `provider/model` or `provider/model#credential`, with a continuation mechanism when the
/// provider's name starts with `c` (a "capable" provider).
fn offer(index: usize, spec: &str) -> Offer {
    let (target, credential) = spec.split_once('#').unwrap_or((spec, "k"));
    let (provider, model) = target.split_once('/').expect("provider/model");
    let continuation =
        if provider.starts_with('c') { Continuation::Anthropic } else { Continuation::Off };
    Offer {
        candidate: Candidate { target: index, key: CandidateKey::new(provider, credential, model) },
        window: None,
        continuation,
    }
}

fn limits() -> Limits {
    Limits {
        max_attempts: 3,
        total: secs(120),
        first_event: secs(15),
        first_byte: secs(60),
        non_stream: secs(600),
        stream: true,
        hedge: None,
    }
}

/// The limits of a combo that hedges after a fixed 200 ms.
fn hedging() -> Limits {
    Limits { hedge: Some(HedgeAfter::Fixed(ms(200))), ..limits() }
}

fn verdict(status: u16, body: BodyHint, headers: &[(&'static str, &'static str)]) -> Verdict {
    let mut map = HeaderMap::new();
    for &(name, value) in headers {
        map.append(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    let upstream = Upstream::Response { status, headers: &map, body };
    classify(&Outcome::new(upstream), &ClassifyPolicy::default(), NOW)
}

fn failed(status: u16) -> Event {
    Event::Failed(verdict(status, BodyHint::None, &[]))
}

/// The world a row scripts: the retry budget, the measured times to first event, which
/// credentials refresh and which targets refused a continuation.
#[derive(Default)]
struct Scripted {
    retries: u32,
    spent: bool,
    delays: HashMap<String, Duration>,
    refreshable: HashSet<String>,
    incapable: HashSet<String>,
}

impl World for Scripted {
    fn afford_retry(&mut self) -> bool {
        if self.spent {
            return false;
        }
        self.retries += 1;
        true
    }

    fn first_event_delay(&self, key: &CandidateKey, rule: HedgeAfter) -> Option<Duration> {
        match rule {
            HedgeAfter::Fixed(delay) => Some(delay),
            HedgeAfter::Percentile(_) => self.delays.get(&key.target_label()).copied(),
        }
    }

    fn refreshable(&self, key: &CandidateKey) -> bool {
        self.refreshable.contains(&key.target_label())
    }

    fn incapable(&self, key: &CandidateKey) -> bool {
        self.incapable.contains(&key.target_label())
    }
}

/// One row's run: the machine, the world and the request's clock.
struct Run {
    request: Request,
    world: Scripted,
    now: Duration,
    /// The attempt last started on each candidate.
    started: HashMap<String, AttemptId>,
}

impl Run {
    fn new(specs: &[&str], limits: Limits) -> Self {
        let offers = specs.iter().enumerate().map(|(i, s)| offer(i, s)).collect();
        Self {
            request: Request::new(offers, limits),
            world: Scripted::default(),
            now: Duration::ZERO,
            started: HashMap::new(),
        }
    }

    fn name(&self, candidate: usize) -> String {
        let key = self.request.offer(candidate).key();
        let label = key.target_label();
        if key.credential.as_str() == "k" { label } else { format!("{label}#{}", key.credential) }
    }

    fn id(&self, name: &str) -> AttemptId {
        *self.started.get(name).unwrap_or_else(|| panic!("{name} was never started"))
    }

    fn line(&mut self, step: &Step) -> String {
        let name_of = |run: &Self, id: AttemptId| {
            let (name, _) = run.started.iter().find(|(_, a)| **a == id).expect("started");
            name.clone()
        };
        match step {
            Step::Start(start) => {
                let name = self.name(start.candidate);
                self.started.insert(name.clone(), start.attempt);
                format!("start {name} {}", start.role.as_str())
            }
            Step::Pass { candidate, reason } => format!("pass {} {reason}", self.name(*candidate)),
            Step::Refresh { attempt } => format!("refresh {}", name_of(self, *attempt)),
            Step::Wait { until: None } => "wait".to_owned(),
            Step::Wait { until: Some(until) } => format!("wait {}ms", until.as_millis()),
            Step::Cancel { attempt, why } => {
                let why = match why {
                    Cancelled::Lost => "lost",
                    Cancelled::Refused => "refused",
                };
                format!("cancel {} {why}", name_of(self, *attempt))
            }
            Step::Serve { attempt } => format!("serve {}", name_of(self, *attempt)),
            Step::Refuse { attempt } => format!("refuse {}", name_of(self, *attempt)),
            Step::Exhausted => "exhausted".to_owned(),
            Step::NotContinued { reason, .. } => format!("not continued: {reason}"),
        }
    }

    /// Asks for as many steps as `expected` has, and checks them.
    fn steps(&mut self, expected: &[&str]) {
        let seen: Vec<String> = expected
            .iter()
            .map(|_| {
                let step = self.request.next(self.now, &mut self.world);
                self.line(&step)
            })
            .collect();
        assert_eq!(seen, expected, "at {:?}", self.now);
    }

    fn at(&mut self, now: Duration) -> &mut Self {
        self.now = now;
        self
    }

    /// `name` is admitted: `true` when the machine lets it be sent.
    fn admit(&mut self, name: &str) -> bool {
        let id = self.id(name);
        self.request.admitted(id, self.now, &mut self.world)
    }

    fn on(&mut self, name: &str, event: Event) {
        let id = self.id(name);
        self.request.on(id, event, self.now, &mut self.world);
    }

    /// Started and admitted.
    fn sent(&mut self, name: &str) {
        assert!(self.admit(name), "{name} may be sent");
    }
}

fn text(s: &str) -> Relayed {
    let mut relayed = Relayed::default();
    relayed.text(s);
    relayed
}

#[test]
fn a_503_is_retried_on_the_same_target_then_falls_back() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.steps(&["wait"]);
    run.on("a/m", failed(503));
    run.steps(&["start a/m retry"]);
    run.sent("a/m");
    run.on("a/m", failed(503));
    run.steps(&["start b/m fallback"]);
    run.sent("b/m");
    run.on("b/m", Event::Answered);
    run.steps(&["serve b/m"]);
    assert_eq!(run.request.attempts(), 3);
    assert!(run.request.fell_back());
    assert_eq!(run.world.retries, 1, "the retry was paid from the budget");
}

#[test]
fn a_retry_the_budget_cannot_pay_for_falls_back_at_once() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.world.spent = true;
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", failed(503));
    run.steps(&["start b/m fallback"]);
}

fn stale_reasoning() -> Event {
    Event::Failed(verdict(400, BodyHint::StaleReasoning, &[]))
}

#[test]
fn stale_encrypted_reasoning_is_sent_once_more_repaired_without_the_budget() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.world.spent = true;
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", stale_reasoning());
    run.steps(&["start a/m repair"]);
    run.sent("a/m");
    run.on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
    assert_eq!(run.request.attempts(), 2, "the repaired request is an attempt");
    assert_eq!(run.world.retries, 0, "a mend is not load: the budget is not asked");
}

#[test]
fn a_repaired_request_refused_again_is_the_client_s_error_and_never_repaired_twice() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", stale_reasoning());
    run.steps(&["start a/m repair"]);
    run.sent("a/m");
    run.on("a/m", stale_reasoning());
    run.steps(&["refuse a/m"]);
}

#[test]
fn stale_reasoning_with_no_attempt_left_is_refused_as_the_upstream_said() {
    let mut run = Run::new(&["a/m", "b/m"], Limits { max_attempts: 1, ..limits() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", stale_reasoning());
    run.steps(&["refuse a/m"]);
}

#[test]
fn a_repair_scheduled_while_a_hedge_races_waits_for_the_hedge() {
    let mut run = Run::new(&["a/m", "b/m"], Limits { max_attempts: 4, ..hedging() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(200)).steps(&["start b/m hedge"]);
    run.sent("b/m");
    run.at(ms(250)).on("a/m", stale_reasoning());
    run.steps(&["wait"]);
    run.at(ms(400)).on("b/m", failed(503));
    run.steps(&["start a/m repair"]);
    run.sent("a/m");
    run.on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
}

#[test]
fn a_repair_counts_against_max_attempts_like_every_role() {
    let mut run = Run::new(&["a/m", "b/m"], Limits { max_attempts: 2, ..limits() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", stale_reasoning());
    run.steps(&["start a/m repair"]);
    run.sent("a/m");
    run.on("a/m", failed(503));
    run.steps(&["exhausted"]);
}

#[test]
fn a_hedge_refused_for_stale_reasoning_leaves_the_primary_to_answer() {
    let mut run = Run::new(&["a/m", "b/m", "c/m"], Limits { max_attempts: 4, ..hedging() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(200)).steps(&["start b/m hedge"]);
    run.sent("b/m");
    run.at(ms(250)).on("b/m", stale_reasoning());
    run.steps(&["wait"]);
    run.at(ms(400)).on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
}

#[test]
fn a_hedge_fires_at_its_delay_and_wins_and_the_primary_is_cancelled() {
    let mut run = Run::new(&["a/m", "b/m"], hedging());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.steps(&["wait 200ms"]);
    run.at(ms(200)).steps(&["start b/m hedge"]);
    run.sent("b/m");
    run.steps(&["wait"]);
    run.at(ms(350)).on("b/m", Event::Answered);
    run.steps(&["cancel a/m lost", "serve b/m"]);
    assert_eq!(run.world.retries, 1, "the hedge drew from the budget");
    assert!(run.request.fell_back(), "a hedge that wins serves as a fallback");
}

#[test]
fn a_hedge_never_goes_to_the_primary_s_provider() {
    let mut run = Run::new(&["a/m#k1", "a/m#k2", "b/m"], hedging());
    run.steps(&["start a/m#k1 first"]);
    run.sent("a/m#k1");
    run.at(ms(200)).steps(&["start b/m hedge"]);
}

#[test]
fn a_primary_that_answers_first_cancels_its_hedge() {
    let mut run = Run::new(&["a/m", "b/m"], hedging());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(200)).steps(&["start b/m hedge"]);
    run.sent("b/m");
    run.at(ms(300)).on("a/m", Event::Answered);
    run.steps(&["cancel b/m lost", "serve a/m"]);
    assert!(!run.request.fell_back());
}

#[test]
fn a_break_is_continued_on_the_next_capable_provider_never_one_the_race_saw_fail() {
    // `c1` and `c2` continue answers; `c1` hedged and failed, so the break goes to `c2`.
    let mut run = Run::new(&["a/m", "c1/m", "c2/m"], Limits { max_attempts: 4, ..hedging() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(200)).steps(&["start c1/m hedge"]);
    run.sent("c1/m");
    run.at(ms(300)).on("c1/m", failed(503));
    run.steps(&["wait"]);
    run.at(ms(900)).on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
    run.request.broke(text("Hello, wor"), RequestShape::default());
    run.at(secs(3)).steps(&["start c2/m continuation"]);
    run.sent("c2/m");
    run.on("c2/m", Event::Answered);
    run.steps(&["serve c2/m"]);
    assert_eq!(run.request.attempts(), 3);
}

#[test]
fn a_break_with_no_capable_provider_ends_with_an_honest_error() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
    assert_eq!(
        run.request.continuation_ruled_out(0, RequestShape::default()),
        Some("no_continuation_mechanism"),
        "the relay keeps no text for it"
    );
    run.request.broke(text("Hello"), RequestShape::default());
    run.steps(&["not continued: no_continuation_mechanism"]);
}

#[test]
fn a_continuation_that_fails_before_its_first_event_passes_to_the_next_capable_target() {
    let mut run = Run::new(&["a/m", "c1/m", "c2/m"], Limits { max_attempts: 4, ..limits() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
    run.request.broke(text("Hello"), RequestShape::default());
    run.steps(&["start c1/m continuation"]);
    run.sent("c1/m");
    run.on("c1/m", failed(503));
    run.steps(&["start c2/m continuation"]);
    run.sent("c2/m");
    run.on("c2/m", failed(502));
    run.steps(&["not continued: continuation_failed"]);
}

#[test]
fn a_policy_refusal_ends_the_race_and_no_hedge_may_answer() {
    let mut run = Run::new(&["a/m", "b/m"], hedging());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(200)).steps(&["start b/m hedge"]);
    run.sent("b/m");
    run.at(ms(400)).on("a/m", Event::Failed(verdict(400, BodyHint::ContentPolicy, &[])));
    run.steps(&["cancel b/m refused", "refuse a/m"]);
    // The hedge's answer, had it come, is not for this request any more.
    run.on("b/m", Event::Answered);
    run.steps(&["exhausted"]);
}

#[test]
fn max_attempts_is_shared_by_every_role() {
    let hedging = Limits { max_attempts: 3, ..hedging() };
    let mut run = Run::new(&["a/m", "b/m", "c1/m", "c2/m"], hedging);
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(200)).steps(&["start b/m hedge"]);
    run.sent("b/m");
    run.at(ms(300)).on("b/m", Event::Answered);
    run.steps(&["cancel a/m lost", "serve b/m"]);
    run.request.broke(text("Hi"), RequestShape::default());
    run.steps(&["start c1/m continuation"]);
    run.sent("c1/m");
    run.on("c1/m", failed(503));
    // Three attempts (first, hedge, continuation): the fourth is refused, whatever its role.
    run.steps(&["not continued: no_attempts_left"]);
    assert_eq!(run.request.attempts(), 3);
}

#[test]
fn the_attempt_cap_ends_the_plan_with_candidates_left() {
    let mut run = Run::new(&["a/m", "b/m", "c/m", "d/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", failed(503));
    run.steps(&["start a/m retry"]);
    run.sent("a/m");
    run.on("a/m", failed(503));
    run.steps(&["start b/m fallback"]);
    run.sent("b/m");
    run.on("b/m", failed(401));
    run.steps(&["exhausted"]);
}

#[test]
fn a_retry_after_is_waited_only_when_alone_and_inside_the_deadline() {
    let limited = [("retry-after", "2")];
    // Alone: waited, then the same target again.
    let mut run = Run::new(&["a/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(secs(1)).on("a/m", Event::Failed(verdict(429, BodyHint::None, &limited)));
    run.steps(&["wait 3000ms"]);
    run.at(secs(3)).steps(&["start a/m retry"]);

    // With another candidate: no wait, the next one at once.
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(secs(1)).on("a/m", Event::Failed(verdict(429, BodyHint::None, &limited)));
    run.steps(&["start b/m fallback"]);

    // Alone, but the wait would pass the request's deadline: the 429 goes back at once.
    let mut run = Run::new(&["a/m"], Limits { total: secs(2), ..limits() });
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(secs(1)).on("a/m", Event::Failed(verdict(429, BodyHint::None, &limited)));
    run.steps(&["exhausted"]);
}

#[test]
fn a_401_to_a_refreshable_token_is_refreshed_then_retried_once() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.world.refreshable.insert("a/m".into());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.on("a/m", failed(401));
    run.steps(&["refresh a/m"]);
    run.on("a/m", Event::Refreshed(true));
    run.steps(&["start a/m retry"]);
    run.sent("a/m");
    run.on("a/m", failed(401));
    run.steps(&["start b/m fallback"]);
}

#[test]
fn a_half_open_probe_is_served_at_its_first_real_event() {
    // The machine serves at the first real event: the runner settles the probe there (its
    // `Attempt::answered`), long before the stream ends.
    let mut run = Run::new(&["a/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.at(ms(700)).on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
}

#[test]
fn a_subscription_whose_window_is_spent_falls_back() {
    let spent = verdict(
        429,
        BodyHint::SubscriptionLimit { resets_in: Some(secs(3 * 3600)), resets_at: None },
        &[],
    );
    let mut run = Run::new(&["a/m#login", "b/m"], limits());
    run.steps(&["start a/m#login first"]);
    run.sent("a/m#login");
    run.on("a/m#login", Event::Failed(spent));
    run.steps(&["start b/m fallback"]);
}

#[test]
fn a_skipped_candidate_is_passed_with_its_reason_and_is_no_attempt() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.steps(&["start a/m first"]);
    run.on("a/m", Event::Skipped("at_capacity"));
    run.steps(&["pass a/m at_capacity", "start b/m first"]);
    run.sent("b/m");
    assert_eq!(run.request.attempts(), 1);
}

#[test]
fn a_provider_that_failed_is_passed_for_its_other_keys() {
    let mut run = Run::new(&["a/m#k1", "a/m#k2", "b/m"], limits());
    run.steps(&["start a/m#k1 first"]);
    run.sent("a/m#k1");
    run.on("a/m#k1", Event::Failed(verdict(500, BodyHint::None, &[])));
    run.steps(&["start a/m#k1 retry"]);
    run.sent("a/m#k1");
    run.on("a/m#k1", Event::Failed(verdict(500, BodyHint::None, &[])));
    run.steps(&["pass a/m#k2 provider_failed_this_request", "start b/m fallback"]);
}

#[test]
fn a_slow_first_event_is_rescued_by_the_deadline_not_after_it() {
    // No hedging; the fallback answers within 900 ms at p95: it starts at 15 s - 900 ms, so its
    // answer can begin by the primary's 15 s deadline.
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.world.delays.insert("b/m".into(), ms(900));
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.steps(&["wait 14100ms"]);
    run.at(ms(14_100)).steps(&["start b/m early"]);
    run.sent("b/m");
    run.at(ms(14_950)).on("b/m", Event::Answered);
    run.steps(&["cancel a/m lost", "serve b/m"]);
    assert_eq!(run.world.retries, 1, "the early start drew from the budget");
}

#[test]
fn an_early_start_is_never_earlier_than_a_hedge_would_be_and_only_once() {
    // The fallback is slower than the deadline leaves room for: started no earlier than the
    // primary's own p95 (4 s) into the attempt.
    let mut run = Run::new(&["a/m", "b/m", "c/m"], Limits { max_attempts: 5, ..limits() });
    run.world.delays.insert("a/m".into(), secs(4));
    run.world.delays.insert("b/m".into(), secs(14));
    run.world.delays.insert("c/m".into(), secs(1));
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.steps(&["wait 4000ms"]);
    run.at(secs(4)).steps(&["start b/m early"]);
    run.sent("b/m");
    run.at(secs(5)).on("b/m", failed(503));
    run.steps(&["wait"]);
    run.at(secs(15)).on("a/m", Event::Failed(verdict(504, BodyHint::None, &[])));
    // The primary's retry (a 504 is retried once) gets no second early start.
    run.steps(&["start a/m retry"]);
    run.sent("a/m");
    run.steps(&["wait"]);
}

#[test]
fn no_early_start_without_a_measured_fallback_or_with_hedging_off_for_a_non_stream() {
    let mut run = Run::new(&["a/m", "b/m"], limits());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.steps(&["wait"]);

    let mut run = Run::new(&["a/m", "b/m"], Limits { stream: false, ..limits() });
    run.world.delays.insert("b/m".into(), ms(900));
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    run.steps(&["wait"]);
}

#[test]
fn a_request_with_no_stream_is_served_whole_and_never_continued() {
    let mut run = Run::new(&["c1/m", "c2/m"], Limits { stream: false, ..limits() });
    run.steps(&["start c1/m first"]);
    run.sent("c1/m");
    run.on("c1/m", Event::Answered);
    run.steps(&["serve c1/m"]);
    assert!(!run.request.fell_back());
}

/// The session rules of RESILIENCE.md §11 with the machine: a request's plan is steered by its
/// session's pin (`routing::session`), the machine starts on what the steered plan puts first,
/// and what the machine's attempts showed moves the pin.
mod sessions {
    use super::*;
    use switchyard_core::routing::Plan;
    use switchyard_core::routing::session::{
        Pin, SessionKey, SessionLimits, Sessions, Shown, Steer,
    };

    const LIMITS: SessionLimits = SessionLimits { max: 8, idle_ms: 600_000 };

    /// A request of `session` over `specs` in the user's order (`ordered`): its plan steered by
    /// the session's pin, its machine ready.
    fn request(
        sessions: &mut Sessions,
        session: SessionKey,
        specs: &[&str],
        ordered: bool,
    ) -> (Run, Steer) {
        let mut run = Run::new(specs, limits());
        let candidates = run.request.offers().iter().map(|o| o.candidate.clone()).collect();
        let mut plan = Plan { candidates, ..Plan::default() };
        let pin: Option<Pin> = sessions.pin(session, NOW);
        let steered = sessions.steer(&mut plan, pin.as_ref(), ordered, |_| false);
        let offers: Vec<Offer> = plan
            .candidates
            .into_iter()
            .map(|c| {
                let spec = run.request.offers().iter().find(|o| o.candidate == c).cloned();
                spec.expect("a planned candidate")
            })
            .collect();
        run.request = Request::new(offers, limits());
        (run, steered)
    }

    fn key(spec: &str) -> CandidateKey {
        let (provider, model) = spec.split_once('/').unwrap();
        CandidateKey::new(provider, "k", model)
    }

    #[test]
    fn a_break_moves_the_session_before_the_terminal_event_and_the_retry_starts_elsewhere() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("local", "agent");
        let (mut run, steered) = request(&mut sessions, s, &["a/m", "b/m"], true);
        run.steps(&["start a/m first"]);
        run.sent("a/m");
        run.on("a/m", Event::Answered);
        run.steps(&["serve a/m"]);
        sessions.served(s, &key("a/m"), NOW, &steered);
        // The stream breaks: the relay tells the table first, then asks the machine.
        sessions.broke(s, &key("a/m"), NOW);
        run.request.broke(text("Hel"), RequestShape::default());
        run.steps(&["not continued: no_continuation_mechanism"]);
        // The client's retry, sent the moment it reads the terminal event.
        let (mut retry, steered) = request(&mut sessions, s, &["a/m", "b/m"], true);
        assert!(matches!(steered, Steer::Moved { .. }), "{steered:?}");
        retry.steps(&["start b/m first"]);
    }

    #[test]
    fn a_session_returns_home_only_after_a_whole_streamed_answer_there() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("local", "agent");
        sessions.served(s, &key("a/m"), NOW, &Steer::New);
        sessions.broke(s, &key("a/m"), NOW);
        let (_, moved) = request(&mut sessions, s, &["a/m", "b/m"], true);
        sessions.served(s, &key("b/m"), NOW, &moved);
        // A probe's one token restores a breaker, not a home.
        sessions.shown(&key("a/m"), Shown::Whole);
        let (mut run, _) = request(&mut sessions, s, &["a/m", "b/m"], true);
        run.steps(&["start b/m first"]);
        // Another session's whole stream on a: it has healed.
        sessions.shown(&key("a/m"), Shown::WholeStream);
        let (mut run, steered) = request(&mut sessions, s, &["a/m", "b/m"], true);
        assert!(matches!(steered, Steer::Returned { .. }), "{steered:?}");
        run.steps(&["start a/m first"]);
    }

    #[test]
    fn the_users_order_wins_over_a_pin_the_session_never_chose() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("local", "pinned by another combo");
        // Another combo served it on b first.
        sessions.served(s, &key("b/m"), NOW, &Steer::New);
        sessions.shown(&key("a/m"), Shown::Whole);
        // Not an order: the pin holds.
        let (mut run, _) = request(&mut sessions, s, &["a/m", "b/m"], false);
        run.steps(&["start b/m first"]);
        // The user's order: back to the healthy target above the pin.
        let (mut run, _) = request(&mut sessions, s, &["a/m", "b/m"], true);
        run.steps(&["start a/m first"]);
    }
}

/// The limits the proxy gives an embeddings request: not streamed, never hedged (an answer is a
/// few hundred milliseconds, and a second one is billed whole), whatever its combo says. Its
/// offers are one embedding space's (`routing::embeddings`): the rows need no other.
fn embeddings() -> Limits {
    Limits { stream: false, hedge: None, ..limits() }
}

#[test]
fn an_embeddings_request_moves_from_a_rate_limited_key_to_the_next_key_of_its_space() {
    let mut run = Run::new(&["a/m#k1", "a/m#k2", "b/m-mirror"], embeddings());
    run.steps(&["start a/m#k1 first"]);
    run.sent("a/m#k1");
    run.on("a/m#k1", failed(429));
    run.steps(&["start a/m#k2 fallback"]);
    run.sent("a/m#k2");
    run.on("a/m#k2", failed(500));
    run.steps(&["start a/m#k2 retry"]);
    run.sent("a/m#k2");
    run.on("a/m#k2", failed(500));
    run.steps(&["exhausted"]);
    assert_eq!(run.request.attempts(), 3, "max_attempts holds");
}

#[test]
fn a_slow_embeddings_request_is_never_raced_and_waits_for_its_own_deadline() {
    let mut run = Run::new(&["a/m", "b/m"], embeddings());
    run.steps(&["start a/m first"]);
    run.sent("a/m");
    // Nothing starts beside it however long it takes, until its non-streamed deadline.
    run.steps(&["wait"]);
    run.at(secs(30)).steps(&["wait"]);
    run.at(secs(45)).on("a/m", failed(504));
    run.steps(&["start a/m retry"]);
    run.sent("a/m");
    run.on("a/m", Event::Answered);
    run.steps(&["serve a/m"]);
    assert_eq!(run.world.retries, 1, "only the retry drew from the budget");
}
