//! RESILIENCE.md §2 as one table: every row of the contract is at least one row here, and
//! `classify` must return exactly the expected [`Verdict`] for each (kind, status, which layer is
//! charged, retry, fallback and the upstream's requested wait).
//!
//! The table is data, not code: a reviewer checks it against the document line by line, and a
//! change of behaviour is a change of a row. A second test makes sure every kind, fault, phase and
//! decision appears somewhere, so a new enum variant cannot slip in without a row.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_core::UnixMillis;
use switchyard_core::outcome::{
    BodyHint, BreakerFault, Charges, ClassifyPolicy, CredentialFault, Fallback as F,
    MAX_RETRY_AFTER, Outcome, OutcomeKind as K, RetrySame as R, StatusSet, StreamFault,
    TimeoutPhase, TransportFault, Upstream, Verdict, classify,
};

/// 2026-11-29T18:20:00Z. Every HTTP-date and reset timestamp below is written relative to it.
const NOW: UnixMillis = UnixMillis(1_795_976_400_000);

type Headers = &'static [(&'static str, &'static str)];

/// What the upstream did, in a form a `static` can hold (a `HeaderMap` cannot).
#[derive(Clone, Copy, Debug)]
enum Input {
    Response { status: u16, body: BodyHint, headers: Headers },
    Transport(TransportFault),
    Timeout(TimeoutPhase),
    Stream(StreamFault),
}

impl Input {
    fn headers(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        if let Self::Response { headers, .. } = self {
            for &(name, value) in *headers {
                map.append(HeaderName::from_static(name), HeaderValue::from_static(value));
            }
        }
        map
    }

    fn upstream<'a>(&self, headers: &'a HeaderMap) -> Upstream<'a> {
        match *self {
            Self::Response { status, body, .. } => Upstream::Response { status, headers, body },
            Self::Transport(fault) => Upstream::Transport(fault),
            Self::Timeout(phase) => Upstream::Timeout(phase),
            Self::Stream(fault) => Upstream::Stream(fault),
        }
    }
}

