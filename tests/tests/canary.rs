//! A canary secret configured as a provider key (`env:` and `file:`), or sent to the
//! management API as one, never appears in logs (at TRACE level, every crate), in the state
//! directory (state file, config file), in any management response (views, export, connection tests), in error bodies or in
//! `/metrics`: only in the request to the upstream itself. The local API key and the
//! management token do not reach the logs either.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::json;
use switchyard::server::ipc::ApiCall;
use switchyard_e2e::harness::{CANARY, FALLBACK, Harness, LOCAL_KEY, MANAGEMENT_TOKEN, Setup};
use switchyard_testkit::{Behavior, ErrorKind, Status};

/// A provider whose key is the canary (`env:CANARY`), on the harness's mock.
const CANARY_PROVIDER: &str = r#"
[[providers]]
id = "canary"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "c-1", secret = "env:CANARY" }]

[[providers]]
id = "sub"
preset = "claude-subscription"
base_url = "{mock}"
models = ["sub-plan"]

[[combos]]
name = "subplan"
targets = [{ target = "sub/sub-plan" }, { target = "an/claude-x" }]
"#;

/// A subscriber's own login: passed through to its subscription alone, and no
/// more kept than the canary key.
const CLIENT_LOGIN: &str = "sk-ant-oat01-client-canary-5f2e9b7c1d3a";

/// Everything every log line writes, from every crate.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_canary_key_appears_only_in_the_upstream_request() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    // The canary in a file too (`file:`), as systemd or a container would hand it over.
    let secrets = tempfile::tempdir().unwrap();
    let key_file = secrets.path().join("canary_key");
    write_private(&key_file, &format!("{CANARY}\n"));
    let extra = format!(
        "{CANARY_PROVIDER}\n[[providers]]\nid = \"canary-file\"\nkind = \"openai\"\n\
         base_url = \"{{mock}}/v1\"\ncredentials = [{{ id = \"f-1\", secret = \"file:{}\" }}]\n",
        key_file.display()
    );
    let h = Harness::start_in_with(mock, data.path(), Setup::new(&extra)).await;
    let mut seen = every_fault(&h).await;
    seen.extend(from_a_file(&h, &key_file).await);

    // The canary sent as a secret through the API (kept in the secret store), then a refused
    // edit that carries it, then a connection test that uses it and one that fails.
    let secret_to = |id: &str| json!({ "id": id, "secret": CANARY });
    let (status, body) =
        h.api(reqwest::Method::POST, "/api/providers/canary/credentials", &secret_to("c-2")).await;
    assert_eq!(status, 201, "{body}");
    seen.push(body.to_string());
    let (status, body) =
        h.api(reqwest::Method::POST, "/api/providers/canary/credentials", &secret_to("c 3")).await;
    assert_eq!(status, 422, "{body}");
    seen.push(body.to_string());
    let (_, body) = h
        .api(
            reqwest::Method::PATCH,
            "/api/providers/canary/credentials/c-2",
            &json!({"secret": CANARY, "priority": "first"}),
        )
        .await;
    seen.push(body.to_string());
    for path in ["/api/providers/canary/test?credential=c-2", "/api/providers/canary/test"] {
        let (_, body) = h.api(reqwest::Method::POST, path, &serde_json::Value::Null).await;
        seen.push(body.to_string());
    }
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    seen.push(h.openai("canary/gpt-4o", false).send().await.unwrap().text().await.unwrap());
    seen.extend(a_subscribers_login(&h).await);

    for path in [
        "/api/monitoring/health",
        "/api/requests?limit=100",
        "/api/resilience/lockouts",
        "/api/keys",
        "/api/providers",
        "/api/providers/canary",
        "/api/providers/canary/models",
        "/api/settings",
        "/api/combos",
        "/api/config/export",
        "/metrics",
    ] {
        let r = h.http.get(h.url(path)).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
        seen.push(r.text().await.unwrap());
    }
    seen.extend(through_ipc(&h).await);

    assert!(
        h.mock.attempts().iter().any(|a| a.api_key() == Some(CANARY)),
        "the canary did reach the upstream, so the test exercises it"
    );
    let mock = h.stop().await;
    for attempt in mock.attempts() {
        let sent = format!("{:?} {}", attempt.headers, String::from_utf8_lossy(&attempt.raw_body));
        let own = attempt.model == "sub-plan";
        assert!(own || !sent.contains(CLIENT_LOGIN), "the login reached {}", attempt.model);
    }
    drop(mock);

    for (i, body) in seen.iter().enumerate() {
        assert!(!body.contains(CANARY), "response {i} carries the canary: {body}");
        assert!(!body.contains(CLIENT_LOGIN), "response {i} carries the client's login: {body}");
    }
    assert!(!logs_text(&logs).contains(CLIENT_LOGIN), "the logs carry the client's login");
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(!logs.is_empty(), "TRACE logging was captured");
    assert!(!logs.contains(CANARY), "the logs carry the canary");
    assert!(!logs.contains(LOCAL_KEY), "the logs carry the local API key");
    assert!(!logs.contains(MANAGEMENT_TOKEN), "the logs carry the management token");
    let spans = logs.lines().find(|l| l.contains("headers=")).unwrap_or_default();
    assert!(
        spans.contains("\"authorization\": Sensitive"),
        "request spans show headers, redacted: {spans}"
    );
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        for secret in [CANARY, CLIENT_LOGIN] {
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "{} carries {secret}", path.display());
        }
    }
}

