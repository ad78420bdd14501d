//! `switchyard providers detect`: what answered on the ports it was given, each with
//! its models and the command that adds it (or the provider it already is); a port where
//! nothing listens and one that never answers said as such; exit code 1 when nothing answered.
//! The ports come from `--ports` or `SWITCHYARD_LOCAL_PORTS`, never the real default ports.

use std::path::Path;

use switchyard_testkit::{FakeModelServer, SilentPort};
use tokio::process::Command;

use super::providers::text;

fn cli(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command
        .arg("--data-dir")
        .arg(data)
        .env("SWITCHYARD_LOG", "warn")
        .env_remove("SWITCHYARD_LOCAL_PORTS")
        .env_remove("SWITCHYARD_MANAGEMENT_TOKEN")
        .env_remove("SWITCHYARD_CONFIG")
        .kill_on_drop(true);
    command
}

/// A loopback port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind a port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detect_lists_what_answered_with_its_models_and_how_to_add_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ollama = FakeModelServer::ollama(&["llama3.2:latest", "qwen2.5-coder:7b"]).await;
    let hung = SilentPort::start().await;
    let closed = closed_port();
    let ports = format!("ollama:{},lmstudio:{closed},vllm:{}", ollama.port, hung.port);

    let out = cli(&data).args(["providers", "detect", "--ports", &ports]).output().await.unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let url = format!("http://127.0.0.1:{}/v1", ollama.port);
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines[0].starts_with(&format!("found Ollama on port {} (", ollama.port)), "{said}");
    assert!(lines[0].ends_with(&format!("): {url}, 2 models")), "{said}");
    assert_eq!(
        lines[1..4],
        [
            "  llama3.2:latest",
            "  qwen2.5-coder:7b",
            &format!("  add it: switchyard providers add ollama --base-url {url}")
        ]
    );
    assert!(
        lines[4].starts_with(&format!("LM Studio, port {closed}: nothing listens (")),
        "{said}"
    );
    assert_eq!(lines[5], format!("vLLM, port {}: accepted, no answer within 300 ms", hung.port));
    assert!(
        lines[6]
            .starts_with(&format!("1 found on ports {}, {closed}, {} in ", ollama.port, hung.port)),
        "{said}"
    );
    assert_eq!(lines.len(), 7, "{said}");

    // Added as it says, it is named as the provider it is from then on.
    let add = cli(&data)
        .args(["providers", "add", "ollama", "--base-url", &url, "--model", "llama3.2:latest"])
        .output()
        .await
        .unwrap();
    assert!(add.status.success(), "{}", text(&add.stderr));
    let again = cli(&data)
        .args(["providers", "detect", "--ports", &format!("ollama:{}", ollama.port)])
        .output()
        .await
        .unwrap();
    let said = text(&again.stdout);
    assert!(said.contains("\n  configured as ollama\n"), "{said}");
    assert!(!said.contains("add it:"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detect_says_when_nothing_answered_and_exits_with_1() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (a, b) = (closed_port(), closed_port());
    let out = cli(&data)
        .args(["providers", "detect"])
        .env("SWITCHYARD_LOCAL_PORTS", format!("ollama:{a},llamacpp:{b}"))
        .output()
        .await
        .unwrap();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}{}", text(&out.stderr));
    assert!(said.starts_with(&format!("Ollama, port {a}: nothing listens (")), "{said}");
    assert!(said.contains(&format!("\nllama.cpp, port {b}: nothing listens (")), "{said}");
    let last = said.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("no model server answered on this machine (ports {a}, {b}; ")),
        "{said}"
    );

    // A variable that does not parse stops the command, naming it.
    let bad = cli(&data)
        .args(["providers", "detect"])
        .env("SWITCHYARD_LOCAL_PORTS", "ollama")
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("SWITCHYARD_LOCAL_PORTS: \"ollama\" is not SERVER:PORT"),
        "{}",
        text(&bad.stderr)
    );
    let bad =
        cli(&data).args(["providers", "detect", "--ports", "ollama:0"]).output().await.unwrap();
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("--ports: \"0\" is not a port"), "{}", text(&bad.stderr));
}
