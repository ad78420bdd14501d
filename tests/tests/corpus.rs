//! The fault corpus through the real proxy: every documented failure shape of
//! Anthropic, OpenAI, Gemini, OpenRouter, Ollama and vLLM (`switchyard_testkit::corpus`), with a
//! healthy fallback on another provider configured, in both client dialects. For each shape the
//! test states what the client sees (the fallback's whole answer, or one clean error in its own
//! dialect), the verdict the routing trace records and which layer was charged (read back from
//! the health registry).
//!
//! Acceptance: with a fallback configured, none of the corpus's pre-content failures
//! reaches the client.

use serde_json::Value;
use switchyard_core::ManualClock;
use switchyard_core::outcome::{BreakerFault, OutcomeKind};
use switchyard_core::resilience::CredentialStatus;
use switchyard_e2e::harness::{
    Harness, Setup, T0, WATCHDOG, anthropic_stream_text, header, json_parts, openai_stream_text,
    openai_text,
};
use switchyard_testkit::corpus::{self, Provider, Shape};
use tokio::time::timeout;

const TEXT: &str = "Hello from the mock upstream.";

/// The corpus's own providers, each with one key, beside the harness's `an` (Anthropic) and
/// `ge` (Gemini). OpenRouter, Ollama and vLLM are OpenAI-compatible.
const PROVIDERS: &str = r#"
[[providers]]
id = "openai"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "openai-1", secret = "env:OA_1" }]

[[providers]]
id = "openrouter"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "openrouter-1", secret = "env:OA_1" }]

[[providers]]
id = "ollama"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "ollama-1", secret = "env:OA_1" }]

[[providers]]
id = "vllm"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "vllm-1", secret = "env:OA_1" }]
"#;

/// Where a provider's shapes are replayed: (provider id, its key, the model), and the fallback
/// on another provider.
fn primary(provider: Provider) -> (&'static str, &'static str, &'static str, &'static str) {
    match provider {
        Provider::Anthropic => ("an", "an-1", "claude-x", "oa/gpt-4o-mini"),
        Provider::OpenAi => ("openai", "openai-1", "gpt-4o", "an/claude-steady"),
        Provider::Gemini => ("ge", "ge-1", "gemini-x", "an/claude-steady"),
        Provider::OpenRouter => ("openrouter", "openrouter-1", "router-x", "an/claude-steady"),
        Provider::Ollama => ("ollama", "ollama-1", "llama9", "an/claude-steady"),
        Provider::Vllm => ("vllm", "vllm-1", "llama-3-8b", "an/claude-steady"),
    }
}

