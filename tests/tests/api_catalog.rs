//! The management API's catalog end to end: providers, credentials, combos, settings sections,
//! config export and import, the connection test and model discovery.
//!
//! Every success is checked where it matters (the next request routes by it, the config file
//! holds it, the keychain holds the secret); every invalid input gets a 4xx naming the field,
//! and a read afterwards shows nothing changed, in the API and in the config file.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_e2e::harness::{
    CANARY, CONFIG_FILE, Harness, MANAGEMENT_TOKEN, Setup, ask, closed_port, header,
};
use switchyard_secrets::{MemoryStore, Secret, SecretError, SecretId, SecretStore};

/// What a test reads to prove an edit changed nothing: the API's view and the saved file.
async fn everything(h: &Harness) -> (Value, Value, Value, String) {
    let (_, providers) = h.api_get("/api/providers").await;
    let (_, combos) = h.api_get("/api/combos").await;
    let (_, settings) = h.api_get("/api/settings").await;
    (providers, combos, settings, saved_config(h))
}

fn saved_config(h: &Harness) -> String {
    std::fs::read_to_string(h.data_dir().join(CONFIG_FILE)).unwrap()
}

/// Sends each `(method, path, body, status, field)` and checks the refusal names `field` and
/// leaves everything as it was.
async fn refused(h: &Harness, cases: &[(Method, &str, Value, u16, &str)]) {
    for (method, path, body, status, field) in cases {
        let before = everything(h).await;
        let (got, answer) = h.api(method.clone(), path, body).await;
        assert_eq!(got, *status, "{method} {path} {body}: {answer}");
        assert_eq!(
            answer["error"]["switchyard"]["field"], *field,
            "{method} {path} {body}: {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{method} {path} {body}: {answer}");
        assert_eq!(everything(h).await, before, "{method} {path} {body} changed something");
    }
}

const SMART: &str = r#"
[[combos]]
name = "smart"
targets = [{ target = "oa/gpt-4o" }, { target = "an/claude-fallback" }]
"#;

#[tokio::test]
async fn a_provider_created_through_the_api_routes_at_once_and_is_saved() {
    let h = Harness::start("").await;
    let created = json!({
        "id": "extra", "kind": "openai", "base_url": format!("{}/v1", h.mock.base_url()),
        "models": ["gpt-4o-mini"],
        "credentials": [{ "id": "k1", "secret": "env:OA_1" }],
    });
    let (status, view) = h.api(Method::POST, "/api/providers", &created).await;
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["credentials"][0]["secret"]["set"], true);
    assert_eq!(view["credentials"][0]["secret"]["reference"], "env:OA_1");
    // No tail of an environment variable's value is shown: a config edit must not be a way to
    // read variables four characters at a time.
    assert_eq!(view["credentials"][0]["secret"]["hint"], Value::Null, "{view}");
    assert!(saved_config(&h).contains("id = \"extra\""), "{}", saved_config(&h));

    let (status, _, body) = ask(&h, "extra/gpt-4o-mini").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.mock.attempts().last().unwrap().api_key(), Some("oa-1"));

    // Update: only the named fields change.
    let patch = json!({ "models": ["gpt-4o-mini", "gpt-4o"], "headers": { "x-team": "blue" } });
    let (status, view) = h.api(Method::PATCH, "/api/providers/extra", &patch).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["models"], json!(["gpt-4o-mini", "gpt-4o"]));
    assert_eq!(view["base_url"], created["base_url"], "untouched fields stay");
    let (status, _, _) = ask(&h, "extra/gpt-4o").await;
    assert_eq!(status, 200);
    assert_eq!(h.mock.attempts().last().unwrap().header("x-team"), Some("blue"));

    let (status, listed) = h.api_get("/api/providers").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> =
        listed.as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["oa", "an", "ge", "extra"]);

    let (status, _) = h.api(Method::DELETE, "/api/providers/extra", &Value::Null).await;
    assert_eq!(status, 200);
    let (status, _) = h.api_get("/api/providers/extra").await;
    assert_eq!(status, 404);
    let (status, _, body) = ask(&h, "extra/gpt-4o").await;
    assert_eq!(status, 404, "a deleted provider no longer routes: {body}");
}

