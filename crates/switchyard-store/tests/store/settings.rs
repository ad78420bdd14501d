//! Settings sections: versioned JSON bodies.

use serde_json::json;
use switchyard_core::settings::LockoutSettings;
use switchyard_store::{Store, StoreError};

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
    let loaded: Option<LockoutSettings> = store.load_settings("model_lockouts", 1).await.unwrap();
    assert_eq!(loaded, Some(settings));
    let stored = store.settings("model_lockouts").await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    assert_eq!(stored.written_by.as_deref(), Some(switchyard_store::VERSION));
    assert_eq!(stored.body["failure_threshold"], json!(3));
    store.close().await;
}

#[tokio::test]
async fn a_section_never_saved_reads_as_none() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    assert!(store.settings("breaker").await.unwrap().is_none());
    let loaded: Option<LockoutSettings> = store.load_settings("breaker", 1).await.unwrap();
    assert_eq!(loaded, None);
    store.close().await;
}

#[tokio::test]
async fn a_section_written_by_a_newer_version_is_refused_by_name() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    store.save_settings("model_lockouts", 3, &json!({"enabled": true}), T0).await.unwrap();

    let error = store.load_settings::<LockoutSettings>("model_lockouts", 2).await.unwrap_err();
    assert!(matches!(error, StoreError::SettingsTooNew { stored: 3, supported: 2, .. }));
    assert_eq!(
        error.to_string(),
        "settings section `model_lockouts` has schema version 3, newer than the 2 this version supports"
    );
    store.close().await;
}