/// The classification knobs, as the model-lockout settings would produce them.
#[derive(Clone, Copy, Debug)]
enum Policy {
    /// RESILIENCE.md §5 defaults: lockouts on, codes `[404, 429, 503]`; §2: a content-policy
    /// refusal does not fall back.
    Default,
    /// Lockouts on, with exactly these codes.
    LockoutCodes(&'static [u16]),
    /// Lockouts switched off: nothing may charge the model layer.
    LockoutsDisabled,
    /// The default, with content-policy fallback switched on.
    FallbackOnRefusal,
}

impl Policy {
    fn build(self) -> ClassifyPolicy {
        let lockouts = |codes: &[u16]| ClassifyPolicy {
            lockout_enabled: true,
            lockout_codes: codes.iter().copied().collect::<StatusSet>(),
            policy_fallback: false,
        };
        match self {
            Self::Default => lockouts(&[404, 429, 503]),
            Self::LockoutCodes(codes) => lockouts(codes),
            Self::LockoutsDisabled => {
                ClassifyPolicy { lockout_enabled: false, ..lockouts(&[404, 429, 503]) }
            }
            Self::FallbackOnRefusal => {
                ClassifyPolicy { policy_fallback: true, ..lockouts(&[404, 429, 503]) }
            }
        }
    }
}

/// One row: an outcome in words and in data, the policy it is classified under, the verdict.
#[derive(Clone, Copy, Debug)]
struct Row {
    says: &'static str,
    input: Input,
    policy: Policy,
    bytes_sent: bool,
    client_aborted: bool,
    expect: Verdict,
}

/// A row under the default policy, before any byte reached the client, with the client waiting.
const fn row(says: &'static str, input: Input, expect: Verdict) -> Row {
    Row { says, input, policy: Policy::Default, bytes_sent: false, client_aborted: false, expect }
}

impl Row {
    const fn under(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    const fn after_bytes(mut self) -> Self {
        self.bytes_sent = true;
        self
    }

    const fn client_gone(mut self) -> Self {
        self.client_aborted = true;
        self
    }

    const fn waiting(mut self, wait: Duration) -> Self {
        self.expect.retry_after = Some(wait);
        self
    }
}

// Inputs.

const fn status(status: u16) -> Input {
    Input::Response { status, body: BodyHint::None, headers: &[] }
}

const fn status_saying(status: u16, body: BodyHint) -> Input {
    Input::Response { status, body, headers: &[] }
}

const fn status_with(status: u16, headers: Headers) -> Input {
    Input::Response { status, body: BodyHint::None, headers }
}

const fn status_saying_with(status: u16, body: BodyHint, headers: Headers) -> Input {
    Input::Response { status, body, headers }
}

// Expected verdicts.

const fn v(kind: K, status: Option<u16>, charges: Charges, retry: R, fallback: F) -> Verdict {
    Verdict { kind, status, charges, retry_same: retry, fallback, retry_after: None }
}

const NOTHING: Charges = Charges::NOTHING;
const MODEL: Charges = Charges { provider: None, credential: None, model: true };

const fn provider(fault: BreakerFault) -> Charges {
    Charges { provider: Some(fault), credential: None, model: false }
}

const fn credential(fault: CredentialFault) -> Charges {
    Charges { provider: None, credential: Some(fault), model: false }
}

const TRANSIENT: Charges = provider(BreakerFault::Transient);
const TRANSIENT_AND_MODEL: Charges =
    Charges { provider: Some(BreakerFault::Transient), credential: None, model: true };
const RATE_LIMITED_KEY: Charges = credential(CredentialFault::RateLimit);
const QUOTA: Charges = credential(CredentialFault::Quota);
const SUBSCRIPTION: Charges = credential(CredentialFault::Subscription);

const fn success(status: u16) -> Verdict {
    v(K::Success, Some(status), NOTHING, R::No, F::No)
}

const fn transient(status: u16, charges: Charges) -> Verdict {
    v(K::Transient, Some(status), charges, R::OnceWithinBudget, F::Yes)
}

const fn rate_limit(charges: Charges) -> Verdict {
    v(K::RateLimit, Some(429), charges, R::WaitIfAlone, F::Yes)
}

const fn client_error(status: u16) -> Verdict {
    v(K::ClientError, Some(status), NOTHING, R::No, F::No)
}

/// A transient answer that asked for more than a second: not retried at once, and the
/// (credential, model) is benched for the wait.
const fn transient_benched(status: u16, charges: Charges) -> Verdict {
    v(K::Transient, Some(status), charges, R::No, F::Yes)
}

const fn model_forbidden(status: u16, charges: Charges) -> Verdict {
    v(K::ModelForbidden, Some(status), charges, R::No, F::Yes)
}

/// The request named something this provider refuses: nothing charged, another provider only.
const fn refused_feature(status: u16) -> Verdict {
    v(K::ClientError, Some(status), NOTHING, R::No, F::OtherProviderOnly)
}

const STREAM_BROKEN: Verdict =
    v(K::StreamBroken, None, provider(BreakerFault::StreamBroken), R::No, F::No);
const ABORTED: Verdict = v(K::Aborted, None, NOTHING, R::No, F::No);

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Every transient code of §2 in the lockout list at once.
const ALL_TRANSIENT_CODES: Policy = Policy::LockoutCodes(&[408, 500, 502, 503, 504, 529]);
/// A lockout list without 429 (nor 503): rate limits then cool the key instead of the model.
const WITHOUT_429: Policy = Policy::LockoutCodes(&[404]);

static TABLE: &[Row] = &[
    // 2xx, complete → success, recorded as success on all three layers, charges nothing.
    row("a complete 200 is a success that charges nothing", status(200), success(200)),
    row("a complete 204 is a success too", status(204), success(204)),
    row(
        "a success carries no wait even if the upstream sent retry-after",
        status_with(200, &[("retry-after", "20")]),
        success(200),
    ),
    row(
        "a streamed 200 that completed after bytes reached the client is a success",
        status(200),
        success(200),
    )
    .after_bytes(),
    row("a success is a success even with model lockouts disabled", status(200), success(200))
        .under(Policy::LockoutsDisabled),
    // connect refused, DNS, TLS → transport, provider breaker, no retry, fall back.
    row(
        "a refused connection charges the provider breaker and falls back without retrying",
        Input::Transport(TransportFault::ConnectRefused),
        v(K::Transport, None, provider(BreakerFault::Connect), R::No, F::Yes),
    ),
    row(
        "a dns failure charges the provider breaker as a connect fault",
        Input::Transport(TransportFault::Dns),
        v(K::Transport, None, provider(BreakerFault::Connect), R::No, F::Yes),
    ),
    row(
        "a tls handshake failure is its own breaker fault so it may open the breaker at once",
        Input::Transport(TransportFault::Tls),
        v(K::Transport, None, provider(BreakerFault::Tls), R::No, F::Yes),
    ),
    // reset before response headers → transport, provider breaker, once within budget.
    row(
        "a reset before response headers may be retried once within budget",
        Input::Transport(TransportFault::ResetBeforeHeaders),
        v(K::Transport, None, provider(BreakerFault::Reset), R::OnceWithinBudget, F::Yes),
    ),
    // out of file descriptors on our side → nobody upstream is to blame, another target may do.
    row(
        "running out of file descriptors charges no provider and falls back without retrying",
        Input::Transport(TransportFault::OutOfDescriptors),
        v(K::Aborted, None, NOTHING, R::No, F::Yes),
    ),
    // no response headers / first event within deadline → timeout, provider breaker.
    row(
        "a connect timeout charges the provider breaker and falls back",
        Input::Timeout(TimeoutPhase::Connect),
        v(K::Timeout, None, provider(BreakerFault::Timeout), R::No, F::Yes),
    ),
    row(
        "no response headers within the deadline is a timeout that falls back",
        Input::Timeout(TimeoutPhase::Headers),
        v(K::Timeout, None, provider(BreakerFault::Timeout), R::No, F::Yes),
    ),
    row(
        "no first event within the deadline is a timeout that falls back",
        Input::Timeout(TimeoutPhase::FirstEvent),
        v(K::Timeout, None, provider(BreakerFault::Timeout), R::No, F::Yes),
    ),
    // 408, 500, 502, 503, 504, 529 → transient, provider breaker (+ model if listed), once.
    row(
        "a 408 is transient and charges only the breaker by default",
        status(408),
        transient(408, TRANSIENT),
    ),
    row(
        "a 500 is transient and charges only the breaker by default",
        status(500),
        transient(500, TRANSIENT),
    ),
    row(
        "a 502 is transient and charges only the breaker by default",
        status(502),
        transient(502, TRANSIENT),
    ),
    row(
        "a 503 is transient and also locks the model because 503 is a default lockout code",
        status(503),
        transient(503, TRANSIENT_AND_MODEL),
    ),
    row(
        "a 504 is transient and charges only the breaker by default",
        status(504),
        transient(504, TRANSIENT),
    ),
    row(
        "a 529 is transient and charges only the breaker by default",
        status(529),
        transient(529, TRANSIENT),
    ),
    row(
        "a 408 locks the model when 408 is in the lockout list",
        status(408),
        transient(408, TRANSIENT_AND_MODEL),
    )
    .under(ALL_TRANSIENT_CODES),
    row(
        "a 500 locks the model when 500 is in the lockout list",
        status(500),
        transient(500, TRANSIENT_AND_MODEL),
    )
    .under(ALL_TRANSIENT_CODES),
    row(
        "a 502 locks the model when 502 is in the lockout list",
        status(502),
        transient(502, TRANSIENT_AND_MODEL),
    )
    .under(ALL_TRANSIENT_CODES),
    row(
        "a 503 locks the model when 503 is in the lockout list",
        status(503),
        transient(503, TRANSIENT_AND_MODEL),
    )
    .under(ALL_TRANSIENT_CODES),
    row(
        "a 504 locks the model when 504 is in the lockout list",
        status(504),
        transient(504, TRANSIENT_AND_MODEL),
    )
    .under(ALL_TRANSIENT_CODES),
    row(
        "a 529 locks the model when 529 is in the lockout list",
        status(529),
        transient(529, TRANSIENT_AND_MODEL),
    )
    .under(ALL_TRANSIENT_CODES),
    row(
        "a 503 charges only the breaker when 503 is not in the lockout list",
        status(503),
        transient(503, TRANSIENT),
    )
    .under(WITHOUT_429),
    row(
        "a 503 charges only the breaker when lockouts are disabled",
        status(503),
        transient(503, TRANSIENT),
    )
    .under(Policy::LockoutsDisabled),
    row(
        "a 503 with a retry-after over a second is not retried at once and benches the model",
        status_with(503, &[("retry-after", "30")]),
        transient_benched(503, TRANSIENT_AND_MODEL),
    )
    .waiting(secs(30)),
    row(
        "a 500 with a retry-after over a second benches the model although 500 is not listed",
        status_with(500, &[("retry-after", "120")]),
        transient_benched(500, TRANSIENT_AND_MODEL),
    )
    .waiting(secs(120)),
    row(
        "a 529 with retry-after-ms over a second benches the model for that long",
        status_with(529, &[("retry-after-ms", "2500")]),
        transient_benched(529, TRANSIENT_AND_MODEL),
    )
    .waiting(ms(2500)),
    row(
        "a 408 with a retry-after http date a minute away benches the model for a minute",
        status_with(408, &[("retry-after", "Sun, 29 Nov 2026 18:21:00 GMT")]),
        transient_benched(408, TRANSIENT_AND_MODEL),
    )
    .waiting(secs(60)),
    row(
        "a 502 with a retry-after of exactly one second may still be retried once",
        status_with(502, &[("retry-after", "1")]),
        transient(502, TRANSIENT),
    )
    .waiting(secs(1)),
    row(
        "a 503 asking for days is benched for the clamp at most",
        status_with(503, &[("retry-after", "864000")]),
        transient_benched(503, TRANSIENT_AND_MODEL),
    )
    .waiting(MAX_RETRY_AFTER),
    row(
        "a 503 with a long retry-after charges no model when lockouts are disabled",
        status_with(503, &[("retry-after", "30")]),
        transient_benched(503, TRANSIENT),
    )
    .under(Policy::LockoutsDisabled)
    .waiting(secs(30)),
    row(
        "a 503 carrying x-ratelimit-reset-tokens is not benched for the reset",
        status_with(503, &[("x-ratelimit-reset-tokens", "6m0s")]),
        transient(503, TRANSIENT_AND_MODEL),
    ),
    row(
        "a 500 carrying an anthropic reset header is retried once and benches no model",
        status_with(500, &[("anthropic-ratelimit-tokens-reset", "2026-11-29T18:30:00Z")]),
        transient(500, TRANSIENT),
    ),
    row(
        "a 503 whose body asks for a delay over a second is benched like a retry-after",
        status_saying(503, BodyHint::RetryDelay(secs(37))),
        transient_benched(503, TRANSIENT_AND_MODEL),
    )
    .waiting(secs(37)),
    // 429 → rate_limit; model lockout if 429 is listed, else credential cooldown; hints set the
    // length; do not retry in place unless alone; fall back.
    row("a 429 locks the model when 429 is in the lockout list", status(429), rate_limit(MODEL)),
    row(
        "a 429 cools the credential when 429 is not in the lockout list",
        status(429),
        rate_limit(RATE_LIMITED_KEY),
    )
    .under(WITHOUT_429),
    row(
        "a 429 cools the credential and never the model when lockouts are disabled",
        status(429),
        rate_limit(RATE_LIMITED_KEY),
    )
    .under(Policy::LockoutsDisabled),
    row(
        "a 429 with integer retry-after seconds waits that long",
        status_with(429, &[("retry-after", "20")]),
        rate_limit(MODEL),
    )
    .waiting(secs(20)),
    row(
        "a 429 with fractional retry-after seconds waits to the millisecond",
        status_with(429, &[("retry-after", "1.5")]),
        rate_limit(MODEL),
    )
    .waiting(ms(1500)),
    row(
        "a 429 with a retry-after http date waits until that date",
        status_with(429, &[("retry-after", "Sun, 29 Nov 2026 18:21:30 GMT")]),
        rate_limit(MODEL),
    )
    .waiting(secs(90)),
    row(
        "a 429 with a retry-after date in the past waits zero",
        status_with(429, &[("retry-after", "Sun, 29 Nov 2026 18:00:00 GMT")]),
        rate_limit(MODEL),
    )
    .waiting(ms(0)),
    row(
        "a 429 with retry-after-ms waits that many milliseconds",
        status_with(429, &[("retry-after-ms", "1500")]),
        rate_limit(MODEL),
    )
    .waiting(ms(1500)),
    row(
        "a 429 prefers retry-after-ms over retry-after",
        status_with(429, &[("retry-after", "20"), ("retry-after-ms", "250")]),
        rate_limit(MODEL),
    )
    .waiting(ms(250)),
    row(
        "a 429 with openai reset durations waits for the longest of them",
        status_with(
            429,
            &[("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-reset-tokens", "6m0s")],
        ),
        rate_limit(MODEL),
    )
    .waiting(secs(360)),
    row(
        "a 429 with an epoch x-ratelimit-reset waits until that instant",
        status_with(429, &[("x-ratelimit-reset", "1795976445")]),
        rate_limit(MODEL),
    )
    .waiting(secs(45)),
    row(
        "a 429 with an anthropic rfc 3339 reset waits until that instant",
        status_with(429, &[("anthropic-ratelimit-requests-reset", "2026-11-29T18:20:12Z")]),
        rate_limit(MODEL),
    )
    .waiting(secs(12)),
    row(
        "a 429 prefers retry-after over reset headers",
        status_with(429, &[("retry-after", "2"), ("x-ratelimit-reset-tokens", "6m0s")]),
        rate_limit(MODEL),
    )
    .waiting(secs(2)),
    row(
        "a 429 asking for a day waits at most the clamp",
        status_with(429, &[("retry-after", "86400")]),
        rate_limit(MODEL),
    )
    .waiting(MAX_RETRY_AFTER),
    row(
        "a 429 with an unparseable retry-after carries no wait",
        status_with(429, &[("retry-after", "soon")]),
        rate_limit(MODEL),
    ),
    row(
        "a 429 whose body asks for a delay waits that long",
        status_saying(429, BodyHint::RetryDelay(secs(37))),
        rate_limit(MODEL),
    )
    .waiting(secs(37)),
    row(
        "a 429 prefers retry-after over the body's delay",
        status_saying_with(429, BodyHint::RetryDelay(secs(37)), &[("retry-after", "5")]),
        rate_limit(MODEL),
    )
    .waiting(secs(5)),
    row(
        "a 429 prefers the body's delay over reset headers",
        status_saying_with(
            429,
            BodyHint::RetryDelay(secs(37)),
            &[("x-ratelimit-reset-tokens", "6m0s")],
        ),
        rate_limit(MODEL),
    )
    .waiting(secs(37)),
    row(
        "a 429 that cools the credential still carries the requested wait",
        status_with(429, &[("retry-after", "20")]),
        rate_limit(RATE_LIMITED_KEY),
    )
    .under(WITHOUT_429)
    .waiting(secs(20)),
    // 401, 403 → auth, credential invalid, retry only after refresh, fall back.
    row(
        "a 401 marks the credential invalid and retries only after a refresh",
        status(401),
        v(K::Auth, Some(401), credential(CredentialFault::Auth), R::AfterRefresh, F::Yes),
    ),
    row(
        "a 403 whose body says the key itself is refused marks the credential invalid",
        status_saying(403, BodyHint::InvalidCredential),
        v(K::Auth, Some(403), credential(CredentialFault::Auth), R::AfterRefresh, F::Yes),
    ),
    row(
        "a 400 whose body says the key is not valid marks the credential invalid and falls back",
        status_saying(400, BodyHint::InvalidCredential),
        v(K::Auth, Some(400), credential(CredentialFault::Auth), R::AfterRefresh, F::Yes),
    ),
    // 402, "insufficient quota", billing text → quota_exhausted, long credential cooldown.
    row(
        "a 402 is quota exhausted on the credential",
        status(402),
        v(K::QuotaExhausted, Some(402), QUOTA, R::No, F::Yes),
    ),
    row(
        "a 429 whose body says the account is out of credit is quota exhausted, not a rate limit",
        status_saying(429, BodyHint::InsufficientQuota),
        v(K::QuotaExhausted, Some(429), QUOTA, R::No, F::Yes),
    ),
    row(
        "a 400 whose body is billing text is quota exhausted, not a client error",
        status_saying(400, BodyHint::InsufficientQuota),
        v(K::QuotaExhausted, Some(400), QUOTA, R::No, F::Yes),
    ),
    row(
        "a 403 whose body says the account is out of credit is quota exhausted",
        status_saying(403, BodyHint::InsufficientQuota),
        v(K::QuotaExhausted, Some(403), QUOTA, R::No, F::Yes),
    ),
    row(
        "a quota exhausted 429 ignores rate limit reset headers",
        status_saying_with(429, BodyHint::InsufficientQuota, &[("x-ratelimit-reset", "30")]),
        v(K::QuotaExhausted, Some(429), QUOTA, R::No, F::Yes),
    ),
    row(
        "a quota exhausted 429 keeps a retry-after, which can only lengthen the long cooldown",
        status_saying_with(429, BodyHint::InsufficientQuota, &[("retry-after", "7200")]),
        v(K::QuotaExhausted, Some(429), QUOTA, R::No, F::Yes),
    )
    .waiting(MAX_RETRY_AFTER),
    // A subscription's window ran out → quota_exhausted on the credential, until the
    // window's reset however far (no one-hour cap), whatever the lockout codes say of a 429.
    row(
        "a Claude plan's 429 with the unified limiter rejecting benches the subscription until its reset five hours away",
        status_with(
            429,
            &[
                ("anthropic-ratelimit-unified-status", "rejected"),
                ("anthropic-ratelimit-unified-reset", "1795994400"),
            ],
        ),
        v(K::QuotaExhausted, Some(429), SUBSCRIPTION, R::No, F::Yes),
    )
    .waiting(Duration::from_secs(5 * 3600)),
    row(
        "Codex's usage_limit_reached benches the plan for the week its body says",
        status_saying(
            429,
            BodyHint::SubscriptionLimit {
                resets_in: Some(Duration::from_secs(7 * 24 * 3600)),
                resets_at: None,
            },
        ),
        v(K::QuotaExhausted, Some(429), SUBSCRIPTION, R::No, F::Yes),
    )
    .waiting(Duration::from_secs(7 * 24 * 3600)),
    // 403 otherwise (model, region, organisation not permitted) → model_forbidden: the
    // (credential, model) is locked, the key keeps serving its other models.
    row(
        "a 403 that does not say the key is refused locks only this model on this key",
        status(403),
        model_forbidden(403, MODEL),
    ),
    row(
        "a 403 locks the model even when 403 is not in the lockout list",
        status(403),
        model_forbidden(403, MODEL),
    )
    .under(Policy::LockoutCodes(&[429])),
    row(
        "a 403 charges nothing when lockouts are disabled but still falls back",
        status(403),
        model_forbidden(403, NOTHING),
    )
    .under(Policy::LockoutsDisabled),
    row(
        "a 400 saying the region is not permitted is model forbidden",
        status_saying(400, BodyHint::NotPermitted),
        model_forbidden(400, MODEL),
    ),
    // 400/403 naming a beta, header or feature the client sent → client_error, nothing charged,
    // another provider only.
    row(
        "a 400 naming a feature the client sent falls back only to another provider",
        status_saying(400, BodyHint::UnsupportedFeature),
        refused_feature(400),
    ),
    row(
        "a 403 naming a beta header the client sent falls back only to another provider",
        status_saying(403, BodyHint::UnsupportedFeature),
        refused_feature(403),
    ),
    row(
        "a 422 naming a feature is a plain client error that is returned as is",
        status_saying(422, BodyHint::UnsupportedFeature),
        client_error(422),
    ),
    // 400 `invalid_encrypted_content` → the request carried what another organisation
    // encrypted: nothing charged, the same target once more with it left out; refused again,
    // a client error returned as is.
    row(
        "a 400 about encrypted content the key cannot read is sent once more repaired",
        status_saying(400, BodyHint::StaleReasoning),
        v(K::ClientError, Some(400), NOTHING, R::Repaired, F::No),
    ),
    // 404 / 410 model not found or retired → model_unavailable, model lockout, fall back.
    row(
        "a 404 locks the model and falls back",
        status(404),
        v(K::ModelUnavailable, Some(404), MODEL, R::No, F::Yes),
    ),
    row(
        "a 410 locks the retired model and falls back",
        status(410),
        v(K::ModelUnavailable, Some(410), MODEL, R::No, F::Yes),
    ),
    row(
        "a 400 saying the model does not exist locks the model and falls back",
        status_saying(400, BodyHint::ModelNotFound),
        v(K::ModelUnavailable, Some(400), MODEL, R::No, F::Yes),
    ),
    row(
        "a 404 locks the model even when 404 is not in the lockout list",
        status(404),
        v(K::ModelUnavailable, Some(404), MODEL, R::No, F::Yes),
    )
    .under(Policy::LockoutCodes(&[429])),
    row(
        "a 404 with a rate limit reset header is locked for the normal lockout length",
        status_with(404, &[("x-ratelimit-reset-requests", "17ms")]),
        v(K::ModelUnavailable, Some(404), MODEL, R::No, F::Yes),
    ),
    row(
        "a 404 with a retry-after carries it, to lengthen the lock at most",
        status_with(404, &[("retry-after", "3600")]),
        v(K::ModelUnavailable, Some(404), MODEL, R::No, F::Yes),
    )
    .waiting(secs(3600)),
    row(
        "a 403 model refusal with a retry-after carries it, to lengthen the lock at most",
        status_with(403, &[("retry-after", "1")]),
        model_forbidden(403, MODEL),
    )
    .waiting(secs(1)),
    row(
        "a 404 charges nothing when lockouts are disabled but still falls back",
        status(404),
        v(K::ModelUnavailable, Some(404), NOTHING, R::No, F::Yes),
    )
    .under(Policy::LockoutsDisabled),
    // 400 context_length_exceeded → request_too_large, nothing charged, larger context only.
    row(
        "a 400 context length error charges nothing and falls back only to larger contexts",
        status_saying(400, BodyHint::ContextLengthExceeded),
        v(K::RequestTooLarge, Some(400), NOTHING, R::No, F::LargerContextOnly),
    ),
    row(
        "a 413 context length error charges nothing and falls back only to larger contexts",
        status_saying(413, BodyHint::ContextLengthExceeded),
        v(K::RequestTooLarge, Some(413), NOTHING, R::No, F::LargerContextOnly),
    ),
    // 400 content policy → policy, nothing charged, no fallback unless configured.
    row(
        "a 400 content policy refusal charges nothing and does not fall back by default",
        status_saying(400, BodyHint::ContentPolicy),
        v(K::Policy, Some(400), NOTHING, R::No, F::No),
    ),
    row(
        "a 403 moderation refusal is a policy refusal that charges nothing",
        status_saying(403, BodyHint::ContentPolicy),
        v(K::Policy, Some(403), NOTHING, R::No, F::No),
    ),
    row(
        "a 400 content policy refusal falls back when policy fallback is configured",
        status_saying(400, BodyHint::ContentPolicy),
        v(K::Policy, Some(400), NOTHING, R::No, F::Yes),
    )
    .under(Policy::FallbackOnRefusal),
    // other 4xx (400, 413, 415, 422) → client_error, nothing charged, returned as is.
    row("a plain 400 is the request's fault and charges nothing", status(400), client_error(400)),
    row("a 413 without a context hint is a client error", status(413), client_error(413)),
    row("a 415 is a client error", status(415), client_error(415)),
    row(
        "a 400 carrying a retry-after is still a client error with no wait",
        status_with(400, &[("retry-after", "30")]),
        client_error(400),
    ),
    row("a 422 is a client error", status(422), client_error(422)),
    row(
        "a 400 never cools anything even when lockouts are disabled",
        status(400),
        client_error(400),
    )
    .under(Policy::LockoutsDisabled),
    // stream broken after bytes reached the client → stream_broken, breaker, no retry, no fallback.
    row(
        "a stream cut after bytes reached the client is broken and may not fall back",
        Input::Stream(StreamFault::Cut),
        STREAM_BROKEN,
    )
    .after_bytes(),
    row(
        "a stream stalled past the idle deadline after bytes is broken and may not fall back",
        Input::Stream(StreamFault::Stalled),
        STREAM_BROKEN,
    )
    .after_bytes(),
    row(
        "a stream that ended without a finish reason after bytes is broken, never a success",
        Input::Stream(StreamFault::Truncated),
        STREAM_BROKEN,
    )
    .after_bytes(),
    // §7: before the first byte reaches the client, any failure may fall back.
    row(
        "a stream cut before any byte reached the client is a reset that may fall back",
        Input::Stream(StreamFault::Cut),
        v(K::Transport, None, provider(BreakerFault::Reset), R::OnceWithinBudget, F::Yes),
    ),
    row(
        "a stream stalled before any byte reached the client is a timeout that may fall back",
        Input::Stream(StreamFault::Stalled),
        v(K::Timeout, None, provider(BreakerFault::Timeout), R::No, F::Yes),
    ),
    row(
        "a stream truncated before any byte reached the client is a reset that may fall back",
        Input::Stream(StreamFault::Truncated),
        v(K::Transport, None, provider(BreakerFault::Reset), R::OnceWithinBudget, F::Yes),
    ),
    row(
        "an answer too large to read is the upstream's fault: it may fall back, not retry",
        Input::Stream(StreamFault::Oversized),
        v(K::Transport, None, provider(BreakerFault::Reset), R::No, F::Yes),
    ),
    row(
        "an answer too large to read after bytes reached the client is a broken stream",
        Input::Stream(StreamFault::Oversized),
        STREAM_BROKEN,
    )
    .after_bytes(),
    // client went away → aborted, nothing charged.
    row(
        "a client that left while waiting for headers blames nobody",
        Input::Timeout(TimeoutPhase::Headers),
        ABORTED,
    )
    .client_gone(),
    row(
        "a client that left mid-stream blames nobody rather than breaking the stream",
        Input::Stream(StreamFault::Cut),
        ABORTED,
    )
    .after_bytes()
    .client_gone(),
    row(
        "a client that left during a connect failure blames nobody",
        Input::Transport(TransportFault::ConnectRefused),
        ABORTED,
    )
    .client_gone(),
];

#[test]
fn every_row_of_the_classification_table_gets_exactly_its_verdict() {
    let failures: Vec<String> = TABLE
        .iter()
        .filter_map(|row| {
            let headers = row.input.headers();
            let outcome = Outcome {
                upstream: row.input.upstream(&headers),
                bytes_sent: row.bytes_sent,
                client_aborted: row.client_aborted,
            };
            let got = classify(&outcome, &row.policy.build(), NOW);
            (got != row.expect).then(|| {
                format!("- {}\n    expected {:?}\n    got      {:?}", row.says, row.expect, got)
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows disagree with RESILIENCE.md §2:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}

// Indices for the coverage check. The matches have no wildcard arm: a new variant does not
// compile until it is counted here, and the coverage test then demands a row for it.

fn kind_index(k: K) -> usize {
    match k {
        K::Success => 0,
        K::Transport => 1,
        K::Timeout => 2,
        K::Transient => 3,
        K::RateLimit => 4,
        K::Auth => 5,
        K::QuotaExhausted => 6,
        K::ModelUnavailable => 7,
        K::RequestTooLarge => 8,
        K::Policy => 9,
        K::ClientError => 10,
        K::StreamBroken => 11,
        K::Aborted => 12,
        K::ModelForbidden => 13,
    }
}

fn transport_index(f: TransportFault) -> usize {
    match f {
        TransportFault::ConnectRefused => 0,
        TransportFault::Dns => 1,
        TransportFault::Tls => 2,
        TransportFault::ResetBeforeHeaders => 3,
        TransportFault::OutOfDescriptors => 4,
    }
}

fn phase_index(p: TimeoutPhase) -> usize {
    match p {
        TimeoutPhase::Connect => 0,
        TimeoutPhase::Headers => 1,
        TimeoutPhase::FirstEvent => 2,
    }
}

/// Each stream fault twice: before and after bytes reached the client.
fn stream_index(f: StreamFault, bytes_sent: bool) -> usize {
    let base = match f {
        StreamFault::Cut => 0,
        StreamFault::Stalled => 2,
        StreamFault::Truncated => 4,
        StreamFault::Oversized => 6,
    };
    base + usize::from(bytes_sent)
}

fn credential_index(f: CredentialFault) -> usize {
    match f {
        CredentialFault::RateLimit => 0,
        CredentialFault::Auth => 1,
        CredentialFault::Quota => 2,
        CredentialFault::Subscription => 3,
    }
}

fn retry_index(r: R) -> usize {
    match r {
        R::No => 0,
        R::OnceWithinBudget => 1,
        R::AfterRefresh => 2,
        R::WaitIfAlone => 3,
        R::Repaired => 4,
    }
}

fn fallback_index(f: F) -> usize {
    match f {
        F::Yes => 0,
        F::No => 1,
        F::LargerContextOnly => 2,
        F::OtherProviderOnly => 3,
    }
}

/// Every kind, fault, phase and decision appears in at least one row, so none of them is
/// untested by accident.
#[test]
fn the_table_has_a_row_for_every_kind_fault_phase_and_decision() {
    let mut kinds = [false; 14];
    let mut transports = [false; 5];
    let mut phases = [false; 3];
    let mut streams = [false; 8];
    let mut breaker_faults = [false; BreakerFault::ALL.len()];
    let mut credentials = [false; 4];
    let mut retries = [false; 5];
    let mut fallbacks = [false; 4];
    let mut model_charged = false;

    for row in TABLE {
        kinds[kind_index(row.expect.kind)] = true;
        match row.input {
            Input::Transport(f) => transports[transport_index(f)] = true,
            Input::Timeout(p) => phases[phase_index(p)] = true,
            Input::Stream(f) => streams[stream_index(f, row.bytes_sent)] = true,
            Input::Response { .. } => {}
        }
        let charges = row.expect.charges;
        if let Some(fault) = charges.provider {
            let at =
                BreakerFault::ALL.iter().position(|&f| f == fault).expect("ALL lists every fault");
            breaker_faults[at] = true;
        }
        if let Some(fault) = charges.credential {
            credentials[credential_index(fault)] = true;
        }
        model_charged |= charges.model;
        retries[retry_index(row.expect.retry_same)] = true;
        fallbacks[fallback_index(row.expect.fallback)] = true;
    }

    assert!(kinds.iter().all(|&seen| seen), "outcome kinds without a row: {kinds:?}");
    assert!(transports.iter().all(|&seen| seen), "transport faults without a row: {transports:?}");
    assert!(phases.iter().all(|&seen| seen), "timeout phases without a row: {phases:?}");
    assert!(
        streams.iter().all(|&seen| seen),
        "stream faults (before, after bytes) without a row: {streams:?}"
    );
    assert!(
        breaker_faults.iter().all(|&seen| seen),
        "breaker faults never charged: {breaker_faults:?}"
    );
    assert!(
        credentials.iter().all(|&seen| seen),
        "credential faults never charged: {credentials:?}"
    );
    assert!(model_charged, "no row charges the model lockout");
    assert!(retries.iter().all(|&seen| seen), "retry decisions never expected: {retries:?}");
    assert!(fallbacks.iter().all(|&seen| seen), "fallback decisions never expected: {fallbacks:?}");

    let mut names: Vec<&str> = TABLE.iter().map(|row| row.says).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "two rows say the same thing");
}

#[test]
fn the_default_policy_is_the_documented_lockout_default() {
    assert_eq!(ClassifyPolicy::default(), Policy::Default.build());
}
