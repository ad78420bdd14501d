//! What happened upstream, and what it means: the one place that decides which resilience
//! layer an outcome charges (RESILIENCE.md §2).
//!
//! Adapters describe an attempt as an [`Outcome`]; [`classify`] turns it into a [`Verdict`].
//! Nothing else in the code base decides whether a failure blames the provider, the key or the
//! model. Adapters may refine the *input* (for example by recognising "insufficient quota" in a
//! 429 body and setting [`BodyHint::InsufficientQuota`]) but never the mapping itself.

mod hint;
mod subscription;

use std::time::Duration;

use http::HeaderMap;
use serde::{Deserialize, Serialize};

use self::hint::Resets;
pub(crate) use self::hint::reset_value;
pub use self::hint::{MAX_RETRY_AFTER, retry_after};
pub use self::subscription::MAX_SUBSCRIPTION_WAIT;
use crate::clock::UnixMillis;

/// The longest `Retry-After` on a transient answer (408, 5xx, 529) that still allows the one
/// immediate retry of the same target (RESILIENCE.md §2). A longer one is the upstream asking
/// not to be called for a while: the same target is not retried, and the (credential, model) is
/// benched for the wait.
pub const RETRY_IN_PLACE_MAX: Duration = Duration::from_secs(1);

/// One finished upstream attempt, as the attempt loop saw it.
#[derive(Clone, Copy, Debug)]
pub struct Outcome<'a> {
    pub upstream: Upstream<'a>,
    /// Some bytes of this attempt already reached the client. From then on nothing may fall
    /// back or retry: the client would see two answers spliced together.
    pub bytes_sent: bool,
    /// The client went away before the attempt finished. Nobody is to blame.
    pub client_aborted: bool,
}

impl<'a> Outcome<'a> {
    /// An attempt that ended before anything reached the client and with the client waiting.
    pub fn new(upstream: Upstream<'a>) -> Self {
        Self { upstream, bytes_sent: false, client_aborted: false }
    }
}

