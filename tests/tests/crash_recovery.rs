//! `kill -9` in the middle of a burst of transitions (RESILIENCE.md §6): the state file stays
//! intact and holds every round the process reported as committed, run after run.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use switchyard_core::resilience::event::HealthRecords;
use switchyard_core::resilience::{BreakerState, CredentialStatus, HealthRegistry, SkipReason};
use switchyard_core::{Clock, SystemClock};
use switchyard_e2e::lockout_key;
use switchyard_store::Store;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};

/// Rounds to wait for before the kill; the process is well into later rounds by then.
const ROUNDS: u64 = 200;
const RUNS: [&str; 3] = ["run0", "run1", "run2"];
/// A watchdog against a hung child, not a synchronisation: everything waits on its output.
const WATCHDOG: Duration = Duration::from_secs(120);

#[tokio::test]
async fn kill_9_mid_burst_loses_no_committed_round_and_leaves_an_intact_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut committed = Vec::new();
    for run in RUNS {
        let last = tokio::time::timeout(WATCHDOG, churn_until_killed(&path, run))
            .await
            .unwrap_or_else(|_| panic!("{run}: no `committed {ROUNDS}` within {WATCHDOG:?}"));
        committed.push((run, last));
        check(&path, &committed).await;
    }
}

/// Runs `health-churn` until it reports `ROUNDS` committed rounds, kills it with SIGKILL, and
/// returns the last round it reported.
async fn churn_until_killed(path: &Path, run: &str) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_health-churn"))
        .arg(path)
        .arg(run)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("health-churn starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut last = None;
    while last < Some(ROUNDS) {
        match next_round(&mut lines).await {
            Some(round) => last = Some(round),
            None => {
                panic!("{run}: health-churn stopped after round {last:?}: {:?}", child.wait().await)
            }
        }
    }
    child.kill().await.expect("SIGKILL");
    // Every line in the pipe was printed after its round was committed.
    while let Some(round) = next_round(&mut lines).await {
        last = Some(round);
    }
    last.unwrap()
}

async fn next_round(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<u64> {
    let line = lines.next_line().await.expect("reading stdout")?;
    let round = line
        .strip_prefix("committed ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output: {line:?}"));
    Some(round)
}

/// The file after a kill: intact, loadable, consistent, and holding every committed round of
/// every run so far.
async fn check(path: &Path, committed: &[(&str, u64)]) {
    let store = Store::open(path).await.expect("the file opens after a kill");
    store.integrity_check().await.expect("PRAGMA integrity_check is ok");
    let records = store.load_health().await.expect("the health tables load");
    store.close().await;
    assert_consistent(&records);

    let now = SystemClock.now();
    let registry = Arc::new(HealthRegistry::default());
    registry.restore(&records, now);
    for &(run, last) in committed {
        for round in 0..=last {
            let key = lockout_key(run, round);
            let stored = records.lockouts.iter().find(|(k, _)| *k == key);
            assert!(
                stored.is_some_and(|(_, l)| l.is_locked(now)),
                "{key}: committed but {stored:?} in the file"
            );
            assert!(
                matches!(registry.eligible(&key, now), Err(SkipReason::ModelLocked { .. })),
                "{key}: not locked after restore"
            );
        }
    }
}

/// Every row is a state the registry can be in, not half of one.
fn assert_consistent(records: &HealthRecords) {
    for (provider, b) in &records.breakers {
        assert_eq!(b.state == BreakerState::Open, b.open_until.is_some(), "{provider}: {b:?}");
        assert!(
            b.failures > 0 || b.reopens > 0 || b.state != BreakerState::Closed,
            "{provider}: pristine row {b:?}"
        );
    }
    for (key, c) in &records.credentials {
        let timed =
            matches!(c.status, CredentialStatus::Cooling | CredentialStatus::QuotaExhausted);
        assert_eq!(timed, c.cooling_until.is_some(), "{key:?}: {c:?}");
        assert!(
            c.status != CredentialStatus::Active || c.backoff_level > 0,
            "{key:?}: pristine row {c:?}"
        );
    }
    for (key, l) in &records.lockouts {
        assert!(!l.is_pristine(), "{key}: pristine row {l:?}");
        assert!(
            l.locked_until.is_none() || l.reason.is_some(),
            "{key}: locked without a reason {l:?}"
        );
    }
}
