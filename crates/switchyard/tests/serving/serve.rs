//! A real `switchyard serve` process for end-to-end tests: started on port 0 with a config
//! file, found by the port its first line names, its log kept, stopped with SIGTERM or killed
//! with SIGKILL. Shared by the test binaries that run the binary itself (`serve_durability`,
//! `team`, `descriptors`).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::resilience::HealthSnapshot;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

pub(crate) const LOCAL_KEY: &str = "sy-serve-local-key";
pub(crate) const TOKEN: &str = "sy-serve-management-token";
/// The upstream key every test config names as `env:SY_TEST_UPSTREAM_KEY`.
pub(crate) const UPSTREAM_KEY: &str = "sk-upstream-test";
/// Every wait on the child is bounded by this; it is a watchdog, not a synchronisation.
pub(crate) const WATCHDOG: Duration = Duration::from_secs(60);

/// How the server process is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Launcher {
    Plain,
    /// In a mount namespace of its own, after running this shell script (which ends by
    /// `exec`ing the server, so the child's pid is the server's).
    Isolated(String),
    /// Under libfaketime (Debian's `faketime`) with this offset (`+5m`): its wall clock is off,
    /// its monotonic clock (timers, deadlines) is not.
    Faketime(String),
    /// With these soft and hard limits on open files (util-linux's `prlimit`, which `exec`s
    /// the server, so the child's pid is the server's).
    Prlimit {
        soft: u64,
        hard: u64,
    },
}

/// A running `switchyard serve`.
pub(crate) struct Serve {
    child: Child,
    pub(crate) port: u16,
    pub(crate) http: reqwest::Client,
    /// Every line the server logged so far.
    log: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// Starts the binary on `data` with `config_file` and `env` besides the keys every test
    /// uses.
    pub(crate) async fn start(
        data: &Path,
        config_file: &Path,
        launcher: &Launcher,
        env: &[(&str, &str)],
    ) -> Self {
        let binary = env!("CARGO_BIN_EXE_switchyard");
        let mut command = match launcher {
            Launcher::Plain => Command::new(binary),
            Launcher::Isolated(script) => {
                let mut c = Command::new("unshare");
                if !is_root() {
                    c.arg("--user").arg("--map-root-user");
                }
                c.args(["--mount", "--propagation", "private", "sh", "-ec"]);
                c.arg(format!("{script}\nexec \"$0\" \"$@\""));
                c.arg(binary);
                c
            }
            Launcher::Faketime(offset) => {
                // libfaketime preloaded into the binary itself (what the `faketime` command does
                // for a child of its own), so signals reach the server.
                let mut c = Command::new(binary);
                c.env("LD_PRELOAD", libfaketime())
                    .env("FAKETIME", offset)
                    .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
                c
            }
            Launcher::Prlimit { soft, hard } => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={soft}:{hard}")).arg("--").arg(binary);
                c
            }
        };
        command
            .arg("--data-dir")
            .arg(data)
            .args(["serve", "--port", "0", "--config"])
            .arg(config_file)
            .env("SWITCHYARD_API_KEY", LOCAL_KEY)
            .env("SWITCHYARD_MANAGEMENT_TOKEN", TOKEN)
            .env("SY_TEST_UPSTREAM_KEY", UPSTREAM_KEY)
            .env("SWITCHYARD_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("switchyard (or its launcher) starts");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let sink = Arc::clone(&log);
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(WATCHDOG, stdout.next_line()).await;
        let Ok(Ok(Some(line))) = line else {
            let status = child.try_wait();
            let log = log.lock().unwrap().join("\n");
            panic!("switchyard did not start ({status:?}):\n{log}");
        };
        let port = line
            .strip_prefix("listening on http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/v1"))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}: not on loopback?"));
        Self { child, port, http: reqwest::Client::new(), log }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("the server is running")
    }

    /// Asks for `model` (a `provider/model` target): the status, or `None` when the request
    /// could not be made (the server is gone).
    pub(crate) async fn ask(&self, model: &str) -> Option<u16> {
        Some(self.answer(model).await?.status().as_u16())
    }

    /// Asks for `model`: the whole answer, or `None` when the request could not be made.
    pub(crate) async fn answer(&self, model: &str) -> Option<reqwest::Response> {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        self.http
            .post(self.url("/v1/chat/completions"))
            .bearer_auth(LOCAL_KEY)
            .json(&body)
            .send()
            .await
            .ok()
    }

    /// The health page: the JSON, and the snapshot in it.
    pub(crate) async fn health(&self) -> (Value, HealthSnapshot) {
        let response = self
            .http
            .get(self.url("/api/monitoring/health"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("the health page answers");
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        let snapshot = serde_json::from_value(body.clone()).expect("the snapshot parses");
        (body, snapshot)
    }

    /// Whether the server logged a line containing `text`.
    pub(crate) fn logged(&self, text: &str) -> bool {
        self.log.lock().unwrap().iter().any(|line| line.contains(text))
    }

    pub(crate) fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub(crate) async fn kill_9(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    /// SIGTERM, and the clean exit that follows.
    pub(crate) async fn stop(mut self) {
        let pid = self.pid().to_string();
        let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let exit = tokio::time::timeout(WATCHDOG, self.child.wait()).await.expect("exits").unwrap();
        assert!(exit.success(), "{exit:?}:\n{}", self.log_text());
    }
}

/// libfaketime's multi-threaded build, wherever the distribution put it.
fn libfaketime() -> std::path::PathBuf {
    let found = std::fs::read_dir("/usr/lib").ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
            .find(|lib| lib.is_file())
    });
    found.expect("libfaketime is installed (Debian: faketime; scripts/setup installs it)")
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}