#[tokio::test]
async fn invalid_provider_edits_name_the_field_and_change_nothing() {
    let h = Harness::start(SMART).await;
    let url = format!("{}/v1", h.mock.base_url());
    refused(
        &h,
        &[
            (Method::POST, "/api/providers", json!({"id": "has space", "kind": "openai"}), 422, "id"),
            (Method::POST, "/api/providers", json!({"id": "x", "kind": "cohere"}), 422, "kind"),
            (Method::POST, "/api/providers", json!({"id": "x", "kind": "openai", "base_url": "ftp://h"}), 422, "base_url"),
            (Method::POST, "/api/providers", json!({"id": "x", "kind": "openai", "colour": 1}), 422, "colour"),
            (Method::POST, "/api/providers", json!({"id": "oa", "kind": "openai", "base_url": url}), 409, "id"),
            (Method::POST, "/api/providers", json!({"id": "x", "kind": "openai", "credentials": [{"id": "k", "secret": "file:relative/key"}]}), 422, "credentials[0].secret"),
            (Method::POST, "/api/providers", json!({"id": "x", "kind": "openai", "breaker": {"failure_threshold": 0}}), 422, "breaker.failure_threshold"),
            (Method::PATCH, "/api/providers/oa", json!({"id": "renamed"}), 422, "id"),
            (Method::PATCH, "/api/providers/oa", json!({"base_url": 5}), 422, "base_url"),
            (Method::PATCH, "/api/providers/oa", json!({"headers": {"bad header": "x"}}), 422, "headers"),
            (Method::PATCH, "/api/providers/oa", json!({"credentials": []}), 422, "credentials"),
            (Method::PATCH, "/api/providers/nope", json!({}), 404, "provider"),
            (Method::DELETE, "/api/providers/oa", Value::Null, 409, "id"),
            (Method::DELETE, "/api/providers/nope", Value::Null, 404, "provider"),
        ],
    )
    .await;
}

/// A secret store that is not there, like the keychain of a headless server.
#[derive(Debug)]
struct Unreachable;

impl SecretStore for Unreachable {
    fn backend(&self) -> &'static str {
        "none"
    }
    fn check_available(&self) -> Result<(), SecretError> {
        Err(SecretError::Unavailable("no Secret Service on the session bus".into()))
    }
    fn get(&self, _: &SecretId) -> Result<Option<Secret>, SecretError> {
        self.check_available().map(|()| None)
    }
    fn set(&self, _: &SecretId, _: &Secret) -> Result<(), SecretError> {
        self.check_available()
    }
    fn delete(&self, _: &SecretId) -> Result<bool, SecretError> {
        self.check_available().map(|()| false)
    }
}

#[tokio::test]
async fn a_credential_secret_goes_to_the_keychain_and_is_never_shown_again() {
    let store = Arc::new(MemoryStore::default());
    let h = Harness::start_with(Setup::new("").secrets(store.clone())).await;
    let input = json!({ "id": "oa-new", "secret": CANARY, "priority": 0 });
    let (status, view) = h.api(Method::POST, "/api/providers/oa/credentials", &input).await;
    assert_eq!(status, 201, "{view}");
    assert_eq!(
        view["secret"],
        json!({ "set": true, "reference": "keychain:oa/oa-new", "unavailable": null, "hint": "…4068" })
    );
    let id = SecretId::new("oa", "oa-new").unwrap();
    assert_eq!(store.get(&id).unwrap().unwrap().expose(), CANARY, "the keychain holds it");
    assert!(!saved_config(&h).contains(CANARY), "the config file holds only the reference");
    assert!(saved_config(&h).contains("keychain:oa/oa-new"));

    // Disable the two keys that came first: the new one serves.
    for old in ["oa-1", "oa-2"] {
        let path = format!("/api/providers/oa/credentials/{old}");
        let (status, view) = h.api(Method::PATCH, &path, &json!({ "enabled": false })).await;
        assert_eq!((status, &view["enabled"]), (200, &json!(false)), "{view}");
    }
    let (status, _, _) = ask(&h, "oa/gpt-4o").await;
    assert_eq!(status, 200);
    assert_eq!(h.mock.attempts().last().unwrap().api_key(), Some(CANARY));

    // A new secret replaces the old one in the keychain.
    let path = "/api/providers/oa/credentials/oa-new";
    let (status, view) =
        h.api(Method::PATCH, path, &json!({ "secret": "sk-rotated-000000000000" })).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["secret"]["hint"], "…0000");
    let (_, _, _) = ask(&h, "oa/gpt-4o").await;
    assert_eq!(h.mock.attempts().last().unwrap().api_key(), Some("sk-rotated-000000000000"));

    let (status, _) = h.api(Method::DELETE, path, &Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(store.get(&id).unwrap(), None, "deleting the credential deletes its keychain entry");
}