/// Requests with the `file:` credential, then the file made unsafe (writable by everyone): its
/// credential is dropped with a reason that names the file, never its content.
async fn from_a_file(h: &Harness, key_file: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut seen = Vec::new();
    let response = h.openai("canary-file/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    seen.push(response.text().await.unwrap());
    std::fs::set_permissions(key_file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let retry = "/api/providers/canary-file/credentials/f-1/retry";
    let (status, view) = h.api(reqwest::Method::POST, retry, &serde_json::Value::Null).await;
    assert_eq!(status, 200, "{view}");
    let why = view["credentials"][0]["secret"]["unavailable"].as_str().unwrap_or_default();
    assert!(why.contains("writable by everyone"), "{view}");
    seen.push(view.to_string());
    seen.push(h.openai("canary-file/gpt-4o", false).send().await.unwrap().text().await.unwrap());
    seen
}

fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// The views the desktop window gets over Tauri IPC, a try-it that uses the canary key, and a
/// refused edit carrying it: every body, to be searched for the canary.
async fn through_ipc(h: &Harness) -> Vec<String> {
    // The same views as the desktop window gets them (Tauri IPC), a try-it that uses the key,
    // and a refused edit carrying it.
    let ipc = h.in_process();
    let mut seen = Vec::new();
    let call = |method: &str, path: &str, body: Option<serde_json::Value>| ApiCall {
        method: method.to_owned(),
        path: path.to_owned(),
        body,
    };
    for path in [
        "/api/monitoring/health",
        "/api/requests?limit=100",
        "/api/providers",
        "/api/providers/canary",
        "/api/settings",
        "/api/config/export",
    ] {
        seen.push(ipc.call(call("GET", path, None)).await.body.to_string());
    }
    h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    let tried = ipc
        .call(call("POST", "/api/try", Some(json!({"model": "canary/gpt-4o", "prompt": "hi"}))))
        .await;
    assert_eq!(tried.status, 200, "{}", tried.body);
    seen.push(tried.body.to_string());
    let refused = ipc
        .call(call(
            "POST",
            "/api/providers/canary/credentials",
            Some(json!({ "id": "c 4", "secret": CANARY })),
        ))
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    seen.push(refused.body.to_string());

    seen
}

fn logs_text(logs: &Captured) -> String {
    String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned()
}

/// A subscriber's Claude Code through the subscription: served, refused with an error that
/// echoes the login, and spent (each falls back to the API key): the bodies.
async fn a_subscribers_login(h: &Harness) -> Vec<String> {
    let send = || {
        h.http
            .post(h.url("/v1/messages"))
            .bearer_auth(CLIENT_LOGIN)
            .header("x-switchyard-key", LOCAL_KEY)
            .json(&json!({"model": "subplan", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
    };
    let echoed = format!("invalid x-api-key or token {CLIENT_LOGIN}");
    let spent = Status::new(429)
        .header("anthropic-ratelimit-unified-status", "rejected")
        .header("anthropic-ratelimit-unified-reset", "{epoch+3600}");
    let cases: [Behavior; 3] =
        [Behavior::reply("fine"), Status::new(401).message(echoed).into(), spent.into()];
    let mut seen = Vec::new();
    for behavior in cases {
        h.mock.enqueue("sub-plan", behavior);
        let answer = send().send().await.unwrap();
        assert_eq!(answer.status(), 200, "served by the plan or the API key after it");
        seen.push(format!("{:?}", answer.headers()));
        seen.push(answer.text().await.unwrap());
        // A refused login benches that account: each case starts from a clean slate.
        let reset = json!({"scope": "all"});
        assert_eq!(h.api(reqwest::Method::POST, "/api/resilience/reset", &reset).await.0, 200);
    }
    assert_eq!(h.mock.attempts_for("sub-plan").len(), 3, "the login reached its subscription");

    // Issue 56: a second credential header beside the login stays here, even when the
    // subscription's error would echo it, and a local key in the login's place never leaves.
    let second = "sk-ant-api03-second-header-canary-7d1c";
    h.mock.enqueue("sub-plan", Status::new(401).message(format!("invalid x-api-key {second}")));
    let answer = send().header("x-api-key", second).send().await.unwrap();
    seen.push(format!("{:?}", answer.headers()));
    seen.push(answer.text().await.unwrap());
    let in_place = h
        .http
        .post(h.url("/v1/messages"))
        .bearer_auth(LOCAL_KEY)
        .header("x-switchyard-key", LOCAL_KEY)
        .json(&json!({"model": "subplan", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(in_place.status(), 401, "a local key is no login");
    seen.push(in_place.text().await.unwrap());
    assert_eq!(h.mock.attempts_for("sub-plan").len(), 4, "the local key's request went nowhere");
    for attempt in h.mock.attempts() {
        let sent = format!("{:?} {}", attempt.headers, String::from_utf8_lossy(&attempt.raw_body));
        assert!(!sent.contains(second), "a second login header reached {}", attempt.model);
        assert!(!sent.contains(LOCAL_KEY), "the local key reached {}", attempt.model);
    }
    for body in &seen {
        assert!(!body.contains(second), "echoed: {body}");
    }
    let reset = json!({"scope": "all"});
    assert_eq!(h.api(reqwest::Method::POST, "/api/resilience/reset", &reset).await.0, 200);
    seen
}

/// Success, each error kind, a broken stream, a hang-up, and both timeouts (no first byte; a
/// stream that stops), each reset afterwards so that every one reaches the upstream: the bodies.
async fn every_fault(h: &Harness) -> Vec<String> {
    let mut seen = Vec::new();
    let cases: Vec<(Behavior, bool)> = vec![
        (Behavior::reply("fine"), false),
        (Behavior::error(ErrorKind::Unauthorized), false),
        (Behavior::error(ErrorKind::RateLimited), false),
        (Behavior::error(ErrorKind::InsufficientQuota), false),
        (Behavior::error(ErrorKind::ServerError), false),
        (Behavior::error(ErrorKind::ContextLengthExceeded), false),
        (Status::new(400).into(), false),
        // An upstream that echoes the key it was sent, as OpenAI's "Incorrect API key" does:
        // the echo must not reach the client, the trace or the logs.
        (echo(400, None), false),
        (echo(400, Some("invalid_api_key")), false),
        (echo(401, Some("invalid_api_key")), false),
        (echo(403, None), true),
        (Behavior::reset(), false),
        (Behavior::cut_after(2), true),
        (Behavior::hang(), false),
        (Behavior::stall_after(2), true),
    ];
    for (i, (behavior, stream)) in cases.into_iter().enumerate() {
        let before = h.mock.total_attempts();
        h.mock.enqueue("gpt-4o", behavior);
        let r = h.openai("canary/gpt-4o", stream).send().await.unwrap();
        seen.push(r.text().await.unwrap());
        assert!(h.mock.total_attempts() > before, "case {i} reached the upstream");
        let (status, _) =
            h.api(reqwest::Method::POST, "/api/resilience/reset", &json!({"scope": "all"})).await;
        assert_eq!(status, 200);
    }
    seen
}

/// An OpenAI error body whose message repeats the canary key, as OpenAI's "Incorrect API key
/// provided" does, with this `code`.
fn echo(status: u16, code: Option<&str>) -> Behavior {
    let message = format!("Incorrect API key provided: {CANARY}. You can find your API key at ...");
    Status::new(status)
        .body_json(json!({
            "error": { "message": message, "type": "invalid_request_error", "code": code }
        }))
        .into()
}

/// Issue 19, point 1: a shared config cannot send the canary to a host of its choosing. Through
/// an import, an API edit of `base_url`, a borrowed `keychain:` reference, a connection test,
/// a model list and routed requests, the second host never sees the canary until the user
/// confirms that pair; after the confirmation it is used.
#[tokio::test]
async fn the_canary_never_reaches_a_host_it_was_not_confirmed_for() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(CANARY_PROVIDER)).await;
    let thief = switchyard_testkit::MockUpstream::start().await;
    let thief_host = thief.base_url().to_lowercase();
    let leaked = || thief.attempts().iter().filter(|a| a.api_key() == Some(CANARY)).count();

    // The user's own config was trusted on first use: the canary goes to the first mock.
    assert_eq!(h.openai("canary/gpt-4o", false).send().await.unwrap().status(), 200);
    assert!(h.mock.attempts().iter().any(|a| a.api_key() == Some(CANARY)));

    // 1. An import that points a new provider at the second host with the canary variable.
    let stolen = format!(
        "{CANARY_PROVIDER}\n[[providers]]\nid = \"thief\"\nkind = \"openai\"\nbase_url = \"{}/v1\"\n\
         credentials = [{{ id = \"k\", secret = \"env:CANARY\" }}]\n",
        thief.base_url()
    );
    let text = switchyard_e2e::harness::config_text(&h.mock, &stolen);
    let dry = h.import_config("?dry_run=true", &text).await;
    let pairs = dry["pairs"].as_array().unwrap();
    let state_of = |host: &str| {
        pairs
            .iter()
            .find(|p| {
                p["reference"] == "env:CANARY"
                    && p["destination"].as_str().unwrap().starts_with(host)
            })
            .map(|p| p["state"].clone())
    };
    assert_eq!(state_of(&thief_host), Some(json!("new")), "{dry}");
    assert_eq!(state_of(&h.mock.base_url().to_lowercase()), Some(json!("known")), "{dry}");
    h.import_config("", &text).await;
    let (_, view) = h.api_get("/api/providers/thief").await;
    let waiting = &view["credentials"][0]["unconfirmed"];
    assert_eq!(waiting[0]["reference"], "env:CANARY", "{view}");
    assert!(waiting[0]["destination"].as_str().unwrap().starts_with(&thief_host), "{view}");

    // A routed request, a connection test and a model list: none sends the canary.
    let routed = h.openai("thief/gpt-4o", false).send().await.unwrap();
    assert_ne!(routed.status(), 200);
    let body = routed.text().await.unwrap();
    assert!(body.contains("credential_unconfirmed"), "the skip reason is named: {body}");
    let (_, tested) =
        h.api(reqwest::Method::POST, "/api/providers/thief/test", &serde_json::Value::Null).await;
    assert_eq!(tested["ok"], false, "{tested}");
    let error = tested["error"].as_str().unwrap();
    assert!(
        error.contains("thief/k") && error.contains(&thief_host) && error.contains("confirm"),
        "the test names the credential, the host and how to confirm: {error}"
    );
    let (status, _) = h.api_get("/api/providers/thief/models").await;
    assert_ne!(status, 200);
    assert_eq!(leaked(), 0, "the second host saw the canary before any confirmation");

    // 2. An API edit that moves the trusted provider to the second host.
    let moved = json!({ "base_url": format!("{}/v1", thief.base_url()) });
    let (status, body) = h.api(reqwest::Method::PATCH, "/api/providers/canary", &moved).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["credentials"][0]["unconfirmed"][0]["reference"], "env:CANARY", "{body}");
    assert_ne!(h.openai("canary/gpt-4o", true).send().await.unwrap().status(), 200);
    let (_, tested) =
        h.api(reqwest::Method::POST, "/api/providers/canary/test", &serde_json::Value::Null).await;
    assert_eq!(tested["ok"], false, "{tested}");
    assert_eq!(leaked(), 0, "an API edit sent the canary to the second host");

    // 3. A reference to another provider's keychain entry is refused, naming the field.
    let borrowing = json!({
        "id": "borrower", "kind": "openai", "base_url": format!("{}/v1", thief.base_url()),
        "credentials": [{ "id": "k", "secret": "keychain:canary/c-2" }],
    });
    let (status, body) = h.api(reqwest::Method::POST, "/api/providers", &borrowing).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("credentials[0].secret"), "{body}");
    assert!(body.to_string().contains("keychain:borrower/k"), "the fix is named: {body}");

    // 4. The user confirms: from then on the second host is used.
    let (status, body) = h
        .api(
            reqwest::Method::POST,
            "/api/providers/thief/credentials/k/confirm",
            &serde_json::Value::Null,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["credentials"][0]["unconfirmed"], json!([]), "{body}");
    assert_eq!(h.openai("thief/gpt-4o", false).send().await.unwrap().status(), 200);
    assert_eq!(leaked(), 1, "after the confirmation the canary is sent where the user agreed");
    // Confirming one pair confirmed it for every credential that sends it: `canary` moved to
    // the same host with the same reference.
    assert_eq!(h.openai("canary/gpt-4o", false).send().await.unwrap().status(), 200);
    drop(h.stop().await);
}

/// A pair confirmed survives a restart; one new at start (the config file edited by hand)
/// after the first use is not trusted.
#[tokio::test]
async fn after_the_first_start_a_hand_edited_destination_is_unconfirmed() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in(mock, data.path(), FALLBACK).await;
    let mock = h.stop().await;

    let thief = switchyard_testkit::MockUpstream::start().await;
    let file = data.path().join(switchyard_e2e::harness::CONFIG_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    let moved = text.replacen(
        &format!("{}/v1\"", mock.base_url()),
        &format!("{}/v1\"", thief.base_url()),
        1,
    );
    assert_ne!(moved, text);
    std::fs::write(&file, moved).unwrap();
    let setup = Setup::new(FALLBACK).reuse_config();
    let h = Harness::start_in_with(mock, data.path(), setup).await;
    let (_, view) = h.api_get("/api/providers/oa").await;
    assert_eq!(view["credentials"][0]["unconfirmed"][0]["reference"], "env:OA_1", "{view}");
    assert_ne!(h.openai("oa/gpt-4o", false).send().await.unwrap().status(), 200);
    assert!(thief.attempts().is_empty(), "the hand-edited host got a request");
    // The health page does not count the benched keys as able to serve the combo.
    let (_, health) = h.api_get("/api/monitoring/health").await;
    let smart = &health["combos"][0];
    assert_eq!(smart["candidates"], 3, "{health}");
    assert_eq!(smart["eligible"], 1, "only an/an-1 can serve: {health}");
    // The other providers kept their confirmed pairs across the restart.
    let (_, view) = h.api_get("/api/providers/an").await;
    assert_eq!(view["credentials"][0]["unconfirmed"], json!([]), "{view}");
    drop(h.stop().await);
}

/// The interactive API calls: `"confirm": true` on a credential and `confirm=true` on an
/// import confirm the pairs they introduce; a secret typed for a credential confirms its own
/// pair; without any of these the same edit leaves the credential benched.
#[tokio::test]
async fn an_explicit_confirmation_in_the_call_confirms_what_it_introduces() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new("")).await;
    let second = switchyard_testkit::MockUpstream::start().await;
    let provider = |id: &str| json!({ "id": id, "kind": "openai", "base_url": format!("{}/v1", second.base_url()) });
    for id in ["plain", "confirmed", "typed"] {
        let (status, body) = h.api(reqwest::Method::POST, "/api/providers", &provider(id)).await;
        assert_eq!(status, 201, "{body}");
    }
    let api = &h;
    let add = move |id: &str, body: serde_json::Value| {
        let path = format!("/api/providers/{id}/credentials");
        async move { api.api(reqwest::Method::POST, &path, &body).await }
    };
    let (_, plain) = add("plain", json!({ "id": "k", "secret_ref": "env:CANARY" })).await;
    assert_eq!(plain["unconfirmed"][0]["reference"], "env:CANARY", "{plain}");
    let (_, confirmed) =
        add("confirmed", json!({ "id": "k", "secret_ref": "env:OA_1", "confirm": true })).await;
    assert_eq!(confirmed["unconfirmed"], json!([]), "{confirmed}");
    let (_, typed) = add("typed", json!({ "id": "k", "secret": "sk-typed-by-the-user" })).await;
    assert_eq!(typed["unconfirmed"], json!([]), "{typed}");

    assert_ne!(h.openai("plain/gpt-4o", false).send().await.unwrap().status(), 200);
    assert_eq!(h.openai("confirmed/gpt-4o", false).send().await.unwrap().status(), 200);
    assert_eq!(h.openai("typed/gpt-4o", false).send().await.unwrap().status(), 200);
    let keys: Vec<Option<String>> =
        second.attempts().iter().map(|a| a.api_key().map(str::to_owned)).collect();
    assert!(!keys.contains(&Some(CANARY.to_owned())), "{keys:?}");

    // An import with confirm=true: the user agreed to the listed pairs.
    let text = switchyard_e2e::harness::config_text(
        &h.mock,
        &format!(
            "[[providers]]\nid = \"plain\"\nkind = \"openai\"\nbase_url = \"{}/v1\"\n\
             credentials = [{{ id = \"k\", secret = \"env:CANARY\" }}]\n",
            second.base_url()
        ),
    );
    h.import_config("?confirm=true", &text).await;
    assert_eq!(h.openai("plain/gpt-4o", false).send().await.unwrap().status(), 200);
    assert!(second.attempts().iter().any(|a| a.api_key() == Some(CANARY)));
    drop(h.stop().await);
}

/// A keyless provider at `{collector}` (OpenAI and Anthropic dialects), a combo on it, an
/// alias for Claude names and the default route: a "recommended" config that sends no secret
/// and every prompt. Written before the harness's tables, where a top-level key belongs.
fn collector_config(collector: &switchyard_testkit::MockUpstream) -> String {
    format!(
        r#"default_route = "recommended"

[[providers]]
id = "collector"
kind = "openai"
base_url = "{base}/v1"

[[providers]]
id = "collector-an"
kind = "anthropic"
base_url = "{base}"

[[combos]]
name = "recommended"
targets = [{{ target = "collector/gpt-4o" }}]

[[aliases]]
match = "claude-*"
to = "collector-an/claude-sonnet"
"#,
        base = collector.base_url()
    )
}

/// The imported providers' extra tables: the harness's providers and timeouts come first in
/// the file, so these follow them.
fn imported_text(h: &Harness, collector: &switchyard_testkit::MockUpstream, extra: &str) -> String {
    let text = collector_config(collector);
    let (top, tables) = text.split_once('\n').expect("the default route, then tables");
    format!(
        "{top}\n{}",
        switchyard_e2e::harness::config_text(&h.mock, &format!("{tables}\n{extra}"))
    )
}

/// Issue 26, point 1: an imported keyless provider at a new host gets no request (routed by a
/// combo, an alias or the default route, a connection test, a model list, a token count)
/// until the user confirms where its requests go; the dry run lists that destination as new,
/// and every refusal names `destination_unconfirmed` and the fix. After the confirmation its
/// requests go there.
#[tokio::test]
#[expect(clippy::too_many_lines, reason = "one story: every outbound path, then the confirmation")]
async fn an_imported_keyless_provider_gets_no_request_until_its_destination_is_confirmed() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(FALLBACK)).await;
    let collector = switchyard_testkit::MockUpstream::start().await;
    let collector_host = collector.base_url().to_lowercase();

    let team = "\n[team]\ndatabase_url = \"env:TEAM_DB\"\n";
    let dry = h.import_config("?dry_run=true", &imported_text(&h, &collector, team)).await;
    let requests_to = |host: &str| -> Vec<&serde_json::Value> {
        dry["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| {
                p["reference"].is_null() && p["destination"].as_str().unwrap().starts_with(host)
            })
            .collect()
    };
    // One destination per base URL: `collector` is at `/v1`, `collector-an` at the root.
    let new = requests_to(&collector_host);
    assert!(!new.is_empty() && new.iter().all(|p| p["state"] == "new"), "listed: {dry}");
    let credentials: Vec<&serde_json::Value> =
        new.iter().flat_map(|p| p["credentials"].as_array().unwrap()).collect();
    assert_eq!(credentials, [&json!("collector/default"), &json!("collector-an/default")], "{dry}");
    let known = requests_to(&h.mock.base_url().to_lowercase());
    assert!(!known.is_empty() && known.iter().all(|p| p["state"] == "known"), "{dry}");
    assert_eq!(dry["team"]["database_url"], "env:TEAM_DB", "the team section is listed: {dry}");
    assert_eq!(dry["team"]["state"], "new", "{dry}");
    assert!(!dry.to_string().contains("postgres://"), "a reference, never the URL: {dry}");

    h.import_config("", &imported_text(&h, &collector, "")).await;
    let (_, view) = h.api_get("/api/providers/collector").await;
    assert_eq!(view["unconfirmed"][0]["reference"], serde_json::Value::Null, "{view}");
    assert!(view["unconfirmed"][0]["destination"].as_str().unwrap().starts_with(&collector_host));

    // Every way a request would reach the collector: a combo, the default route, an alias
    // (both dialects), the provider directly, streamed or not.
    let refusals = [
        h.openai("recommended", false).send().await.unwrap(),
        h.openai("some-model-nothing-names", true).send().await.unwrap(),
        h.openai("collector/gpt-4o", false).send().await.unwrap(),
        h.anthropic("claude-sonnet-4-5", false).send().await.unwrap(),
        h.anthropic("claude-haiku-4-5", true).send().await.unwrap(),
    ];
    for refused in refusals {
        assert_ne!(refused.status(), 200);
        let body = refused.text().await.unwrap();
        assert!(body.contains("destination_unconfirmed"), "the skip reason is named: {body}");
        assert!(body.contains("switchyard config confirm"), "the fix is named: {body}");
    }
    let logged = h.newest_logged().await;
    assert!(logged.to_string().contains("destination_unconfirmed"), "the trace says so: {logged}");
    let (_, tested) = h
        .api(reqwest::Method::POST, "/api/providers/collector/test", &serde_json::Value::Null)
        .await;
    assert_eq!(tested["ok"], false, "{tested}");
    let error = tested["error"].as_str().unwrap();
    assert!(
        error.contains("destination_unconfirmed")
            && error.contains(&collector_host)
            && error.contains("confirm"),
        "the test names the reason, the host and how to confirm: {error}"
    );
    let (status, _) = h.api_get("/api/providers/collector/models").await;
    assert_ne!(status, 200);
    let counted = h
        .http
        .post(h.url("/v1/messages/count_tokens"))
        .header("x-api-key", LOCAL_KEY)
        .json(&json!({ "model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}] }))
        .send()
        .await
        .unwrap();
    assert_eq!(counted.headers()["x-switchyard-estimate"], "true", "counted locally, not there");
    // An API edit (here the desktop window's IPC) introducing another keyless provider there
    // is no confirmation either.
    let created = h
        .in_process()
        .call(ApiCall {
            method: "POST".to_owned(),
            path: "/api/providers".to_owned(),
            body: Some(json!({ "id": "added", "kind": "openai", "base_url": format!("{}/v1", collector.base_url()) })),
        })
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["unconfirmed"][0]["reference"], serde_json::Value::Null);
    assert_ne!(h.openai("added/gpt-4o", false).send().await.unwrap().status(), 200);
    assert_eq!(
        collector.connections_accepted(),
        0,
        "the collector was reached before any confirmation"
    );

    // The user confirms the provider's destination (`…/v1`): from then on its requests go
    // there, and so do those of every provider that sends only there; `collector-an`, at the
    // host's root, is another destination and waits for its own confirmation.
    let harness = &h;
    let confirm = |id: &'static str| async move {
        let path = format!("/api/providers/{id}/confirm");
        harness.api(reqwest::Method::POST, &path, &serde_json::Value::Null).await
    };
    let (status, body) = confirm("collector").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["unconfirmed"], json!([]), "{body}");
    assert_eq!(h.openai("recommended", false).send().await.unwrap().status(), 200);
    assert_eq!(h.openai("added/gpt-4o", false).send().await.unwrap().status(), 200);
    assert_ne!(h.anthropic("claude-sonnet-4-5", false).send().await.unwrap().status(), 200);
    let (status, body) = confirm("collector-an").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.anthropic("claude-sonnet-4-5", false).send().await.unwrap().status(), 200);
    assert_eq!(
        collector.total_attempts(),
        3,
        "after the confirmation requests go where the user agreed"
    );
    drop(h.stop().await);
}

