//! Finishing a broken stream on another target (RESILIENCE.md §10).
//!
//! When a stream breaks after content reached the client, the relay hands the answer so far to
//! a [`Rescuer`]: it owns what a continuation needs (the request as routed, the rest of the
//! plan, the attempts and deadline left), asks the pure decision in
//! `switchyard_core::continuation` whether and how the next eligible target may continue, sends
//! the request plus the answer so far by that target's mechanism, and returns the new stream
//! for the relay to take over. Every refusal leaves the client with the terminal error event,
//! as before: never masking is worth more than rescuing.
//!
//! A target that answers a continuation with a 400 is marked incapable for that model in
//! memory (until the next start), and the request ends with the terminal error: the answer is
//! never restarted on top of the text the client already has.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use bytes::Bytes;
use switchyard_core::clock::millis;
use switchyard_core::continuation::{self, Refusal, Relayed, RequestShape, Seam};
use switchyard_core::outcome::{
    BodyHint, ClassifyPolicy, Outcome, OutcomeKind, Upstream, Verdict, classify,
};
use switchyard_core::resilience::{Attempt, HealthRegistry};
use switchyard_core::routing::attempts::AttemptState;
use switchyard_core::routing::{Candidate, Combo};
use switchyard_core::{Clock, ModelId, ProviderId};
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
use super::upstream::{self, ClientRequest};
use crate::oauth::OAuth;

/// Called by the relay with the answer so far when its stream breaks; `None` is a refusal.
pub(crate) type Rescue =
    Box<dyn FnOnce(Relayed) -> Pin<Box<dyn Future<Output = Option<Takeover>> + Send>> + Send>;

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
    Failed,
    /// Continuing is refused (the trace says why): the client gets the terminal error.
    Refused,
}

/// (provider, model) pairs that answered a continuation with a 400: not asked again until the
/// next start. In memory only: a model that learns the mechanism later gets it back on restart.
#[derive(Debug, Default)]
pub(super) struct Incapable(Mutex<HashSet<(ProviderId, ModelId)>>);

impl Incapable {
    fn contains(&self, provider: &ProviderId, model: &ModelId) -> bool {
        self.0.lock().expect("never poisoned").contains(&(provider.clone(), model.clone()))
    }

    fn insert(&self, provider: ProviderId, model: ModelId) {
        self.0.lock().expect("never poisoned").insert((provider, model));
    }
}

/// Trace lines a rescue adds after the request was first logged.
pub(super) type Notes = Arc<Mutex<Vec<TraceEntry>>>;

/// What one streamed attempt carries for the case its stream breaks mid-answer.
pub(super) struct Continuing {
    pub rescue: Rescue,
    /// The relay keeps what a continuation needs (text per block, the encoder's state): only
    /// when some later target could continue at all, so other streams pay nothing for it.
    pub keep: bool,
}

impl Continuing {
    /// A rescue for a stream whose continuation is ruled out from the start (`reason`): a
    /// break still counts as a refusal and says why in the trace.
    pub(super) fn refused(
        counters: Arc<Counters>,
        combo: String,
        notes: &Notes,
        reason: &'static str,
    ) -> Self {
        let noted = Arc::clone(notes);
        let rescue: Rescue = Box::new(move |_| {
            Box::pin(async move {
                counters.continuation_refusals.fetch_add(1, Ordering::Relaxed);
                tracing::info!(reason, "a broken stream was not continued");
                let what = TraceEvent::NotContinued { reason: reason.into() };
                let entry = TraceEntry { target: combo, credential: String::new(), what };
                noted.lock().expect("never poisoned").push(entry);
                None
            })
        });
        Self { rescue, keep: false }
    }

    pub(super) fn kept(rescuer: Rescuer) -> Self {
        Self { rescue: rescuer.into_rescue(), keep: true }
    }
}

/// Why no later target could continue this request, if none could; `None` when one may.
/// `attempts_left` is read from the live state when the attempt starts: it only spares the
/// relay keeping text for a stream nobody could continue; the rescue reads it again.
pub(super) fn ruled_out(
    combo: &Combo,
    rest: &[Candidate],
    shape: RequestShape,
    attempts_left: u32,
) -> Option<&'static str> {
    if shape.json_output {
        Some(Refusal::JsonOutput.code())
    } else if shape.forced_tool {
        Some(Refusal::ForcedTool.code())
    } else if attempts_left == 0 {
        Some("no_attempts_left")
    } else if !rest.iter().any(|c| combo.targets[c.target].continuation.is_on()) {
        Some(Refusal::NoMechanism.code())
    } else {
        None
    }
}

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