#[tokio::test]
async fn invalid_credential_edits_name_the_field_and_leave_the_keychain_alone() {
    let store = Arc::new(MemoryStore::default());
    let h = Harness::start_with(
        Setup::new(
            r#"
[[combos]]
name = "pinned"
targets = [{ target = "oa/gpt-4o", credential = "oa-2" }]
"#,
        )
        .secrets(store.clone()),
    )
    .await;
    let creds = "/api/providers/oa/credentials";
    refused(
        &h,
        &[
            (
                Method::POST,
                creds,
                json!({"id": "k", "secret": "sk-a", "secret_ref": "env:OA_1"}),
                422,
                "secret",
            ),
            (Method::POST, creds, json!({"id": "k", "secret": "two\nlines"}), 422, "secret"),
            (
                Method::POST,
                creds,
                json!({"id": "k", "secret_ref": "plaintext-key"}),
                422,
                "secret_ref",
            ),
            (
                Method::POST,
                creds,
                json!({"id": "k", "secret_ref": "file:relative/key"}),
                422,
                "secret_ref",
            ),
            (Method::POST, creds, json!({"id": "bad/id", "secret_ref": "env:OA_1"}), 422, "id"),
            (Method::POST, creds, json!({"id": "oa-1", "secret_ref": "env:OA_1"}), 409, "id"),
            (Method::POST, creds, json!({"id": "k", "priority": -1}), 422, "priority"),
            (Method::POST, "/api/providers/nope/credentials", json!({"id": "k"}), 404, "provider"),
            (
                Method::PATCH,
                "/api/providers/oa/credentials/nope",
                json!({"enabled": false}),
                404,
                "credential",
            ),
            (
                Method::PATCH,
                "/api/providers/oa/credentials/oa-1",
                json!({"enabled": "no"}),
                422,
                "enabled",
            ),
            (Method::DELETE, "/api/providers/oa/credentials/oa-2", Value::Null, 409, "id"),
        ],
    )
    .await;
    assert_eq!(store.len(), 0, "no refused edit left a secret behind");
}

