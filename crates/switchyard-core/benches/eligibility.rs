//! The routing decision's cost per candidate, at 1, 100 and 10,000 credentials.
//!
//! Issue 6 asks for a routing decision of at most 1 µs that stays flat from 1 to 10,000 keys.
//! This bench measures the two pieces the planner runs on every request:
//!
//! - `eligible/{hit,miss}/N`: one [`HealthRegistry::eligible`] call against a registry sized
//!   for N credentials. Both candidates are the same at every N, so any growth is the registry's.
//! - `planner/<strategy>/N`: the planner's whole job for one request over one provider: walk
//!   all N candidates through `eligible`, collect the eligible credential indices into a reused
//!   `Vec`, and let [`CredentialSelector::pick`] choose one. Throughput is `Elements(N)`, so
//!   criterion's `thrpt` is candidates per second.
//!
//! The registry is not empty: it carries the state a busy day leaves behind, driven through
//! `admit` + `finish` with verdicts from `classify`, exactly as the attempt loop does (see
//! [`Seed`]). Time is pinned to named instants, so nothing expires while criterion runs and
//! every iteration sees the same state.
//!
//! Run: `cargo bench -p switchyard-core --bench eligibility`. Results: `docs/benchmarks.md`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use http::HeaderMap;
use switchyard_core::outcome::{BodyHint, ClassifyPolicy, Outcome, Upstream, classify};
use switchyard_core::resilience::{
    CredentialSelector, CredentialStatus, HealthRegistry, SelectionStrategy,
};
use switchyard_core::settings::LockoutSettings;
use switchyard_core::{CandidateKey, UnixMillis, Verdict};

/// The instant every benchmark asks about.
const NOW: UnixMillis = UnixMillis(1_700_000_000_000);
/// A minute before [`NOW`]: failures whose cooldown or lock has already run out by `NOW`, so
/// their entries are tracked (backoff level, failure count) but eligible.
const EARLIER: UnixMillis = UnixMillis(NOW.0 - 60_000);

const SIZES: [usize; 3] = [1, 100, 10_000];

const PROVIDER: &str = "openai";
/// The model every request asks for.
const MODEL: &str = "gpt-4o";
/// The provider's other model: its lockouts share the tables but never answer for `MODEL`.
const OTHER_MODEL: &str = "gpt-4o-mini";

const STRATEGIES: [(&str, SelectionStrategy); 5] = [
    ("fill_first", SelectionStrategy::FillFirst),
    ("round_robin_sticky3", SelectionStrategy::RoundRobin { sticky: 3 }),
    ("least_used", SelectionStrategy::LeastUsed),
    ("p2c", SelectionStrategy::P2c),
    ("random", SelectionStrategy::Random),
];

/// What a credential has been through before the bench asks about it. Assigned by index in a
/// repeating pattern of 20, so every size N ≥ 20 holds the same mix: 12 of 20 credentials carry
/// state, 9 of 20 are ineligible for [`MODEL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seed {
    Clean,
    /// 404 on the other model: that model is locked, [`MODEL`] stays eligible.
    OtherModelLocked,
    /// 429 with 429 not a lockout code: the whole key cools (with and without `Retry-After`).
    KeyCooling {
        retry_after_secs: Option<u64>,
    },
    /// The OAuth refresher marked it.
    Status(CredentialStatus),
    /// 404 on [`MODEL`]: locked for the base cooldown.
    ModelLocked,
    /// 401: invalid until someone fixes it.
    Invalid,
    /// 402: out of credit for the quota cooldown.
    QuotaExhausted,
    /// Cooled a minute ago and back: active, backoff level 1, still tracked.
    KeyRecovered,
    /// Locked a minute ago and expired: unlocked, one consecutive failure, still tracked.
    ModelRecovered,
}

impl Seed {
    fn of(credential: usize) -> Self {
        match credential % 20 {
            0 => Self::OtherModelLocked,
            1 => Self::KeyCooling { retry_after_secs: Some(30) },
            11 => Self::KeyCooling { retry_after_secs: None },
            3 => Self::Status(CredentialStatus::Refreshing),
            13 => Self::Status(CredentialStatus::Expired),
            5 => Self::ModelLocked,
            7 => Self::Invalid,
            17 => Self::QuotaExhausted,
            9 => Self::KeyRecovered,
            19 => Self::ModelRecovered,
            _ => Self::Clean,
        }
    }

    fn eligible_for_model(self) -> bool {
        matches!(
            self,
            Self::Clean | Self::OtherModelLocked | Self::KeyRecovered | Self::ModelRecovered
        )
    }
}

/// A registry holding the state of N credentials, and the request's N candidates in priority
/// order (as the planner holds them: built once from configuration, not per request).
struct Fixture {
    n: usize,
    registry: Arc<HealthRegistry>,
    candidates: Vec<CandidateKey>,
    /// Eligible: credential 0 on [`MODEL`] (its other model is locked).
    hit: CandidateKey,
    /// Ineligible at the innermost layer, so all three lookups run: credential 0 on
    /// [`OTHER_MODEL`], locked by a 404.
    miss: CandidateKey,
}

fn credential(i: usize) -> String {
    format!("key-{i:05}")
}

fn response(status: u16, headers: &HeaderMap, policy: &ClassifyPolicy, now: UnixMillis) -> Verdict {
    let upstream = Upstream::Response { status, headers, body: BodyHint::None };
    classify(&Outcome::new(upstream), policy, now)
}

