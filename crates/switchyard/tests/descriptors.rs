//! The real `switchyard serve` under a low limit on open files, flooded with more idle
//! connections than the limit: the editor's next request is still answered at once, the
//! server keeps accepting, and no provider is blamed for what is the process's own shortage.
//!
//! Three limits, as machines have them: a soft limit of 256 (macOS) and of 1024 (a Linux
//! desktop) under a high hard limit, which the server raises at start; and 256 for both,
//! which it cannot raise, so the connection cap and the accept loop's handling of `EMFILE`
//! must keep a descriptor for the editor.

#![cfg(target_os = "linux")]

#[path = "serving/serve.rs"]
#[expect(dead_code, reason = "the process wrapper is shared; this binary needs only prlimit")]
mod serve;

use std::time::Duration;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use serde_json::{Value, json};
use switchyard_core::resilience::BreakerState;
use switchyard_testkit::MockUpstream;
use tokio::net::TcpStream;
use tokio::time::Instant;

use self::serve::{LOCAL_KEY, Launcher, Serve, TOKEN, WATCHDOG};

/// How fast the editor must be answered, flood or not.
const ANSWERED_WITHIN: Duration = Duration::from_secs(1);

/// Idle connections opened beyond the server's soft limit.
const BEYOND_THE_LIMIT: u64 = 300;

fn config(mock: &MockUpstream) -> String {
    let base = mock.base_url();
    format!(
        r#"
[[providers]]
id = "oa"
kind = "openai"
base_url = "{base}/v1"
credentials = [{{ id = "k", secret = "env:SY_TEST_UPSTREAM_KEY" }}]
"#
    )
}

/// Raises this test process's own soft limit to its hard limit, so the flood's sockets fit;
/// returns the hard limit.
fn raise_own_limit(needed: u64) -> u64 {
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    let hard = maximum.unwrap_or(1 << 20);
    if current.is_some_and(|soft| soft < hard) {
        setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum })
            .expect("a process may raise its soft limit to its hard limit");
    }
    assert!(hard >= needed + 64, "this test needs a hard limit on open files of {needed} or more");
    hard
}

/// One request as an editor makes it: a new connection (a client of its own), the local key.
async fn editor_request(server: &Serve) -> (u16, Duration) {
    let client = reqwest::Client::new();
    let body = json!({"model": "oa/m", "messages": [{"role": "user", "content": "hi"}]});
    let started = Instant::now();
    let sent = client
        .post(server.url("/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .json(&body)
        .timeout(WATCHDOG)
        .send()
        .await
        .expect("the editor's request is answered");
    (sent.status().as_u16(), started.elapsed())
}

async fn management(server: &Serve, path: &str) -> Value {
    let response = reqwest::Client::new()
        .get(server.url(path))
        .bearer_auth(TOKEN)
        .timeout(WATCHDOG)
        .send()
        .await
        .expect("the management API answers");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

/// Opens `count` connections to the server and leaves them idle; every one completes its
/// handshake (the kernel answers for the server until it accepts).
async fn flood(server: &Serve, count: u64) -> Vec<TcpStream> {
    let mut open = Vec::new();
    for _ in 0..count {
        let connected =
            tokio::time::timeout(WATCHDOG, TcpStream::connect(("127.0.0.1", server.port)))
                .await
                .expect("the listener's backlog keeps moving")
                .expect("a connection to the server");
        open.push(connected);
    }
    open
}

async fn the_editor_gets_in(soft: u64, hard: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockUpstream::start().await;
    let config_file = dir.path().join("config.toml");
    std::fs::write(&config_file, config(&mock)).unwrap();
    let data = dir.path().join("data");
    let server = Serve::start(&data, &config_file, &Launcher::Prlimit { soft, hard }, &[]).await;

    // The cap the server runs with, and what it was sized from.
    let cap = &management(&server, "/api/server").await["connections"];
    let open_files = cap["open_files"].as_u64().expect("the limit is known on Linux");
    let effective = cap["effective"].as_u64().unwrap();
    assert_eq!(open_files, hard, "the soft limit was raised to the hard one: {cap}");
    assert_eq!(effective, ((hard - 64) / 2).min(cap["max_connections"].as_u64().unwrap()));
    if soft == hard {
        assert!(
            server.logged(&format!("leaves room for {effective} connections")),
            "the start log names the cap and the fix:\n{}",
            server.log_text()
        );
    }

    let (status, _) = editor_request(&server).await;
    assert_eq!(status, 200, "before the flood:\n{}", server.log_text());
    let flooded = flood(&server, soft + BEYOND_THE_LIMIT).await;
    for round in 0..3 {
        let (status, took) = editor_request(&server).await;
        assert_eq!(
            status,
            200,
            "round {round} under a flood of {}:\n{}",
            flooded.len(),
            server.log_text()
        );
        assert!(
            took < ANSWERED_WITHIN,
            "round {round} took {took:?} under a flood of {}",
            flooded.len()
        );
    }
    // Still accepting: one more stranger, then the editor again.
    let more = flood(&server, 1).await;
    let (status, took) = editor_request(&server).await;
    assert_eq!(status, 200);
    assert!(took < ANSWERED_WITHIN, "after more connections: {took:?}");

    let (_, health) = server.health().await;
    let open: Vec<_> = health.breakers.iter().filter(|b| b.state != BreakerState::Closed).collect();
    assert!(open.is_empty(), "no provider is blamed for the flood: {open:?}");
    assert!(mock.total_attempts() >= 5, "every request reached the upstream");

    drop((flooded, more));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_gets_in_through_a_flood_beyond_a_soft_limit_of_256() {
    let hard = raise_own_limit(2_048).min(65_536);
    the_editor_gets_in(256, hard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_gets_in_through_a_flood_beyond_a_soft_limit_of_1024() {
    let hard = raise_own_limit(2_048).min(65_536);
    the_editor_gets_in(1_024, hard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_gets_in_through_a_flood_beyond_a_hard_limit_of_256() {
    raise_own_limit(2_048);
    the_editor_gets_in(256, 256).await;
}