#[tokio::test]
async fn without_a_reachable_keychain_a_secret_is_refused_with_the_env_alternative() {
    let h = Harness::start_with(Setup::new("").secrets(Arc::new(Unreachable))).await;
    let before = everything(&h).await;
    let (status, body) = h
        .api(Method::POST, "/api/providers/oa/credentials", &json!({"id": "k", "secret": CANARY}))
        .await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("secret: the OS keychain is not reachable"), "{message}");
    assert!(message.contains("env:VAR"), "says what to do instead: {message}");
    assert!(!body.to_string().contains(CANARY));
    assert_eq!(everything(&h).await, before);
    // An env: reference needs no keychain.
    let (status, body) = h
        .api(
            Method::POST,
            "/api/providers/oa/credentials",
            &json!({"id": "k", "secret_ref": "env:OA_2"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn combos_are_created_renamed_reordered_and_deleted_live() {
    let h = Harness::start("").await;
    let combo = json!({ "name": "duo", "targets": [{ "target": "oa/gpt-4o" }, { "target": "an/claude-x" }] });
    let (status, body) = h.api(Method::POST, "/api/combos", &combo).await;
    assert_eq!(status, 201, "{body}");
    let (_, headers, _) = ask(&h, "duo").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");

    let (status, body) =
        h.api(Method::POST, "/api/combos/duo/reorder", &json!({ "order": [1, 0] })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["targets"][0]["target"], "an/claude-x");
    let (_, headers, _) = ask(&h, "duo").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-x", "the new order routes");

    let renamed = json!({ "name": "pair", "strategy": "round_robin", "targets": [{ "target": "oa/gpt-4o-mini" }] });
    let (status, body) = h.api(Method::PUT, "/api/combos/duo", &renamed).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["strategy"], "round_robin");
    let (status, _) = h.api_get("/api/combos/duo").await;
    assert_eq!(status, 404);
    let (status, _, _) = ask(&h, "pair").await;
    assert_eq!(status, 200);

    let (status, _) = h.api(Method::DELETE, "/api/combos/pair", &Value::Null).await;
    assert_eq!(status, 200);
    let (status, list) = h.api_get("/api/combos").await;
    assert_eq!((status, list), (200, json!([])));
    assert!(!saved_config(&h).contains("pair"));
}

#[tokio::test]
async fn invalid_combo_edits_name_the_field_and_change_nothing() {
    let h = Harness::start(SMART).await;
    let t = |target: &str| json!({ "target": target });
    refused(
        &h,
        &[
            (
                Method::POST,
                "/api/combos",
                json!({"name": "c", "targets": [t("nope/gpt-4o")]}),
                422,
                "targets[0].target",
            ),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "c", "targets": [t("oa/gpt-5-unlisted")]}),
                422,
                "targets[0].target",
            ),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "c", "targets": [t("gpt-4o")]}),
                422,
                "targets[0].target",
            ),
            (Method::POST, "/api/combos", json!({"name": "c", "targets": []}), 422, "targets"),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "c", "targets": [{"target": "oa/gpt-4o", "weight": 0}]}),
                422,
                "targets[0].weight",
            ),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "c", "targets": [{"target": "oa/gpt-4o", "credential": "nope"}]}),
                422,
                "targets[0].credential",
            ),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "a/b", "targets": [t("oa/gpt-4o")]}),
                422,
                "name",
            ),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "smart", "targets": [t("oa/gpt-4o")]}),
                409,
                "name",
            ),
            (
                Method::POST,
                "/api/combos",
                json!({"name": "c", "strategy": "fastest", "targets": [t("oa/gpt-4o")]}),
                422,
                "strategy",
            ),
            (
                Method::PUT,
                "/api/combos/nope",
                json!({"name": "nope", "targets": [t("oa/gpt-4o")]}),
                404,
                "combo",
            ),
            (Method::POST, "/api/combos/smart/reorder", json!({"order": [0, 0]}), 422, "order"),
            (Method::POST, "/api/combos/smart/reorder", json!({"order": [1]}), 422, "order"),
            (Method::DELETE, "/api/combos/nope", Value::Null, 404, "combo"),
        ],
    )
    .await;
}

