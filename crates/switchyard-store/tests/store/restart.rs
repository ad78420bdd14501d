//! State written, the process gone, the file reopened into a fresh registry.

use std::sync::Arc;
use std::time::Duration;

use switchyard_core::outcome::BreakerFault;
use switchyard_core::resilience::event::HealthRecords;
use switchyard_core::resilience::registry::ResetScope;
use switchyard_core::resilience::{
    BreakerRecord, BreakerState, CredentialRecord, CredentialStatus, HealthRegistry, ModelLockout,
    SkipReason,
};
use switchyard_core::settings::{BreakerPolicy, CooldownPolicy, LockoutPolicy};
use switchyard_core::{CandidateKey, Clock, ManualClock, UnixMillis, clock::millis};
use switchyard_store::{Persistence, PersistenceStatus, Store};

use crate::fixture::{T0, attempt, connect_refused, key, registry, response, sorted, state_file};

const PROVIDERS: [&str; 4] = ["down", "flaky", "openai", "healthy"];
const CREDENTIALS: [&str; 4] = ["key", "cooling", "revoked", "broke"];
const MODELS: [&str; 2] = ["m", "gone"];

fn every_key() -> Vec<CandidateKey> {
    let mut keys = Vec::new();
    for p in PROVIDERS {
        for c in CREDENTIALS {
            for m in MODELS {
                keys.push(key(p, c, m));
            }
        }
    }
    keys
}

fn answers(
    registry: &HealthRegistry,
    now: UnixMillis,
) -> Vec<(Result<(), SkipReason>, BreakerState)> {
    every_key()
        .iter()
        .map(|k| (registry.eligible(k, now), registry.breaker_state(&k.provider, now)))
        .collect()
}

/// Puts every layer in a state worth keeping: an open and a degraded breaker, a cooling, an
/// invalid and a quota-exhausted credential, and an active model lockout.
fn churn(registry: &Arc<HealthRegistry>, clock: &ManualClock) {
    for _ in 0..5 {
        let now = clock.now();
        attempt(registry, &key("down", "key", "m"), &connect_refused(now), now);
        clock.advance(Duration::from_millis(250));
    }
    let now = clock.now();
    for _ in 0..3 {
        attempt(registry, &key("flaky", "key", "m"), &response(500, None, now), now);
    }
    for (credential, model, status, retry_after) in [
        ("cooling", "m", 429, Some("20")),
        ("revoked", "m", 401, None),
        ("broke", "m", 402, None),
        ("key", "gone", 404, None),
    ] {
        let verdict = response(status, retry_after, now);
        attempt(registry, &key("openai", credential, model), &verdict, now);
    }
    clock.advance(Duration::from_secs(1));
}

#[tokio::test]
async fn a_restarted_registry_answers_exactly_like_the_one_that_wrote_the_file() {
    let (_dir, path) = state_file();
    let clock = ManualClock::new(T0);
    let before = registry();
    let persistence = Persistence::start(&path, &before, clock.now()).await;
    churn(&before, &clock);
    persistence.flush().await;
    assert_eq!(persistence.status(), PersistenceStatus::Durable);
    persistence.shutdown().await;

    let after = registry();
    let persistence = Persistence::start(&path, &after, clock.now()).await;
    assert_eq!(persistence.status(), PersistenceStatus::Durable);

    let first = answers(&before, clock.now());
    let skips: Vec<&str> =
        first.iter().filter_map(|(answer, _)| answer.err().map(SkipReason::code)).collect();
    for expected in [
        "breaker_open",
        "credential_cooling",
        "credential_invalid",
        "credential_quota_exhausted",
        "model_locked",
    ] {
        assert!(skips.contains(&expected), "no {expected} in {skips:?}");
    }
    assert!(first.iter().any(|(_, b)| *b == BreakerState::Degraded));
    // The same answers now and as every deadline runs out.
    for offset in [0, 5, 12, 21, 31, 3_601] {
        let now = clock.now().plus(Duration::from_secs(offset));
        assert_eq!(answers(&before, now), answers(&after, now), "at now + {offset} s");
    }
    persistence.shutdown().await;
}

