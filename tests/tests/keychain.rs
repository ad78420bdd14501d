//! A provider key that exists only in the OS keychain serves a request. Needs a real
//! Secret Service: `scripts/keychain-test` provides one (a private dbus session with an
//! unlocked gnome-keyring) and sets `SWITCHYARD_KEYCHAIN_TESTS=1`; elsewhere this reports
//! itself as not run, so a plain `cargo test` never touches a desktop's keyring.

use std::sync::Arc;

use switchyard_e2e::harness::{Harness, Setup, keychain_tests};
use switchyard_secrets::{KeychainStore, Secret, SecretId, SecretStore};

#[tokio::test]
async fn a_key_that_exists_only_in_the_keychain_reaches_the_upstream() {
    if !keychain_tests() {
        return;
    }
    let store =
        KeychainStore::with_service(&format!("switchyard-e2e-{}", std::process::id())).unwrap();
    let id = SecretId::new("kc", "kc-1").unwrap();
    store.set(&id, &Secret::new("sk-only-in-the-keychain")).unwrap();
    let store: Arc<dyn SecretStore> = Arc::new(store);
    let extra = r#"
[[providers]]
id = "kc"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "kc-1", secret = "keychain:kc/kc-1" }]
"#;
    let h = Harness::start_with(Setup::new(extra).secrets(Arc::clone(&store))).await;
    let response = h.openai("kc/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(h.mock.attempts_for("gpt-4o")[0].api_key(), Some("sk-only-in-the-keychain"));
    assert!(store.delete(&id).unwrap());
}

#[tokio::test]
async fn a_secret_sent_to_the_api_lands_in_the_keychain_serves_and_leaves_with_its_credential() {
    if !keychain_tests() {
        return;
    }
    let store =
        KeychainStore::with_service(&format!("switchyard-e2e-api-{}", std::process::id())).unwrap();
    let store: Arc<dyn SecretStore> = Arc::new(store);
    let h = Harness::start_with(Setup::new("").secrets(Arc::clone(&store))).await;
    let secret = "sk-sent-through-the-api-0001";
    let input = serde_json::json!({ "id": "kc-api", "secret": secret, "priority": 0 });
    let (status, view) =
        h.api(reqwest::Method::POST, "/api/providers/oa/credentials", &input).await;
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["secret"]["reference"], "keychain:oa/kc-api");
    let id = SecretId::new("oa", "kc-api").unwrap();
    assert_eq!(store.get(&id).unwrap().unwrap().expose(), secret, "the OS keychain holds it");
    for old in ["oa-1", "oa-2"] {
        let path = format!("/api/providers/oa/credentials/{old}");
        let (status, _) =
            h.api(reqwest::Method::PATCH, &path, &serde_json::json!({ "enabled": false })).await;
        assert_eq!(status, 200);
    }
    let response = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(h.mock.attempts_for("gpt-4o").last().unwrap().api_key(), Some(secret));

    let path = "/api/providers/oa/credentials/kc-api";
    let (status, _) = h.api(reqwest::Method::DELETE, path, &serde_json::Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(store.get(&id).unwrap(), None, "the keychain entry left with its credential");
}