#[tokio::test]
async fn aliases_and_the_default_route_are_replaced_whole_route_at_once_and_follow_a_rename() {
    let h = Harness::start(SMART).await;
    let (status, body) = h.api_get("/api/aliases").await;
    assert_eq!((status, body), (200, json!({ "aliases": [], "default_route": null })));

    let aliases = json!({
        "aliases": [{ "match": "claude-*", "to": "smart" }, { "match": "claude-*haiku*", "to": "oa/gpt-4o-mini" }],
        "default_route": "oa/gpt-4o-mini",
    });
    let (status, body) = h.api(Method::PUT, "/api/aliases", &aliases).await;
    assert_eq!((status, &body), (200, &aliases), "{body}");
    assert!(saved_config(&h).contains("match = \"claude-*haiku*\""), "{}", saved_config(&h));
    assert!(
        saved_config(&h).contains("default_route = \"oa/gpt-4o-mini\""),
        "{}",
        saved_config(&h)
    );
    let (_, headers, _) = ask(&h, "claude-opus-4-1").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
    let (_, headers, _) = ask(&h, "claude-haiku-4-5").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o-mini");
    let (_, headers, _) = ask(&h, "whatever").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o-mini", "the default route");

    // A renamed combo takes its aliases along.
    let renamed = json!({ "name": "clever", "targets": [{ "target": "oa/gpt-4o" }] });
    assert_eq!(h.api(Method::PUT, "/api/combos/smart", &renamed).await.0, 200);
    let (_, body) = h.api_get("/api/aliases").await;
    assert_eq!(body["aliases"][0]["to"], "clever", "{body}");

    // Emptied: the names are unknown again.
    let none = json!({ "aliases": [] });
    let (status, body) = h.api(Method::PUT, "/api/aliases", &none).await;
    assert_eq!((status, body), (200, json!({ "aliases": [], "default_route": null })));
    assert!(!saved_config(&h).contains("aliases"), "{}", saved_config(&h));
    let (status, _, _) = ask(&h, "claude-opus-4-1").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn invalid_alias_edits_name_the_field_and_change_nothing() {
    let h = Harness::start(SMART).await;
    let kept =
        json!({ "aliases": [{ "match": "claude-*", "to": "smart" }], "default_route": "smart" });
    assert_eq!(h.api(Method::PUT, "/api/aliases", &kept).await.0, 200);
    let one = |pattern: &str, to: &str| json!({ "aliases": [{ "match": pattern, "to": to }] });
    refused(
        &h,
        &[
            (Method::PUT, "/api/aliases", one("claude-*", "nope"), 422, "aliases[0].to"),
            (Method::PUT, "/api/aliases", one("claude-*", "oa/gpt-9"), 422, "aliases[0].to"),
            (Method::PUT, "/api/aliases", one("", "smart"), 422, "aliases[0].match"),
            (Method::PUT, "/api/aliases", one("*", "smart"), 422, "aliases[0].match"),
            (Method::PUT, "/api/aliases", one("smart", "oa/gpt-4o"), 422, "aliases[0].match"),
            (
                Method::PUT,
                "/api/aliases",
                json!({ "aliases": [{ "match": "a*", "to": "smart" }, { "match": "a*", "to": "smart" }] }),
                422,
                "aliases[1].match",
            ),
            (
                Method::PUT,
                "/api/aliases",
                json!({ "aliases": [], "default_route": "nope/x" }),
                422,
                "default_route",
            ),
            (Method::DELETE, "/api/combos/smart", Value::Null, 409, "name"),
        ],
    )
    .await;
    let (_, body) = h.api_get("/api/aliases").await;
    assert_eq!(body, kept);
}

#[tokio::test]
async fn every_settings_section_reads_and_patches_live() {
    let h = Harness::start(SMART).await;
    let (status, all) = h.api_get("/api/settings").await;
    assert_eq!(status, 200);
    for section in [
        "model_lockouts",
        "credential_cooldown",
        "breaker_profiles",
        "timeouts",
        "routing",
        "server",
        "team",
    ] {
        let (status, body) = h.api_get(&format!("/api/settings/{section}")).await;
        assert_eq!(status, 200, "{section}: {body}");
        assert_eq!(body, all[section], "{section}");
    }
    let patches = [
        ("credential_cooldown", json!({"api_key_base_ms": 2000})),
        ("breaker_profiles", json!({"local": {"failure_threshold": 2}})),
        ("timeouts", json!({"idle_ms": 1500})),
        ("routing", json!({"max_attempts": 1})),
        ("server", json!({"port": 4242})),
    ];
    for (section, patch) in patches {
        let path = format!("/api/settings/{section}");
        let (status, body) = h.api(Method::PATCH, &path, &patch).await;
        assert_eq!(status, 200, "{section}: {body}");
        let (_, now) = h.api_get(&path).await;
        assert_eq!(now, body, "{section}");
    }
    let (_, profiles) = h.api_get("/api/settings/breaker_profiles").await;
    assert_eq!(profiles["local"]["failure_threshold"], 2);
    assert_eq!(profiles["local"]["reset_timeout_ms"], 5000, "a merge patch keeps the other fields");
    assert!(saved_config(&h).contains("port = 4242"));

    // Live: one attempt per request now, so the failing first target is not followed.
    h.mock.enqueue("gpt-4o", switchyard_testkit::Status::new(503));
    let (status, headers, _) = ask(&h, "smart").await;
    assert_eq!((status, header(&headers, "x-switchyard-attempts")), (503, ""));
    assert_eq!(h.mock.total_attempts(), 1);
}

#[tokio::test]
async fn invalid_settings_name_the_field_and_change_nothing() {
    let h = Harness::start("").await;
    refused(
        &h,
        &[
            (
                Method::PATCH,
                "/api/settings/timeouts",
                json!({"first_event_ms": 5000, "first_byte_ms": 4000}),
                422,
                "timeouts.first_byte_ms",
            ),
            (
                Method::PATCH,
                "/api/settings/timeouts",
                json!({"idle_ms": "soon"}),
                422,
                "timeouts.idle_ms",
            ),
            (
                Method::PATCH,
                "/api/settings/routing",
                json!({"max_attempts": 0}),
                422,
                "routing.max_attempts",
            ),
            (
                Method::PATCH,
                "/api/settings/credential_cooldown",
                json!({"max_cooldown_ms": 10}),
                422,
                "credential_cooldown.max_cooldown_ms",
            ),
            (
                Method::PATCH,
                "/api/settings/breaker_profiles",
                json!({"oauth": {"half_open_probes": 0}}),
                422,
                "breaker_profiles.oauth.half_open_probes",
            ),
            (
                Method::PATCH,
                "/api/settings/breaker_profiles",
                json!({"cloud": {}}),
                422,
                "breaker_profiles.cloud",
            ),
            (Method::PATCH, "/api/settings/server", json!({"port": 70000}), 422, "server.port"),
            (
                Method::PATCH,
                "/api/settings/team",
                json!({"instance": "a"}),
                422,
                "team.database_url",
            ),
            (
                Method::PATCH,
                "/api/settings/team",
                json!({"database_url": "env:SWITCHYARD_E2E_NO_TEAM_DB"}),
                422,
                "team.database_url",
            ),
            (Method::PATCH, "/api/settings/model_lockouts", json!([1]), 422, "model_lockouts"),
            (Method::PATCH, "/api/settings/nope", json!({}), 404, "section"),
        ],
    )
    .await;
}

#[tokio::test]
async fn export_writes_references_only_and_import_replaces_the_config_or_refuses_it_whole() {
    let h = Harness::start(&format!(
        "{SMART}\n[[providers]]\nid = \"canary\"\nkind = \"openai\"\nbase_url = \"{{mock}}/v1\"\ncredentials = [{{ id = \"c\", secret = \"env:CANARY\" }}]\n"
    ))
    .await;
    let r =
        h.http.get(h.url("/api/config/export")).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/toml"));
    let exported = r.text().await.unwrap();
    assert!(!exported.contains(CANARY), "{exported}");
    assert!(exported.contains("env:CANARY"), "{exported}");
    assert!(exported.contains("name = \"smart\""), "{exported}");

    let import = |text: String, query: &'static str| {
        let h = &h;
        async move {
            let r = h
                .http
                .post(h.url(&format!("/api/config/import{query}")))
                .bearer_auth(MANAGEMENT_TOKEN)
                .header("content-type", "application/toml")
                .body(text)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    // Refused whole: a typo deep inside names its path; nothing changes.
    let before = everything(&h).await;
    let broken = exported.replace("name = \"smart\"", "name = \"smart\"\nstrategy = \"fastest\"");
    let (status, body) = import(broken, "").await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["switchyard"]["field"], "combos[0].strategy", "{body}");
    let (status, body) = import("[[providers]]\nid = 1".into(), "").await;
    assert_eq!(
        (status, &body["error"]["switchyard"]["field"]),
        (422, &json!("providers[0].id")),
        "{body}"
    );
    assert_eq!(everything(&h).await, before);

    // A dry run checks without applying; a real import applies at once.
    let renamed = exported.replace("name = \"smart\"", "name = \"clever\"");
    let (status, body) = import(renamed.clone(), "?dry_run=true").await;
    assert_eq!((status, &body["dry_run"]), (200, &json!(true)), "{body}");
    assert_eq!(everything(&h).await, before);
    let (status, body) = import(renamed, "").await;
    assert_eq!((status, &body["combos"]), (200, &json!(1)), "{body}");
    let (status, _, _) = ask(&h, "clever").await;
    assert_eq!(status, 200);
    assert!(saved_config(&h).contains("name = \"clever\""));
}

#[tokio::test]
async fn edits_survive_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in(mock, data.path(), "").await;
    let combo = json!({ "name": "kept", "targets": [{ "target": "oa/gpt-4o" }] });
    assert_eq!(h.api(Method::POST, "/api/combos", &combo).await.0, 201);
    let patch = json!({ "failure_threshold": 2 });
    assert_eq!(h.api(Method::PATCH, "/api/settings/model_lockouts", &patch).await.0, 200);
    let mock = h.stop().await;

    let h = Harness::start_in_with(mock, data.path(), Setup::new("").reuse_config()).await;
    let (_, combos) = h.api_get("/api/combos").await;
    assert_eq!(combos[0]["name"], "kept");
    let (_, lockouts) = h.api_get("/api/settings/model_lockouts").await;
    assert_eq!(lockouts["failure_threshold"], 2);
    let (status, _, _) = ask(&h, "kept").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_connection_test_reports_latency_and_models_or_the_reason_it_failed() {
    let h = Harness::start(&format!(
        "[[providers]]\nid = \"down\"\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{}\"\n",
        closed_port()
    ))
    .await;
    let (status, report) = h.api(Method::POST, "/api/providers/oa/test", &Value::Null).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["credential"], "oa-1");
    assert!(report["models"].as_u64().is_some(), "{report}");

    let (status, report) =
        h.api(Method::POST, "/api/providers/oa/test?credential=oa-2", &Value::Null).await;
    assert_eq!((status, &report["credential"]), (200, &json!("oa-2")), "{report}");

    let (status, report) = h.api(Method::POST, "/api/providers/down/test", &Value::Null).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ok"], false);
    assert!(report["error"].as_str().unwrap().contains("cannot reach"), "{report}");

    let (status, body) =
        h.api(Method::POST, "/api/providers/oa/test?credential=nope", &Value::Null).await;
    assert_eq!(
        (status, &body["error"]["switchyard"]["field"]),
        (404, &json!("credential")),
        "{body}"
    );
    let (status, _) = h.api(Method::POST, "/api/providers/nope/test", &Value::Null).await;
    assert_eq!(status, 404);
    // The health registry was not touched by any of it.
    assert!(h.app.snapshot().breakers.is_empty());
}

