//! The proxy: from a client request to an upstream answer, across providers, keys and models
//! (RESILIENCE.md §1, §7, §8).
//!
//! [`Proxy::resolve`] turns the requested model into a combo; the planner (in core) orders and
//! filters its candidates through the three layers; the attempt loop sends to the best one,
//! classifies each outcome exactly once, records the verdict on the registry and decides
//! whether to retry the same target, fall back, or stop. The first success is returned with the
//! target that really served named in `model` and in the routing headers.

mod auto;
mod continuation;
mod conversations;
mod count;
mod counters;
mod driver;
mod embed;
pub mod exhausted;
mod forward;
mod login;
mod parsed;
pub mod refusal;
mod routes;
mod sessions;
mod slots;
mod tally;
pub(crate) mod upstream;

use std::borrow::Cow;
use std::sync::Arc;

use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use parking_lot::Mutex;
use switchyard_core::binding::{Binding, Confirmed, Unconfirmed};
use switchyard_core::clock::millis;
use switchyard_core::ending::{Ending, Exit, Seen, ending};
use switchyard_core::outcome::{
    BodyHint, Fallback, Outcome, OutcomeKind, RetrySame, StreamFault, TimeoutPhase, Upstream,
    Verdict, classify,
};
use switchyard_core::request::{Limits, Offer, Request, World};
use switchyard_core::resilience::CredentialKind;
use switchyard_core::resilience::headroom::{self, Headroom, Window};
use switchyard_core::resilience::{Attempt, HealthRegistry, RecoveryProbe, SkipReason};
use switchyard_core::routing::session::{self, Home, Pin, SessionKey, Shown, Steer};
use switchyard_core::routing::{
    Accounts, Candidate, Combo, HedgeAfter, Plan, RouteStrategy, Target, TargetOrderer, embeddings,
    plan_for, prefer_within_targets,
};
use switchyard_core::settings::CacheBreakpoints;
use switchyard_core::text::{ModelNameError, bounded, check_model_name};
use switchyard_core::usage::Prices;
use switchyard_core::usage::budget::BudgetView;
use switchyard_core::{CandidateKey, Clock, CredentialId, CredentialKey, ModelId, ProviderId};
use switchyard_providers::chat::ChatRequest;
use switchyard_providers::dialect::{Caching, ClientDialect, Dialect, ResponseMeta};
use switchyard_providers::embeddings::{EmbedRequest, Shape};
use switchyard_providers::error::{ProviderError, UpstreamError};
use switchyard_providers::executor::{self, Executor, SendFailure};
use switchyard_providers::gemini::Method;
use switchyard_providers::passthrough;
use switchyard_providers::stream::StreamTranslator;
use switchyard_secrets::Secret;
use switchyard_store::RequestRecord;
use tokio::sync::oneshot;
use tokio::time::Instant;

use self::conversations::{Conversations, Pending, Turn};
pub use self::count::Counting;
use self::counters::Counters;
pub use self::counters::{CounterValues, HistogramValues, LATENCY_BUCKETS};
use self::driver::Driven;
use self::exhausted::{Carried, Trace};
use self::forward::StreamOutcome;
use self::login::ClientLogin;
use self::parsed::Parsed;
use self::refusal::{ApiError, Dialect as ErrorDialect, Refused};
pub use self::routes::{ComboHealth, Routes};
use self::sessions::{Serve, SessionTable};
use self::upstream::{ClientRequest, Presented, Work};
use crate::config::{Config, ProviderConfig};
use crate::keys::LocalKey;
use crate::oauth::{OAuth, OAuthError};
use crate::requests::RequestLog;

/// Error bodies are read for at most this long: they are small and only feed the classifier.
const ERROR_BODY_DEADLINE: Duration = Duration::from_secs(10);

/// Applies the config's policies to the registry (before it is restored: restoring clamps
/// deadlines by them).
pub fn configure_registry(registry: &HealthRegistry, config: &Config) {
    registry.set_lockout_policy(config.lockout.clone());
    registry.set_cooldown_policy(config.cooldown.clone());
    for provider in &config.providers {
        registry.set_breaker_policy(provider.id.clone(), provider.breaker.clone());
        for credential in &provider.credentials {
            let key =
                CredentialKey { provider: provider.id.clone(), credential: credential.id.clone() };
            registry.set_credential_kind(key, credential.kind);
        }
    }
}

/// Gives the OAuth manager every provider's client (validated with the config). A client
/// whose token endpoint some credential has not confirmed is held back (the one registered
/// before stays): the OAuth manager refreshes on its own, and a refresh sends the token.
fn register_oauth_clients(oauth: &OAuth, routes: &Routes) {
    for provider in &routes.config.providers {
        let unconfirmed = routes.unconfirmed().iter().any(|u| u.key.provider == provider.id);
        if let Some(client) = &provider.oauth
            && !unconfirmed
            && let Err(error) = oauth.set_client(&provider.id, client)
        {
            tracing::warn!(provider = %provider.id, %error, "OAuth client not usable");
        }
    }
}

/// The routing engine shared by every request.
#[derive(Debug)]
pub struct Proxy {
    routes: ArcSwap<Routes>,
    oauth: OAuth,
    registry: Arc<HealthRegistry>,
    clock: Arc<dyn Clock>,
    orderer: TargetOrderer,
    log: Arc<RequestLog>,
    counters: Arc<Counters>,
    seed: u64,
    /// Recent Responses conversations, for `previous_response_id`.
    conversations: Arc<Conversations>,
    /// Where each agent session is pinned (RESILIENCE.md §11).
    sessions: Arc<SessionTable>,
    /// What each credential has left of its quota windows, from its answers' headers.
    headroom: Mutex<Headroom>,
    /// The state file, once restored from: where headroom transitions are kept.
    state: std::sync::OnceLock<switchyard_store::Store>,
    /// Those writes under way, finished by [`Self::close`].
    headroom_writes: Mutex<tokio::task::JoinSet<()>>,
    /// The accounts each `client` credential has served.
    accounts: Mutex<Accounts>,
    /// Keys the digest that scopes a client's login (`login`): the data directory's.
    login_salt: Secret,
    /// Paused from the tray or the API: client requests are refused, nothing is sent upstream.
    paused: AtomicBool,
    /// Targets that refused a continuation (RESILIENCE.md §10).
    incapable: Arc<continuation::Incapable>,
    /// The bindings (destinations, secret reference and destination pairs) the user
    /// confirmed; each routing table is built against them. Changed only through the config
    /// editor, which also stores them.
    confirmed: ArcSwap<Confirmed>,
}

impl Proxy {
    #[expect(clippy::too_many_arguments, reason = "the parts the composition root made, each once")]
    pub fn new(
        config: Arc<Config>,
        registry: Arc<HealthRegistry>,
        clock: Arc<dyn Clock>,
        log: RequestLog,
        oauth: OAuth,
        executor: &Executor,
        confirmed: Confirmed,
        login_salt: Secret,
    ) -> Self {
        let seed = clock.now().0;
        log.usage().configure(&config);
        let sessions = Arc::new(SessionTable::new(config.routing.session_limits()));
        let routes = Routes::build(config, seed, executor, &confirmed);
        register_oauth_clients(&oauth, &routes);
        Self {
            routes: ArcSwap::from_pointee(routes),
            oauth,
            orderer: TargetOrderer::new(seed),
            registry,
            clock,
            log: Arc::new(log),
            counters: Arc::default(),
            seed,
            conversations: Arc::default(),
            sessions,
            headroom: Mutex::default(),
            state: std::sync::OnceLock::new(),
            headroom_writes: Mutex::default(),
            accounts: Mutex::default(),
            login_salt,
            paused: AtomicBool::new(false),
            incapable: Arc::default(),
            confirmed: ArcSwap::from_pointee(confirmed),
        }
    }

    pub fn registry(&self) -> &Arc<HealthRegistry> {
        &self.registry
    }

    /// The routing table requests start on now.
    pub fn routes(&self) -> Arc<Routes> {
        self.routes.load_full()
    }