/// What the client must see.
#[derive(Clone, Copy, Debug)]
enum Sees {
    /// The fallback's whole answer, and no trace of the failure.
    Rescued,
    /// One error in the client's dialect with this status and the upstream's words; the
    /// fallback is not tried.
    CleanError { status: u16, says: &'static str },
}

/// A shape's verdict: what the client sees, the outcome the trace records for the primary,
/// and the layers charged (`None` means that layer holds nothing for the primary).
#[derive(Clone, Copy, Debug)]
struct Expect {
    sees: Sees,
    outcome: OutcomeKind,
    breaker: Option<BreakerFault>,
    /// The key's bench and how long it has left (`None` for "until reset by hand").
    credential: Option<(CredentialStatus, Option<u64>)>,
    /// The (key, model) lock, its reason and how long it has left.
    lock: Option<(OutcomeKind, u64)>,
    /// Attempts at the primary: 2 when the one same-target retry happened.
    tries: usize,
}

const NOTHING: Expect = Expect {
    sees: Sees::Rescued,
    outcome: OutcomeKind::Success,
    breaker: None,
    credential: None,
    lock: None,
    tries: 1,
};

const fn rescued(outcome: OutcomeKind) -> Expect {
    Expect { outcome, ..NOTHING }
}

const fn clean_error(outcome: OutcomeKind, status: u16, says: &'static str) -> Expect {
    Expect { sees: Sees::CleanError { status, says }, outcome, ..NOTHING }
}

/// The verdict of every shape. A shape added to the corpus without one fails the test, named.
#[expect(
    clippy::match_same_arms,
    reason = "one arm per shape, grouped by provider like the corpus and the docs table"
)]
fn expected(shape: &Shape) -> Expect {
    use BreakerFault::{Timeout, Transient};
    use OutcomeKind as K;
    let hour = Some(3_600_000);
    // The model lockout's base length: the default settings lock 10 s at the first failure.
    let base_lock = 10_000;
    // A transient failure is retried once on the same target, unless it locked the model.
    let transient = Expect { breaker: Some(Transient), tries: 2, ..rescued(K::Transient) };
    let transient_locked = Expect { lock: Some((K::Transient, base_lock)), tries: 1, ..transient };
    let rate_limited = |ms| Expect { lock: Some((K::RateLimit, ms)), ..rescued(K::RateLimit) };
    let quota = Expect {
        credential: Some((CredentialStatus::QuotaExhausted, hour)),
        ..rescued(K::QuotaExhausted)
    };
    let gone =
        Expect { lock: Some((K::ModelUnavailable, base_lock)), ..rescued(K::ModelUnavailable) };
    match shape.name {
        // 429 is in the default lockout list: the model on that key waits out `retry-after`.
        "anthropic/429-rate-limit" => rate_limited(20_000),
        "anthropic/529-overloaded" | "anthropic/500-api-error" => transient,
        // Classified as the 529 it stands for.
        "anthropic/stream-overloaded-after-message-start" => transient,
        "anthropic/stream-pings-only" => Expect { breaker: Some(Timeout), ..rescued(K::Timeout) },

        "openai/429-rate-limit-requests" => rate_limited(20_000),
        // Several reset headers: the longest wins (`x-ratelimit-reset-tokens: 6m0s`).
        "openai/429-rate-limit-tokens" => rate_limited(360_000),
        "openai/429-insufficient-quota" => quota,
        "openai/500-server-error" => transient,
        "openai/503-overloaded" => transient_locked,
        "openai/401-invalid-api-key" => {
            Expect { credential: Some((CredentialStatus::Invalid, None)), ..rescued(K::Auth) }
        }
        "openai/404-model-not-found" => gone,
        // The fallback's window is known to be smaller: the error goes back to the client.
        "openai/400-context-length-exceeded" => {
            clean_error(K::RequestTooLarge, 400, "maximum context length is 128000 tokens")
        }

        // `RetryInfo.retryDelay: 37s` sizes the wait; a per-minute quota is not exhaustion.
        "gemini/429-resource-exhausted-retry-info" => rate_limited(37_000),
        "gemini/503-unavailable" => transient_locked,
        "gemini/400-invalid-argument" => {
            clean_error(K::ClientError, 400, "Request contains an invalid argument")
        }
        // Not the key: that model on that key, for 10 minutes.
        "gemini/403-permission-denied" => {
            Expect { lock: Some((K::ModelForbidden, 600_000)), ..rescued(K::ModelForbidden) }
        }

        // `server_error` stands for a 500.
        "openrouter/stream-error-chunk" => transient,
        // A numeric `code` stands for its status: a rate limit, not an outage.
        "openrouter/stream-error-chunk-429" => rate_limited(base_lock),
        "openrouter/stream-processing-comments-only" => {
            Expect { breaker: Some(Timeout), ..rescued(K::Timeout) }
        }
        "openrouter/402-insufficient-credits" => quota,
        // A policy refusal: returned with the provider's reason, nothing falls back.
        "openrouter/403-moderation" => clean_error(K::Policy, 403, "requires moderation"),

        "ollama/404-model-not-found" => gone,
        "ollama/500-while-loading" => transient,
        "ollama/503-server-busy" => transient_locked,

        "vllm/400-context-length" | "vllm/400-context-length-flat" => {
            clean_error(K::RequestTooLarge, 400, "maximum context length is 4096 tokens")
        }
        "vllm/400-bad-request" => {
            clean_error(K::ClientError, 400, "temperature must be non-negative")
        }
        "vllm/404-model-not-found" => gone,
        "vllm/500-internal-server-error" => transient,
        other => panic!("{other}: the corpus has a shape this test states no verdict for"),
    }
}