/// What the upstream did.
#[derive(Clone, Copy, Debug)]
pub enum Upstream<'a> {
    /// Response headers arrived. For a 2xx this means the body (or stream) also completed.
    Response { status: u16, headers: &'a HeaderMap, body: BodyHint },
    /// No usable connection or the connection died before response headers.
    Transport(TransportFault),
    /// A deadline passed with nothing to show for it.
    Timeout(TimeoutPhase),
    /// A 2xx stream that did not finish properly.
    Stream(StreamFault),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportFault {
    ConnectRefused,
    Dns,
    Tls,
    /// The connection was reset (or closed) before response headers arrived.
    ResetBeforeHeaders,
    /// This process could not open a socket: it is out of file descriptors (`EMFILE`, or the
    /// system is: `ENFILE`). No upstream was reached, so none is to blame.
    OutOfDescriptors,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutPhase {
    Connect,
    /// Connected, but no response headers within the deadline.
    Headers,
    /// Headers arrived, but no first real event (keep-alives do not count) within the deadline.
    FirstEvent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamFault {
    /// The connection broke mid-body.
    Cut,
    /// No event within the idle deadline.
    Stalled,
    /// The stream ended without a finish reason.
    Truncated,
    /// The answer grew past the size a reader holds (64 MiB for an answer), so it was not
    /// read: a broken or hostile upstream, never the client's fault.
    Oversized,
}

/// What the response body said, as far as the adapter could tell.
///
/// Only the provider adapters produce these, each from its provider's documented error types,
/// codes and phrases (RESILIENCE.md §2 notes): a word somewhere in a message proves nothing (a
/// 400 about an unknown parameter `billing_id` is not a billing problem), so there is no generic
/// text sniffer here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyHint {
    #[default]
    None,
    ContextLengthExceeded,
    ContentPolicy,
    InsufficientQuota,
    ModelNotFound,
    /// The key itself was refused, whatever the status says (Gemini answers a bad key with
    /// 400 `API_KEY_INVALID`).
    InvalidCredential,
    /// The request named something this provider refuses: a beta, a header, a parameter or a
    /// feature the client sent. The request's fault, so nothing is benched; another provider may
    /// accept it, another key of the same provider will not.
    UnsupportedFeature,
    /// The model is not permitted to this account here (region, organisation), even though the
    /// status is not 403 (Gemini's 400 `FAILED_PRECONDITION` "User location is not supported").
    NotPermitted,
    /// The request carried reasoning (or compacted history) encrypted for another
    /// organisation, which this credential cannot read (OpenAI's `invalid_encrypted_content`):
    /// the request's fault, mended by leaving those items out and asking once more.
    StaleReasoning,
    /// Nothing special, but the body asked for a wait, as a `Retry-After` header would (Gemini's
    /// `google.rpc.RetryInfo.retryDelay`). Applies only where `Retry-After` does.
    RetryDelay(Duration),
    /// A subscription's window ran out (Codex's `usage_limit_reached`), refilling in
    /// `resets_in` or at `resets_at` when the body says.
    SubscriptionLimit {
        resets_in: Option<Duration>,
        resets_at: Option<UnixMillis>,
    },
}

impl BodyHint {
    /// The wait the body asked for, if any.
    pub fn retry_delay(self) -> Option<Duration> {
        match self {
            Self::RetryDelay(wait) => Some(wait),
            _ => None,
        }
    }
}

/// The class of an outcome; one row of the §2 table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Success,
    Transport,
    Timeout,
    Transient,
    RateLimit,
    Auth,
    QuotaExhausted,
    ModelUnavailable,
    RequestTooLarge,
    Policy,
    ClientError,
    /// A 403 that is not about the key: this model (or region, organisation) is not permitted
    /// to this credential. The key keeps serving its other models.
    ModelForbidden,
    StreamBroken,
    /// Nobody upstream is to blame: the client went away, or this process could not open a
    /// connection (out of file descriptors). Nothing is charged or recorded.
    Aborted,
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Transport => "transport",
            Self::Timeout => "timeout",
            Self::Transient => "transient",
            Self::RateLimit => "rate_limit",
            Self::Auth => "auth",
            Self::QuotaExhausted => "quota_exhausted",
            Self::ModelUnavailable => "model_unavailable",
            Self::RequestTooLarge => "request_too_large",
            Self::Policy => "policy",
            Self::ClientError => "client_error",
            Self::ModelForbidden => "model_forbidden",
            Self::StreamBroken => "stream_broken",
            Self::Aborted => "aborted",
        }
    }
}

/// The provider-level fault a failure charges to the breaker; per-fault overrides key on it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ts_rs::TS,
)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum BreakerFault {
    Connect,
    Tls,
    Reset,
    Timeout,
    Transient,
    StreamBroken,
}

impl BreakerFault {
    pub const ALL: [Self; 6] =
        [Self::Connect, Self::Tls, Self::Reset, Self::Timeout, Self::Transient, Self::StreamBroken];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Reset => "reset",
            Self::Timeout => "timeout",
            Self::Transient => "transient",
            Self::StreamBroken => "stream_broken",
        }
    }
}

/// The credential-level fault a failure charges to the credential cooldown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum CredentialFault {
    /// Too many requests on this key: a short, hinted, backed-off cooldown.
    RateLimit,
    /// The key was refused: it is `invalid` until fixed or reset.
    Auth,
    /// The account is out of credit: a long cooldown.
    Quota,
    /// A subscription's window ran out (a Claude or `ChatGPT` plan's five-hour or weekly limit):
    /// benched until exactly the window's reset, however far.
    Subscription,
}

/// Which layers an outcome charges. A success charges none and is recorded as success on all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charges {
    pub provider: Option<BreakerFault>,
    pub credential: Option<CredentialFault>,
    /// Lock this model on this credential.
    pub model: bool,
}

impl Charges {
    pub const NOTHING: Self = Self { provider: None, credential: None, model: false };
}

