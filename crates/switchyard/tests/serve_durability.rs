//! The real `switchyard serve` binary and its state file under the failures RESILIENCE.md §6
//! promises to survive: `kill -9` in the middle of a burst of transitions and request-log
//! writes, then a state file that is read-only, on a read-only directory, on a full disk,
//! garbage or truncated. Killed, it restarts on an intact file holding everything that was
//! committed; degraded, it keeps serving from memory and says so on the health page and in its
//! log.
//!
//! "Committed" is what the write-behind design makes exact: the state file is `SQLite` in WAL
//! mode, and a reader in another connection sees a transaction only once it is committed, and
//! a committed transaction survives the process dying (`synchronous=NORMAL` only risks the last
//! ones on a power cut). So the test watches the file through a read-only connection while the
//! server runs, and everything it saw there before the kill must be there after it.
//!
//! The usage aggregates are written in the same transaction as the request-log
//! entries they sum, so after a `kill -9` mid-burst the file's aggregates, and what the
//! restarted server reports from them, equal its log entries summed.
//!
//! Mount tricks (a read-only directory, a full disk) run the server in a mount namespace of its
//! own (`unshare`), as root or, elsewhere, as root of a user namespace; a machine that allows
//! neither fails those tests with a message saying so.

#[path = "serving/serve.rs"]
#[expect(dead_code, reason = "the process wrapper is shared; this binary starts no faketime")]
mod serve;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::resilience::event::HealthRecords;
use switchyard_core::resilience::{BreakerState, CredentialStatus};
use switchyard_core::usage::ledger::Ledger;
use switchyard_core::usage::report::{Bucket, Filter, GroupBy, ReportSpec};
use switchyard_core::{Clock as _, SystemClock};
use switchyard_store::Store;
use switchyard_testkit::{Behavior, MockUpstream, Reply, Status, Tokens};

use self::serve::{LOCAL_KEY, Launcher, Serve, TOKEN, WATCHDOG, is_root};
/// Lockouts the server must have committed before each kill.
const LOCKS_PER_RUN: usize = 60;

/// The config: `oa` answers from the mock, `down` refuses connections (its breaker opens),
/// `rl` is rate-limited on every key (its credentials cool down).
fn config(mock: &MockUpstream) -> String {
    let base = mock.base_url();
    // Port 9 (discard) is privileged, so no test and no ephemeral port ever takes it: every
    // connection is refused. A port picked by binding port 0 and letting go is soon handed out
    // again as a client's source port, and a connection to it can even reach itself.
    let closed = 9;
    format!(
        r#"
[[providers]]
id = "oa"
kind = "openai"
base_url = "{base}/v1"
credentials = [{{ id = "k", secret = "env:SY_TEST_UPSTREAM_KEY" }}]

[[providers]]
id = "down"
kind = "openai"
base_url = "http://127.0.0.1:{closed}/v1"
credentials = [{{ id = "k", secret = "env:SY_TEST_UPSTREAM_KEY" }}]
# Opens at the first refusal. (With the default threshold of 5 the breaker was seen stuck at
# 1-3 failures under this test's lockout flood; see the report of issue 7.)
breaker = {{ failure_threshold = 1, degraded_threshold = 1 }}

[[providers]]
id = "rl"
kind = "openai"
base_url = "{base}/v1"
credentials = [
  {{ id = "k0", secret = "env:SY_TEST_UPSTREAM_KEY" }},
  {{ id = "k1", secret = "env:SY_TEST_UPSTREAM_KEY" }},
  {{ id = "k2", secret = "env:SY_TEST_UPSTREAM_KEY" }},
]

# A 429 cools the credential down instead of locking the model.
[settings.model_lockouts]
error_codes = [404]
"#
    )
}

/// Fails the test, saying why, when this machine cannot give the server a mount namespace.
fn require_mount_namespaces() {
    let mut probe = std::process::Command::new("unshare");
    if !is_root() {
        probe.args(["--user", "--map-root-user"]);
    }
    let probe = probe
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs \"$d\" && umount \"$d\" && rmdir \"$d\"")
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "this test needs a private mount namespace (`unshare --mount` as root, or \
             `unshare --user --map-root-user --mount` with unprivileged user namespaces) to make \
             a read-only directory or a full disk; it failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(error) => panic!("this test needs `unshare` (util-linux) on PATH: {error}"),
    }
}