    /// The config requests start on now.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.routes.load().config)
    }

    /// Routes every request from now on by `config` (its policies go to the registry too).
    /// Requests in flight finish on the table they started with.
    pub fn reconfigure(&self, config: Arc<Config>) {
        configure_registry(&self.registry, &config);
        self.log.usage().configure(&config);
        self.sessions.set_limits(config.routing.session_limits());
        let previous = self.routes.load();
        let routes = Routes::build(config, self.seed, previous.executor(), &self.confirmed.load());
        register_oauth_clients(&self.oauth, &routes);
        self.routes.store(Arc::new(routes));
    }

    /// Adds `bindings` to the confirmed ones and rebuilds the routing table on the running
    /// config, so credentials they complete are used from the next request on. Storing them is
    /// the caller's job (the config editor), done first.
    pub fn confirm(&self, bindings: impl IntoIterator<Item = Binding>) {
        self.add_confirmed(bindings);
        self.reconfigure(self.config());
    }

    /// Adds `bindings` to the confirmed ones for the next routing table built.
    pub fn add_confirmed(&self, bindings: impl IntoIterator<Item = Binding>) {
        let mut confirmed = Confirmed::clone(&self.confirmed.load());
        confirmed.extend(bindings);
        self.confirmed.store(Arc::new(confirmed));
    }

    /// The confirmed bindings.
    pub fn confirmed(&self) -> Arc<Confirmed> {
        self.confirmed.load_full()
    }

    /// Admits `candidate` for one attempt: a concurrency slot (at once when one is free; when
    /// `queue` allows, after waiting in line up to `queue_ms` within the request's deadline,
    /// the wait reported), then [`Self::ready`]. The first stage of the attempt runner, for
    /// every role.
    async fn admit(
        &self,
        routes: &Routes,
        candidate: &Candidate,
        (permit, queue): (Duration, bool),
        login: Option<&Arc<ClientLogin>>,
        deadline: Instant,
    ) -> driver::Admitted {
        let mut queued = None;
        let slot = if routes.slots.any() {
            let slot = match routes.slots.try_take(&candidate.key) {
                Some(slot) => Some(slot),
                None if queue => {
                    let waited = Instant::now();
                    let line = Duration::from_millis(u64::from(routes.config.routing.queue_ms));
                    let slot = routes.slots.take(&candidate.key, deadline.min(waited + line)).await;
                    queued = Some(waited.elapsed());
                    slot
                }
                None => None,
            };
            let Some(slot) = slot else {
                return driver::Admitted { ready: Err("at_capacity"), queued };
            };
            Some(slot)
        } else {
            None
        };
        let ready =
            self.ready(routes, candidate, permit, login).await.map(|(mut attempt, secret)| {
                if let Some(slot) = slot {
                    attempt.hold(slot);
                }
                (attempt, secret)
            });
        driver::Admitted { ready, queued }
    }

    /// What the request machine asks of the routing state: the retry budget, the measured
    /// times to first event, which credentials refresh, which targets refused a continuation.
    fn world<'a>(&'a self, routes: &'a Routes) -> Surroundings<'a> {
        Surroundings { proxy: self, routes }
    }

    /// Restores what the state file keeps of sessions and quota (RESILIENCE.md §11), and
    /// keeps the file to write headroom transitions to from now on.
    pub async fn restore(&self, store: &switchyard_store::Store) {
        self.restore_sessions(store).await;
        match store.load_headroom().await {
            Ok(rows) => {
                let now = self.clock.now();
                let mut headroom = self.headroom.lock();
                for (key, windows) in rows {
                    headroom.restore(key, windows, now);
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read quota windows back"),
        }
        let _ = self.state.set(store.clone());
    }

    /// Restores where each session was pinned from the request log of the state file (each
    /// session's newest served request within the idle time), so a restart does not scatter
    /// running agent sessions over other keys. A pin whose target or credential is no longer
    /// configured is let go; a file that cannot be read leaves the table empty.
    async fn restore_sessions(&self, store: &switchyard_store::Store) {
        let config = self.config();
        if !config.routing.sessions {
            return;
        }
        let now = self.clock.now();
        let idle = Duration::from_millis(config.routing.session_limits().idle_ms);
        let rows = match store.session_pins(now.minus(idle)).await {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(%error, "cannot read session pins back from the request log");
                return;
            }
        };
        let routes = self.routes();
        let pins = rows.into_iter().filter_map(|row| {
            let session = SessionKey::parse_hex(&row.session)?;
            let (provider, model) = row.served_by.split_once('/')?;
            let credential = row.credential.as_str();
            let configured = routes
                .roster(&ProviderId::from(provider))
                .is_some_and(|r| r.credentials.iter().any(|c| c.as_str() == credential));
            // A home no longer configured is let go: the session stays where it is.
            let home = row.home.as_deref().and_then(|home| home.split_once('/')).and_then(
                |(provider, model)| {
                    let provider = ProviderId::from(provider);
                    let target = (provider, ModelId::from(model));
                    routes.roster(&target.0).is_some().then(|| Home::restored(target))
                },
            );
            let key = CandidateKey::new(provider, credential, model);
            configured.then_some((session, Pin::new(key, home), row.at))
        });
        self.sessions.restore(pins, now);
        tracing::debug!(sessions = self.sessions.len(), "session pins restored");
    }

    /// The caller's own login, when the request carries one, with every `client` candidate of
    /// `plan` scoped to its account: one subscriber's spent window benches that
    /// subscription only. Without a login the candidates stay as they are, and are skipped.
    fn client_login(
        &self,
        routes: &Routes,
        inbound: &ClientRequest<'_>,
        caller: Option<&LocalKey>,
        plan: &mut Plan,
    ) -> Option<Arc<ClientLogin>> {
        // Most configs have no `client` credential: one flag, read once, keeps the request path
        // from looking each candidate up.
        if !routes.has_client_credentials() {
            return None;
        }
        let client = |c: &Candidate| {
            let provider = routes.provider(&c.key.provider);
            let credential = provider.and_then(|p| p.credential(&c.key.credential));
            credential.is_some_and(|c| c.kind == CredentialKind::Client)
        };
        if !plan.candidates.iter().any(client) {
            return None;
        }
        let login = ClientLogin::of(inbound.headers, inbound.dialect.dialect(), &self.login_salt)?;
        let caller = caller.map_or("", |k| &*k.id);
        let mut accounts = self.accounts.lock();
        for candidate in plan.candidates.iter_mut().filter(|c| client(c)) {
            let credential = candidate.key.credential_key();
            let (scoped, new) = accounts.scope(&credential, caller, login.scope());
            if new {
                let key = CredentialKey {
                    provider: candidate.key.provider.clone(),
                    credential: scoped.clone(),
                };
                self.registry.set_credential_kind(key, CredentialKind::Client);
            }
            candidate.key.credential = scoped;
        }
        Some(login)
    }

    /// Pauses or resumes routing. While paused, client requests get a 503 naming the pause and
    /// no upstream is called; requests already in flight finish. Not saved: a restart resumes.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
        tracing::info!(paused, "routing {}", if paused { "paused" } else { "resumed" });
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }
}

/// One credential's quota windows, as the health page and `/metrics` show them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, ts_rs::TS)]
#[ts(export)]
pub struct HeadroomView {
    pub provider: ProviderId,
    pub credential: CredentialId,
    pub windows: Vec<Window>,
    /// Under `[settings.routing] reserve_percent` in some window: it takes no new session
    /// while another credential of its target has more.
    pub below_reserve: bool,
    /// A subscription's window (a `client` credential, by the account it served):
    /// its requests are covered by the plan, not priced.
    pub subscription: bool,
}

/// What the request log keeps of a request besides its status and timing.
#[derive(Debug, Default)]
struct Summary {
    model: String,
    /// The combo the model resolved to, once it has.
    combo: Option<String>,
    served_by: Option<String>,
    attempts: u32,
    /// Served by an attempt other than the request's first: a fallback, or a hedge that won
    /// (a hedge that lost does not make its request a fallback).
    fell_back: bool,
    /// The routing trace, written as JSON once, when the request is logged.
    trace: Vec<exhausted::TraceEntry>,
    /// For a stream being relayed: told how it ended, when it has.
    ended: Option<oneshot::Receiver<StreamOutcome>>,
    /// Trace lines a continuation adds once the stream has broken (RESILIENCE.md §10).
    notes: Option<continuation::Notes>,
    /// What every attempt used, read once they have all reported.
    tally: Arc<tally::Tally>,
    /// The agent session the request belongs to, when sessions are on.
    session: Option<SessionKey>,
    /// The credential that served.
    credential: Option<String>,
    /// The target its session returns to once it heals, after this request.
    session_home: Option<String>,
    /// The attempt that served, until the routing state and the trace are told.
    served: Option<Served>,
}

/// What the attempt that served tells the routing state (its latency, its session's pin) and
/// the trace. Told by the task that logs the request, once the answer is on its way, not on
/// the answer's path; a request of the same session that arrives before then is
/// routed as if it had come a moment earlier, as concurrent requests of a session are.
#[derive(Debug)]
struct Served {
    key: CandidateKey,
    /// The request's first candidate, where its session was steered.
    first: CandidateKey,
    took: Duration,
    stream: bool,
    status: u16,
    carried: Carried,
    session: Option<SessionKey>,
    /// Where the request's session was steered, and why.
    steered: Steer,
    routes: Arc<Routes>,
}

impl Summary {
    fn settle(&mut self, trace: Vec<exhausted::TraceEntry>, attempts: u32) {
        self.trace = trace;
        self.attempts = attempts;
    }
}

/// A request served or refused, with what the request log keeps of it.
struct Done {
    at: switchyard_core::UnixMillis,
    elapsed: Duration,
    client: ClientDialect,
    status: u16,
    fallback: bool,
    /// The local key that made it: its id and name.
    caller: Option<(Arc<str>, Arc<str>)>,
    summary: Summary,
}

impl Done {
    /// Its record, whole: the trace and usage of every attempt.
    fn log(self, log: &RequestLog) -> Arc<RequestRecord> {
        let Unlogged { record, key, entries, tally, .. } = self.unlogged();
        let trace = trace_json(entries, &tally);
        log.record(RequestRecord { trace, ..record }, key.as_deref())
    }

    fn unlogged(self) -> Unlogged {
        let Self { at, elapsed, client, status, fallback, caller, summary } = self;
        let spent = summary.tally.spent();
        let (local_key, key) = caller.map_or((None, None), |(id, name)| (Some(id), Some(name)));
        let record = RequestRecord {
            at,
            dialect: client.dialect().as_str().to_owned(),
            model: summary.model,
            served_by: summary.served_by,
            status,
            attempts: summary.attempts,
            duration_ms: millis(elapsed),
            trace: String::new(),
            outcome: None,
            first_byte_ms: Some(millis(elapsed)),
            usage: spent.map(|s| s.usage),
            cost: spent.and_then(|s| s.cost),
            local_key: local_key.map(|id| String::from(&*id)),
            combo: summary.combo,
            fallback,
            session: summary.session.map(SessionKey::to_hex),
            credential: summary.credential,
            session_home: summary.session_home,
        };
        Unlogged { record, key, entries: summary.trace, tally: summary.tally, notes: summary.notes }
    }
}

/// A request's record before its trace is written: what a stream's record waits with.
struct Unlogged {
    /// Without its trace.
    record: RequestRecord,
    /// The local key's name.
    key: Option<Arc<str>>,
    /// The trace's lines so far.
    entries: Vec<exhausted::TraceEntry>,
    /// The attempts' meters.
    tally: Arc<tally::Tally>,
    /// The lines a continuation adds.
    notes: Option<continuation::Notes>,
}

/// What one attempt came to, and how its request was made.
struct Tried {
    result: TriedResult,
    carried: Carried,
}

enum TriedResult {
    /// The answer is on its way to the client; a stream says how it ended when it has.
    Served(Response, Option<oneshot::Receiver<StreamOutcome>>),
    /// Failed before the client saw anything.
    Failed { verdict: Verdict, upstream: Option<(u16, UpstreamError)> },
}

impl From<TriedResult> for Tried {
    fn from(result: TriedResult) -> Self {
        Self { result, carried: Carried::default() }
    }
}

/// The trace as the request log keeps it: written once, with a `used` line per attempt that
/// reported usage (never parsed back to add lines).
fn trace_json(mut entries: Vec<exhausted::TraceEntry>, tally: &tally::Tally) -> String {
    entries.extend(tally.trace_entries());
    serde_json::to_string(&entries).unwrap_or_default()
}

/// The cost header of a non-streamed answer, when its cost is known: every attempt has
/// reported by the time the answer is returned.
fn cost_header(response: &mut Response, tally: &tally::Tally) {
    if let Some(cost) = tally.spent().and_then(|s| s.cost)
        && let Ok(value) = HeaderValue::from_str(&cost.to_string())
    {
        response.headers_mut().insert(COST_HEADER, value);
    }
}

