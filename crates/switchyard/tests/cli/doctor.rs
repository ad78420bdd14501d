//! Issue 30, point 3: `switchyard doctor` against a real `switchyard serve` on an empty data
//! directory. A provider added through the API at a host never confirmed is a finding; the CLI
//! lists it (exit 1), says what applying it would change (`--dry-run`, nothing changed), and
//! applies it through the running server with the digest it just read; then nothing is found
//! (exit 0), there and from the state file once the server stopped.

use serde_json::json;
use switchyard_testkit::MockUpstream;

use super::providers::{run, serve, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_lists_a_destination_never_confirmed_exits_1_and_apply_confirms_it_through_the_running_server()
 {
    let elsewhere = MockUpstream::builder().models(["m"]).start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (mut server, port) = serve(&data).await;

    let healthy = run(&data, &["doctor"]).await;
    assert_eq!(healthy.status.code(), Some(0), "{}", text(&healthy.stderr));
    assert!(
        text(&healthy.stdout).starts_with(&format!("nothing found: the server on port {port}")),
        "{}",
        text(&healthy.stdout)
    );

    // Added without `confirm`: its requests would go to a host nobody confirmed.
    let token = std::fs::read_to_string(data.join("management-token")).unwrap();
    let http = reqwest::Client::new();
    let api = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let created = http
        .post(api("/api/providers"))
        .bearer_auth(token.trim())
        .json(&json!({ "id": "newp", "kind": "openai", "base_url": format!("{}/v1", elsewhere.base_url()), "models": ["m"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{:?}", created.text().await);

    let id = "destination_unconfirmed:newp";
    let listed = run(&data, &["doctor"]).await;
    let said = text(&listed.stdout);
    assert_eq!(listed.status.code(), Some(1), "findings exit 1: {said}");
    assert!(said.starts_with(&format!("1 finding: the server on port {port}")), "{said}");
    assert!(said.contains(&format!("\n{id}\n")), "{said}");
    assert!(said.contains("  seen: would send requests to http://127.0.0.1:"), "{said}");
    assert!(said.contains(&format!("switchyard doctor --apply {id}")), "{said}");

    let dry = run(&data, &["doctor", "--apply", id, "--dry-run"]).await;
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("dry run, nothing changed: would "),
        "{}",
        text(&dry.stdout)
    );
    assert_eq!(run(&data, &["doctor"]).await.status.code(), Some(1), "still there");

    let unknown = run(&data, &["doctor", "--apply", "stale_bench:nosuch/m@k"]).await;
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("no finding \"stale_bench:nosuch/m@k\" now"),
        "{}",
        text(&unknown.stderr)
    );
    assert!(text(&unknown.stderr).contains(id), "names what there is: {}", text(&unknown.stderr));

    // A confirmation shows what it would send where and asks; no answer, nothing applied.
    let asked = run(&data, &["doctor", "--apply", id]).await;
    assert!(asked.status.success(), "{}", text(&asked.stderr));
    let said = text(&asked.stdout);
    assert!(said.contains("confirming sends, from now on:\n  requests (prompts and what they carry) -> http://127.0.0.1:"), "{said}");
    assert!(
        said.contains("Send these requests and secrets to these hosts? [y/N] nothing applied"),
        "{said}"
    );
    assert_eq!(run(&data, &["doctor"]).await.status.code(), Some(1), "still there");

    let applied = run(&data, &["doctor", "--apply", id, "--yes"]).await;
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    assert!(text(&applied.stdout).contains("applied: "), "{}", text(&applied.stdout));
    let provider = http.get(api("/api/providers/newp")).bearer_auth(token.trim()).send().await;
    let provider: serde_json::Value = provider.unwrap().json().await.unwrap();
    assert_eq!(provider["unconfirmed"], json!([]), "confirmed in the running server: {provider}");

    let fixed = run(&data, &["doctor"]).await;
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed.stdout));
    assert!(text(&fixed.stdout).starts_with("nothing found: the server on port"));

    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let offline = run(&data, &["doctor"]).await;
    assert_eq!(offline.status.code(), Some(0), "{}", text(&offline.stderr));
    assert!(
        text(&offline.stdout).starts_with("nothing found: the state file"),
        "kept across the restart: {}",
        text(&offline.stdout)
    );
}