/// What the test saw committed in the file while the server ran.
#[derive(Debug, Default)]
struct Seen {
    lockouts: BTreeSet<String>,
    open_breakers: BTreeSet<String>,
    cooling: BTreeSet<String>,
    requests: usize,
}

/// Reads the live state file through its own read-only connection.
async fn observe(path: &Path, seen: &mut Seen) {
    let store = Store::open_read_only(path).await.expect("a reader opens the live file");
    let now = SystemClock.now();
    let records = store.load_health().await.expect("a reader loads the live file");
    let requests = store.recent_requests(100_000).await.expect("a reader reads the request log");
    store.close().await;
    for (key, lockout) in &records.lockouts {
        if lockout.is_locked(now) {
            seen.lockouts.insert(key.to_string());
        }
    }
    for (provider, breaker) in &records.breakers {
        if breaker.state == BreakerState::Open {
            seen.open_breakers.insert(provider.to_string());
        }
    }
    for (key, credential) in &records.credentials {
        if credential.status == CredentialStatus::Cooling {
            seen.cooling.insert(format!("{}/{}", key.provider, key.credential));
        }
    }
    seen.requests = requests.len();
}

/// Drives a burst of transitions: every request locks a model of its own (404 with an hour's
/// `Retry-After`, clamped to the lockout maximum), and between them the `down` breaker fails,
/// `rl` credentials cool down and plain successes fill the request log. Runs until the server
/// stops answering.
fn burst(server: &Serve, mock: &Arc<MockUpstream>, run: usize) -> Vec<tokio::task::JoinHandle<()>> {
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    (0..4)
        .map(|worker| {
            let http = server.http.clone();
            let url = server.url("/v1/chat/completions");
            let counter = Arc::clone(&counter);
            let mock = Arc::clone(mock);
            tokio::spawn(async move {
                loop {
                    let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let model = match (worker + i) % 4 {
                        0 | 1 => {
                            let model = format!("r{run}-lock-{i}");
                            mock.set_default(
                                &model,
                                Status::new(404).retry_after(Duration::from_secs(3600)),
                            );
                            format!("oa/{model}")
                        }
                        2 => ["down/m", "rl/m"][i % 2].to_owned(),
                        _ => "oa/ok".to_owned(),
                    };
                    let body =
                        json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
                    let sent = http.post(&url).bearer_auth(LOCAL_KEY).json(&body).send().await;
                    if sent.is_err() {
                        return;
                    }
                }
            })
        })
        .collect()
}

