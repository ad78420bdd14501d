//! Finishing a broken stream on another target (RESILIENCE.md §10).
//!
//! When a stream breaks after content reached the client, the relay hands the answer so far to
//! a [`Rescuer`]: it owns what a continuation needs (the request as routed and its machine,
//! moved there when the stream was served), asks the machine which target continues next (the
//! machine asks the pure decision in `switchyard_core::continuation`), admits and sends it
//! through the proxy's attempt runner with the answer so far by that target's mechanism, and
//! returns the new stream for the relay to take over. Every refusal leaves the client with the terminal error event,
//! as before: never masking is worth more than rescuing.
//!
//! A target that answers a continuation with a 400 is marked incapable for that model in
//! memory (until the next start), and the request ends with the terminal error: the answer is
//! never restarted on top of the text the client already has.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::Bytes;
use switchyard_core::clock::millis;
use switchyard_core::continuation::{self, Relayed, RequestShape, Seam};
use switchyard_core::outcome::{
    BodyHint, Outcome, OutcomeKind, StreamFault, Upstream, Verdict, classify,
};
use switchyard_core::request::{Event, Request, Step};
use switchyard_core::resilience::Attempt;
use switchyard_core::routing::{Candidate, Combo};
use switchyard_core::{ModelId, ProviderId};
use switchyard_providers::chat::{ChatRequest, ResponseFormat, ToolChoice};
use switchyard_providers::continuation::with_prefill;
use switchyard_providers::dialect::{ClientDialect, Dialect};
use tokio::time::Instant;

use super::counters::Counters;
use super::exhausted::{TraceEntry, TraceEvent};
use super::forward::Chunks;
use super::login::ClientLogin;
use super::routes::Routes;
use super::tally::{self, Meter, Tally};
use super::upstream::{self, ClientRequest, Presented};
use super::{ErrorAnswer, Head, Proxy};

/// What the relay of a served stream is handed for the case it breaks mid-answer: the rescuer,
/// or only why no continuation is possible.
pub(crate) enum Rescue {
    /// No later target could continue this stream: a break is a refusal, with its reason.
    Refused {
        counters: Arc<Counters>,
        combo: String,
        notes: Notes,
        reason: &'static str,
    },
    Kept(Box<Rescuer>),
}

impl Rescue {
    pub(super) fn refused(
        counters: Arc<Counters>,
        combo: String,
        notes: Notes,
        reason: &'static str,
    ) -> Self {
        Self::Refused { counters, combo, notes, reason }
    }

    /// Finds another target to continue the answer so far; `None` is a refusal, in the trace.
    pub(crate) async fn run(self, relayed: Relayed) -> Option<Takeover> {
        match self {
            Self::Refused { counters, combo, notes, reason } => {
                counters.continuation_refusals.fetch_add(1, Ordering::Relaxed);
                tracing::info!(reason, "a broken stream was not continued");
                let what = TraceEvent::NotContinued { reason: reason.into() };
                let entry = TraceEntry { target: combo, credential: String::new(), what };
                notes.lock().expect("never poisoned").push(entry);
                None
            }
            Self::Kept(rescuer) => rescuer.rescue(relayed).await,
        }
    }
}

/// A continuation's stream, ready to take over the client's.
pub(crate) struct Takeover {
    pub chunks: Chunks,
    /// The continuing upstream's dialect (its events are decoded afresh).
    pub dialect: Dialect,
    pub seam: Seam,
    /// The continuing attempt, settled by the relay when the stream ends.
    pub attempt: Attempt,
    /// Its usage, at its own model's prices.
    pub meter: Meter,
}

/// What one continuation attempt came to.
enum Sent {
    /// It answers: its stream takes over the client's.
    Took(Takeover),
    /// It failed before its first real event, on its own account: the next target may try.
    Failed(Verdict),
    /// Continuing is refused (the trace says why): the client gets the terminal error.
    Refused,
}

/// (provider, model) pairs that answered a continuation with a 400: not asked again until the
/// next start. In memory only: a model that learns the mechanism later gets it back on restart.
#[derive(Debug, Default)]
pub(super) struct Incapable(Mutex<HashSet<(ProviderId, ModelId)>>);