/// May the attempt loop send the same request to the same target again?
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrySame {
    No,
    /// Once, if the global retry budget allows.
    OnceWithinBudget,
    /// Only after the credential was refreshed (OAuth), then once.
    AfterRefresh,
    /// Only by waiting out `retry_after` in place, when no other candidate exists and the wait
    /// fits the request's deadline.
    WaitIfAlone,
    /// Once, at once, with the request repaired (what the credential cannot read left out),
    /// before the verdict's fallback is read: a deterministic mend, not load, so the retry
    /// budget is not asked. The proxy downgrades it to [`RetrySame::No`] for a request with
    /// nothing to leave out.
    Repaired,
}

/// May the attempt loop move on to another candidate?
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    Yes,
    No,
    /// Only to targets with a larger context window; otherwise return the error.
    LargerContextOnly,
    /// The request itself was refused (a beta, header or feature the client sent, RESILIENCE.md
    /// §2): only to a target of **another provider**, never to another key (or model) of the same
    /// provider, which would refuse it the same way.
    ///
    /// How the attempt loop must treat it: rule the failed target's provider out for the rest of
    /// this request (as it does after a provider fault, e.g. by adding it to the request's failed
    /// providers, but without charging the breaker), then fall back to the next candidate of
    /// another provider; when none is left, return this upstream's error to the client as is
    /// (like [`Fallback::No`]), not the "nothing left" 503. Nothing is charged and the same
    /// target is not retried.
    OtherProviderOnly,
}

/// The classification of one outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub kind: OutcomeKind,
    /// The upstream status code, when there was a response.
    pub status: Option<u16>,
    pub charges: Charges,
    pub retry_same: RetrySame,
    pub fallback: Fallback,
    /// How long the upstream asked us to wait, already clamped to [`MAX_RETRY_AFTER`] (to
    /// [`MAX_SUBSCRIPTION_WAIT`] for a subscription's window, which lasts until its reset).
    pub retry_after: Option<Duration>,
}

/// The knobs that change classification. Built from the model-lockout settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassifyPolicy {
    /// Model lockouts are on.
    pub lockout_enabled: bool,
    /// Status codes that (besides 404/410) charge the model lockout.
    pub lockout_codes: StatusSet,
    /// Whether a content-policy refusal may fall back to another target (default: no).
    pub policy_fallback: bool,
}

impl Default for ClassifyPolicy {
    fn default() -> Self {
        Self {
            lockout_enabled: true,
            lockout_codes: StatusSet::from_iter([404, 429, 503]),
            policy_fallback: false,
        }
    }
}

impl ClassifyPolicy {
    fn locks(&self, status: u16) -> bool {
        self.lockout_enabled && self.lockout_codes.contains(status)
    }
}

/// A set of HTTP status codes (100..=599) as a bitmap: `contains` is one shift and one mask.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusSet([u64; 10]);

impl StatusSet {
    pub fn insert(&mut self, status: u16) {
        if let Some((word, bit)) = Self::slot(status) {
            self.0[word] |= 1 << bit;
        }
    }

    pub fn contains(&self, status: u16) -> bool {
        Self::slot(status).is_some_and(|(word, bit)| self.0[word] & (1 << bit) != 0)
    }

    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0u16..600).filter(|&s| self.contains(s))
    }

    fn slot(status: u16) -> Option<(usize, u32)> {
        (status < 600).then(|| (usize::from(status / 64), u32::from(status % 64)))
    }
}

impl FromIterator<u16> for StatusSet {
    fn from_iter<I: IntoIterator<Item = u16>>(iter: I) -> Self {
        let mut set = Self::default();
        for status in iter {
            set.insert(status);
        }
        set
    }
}