#[tokio::test]
async fn kill_9_mid_burst_keeps_every_committed_transition_and_request_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config_file = dir.path().join("switchyard.toml");
    let state = data.join(switchyard::STATE_FILE);
    let mock = Arc::new(MockUpstream::start().await);
    mock.set_default("m", Status::new(429).retry_after(Duration::from_secs(3600)));
    std::fs::write(&config_file, config(&mock)).unwrap();

    let mut seen = Seen::default();
    for run in 0..3 {
        let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
        let (health, _) = server.health().await;
        assert_eq!(health["persistence"]["durable"], true, "run {run}: {health}");
        let workers = burst(&server, &mock, run);
        let before = seen.lockouts.len();
        // Every layer and the request log must have something committed before the kill.
        let enough = |seen: &Seen| {
            seen.lockouts.len() >= before + LOCKS_PER_RUN
                && seen.open_breakers.contains("down")
                && !seen.cooling.is_empty()
                && seen.requests > 0
        };
        let watched = tokio::time::timeout(WATCHDOG, async {
            while !enough(&seen) {
                observe(&state, &mut seen).await;
            }
        })
        .await;
        if watched.is_err() {
            let (health, _) = server.health().await;
            let down = server.answer("down/m").await.unwrap();
            let down = (down.status(), down.text().await.unwrap());
            panic!(
                "run {run}: not enough committed after {WATCHDOG:?}: {} lockouts, open breakers \
                 {:?}, cooling {:?}, {} requests; the server has breakers {} credentials {}; \
                 down/m now: {down:?}",
                seen.lockouts.len(),
                seen.open_breakers,
                seen.cooling,
                seen.requests,
                health["breakers"],
                health["credentials"]
            );
        }
        // The last look, then the kill with the burst still going: whatever the look found is
        // the committed state the restart must bring back.
        observe(&state, &mut seen).await;
        server.kill_9().await;
        for worker in workers {
            worker.await.unwrap();
        }

        check_file(&state, &seen).await;
        let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
        let (health, snapshot) = server.health().await;
        assert_eq!(health["persistence"]["durable"], true, "run {run}: {health}");
        let locked: BTreeSet<String> =
            snapshot.lockouts.iter().map(|l| l.key.to_string()).collect();
        let lost: Vec<_> = seen.lockouts.difference(&locked).collect();
        assert!(lost.is_empty(), "run {run}: committed lockouts lost by the kill: {lost:?}");
        for provider in &seen.open_breakers {
            let breaker = snapshot.breakers.iter().find(|b| b.provider.as_str() == provider);
            assert!(
                breaker.is_some_and(|b| b.state == BreakerState::Open),
                "run {run}: breaker {provider} was open in the file, now {breaker:?}"
            );
        }
        for credential in &seen.cooling {
            let view = snapshot
                .credentials
                .iter()
                .find(|c| format!("{}/{}", c.key.provider, c.key.credential) == *credential);
            assert!(
                view.is_some_and(|c| c.status == CredentialStatus::Cooling),
                "run {run}: {credential} was cooling in the file, now {view:?}"
            );
        }
        // Restored state is enforced, not just shown: a committed lockout still refuses.
        let first = seen.lockouts.iter().next().unwrap().clone();
        let model = first.split('@').next().unwrap();
        assert_eq!(server.ask(model).await, Some(503), "{model} is locked after the restart");
        server.stop().await;
    }
}

/// The file after a kill: intact, every row a state the registry can be in, holding everything
/// seen committed before the kill, and its request log at least as long as it was seen.
async fn check_file(path: &Path, seen: &Seen) {
    let store = Store::open(path).await.expect("the file opens after a kill");
    store.integrity_check().await.expect("PRAGMA integrity_check is ok");
    let records = store.load_health().await.expect("the health tables load");
    let requests = store.recent_requests(100_000).await.expect("the request log loads");
    store.close().await;
    assert_consistent(&records);
    let now = SystemClock.now();
    let stored: BTreeSet<String> = records
        .lockouts
        .iter()
        .filter(|(_, l)| l.is_locked(now))
        .map(|(key, _)| key.to_string())
        .collect();
    let lost: Vec<_> = seen.lockouts.difference(&stored).collect();
    assert!(lost.is_empty(), "committed lockouts missing from the file: {lost:?}");
    assert!(
        requests.len() >= seen.requests,
        "the request log shrank from {} to {} rows",
        seen.requests,
        requests.len()
    );
}

/// Every row is a state the registry can be in, not half of one.
fn assert_consistent(records: &HealthRecords) {
    for (provider, b) in &records.breakers {
        assert_eq!(b.state == BreakerState::Open, b.open_until.is_some(), "{provider}: {b:?}");
    }
    for (key, c) in &records.credentials {
        let timed =
            matches!(c.status, CredentialStatus::Cooling | CredentialStatus::QuotaExhausted);
        assert_eq!(timed, c.cooling_until.is_some(), "{key:?}: {c:?}");
    }
    for (key, l) in &records.lockouts {
        assert!(!l.is_pristine(), "{key}: pristine row {l:?}");
        assert!(
            l.locked_until.is_none() || l.reason.is_some(),
            "{key}: locked without a reason {l:?}"
        );
    }
}

