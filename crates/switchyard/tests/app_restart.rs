//! The composition root keeps health state across a restart.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use switchyard::{App, Launch};
use switchyard_core::outcome::{BodyHint, Outcome, Upstream, classify};
use switchyard_core::resilience::SkipReason;
use switchyard_core::{CandidateKey, Clock as _, ManualClock, UnixMillis};
use switchyard_secrets::MemoryStore;

#[tokio::test]
async fn a_lockout_recorded_before_shutdown_is_enforced_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
    let key = CandidateKey::new("openai", "key-a", "gpt-4o");

    let app = App::start(launch(dir.path(), &clock)).await.unwrap();
    assert!(app.persistence_status().is_durable());
    let now = clock.now();
    let headers = HeaderMap::new();
    let not_found = Upstream::Response { status: 404, headers: &headers, body: BodyHint::None };
    let verdict = classify(&Outcome::new(not_found), &app.registry().classify_policy(), now);
    app.registry().admit(&key, now).unwrap().finish(&verdict, now);
    app.shutdown().await;

    clock.advance(Duration::from_secs(4));
    let app = App::start(launch(dir.path(), &clock)).await.unwrap();
    assert_eq!(
        app.registry().eligible(&key, clock.now()),
        Err(SkipReason::ModelLocked { retry_in_ms: 6_000, rate_limited: false })
    );
    app.shutdown().await;
}

/// The state file's config, the test's clock, no keychain or environment.
fn launch(dir: &std::path::Path, clock: &ManualClock) -> Launch {
    Launch::new(dir)
        .clock(Arc::new(clock.clone()))
        .secrets(Arc::new(MemoryStore::default()))
        .env(|_| None)
}