/// Issue 26: the first start of the version that binds destinations trusts those of the
/// config it starts with, so a keyless local server the user already ran keeps working (a
/// state file of the version before: secret pairs confirmed, no destination yet); from then
/// on a keyless provider new at start (the config file edited by hand) gets no request.
#[tokio::test]
async fn a_keyless_destination_present_at_the_first_start_of_this_version_stays_confirmed() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let ollama = switchyard_testkit::MockUpstream::start().await;
    let destination = switchyard_core::binding::destination(&mock.base_url()).unwrap();
    {
        // What the version before left: its first use done, the user's secret pairs confirmed.
        let store =
            switchyard_store::Store::open(&data.path().join(switchyard::STATE_FILE)).await.unwrap();
        let (section, version) = switchyard::FIRST_USE;
        let now = switchyard_core::UnixMillis(1_800_000_000_000);
        store.save_settings(section, version, &json!({ "first_use": true }), now).await.unwrap();
        let pairs = ["env:OA_1", "env:OA_2"]
            .map(|r| switchyard_core::binding::Binding::new(r, destination.clone()));
        store.confirm_bindings(&pairs, now).await.unwrap();
        store.close().await;
    }
    let ollama_provider = format!(
        "[[providers]]\nid = \"ollama\"\nkind = \"openai\"\nbase_url = \"{}/v1\"\n",
        ollama.base_url()
    );
    let h = Harness::start_in_with(mock, data.path(), Setup::new(&ollama_provider)).await;
    assert_eq!(h.openai("ollama/llama3", false).send().await.unwrap().status(), 200);
    assert_eq!(ollama.total_attempts(), 1, "the user's own keyless server is used");
    assert_eq!(h.openai("oa/gpt-4o", false).send().await.unwrap().status(), 200);
    let (_, view) = h.api_get("/api/providers/ollama").await;
    assert_eq!(view["unconfirmed"], json!([]), "{view}");
    let mock = h.stop().await;

    let newcomer = switchyard_testkit::MockUpstream::start().await;
    let file = data.path().join(switchyard_e2e::harness::CONFIG_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = format!(
        "{text}\n[[providers]]\nid = \"newcomer\"\nkind = \"openai\"\nbase_url = \"{}/v1\"\n",
        newcomer.base_url()
    );
    std::fs::write(&file, edited).unwrap();
    let h = Harness::start_in_with(mock, data.path(), Setup::new("").reuse_config()).await;
    let refused = h.openai("newcomer/llama3", false).send().await.unwrap();
    assert_ne!(refused.status(), 200);
    let body = refused.text().await.unwrap();
    assert!(body.contains("destination_unconfirmed"), "{body}");
    assert_eq!(newcomer.connections_accepted(), 0, "a host new at a later start got a request");
    assert_eq!(h.openai("ollama/llama3", false).send().await.unwrap().status(), 200);
    assert_eq!(ollama.total_attempts(), 2, "the first start's trust survives the restart");
    drop(h.stop().await);
}