/// A data directory with a state file holding a lockout of `oa/gone`, written by a server that
/// was stopped cleanly; returns the config file.
async fn seeded(dir: &Path, data: &Path, mock: &MockUpstream) -> PathBuf {
    let config_file = dir.join("switchyard.toml");
    std::fs::write(&config_file, config(mock)).unwrap();
    mock.set_default("gone", Status::new(404).retry_after(Duration::from_secs(3600)));
    let server = Serve::start(data, &config_file, &Launcher::Plain, &[]).await;
    assert_eq!(server.ask("oa/gone").await, Some(503), "the only target is locked");
    assert_eq!(mock.attempt_count("gone"), 1);
    server.stop().await;
    config_file
}

/// A degraded server: serving, not durable, saying why on the health page (`reason` contains
/// `why`) and in its log.
async fn assert_memory_only(server: &Serve, mock: &MockUpstream, why: &str) {
    let (health, _) = server.health().await;
    assert_eq!(health["persistence"]["durable"], false, "{health}");
    let reason = health["persistence"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(why), "the health page says {reason:?}, not {why:?}");
    assert!(server.logged("memory only"), "no warning in the log:\n{}", server.log_text());
    assert_eq!(server.ask("oa/ok").await, Some(200), "requests flow in memory-only mode");
    // Transitions still happen, in memory: the 404 locks the model, the next ask is refused
    // without reaching the upstream.
    mock.set_default("fresh-lock", Status::new(404).retry_after(Duration::from_secs(3600)));
    assert_eq!(server.ask("oa/fresh-lock").await, Some(503));
    assert_eq!(server.ask("oa/fresh-lock").await, Some(503));
    assert_eq!(mock.attempt_count("fresh-lock"), 1, "locked in memory");
}

#[tokio::test]
async fn a_read_only_state_file_restores_its_state_and_serves_from_memory() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mock = MockUpstream::start().await;
    let config_file = seeded(dir.path(), &data, &mock).await;
    let state = data.join(switchyard::STATE_FILE);
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o400)).unwrap();
    let bytes = std::fs::read(&state).unwrap();

    let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
    assert_memory_only(&server, &mock, "read-only").await;
    assert_eq!(server.ask("oa/gone").await, Some(503));
    assert_eq!(mock.attempt_count("gone"), 1, "the file's lockout was restored");
    server.stop().await;
    assert!(std::fs::read(&state).unwrap() == bytes, "the read-only file changed");
}

#[tokio::test]
async fn a_state_file_on_a_read_only_directory_serves_from_memory() {
    require_mount_namespaces();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mock = MockUpstream::start().await;
    let config_file = seeded(dir.path(), &data, &mock).await;
    let state = data.join(switchyard::STATE_FILE);
    let bytes = std::fs::read(&state).unwrap();

    // The file keeps its write permission; the file system under it refuses writes.
    let d = data.display();
    let script = format!("mount --bind '{d}' '{d}'\nmount -o remount,bind,ro '{d}'");
    let server = Serve::start(&data, &config_file, &Launcher::Isolated(script), &[]).await;
    assert_memory_only(&server, &mock, "state file").await;
    server.stop().await;
    assert!(std::fs::read(&state).unwrap() == bytes, "the file on a read-only mount changed");
}