/// The quota headers of the answer that served, which go back to the client with it (issue
/// 28): a subscription's `anthropic-ratelimit-unified-*` and Codex's `x-codex-*` windows, so a
/// CLI still shows its user their limits, and an API key's `anthropic-ratelimit-*` /
/// `x-ratelimit-*`. Only the target that served speaks here; one passed over shows in the
/// trace.
fn quota_headers(upstream: &HeaderMap) -> Vec<(header::HeaderName, HeaderValue)> {
    let relayed = |name: &str| headroom::QUOTA_HEADER_PREFIXES.iter().any(|p| name.starts_with(p));
    upstream
        .iter()
        .filter(|(name, _)| relayed(name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// What served a request, how many attempts it took and what it cost: made at compile time, so
/// no request checks their bytes.
const TARGET_HEADER: header::HeaderName = header::HeaderName::from_static("x-switchyard-target");
const ATTEMPTS_HEADER: header::HeaderName =
    header::HeaderName::from_static("x-switchyard-attempts");
const COST_HEADER: header::HeaderName = header::HeaderName::from_static("x-switchyard-cost");

/// The routing headers naming what really served.
fn routing_headers(response: &mut Response, target: &Target, attempts: u32) {
    // The label's bytes become the value as they are: `from_str` would copy them.
    if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(target.label())) {
        response.headers_mut().insert(TARGET_HEADER, v);
    }
    let attempts = usize::try_from(attempts)
        .ok()
        .and_then(|n| FEW.get(n))
        .map_or_else(|| HeaderValue::from(attempts), HeaderValue::clone);
    response.headers_mut().insert(ATTEMPTS_HEADER, attempts);
}

/// The usual attempt counts as header values made once: `HeaderValue::from(u32)` allocates.
static FEW: [HeaderValue; 4] = [
    HeaderValue::from_static("0"),
    HeaderValue::from_static("1"),
    HeaderValue::from_static("2"),
    HeaderValue::from_static("3"),
];

impl Proxy {
    /// Serves one client request end to end, and logs it with its routing trace.
    /// `query` is the client's query string (without `?`), forwarded with its body to a
    /// same-dialect upstream.
    /// `caller` is the local key that made it (`None` for the UI's "try it").
    pub async fn handle(
        self: &Arc<Self>,
        client: ClientDialect,
        caller: Option<&LocalKey>,
        headers: &HeaderMap,
        query: Option<&str>,
        body: Bytes,
    ) -> Result<Response, Refused> {
        let work = Work::Chat;
        self.logged((client, work), None, caller, headers, query, body, Provisional::No).await.0
    }

    /// [`Proxy::handle`] for a client that names its model in the path rather than the body
    /// (Gemini's `models/{model}:generateContent`); nothing of its query goes upstream.
    pub async fn handle_named(
        self: &Arc<Self>,
        client: ClientDialect,
        model: &str,
        caller: Option<&LocalKey>,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, Refused> {
        let client = (client, Work::Chat);
        self.logged(client, Some(model), caller, headers, None, body, Provisional::No).await.0
    }

    /// Embeds a client's input (`POST /v1/embeddings`, Gemini's `:embedContent` and
    /// `:batchEmbedContents`, whose path names `model`) through its route, falling back only
    /// within one embedding space (`switchyard_core::routing::embeddings`).
    pub async fn embed(
        self: &Arc<Self>,
        shape: Shape,
        model: Option<&str>,
        caller: Option<&LocalKey>,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, Refused> {
        let client = match shape {
            Shape::OpenAi => ClientDialect::OpenAi,
            Shape::GeminiOne | Shape::GeminiBatch => ClientDialect::Gemini(Method::Generate),
        };
        let work = (client, Work::Embed(shape));
        self.logged(work, model, caller, headers, None, body, Provisional::No).await.0
    }

    /// [`Proxy::handle`], with the request log's record of it.
    pub async fn handle_logged(
        self: &Arc<Self>,
        client: ClientDialect,
        caller: Option<&LocalKey>,
        headers: &HeaderMap,
        query: Option<&str>,
        body: Bytes,
    ) -> (Result<Response, Refused>, Arc<RequestRecord>) {
        let client = (client, Work::Chat);
        let (response, record) =
            self.logged(client, None, caller, headers, query, body, Provisional::Yes).await;
        (response, record.expect("a provisional record was asked for"))
    }

    /// Serves and logs one request. The record comes back when it is logged at once (a
    /// non-streamed answer, a refusal), or for a stream when `provisional` asks for the record
    /// as it stands (the UI's "try it" shows it); otherwise a stream's record is only built
    /// when the stream is over, so its first byte does not wait for a copy nobody reads.
    #[expect(clippy::too_many_arguments, reason = "the request's parts, as the handlers have them")]
    async fn logged(
        self: &Arc<Self>,
        (client, work): (ClientDialect, Work),
        model: Option<&str>,
        caller: Option<&LocalKey>,
        headers: &HeaderMap,
        query: Option<&str>,
        body: Bytes,
        provisional: Provisional,
    ) -> (Result<Response, Refused>, Option<Arc<RequestRecord>>) {
        let started = Instant::now();
        let at = self.clock.now();
        let mut summary = Summary::default();
        let inbound = ClientRequest { dialect: client, work, model, body: &body, query, headers };
        let response = self.route(&inbound, &body, &mut summary, caller).await;
        let elapsed = started.elapsed();
        self.counters.request_latency.observe(elapsed);
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        self.counters.attempts.fetch_add(u64::from(summary.attempts), Ordering::Relaxed);
        let fallback = summary.served.is_some() && summary.fell_back;
        if fallback {
            self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        let status = match &response {
            Ok(response) => response.status(),
            Err(refused) => refused.error.status,
        }
        .as_u16();
        let ended = summary.ended.take();
        let mut done = Done {
            at,
            elapsed,
            client,
            status,
            fallback,
            caller: caller.map(|k| (Arc::clone(&k.id), Arc::clone(&k.name))),
            summary,
        };
        let Some(ended) = ended else {
            // A non-streamed answer or a refusal: logged once the answer is on its way. The
            // task runs after this one has handed the response to its connection, so the log's
            // work (the trace's JSON, usage, the ring) is not on the answer's path.
            // A caller that reads the record (the UI's "try it") waits for it.
            if provisional == Provisional::Yes {
                self.settle_served(&mut done.summary);
                return (response, Some(done.log(&self.log)));
            }
            let proxy = Arc::clone(self);
            tokio::spawn(async move {
                proxy.settle_served(&mut done.summary);
                done.log(&proxy.log)
            });
            return (response, None);
        };
        // A stream is logged when it is over, with how it ended and how long it really took
        // (RESILIENCE.md §7); until then a caller that asks gets the record as it stands.
        // The record is made in the task, off the first byte's path, unless it is asked for.
        let made = match provisional {
            Provisional::Yes => {
                self.settle_served(&mut done.summary);
                Ok(done.unlogged())
            }
            Provisional::No => Err(done),
        };
        let provisional = made.as_ref().ok().map(|Unlogged { record, entries, .. }| {
            let trace = serde_json::to_string(entries).unwrap_or_default();
            Arc::new(RequestRecord { trace, ..record.clone() })
        });
        tokio::spawn(Arc::clone(self).log_stream(made, ended, started));
        (response, provisional)
    }

    /// Logs a streamed request once its stream is over (`ended`), with how it ended, what
    /// its continuations added and how long it really took. `made` is its record as it stood
    /// when served, or what makes it.
    async fn log_stream(
        self: Arc<Self>,
        made: Result<Unlogged, Done>,
        ended: oneshot::Receiver<StreamOutcome>,
        started: Instant,
    ) {
        let Unlogged { record, key, mut entries, tally, notes } =
            made.unwrap_or_else(|mut done| {
                self.settle_served(&mut done.summary);
                done.unlogged()
            });
        let outcome = ended.await.unwrap_or(StreamOutcome::Broken);
        self.counters.stream_ended(outcome);
        let continued = continuation::noted(&mut entries, notes.as_ref());
        // Every attempt has reported by now: the stream's relay settles its meter before it
        // says how the stream ended, and a cancelled racer was dropped long before.
        let spent = tally.spent();
        let record = RequestRecord {
            trace: trace_json(entries, &tally),
            usage: spent.map(|s| s.usage),
            cost: spent.and_then(|s| s.cost),
            attempts: record.attempts + continued,
            outcome: Some(outcome.as_str().to_owned()),
            duration_ms: millis(started.elapsed()),
            ..record
        };
        self.log.record(record, key.as_deref());
    }

    /// Counts the tokens of a Messages body (or a Gemini `countTokens` body) for its model.
    pub async fn count_tokens(
        &self,
        counting: Counting<'_>,
        headers: &HeaderMap,
        query: Option<&str>,
        body: Bytes,
    ) -> Result<Response, Refused> {
        count::count(self, counting, headers, query, body).await
    }

    pub fn request_log(&self) -> &RequestLog {
        &self.log
    }

    pub fn counters(&self) -> CounterValues {
        self.counters.values()
    }

    /// Routes one client request: reads it, plans it, drives its attempts, and names what
    /// served (RESILIENCE.md §1).
    async fn route(
        self: &Arc<Self>,
        inbound: &ClientRequest<'_>,
        body: &Bytes,
        summary: &mut Summary,
        caller: Option<&LocalKey>,
    ) -> Result<Response, Refused> {
        let dialect = ErrorDialect::from(inbound.dialect);
        let routes = self.routes.load_full();
        let turn = self.turn(inbound, body, summary, caller).map_err(|r| r.refused_in(dialect))?;
        let routed =
            turn.as_ref().map_or(*inbound, |t| ClientRequest { body: &t.body, ..*inbound });
        let Prepared { request, combo, embedding } =
            prepare(&routes, &routed, summary, self.is_paused())
                .map_err(|refusal| refusal.refused_in(dialect))?;
        // An enforced budget that is spent refuses before anyone is asked.
        if let Err(budget) = self.log.usage().check(caller) {
            return Err(budget_refusal(dialect, &budget));
        }
        let arrived = Instant::now();
        let sticky = turn.as_ref().and_then(|t| t.sticky.as_ref());
        let mut planned = self.plan(&routes, (&combo, &request, sticky), inbound, caller);
        summary.session = planned.session;
        let mut trace = Trace::new(&planned.plan, &combo);
        if let Some(decision) = &planned.decision {
            trace.ranked(decision);
        }
        self.send_probes(&routes, &planned.plan, &mut trace);
        // The bytes routed, shared rather than copied: the client's, or its turn's.
        let routed_body = turn.as_ref().map_or_else(|| body.clone(), |t| t.body.clone());
        let notes = continuation::Notes::default();
        if request.stream() {
            summary.notes = Some(Arc::clone(&notes));
        }
        let tally = Arc::clone(&summary.tally);
        let mut candidates = std::mem::take(&mut planned.plan.candidates);
        if embedding.is_some() {
            candidates = within_one_space(&routes, &combo, candidates, &mut trace);
        }
        let first = candidates.first().map(|c| c.key.clone());
        // Boxed: it moves from here to the driver and, for a stream, on to its relay, and
        // every future that holds it would carry its size.
        let machine = Box::new(Request::new(
            Offer::all(&combo, candidates),
            limits(&routes, &combo, &request, inbound.work),
        ));
        let sending = Sending {
            routes: &routes,
            request: &request,
            inbound: &routed,
            client: inbound,
            dialect,
            turn: turn.as_ref(),
            session_credential: planned.pinned.as_ref(),
            session: planned.session,
            login: planned.login.as_ref(),
            routed_body: &routed_body,
            embedding: embedding.as_ref(),
            combo: &combo,
            arrived,
            notes: &notes,
            tally: &tally,
        };
        let driver = driver::Driver { proxy: self, sending: &sending, trace: &mut trace };
        match driver.drive(machine).await {
            Driven::Served(won) => {
                let served = (won, first, planned.steered, planned.decision);
                Ok(Self::served(&sending, served, summary, trace))
            }
            Driven::Refused(refused, attempts) => {
                summary.settle(trace.into_entries(), attempts);
                Err(refused)
            }
            Driven::Exhausted(attempts) => {
                summary.settle(trace.entries().to_vec(), attempts);
                Err(trace.exhausted(&self.registry, self.clock.now()).refused_in(dialect))
            }
        }
    }

    /// A Responses request that continues an earlier response is routed with the whole
    /// conversation; an unknown id is refused before anyone is asked. `None` for any other.
    fn turn(
        &self,
        inbound: &ClientRequest<'_>,
        body: &Bytes,
        summary: &mut Summary,
        caller: Option<&LocalKey>,
    ) -> Result<Option<Turn>, ApiError> {
        if inbound.dialect != ClientDialect::Responses || inbound.work != Work::Chat {
            return Ok(None);
        }
        self.conversations.turn(body, caller.map(|k| &k.id)).map(Some).inspect_err(|_| {
            summary.model = ChatRequest::minimal(Dialect::Responses, body)
                .map(|r| bounded(&r.model).into_owned())
                .unwrap_or_default();
        })
    }

    /// Plans `combo` for `request` (RESILIENCE.md §1, §11): a pinned session goes to its pin,
    /// strategies (and `auto`) choose only for a new one; the caller's own login scopes its
    /// subscription candidates; a new session goes past a key under its quota reserve, and
    /// anyone but a pinned session to a credential with a free concurrency slot first.
    fn plan(
        &self,
        routes: &Routes,
        (combo, request, sticky): (&Combo, &Parsed<'_>, Option<&CredentialKey>),
        inbound: &ClientRequest<'_>,
        caller: Option<&LocalKey>,
    ) -> Planned {
        let now = self.clock.now();
        routes.budget.on_request(now);
        // Embeddings keep no conversation, so they have no session to keep a cache warm for.
        let chat = inbound.work == Work::Chat;
        let session = (routes.config.routing.sessions && chat)
            .then(|| sessions::session_of(inbound.headers, request, caller.map(|k| &*k.id)))
            .flatten();
        // A first turn is planned as new, unless its session broke and has not healed since.
        let found = session.and_then(|s| self.sessions.pin(s.key, now));
        let continuing = session.is_some_and(|s| s.continuing);
        let pin = found.as_ref().filter(|pin| pin.holds(continuing));
        let roster = |p: &ProviderId| routes.roster(p);
        let mut plan = plan_for(combo, roster, &self.orderer, &self.registry, now, pin.is_none());
        let decision =
            (combo.strategy == RouteStrategy::Auto && pin.is_none() && chat).then(|| {
                // Ranked on the whole request; on its settings alone when it has no canonical
                // form (only its own dialect's targets can take it then).
                let ranked = request.whole().unwrap_or(request.settings());
                auto::rank_auto(self, routes, combo, ranked, &mut plan, now)
            });
        let login = self.client_login(routes, inbound, caller, &mut plan);
        let ordered = combo.strategy == RouteStrategy::Priority;
        let degraded = |p: &ProviderId| self.registry.ranks_last(p, now);
        let steered = self.sessions.steer(&mut plan, pin, ordered, degraded);
        if let Some(sticky) = sticky {
            session::prefer_credential(&mut plan, sticky);
        }
        if pin.is_none() {
            let reserve = f64::from(routes.config.routing.reserve_percent) / 100.0;
            let headroom = self.headroom.lock();
            if !headroom.is_empty() {
                prefer_within_targets(&mut plan.candidates, |key| {
                    headroom.below(&key.credential_key(), reserve, now)
                });
            }
        }
        if routes.slots.any() {
            let keep = usize::from(steered == Steer::Kept).min(plan.candidates.len());
            slots::free_first(&mut plan.candidates[keep..], &routes.slots);
        }
        let pinned = pin.map(|p| p.key.credential_key());
        Planned { plan, decision, login, session: session.map(|s| s.key), steered, pinned }
    }

    /// The answer that served, with the routing headers naming it; what served is told to the
    /// routing state once the answer is on its way (`settle_served`).
    fn served(
        sending: &Sending<'_, '_>,
        (won, first, steered, decision): (
            driver::Won,
            Option<CandidateKey>,
            Steer,
            Option<auto::Decision>,
        ),
        summary: &mut Summary,
        trace: Trace,
    ) -> Response {
        let driver::Won {
            tried: Tried { result, carried },
            candidate,
            started,
            attempts,
            fell_back,
        } = won;
        let TriedResult::Served(mut response, ended) = result else {
            unreachable!("only an answer is served")
        };
        let stream = sending.request.stream();
        summary.fell_back = fell_back;
        summary.served = Some(Served {
            first: first.unwrap_or_else(|| candidate.key.clone()),
            key: candidate.key,
            took: started.elapsed(),
            stream,
            status: response.status().as_u16(),
            carried,
            session: sending.session,
            steered,
            routes: Arc::clone(sending.routes),
        });
        routing_headers(&mut response, &sending.combo.targets[candidate.target], attempts);
        if let Some(value) = decision.as_ref().and_then(auto::Decision::header) {
            response.headers_mut().insert(auto::DECISION_HEADER, value);
        }
        if !stream {
            cost_header(&mut response, &summary.tally);
        }
        summary.settle(trace.into_entries(), attempts);
        summary.ended = ended;
        response
    }

    /// Sends the recovery probes the planner asked for (RESILIENCE.md §3), each in a task of its
    /// own that the user's request does not wait for, and notes each in the trace. A probe is
    /// a retry in the budget's eyes: under load the budget bounds them. The budget is asked
    /// last, so a probe refused for another reason (one in flight already) spends nothing.
    fn send_probes(&self, routes: &Arc<Routes>, plan: &Plan, trace: &mut Trace) {
        for wanted in &plan.probes {
            let now = self.clock.now();
            let bench = wanted.bench.code();
            let afford = || routes.budget.try_retry(now);
            // The probe's own deadline (see `Prober::run`) is its half-open slot's.
            let permit = routes.config.timeouts.first_event;
            let started = self.registry.start_probe(&wanted.key, wanted.bench, now, permit, afford);
            let not_sent = match started {
                Err(refused) => Some(refused.code()),
                Ok(probe) => {
                    let prober = Prober {
                        routes: Arc::clone(routes),
                        oauth: self.oauth.clone(),
                        clock: Arc::clone(&self.clock),
                        policy: self.classify_policy(&routes.config),
                        sessions: Arc::clone(&self.sessions),
                    };
                    tokio::spawn(prober.run(probe));
                    None
                }
            };
            trace.probe(&wanted.key, bench, not_sent);
        }
    }

    /// Admits `candidate` and finds the secret it will present. `permit` is how long the attempt
    /// may take to its first real event (a non-streamed one: to its whole answer): a half-open
    /// probe slot it claims lasts that long, so a slow answer's success still closes the
    /// breaker. `Err` is why it is skipped: the registry refused it, the team's lease for a
    /// half-open probe went to another instance, or (OAuth) no usable token could be
    /// had, in which case the OAuth manager has benched the credential and says why in its
    /// status. None of these is an attempt.
    async fn ready(
        &self,
        routes: &Routes,
        candidate: &Candidate,
        permit: Duration,
        login: Option<&Arc<ClientLogin>>,
    ) -> Result<(Attempt, Option<Presented>), &'static str> {
        let key = &candidate.key;
        let now = self.clock.now();
        let mut attempt =
            self.registry.admit_until(key, now, now.plus(permit)).map_err(SkipReason::code)?;
        attempt.lease(now).await.map_err(SkipReason::code)?;
        // A login goes only to a target of the API it is for (see `login`).
        let login = login.filter(|l| {
            let provider = routes.provider(&key.provider);
            provider.is_some_and(|p| l.fits(p.dialect_for(key.model.as_str())))
        });
        match self.secret_for(routes, &key.provider, &key.credential, login).await {
            Ok(secret) => Ok((attempt, secret)),
            Err(error) => {
                tracing::info!(credential = %key, %error, "no secret to send");
                drop(attempt);
                Err(error.code())
            }
        }
    }

    /// The secret an attempt with `key` presents: the configured key, or for an OAuth
    /// credential a current access token (refreshed first when it is due). `Err` names why
    /// there is none.
    /// `login` is the caller's own, for a `client` credential.
    pub(crate) async fn secret_for(
        &self,
        routes: &Routes,
        provider: &ProviderId,
        credential: &CredentialId,
        login: Option<&Arc<ClientLogin>>,
    ) -> Result<Option<Presented>, NoSecret> {
        secret(&self.oauth, routes, provider, credential, self.clock.now(), login).await
    }

    /// After a 401 to an OAuth token: refresh it once, so the same target may be tried once
    /// more with the new token (RESILIENCE.md §2). The attempt's verdict has already benched
    /// the credential; a successful refresh brings it back.
    async fn refreshed_after_unauthorized(
        &self,
        key: &CandidateKey,
        rejected: Option<&Presented>,
    ) -> bool {
        let Some(Presented::Secret(rejected)) = rejected else { return false };
        let refreshed = self
            .oauth
            .refresh_after_unauthorized(&key.provider, &key.credential, rejected, self.clock.now())
            .await;
        match refreshed {
            Ok(_) => true,
            Err(error) => {
                tracing::info!(credential = %key, %error, "refresh after a 401 failed");
                false
            }
        }
    }

    /// One attempt at one candidate: send, classify once, record the verdict.
    /// The second stage of the attempt runner: for a stream, `rescue` brings the relay what a
    /// continuation needs if this attempt serves, and whether it keeps text for one; `repair`
    /// sends the request repaired (`Role::Repair`).
    async fn attempt(
        &self,
        sending: &Sending<'_, '_>,
        (candidate, target): (&Candidate, &Target),
        secret: Option<&Presented>,
        attempt: Attempt,
        first_event: Instant,
        (rescue, repair): (Option<(oneshot::Receiver<continuation::Rescue>, bool)>, bool),
    ) -> Tried {
        if let Some(embedding) = sending.embedding {
            let candidate = (candidate, target);
            // Boxed: a chat attempt's future would otherwise carry the embedding's too.
            let embed =
                self.embed_attempt(sending, embedding, candidate, secret, attempt, first_event);
            return Box::pin(embed).await;
        }
        let routes = sending.routes;
        let provider =
            routes.provider(&candidate.key.provider).expect("planned providers are configured");
        let client = sending.inbound.dialect;
        let request = sending.request;
        let credential = candidate.key.credential_key();
        let built = built_for(sending, (candidate, target), secret, &credential, repair);
        let (built, carried) = match built {
            Ok(built) => built,
            Err(tried) => {
                drop(attempt);
                return *tried;
            }
        };
        let passthrough = built.passthrough;
        // Shared, not copied: read again only if the upstream cannot read part of it.
        let sent = built.request.body.clone();
        let pending =
            sending.turn.map(|t| t.pending(&self.conversations, passthrough.then_some(credential)));
        let watch = request.stream().then(|| {
            sessions::Watch::new(&self.sessions, sending.session, sending.notes, &candidate.key)
        });
        let aftercare = Aftercare { rescue, watch };
        // A subscription's tokens are counted, not priced: they are covered by the caller's
        // plan, not API spend, and no enforced budget counts them.
        let covered = matches!(secret, Some(Presented::Client(_)));
        let prices = if covered { Prices::COVERED } else { tally::prices(target) };
        let meter = sending.tally.meter(&candidate.key, prices);
        let mut result = self
            .exchange(
                routes,
                client,
                request,
                built.request,
                (passthrough, pending, aftercare, meter),
                attempt,
                target,
                first_event,
            )
            .await;
        if let TriedResult::Failed { verdict, .. } = &mut result
            && verdict.retry_same == RetrySame::Repaired
            && passthrough::without_credential_bound_items(&sent).is_none()
        {
            // Nothing another credential wrote to leave out: the same request would be refused
            // the same way.
            verdict.retry_same = RetrySame::No;
        }
        scrub(&mut result, provider, secret);
        Tried { result, carried }
    }

    /// Sends one built request and reads its answer (RESILIENCE.md §2, §7).
    #[expect(
        clippy::too_many_arguments,
        reason = "the exchange needs both dialects, the attempt and its deadline"
    )]
    async fn exchange(
        &self,
        routes: &Routes,
        client: ClientDialect,
        request: &Parsed<'_>,
        upstream_request: executor::UpstreamRequest,
        (passthrough, pending, aftercare, meter): (bool, Option<Pending>, Aftercare, tally::Meter),
        attempt: Attempt,
        target: &Target,
        first_event: Instant,
    ) -> TriedResult {
        let provider = routes.provider(&target.provider).expect("planned providers are configured");
        let dialect = if passthrough {
            client.dialect()
        } else {
            provider.dialect_toward(target.model.as_str(), client.dialect())
        };
        // The proxy asked a forwarded Chat stream for usage the client did not want to see.
        let strip_usage =
            passthrough && upstream::asks_stream_usage(provider, dialect, request.settings());
        let headers_wait = first_event.saturating_duration_since(Instant::now());
        let key = attempt.key();
        let response = match self.send(routes, key, upstream_request, headers_wait, dialect).await {
            Head::Answer(response) => response,
            head => return self.not_answered(routes, attempt, head),
        };
        let label = target.label();
        let meta = ResponseMeta { model: &label, created: self.clock.now().0 / 1000 };
        let how = Answer { client, dialect, passthrough, strip_usage, trust: provider.trust };
        let limits = quota_headers(&response.headers);
        let mut result = if request.stream() {
            let held = (attempt, pending, aftercare, meter);
            // Boxed: a stream's relay is the larger of the two, and a non-streamed answer's
            // exchange would carry its size.
            Box::pin(self.relay(routes, how, request, response, held, &meta, first_event)).await
        } else {
            let held = (attempt, pending, meter);
            self.complete(routes, how, request, response, held, &meta, first_event).await
        };
        if let TriedResult::Served(served, _) = &mut result {
            served.headers_mut().extend(limits);
        }
        result
    }

    /// Sends one built request for `key` and reads its head: the one place a client request's
    /// attempt (any role) goes upstream. An error answer's body is read briefly, in `dialect`,
    /// for the classifier and the client; every answer's quota headers are read.
    async fn send(
        &self,
        routes: &Routes,
        key: &CandidateKey,
        built: executor::UpstreamRequest,
        wait: Duration,
        dialect: Dialect,
    ) -> Head {
        let response = match routes.executor.send(built, wait).await {
            Ok(response) => response,
            Err(failure) => return Head::Unsent(failure),
        };
        self.observe_headroom(key, &response.headers);
        if response.status.is_success() {
            return Head::Answer(response);
        }
        Head::Refused(Box::new(ErrorAnswer::read(response, dialect).await))
    }

    /// An attempt whose upstream gave no answer to read (`head` is not [`Head::Answer`]):
    /// unsent, or refused with an error status.
    fn not_answered(&self, routes: &Routes, attempt: Attempt, head: Head) -> TriedResult {
        match head {
            Head::Unsent(failure) => self.failed(routes, attempt, unsent(failure), None),
            Head::Refused(refused) => {
                let ErrorAnswer { status, headers, report } = *refused;
                let outcome = Upstream::Response { status, headers: &headers, body: report.hint };
                self.failed(routes, attempt, outcome, Some((status, report)))
            }
            Head::Answer(_) => unreachable!("an answer is read, not failed"),
        }
    }

    /// A non-streamed answer: read it whole, translate it, return it.
    #[expect(
        clippy::too_many_arguments,
        reason = "the answer needs both dialects, the attempt and its deadline"
    )]
    async fn complete(
        &self,
        routes: &Routes,
        how: Answer,
        request: &Parsed<'_>,
        response: executor::Response,
        (attempt, pending, mut meter): (Attempt, Option<Pending>, tally::Meter),
        meta: &ResponseMeta<'_>,
        first_event: Instant,
    ) -> TriedResult {
        let Answer { client, dialect, passthrough, .. } = how;
        let status = response.status.as_u16();
        let wait = first_event.saturating_duration_since(Instant::now());
        let body = match response.into_bytes(wait, executor::MAX_ANSWER).await {
            Ok(body) => body,
            Err(failure) => {
                let outcome = unread(&failure, &attempt);
                return self.failed(routes, attempt, outcome, None);
            }
        };
        // An answer without a finish reason was cut short, however well-formed its JSON: the
        // same decision as a stream's (`ending`), for a body that ended without an end marker.
        // One relayed as it is is read only for that, its usage and its model.
        let whole = |finish: bool| {
            let seen = Seen { content: true, finish };
            ending(seen, Exit::Eof, how.trust) == Ending::Complete
        };
        let answered = if passthrough {
            match dialect.decode_ending(&body) {
                // The upstream's own body, every field it wrote, with the model that served.
                Ok(read) if whole(read.finished) => {
                    let model = read.model.as_deref();
                    let body = passthrough::rewrite_answer_model(dialect, &body, meta.model, model);
                    Some((read.usage, body))
                }
                _ => None,
            }
        } else {
            match dialect.decode_response(&body) {
                Ok(answer) if whole(answer.stop_reason.is_some()) => {
                    let body = client.encode_response_for(request.translated(), &answer, meta);
                    Some((answer.usage, body))
                }
                _ => None,
            }
        };
        let Some((usage, encoded)) = answered else {
            return self.failed(routes, attempt, Upstream::Stream(StreamFault::Truncated), None);
        };
        // An answer without usage (some local hosts) reported none, rather than zero tokens.
        meter.settle(Some(usage).filter(|u| !u.is_zero()));
        if let Some(pending) = pending {
            pending.answered(&encoded);
        }
        let empty = HeaderMap::new();
        self.record(
            routes,
            attempt,
            Upstream::Response { status, headers: &empty, body: BodyHint::None },
        );
        let response = ([(header::CONTENT_TYPE, "application/json")], encoded).into_response();
        TriedResult::Served(response, None)
    }

    /// A streamed answer: hold it until its first real event, then relay it.
    #[expect(
        clippy::too_many_arguments,
        reason = "the stream needs both dialects, the attempt and its deadline"
    )]
    async fn relay(
        &self,
        routes: &Routes,
        how: Answer,
        request: &Parsed<'_>,
        response: executor::Response,
        (attempt, pending, Aftercare { rescue, watch }, meter): (
            Attempt,
            Option<Pending>,
            Aftercare,
            tally::Meter,
        ),
        meta: &ResponseMeta<'_>,
        first_event: Instant,
    ) -> TriedResult {
        let Answer { client, dialect, passthrough, strip_usage, .. } = how;
        let translator = if passthrough && strip_usage {
            StreamTranslator::relay(client, meta).strip_usage_chunks()
        } else if passthrough {
            StreamTranslator::relay(client, meta)
        } else {
            StreamTranslator::for_request(dialect, client, meta, request.translated())
        };
        let mut translator = translator.trusting(how.trust);
        let rescue = rescue.map(|(rescue, keep)| {
            if keep {
                translator.keep_for_continuation();
            }
            rescue
        });
        let (ended, when_ended) = oneshot::channel();
        let settle = forward::Settle {
            attempt,
            clock: Arc::clone(&self.clock),
            policy: self.classify_policy(&routes.config),
            ended: Some(ended),
            tap: pending.map(Pending::tap),
            rescue,
            watch,
            meter,
        };
        let chunks = Box::pin(response.into_stream());
        match forward::open(chunks, translator, first_event, routes.config.timeouts.idle, settle)
            .await
        {
            forward::Opened::Relaying(body) => {
                let mut response = Body::from_stream(body).into_response();
                let h = response.headers_mut();
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                TriedResult::Served(response, Some(when_ended))
            }
            forward::Opened::Failed(failure, settle) => {
                // An error event inside a 2xx stream, before anything reached the client, is
                // classified as the status its type stands for (RESILIENCE.md §2).
                let no_headers = HeaderMap::new();
                let upstream = failure.upstream(&no_headers);
                let report = match (&failure, upstream) {
                    (forward::Failure::ErrorEvent(report), Upstream::Response { status, .. }) => {
                        Some((status, report.clone()))
                    }
                    _ => None,
                };
                self.failed(routes, settle.attempt, upstream, report)
            }
        }
    }

    /// The live lockout settings plus the config's choice about policy refusals.
    fn classify_policy(&self, config: &Config) -> switchyard_core::outcome::ClassifyPolicy {
        let mut policy = self.registry.classify_policy();
        policy.policy_fallback = config.routing.fallback_on_policy;
        policy
    }

    /// Classifies `upstream` (nothing has reached the client) once and records the verdict.
    fn record(&self, routes: &Routes, attempt: Attempt, upstream: Upstream<'_>) -> Verdict {
        let now = self.clock.now();
        let policy = self.classify_policy(&routes.config);
        let verdict = classify(&Outcome::new(upstream), &policy, now);
        attempt.finish(&verdict, now);
        verdict
    }

    fn failed(
        &self,
        routes: &Routes,
        attempt: Attempt,
        upstream: Upstream<'_>,
        report: Option<(u16, UpstreamError)>,
    ) -> TriedResult {
        TriedResult::Failed { verdict: self.record(routes, attempt, upstream), upstream: report }
    }

    /// Reads what an answer's rate-limit headers say is left of `key`'s quota windows.
    /// A transition (crossing the reserve) is kept in the state file, off the request path.
    fn observe_headroom(&self, key: &CandidateKey, headers: &HeaderMap) {
        let now = self.clock.now();
        let windows = headroom::windows(headers, now);
        if windows.is_empty() {
            return;
        }
        let reserve = f64::from(self.config().routing.reserve_percent) / 100.0;
        let key = key.credential_key();
        let mut headroom = self.headroom.lock();
        if headroom.observe(&key, windows, reserve, now)
            && let Some(store) = self.state.get()
        {
            let (store, windows) = (store.clone(), headroom.all(&key).to_vec());
            let mut writes = self.headroom_writes.lock();
            while writes.try_join_next().is_some() {}
            writes.spawn(async move {
                if let Err(error) = store.save_headroom(&key, &windows, now).await {
                    tracing::debug!(%error, "quota windows not kept in the state file");
                }
            });
        }
    }

    /// Finishes the state-file writes under way (at shutdown).
    pub async fn close(&self) {
        let mut writes = std::mem::take(&mut *self.headroom_writes.lock());
        while writes.join_next().await.is_some() {}
    }

    /// Every measured credential's quota windows in force, and whether it is under its
    /// reserve: for the health page and `/metrics`.
    pub fn headroom(&self) -> Vec<HeadroomView> {
        let config = self.config();
        let reserve = f64::from(config.routing.reserve_percent) / 100.0;
        let now = self.clock.now();
        let headroom = self.headroom.lock();
        let mut views: Vec<((usize, usize), HeadroomView)> = headroom
            .keys()
            .filter_map(|key| {
                // Only what is configured now; a subscription by each account it served.
                let p = config.providers.iter().position(|p| p.id == key.provider)?;
                let provider = &config.providers[p];
                let c = provider
                    .credentials
                    .iter()
                    .position(|c| c.id.as_str() == key.credential.configured())?;
                let windows = headroom.windows(key, now);
                let view = HeadroomView {
                    provider: key.provider.clone(),
                    credential: key.credential.clone(),
                    below_reserve: headroom.below(key, reserve, now),
                    subscription: provider.credentials[c].kind == CredentialKind::Client,
                    windows,
                };
                (!view.windows.is_empty()).then_some(((p, c), view))
            })
            .collect();
        views.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.credential.cmp(&y.credential)));
        views.into_iter().map(|(_, view)| view).collect()
    }

    /// Feeds the time to a stream's first real event to its target's sketch.
    fn observe_first_event(&self, key: &CandidateKey, took: Duration) {
        self.registry.observe_first_event(&key.provider, &key.model, took, self.clock.now());
    }

    fn observe_latency(&self, routes: &Routes, key: &CandidateKey, latency: Duration) {
        self.counters.upstream_latency.observe(latency);
        self.orderer.observe_latency(&key.provider, &key.model, latency, self.clock.now());
        if let Some(roster) = routes.roster(&key.provider)
            && let Some(i) = roster.credentials.iter().position(|c| *c == key.credential)
        {
            roster.selector.observe_latency(i, latency);
        }
    }

    /// Tells the routing state and the trace what served `summary`'s request (see [`Served`]).
    fn settle_served(&self, summary: &mut Summary) {
        let Some(Served { key, first, took, stream, status, carried, session, steered, routes }) =
            summary.served.take()
        else {
            return;
        };
        summary.served_by = Some(key.target_label());
        summary.credential = Some(key.credential.as_str().to_owned());
        if stream {
            self.observe_first_event(&key, took);
        }
        self.observe_latency(&routes, &key, took);
        summary.trace.push(exhausted::TraceEntry::served(&key, status, took, carried));
        // A stream's relay tells the table when the answer is whole; this one is whole now.
        let whole = (!stream).then_some(Shown::Whole);
        let Some(session) = session else {
            if let Some(whole) = whole {
                self.sessions.shown(&key, whole);
            }
            return;
        };
        let serve = Serve { session, key: &key, first: &first, steered: &steered };
        // `None`: the stream already broke, and the relay moved the session off `key`.
        let at = self.clock.now();
        if let Some((repin, home)) = self.sessions.served(serve, at, whole, summary.notes.as_ref())
        {
            let entry = exhausted::TraceEntry::session(&key, session, &repin, &steered);
            summary.trace.push(entry);
            summary.session_home = home.map(|(p, m)| switchyard_core::ids::target_label(&p, &m));
        }
    }
}