fn retry_after(secs: u64) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", secs.into());
    headers
}

/// Admits and settles one attempt, as the attempt loop does.
fn attempt(registry: &Arc<HealthRegistry>, key: &CandidateKey, verdict: &Verdict, now: UnixMillis) {
    registry.admit(key, now).expect("the seeded candidate is admitted").finish(verdict, now);
}

impl Fixture {
    fn new(n: usize) -> Self {
        let registry = Arc::new(HealthRegistry::default());
        // 429 charges the key, not the model: the setting that makes a rate limit cool a key.
        let lockouts =
            LockoutSettings { error_codes: vec![404, 503], ..LockoutSettings::default() };
        registry.set_lockout_policy(lockouts.validate().expect("valid lockout settings"));
        let policy = registry.classify_policy();
        let none = HeaderMap::new();

        // Other providers' breakers share the registry: one degraded, one open.
        for (provider, failures) in [("anthropic", 3), ("groq", 5)] {
            let key = CandidateKey::new(provider, "key-00000", "m");
            let bad_gateway = response(502, &none, &policy, NOW);
            for _ in 0..failures {
                attempt(&registry, &key, &bad_gateway, NOW);
            }
        }

        let on = |i: usize, model: &str| CandidateKey::new(PROVIDER, credential(i), model);
        // The past first, so the registry never sees time run backwards.
        for i in 0..n {
            let verdict = match Seed::of(i) {
                Seed::KeyRecovered => response(429, &retry_after(5), &policy, EARLIER),
                Seed::ModelRecovered => response(404, &none, &policy, EARLIER),
                _ => continue,
            };
            attempt(&registry, &on(i, MODEL), &verdict, EARLIER);
        }
        for i in 0..n {
            let (model, verdict) = match Seed::of(i) {
                Seed::Clean | Seed::KeyRecovered | Seed::ModelRecovered => continue,
                Seed::Status(status) => {
                    registry.set_credential_status(&on(i, MODEL).credential_key(), status, NOW);
                    continue;
                }
                Seed::OtherModelLocked => (OTHER_MODEL, response(404, &none, &policy, NOW)),
                Seed::KeyCooling { retry_after_secs } => {
                    let headers = retry_after_secs.map_or_else(HeaderMap::new, retry_after);
                    (MODEL, response(429, &headers, &policy, NOW))
                }
                Seed::ModelLocked => (MODEL, response(404, &none, &policy, NOW)),
                Seed::Invalid => (MODEL, response(401, &none, &policy, NOW)),
                Seed::QuotaExhausted => (MODEL, response(402, &none, &policy, NOW)),
            };
            attempt(&registry, &on(i, model), &verdict, NOW);
        }

        let candidates: Vec<CandidateKey> = (0..n).map(|i| on(i, MODEL)).collect();
        // Settle the lazy transitions (expired cooldowns and locks) before anything is timed,
        // and check the registry holds what the seeds say.
        let eligible = candidates.iter().filter(|k| registry.eligible(k, NOW).is_ok()).count();
        let expected = (0..n).filter(|&i| Seed::of(i).eligible_for_model()).count();
        assert_eq!(eligible, expected, "seeded state for N = {n}");

        let fixture = Self { n, registry, candidates, hit: on(0, MODEL), miss: on(0, OTHER_MODEL) };
        assert_eq!(fixture.registry.eligible(&fixture.hit, NOW), Ok(()));
        assert!(fixture.registry.eligible(&fixture.miss, NOW).is_err());
        fixture
    }

    /// A selector for this provider with a latency history, so p2c compares real averages.
    fn selector(&self, strategy: SelectionStrategy) -> CredentialSelector {
        let selector = CredentialSelector::new(strategy, self.n, 0x5EED);
        // 150–450 ms, spread so neighbouring keys differ.
        for (i, ordinal) in (0..self.n).zip(0_u64..) {
            let latency_us = 150_000 + (ordinal * 7_919) % 300_000;
            selector.observe_latency(i, Duration::from_micros(latency_us));
        }
        selector
    }

    /// The planner's work for one request: every candidate through `eligible`, the eligible
    /// credential indices into `eligible` (reused across requests), one pick.
    fn plan(&self, selector: &CredentialSelector, eligible: &mut Vec<usize>) -> Option<usize> {
        let now = black_box(NOW);
        eligible.clear();
        for (i, key) in self.candidates.iter().enumerate() {
            if self.registry.eligible(key, now).is_ok() {
                eligible.push(i);
            }
        }
        selector.pick(eligible)
    }
}

fn bench(c: &mut Criterion) {
    let fixtures: Vec<Fixture> = SIZES.into_iter().map(Fixture::new).collect();

    let mut group = c.benchmark_group("eligible");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    group.sample_size(50);
    for f in &fixtures {
        for (name, key) in [("hit", &f.hit), ("miss", &f.miss)] {
            group.bench_with_input(BenchmarkId::new(name, f.n), key, |b, key| {
                b.iter(|| f.registry.eligible(black_box(key), black_box(NOW)));
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("planner");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.sample_size(30);
    for f in &fixtures {
        group.throughput(Throughput::Elements(u64::try_from(f.n).expect("N fits in u64")));
        for (name, strategy) in STRATEGIES {
            let selector = f.selector(strategy);
            let mut eligible = Vec::with_capacity(f.n);
            group.bench_function(BenchmarkId::new(name, f.n), |b| {
                b.iter(|| f.plan(&selector, &mut eligible));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