#[tokio::test]
async fn a_disk_that_fills_up_while_serving_turns_persistence_off_loudly_and_requests_flow() {
    require_mount_namespaces();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mock = MockUpstream::start().await;
    let config_file = dir.path().join("switchyard.toml");
    std::fs::write(&config_file, config(&mock)).unwrap();
    let d = data.display();
    let script = format!("mount -t tmpfs -o size=4m,mode=0700 tmpfs '{d}'");
    let server = Serve::start(&data, &config_file, &Launcher::Isolated(script), &[]).await;
    let (health, _) = server.health().await;
    assert_eq!(health["persistence"]["durable"], true, "{health}");

    // Fill the server's disk from outside, through its view of the file system.
    let inside = PathBuf::from(format!("/proc/{}/root{}", server.pid(), data.display()));
    fill(&inside.join("filler"));

    // Lock one model after another (each a new row) until a write hits the full disk and the
    // server says so in its log; from then on the health page must say so too.
    let mut asked = 0;
    while !server.logged("memory only") {
        assert!(asked < 2_000, "no write failed after {asked} transitions on a full disk");
        let model = format!("full-{asked}");
        mock.set_default(&model, Status::new(404).retry_after(Duration::from_secs(3600)));
        assert_eq!(server.ask(&format!("oa/{model}")).await, Some(503), "locks {model}");
        assert_eq!(server.ask("oa/ok").await, Some(200), "requests flow on a full disk");
        asked += 1;
    }
    // The log line is written just before the status changes: allow the writer a moment.
    let mut health = Value::Null;
    for _ in 0..50 {
        health = server.health().await.0;
        if health["persistence"]["durable"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        health["persistence"]["durable"], false,
        "the log says persistence is off, the health page still says durable: {health}"
    );
    assert_memory_only(&server, &mock, "full").await;
    server.stop().await;
}

/// Writes `file` until the disk under it is full.
fn fill(file: &Path) {
    use std::io::Write as _;
    let mut out = std::fs::File::create(file).expect("create the filler inside the namespace");
    let block = vec![0xAB_u8; 64 * 1024];
    loop {
        match out.write_all(&block).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    // Whatever is left below one block.
    while out.write_all(&[0]).is_ok() {}
}

#[tokio::test]
async fn a_garbage_state_file_is_left_alone_and_requests_are_served_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let state = data.join(switchyard::STATE_FILE);
    let mut x = 0x2545_F491_4F6C_DD1D_u64;
    let garbage: Vec<u8> = (0..4096)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect();
    std::fs::write(&state, &garbage).unwrap();
    let mock = MockUpstream::start().await;
    let config_file = dir.path().join("switchyard.toml");
    std::fs::write(&config_file, config(&mock)).unwrap();

    let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
    assert_memory_only(&server, &mock, "not a database").await;
    server.stop().await;
    assert!(std::fs::read(&state).unwrap() == garbage, "the corrupt file changed");
}

#[tokio::test]
async fn a_truncated_state_file_serves_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mock = MockUpstream::start().await;
    let config_file = seeded(dir.path(), &data, &mock).await;
    let state = data.join(switchyard::STATE_FILE);
    // Page one (the schema) survives, the tables' pages do not.
    let bytes = std::fs::read(&state).unwrap();
    assert!(bytes.len() > 8192, "{} bytes", bytes.len());
    let truncated = &bytes[..4096 + 1000];
    std::fs::write(&state, truncated).unwrap();
    for stale in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", state.display()));
    }

    let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
    assert_memory_only(&server, &mock, "state file").await;
    server.stop().await;
}

/// Combos that cost something: `paid` serves at once, `rescued` after its first target's
/// model is gone (a 404, then a lockout that skips it).
const PRICED_COMBOS: &str = r#"
[[combos]]
name = "paid"
targets = [{ target = "oa/priced", price = { input_per_mtok = 2.5, output_per_mtok = 10.0, cache_read_per_mtok = 1.25 } }]

[[combos]]
name = "rescued"
targets = [
  { target = "oa/retired" },
  { target = "oa/priced-too", price = { input_per_mtok = 3.0, output_per_mtok = 15.0 } },
]
"#;

/// Requests of every kind until the server stops answering: priced answers streamed and not,
/// fallbacks, and errors (`down` refuses connections).
fn usage_burst(server: &Serve) -> Vec<tokio::task::JoinHandle<()>> {
    (0..4)
        .map(|worker| {
            let http = server.http.clone();
            let url = server.url("/v1/chat/completions");
            tokio::spawn(async move {
                for i in 0usize.. {
                    let (model, stream) = match (worker + i) % 5 {
                        0 => ("paid", false),
                        1 => ("paid", true),
                        2 => ("rescued", false),
                        3 => ("rescued", true),
                        _ => ("down/m", false),
                    };
                    let body = json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
                    let Ok(response) = http.post(&url).bearer_auth(LOCAL_KEY).json(&body).send().await
                    else {
                        return;
                    };
                    if response.bytes().await.is_err() {
                        return;
                    }
                }
            })
        })
        .collect()
}