#[tokio::test]
async fn restore_clamps_far_future_deadlines_to_the_longest_policy_wait() {
    let (_dir, path) = state_file();
    let next_year = T0.plus(Duration::from_secs(365 * 24 * 3600));
    let store = Store::open(&path).await.unwrap();
    let records = HealthRecords {
        breakers: vec![(
            "far".into(),
            BreakerRecord {
                state: BreakerState::Open,
                failures: 5,
                reopens: 0,
                open_until: Some(next_year),
                last_fault: Some(BreakerFault::Connect),
                changed_at: T0,
            },
        )],
        credentials: vec![(
            key("near", "key", "m").credential_key(),
            CredentialRecord {
                status: CredentialStatus::Cooling,
                cooling_until: Some(next_year),
                backoff_level: 1,
                last_error: None,
                changed_at: T0,
            },
        )],
        lockouts: vec![(
            key("near", "other", "m"),
            ModelLockout {
                locked_until: Some(next_year),
                consecutive_failures: 1,
                reason: None,
                changed_at: T0,
                probe_through: false,
            },
        )],
    };
    store.replace_all(&records).await.unwrap();
    store.close().await;

    let registry = registry();
    let persistence = Persistence::start(&path, &registry, T0).await;
    let breaker_until = T0.plus(BreakerPolicy::default().longest());
    let cooling_until = T0.plus(CooldownPolicy::default().longest());
    let locked_until = T0.plus(LockoutPolicy::default().longest());
    assert_eq!(
        registry.eligible(&key("far", "key", "m"), T0),
        Err(SkipReason::BreakerOpen { retry_in_ms: millis(BreakerPolicy::default().longest()) })
    );
    assert_eq!(
        registry.eligible(&key("near", "key", "m"), T0),
        Err(SkipReason::CredentialCooling {
            retry_in_ms: millis(CooldownPolicy::default().longest())
        })
    );
    assert_eq!(
        registry.eligible(&key("near", "other", "m"), T0),
        Err(SkipReason::ModelLocked {
            retry_in_ms: millis(LockoutPolicy::default().longest()),
            rate_limited: false,
        })
    );

    // The writer starts by mirroring memory, so the file now holds the clamped deadlines too.
    persistence.flush().await;
    let stored = persistence.store().unwrap().load_health().await.unwrap();
    assert_eq!(stored.breakers[0].1.open_until, Some(breaker_until));
    assert_eq!(stored.credentials[0].1.cooling_until, Some(cooling_until));
    assert_eq!(stored.lockouts[0].1.locked_until, Some(locked_until));
    persistence.shutdown().await;
}

#[tokio::test]
async fn an_entry_back_to_pristine_leaves_no_row_behind() {
    let (_dir, path) = state_file();
    let registry = registry();
    let persistence = Persistence::start(&path, &registry, T0).await;
    let clock = ManualClock::new(T0);
    churn(&registry, &clock);
    persistence.flush().await;
    let store = persistence.store().unwrap();
    assert_eq!(sorted(store.load_health().await.unwrap()), sorted(registry.records()));

    registry.reset(&ResetScope::All, clock.now());
    persistence.flush().await;
    assert!(store.load_health().await.unwrap().is_empty());
    persistence.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn the_state_file_and_its_directory_are_private_to_the_owner() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard").join("state.db");
    let registry = registry();
    let persistence = Persistence::start(&path, &registry, T0).await;
    attempt(&registry, &key("p", "k", "m"), &response(404, None, T0), T0);
    persistence.flush().await;

    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&path), 0o600);
    // SQLite's companions inherit the file's mode.
    assert_eq!(mode(&path.with_extension("db-wal")), 0o600);
    assert_eq!(mode(&path.with_extension("db-shm")), 0o600);
    persistence.shutdown().await;
}

#[tokio::test]
async fn every_field_of_every_row_reads_back_as_written_by_a_resync() {
    use switchyard_core::outcome::{CredentialFault, OutcomeKind};
    use switchyard_core::resilience::LockReason;

    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    let at = |s: u64| UnixMillis(T0.0 + s * 1_000);
    let records = HealthRecords {
        breakers: vec![
            (
                "a".into(),
                BreakerRecord {
                    state: BreakerState::Open,
                    failures: 7,
                    reopens: 3,
                    open_until: Some(at(30)),
                    last_fault: Some(BreakerFault::Transient),
                    changed_at: at(1),
                },
            ),
            (
                "b \"quoted\" é".into(),
                BreakerRecord {
                    state: BreakerState::Degraded,
                    failures: 2,
                    reopens: 0,
                    open_until: None,
                    last_fault: None,
                    changed_at: at(2),
                },
            ),
        ],
        credentials: vec![(
            key("a", "k", "m").credential_key(),
            CredentialRecord {
                status: CredentialStatus::QuotaExhausted,
                cooling_until: Some(at(40)),
                backoff_level: 4,
                last_error: Some(CredentialFault::Quota),
                changed_at: at(3),
            },
        )],
        lockouts: vec![
            (
                key("a", "k", "m"),
                ModelLockout {
                    locked_until: Some(at(50)),
                    consecutive_failures: 5,
                    reason: Some(LockReason { kind: OutcomeKind::RateLimit, status: Some(429) }),
                    changed_at: at(4),
                    probe_through: false,
                },
            ),
            (
                key("a", "k", "n"),
                ModelLockout {
                    locked_until: None,
                    consecutive_failures: 1,
                    reason: Some(LockReason { kind: OutcomeKind::ModelForbidden, status: None }),
                    changed_at: at(5),
                    probe_through: false,
                },
            ),
        ],
    };
    store.replace_all(&records).await.unwrap();
    assert_eq!(sorted(store.load_health().await.unwrap()), sorted(records.clone()));
    // A second resync replaces, not adds.
    let fewer = HealthRecords { lockouts: Vec::new(), ..records };
    store.replace_all(&fewer).await.unwrap();
    assert_eq!(sorted(store.load_health().await.unwrap()), sorted(fewer));
    store.close().await;
}