impl std::fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Classifies one outcome. `now` is needed only to turn an HTTP-date `Retry-After` into a wait.
///
/// The order of the checks is the precedence of the table: a client that left blames nobody;
/// once bytes reached the client nothing may be retried or fall back; then the upstream's own
/// signal decides.
pub fn classify(outcome: &Outcome<'_>, policy: &ClassifyPolicy, now: UnixMillis) -> Verdict {
    use Fallback as F;
    use RetrySame as R;

    let v = |kind, charges, retry_same, fallback| Verdict {
        kind,
        status: None,
        charges,
        retry_same,
        fallback,
        retry_after: None,
    };
    let provider = |fault| Charges { provider: Some(fault), ..Charges::NOTHING };

    if outcome.client_aborted {
        return v(OutcomeKind::Aborted, Charges::NOTHING, R::No, F::No);
    }
    // Once the client has bytes, anything short of a completed 2xx is a broken stream: it
    // cannot be retried or handed to another target without splicing two answers together.
    if outcome.bytes_sent
        && !matches!(outcome.upstream, Upstream::Response { status: 200..=299, .. })
    {
        return v(OutcomeKind::StreamBroken, provider(BreakerFault::StreamBroken), R::No, F::No);
    }

    match outcome.upstream {
        Upstream::Transport(fault) => {
            let (charge, retry) = match fault {
                TransportFault::ConnectRefused | TransportFault::Dns => {
                    (BreakerFault::Connect, R::No)
                }
                TransportFault::Tls => (BreakerFault::Tls, R::No),
                TransportFault::ResetBeforeHeaders => (BreakerFault::Reset, R::OnceWithinBudget),
                // Our own shortage, not the provider's: charging it would open every breaker
                // at once when the process runs out of descriptors. Another target may find
                // one free.
                TransportFault::OutOfDescriptors => {
                    return v(OutcomeKind::Aborted, Charges::NOTHING, R::No, F::Yes);
                }
            };
            v(OutcomeKind::Transport, provider(charge), retry, F::Yes)
        }
        Upstream::Timeout(_) | Upstream::Stream(StreamFault::Stalled) => {
            v(OutcomeKind::Timeout, provider(BreakerFault::Timeout), R::No, F::Yes)
        }
        // Broke before anything reached the client: as good as a reset before headers.
        Upstream::Stream(StreamFault::Cut | StreamFault::Truncated) => {
            v(OutcomeKind::Transport, provider(BreakerFault::Reset), R::OnceWithinBudget, F::Yes)
        }
        // The upstream's fault, so another target may serve; asking the same one again would
        // most likely bring the same flood, so no retry in place.
        Upstream::Stream(StreamFault::Oversized) => {
            v(OutcomeKind::Transport, provider(BreakerFault::Reset), R::No, F::Yes)
        }
        Upstream::Response { status, headers, body } => {
            // A subscription's window that ran out outranks what its status says: the
            // subscription is out until the reset, the request goes on to the next target.
            if let Some(spent) = subscription::limit(status, headers, body, now) {
                let charges =
                    Charges { credential: Some(CredentialFault::Subscription), ..Charges::NOTHING };
                return Verdict {
                    status: Some(status),
                    retry_after: spent.wait,
                    ..v(OutcomeKind::QuotaExhausted, charges, R::No, F::Yes)
                };
            }
            let mut verdict = classify_response(status, body, policy);
            verdict.status = Some(status);
            // Hints apply to their own kind (RESILIENCE.md §2 notes): reset headers describe a
            // rate-limit window and size only a rate-limit wait (a 404 with
            // `x-ratelimit-reset-requests: 17ms` keeps its normal lock); `Retry-After` (and a
            // body that stands for it) sets the wait of the transient codes, and may only
            // lengthen the long quota cooldown and a model's lock (the proxy never calls back
            // earlier than asked, §8). Nothing that charges nothing carries a wait.
            let delay = body.retry_delay();
            verdict.retry_after = match verdict.kind {
                OutcomeKind::RateLimit => hint::wait(headers, delay, Resets::Count, now),
                OutcomeKind::Transient
                | OutcomeKind::QuotaExhausted
                | OutcomeKind::ModelUnavailable
                | OutcomeKind::ModelForbidden => hint::wait(headers, delay, Resets::Ignore, now),
                _ => None,
            };
            if verdict.benched_by_retry_after() {
                verdict.retry_same = RetrySame::No;
                verdict.charges.model = policy.lockout_enabled;
            }
            verdict
        }
    }
}

