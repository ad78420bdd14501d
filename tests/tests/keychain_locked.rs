//! With the keychain locked, the app still starts (as the desktop app does, on the OS
//! keychain): the credentials whose keys are in the keychain wait for it, named with why, and
//! everything else serves. Needs a real Secret Service: `scripts/keychain-test` runs this after
//! the other keychain tests, in the same throwaway session, since it locks that session's
//! keyring for good (nothing can type its password to unlock it again).

use std::process::Command;
use std::sync::Arc;

use switchyard::status::Level;
use switchyard_e2e::harness::{Harness, Setup, keychain_tests};
use switchyard_secrets::{KeychainStore, Secret, SecretId, SecretStore};

/// Locks every collection of the session's Secret Service, as a screen lock would.
fn lock_the_keyring() {
    let locked = Command::new("dbus-send")
        .args([
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.secrets",
            "/org/freedesktop/secrets",
            "org.freedesktop.Secret.Service.Lock",
            "array:objpath:/org/freedesktop/secrets/collection/login",
        ])
        .output()
        .expect("dbus-send runs");
    assert!(locked.status.success(), "{}", String::from_utf8_lossy(&locked.stderr));
}

#[tokio::test]
async fn with_the_keychain_locked_the_app_starts_and_names_the_credentials_that_wait() {
    if !keychain_tests() {
        return;
    }
    let store =
        KeychainStore::with_service(&format!("switchyard-locked-{}", std::process::id())).unwrap();
    let id = SecretId::new("kc", "kc-1").unwrap();
    store.set(&id, &Secret::new("sk-behind-the-lock")).unwrap();
    lock_the_keyring();
    let store: Arc<dyn SecretStore> = Arc::new(store);
    let extra = r#"
[[providers]]
id = "kc"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "kc-1", secret = "keychain:kc/kc-1" }]

[[combos]]
name = "locked-first"
targets = [{ target = "kc/gpt-4o" }, { target = "oa/gpt-4o" }]
"#;
    let h = Harness::start_with(Setup::new(extra).secrets(Arc::clone(&store))).await;

    let response = h.openai("locked-first", false).send().await.unwrap();
    assert_eq!(response.status(), 200, "the rest serves");
    let (_, view) = h.api_get("/api/providers/kc").await;
    let why = view["credentials"][0]["secret"]["unavailable"].as_str().unwrap_or_default();
    assert!(why.starts_with("the OS keychain refused access"), "{view}");
    let status = h.status().await;
    assert_eq!(status.level, Level::Amber, "{:?}", status.lines);
    let line = status.lines.iter().find(|l| l.starts_with("provider kc ")).unwrap();
    assert!(
        line.contains("waiting for their secret")
            && line.contains("kc-1 (the OS keychain refused access"),
        "{line}"
    );
    h.stop().await;
}