/// Why a credential has no secret to send, and so sends nothing.
#[derive(Debug, thiserror::Error)]
pub enum NoSecret {
    /// Its requests would go to a destination the user never confirmed, or its
    /// secret to a destination the user never confirmed for it.
    #[error("{}", describe_unconfirmed(.0))]
    Unconfirmed(Unconfirmed),
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// A `client` credential (the caller's own login) on a request that carries no
    /// login it may present: no local key in `x-switchyard-key`, no `Authorization` beside it,
    /// or the login of another API than this target's.
    #[error(
        "credential \"{}/{}\" is the caller's own login and this request carries none for it: send your own sign-in in `Authorization` (Claude Code's or Codex's, as they send it) and the local key in `x-switchyard-key` (see docs/clients.md, \"Keep your subscription\")",
        .0.provider, .0.credential.configured()
    )]
    NoClientCredential(CredentialKey),
    /// Its secret cannot be read (a variable not set, a keychain entry missing or locked, a
    /// file missing or unsafe): only this credential is out until it can.
    #[error(
        "credential \"{}/{}\" has no secret to send ({}): {reason}; it is read again every few seconds, or at once with Retry now on the Providers page",
        .key.provider, .key.credential, exhausted::SECRET_UNAVAILABLE
    )]
    Unavailable { key: CredentialKey, reason: String },
}

