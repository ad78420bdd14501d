//! The `switchyard-mock` binary: prints its URL, serves a script file.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::within;

#[tokio::test]
async fn the_binary_prints_its_url_and_serves_a_scripted_file() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
        "gpt-4o" = [{ status = { code = 429, headers = { retry-after = "1" } } }, { reply = { text = "after the wait" } }]
        "#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-mock"))
        .args(["--port", "0", "--script"])
        .arg(&script)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = within(lines.next_line()).await.unwrap().expect("a first line");
    let url = line.strip_prefix("listening on ").expect("the announced URL");
    assert!(url.starts_with("http://127.0.0.1:"));

    let client = crate::call::client();
    let body = serde_json::json!({ "model": "gpt-4o", "messages": [] });
    let endpoint = format!("{url}/v1/chat/completions");
    let first = client.post(&endpoint).json(&body).send().await.unwrap();
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "1");
    let second: serde_json::Value =
        client.post(&endpoint).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!(second["choices"][0]["message"]["content"], "after the wait");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn the_binary_writes_attempts_to_a_record_directory_and_answers_by_rules() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
        "claude" = { rules = [{ when = { last_user_contains = "Hi" }, then = { reply = { text = "ruled" } } }] }
        "#,
    )
    .unwrap();
    let records = dir.path().join("records");
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-mock"))
        .args(["--port", "0", "--script"])
        .arg(&script)
        .arg("--record-dir")
        .arg(&records)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = within(lines.next_line()).await.unwrap().expect("a first line");
    let url = line.strip_prefix("listening on ").expect("the announced URL");

    let body = serde_json::json!({ "model": "claude", "max_tokens": 8, "messages": [{ "role": "user", "content": "Hi" }] });
    let answer: serde_json::Value = crate::call::client()
        .post(format!("{url}/v1/messages?beta=true"))
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["content"][0]["text"], "ruled");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(records.join("000000.json")).unwrap()).unwrap();
    assert_eq!(record["query"], "beta=true");
    assert_eq!(record["body"], body);
    child.kill().await.unwrap();
}