impl Incapable {
    pub(super) fn contains(&self, provider: &ProviderId, model: &ModelId) -> bool {
        self.0.lock().expect("never poisoned").contains(&(provider.clone(), model.clone()))
    }

    fn insert(&self, provider: ProviderId, model: ModelId) {
        self.0.lock().expect("never poisoned").insert((provider, model));
    }
}

/// Trace lines a rescue adds after the request was first logged.
pub(super) type Notes = Arc<Mutex<Vec<TraceEntry>>>;

/// What in the client's request rules continuation out.
pub(super) fn shape(request: &ChatRequest<'_>) -> RequestShape {
    RequestShape {
        json_output: matches!(
            request.response_format,
            Some(ResponseFormat::JsonObject | ResponseFormat::JsonSchema { .. })
        ),
        forced_tool: matches!(
            request.tool_choice,
            Some(ToolChoice::Required | ToolChoice::Tool(_))
        ),
        extended_thinking: request
            .reasoning
            .is_some_and(|r| r.level() != Some(switchyard_providers::chat::Effort::Off)),
    }
}

/// Everything a continuation of one request needs, owned: it outlives the routing loop. The
/// request's machine comes with it, moved: the providers ruled out, the attempts and deadline
/// left are the ones the race before the break left.
pub(crate) struct Rescuer {
    pub proxy: Arc<Proxy>,
    pub routes: Arc<Routes>,
    pub machine: Box<Request>,
    pub notes: Notes,
    pub client: ClientDialect,
    /// The request as routed (a Responses conversation already expanded).
    pub body: Bytes,
    pub headers: HeaderMap,
    /// The caller's own login, for a `client` credential's continuation.
    pub login: Option<Arc<ClientLogin>>,
    pub query: Option<String>,
    /// The combo, for its targets' facts and its name.
    pub combo: Combo,
    /// When the request arrived: the machine's time runs from here.
    pub arrived: Instant,
    /// The request's usage: a continuation is metered like any attempt.
    pub tally: Arc<Tally>,
}

impl Rescuer {
    /// Performs the machine's continuation steps: each target after the one that broke that
    /// may continue is admitted through the proxy's attempt runner and sent the request plus
    /// the answer so far, until one answers (its first real event), the attempts or the
    /// deadline run out, or a refusal ends it (RESILIENCE.md §10: a continuation takes over at
    /// its first real event, not at its headers).
    async fn rescue(mut self: Box<Self>, relayed: Relayed) -> Option<Takeover> {
        let Ok(request) = self.client.parse_request(&self.body) else {
            // A body with no canonical form cannot be continued. A passthrough reads only the
            // request's settings (`Parsed`), so this can be the first time it is read whole.
            self.refused(None, "not_translatable", &relayed);
            return None;
        };
        self.machine.broke(relayed.clone(), shape(&request));
        let deadline = self.arrived + self.routes.config.timeouts.total;
        let mut took = None;
        loop {
            let now = self.arrived.elapsed();
            let step = self.machine.next(now, &mut self.proxy.world(&self.routes));
            tracing::trace!(?step, at = ?now, "continuation step");
            let start = match step {
                Step::Start(start) => start,
                Step::Serve { .. } => return took,
                Step::NotContinued { candidate, reason } => {
                    let candidate = candidate.map(|c| self.machine.offer(c).candidate.clone());
                    self.refused(candidate.as_ref(), reason, &relayed);
                    return None;
                }
                _ => {
                    self.refused(None, "no_attempts_left", &relayed);
                    return None;
                }
            };
            let (id, candidate) =
                (start.attempt, self.machine.offer(start.candidate).candidate.clone());
            let login = self.login.as_ref();
            let admitted =
                self.proxy.admit(&self.routes, &candidate, (start.permit, false), login, deadline);
            let event = match admitted.await.ready {
                Err(reason) => Event::Skipped(reason),
                Ok((attempt, secret)) => {
                    let now = self.arrived.elapsed();
                    if !self.machine.admitted(id, now, &mut self.proxy.world(&self.routes)) {
                        continue;
                    }
                    let plan = start.continuation.expect("a continuation carries its plan");
                    let sent = (&candidate, plan, attempt, secret.as_ref());
                    match self.send(sent, &request, &relayed, start.permit).await {
                        Sent::Took(takeover) => {
                            took = Some(takeover);
                            Event::Answered
                        }
                        Sent::Failed(verdict) => Event::Failed(verdict),
                        Sent::Refused => return None,
                    }
                }
            };
            let now = self.arrived.elapsed();
            self.machine.on(id, event, now, &mut self.proxy.world(&self.routes));
        }
    }