impl NoSecret {
    /// A stable name for routing traces and the UI: the skip reason.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unconfirmed(unconfirmed) => unconfirmed.reason().code(),
            Self::OAuth(error) => error.code(),
            Self::NoClientCredential(_) => exhausted::NO_CLIENT_CREDENTIAL,
            Self::Unavailable { .. } => exhausted::SECRET_UNAVAILABLE,
        }
    }
}

/// `env:VAR to https://host:443, requests to https://host:443, ...`: what an unconfirmed
/// credential would send where.
pub fn describe_pairs(pairs: &[Binding]) -> String {
    let pairs: Vec<String> = pairs.iter().map(Binding::to_string).collect();
    pairs.join(", ")
}

/// What an unconfirmed credential would send where, its skip reason, and every way to
/// confirm it: the message of [`NoSecret::Unconfirmed`].
fn describe_unconfirmed(unconfirmed: &Unconfirmed) -> String {
    let (provider, credential) = (&unconfirmed.key.provider, &unconfirmed.key.credential);
    let (what, endpoint) = match unconfirmed.reason() {
        SkipReason::DestinationUnconfirmed => {
            (format!("provider \"{provider}\""), format!("/api/providers/{provider}/confirm"))
        }
        _ => (
            format!("credential \"{provider}/{credential}\""),
            format!("/api/providers/{provider}/credentials/{credential}/confirm"),
        ),
    };
    format!(
        "{what} is unconfirmed ({code}): it would send {pairs}, never confirmed; if you trust \
         that host, confirm it with Confirm on the Providers page, with `switchyard config \
         confirm --provider {provider}`, or with POST {endpoint}",
        code = unconfirmed.reason().code(),
        pairs = describe_pairs(&unconfirmed.missing),
    )
}