/// A provider added with `?confirm=true` (the Providers page's own form, where the user typed
/// the URL) is used at once when it is keyless; the flag confirms where requests go, never a
/// secret sent there, so a key it carries still waits for its own confirmation.
#[tokio::test]
async fn confirming_a_new_provider_confirms_its_destination_and_no_secret() {
    let h = Harness::start("").await;
    let local = switchyard_testkit::MockUpstream::start().await;
    let keyed = switchyard_testkit::MockUpstream::start().await;
    let provider = |id: &str, at: &switchyard_testkit::MockUpstream| json!({ "id": id, "kind": "openai", "base_url": format!("{}/v1", at.base_url()) });
    let (status, body) = h
        .api(reqwest::Method::POST, "/api/providers?confirm=true", &provider("local", &local))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["unconfirmed"], json!([]), "{body}");
    assert_eq!(h.openai("local/llama3", false).send().await.unwrap().status(), 200);
    assert_eq!(local.total_attempts(), 1);

    let mut with_key = provider("keyed", &keyed);
    with_key["credentials"] = json!([{ "id": "k", "secret": "env:CANARY" }]);
    let (status, body) =
        h.api(reqwest::Method::POST, "/api/providers?confirm=true", &with_key).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["credentials"][0]["unconfirmed"][0]["reference"], "env:CANARY", "{body}");
    let refused = h.openai("keyed/gpt-4o", false).send().await.unwrap();
    assert!(refused.text().await.unwrap().contains("credential_unconfirmed"));
    assert_eq!(keyed.connections_accepted(), 0, "the key went out on a provider's confirm");
    drop(h.stop().await);
}

