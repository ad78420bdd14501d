//! A process killed with SIGKILL inside the first migration's transaction, after the backup:
//! the backup and the original both open and hold every row.
//!
//! The test runs this same executable again as the process to kill (`KILL_CHILD` names the
//! file it migrates). The child says `paused` on stdout from inside the migration and waits
//! for a line on stdin that never comes; the parent kills it on reading that word. A pipe
//! handshake, not a sleep: the kill lands exactly there.

#[path = "common/rows.rs"]
mod rows;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use switchyard_store::{Store, backup_path, schema_version};

const CHILD: &str = "KILL_CHILD";

#[expect(clippy::print_stderr, reason = "a harness-less test says it passed")]
fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if let Some(path) = std::env::var_os(CHILD) {
        runtime.block_on(child(Path::new(&path)));
    } else {
        runtime.block_on(parent());
        eprintln!("migration_kill: killed inside the first migration, nothing lost: ok");
    }
}

async fn child(path: &Path) {
    let pause = Box::new(|| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "paused").unwrap();
        out.flush().unwrap();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap();
    });
    Store::open_pausing_in_migration(path, pause).await.unwrap();
    panic!("the child was to be killed inside the migration");
}

async fn parent() {
    let dir = tempfile::tempdir().unwrap();
    let path = rows::previous_release(dir.path());
    let before = rows::rows(&path).await;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut said).unwrap();
    assert_eq!(said.trim(), "paused", "the child stopped before the migration's pause");
    let backup = backup_path(&path, 10);
    assert!(backup.exists(), "the backup is made before the first migration runs");
    child.kill().unwrap(); // SIGKILL on unix
    let status = child.wait().unwrap();
    assert!(!status.success());

    assert_eq!(rows::rows(&backup).await, before, "the backup holds every row");
    assert_eq!(
        rows::rows(&path).await,
        before,
        "the original is as it was: the migration rolled back"
    );
    // And it migrates the next time.
    let store = Store::open(&path).await.unwrap();
    store.close().await;
    rows::assert_kept(&before, &path).await;
    let pool = rows::connect(&path).await;
    let applied: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(applied, schema_version());
    pool.close().await;
}
