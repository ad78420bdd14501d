//! This build as the older one: a state file and a stored config written by a newer
//! Switchyard (one more migration, a provider of a kind this build does not know, fields it
//! does not know). What it knows serves; the config is read-only and never saved over; a file
//! whose minimum reader is newer than this build stops the start, naming what to do.

use serde_json::{Value, json};
use sqlx::sqlite::SqliteConnectOptions;
use switchyard::config::ConfigError;
use switchyard::{App, Launch, STATE_FILE};
use switchyard_e2e::harness::{Harness, Setup, openai_text};
use switchyard_secrets::MemoryStore;
use switchyard_store::{Store, VERSION, backup_path, schema_version};
use switchyard_testkit::MockUpstream;

/// What the newer build saved: its config form version 2.
fn newer_config(mock: &str) -> Value {
    json!({
        "providers": [
            { "id": "quantum", "kind": "quantum_llm", "base_url": "https://quantum.example/v1" },
            { "id": "oa", "kind": "openai", "base_url": format!("{mock}/v1"),
              "credentials": [{ "id": "oa-1", "secret": "env:OA_1" }],
              "region": "eu-west" },
        ],
        "combos": [{ "name": "smart", "targets": [
            { "target": "quantum/q-1" }, { "target": "oa/gpt-4o" }
        ] }],
        "settings": { "model_lockouts": { "enabled": true, "explain_to_clients": true } },
        "telemetry": { "opt_in": false },
    })
}

/// Writes the state file as a newer build leaves it: this build's schema, then a migration of
/// its own declaring `min_reader`, and its config. Returns the config's stored text.
async fn write_future(dir: &std::path::Path, mock: &str, min_reader: &str) -> String {
    let path = dir.join(STATE_FILE);
    Store::open(&path).await.unwrap().close().await;
    let text = serde_json::to_string(&newer_config(mock)).unwrap();
    let pool =
        sqlx::SqlitePool::connect_with(SqliteConnectOptions::new().filename(&path)).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE quantum_state (provider TEXT NOT NULL PRIMARY KEY, entangled INTEGER NOT NULL);
         INSERT INTO quantum_state VALUES ('quantum', 1);
         INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9000, 'quantum state', TRUE, x'00', 1);",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE compatibility SET min_reader_version = ?")
        .bind(min_reader)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO settings (section, schema_version, written_by, body, updated_at)
         VALUES ('config', 2, '0.9.0', ?, 1)",
    )
    .bind(&text)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    text
}

#[tokio::test]
async fn a_newer_config_serves_what_this_version_knows_and_is_never_saved_over() {
    let data = tempfile::tempdir().unwrap();
    let mock = MockUpstream::start().await;
    let text = write_future(data.path(), &mock.base_url(), VERSION).await;
    let h = Harness::start_in_with(mock, data.path(), Setup::default().stored_config()).await;

    // The known provider serves the combo; the unknown one is not tried.
    let response = h.openai("smart", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(!openai_text(&body).is_empty());
    let (_, health) = h.api_get("/api/monitoring/health").await;
    let saving = &health["config_saved_to"];
    assert_eq!(saving["to"], "read_only", "{saving}");
    assert_eq!(saving["written_by"], "0.9.0");
    let aside: Vec<&str> = saving["set_aside"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        aside,
        [
            "providers[id=quantum]",
            "providers[id=oa].region",
            "settings.model_lockouts.explain_to_clients",
            "telemetry",
            "combos[name=smart].targets[target=quantum/q-1]",
        ]
    );

    // Every edit is refused, saying why and what to do; nothing changes.
    let (status, refused) = h
        .api(reqwest::Method::PATCH, "/api/settings/model_lockouts", &json!({ "enabled": false }))
        .await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("written by Switchyard 0.9.0"), "{message}");
    assert!(message.contains("update to 0.9.0 or newer to edit it"), "{message}");
    let (status, _) = h.api(reqwest::Method::DELETE, "/api/providers/oa", &Value::Null).await;
    assert_eq!(status, 409);
    let (_, lockouts) = h.api_get("/api/settings/model_lockouts").await;
    assert_eq!(lockouts["enabled"], true);
    h.stop().await;

    let store = Store::open(data.path().join(STATE_FILE)).await.unwrap();
    assert_eq!(store.settings_text("config").await.unwrap().as_deref(), Some(text.as_str()));
    store.close().await;
}

#[tokio::test]
async fn a_state_file_that_needs_a_newer_version_stops_the_start_naming_it_and_the_backup() {
    let data = tempfile::tempdir().unwrap();
    let mock = MockUpstream::start().await;
    let text = write_future(data.path(), &mock.base_url(), "0.9.0").await;
    let path = data.path().join(STATE_FILE);
    let own = backup_path(&path, schema_version());
    std::fs::write(&own, b"").unwrap();

    let launch = Launch::new(data.path()).secrets(std::sync::Arc::new(MemoryStore::default()));
    let error = App::start(launch).await.map(|_| ()).unwrap_err();
    assert!(matches!(error, ConfigError::StateTooNew(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("needs version 0.9.0 or newer (this is {VERSION})")),
        "{message}"
    );
    assert!(
        message.contains(&format!("copying {} over {}", own.display(), path.display())),
        "{message}"
    );

    // The same with a config file: health, keys and history live in the state file too.
    let file = data.path().join("switchyard.toml");
    std::fs::write(&file, "").unwrap();
    let launch = Launch::new(data.path())
        .config_file(&file)
        .secrets(std::sync::Arc::new(MemoryStore::default()));
    let error = App::start(launch).await.map(|_| ()).unwrap_err();
    assert!(matches!(error, ConfigError::StateTooNew(_)), "{error:?}");

    let store = Store::open_read_only(&path).await.unwrap();
    assert_eq!(store.settings_text("config").await.unwrap().as_deref(), Some(text.as_str()));
    store.close().await;
}