/// The secret an attempt (or a probe, a continuation, a connection test, a model list, a
/// token count) with `provider`'s `credential` presents: see [`Proxy::secret_for`]. Every path
/// that sends a request asks here first, a keyless credential too (it gets `None`), so this
/// is the one place an unconfirmed credential is stopped: before any request goes to a
/// destination the user never confirmed, and before any token refresh could send its refresh
/// token.
async fn secret(
    oauth: &OAuth,
    routes: &Routes,
    provider: &ProviderId,
    credential: &CredentialId,
    now: switchyard_core::UnixMillis,
    login: Option<&Arc<ClientLogin>>,
) -> Result<Option<Presented>, NoSecret> {
    let config = routes.provider(provider).and_then(|p| p.credential(credential));
    let Some(config) = config else { return Ok(None) };
    let key = CredentialKey { provider: provider.clone(), credential: credential.clone() };
    if let Some(unconfirmed) = routes.unconfirmed_for(&key) {
        return Err(NoSecret::Unconfirmed(unconfirmed.clone()));
    }
    match config.kind {
        CredentialKind::ApiKey => {
            match config.secret.as_deref().map(switchyard_secrets::LiveSecret::current) {
                None => Ok(None),
                Some(Ok(secret)) => Ok(Some(Presented::Secret(secret))),
                Some(Err(reason)) => Err(NoSecret::Unavailable { key, reason }),
            }
        }
        // The caller's own login, or nothing: no token of anyone else's stands in for it.
        CredentialKind::Client => match login {
            Some(login) => Ok(Some(Presented::Client(Arc::clone(login)))),
            None => Err(NoSecret::NoClientCredential(key)),
        },
        CredentialKind::Oauth => {
            // Boxed: a refresh (an HTTP exchange) is most of this future's size, and every
            // attempt's future holds this one, copied each time it moves.
            let token = Box::pin(oauth.access_token(provider, credential, now)).await?;
            Ok(Some(Presented::Secret(token)))
        }
    }
}

