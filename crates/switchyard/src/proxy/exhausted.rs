//! The routing trace of one request, and the one clean error when nothing is left
//! (RESILIENCE.md §1.6): 429 when every candidate is rate-limited, 503 otherwise, `Retry-After`
//! set to the earliest moment any candidate becomes eligible, and a body that says why each
//! candidate was skipped or failed.

use std::borrow::Cow;
use std::time::Duration;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use switchyard_core::outcome::{OutcomeKind, Verdict};
use switchyard_core::resilience::{HealthRegistry, SkipReason};
use switchyard_core::routing::embeddings::OTHER_SPACE;
use switchyard_core::routing::session::{Left, Repin, SessionKey, Steer};
use switchyard_core::routing::{Candidate, Combo, Plan};
use switchyard_core::text::bounded;
use switchyard_core::{CandidateKey, UnixMillis, clock::millis};
use switchyard_providers::dialect::Dropped;
use ts_rs::TS;

use super::refusal::ApiError;

/// What a refused `compaction_trigger` adds: how Codex compacts on any target instead.
const COMPACTION_HINT: &str = " (Codex's remote compaction needs an OpenAI Responses target; a \
    Codex provider named anything but \"OpenAI\" compacts with an ordinary turn, which every \
    target serves: docs/clients.md)";

