//! Hedged first token (RESILIENCE.md §10): a streamed attempt that is slow to its first real
//! event gets company.
//!
//! The attempt loop hands [`Proxy::race`] its attempt (a future that resolves once the stream's
//! first real event arrives, or the attempt fails) and, when the combo hedges, the rule and
//! the candidates after it. When the first event is later than the rule's delay, the next
//! eligible candidate on another provider is admitted and started too, if the retry budget
//! allows; the first real event wins.
//!
//! Invariants:
//! - The loser is cancelled by dropping its future: its connection closes, and its
//!   [`switchyard_core::resilience::Attempt`] is dropped unsettled, which charges no layer
//!   and releases any half-open probe slot it held.
//! - A failure of either attempt before its first event does not end the other: the survivor
//!   is awaited. A failure is traced and rules out its provider in the request's live state
//!   (so a continuation of the winner never goes there); only the primary's failure goes back
//!   to the loop (for its retry and fallback decisions), and only when neither served.
//! - A primary verdict that forbids falling back (a policy refusal, the client's own error)
//!   ends the race at once: the hedge is cancelled and may not answer instead.
//! - The hedge is an attempt of the same live state (started there, so primary + hedge +
//!   continuation never exceed `max_attempts`) and spends a retry from the budget, asked last
//!   so that a candidate refused for another reason spends nothing. Each raced attempt owns its
//!   rescue: a hedge winner's mid-answer break is continued like the primary's.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use switchyard_core::routing::{Candidate, Combo, HedgeAfter, Target};
use tokio::time::Instant;

use super::exhausted::Trace;
use super::upstream::Presented;
use super::{
    Live, Proxy, Routes, ScreenTarget as _, Sending, Tried, TriedResult, anyone_else,
    first_event_wait, rule_out_provider,
};
use switchyard_core::outcome::Fallback;
use switchyard_core::resilience::Attempt;

/// What a hedge may be started with, for one primary attempt. Everything else (the combo,
/// the plan, the providers ruled out, the attempts left, the deadline) is read from the
/// request's live state in `sending`, at the moment it matters.
pub(super) struct Hedging<'a, 's, 'b> {
    pub routes: &'a Routes,
    pub sending: &'a Sending<'s, 'b>,
    /// The primary's candidate.
    pub primary: &'a Candidate,
    /// When the primary was sent.
    pub started: Instant,
    /// How long its first real event may take before a hedge starts.
    pub delay: Duration,
    /// The index of the first candidate after the primary.
    pub next: usize,
    /// Candidates already tried as hedges by this request.
    pub hedged: &'a [usize],
}

/// What a race came to.
pub(super) struct Raced {
    /// The result the loop goes on with: the winner's, or the primary's failure.
    pub tried: Tried,
    /// The hedge, when one was started.
    pub hedge: Option<HedgeRun>,
}

pub(super) struct HedgeRun {
    /// Its candidate's index in the plan.
    pub index: usize,
    /// Whether [`Raced::tried`] is the hedge's (it served).
    pub won: bool,
    pub started: Instant,
}

/// A hedge candidate, admitted.
struct Picked<'a> {
    index: usize,
    candidate: &'a Candidate,
    target: &'a Target,
    attempt: Attempt,
    secret: Option<Presented>,
    /// How long it may take to its first real event.
    wait: Duration,
}

fn served(tried: &Tried) -> bool {
    matches!(tried.result, TriedResult::Served(..))
}

impl Proxy {
    /// How long `candidate`'s first real event may take before a hedge starts, when its combo
    /// hedges, the request streams and another attempt is allowed; `None` otherwise.
    pub(super) fn hedge_delay(
        &self,
        routes: &Routes,
        combo: &Combo,
        candidate: &Candidate,
        stream: bool,
        others_left: bool,
    ) -> Option<Duration> {
        let after: HedgeAfter = combo.hedge?;
        if !stream || !others_left {
            return None;
        }
        let (provider, model) = (&candidate.key.provider, &candidate.key.model);
        let sketch = self.registry.first_event_sketch(provider, model);
        after.delay(sketch.as_ref(), routes.config.timeouts.first_event, self.clock.now())
    }

    /// Feeds the time to a stream's first real event to its target's sketch.
    pub(super) fn observe_first_event(&self, key: &switchyard_core::CandidateKey, took: Duration) {
        self.registry.observe_first_event(&key.provider, &key.model, took, self.clock.now());
    }

    /// Runs `primary`, hedging it as `hedging` allows (see the module documentation).
    pub(super) async fn race(
        &self,
        primary: impl Future<Output = Tried>,
        hedging: Option<Hedging<'_, '_, '_>>,
        trace: &mut Trace,
    ) -> Raced {
        match hedging {
            None => Raced { tried: primary.await, hedge: None },
            // Boxed: a hedge's machinery (admitting a second candidate, two attempts in a
            // select) is most of a race's size, and every request's future holds its race,
            // copied each time that future moves: 4.8 KB of the 7.5 KB it took (issue 33).
            Some(h) => Box::pin(self.hedged(primary, h, trace)).await,
        }
    }