/// What a streamed attempt's relay is handed besides the stream: the rescue that may continue
/// it (RESILIENCE.md §10), with whether the relay keeps text for it, and what it tells the
/// session table of a break or a whole answer (§11).
struct Aftercare {
    rescue: Option<(oneshot::Receiver<continuation::Rescue>, bool)>,
    watch: Option<sessions::Watch>,
}

/// An upstream's answer head, or why there is none.
#[expect(
    clippy::large_enum_variant,
    reason = "the answer is the common case: boxing it would allocate on every request"
)]
enum Head {
    Answer(executor::Response),
    /// An error status, its body read for the classifier and the client.
    Refused(Box<ErrorAnswer>),
    /// No answer head came.
    Unsent(SendFailure),
}

struct ErrorAnswer {
    status: u16,
    headers: HeaderMap,
    report: UpstreamError,
}

impl ErrorAnswer {
    /// Reads an error answer's body, briefly: it is small and only feeds the classifier and
    /// the client's error.
    async fn read(response: executor::Response, dialect: Dialect) -> Self {
        let status = response.status.as_u16();
        let headers = response.headers.clone();
        let body = response
            .into_bytes(ERROR_BODY_DEADLINE, executor::MAX_ANSWER)
            .await
            .unwrap_or_default();
        Self { status, headers, report: dialect.error_report(&body) }
    }

    /// The classifier's input.
    fn upstream(&self) -> Upstream<'_> {
        Upstream::Response { status: self.status, headers: &self.headers, body: self.report.hint }
    }
}

/// What a recovery probe's task needs, owned: it outlives the request that started it.
struct Prober {
    routes: Arc<Routes>,
    oauth: OAuth,
    clock: Arc<dyn Clock>,
    policy: switchyard_core::outcome::ClassifyPolicy,
    /// Told what the probe showed of its target: a success may bring sessions home.
    sessions: Arc<SessionTable>,
}

impl Prober {
    /// Sends one probe and settles it; every early return drops the probe, which frees its slot.
    async fn run(self, mut probe: RecoveryProbe) {
        let key = probe.key().clone();
        let Some(provider) = self.routes.provider(&key.provider) else { return };
        let now = self.clock.now();
        if !probe.lease(now).await {
            tracing::debug!(target = %key, "another instance of the team probes this provider");
            return;
        }
        // A probe carries no caller, so never a `client` credential's login: it is skipped.
        let secret = match secret(
            &self.oauth,
            &self.routes,
            &key.provider,
            &key.credential,
            now,
            None,
        )
        .await
        {
            Ok(secret) => secret,
            Err(error) => {
                tracing::info!(target = %key, %error, "no token for a recovery probe");
                return;
            }
        };
        let request = match upstream::probe(provider, secret.as_ref(), key.model.as_str()) {
            Ok(request) => request,
            Err(error) => {
                tracing::info!(target = %key, %error, "no recovery probe for this target");
                return;
            }
        };
        let dialect = provider.dialect_for(key.model.as_str());
        // A one-token answer is quick: a probe gets the streaming first-event deadline, for its
        // head and body together (the registry holds its slot that long).
        let wait = self.routes.config.timeouts.first_event;
        let deadline = Instant::now() + wait;
        let empty = HeaderMap::new();
        let (verdict, status) = match self.routes.executor.send(request, wait).await {
            Ok(response) if response.status.is_success() => {
                let status = response.status.as_u16();
                // Read to the end so the connection goes back to the pool; the text is unused.
                let left = deadline.saturating_duration_since(Instant::now());
                let _ = response.into_bytes(left, executor::MAX_ANSWER).await;
                let ok = Upstream::Response { status, headers: &empty, body: BodyHint::None };
                (self.classify(ok), Some(status))
            }
            Ok(response) => {
                let refused = ErrorAnswer::read(response, dialect).await;
                (self.classify(refused.upstream()), Some(refused.status))
            }
            Err(failure) => (self.classify(unsent(failure)), None),
        };
        let bench = probe.bench().code();
        if let Some(shown) = Shown::of(verdict.kind) {
            self.sessions.shown(&key, shown);
        }
        let healed = probe.finish(&verdict, self.clock.now());
        tracing::info!(target = %key, bench, kind = verdict.kind.as_str(), ?status, healed, "recovery probe");
    }

    fn classify(&self, upstream: Upstream<'_>) -> Verdict {
        classify(&Outcome::new(upstream), &self.policy, self.clock.now())
    }
}

/// A request that got no answer head, as the classifier's input.
/// What a 2xx answer whose body could not be read whole comes to.
fn unread(failure: &SendFailure, attempt: &Attempt) -> Upstream<'static> {
    match failure {
        SendFailure::Timeout(_) => Upstream::Timeout(TimeoutPhase::FirstEvent),
        SendFailure::Transport(_) => Upstream::Stream(StreamFault::Cut),
        SendFailure::TooLarge(cap) => {
            let cap = executor::size(*cap);
            tracing::warn!(target = %attempt.key(), cap, "the upstream's answer is larger than the cap; not read");
            Upstream::Stream(StreamFault::Oversized)
        }
    }
}

fn unsent(failure: SendFailure) -> Upstream<'static> {
    match failure {
        SendFailure::Transport(fault) => Upstream::Transport(fault),
        SendFailure::Timeout(phase) => Upstream::Timeout(phase),
        SendFailure::TooLarge(_) => Upstream::Stream(StreamFault::Oversized),
    }
}

/// The request `candidate` is sent, and what of the client's request it carries; `Err` when
/// this target cannot express it: not the upstream's doing, and another target (of another
/// dialect) may. `repair` leaves out what only another credential could read (after
/// `invalid_encrypted_content`; asked only of a request that has some, see `Proxy::attempt`).
fn built_for(
    sending: &Sending<'_, '_>,
    (candidate, target): (&Candidate, &Target),
    secret: Option<&Presented>,
    credential: &CredentialKey,
    repair: bool,
) -> Result<(upstream::Built, Carried), Box<Tried>> {
    let provider =
        sending.routes.provider(&candidate.key.provider).expect("planned providers are configured");
    // Only the upstream that keeps the previous response gets `previous_response_id`.
    let sticky = sending.turn.and_then(|t| t.sticky.as_ref()) == Some(credential);
    let client = if sticky { sending.client } else { sending.inbound };
    let model = target.model.as_str();
    let breakpoints = match sending.routes.config.routing.cache_breakpoints {
        CacheBreakpoints::Always => true,
        CacheBreakpoints::Sessions => sending.session.is_some(),
        CacheBreakpoints::Off => false,
    };
    let key = sending.session.filter(|_| provider.prompt_cache_key).map(SessionKey::to_hex);
    let cache = Caching { breakpoints, key: key.as_deref() };
    let mut built = upstream::build(provider, secret, (model, cache), sending.request, client)
        .map_err(|error| not_built(&error, candidate))?;
    for field in built.dropped.names() {
        tracing::debug!(%field, target = %candidate.key, "not carried to this target's dialect");
    }
    let mut carried = Carried::of(built.passthrough, &built.dropped);
    // A session moved to this credential from another, or the upstream could not read what
    // another credential wrote: what only the other can read goes no further (RESILIENCE.md
    // §11), and the trace names it.
    let moved = sending.session_credential.is_some_and(|c| c != credential);
    if (moved || repair)
        && provider.dialect_toward(model, client.dialect.dialect()) == Dialect::Responses
        && let Some((body, unbound)) =
            passthrough::without_credential_bound_items(&built.request.body)
    {
        built.request.body = Bytes::from(body);
        carried.dropped.extend(unbound.names());
    }
    Ok((built, carried))
}

/// `result`'s upstream error with every secret the attempt presented taken out: the message goes
/// on to the client and the trace, and an upstream may echo any secret it was sent ("Incorrect
/// API key provided: sk-…", a secret header's value).
fn scrub(result: &mut TriedResult, provider: &ProviderConfig, secret: Option<&Presented>) {
    if let TriedResult::Failed { upstream: Some((_, report)), .. } = result {
        report.message = provider.scrub(secret.map(Presented::secret), &report.message);
    }
}

/// The attempt of a request `candidate`'s target cannot express (`error` says why): not the
/// upstream's doing, so it charges nothing, and another target (of another dialect) may take it.
fn not_built(error: &ProviderError, candidate: &Candidate) -> Box<Tried> {
    let verdict = Verdict {
        kind: OutcomeKind::ClientError,
        status: None,
        charges: switchyard_core::outcome::Charges::NOTHING,
        retry_same: RetrySame::No,
        fallback: Fallback::Yes,
        retry_after: None,
    };
    tracing::info!(%error, target = %candidate.key, "request not translatable for this target");
    let carried = Carried { path: None, dropped: vec![error.to_string()], added: Vec::new() };
    Box::new(Tried { result: TriedResult::Failed { verdict, upstream: None }, carried })
}

/// A request's plan, steered for its session and its credentials (`Proxy::plan`).
struct Planned {
    plan: Plan,
    /// `auto`'s ranking, for a new session.
    decision: Option<auto::Decision>,
    /// The caller's own login, for `client` credentials.
    login: Option<Arc<ClientLogin>>,
    session: Option<SessionKey>,
    /// Where the session was steered, and why.
    steered: Steer,
    /// The credential the session is pinned to, if it is.
    pinned: Option<CredentialKey>,
}

/// The limits `request` runs under, from the config it started on. Embeddings are never
/// hedged: an answer is a few hundred milliseconds, and a second one is billed whole.
fn limits(routes: &Routes, combo: &Combo, request: &Parsed<'_>, work: Work) -> Limits {
    let timeouts = &routes.config.timeouts;
    Limits {
        max_attempts: routes.config.routing.max_attempts,
        total: timeouts.total,
        first_event: timeouts.first_event,
        first_byte: timeouts.first_byte,
        non_stream: timeouts.non_stream,
        stream: request.stream(),
        hedge: combo.hedge.filter(|_| work == Work::Chat),
    }
}

/// An embeddings request's candidates: those that embed into the space of the combo's first
/// target (in the order the user wrote), whatever is benched; the others are named in the trace
/// and never asked, so no answer mixes vectors of two models.
fn within_one_space<'r>(
    routes: &'r Routes,
    combo: &'r Combo,
    candidates: Vec<Candidate>,
    trace: &mut Trace,
) -> Vec<Candidate> {
    let space = |target: &'r Target| {
        let model = target.model.as_str();
        routes.provider(&target.provider).map_or(model, |p| p.embedding_space(model))
    };
    let home = combo.targets.first().map_or("", space);
    let (offered, others) =
        embeddings::within_space(candidates, home, |c| space(&combo.targets[c.target]));
    for candidate in &others {
        trace.skip(candidate, embeddings::OTHER_SPACE);
    }
    offered
}