impl Verdict {
    /// A transient answer that asked for more than [`RETRY_IN_PLACE_MAX`]: not retried at once,
    /// and the (credential, model) is benched for `retry_after` at once, whatever the lockout
    /// list and threshold say (the upstream told us; RESILIENCE.md §2, §8).
    pub fn benched_by_retry_after(&self) -> bool {
        self.kind == OutcomeKind::Transient
            && self.retry_after.is_some_and(|wait| wait > RETRY_IN_PLACE_MAX)
    }
}

fn classify_response(status: u16, body: BodyHint, policy: &ClassifyPolicy) -> Verdict {
    use Fallback as F;
    use OutcomeKind as K;
    use RetrySame as R;

    let v = |kind, charges, retry_same, fallback| Verdict {
        kind,
        status: None,
        charges,
        retry_same,
        fallback,
        retry_after: None,
    };
    let credential = |fault| Charges { credential: Some(fault), ..Charges::NOTHING };
    let model = Charges { model: policy.lockout_enabled, ..Charges::NOTHING };

    match (status, body) {
        (200..=299, _) => v(K::Success, Charges::NOTHING, R::No, F::No),
        (_, BodyHint::InsufficientQuota) | (402, _) => {
            v(K::QuotaExhausted, credential(CredentialFault::Quota), R::No, F::Yes)
        }
        // A 403 is about the key only when the adapter recognised the provider saying so;
        // otherwise it is about this model (below), and benching the key would bench every model
        // it serves, and then the next key, one after another.
        (401, _) | (_, BodyHint::InvalidCredential) => {
            v(K::Auth, credential(CredentialFault::Auth), R::AfterRefresh, F::Yes)
        }
        (429, _) => {
            let charges =
                if policy.locks(429) { model } else { credential(CredentialFault::RateLimit) };
            v(K::RateLimit, charges, R::WaitIfAlone, F::Yes)
        }
        (404 | 410, _) | (400 | 403, BodyHint::ModelNotFound) => {
            v(K::ModelUnavailable, model, R::No, F::Yes)
        }
        (400 | 413, BodyHint::ContextLengthExceeded) => {
            v(K::RequestTooLarge, Charges::NOTHING, R::No, F::LargerContextOnly)
        }
        // OpenRouter refuses moderated input with a 403.
        (400 | 403, BodyHint::ContentPolicy) => {
            let fallback = if policy.policy_fallback { F::Yes } else { F::No };
            v(K::Policy, Charges::NOTHING, R::No, fallback)
        }
        // Repaired once; refused again, a client error like any other.
        (400, BodyHint::StaleReasoning) => v(K::ClientError, Charges::NOTHING, R::Repaired, F::No),
        (400 | 403, BodyHint::UnsupportedFeature) => {
            v(K::ClientError, Charges::NOTHING, R::No, F::OtherProviderOnly)
        }
        // The lock's length (10 min) is the lockout layer's: see `lockout::FORBIDDEN_LOCK`.
        (403, _) | (400, BodyHint::NotPermitted) => v(K::ModelForbidden, model, R::No, F::Yes),
        (408 | 500..=599, _) => {
            let charges = Charges {
                provider: Some(BreakerFault::Transient),
                model: policy.locks(status),
                credential: None,
            };
            v(K::Transient, charges, R::OnceWithinBudget, F::Yes)
        }
        (400..=499, _) => v(K::ClientError, Charges::NOTHING, R::No, F::No),
        // 1xx and 3xx as a final answer mean a broken or misconfigured upstream.
        _ => v(
            K::Transient,
            Charges { provider: Some(BreakerFault::Transient), ..Charges::NOTHING },
            R::OnceWithinBudget,
            F::Yes,
        ),
    }
}