#[tokio::test]
async fn model_discovery_lists_what_the_provider_lists() {
    let h = Harness::start("").await;
    h.mock.enqueue("gemini-2.5-pro", switchyard_testkit::Behavior::default());
    for provider in ["oa", "an", "ge"] {
        let (status, body) = h.api_get(&format!("/api/providers/{provider}/models")).await;
        assert_eq!(status, 200, "{provider}: {body}");
        let models: Vec<&str> =
            body["models"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        assert!(models.contains(&"gemini-2.5-pro"), "{provider}: {body}");
    }
}

#[tokio::test]
async fn a_team_database_url_that_is_a_url_or_points_at_a_key_is_refused_without_repeating_either()
{
    let h = Harness::start("").await;
    for (patch, secret) in [
        (json!({"database_url": "postgres://u:hunter2@db.example/team"}), "hunter2"),
        (json!({"database_url": "env:CANARY"}), CANARY),
    ] {
        let before = everything(&h).await;
        let (status, answer) = h.api(Method::PATCH, "/api/settings/team", &patch).await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["switchyard"]["field"], "team.database_url", "{answer}");
        assert!(!answer.to_string().contains(secret), "the answer repeats a secret: {answer}");
        assert_eq!(everything(&h).await, before, "{patch} changed something");
    }
}