    /// One continuation attempt: built by the target's mechanism, sent through the proxy's one
    /// sender, read to its first real event.
    async fn send(
        &self,
        (candidate, plan, mut attempt, secret): (
            &Candidate,
            continuation::Plan,
            Attempt,
            Option<&Presented>,
        ),
        request: &ChatRequest<'_>,
        relayed: &Relayed,
        wait: Duration,
    ) -> Sent {
        let key = &candidate.key;
        let target = &self.combo.targets[candidate.target];
        let Some(provider) = self.routes.provider(&key.provider) else {
            return Sent::Failed(self.settle(attempt, Upstream::Stream(StreamFault::Cut)));
        };
        let Some(built) = self.built(candidate, request, &plan, secret) else {
            self.refused(Some(candidate), "not_translatable", relayed);
            return Sent::Refused;
        };
        let first_event = Instant::now() + wait;
        // From here on the continuation is an upstream request like any other attempt: counted,
        // and traced with its outcome (before the `continued` or `not_continued` line).
        self.proxy.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let dialect = provider.dialect_toward(target.model.as_str(), self.client.dialect());
        let response = match self.proxy.send(&self.routes, key, built, wait, dialect).await {
            Head::Answer(response) => response,
            Head::Unsent(failure) => {
                let verdict = self.settle(attempt, super::unsent(failure));
                self.attempted(candidate, verdict.kind, verdict.status, started);
                return Sent::Failed(verdict);
            }
            Head::Refused(refused) => {
                return self.refused_head(candidate, attempt, &refused, (started, relayed));
            }
        };
        let status = response.status.as_u16();
        let chunks = Box::pin(response.into_stream());
        let chunks =
            match super::forward::first_real_event(chunks, dialect, provider.trust, first_event)
                .await
            {
                Ok(chunks) => chunks,
                Err(failure) => {
                    let no_headers = HeaderMap::new();
                    let verdict = self.settle(attempt, failure.upstream(&no_headers));
                    self.attempted(candidate, verdict.kind, verdict.status, started);
                    return Sent::Failed(verdict);
                }
            };
        // It answers: a half-open probe it rides on settles now, not when the stream ends.
        let no_headers = HeaderMap::new();
        let answered = Upstream::Response { status, headers: &no_headers, body: BodyHint::None };
        attempt.answered(&self.classify(answered), self.proxy.clock.now());
        self.attempted(candidate, OutcomeKind::Success, Some(status), started);
        self.proxy.counters.continuations.fetch_add(1, Ordering::Relaxed);
        self.note(
            candidate,
            TraceEvent::Continued {
                after_chars: relayed.chars() as u64,
                mechanism: plan.mechanism.as_str().into(),
            },
        );
        tracing::info!(target = %key, after = relayed.chars(), "continued a broken stream");
        Sent::Took(Takeover {
            chunks,
            dialect,
            seam: plan.seam,
            attempt,
            meter: self.tally.meter(key, tally::prices(target)),
        })
    }