/// A client request ready to route.
struct Prepared<'r, 'b> {
    request: Parsed<'b>,
    combo: Cow<'r, Combo>,
    /// An embeddings request, read whole; `request` then holds only its model.
    embedding: Option<EmbedRequest<'b>>,
}

/// One attempt's view of the client request.
struct Sending<'s, 'b> {
    routes: &'s Arc<Routes>,
    request: &'s Parsed<'b>,
    /// The body routed: the client's, or its conversation expanded (see [`Turn`]).
    inbound: &'s ClientRequest<'s>,
    /// The client's own bytes, for the credential that keeps the previous response.
    client: &'s ClientRequest<'s>,
    /// The dialect errors are rendered in.
    dialect: ErrorDialect,
    /// A Responses request's place in its conversation.
    turn: Option<&'s Turn>,
    /// The credential the request's session is pinned to, if it is.
    session_credential: Option<&'s CredentialKey>,
    /// The request's session, told when a stream of it breaks or ends whole.
    session: Option<SessionKey>,
    /// The caller's own login, for `client` credentials.
    login: Option<&'s Arc<ClientLogin>>,
    /// `inbound`'s body, shared: what a continuation sends on.
    routed_body: &'s Bytes,
    /// An embeddings request: each attempt embeds it ([`Proxy::embed_attempt`]).
    embedding: Option<&'s EmbedRequest<'b>>,
    combo: &'s Combo,
    /// When the request arrived: its machine's time runs from here.
    arrived: Instant,
    /// Trace lines the rescues of this request add once it is logged.
    notes: &'s continuation::Notes,
    /// Each attempt, hedges included, gets a meter here.
    tally: &'s Arc<tally::Tally>,
}

impl Sending<'_, '_> {
    /// No attempt starts after this.
    fn deadline(&self) -> Instant {
        self.arrived + self.routes.config.timeouts.total
    }

    /// Why a stream served by `candidate` could not be continued if it broke, known now.
    fn continuation_ruled_out(&self, machine: &Request, candidate: usize) -> Option<&'static str> {
        // A body not read whole yet is read when the stream breaks, if it does.
        if self.request.known_unreadable() {
            return Some("not_translatable");
        }
        machine.continuation_ruled_out(candidate, continuation::shape(self.request.settings()))
    }

    /// Whether a stream relayed from `candidate` keeps what a continuation needs (text per
    /// block, the encoder's state): only when a later target could continue at all, so other
    /// streams pay nothing for it.
    fn keeps_for_continuation(&self, machine: &Request, candidate: usize) -> bool {
        self.continuation_ruled_out(machine, candidate).is_none()
    }

    /// What a continuation of the stream `candidate` serves needs (RESILIENCE.md §10): the
    /// request's machine, moved, and the request as routed; or only why it cannot be continued.
    fn rescuer(
        &self,
        proxy: &Arc<Proxy>,
        machine: Box<Request>,
        candidate: usize,
    ) -> continuation::Rescue {
        let notes = Arc::clone(self.notes);
        if let Some(reason) = self.continuation_ruled_out(&machine, candidate) {
            let counters = Arc::clone(&proxy.counters);
            return continuation::Rescue::refused(counters, self.combo.name.clone(), notes, reason);
        }
        let routed = self.inbound;
        continuation::Rescue::Kept(Box::new(continuation::Rescuer {
            proxy: Arc::clone(proxy),
            routes: Arc::clone(self.routes),
            machine,
            notes,
            client: routed.dialect,
            body: self.routed_body.clone(),
            headers: routed.headers.clone(),
            login: self.login.cloned(),
            query: routed.query.map(str::to_owned),
            combo: self.combo.clone(),
            arrived: self.arrived,
            tally: Arc::clone(self.tally),
        }))
    }
}

/// The routing state as the request machine sees it.
struct Surroundings<'a> {
    proxy: &'a Proxy,
    routes: &'a Routes,
}

impl World for Surroundings<'_> {
    fn afford_retry(&mut self) -> bool {
        self.routes.budget.try_retry(self.proxy.clock.now())
    }

    fn first_event_delay(&self, key: &CandidateKey, rule: HedgeAfter) -> Option<Duration> {
        let sketch = self.proxy.registry.first_event_sketch(&key.provider, &key.model);
        let deadline = self.routes.config.timeouts.first_event;
        rule.delay(sketch.as_ref(), deadline, self.proxy.clock.now())
    }

    fn refreshable(&self, key: &CandidateKey) -> bool {
        let provider = self.routes.provider(&key.provider);
        let credential = provider.and_then(|p| p.credential(&key.credential));
        // Only an OAuth token can be refreshed; a refused API key stays refused.
        credential.is_some_and(|c| c.kind == CredentialKind::Oauth)
    }

    fn incapable(&self, key: &CandidateKey) -> bool {
        self.proxy.incapable.contains(&key.provider, &key.model)
    }
}

/// How an answer reaches the client.
#[derive(Clone, Copy)]
struct Answer {
    client: ClientDialect,
    /// The upstream's dialect.
    dialect: Dialect,
    /// Relayed as the upstream wrote it, rather than translated.
    passthrough: bool,
    /// Keep the usage-only chunk the proxy asked for from the client.
    strip_usage: bool,
    /// Whether the upstream's end marker proves an answer whole (`trust_end_marker`).
    trust: switchyard_core::ending::Trust,
}

/// Whether [`Proxy::logged`] returns a stream's record as it stands before the stream ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Provisional {
    Yes,
    No,
}

/// Parses the client's body and finds the combo its model names. The log learns the model as
/// soon as it is known, so a request for an unknown one is logged with it.
///
/// Only what routing needs is read here ([`Parsed`]). A body that a target must be sent
/// translated, or that `auto` ranks, is read whole too, so that one nobody can serve is
/// refused before anyone is asked. A body the tolerant parser cannot read into the canonical
/// model (a shape newer than this router) is not refused when a target of the client's own
/// dialect could take it as it is: translation is then ruled out.
fn prepare<'r, 'b>(
    routes: &'r Routes,
    inbound: &ClientRequest<'b>,
    summary: &mut Summary,
    paused: bool,
) -> Result<Prepared<'r, 'b>, ApiError> {
    let client = inbound.dialect;
    let bad_request = |error: ProviderError| ApiError::bad_request(error.to_string());
    let (request, embedding) = match inbound.work {
        Work::Chat => {
            (Parsed::read(client, inbound.body, inbound.model).map_err(bad_request)?, None)
        }
        Work::Embed(shape) => {
            let embedding =
                EmbedRequest::parse(shape, inbound.body, inbound.model).map_err(bad_request)?;
            let named = ChatRequest { model: embedding.model.clone(), ..ChatRequest::default() };
            (Parsed::whole_from(named), Some(embedding))
        }
    };
    let model = request.model();
    // Checked before the name is logged or goes anywhere else: a name of megabytes, or one
    // that could change the meaning of an upstream's URL, is refused here.
    if let Err(problem) = check_model_name(model) {
        summary.model = bounded(model).into_owned();
        return Err(refused_model(&problem));
    }
    model.clone_into(&mut summary.model);
    if paused {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "routing_paused",
            "routing is paused in Switchyard: resume it from the tray or with `PUT /api/routing`",
        ));
    }
    let Some(combo) = routes.resolve(model) else {
        let message = routes.unknown_model(model);
        return Err(ApiError::new(StatusCode::NOT_FOUND, "not_found_error", message));
    };
    summary.combo = Some(combo.name.clone());
    // A recovery probe is a one-token chat request, which an embedding model refuses: a benched
    // one is brought back by an embeddings request of its own, as a `probe = false` model is.
    let combo = if embedding.is_some() && combo.targets.iter().any(|t| t.probe) {
        let mut combo = combo.into_owned();
        combo.targets.iter_mut().for_each(|t| t.probe = false);
        Cow::Owned(combo)
    } else {
        combo
    };
    let forwardable = |t: &Target| {
        routes
            .provider(&t.provider)
            .is_some_and(|p| upstream::passes_through(p, t.model.as_str(), client))
    };
    let read_whole =
        combo.strategy == RouteStrategy::Auto || !combo.targets.iter().all(forwardable);
    if embedding.is_none()
        && read_whole
        && let Err(problem) = request.whole()
        && !combo.targets.iter().any(forwardable)
    {
        return Err(ApiError::bad_request(problem.to_owned()));
    }
    Ok(Prepared { request, combo, embedding })
}

/// The refusal of a request an enforced budget stops: `429` in the client's dialect with
/// `x-should-retry: false` (both official SDKs then give up at once) and no `Retry-After`, so
/// no client retries into it; the message names the budget and when it resets.
fn budget_refusal(dialect: ErrorDialect, budget: &BudgetView) -> Refused {
    let kind = match dialect {
        // What OpenAI itself answers when an account's quota is spent; Codex CLI does not
        // retry it.
        ErrorDialect::OpenAi => "insufficient_quota",
        ErrorDialect::Anthropic => "rate_limit_error",
        // Rendered as `RESOURCE_EXHAUSTED`, Gemini's word for every spent quota.
        ErrorDialect::Gemini => "resource_exhausted",
    };
    let message = format!(
        "{} is spent (${} of ${}): Switchyard refuses requests until it resets at {}; raise or \
         remove it in Settings → Budgets (settings.budgets)",
        budget.name(),
        budget.spent,
        budget.limit,
        switchyard_core::calendar::rfc3339(budget.resets_at),
    );
    let mut refusal = ApiError::new(StatusCode::TOO_MANY_REQUESTS, kind, message);
    refusal.detail = Some(serde_json::json!({ "budget": budget }));
    refusal.final_answer = true;
    refusal.refused_in(dialect)
}

/// The `400` for a model name [`check_model_name`] refused, naming the field as OpenAI's
/// `error.param` does.
fn refused_model(problem: &ModelNameError) -> ApiError {
    let mut refusal = ApiError::bad_request(problem.to_string());
    refusal.param = Some("model");
    refusal
}

/// An upstream error that must not fall back, returned as the upstream said it.
fn passthrough(
    dialect: ErrorDialect,
    verdict: &Verdict,
    upstream: Option<(u16, UpstreamError)>,
) -> Refused {
    let (status, message) = match upstream {
        Some((status, report)) => (status, report.message),
        None => (400, format!("the request cannot be served ({})", verdict.kind.as_str())),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let kind = match verdict.kind {
        OutcomeKind::Policy => "content_policy_violation",
        OutcomeKind::RequestTooLarge => "context_length_exceeded",
        _ => "invalid_request_error",
    };
    ApiError::new(status, kind, message).refused_in(dialect)
}
