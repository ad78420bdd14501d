//! One credential whose secret cannot be read keeps only itself out: the server starts, the
//! rest serves, the trace, the status and the doctor name it, and a `file:` secret created
//! afterwards is picked up without a restart.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard::status::Level;
use switchyard_e2e::harness::{Harness, Setup, WATCHDOG, openai_text, user_requests};

/// `or`'s key is a variable nobody set; `waiting` tries it first, then `oa`.
const EXTRA: &str = r#"
[[providers]]
id = "or"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "main", secret = "env:OPENROUTER_API_KEY" }]

[[combos]]
name = "waiting"
targets = [{ target = "or/gpt-4o" }, { target = "oa/gpt-4o" }]
"#;

const NOT_SET: &str = "environment variable OPENROUTER_API_KEY is not set (or not valid UTF-8)";

async fn or_secret(h: &Harness) -> Value {
    let (_, provider) = h.api_get("/api/providers/or").await;
    provider["credentials"][0]["secret"].clone()
}

#[tokio::test]
async fn a_missing_variable_benches_only_its_credential_until_a_file_secret_appears() {
    let h = Harness::start_with(Setup::new(EXTRA)).await;

    // The server started; the combo is served by the next target, the skip named in the trace.
    let response = h.openai("waiting", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(!openai_text(&body).is_empty());
    h.logged(1).await;
    let entry = h.newest_logged().await;
    assert_eq!(entry["served_by"], "oa/gpt-4o");
    let trace = entry["trace"].as_array().unwrap();
    assert!(
        trace.iter().any(|t| t["target"] == "or/gpt-4o"
            && t["credential"] == "main"
            && t["event"] == "skipped"
            && t["reason"] == "secret_unavailable"),
        "{trace:?}"
    );
    let attempts = h.mock.attempts();
    let keys: Vec<&str> = user_requests(&attempts).iter().filter_map(|a| a.api_key()).collect();
    assert_eq!(keys, ["oa-1"], "nothing went to `or`");

    // Asked for directly: the reason, and what to do.
    let response = h.openai("or/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let refused: Value = response.json().await.unwrap();
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("secret_unavailable"), "{message}");

    // The providers view, the status and the doctor name it with why.
    let secret = or_secret(&h).await;
    assert_eq!(secret["set"], false);
    assert_eq!(secret["unavailable"], NOT_SET);
    let status = h.status().await;
    assert_eq!(status.level, Level::Amber, "the combo still serves: {:?}", status.lines);
    let line = status.lines.iter().find(|l| l.starts_with("provider or ")).unwrap();
    assert!(line.contains(&format!("waiting for their secret (secret_unavailable, read again every few seconds): main ({NOT_SET})")), "{line}");
    let (_, doctor) = h.api_get("/api/doctor").await;
    let finding = doctor
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "secret_unavailable:or/main")
        .unwrap_or_else(|| panic!("{doctor}"));
    assert_eq!(finding["evidence"][0], format!("credential or/main: {NOT_SET}"));

    // The user points it at a file (applied live), which does not exist yet.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openrouter_key");
    let patch = json!({ "secret_ref": format!("file:{}", file.display()), "confirm": true });
    let (status, _) =
        h.api(reqwest::Method::PATCH, "/api/providers/or/credentials/main", &patch).await;
    assert_eq!(status, 200, "accepted although it cannot be read yet");
    let waiting = or_secret(&h).await;
    assert!(
        waiting["unavailable"].as_str().unwrap().ends_with("does not exist (yet)"),
        "{waiting}"
    );

    // Then creates it; it is picked up within a second or so, no restart.
    write_private(&file, "sk-or-from-file\n");
    tokio::time::timeout(WATCHDOG, async {
        while or_secret(&h).await["set"] != true {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the file is read once it exists");
    let response = h.openai("waiting", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let attempts = h.mock.attempts();
    let keys: Vec<&str> = user_requests(&attempts).iter().filter_map(|a| a.api_key()).collect();
    assert_eq!(keys.last(), Some(&"sk-or-from-file"), "{keys:?}");
    h.stop().await;
}

#[tokio::test]
async fn retry_now_reads_a_secret_at_once() {
    let h = Harness::start_with(Setup::new(EXTRA)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("key");
    let patch = json!({ "secret_ref": format!("file:{}", file.display()), "confirm": true });
    let (status, _) =
        h.api(reqwest::Method::PATCH, "/api/providers/or/credentials/main", &patch).await;
    assert_eq!(status, 200);
    write_private(&file, "sk-now");
    let (status, view) = h
        .api(reqwest::Method::POST, "/api/providers/or/credentials/main/retry", &Value::Null)
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["credentials"][0]["secret"]["set"], true, "{view}");
    let (status, _) = h
        .api(reqwest::Method::POST, "/api/providers/or/credentials/nope/retry", &Value::Null)
        .await;
    assert_eq!(status, 404);
    h.stop().await;
}

#[cfg(unix)]
fn write_private(path: &std::path::Path, text: &str) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}