/// Everything a continuation of one request needs, owned: it outlives the routing loop.
pub(super) struct Rescuer {
    pub routes: Arc<Routes>,
    pub registry: Arc<HealthRegistry>,
    pub clock: Arc<dyn Clock>,
    pub oauth: OAuth,
    pub counters: Arc<Counters>,
    pub incapable: Arc<Incapable>,
    pub policy: ClassifyPolicy,
    pub notes: Notes,
    pub client: ClientDialect,
    /// The request as routed (a Responses conversation already expanded).
    pub body: Bytes,
    pub headers: HeaderMap,
    /// The caller's own login, for a `client` credential's continuation.
    pub login: Option<Arc<ClientLogin>>,
    pub query: Option<String>,
    pub combo: Combo,
    /// The candidates after the one serving, in plan order.
    pub rest: Vec<Candidate>,
    /// The request's live attempts: the providers ruled out and the attempts left are read
    /// from it when the stream breaks, and each continuation is started through it.
    pub live: Arc<parking_lot::Mutex<AttemptState>>,
    /// The provider whose stream broke: never asked to continue it.
    pub serving: ProviderId,
    pub deadline: Instant,
    /// The request's usage: a continuation is metered like any attempt.
    pub tally: Arc<Tally>,
}

impl Rescuer {
    fn into_rescue(self) -> Rescue {
        Box::new(move |relayed| Box::pin(self.rescue(relayed)))
    }

