//! Issue 32: providers and health from the CLI, against a real `switchyard serve` on an empty
//! data directory (no `--config`) and the testkit's mock upstream. `providers add` goes through
//! the running server's API, so the next request routes to the new provider without a restart;
//! `status` exits non-zero while the mock fails (the provider's breaker opens) and zero once it
//! healed (a request through the half-open breaker closed it). Nothing here sleeps: every wait
//! polls with a deadline.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use switchyard_testkit::{MockUpstream, Status};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const UPSTREAM_KEY: &str = "sk-or-cli-test-0123456789";
const LOCAL_KEY: &str = "sy-cli-providers-local-key";
const DEADLINE: Duration = Duration::from_secs(30);

fn cli(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command
        .arg("--data-dir")
        .arg(data)
        .env("SWITCHYARD_LOG", "warn")
        .env("OPENROUTER_API_KEY", UPSTREAM_KEY)
        .env_remove("SWITCHYARD_MANAGEMENT_TOKEN")
        .env_remove("SWITCHYARD_CONFIG")
        .kill_on_drop(true);
    command
}

/// The last line `serve` prints at start: the web UI's address with the sign-in link, or, in a
/// build without the UI (a fresh clone where `ui/dist` was not built yet), how to get it.
fn is_last_start_line(line: &str) -> bool {
    line.starts_with("web UI at http://127.0.0.1:") || line.starts_with("this build has no web UI")
}

/// `switchyard serve` on `data` and port 0; resolves once it printed the last of its start
/// lines, with the port. Where the build has the UI, that line carries a sign-in link.
pub(super) async fn serve(data: &Path) -> (Child, u16) {
    let mut child = cli(data)
        .args(["serve", "--port", "0"])
        .env("SWITCHYARD_API_KEY", LOCAL_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start switchyard serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut port = None;
    let mut first_run = false;
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("listening on http://127.0.0.1:") {
                port = rest.strip_suffix("/v1").and_then(|p| p.parse::<u16>().ok());
            }
            first_run |=
                line.starts_with("no provider yet: ") && line.contains("switchyard providers add");
            if is_last_start_line(&line) {
                return line;
            }
        }
        panic!("serve stopped before it printed its start lines");
    };
    let last = tokio::time::timeout(DEADLINE, read).await.expect("serve printed its start lines");
    assert!(first_run, "an empty data directory says how to add a provider");
    let port = port.expect("the listening line came first");
    if let Some(at) = last.find("/#code=") {
        let link = &last[last[..at].rfind("http://").expect("the link is a URL")..];
        assert!(link.starts_with(&format!("http://127.0.0.1:{port}/#code=sy-code-")), "{link}");
    }
    (child, port)
}