/// Replays `shape` through a fresh server, as an Anthropic or an OpenAI client, and checks
/// everything [`expected`] says.
async fn replay(shape: &Shape, anthropic_client: bool) {
    let name = format!(
        "{} ({} client)",
        shape.name,
        if anthropic_client { "anthropic" } else { "openai" }
    );
    let expect = expected(shape);
    let (provider, key, model, fallback) = primary(shape.provider);
    let target = format!("{provider}/{model}");
    let combo = format!(
        "{PROVIDERS}
[[combos]]
name = \"corpus\"
targets = [
  {{ target = \"{target}\", context_window = 128000 }},
  {{ target = \"{fallback}\", context_window = 100000 }},
]
"
    );
    let clock = ManualClock::new(T0);
    let setup = Setup::new(&combo).clock(&clock).timeouts(|t| t.first_event_ms = 400);
    let h = Harness::start_with(setup).await;
    // Every attempt at the primary meets the shape, the same-target retry included.
    h.mock.set_default(model, shape.behavior.clone());

    let request = if anthropic_client {
        h.anthropic("corpus", shape.streamed)
    } else {
        h.openai("corpus", shape.streamed)
    };
    let response = timeout(WATCHDOG, request.send()).await.expect(&name).expect(&name);
    let status = response.status().as_u16();
    let served_by = header(response.headers(), "x-switchyard-target").to_owned();
    let fallback_model = fallback.split_once('/').unwrap().1;
    match expect.sees {
        Sees::Rescued => {
            let text = timeout(WATCHDOG, response.text()).await.expect(&name).unwrap();
            assert_eq!(status, 200, "{name}: {text}");
            assert_eq!(served_by, fallback, "{name}");
            assert_eq!(
                client_text(&text, anthropic_client, shape.streamed),
                TEXT,
                "{name}: {text}"
            );
            assert!(!text.contains("\"error\""), "{name}: the failure reached the client: {text}");
        }
        Sees::CleanError { status: code, says } => {
            let (_, _, body) = json_parts(response).await;
            assert_eq!(status, code, "{name}: {body}");
            if anthropic_client {
                assert_eq!(body["type"], "error", "{name}: not Anthropic's shape: {body}");
            }
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{name}: the upstream's words are kept: {body}");
            assert_eq!(h.mock.attempt_count(fallback_model), 0, "{name}: no fallback");
        }
    }

    let entry = h.newest_logged().await;
    let trace = entry["trace"].as_array().cloned().unwrap_or_default();
    let first = trace.iter().find(|e| e["target"] == target.as_str());
    assert_eq!(
        first.map(|e| e["outcome"].clone()),
        Some(Value::from(expect.outcome.as_str())),
        "{name}: the verdict recorded for {target}: {trace:?}"
    );

    assert_eq!(h.mock.attempt_count(model), expect.tries, "{name}: attempts at {target}");
    let breaker = h.app.breaker(provider).and_then(|b| b.last_fault);
    assert_eq!(breaker, expect.breaker, "{name}: provider breaker");
    let credential = h.app.credential(provider, key).map(|c| (c.status, c.retry_in_ms));
    assert_eq!(credential, expect.credential, "{name}: credential cooldown");
    let lock = h
        .app
        .lockout(provider, key, model)
        .map(|l| (l.reason.map_or(OutcomeKind::Success, |r| r.kind), l.remaining_ms));
    assert_eq!(lock, expect.lock, "{name}: model lockout");
}

/// The answer's text, however it came.
fn client_text(body: &str, anthropic_client: bool, streamed: bool) -> String {
    match (streamed, anthropic_client) {
        (true, true) => anthropic_stream_text(body),
        (true, false) => openai_stream_text(body),
        (false, anthropic) => {
            let json: Value = serde_json::from_str(body).unwrap_or_default();
            if anthropic {
                json["content"][0]["text"].as_str().unwrap_or_default().to_owned()
            } else {
                openai_text(&json).to_owned()
            }
        }
    }
}

async fn replay_all(provider: Provider) {
    let shapes: Vec<Shape> =
        corpus::all(T0).into_iter().filter(|s| s.provider == provider).collect();
    assert!(!shapes.is_empty(), "{provider:?} has shapes");
    for shape in &shapes {
        for anthropic_client in [false, true] {
            replay(shape, anthropic_client).await;
        }
    }
}

#[tokio::test]
async fn anthropic_shapes() {
    replay_all(Provider::Anthropic).await;
}

#[tokio::test]
async fn openai_shapes() {
    replay_all(Provider::OpenAi).await;
}

#[tokio::test]
async fn gemini_shapes() {
    replay_all(Provider::Gemini).await;
}

#[tokio::test]
async fn openrouter_shapes() {
    replay_all(Provider::OpenRouter).await;
}

#[tokio::test]
async fn ollama_shapes() {
    replay_all(Provider::Ollama).await;
}

#[tokio::test]
async fn vllm_shapes() {
    replay_all(Provider::Vllm).await;
}

/// Issue 14's acceptance, stated once over the whole corpus: every shape that fails before any
/// content is rescued by the fallback, except the ones the contract returns to the client (the
/// request's own fault: context length, an invalid argument, a policy refusal).
#[test]
fn every_pre_content_failure_that_is_not_the_requests_fault_is_rescued() {
    for shape in corpus::all(T0) {
        let expect = expected(&shape);
        let the_requests_fault = matches!(
            expect.outcome,
            OutcomeKind::RequestTooLarge | OutcomeKind::ClientError | OutcomeKind::Policy
        );
        assert_eq!(
            matches!(expect.sees, Sees::Rescued),
            !the_requests_fault,
            "{}: {expect:?}",
            shape.name
        );
    }
}