    /// Tries the rest of the plan in order, each target that may continue, until one answers
    /// (its first real event), the attempts or the deadline run out, or a refusal ends it. A
    /// continuation that fails before its first real event rules its provider out and the
    /// next is asked, as for any attempt (RESILIENCE.md §10: it takes over at its first real
    /// event, not at its headers).
    async fn rescue(self, relayed: Relayed) -> Option<Takeover> {
        let Ok(request) = self.client.parse_request(&self.body) else {
            // A body with no canonical form cannot be continued. A passthrough reads only the
            // request's settings (`Parsed`), so this can be the first time it is read whole.
            self.refused(None, "not_translatable", &relayed);
            return None;
        };
        let shape = shape(&request);
        let mut refusal = None;
        let mut last_failed = None;
        // The break is the serving provider's failure, as the loop would have it.
        self.live.lock().rule_out(&self.serving);
        for candidate in &self.rest {
            if self.live.lock().failed().contains(&candidate.key.provider) {
                continue;
            }
            let target = &self.combo.targets[candidate.target];
            let incapable = self.incapable.contains(&target.provider, &target.model);
            let plan = match continuation::decide(&relayed, shape, target.continuation, incapable) {
                Ok(plan) => plan,
                Err(why) => {
                    refusal.get_or_insert((candidate, why.code()));
                    continue;
                }
            };
            if !self.live.lock().another_allowed() || Instant::now() >= self.deadline {
                self.refused(None, "no_attempts_left", &relayed);
                return None;
            }
            let now = self.clock.now();
            let Ok(mut attempt) = self.registry.admit(&candidate.key, now) else { continue };
            if attempt.lease(now).await.is_err() {
                continue;
            }
            if !self.routes.budget.try_retry(now) {
                self.refused(Some(candidate), "retry_budget", &relayed);
                return None;
            }
            if !self.live.lock().start() {
                self.refused(None, "no_attempts_left", &relayed);
                return None;
            }
            match self.send(candidate, &request, plan, attempt, &relayed).await {
                Sent::Took(takeover) => return Some(takeover),
                Sent::Refused => return None,
                Sent::Failed => {
                    self.live.lock().rule_out(&candidate.key.provider);
                    last_failed = Some(candidate);
                }
            }
        }
        match (last_failed, refusal) {
            (Some(candidate), _) => self.refused(Some(candidate), "continuation_failed", &relayed),
            (None, Some((candidate, why))) => self.refused(Some(candidate), why, &relayed),
            (None, None) => self.refused(None, Refusal::NoMechanism.code(), &relayed),
        }
        None
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one continuation attempt, sent and read to its first event, top to bottom"
    )]
    async fn send(
        &self,
        candidate: &Candidate,
        request: &ChatRequest<'_>,
        plan: continuation::Plan,
        mut attempt: Attempt,
        relayed: &Relayed,
    ) -> Sent {
        let key = &candidate.key;
        let target = &self.combo.targets[candidate.target];
        let Some(provider) = self.routes.provider(&key.provider) else { return Sent::Failed };
        // A subscription continues with its caller's login, on a target of the caller's API.
        let login =
            self.login.as_ref().filter(|l| l.fits(provider.dialect_for(key.model.as_str())));
        let Ok(secret) = super::secret(
            &self.oauth,
            &self.routes,
            &key.provider,
            &key.credential,
            self.clock.now(),
            login,
        )
        .await
        else {
            return Sent::Failed;
        };
        let continued = with_prefill(request, &plan.prefill);
        let client = ClientRequest {
            dialect: self.client,
            // Only routing reads it, and a continuation is routed already.
            model: None,
            body: &self.body,
            query: self.query.as_deref(),
            headers: &self.headers,
        };
        let built = upstream::build_continuation(
            provider,
            secret.as_ref(),
            target.model.as_str(),
            continued,
            &client,
            plan.mechanism,
        );
        let Ok(built) = built else {
            self.refused(Some(candidate), "not_translatable", relayed);
            return Sent::Refused;
        };
        let wait = self
            .routes
            .config
            .timeouts
            .first_event
            .min(self.deadline.saturating_duration_since(Instant::now()));
        let first_event = Instant::now() + wait;
        // From here on the continuation is an upstream request like any other attempt: counted,
        // and traced with its outcome (before the `continued` or `not_continued` line).
        self.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let response = match self.routes.executor.send(built, wait).await {
            Ok(response) => response,
            Err(failure) => {
                let verdict = self.settle(attempt, super::unsent(failure));
                self.attempted(candidate, verdict.kind, verdict.status, started);
                return Sent::Failed;
            }
        };
        let status = response.status.as_u16();
        let dialect = provider.dialect_for(target.model.as_str());
        if !response.status.is_success() {
            let headers = response.headers.clone();
            let body = response
                .into_bytes(super::ERROR_BODY_DEADLINE, switchyard_providers::executor::MAX_ANSWER)
                .await
                .unwrap_or_default();
            let hint = dialect.error_report(&body).hint;
            let upstream = Upstream::Response { status, headers: &headers, body: hint };
            if status == 400 {
                // The target does not continue answers after all: never ask it again, and
                // never let it restart the answer on top of what the client has. The refusal
                // is about the mechanism, not the target's health: nothing is charged.
                self.incapable.insert(key.provider.clone(), key.model.clone());
                tracing::warn!(target = %key, "a continuation was refused with a 400: marked incapable");
                let verdict = classify(&Outcome::new(upstream), &self.policy, self.clock.now());
                self.attempted(candidate, verdict.kind, verdict.status, started);
                drop(attempt);
                self.refused(Some(candidate), "continuation_rejected", relayed);
                return Sent::Refused;
            }
            let verdict = self.settle(attempt, upstream);
            self.attempted(candidate, verdict.kind, verdict.status, started);
            return Sent::Failed;
        }
        let chunks = Box::pin(response.into_stream());
        let chunks = match super::forward::first_real_event(chunks, dialect, first_event).await {
            Ok(chunks) => chunks,
            Err(failure) => {
                let no_headers = HeaderMap::new();
                let verdict = self.settle(attempt, failure.upstream(&no_headers));
                self.attempted(candidate, verdict.kind, verdict.status, started);
                return Sent::Failed;
            }
        };
        // It answers: a half-open probe it rides on settles now, not when the stream ends.
        let now = self.clock.now();
        let no_headers = HeaderMap::new();
        let answered = Upstream::Response { status, headers: &no_headers, body: BodyHint::None };
        attempt.answered(&classify(&Outcome::new(answered), &self.policy, now), now);
        self.attempted(candidate, OutcomeKind::Success, Some(status), started);
        self.counters.continuations.fetch_add(1, Ordering::Relaxed);
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

    /// Settles a continuation that failed before taking over, and returns its verdict.
    fn settle(&self, attempt: Attempt, upstream: Upstream<'_>) -> Verdict {
        let now = self.clock.now();
        let verdict = classify(&Outcome::new(upstream), &self.policy, now);
        attempt.finish(&verdict, now);
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
        };
        self.note(candidate, what);
    }

    fn refused(&self, candidate: Option<&Candidate>, reason: &'static str, relayed: &Relayed) {
        self.counters.continuation_refusals.fetch_add(1, Ordering::Relaxed);
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