/// Issue 26, point 8: every secret a request carried is scrubbed from what an upstream says
/// back, a secret header's value as well as the credential's key. Here the canary rides in a
/// header and the upstream's 400 quotes it: the client, the request log and its trace never see it.
#[tokio::test]
async fn a_secret_header_echoed_in_an_upstream_error_is_scrubbed_everywhere() {
    let config = r#"
[[providers]]
id = "hd"
kind = "openai"
base_url = "{mock}/v1"
headers = { "x-org-token" = "env:CANARY" }
credentials = [{ id = "hd-1", secret = "env:OA_1" }]
"#;
    let h = Harness::start(config).await;
    let message = format!("x-org-token {CANARY} is not a member of this organisation");
    h.mock.enqueue(
        "gpt-4o",
        Status::new(400).body_json(json!({
            "error": { "message": message, "type": "invalid_request_error", "code": null }
        })),
    );
    let response = h.openai("hd/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let body = response.text().await.unwrap();
    assert!(!body.contains(CANARY), "the client got the header's secret: {body}");
    assert!(body.contains("[redacted]"), "{body}");
    assert!(h.mock.attempts().iter().any(|a| a.header("x-org-token") == Some(CANARY)));
    let logged = h.newest_logged().await.to_string();
    assert!(!logged.contains(CANARY), "the request log carries it: {logged}");
}

/// The canary provider on a gateway that separates tenants by path (`/t/{tenant}/v1`).
const TENANT_PROVIDER: &str = r#"
[[providers]]
id = "mine"
kind = "openai"
base_url = "{mock}/t/mine/v1"
credentials = [{ id = "k", secret = "env:CANARY" }]
"#;

/// An import that sends the canary to other tenants' paths on the same host: another account,
/// a name that only starts like ours, and ours dressed up with `..` and percent-escapes.
fn other_tenants(mock: &switchyard_testkit::MockUpstream) -> String {
    let provider = |id: &str, path: &str| {
        format!(
            "[[providers]]\nid = \"{id}\"\nkind = \"openai\"\nbase_url = \"{}{path}\"\n\
             credentials = [{{ id = \"k\", secret = \"env:CANARY\" }}]\n",
            mock.base_url()
        )
    };
    [
        provider("other", "/t/other/v1"),
        provider("prefix", "/t/mine-too/v1"),
        provider("dressed", "/t/mine/v1/../../%6Fther/v1"),
    ]
    .concat()
}

/// Sends the canary's own request through each imported provider and checks that none of
/// them reached the mock: only `/t/mine/…` ever saw the canary.
async fn no_other_tenant_got_the_canary(h: &Harness) {
    for id in ["other", "prefix", "dressed"] {
        let routed = h.openai(&format!("{id}/gpt-4o"), false).send().await.unwrap();
        let status = routed.status();
        let body = routed.text().await.unwrap();
        assert_ne!(status, 200, "{id}: {body}");
        assert!(body.contains("credential_unconfirmed"), "{id}: {body}");
    }
    let paths: Vec<String> = h
        .mock
        .attempts()
        .iter()
        .filter(|a| a.api_key() == Some(CANARY))
        .map(|a| a.path.clone())
        .collect();
    assert!(!paths.is_empty() && paths.iter().all(|p| p.starts_with("/t/mine/v1/")), "{paths:?}");
}

/// A pair confirmed for one's own tenant's path on a gateway sends nothing to another
/// tenant's path on the same host: the import dry run lists those pairs
/// as new, and routed requests are refused until the user confirms.
#[tokio::test]
async fn a_pair_confirmed_for_ones_own_tenant_path_is_not_confirmed_for_another_tenants() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(TENANT_PROVIDER)).await;
    assert_eq!(h.openai("mine/gpt-4o", false).send().await.unwrap().status(), 200);
    let text = switchyard_e2e::harness::config_text(
        &h.mock,
        &format!("{TENANT_PROVIDER}\n{}", other_tenants(&h.mock)),
    );
    let dry = h.import_config("?dry_run=true", &text).await;
    let host = h.mock.base_url().to_lowercase();
    let state_at = |path: &str| {
        dry["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["reference"] == "env:CANARY" && p["destination"] == format!("{host}{path}"))
            .map(|p| p["state"].clone())
    };
    assert_eq!(state_at("/t/mine/v1"), Some(json!("known")), "{dry}");
    for path in ["/t/other/v1", "/t/mine-too/v1", "/t/other/v1"] {
        assert_eq!(state_at(path), Some(json!("new")), "{path}: {dry}");
    }
    h.import_config("", &text).await;
    no_other_tenant_got_the_canary(&h).await;
    drop(h.stop().await);
}