pub(super) async fn run(data: &Path, args: &[&str]) -> std::process::Output {
    cli(data).args(args).output().await.expect("run switchyard")
}

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn chat(http: &reqwest::Client, port: u16) -> reqwest::StatusCode {
    http.post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .json(&json!({ "model": "openrouter/gpt-ok", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .expect("the server answers")
        .status()
}

/// Polls `step` (which may act, then look) until it answers true, or fails after [`DEADLINE`].
async fn eventually<F, Fut>(what: &str, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let polled = async {
        while !step().await {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(DEADLINE, polled)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_add_routes_at_once_and_status_is_red_while_the_upstream_fails_and_green_after() {
    let mock = MockUpstream::builder().models(["gpt-ok"]).start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (mut server, port) = serve(&data).await;
    let http = reqwest::Client::new();

    let added = run(
        &data,
        &[
            "providers",
            "add",
            "openrouter",
            "--key",
            "env:OPENROUTER_API_KEY",
            "--base-url",
            &format!("{}/v1", mock.base_url()),
            "--model",
            "gpt-ok",
        ],
    )
    .await;
    assert!(added.status.success(), "{}", text(&added.stderr));
    let said = text(&added.stdout);
    assert!(said.contains("added provider openrouter (openrouter)"), "{said}");
    assert!(said.contains(&format!("the server on port {port} uses it now")), "{said}");
    let listed = text(&run(&data, &["providers", "list"]).await.stdout);
    assert!(listed.starts_with("openrouter\topenrouter\t"), "{listed}");
    assert!(
        listed.contains("main (env:OPENROUTER_API_KEY)") && !listed.contains(UPSTREAM_KEY),
        "{listed}"
    );

    // Routed at once, with the key from the server's environment.
    assert_eq!(chat(&http, port).await, reqwest::StatusCode::OK);
    assert_eq!(mock.attempts()[0].api_key(), Some(UPSTREAM_KEY));
    let green = run(&data, &["status"]).await;
    assert!(green.status.success(), "{}", text(&green.stdout));
    assert!(
        text(&green.stdout).starts_with(&format!("green: the server on port {port}")),
        "{}",
        text(&green.stdout)
    );

    // Breakers that open after two failures and try again after 200 ms, so the test is short.
    let token = std::fs::read_to_string(data.join("management-token")).unwrap();
    let patched = http
        .patch(format!("http://127.0.0.1:{port}/api/settings/breaker_profiles"))
        .bearer_auth(token.trim())
        .json(&json!({ "api_key": { "failure_threshold": 2, "reset_timeout_ms": 200 } }))
        .send()
        .await
        .unwrap();
    assert!(patched.status().is_success(), "{:?}", patched.text().await);

    mock.set_default("gpt-ok", Status::new(500));
    eventually("status to turn red while the upstream fails", || async {
        let _ = chat(&http, port).await;
        let status = run(&data, &["status"]).await;
        !status.status.success()
    })
    .await;
    let red = run(&data, &["status"]).await;
    let report = text(&red.stdout);
    assert_eq!(red.status.code(), Some(1), "{report}");
    assert!(report.starts_with("red: "), "{report}");
    assert!(
        report.contains("provider openrouter (openrouter)") && report.contains("breaker "),
        "{report}"
    );

    mock.clear_scripts();
    eventually("status to turn green once the upstream healed", || async {
        let _ = chat(&http, port).await;
        run(&data, &["status"]).await.status.success()
    })
    .await;
    assert_eq!(chat(&http, port).await, reqwest::StatusCode::OK);

    // Removed through the server too: the next request for it is refused there.
    let removed = run(&data, &["providers", "remove", "openrouter"]).await;
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    assert_ne!(chat(&http, port).await, reqwest::StatusCode::OK);

    server.start_kill().unwrap();
    server.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_server_the_cli_edits_the_stored_config_and_refuses_what_it_cannot_keep() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let added = run(
        &data,
        &[
            "providers",
            "add",
            "groq",
            "--key",
            "env:OPENROUTER_API_KEY",
            "--model",
            "llama-3.3-70b-versatile",
        ],
    )
    .await;
    assert!(added.status.success(), "{}", text(&added.stderr));
    assert!(text(&added.stdout).contains("saved in the data directory"), "{}", text(&added.stdout));
    let exported = text(&run(&data, &["config", "export"]).await.stdout);
    assert!(
        exported.contains("preset = \"groq\"") && exported.contains("env:OPENROUTER_API_KEY"),
        "{exported}"
    );
    assert!(!exported.contains(UPSTREAM_KEY), "{exported}");

    // The field and the fix, and nothing changed.
    let unknown = run(&data, &["providers", "add", "nosuch"]).await;
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("PRESET: preset: \"nosuch\" is not in the catalogue"),
        "{}",
        text(&unknown.stderr)
    );
    let inline = run(&data, &["providers", "add", "openai", "--key", "sk-inline"]).await;
    assert!(
        text(&inline.stderr).contains("--key: give where the key is"),
        "{}",
        text(&inline.stderr)
    );
    // A key that cannot be read yet is accepted, with a warning: only it waits.
    let unset =
        run(&data, &["providers", "add", "openai", "--key", "env:SWITCHYARD_CLI_TEST_UNSET"]).await;
    assert!(unset.status.success(), "{}", text(&unset.stderr));
    assert!(
        text(&unset.stdout).contains(
            "credential main cannot read its secret yet (environment variable \
             SWITCHYARD_CLI_TEST_UNSET is not set (or not valid UTF-8)): it serves once it can"
        ),
        "{}",
        text(&unset.stdout)
    );
    let removed = run(&data, &["providers", "remove", "openai"]).await;
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    let twice = run(&data, &["providers", "add", "groq"]).await;
    assert!(!twice.status.success());
    assert!(text(&twice.stderr).contains("--id: "), "{}", text(&twice.stderr));
    let listed = text(&run(&data, &["providers", "list"]).await.stdout);
    assert_eq!(listed.lines().count(), 1, "the refused ones left nothing behind: {listed}");

    // Read from the state file: nothing failed yet.
    let status = run(&data, &["status"]).await;
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert!(text(&status.stdout).starts_with("green: the state file"), "{}", text(&status.stdout));

    let removed = run(&data, &["providers", "remove", "groq"]).await;
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    let missing = run(&data, &["providers", "remove", "groq"]).await;
    assert!(!missing.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_a_config_file_refuses_cli_edits_saying_so_and_still_reports_status() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = dir.path().join("switchyard.toml");
    std::fs::write(&file, "").unwrap();
    let mut child = cli(&data)
        .args(["serve", "--port", "0", "--config"])
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let wait = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if is_last_start_line(&line) {
                return;
            }
        }
    };
    tokio::time::timeout(DEADLINE, wait).await.expect("serve started");
    let refused = run(&data, &["providers", "add", "groq"]).await;
    assert!(!refused.status.success());
    let said = text(&refused.stderr);
    assert!(said.contains("runs on --config") && said.contains("switchyard.toml"), "{said}");
    let status = run(&data, &["status"]).await;
    assert!(status.status.success(), "{}", text(&status.stdout));
    assert!(text(&status.stdout).contains("the server on port"), "{}", text(&status.stdout));
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

/// `keys create` and `keys revoke` go through the server running on the data
/// directory, as `providers add` does: the new key is accepted on the next request and the
/// revoked one refused on the next, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_created_and_revoked_with_the_cli_while_serve_runs_apply_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port) = serve(dir.path()).await;
    let http = reqwest::Client::new();
    let models = |key: &str| {
        let request = http.get(format!("http://127.0.0.1:{port}/v1/models")).bearer_auth(key);
        async move { request.send().await.expect("the server answers").status() }
    };
    let created = run(dir.path(), &["keys", "create", "--name", "editor"]).await;
    assert!(created.status.success(), "{}", text(&created.stderr));
    let key = text(&created.stdout).trim().to_owned();
    assert!(key.starts_with("sy-"), "the key, printed once: {key}");
    assert_eq!(models(&key).await, reqwest::StatusCode::OK, "accepted at once");
    let listed = run(dir.path(), &["keys", "list"]).await;
    let listed = text(&listed.stdout);
    assert!(listed.contains("\teditor\t") && listed.contains("\tactive"), "{listed}");
    assert!(!listed.contains(&key), "never the secret: {listed}");

    let revoked = run(dir.path(), &["keys", "revoke", "editor"]).await;
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    assert_eq!(models(&key).await, reqwest::StatusCode::UNAUTHORIZED, "refused at once");
    let again = run(dir.path(), &["keys", "revoke", "editor"]).await;
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("no active key with id or name \"editor\""));
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}