/// One line of a routing trace: what happened to one candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct TraceEntry {
    /// `provider/model`.
    pub target: String,
    pub credential: String,
    #[serde(flatten)]
    pub what: TraceEvent,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TraceEvent {
    /// Not tried; `reason` is a skip code (`breaker_open`, `model_locked`, ...).
    Skipped { reason: Cow<'static, str> },
    /// Tried; `outcome` is the classified outcome kind (`success` for the attempt that served,
    /// whose status is then not given: a stream's end is not known yet).
    Attempted {
        outcome: Cow<'static, str>,
        status: Option<u16>,
        #[ts(type = "number")]
        millis: u64,
        /// `passthrough` (the client's own bytes went upstream), `translated`, or
        /// `continuation` (the request plus the answer so far, RESILIENCE.md §10); absent when
        /// no request was built.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        path: Option<Cow<'static, str>>,
        /// What translation could not carry to this target (fields, kinds of content).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[ts(as = "Option<Vec<String>>", optional)]
        dropped: Vec<String>,
        /// What translation added that the client did not write, for the upstream's prompt
        /// cache (`cache_control on the last message`, `prompt_cache_key`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[ts(as = "Option<Vec<String>>", optional)]
        added: Vec<String>,
    },
    /// Passed over for the user's request: eligible again after a bench (`bench`:
    /// `breaker_half_open`, `breaker_degraded`, `credential_cooled`, `model_lock_lapsed`) but
    /// not yet shown to work, so the proxy sent it a one-token probe of its own alongside
    /// (RESILIENCE.md §3). `not_sent` says why no probe went out (`probe_in_flight`,
    /// `retry_budget`, ...); the probe's answer is on the health page, not here.
    Probe {
        bench: Cow<'static, str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        not_sent: Option<Cow<'static, str>>,
    },
    /// The stream broke mid-answer and this target continued it (RESILIENCE.md §10) after
    /// `after_chars` characters of text had reached the client, by `mechanism`.
    Continued {
        #[ts(type = "number")]
        after_chars: u64,
        mechanism: Cow<'static, str>,
    },
    /// The stream broke mid-answer and was not continued: `reason` says why (a refusal code
    /// such as `inside_tool_call`, `json_output`, `no_continuation_mechanism`,
    /// `continuation_rejected`); the client got the terminal error event.
    NotContinued { reason: Cow<'static, str> },
    /// Hedged first token (RESILIENCE.md §10). `hedge` says what happened to this target:
    /// `started` (sent beside a slower attempt, `millis` into the wait for its first event),
    /// `won` ("hedged: this target won after `millis` ms", counted from the first of the two
    /// attempts' start) or `lost` (cancelled after `millis` when the other answered first;
    /// charged nothing).
    Hedge {
        hedge: Cow<'static, str>,
        #[ts(type = "number")]
        millis: u64,
    },
    /// Waited `millis` in line for a `max_in_flight` slot on this candidate (RESILIENCE.md
    /// §11); an `at_capacity` skip follows when none came in time.
    Queued {
        #[ts(type = "number")]
        millis: u64,
    },
    /// The request's agent session (RESILIENCE.md §11), on the line of the candidate that
    /// served it: `pin` is `new` (bound here), `kept`, `moved` (its pin, `from`, was benched
    /// or failed, or its stream broke there: it re-pinned here) or `returned` (back on the
    /// target it had moved off, or on a better one in the combo's order). A stream that
    /// breaks after content adds a `moved` line of its own on the candidate it broke on,
    /// before the client reads the stream's end: the session's next request starts elsewhere.
    Session {
        session: String,
        pin: Cow<'static, str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        from: Option<String>,
        /// Why: `moved` because the pin `broke` (a cut, a stall, an error event after content)
        /// or was `benched` (or failed before the answer began); `returned` because the target
        /// `served_whole_stream` or `served` (a whole answer or a recovery probe) since the
        /// session left it, or stands `higher_in_order` in a combo whose strategy is an order
        /// and its latest outcome was a success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        because: Option<Cow<'static, str>>,
    },
    /// `auto`'s ranking, on the line of each of its top candidates: its place, its
    /// score and every factor's value and weight (values in `[0, 1]`, three decimals); the
    /// winner's line also gives its margin over the next and the `x-switchyard-decision`
    /// header sent with the answer.
    Ranked {
        rank: u32,
        preset: Cow<'static, str>,
        score: String,
        factors: Vec<RankedFactor>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        margin: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        decision: Option<String>,
    },
    /// The tokens this attempt used, in buckets that do not overlap: `output`
    /// includes `reasoning`. `estimated` when the upstream never gave its final count (a cut
    /// stream, a hedge cancelled mid-way): what it reported so far. `cost` in USD, as a
    /// decimal, when the model's prices are known.
    Used {
        #[ts(type = "number")]
        uncached_input: u64,
        #[ts(type = "number")]
        cache_read: u64,
        #[ts(type = "number")]
        cache_write: u64,
        #[ts(type = "number")]
        output: u64,
        #[ts(type = "number")]
        reasoning: u64,
        estimated: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        cost: Option<String>,
    },
}

/// One factor of an `auto` candidate's score, as the trace shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct RankedFactor {
    pub name: Cow<'static, str>,
    /// In `[0, 1]`, higher is better.
    pub value: String,
    pub weight: String,
}

impl TraceEntry {
    pub(super) fn new(key: &CandidateKey, what: TraceEvent) -> Self {
        // Targets come from the config, whose names are checked, and from a client's
        // `provider/model` only after `check_model_name`: bounded already.
        Self { target: key.target_label(), credential: key.credential.as_str().to_owned(), what }
    }

    /// The attempt that served: the last line of a served request's trace (but for its
    /// session's), so the log says which credential answered and how long it took to start
    /// (a stream's first event).
    pub(super) fn served(
        key: &CandidateKey,
        status: u16,
        took: Duration,
        carried: Carried,
    ) -> Self {
        let what = TraceEvent::Attempted {
            outcome: OutcomeKind::Success.as_str().into(),
            status: Some(status),
            millis: millis(took),
            path: carried.path.map(Cow::Borrowed),
            dropped: loggable(carried.dropped),
            added: carried.added,
        };
        Self::new(key, what)
    }

    /// How the request's session pinned on `key`, the candidate that served it, which
    /// `steered` sent it to.
    pub(super) fn session(
        key: &CandidateKey,
        session: SessionKey,
        repin: &Repin,
        steered: &Steer,
    ) -> Self {
        let (pin, from, because) = match repin {
            Repin::Bound => ("new", None, None),
            Repin::Kept => ("kept", None, None),
            Repin::Credential { from } => {
                let left = match steered {
                    Steer::Moved { left, .. } => left.code(),
                    _ => Left::Benched.code(),
                };
                ("moved", Some(from.to_string()), Some(left))
            }
            Repin::Target { from, left } => ("moved", Some(from.to_string()), Some(left.code())),
            Repin::Home => {
                let healed = match steered {
                    Steer::Returned { healed, .. } => Some(healed.code()),
                    _ => None,
                };
                ("returned", None, healed)
            }
        };
        let what = TraceEvent::Session {
            session: session.to_string(),
            pin: pin.into(),
            from,
            because: because.map(Cow::Borrowed),
        };
        Self::new(key, what)
    }
}

/// How an attempt's request was made, for its trace line.
#[derive(Clone, Debug, Default)]
pub(super) struct Carried {
    pub path: Option<&'static str>,
    pub dropped: Vec<String>,
    pub added: Vec<String>,
}

impl Carried {
    /// How a built request carries the client's: `passthrough` or `translated`, with what the
    /// encoder dropped and added.
    pub(super) fn of(passthrough: bool, dropped: &Dropped) -> Self {
        let names = |list: &[Cow<'static, str>]| list.iter().map(ToString::to_string).collect();
        Self {
            path: Some(if passthrough { "passthrough" } else { "translated" }),
            dropped: names(dropped.names()),
            added: names(dropped.added()),
        }
    }
}

/// The most names one trace line lists as dropped; a client may send any number of fields.
const MAX_DROPPED: usize = 32;

/// `dropped` as a trace line keeps it: each name bounded, at most [`MAX_DROPPED`] of them and
/// then how many more there were. The names are the client's own field names.
fn loggable(mut dropped: Vec<String>) -> Vec<String> {
    let more = dropped.len().saturating_sub(MAX_DROPPED);
    dropped.truncate(MAX_DROPPED);
    for name in &mut dropped {
        if let Cow::Owned(kept) = bounded(name) {
            *name = kept;
        }
    }
    if more > 0 {
        dropped.push(format!("… and {more} more"));
    }
    dropped
}

/// The skip reason of a `client` credential on a request without the caller's login.
pub(super) const NO_CLIENT_CREDENTIAL: &str = "no_client_credential";

/// The skip reason of a credential whose secret cannot be read now.
pub(super) const SECRET_UNAVAILABLE: &str = "secret_unavailable";

/// What happened to every candidate of one request.
#[derive(Debug)]
pub(super) struct Trace {
    entries: Vec<TraceEntry>,
    keys: Vec<CandidateKey>,
    all_rate_limited: bool,
    combo: String,
}

impl Trace {
    pub(super) fn new(plan: &Plan, combo: &Combo) -> Self {
        let mut trace = Self {
            entries: Vec::new(),
            keys: Vec::new(),
            all_rate_limited: true,
            combo: combo.name.clone(),
        };
        for skipped in &plan.skipped {
            trace.all_rate_limited &= skipped.reason.is_rate_limit();
            trace.push(&skipped.key, TraceEvent::Skipped { reason: skipped.reason.code().into() });
        }
        trace
    }

    pub(super) fn skip(&mut self, candidate: &Candidate, reason: &'static str) {
        self.all_rate_limited = false;
        self.push(&candidate.key, TraceEvent::Skipped { reason: reason.into() });
    }

    pub(super) fn attempt(
        &mut self,
        candidate: &Candidate,
        verdict: &Verdict,
        took: Duration,
        carried: Carried,
    ) {
        self.all_rate_limited &= verdict.kind == OutcomeKind::RateLimit;
        let what = TraceEvent::Attempted {
            outcome: verdict.kind.as_str().into(),
            status: verdict.status,
            millis: millis(took),
            path: carried.path.map(Cow::Borrowed),
            dropped: loggable(carried.dropped),
            added: carried.added,
        };
        self.push(&candidate.key, what);
    }

    /// A recovery probe for `key`, sent alongside this request, or why none was.
    pub(super) fn probe(
        &mut self,
        key: &CandidateKey,
        bench: &'static str,
        not_sent: Option<&'static str>,
    ) {
        let what = TraceEvent::Probe { bench: bench.into(), not_sent: not_sent.map(Cow::Borrowed) };
        self.push(key, what);
    }

    /// `auto`'s decision: the candidates it left out, then its top candidates' lines.
    pub(super) fn ranked(&mut self, decision: &super::auto::Decision) {
        for (candidate, why) in &decision.unfit {
            self.skip(candidate, why.code());
        }
        let header = decision.header().and_then(|h| h.to_str().ok().map(str::to_owned));
        for (rank, (key, score, factors)) in decision.top.iter().enumerate() {
            let first = rank == 0;
            let what = TraceEvent::Ranked {
                rank: u32::try_from(rank + 1).unwrap_or(u32::MAX),
                preset: decision.preset.model().into(),
                score: format!("{score:.3}"),
                factors: factors
                    .iter()
                    .map(|f| RankedFactor {
                        name: f.name.as_str().into(),
                        value: format!("{:.3}", f.value),
                        weight: format!("{}", f.weight),
                    })
                    .collect(),
                margin: decision.margin.filter(|_| first).map(|m| format!("{m:.3}")),
                decision: header.clone().filter(|_| first),
            };
            self.push(key, what);
        }
    }

    /// A hedged first token's step for `candidate`: `started`, `won` or `lost`.
    pub(super) fn hedge(&mut self, candidate: &Candidate, hedge: &'static str, after: Duration) {
        let what = TraceEvent::Hedge { hedge: hedge.into(), millis: millis(after) };
        self.push(&candidate.key, what);
    }

    /// The wait for a concurrency slot on `candidate`.
    pub(super) fn queued(&mut self, candidate: &Candidate, waited: Duration) {
        self.push(&candidate.key, TraceEvent::Queued { millis: millis(waited) });
    }

    fn push(&mut self, key: &CandidateKey, what: TraceEvent) {
        self.entries.push(TraceEntry::new(key, what));
        self.keys.push(key.clone());
    }

    /// The lines so far, for the request log (written as JSON once, when it is logged).
    pub(super) fn entries(&self) -> &[TraceEntry] {
        &self.entries
    }

    pub(super) fn into_entries(self) -> Vec<TraceEntry> {
        self.entries
    }

    /// The unconfirmed skip reason of the first candidate benched for one, if any.
    fn waiting_for_confirmation(&self) -> Option<&str> {
        let unconfirmed = [SkipReason::DestinationUnconfirmed, SkipReason::CredentialUnconfirmed]
            .map(SkipReason::code);
        self.entries.iter().find_map(|entry| match &entry.what {
            TraceEvent::Skipped { reason } if unconfirmed.contains(&reason.as_ref()) => {
                Some(reason.as_ref())
            }
            _ => None,
        })
    }

    /// The first candidate skipped because its credential's secret cannot be read.
    fn waiting_for_a_secret(&self) -> Option<&TraceEntry> {
        self.entries.iter().find(|entry| {
            matches!(&entry.what, TraceEvent::Skipped { reason } if reason == SECRET_UNAVAILABLE)
        })
    }

    /// The first `client` credential passed over for want of the caller's login, when no
    /// upstream was asked at all: then what is missing is the caller's, and the answer is a
    /// 401 that says so rather than a 503.
    fn wanting_a_login(&self) -> Option<&TraceEntry> {
        let attempted = self.entries.iter().any(|e| matches!(e.what, TraceEvent::Attempted { .. }));
        if attempted {
            return None;
        }
        self.entries.iter().find(|entry| {
            matches!(&entry.what, TraceEvent::Skipped { reason } if reason == NO_CLIENT_CREDENTIAL)
        })
    }

    /// The targets an embeddings request passed over for embedding into another space, each
    /// once.
    fn of_another_space(&self) -> Vec<&str> {
        let mut targets: Vec<&str> = Vec::new();
        for entry in &self.entries {
            let passed =
                matches!(&entry.what, TraceEvent::Skipped { reason } if reason == OTHER_SPACE);
            if passed && !targets.contains(&entry.target.as_str()) {
                targets.push(&entry.target);
            }
        }
        targets
    }

    /// Why no target could take the request, when every candidate was tried and each refused
    /// to express it (no request built, nothing charged): the first one's reason. `None` when
    /// any candidate was benched or failed upstream: another moment may serve it.
    fn refused_everywhere(&self) -> Option<&str> {
        let mut reason = None;
        for entry in &self.entries {
            match &entry.what {
                TraceEvent::Attempted { outcome, path: None, dropped, .. }
                    if outcome == OutcomeKind::ClientError.as_str() =>
                {
                    reason = reason.or(dropped.first().map(String::as_str));
                }
                TraceEvent::Probe { .. } => {}
                _ => return None,
            }
        }
        reason
    }

    /// The error for a request that nothing could serve.
    pub(super) fn exhausted(self, registry: &HealthRegistry, now: UnixMillis) -> ApiError {
        if let Some(entry) = self.wanting_a_login() {
            let message = format!(
                "nothing of \"{}\" could serve without your own login: {} (credential \"{}\") \
                 passes through the caller's sign-in, and this request carries none for it. Send \
                 the local key in `x-switchyard-key` and your own sign-in in `Authorization`, as \
                 Claude Code and Codex do when logged in (docs/clients.md, \"Keep your \
                 subscription\"); nothing was sent upstream",
                self.combo, entry.target, entry.credential,
            );
            let mut error =
                ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", message);
            error.detail = Some(serde_json::json!({ "candidates": self.entries }));
            return error;
        }
        if let Some(reason) = self.refused_everywhere() {
            // Nothing failed: the request is the client's to change, and a status a client
            // retries (Codex retries a 5xx for ten seconds) would only repeat it.
            let hint = if reason.contains("`compaction_trigger`") { COMPACTION_HINT } else { "" };
            let message = format!(
                "no target of \"{}\" can take this request as it is: {reason}{hint}",
                self.combo
            );
            let mut error =
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message);
            error.detail = Some(serde_json::json!({ "candidates": self.entries }));
            return error;
        }
        let rate_limited = self.all_rate_limited && !self.entries.is_empty();
        let retry_after = self
            .keys
            .iter()
            .filter_map(|key| registry.eligible(key, now).err().and_then(SkipReason::retry_in))
            .min();
        let (status, kind) = if rate_limited {
            (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded_error")
        };
        let message = if self.entries.is_empty() {
            format!("no candidate of \"{}\" has a configured credential", self.combo)
        } else {
            format!(
                "every candidate of \"{}\" failed or is benched; see switchyard.candidates",
                self.combo
            )
        };
        // Benched until a person acts: the body names what to do, not only the code.
        let message = match self.waiting_for_confirmation() {
            Some(reason) => format!(
                "{message}; {reason}: a destination or secret the config introduced was never \
                 confirmed; if you trust it, confirm it with Confirm on the Providers page or \
                 `switchyard config confirm`"
            ),
            None => message,
        };
        let message = match self.waiting_for_a_secret() {
            Some(entry) => format!(
                "{message}; {SECRET_UNAVAILABLE}: credential \"{}/{}\" has no secret to send \
                 (its reference cannot be read now; the Providers page and `switchyard status` \
                 say why); it is read again every few seconds, or at once with Retry now",
                entry.target.split('/').next().unwrap_or_default(),
                entry.credential
            ),
            None => message,
        };
        let elsewhere = self.of_another_space();
        let message = if elsewhere.is_empty() {
            message
        } else {
            format!(
                "{message}; {OTHER_SPACE}: {} not asked, as vectors of different models do not \
                 mix and an embeddings combo is served only in its first target's space (a model \
                 that serves another's vectors says so with `embeds_like`, \
                 docs/configuration.md)",
                elsewhere.join(", ")
            )
        };
        let mut error = ApiError::new(status, kind, message);
        error.retry_after = retry_after;
        error.detail = Some(serde_json::json!({ "candidates": self.entries }));
        error
    }
}
