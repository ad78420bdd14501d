//! The composition root keeps health state across a restart.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use switchyard::services::ConfigSaving;
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

#[tokio::test]
async fn without_a_config_file_the_config_lives_in_the_state_file_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
    let app = App::start(launch(dir.path(), &clock)).await.unwrap();
    assert!(app.config().providers.is_empty(), "a first start is empty");
    let text = "[[providers]]\nid = \"local\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n\n[[combos]]\nname = \"home\"\ntargets = [{ target = \"local/llama3\" }]\n";
    let summary = app.services().import_config(text, false, false).await.unwrap();
    assert_eq!((summary.providers, summary.combos), (1, 1));
    app.shutdown().await;

    let app = App::start(launch(dir.path(), &clock)).await.unwrap();
    let config = app.config();
    assert_eq!(config.providers[0].id.as_str(), "local");
    assert_eq!(config.combos[0].name, "home");
    assert_eq!(app.services().export_config(), config.form.to_toml());
    app.shutdown().await;
}

#[tokio::test]
async fn with_a_corrupt_state_file_config_edits_apply_in_memory_and_the_health_page_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
    let state = dir.path().join(switchyard::STATE_FILE);
    let garbage = vec![0x5a_u8; 8192];
    std::fs::write(&state, &garbage).unwrap();

    let app = App::start(launch(dir.path(), &clock)).await.unwrap();
    assert!(!app.persistence_status().is_durable());
    assert_eq!(app.services().health().config_saved_to, ConfigSaving::MemoryOnly);
    let text = "[[providers]]\nid = \"local\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n";
    app.services().import_config(text, false, false).await.unwrap();
    assert_eq!(app.config().providers[0].id.as_str(), "local", "applied, in memory");
    app.shutdown().await;
    assert_eq!(std::fs::read(&state).unwrap(), garbage, "the corrupt file is left untouched");
}