    /// [`Proxy::race`] with a hedge to start once `h.delay` has passed.
    async fn hedged(
        &self,
        primary: impl Future<Output = Tried>,
        h: Hedging<'_, '_, '_>,
        trace: &mut Trace,
    ) -> Raced {
        let mut primary = pin!(primary);
        tokio::select! {
            tried = &mut primary => return Raced { tried, hedge: None },
            () = tokio::time::sleep_until(h.started + h.delay) => {}
        }
        // Admitting may wait for an OAuth token: the primary is still raced meanwhile.
        let picked = tokio::select! {
            tried = &mut primary => return Raced { tried, hedge: None },
            picked = self.pick_hedge(&h) => picked,
        };
        let Some(p) = picked else {
            return Raced { tried: primary.await, hedge: None };
        };
        self.counters.hedges_started.fetch_add(1, Ordering::Relaxed);
        trace.hedge(p.candidate, "started", h.started.elapsed());
        tracing::info!(primary = %h.primary.key, hedge = %p.candidate.key, "hedging a slow first event");
        let hedge_started = Instant::now();
        let (sending, live) = (h.sending, h.sending.live);
        let first_event = hedge_started + p.wait;
        let mut hedge = pin!(self.attempt(
            h.routes,
            sending,
            (p.index, p.candidate, p.target),
            p.secret.as_ref(),
            p.attempt,
            first_event.min(sending.deadline),
        ));
        let run = |won| Some(HedgeRun { index: p.index, won, started: hedge_started });
        let mut primary_failed: Option<Tried> = None;
        let mut hedge_failed = false;
        loop {
            tokio::select! {
                tried = &mut primary, if primary_failed.is_none() => {
                    if served(&tried) {
                        if !hedge_failed {
                            let took = hedge_started.elapsed();
                            trace.hedge(p.candidate, "lost", took);
                            // Cancelled before its first event: it takes longer than this.
                            self.observe_first_event(&p.candidate.key, took);
                        }
                        return Raced { tried, hedge: run(false) };
                    }
                    // A verdict that forbids falling back (a policy refusal, the client's own
                    // error) holds across the race: the hedge may not answer instead.
                    if final_verdict(&tried) {
                        live.lock().close();
                        if !hedge_failed {
                            trace.hedge(p.candidate, "cancelled", hedge_started.elapsed());
                        }
                        return Raced { tried, hedge: run(false) };
                    }
                    primary_failed = Some(tried);
                }
                tried = &mut hedge, if !hedge_failed => {
                    if served(&tried) {
                        let took = h.started.elapsed();
                        if let Some(failed) = primary_failed.take() {
                            trace_failure(trace, live, h.primary, failed, took);
                        } else {
                            trace.hedge(h.primary, "lost", took);
                            // A lower bound of its time to first event (RESILIENCE.md §10): a
                            // target that loses every race is still measured, so a sustained
                            // slowdown does not drain its sketch below the samples a
                            // percentile needs and switch hedging off.
                            self.observe_first_event(&h.primary.key, took);
                        }
                        self.counters.hedges_won.fetch_add(1, Ordering::Relaxed);
                        trace.hedge(p.candidate, "won", h.started.elapsed());
                        return Raced { tried, hedge: run(true) };
                    }
                    hedge_failed = true;
                    let took = hedge_started.elapsed();
                    trace_failure(trace, live, p.candidate, tried, took);
                }
            }
            if hedge_failed && let Some(tried) = primary_failed.take() {
                return Raced { tried, hedge: run(false) };
            }
        }
    }

    /// The next candidate after the primary that may hedge it: on another provider, not ruled
    /// out for this request, admitted by the registry, paid for by the retry budget, and
    /// within the request's attempts.
    async fn pick_hedge<'a>(&self, h: &Hedging<'a, '_, '_>) -> Option<Picked<'a>> {
        let sending: &'a Sending<'_, '_> = h.sending;
        for (offset, candidate) in sending.candidates[h.next..].iter().enumerate() {
            let index = h.next + offset;
            let target = &sending.combo.targets[candidate.target];
            if candidate.key.provider == h.primary.key.provider
                || h.hedged.contains(&index)
                || sending.live.lock().screen_target(candidate, target).is_some()
            {
                continue;
            }
            if Instant::now() >= sending.deadline {
                return None;
            }
            let rest = &sending.candidates[index + 1..];
            let others_left = {
                let state = sending.live.lock();
                state.left() > 1 && anyone_else(rest, sending.combo, &state)
            };
            let wait = first_event_wait(&h.routes.config, true, others_left);
            let permit = wait.min(sending.deadline.saturating_duration_since(Instant::now()));
            // A hedge takes a concurrency slot when one is free; it never waits for one.
            let slot = if h.routes.slots.any() {
                let Some(slot) = h.routes.slots.try_take(&candidate.key) else { continue };
                Some(slot)
            } else {
                None
            };
            let Ok((mut attempt, secret)) =
                self.ready(h.routes, candidate, permit, h.sending.login).await
            else {
                continue;
            };
            if let Some(slot) = slot {
                attempt.hold(slot);
            }
            // The budget is asked last, so a candidate refused for another reason spends
            // nothing; a hedge past the attempt cap is never sent.
            if !sending.live.lock().another_allowed()
                || !h.routes.budget.try_retry(self.clock.now())
                || !sending.live.lock().start()
            {
                // Dropped unsettled: nothing charged, any probe slot released.
                drop(attempt);
                return None;
            }
            return Some(Picked { index, candidate, target, attempt, secret, wait });
        }
        None
    }
}

/// Whether a failed attempt's verdict forbids any other target from answering.
fn final_verdict(tried: &Tried) -> bool {
    matches!(&tried.result, TriedResult::Failed { verdict, .. } if verdict.fallback == Fallback::No)
}

/// One raced attempt's failure, traced and ruling out its provider as the loop would.
fn trace_failure(
    trace: &mut Trace,
    live: &Live,
    candidate: &Candidate,
    tried: Tried,
    took: Duration,
) {
    let Tried { result, carried } = tried;
    let TriedResult::Failed { verdict, .. } = result else { return };
    tracing::info!(target = %candidate.key, kind = verdict.kind.as_str(), "raced attempt failed");
    trace.attempt(candidate, &verdict, took, carried);
    rule_out_provider(&mut live.lock(), &verdict, &candidate.key);
}
