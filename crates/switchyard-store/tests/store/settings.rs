//! Settings sections: versioned JSON bodies.

use serde_json::json;
use switchyard_core::settings::LockoutSettings;
use switchyard_store::Store;

use crate::fixture::{T0, state_file};

#[tokio::test]
async fn a_saved_section_reads_back_after_a_restart() {
    let (_dir, path) = state_file();
    let settings = LockoutSettings {
        failure_threshold: 3,
        error_codes: vec![404, 529],
        ..LockoutSettings::default()
    };
    let store = Store::open(&path).await.unwrap();
    store.save_settings("model_lockouts", 1, &settings, T0).await.unwrap();
    store.close().await;

    let store = Store::open(&path).await.unwrap();
    let stored = store.settings("model_lockouts").await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    assert_eq!(stored.written_by.as_deref(), Some(switchyard_store::VERSION));
    assert_eq!(stored.body["failure_threshold"], json!(3));
    let loaded: LockoutSettings = serde_json::from_value(stored.body).unwrap();
    assert_eq!(loaded, settings);
    store.close().await;
}

#[tokio::test]
async fn a_section_never_saved_reads_as_none() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    assert!(store.settings("breaker").await.unwrap().is_none());
    assert!(store.settings_text("breaker").await.unwrap().is_none());
    store.close().await;
}

#[tokio::test]
async fn a_section_keeps_the_version_of_its_form_and_who_wrote_it_and_its_text_as_written() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    store.save_settings("model_lockouts", 3, &json!({"enabled": true}), T0).await.unwrap();
    let stored = store.settings("model_lockouts").await.unwrap().unwrap();
    assert_eq!(
        (stored.version, stored.written_by.as_deref()),
        (3, Some(switchyard_store::VERSION))
    );
    assert_eq!(
        store.settings_text("model_lockouts").await.unwrap().as_deref(),
        Some(r#"{"enabled":true}"#)
    );
    store.close().await;
}