/// The request log in the file, and its entries summed as the aggregates would sum them.
async fn log_and_sums(store: &Store) -> (usize, Ledger) {
    let logged = store.recent_requests(100_000).await.expect("the request log loads");
    let mut sums = Ledger::default();
    for record in &logged {
        sums.add(&record.usage_entry());
    }
    (logged.len(), sums)
}

/// Every row of `ledger` as text, sorted: two ledgers are equal when these are.
fn rows(ledger: &Ledger) -> Vec<String> {
    let mut rows: Vec<String> =
        ledger.rows().map(|r| format!("{} {:?} {:?}", r.hour, r.labels, r.totals)).collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn kill_9_mid_burst_leaves_usage_aggregates_equal_to_the_logged_requests_summed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config_file = dir.path().join("switchyard.toml");
    let state = data.join(switchyard::STATE_FILE);
    let mock = MockUpstream::start().await;
    let usage =
        Tokens { input: 1_000, cache_read: 300, cache_write: 0, output: 120, reasoning: 40 };
    for model in ["priced", "priced-too"] {
        mock.set_default(model, Behavior::Reply(Reply { usage: Some(usage), ..Reply::default() }));
    }
    mock.set_default("retired", Status::new(404));
    std::fs::write(&config_file, format!("{}{PRICED_COMBOS}", config(&mock))).unwrap();

    let mut committed = 0;
    for run in 0..2 {
        let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
        let workers = usage_burst(&server);
        // Enough of this run committed (the log is written in batches, every half second at
        // most), then the kill with the burst still going.
        let watched = tokio::time::timeout(WATCHDOG, async {
            loop {
                let store =
                    Store::open_read_only(&state).await.expect("a reader opens the live file");
                let (logged, _) = log_and_sums(&store).await;
                store.close().await;
                if logged >= committed + 150 {
                    return logged;
                }
            }
        })
        .await;
        let Ok(logged) = watched else {
            panic!(
                "run {run}: not 150 more requests committed in {WATCHDOG:?}:\n{}",
                server.log_text()
            )
        };
        server.kill_9().await;
        for worker in workers {
            worker.await.unwrap();
        }

        let store = Store::open(&state).await.expect("the file opens after a kill");
        store.integrity_check().await.expect("PRAGMA integrity_check is ok");
        let (after, sums) = log_and_sums(&store).await;
        let aggregates = store.usage(0).await.expect("the aggregates load");
        store.close().await;
        assert!(after >= logged, "run {run}: the log shrank from {logged} to {after}");
        assert_eq!(rows(&aggregates), rows(&sums), "run {run}: aggregates != the log summed");
        let total: u64 = aggregates.rows().map(|r| r.totals.requests).sum();
        assert_eq!(total, after as u64, "run {run}");
        assert!(aggregates.rows().any(|r| r.totals.fallbacks > 0 && r.totals.ttft.count() > 0));
        assert!(aggregates.rows().any(|r| r.totals.errors > 0));
        committed = after;
    }

    // The restarted server reports, from memory, what the log sums to: the same report,
    // bucket by bucket and series by series.
    let store = Store::open(&state).await.unwrap();
    let (_, sums) = log_and_sums(&store).await;
    store.close().await;
    let hours: Vec<u64> = sums.rows().map(|r| r.hour).collect();
    let (first, last) = (*hours.iter().min().unwrap(), *hours.iter().max().unwrap());
    let spec = ReportSpec {
        from: Ledger::hour_start(first),
        to: Ledger::hour_start(last + 1),
        bucket: Bucket::Hour,
        group_by: Some(GroupBy::Model),
        filter: Filter::default(),
    };
    let expected = serde_json::to_value(sums.report(&spec)).unwrap();
    let server = Serve::start(&data, &config_file, &Launcher::Plain, &[]).await;
    let query = format!(
        "/api/usage?bucket=hour&group_by=model&from={}&to={}",
        switchyard_core::calendar::rfc3339(spec.from),
        switchyard_core::calendar::rfc3339(spec.to)
    );
    let response = server.http.get(server.url(&query)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let reported: Value = response.json().await.unwrap();
    assert_eq!(reported, expected, "the restarted server's report is the log summed");
    assert!(reported["total"]["requests"].as_u64().unwrap() >= 300);
    server.stop().await;
}