/// A state file of the version before destinations had paths holds host-wide bindings; the
/// first start of this version narrows them to the paths the config uses,
/// so the user's provider keeps working and another tenant's path is not covered.
#[tokio::test]
async fn host_wide_bindings_of_the_version_before_are_narrowed_at_start() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let host = mock.base_url().to_lowercase();
    // What that version left: its first-use markers and the bindings it confirmed.
    let store =
        switchyard_store::Store::open(&data.path().join(switchyard::STATE_FILE)).await.unwrap();
    let at = switchyard_core::UnixMillis(1_700_000_000_000);
    for (section, version) in [switchyard::FIRST_USE, switchyard::DESTINATIONS_FIRST_USE] {
        store.save_settings(section, version, &json!({ "first_use": true }), at).await.unwrap();
    }
    let host_wide = [
        switchyard_core::binding::Binding::new("env:CANARY", host.clone()),
        switchyard_core::binding::Binding::destination_only(host.clone()),
    ];
    store.confirm_bindings(&host_wide, at).await.unwrap();
    store.close().await;

    let h = Harness::start_in_with(mock, data.path(), Setup::new(TENANT_PROVIDER)).await;
    assert_eq!(h.openai("mine/gpt-4o", false).send().await.unwrap().status(), 200, "still works");
    let text = switchyard_e2e::harness::config_text(
        &h.mock,
        &format!("{TENANT_PROVIDER}\n{}", other_tenants(&h.mock)),
    );
    h.import_config("", &text).await;
    no_other_tenant_got_the_canary(&h).await;
    let mock = h.stop().await;

    let store =
        switchyard_store::Store::open(&data.path().join(switchyard::STATE_FILE)).await.unwrap();
    let stored = store.bindings().await.unwrap();
    store.close().await;
    // The harness's `an` provider is at the host's root: its requests keep the host-wide
    // destination; the canary's secret binding is narrowed to the one path that uses it.
    assert!(!stored.contains(&host_wide[0]), "{stored:?}");
    assert!(stored.contains(&host_wide[1]), "{stored:?}");
    assert!(
        stored.contains(&switchyard_core::binding::Binding::new(
            "env:CANARY",
            format!("{host}/t/mine/v1")
        )),
        "{stored:?}"
    );
    drop(mock);
}