    /// The request plus the answer so far, by `plan`'s mechanism, always re-encoded for the
    /// target; `None` when the target cannot express it.
    fn built(
        &self,
        candidate: &Candidate,
        request: &ChatRequest<'_>,
        plan: &continuation::Plan,
        secret: Option<&Presented>,
    ) -> Option<switchyard_providers::executor::UpstreamRequest> {
        let provider = self.routes.provider(&candidate.key.provider)?;
        let target = &self.combo.targets[candidate.target];
        let client = ClientRequest {
            dialect: self.client,
            work: upstream::Work::Chat,
            // Only routing reads it, and a continuation is routed already.
            model: None,
            body: &self.body,
            query: self.query.as_deref(),
            headers: &self.headers,
        };
        let continued = with_prefill(request, &plan.prefill);
        let model = target.model.as_str();
        upstream::build_continuation(provider, secret, model, continued, &client, plan.mechanism)
            .ok()
    }

    /// A continuation answered with an error status. A 400 means the target does not continue
    /// answers after all: it is never asked again, and never lets it restart the answer on top
    /// of what the client has; that refusal is about the mechanism, not the target's health,
    /// so nothing is charged. Any other error fails this attempt like any other.
    fn refused_head(
        &self,
        candidate: &Candidate,
        attempt: Attempt,
        refused: &ErrorAnswer,
        (started, relayed): (Instant, &Relayed),
    ) -> Sent {
        let key = &candidate.key;
        if refused.status == 400 {
            self.proxy.incapable.insert(key.provider.clone(), key.model.clone());
            tracing::warn!(target = %key, "a continuation was refused with a 400: marked incapable");
            let verdict = self.classify(refused.upstream());
            self.attempted(candidate, verdict.kind, verdict.status, started);
            drop(attempt);
            self.refused(Some(candidate), "continuation_rejected", relayed);
            return Sent::Refused;
        }
        let verdict = self.settle(attempt, refused.upstream());
        self.attempted(candidate, verdict.kind, verdict.status, started);
        Sent::Failed(verdict)
    }

    fn classify(&self, upstream: Upstream<'_>) -> Verdict {
        let policy = self.proxy.classify_policy(&self.routes.config);
        classify(&Outcome::new(upstream), &policy, self.proxy.clock.now())
    }

    /// Settles a continuation that failed before taking over, and returns its verdict.
    fn settle(&self, attempt: Attempt, upstream: Upstream<'_>) -> Verdict {
        let verdict = self.classify(upstream);
        attempt.finish(&verdict, self.proxy.clock.now());
        verdict
    }

    /// The continuation's own `attempted` line, which the request log counts as an attempt.
    fn attempted(
        &self,
        candidate: &Candidate,
        outcome: OutcomeKind,
        status: Option<u16>,
        started: Instant,
    ) {
        let what = TraceEvent::Attempted {
            outcome: outcome.as_str().into(),
            status,
            millis: millis(started.elapsed()),
            path: Some("continuation".into()),
            dropped: Vec::new(),
            added: Vec::new(),
        };
        self.note(candidate, what);
    }

    fn refused(&self, candidate: Option<&Candidate>, reason: &'static str, relayed: &Relayed) {
        self.proxy.counters.continuation_refusals.fetch_add(1, Ordering::Relaxed);
        tracing::info!(reason, after = relayed.chars(), "a broken stream was not continued");
        let what = TraceEvent::NotContinued { reason: reason.into() };
        match candidate {
            Some(candidate) => self.note(candidate, what),
            None => self.notes.lock().expect("never poisoned").push(TraceEntry {
                target: self.combo.name.clone(),
                credential: String::new(),
                what,
            }),
        }
    }

    fn note(&self, candidate: &Candidate, what: TraceEvent) {
        let key = &candidate.key;
        self.notes.lock().expect("never poisoned").push(TraceEntry {
            target: format!("{}/{}", key.provider, key.model),
            credential: key.credential.to_string(),
            what,
        });
    }
}

/// Appends a continuation's lines to the request log's trace; how many continuation attempts
/// those lines add to the request's count.
pub(super) fn noted(trace: &mut Vec<TraceEntry>, notes: Option<&Notes>) -> u32 {
    let Some(notes) = notes else { return 0 };
    let notes = notes.lock().expect("never poisoned");
    let added = notes.iter().filter(|e| matches!(e.what, TraceEvent::Attempted { .. })).count();
    trace.extend(notes.iter().cloned());
    u32::try_from(added).unwrap_or(u32::MAX)
}
