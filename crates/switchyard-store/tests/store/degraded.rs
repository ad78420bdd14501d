//! A file that cannot be written: the app keeps routing in memory and says why.

use sqlx::{Connection, SqliteConnection};
use switchyard_core::resilience::SkipReason;
use switchyard_core::resilience::registry::ResetScope;
use switchyard_store::{Persistence, PersistenceStatus, WriteRetry};

use crate::fixture::{T0, attempt, connect_refused, key, registry, response, state_file};

fn reason(status: PersistenceStatus) -> String {
    match status {
        PersistenceStatus::MemoryOnly { reason } => reason,
        PersistenceStatus::Durable => panic!("expected memory-only, got durable"),
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_read_only_file_restores_its_state_but_is_never_written() {
    use std::os::unix::fs::PermissionsExt;

    let (_dir, path) = state_file();
    let writer = registry();
    let persistence = Persistence::start(&path, &writer, T0).await;
    for _ in 0..5 {
        attempt(&writer, &key("down", "k", "m"), &connect_refused(T0), T0);
    }
    attempt(&writer, &key("p", "k", "gone"), &response(404, None, T0), T0);
    persistence.shutdown().await;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
    let bytes = std::fs::read(&path).unwrap();

    let reader = registry();
    let persistence = Persistence::start(&path, &reader, T0).await;
    assert!(reason(persistence.status()).contains("read-only"));
    assert!(persistence.store().unwrap().is_read_only());
    assert!(matches!(
        reader.eligible(&key("down", "k", "m"), T0),
        Err(SkipReason::BreakerOpen { .. })
    ));
    assert!(matches!(
        reader.eligible(&key("p", "k", "gone"), T0),
        Err(SkipReason::ModelLocked { .. })
    ));

    // Routing goes on; nothing reaches the file, even for root, who could write it.
    attempt(&reader, &key("p", "k", "other"), &response(404, None, T0), T0);
    reader.reset(&ResetScope::All, T0);
    assert_eq!(reader.eligible(&key("down", "k", "m"), T0), Ok(()));
    persistence.flush().await;
    persistence.shutdown().await;
    assert!(std::fs::read(&path).unwrap() == bytes, "the read-only file changed");
}

#[tokio::test]
async fn a_corrupt_file_degrades_to_memory_only_and_is_left_untouched() {
    let (_dir, path) = state_file();
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    let garbage: Vec<u8> = (0..8_192)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect();
    std::fs::write(&path, &garbage).unwrap();

    let registry = registry();
    let persistence = Persistence::start(&path, &registry, T0).await;
    assert!(reason(persistence.status()).contains("not a database"));
    assert!(persistence.store().is_none());

    attempt(&registry, &key("p", "k", "gone"), &response(404, None, T0), T0);
    assert!(matches!(
        registry.eligible(&key("p", "k", "gone"), T0),
        Err(SkipReason::ModelLocked { .. })
    ));
    persistence.flush().await;
    persistence.shutdown().await;
    assert!(std::fs::read(&path).unwrap() == garbage, "the corrupt file changed");
}

/// A full disk cannot be made portably, so a trigger makes every lockout write fail as one
/// would: the writer sees a failed write, which is all that matters to it.
#[tokio::test]
async fn a_database_that_cannot_take_writes_degrades_loudly_while_the_registry_keeps_answering() {
    let (_dir, path) = state_file();
    let registry = registry();
    let persistence = Persistence::start(&path, &registry, T0).await;
    persistence.flush().await;
    assert_eq!(persistence.status(), PersistenceStatus::Durable);

    let mut other =
        SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query(
        "CREATE TRIGGER disk_full BEFORE INSERT ON model_lockouts
         BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END",
    )
    .execute(&mut other)
    .await
    .unwrap();
    other.close().await.unwrap();

    attempt(&registry, &key("p", "k", "gone"), &response(404, None, T0), T0);
    persistence.flush().await;
    assert!(reason(persistence.status()).contains("full"));
    let written = persistence.batches_written();

    // The registry never waited for the file and still does not.
    assert!(matches!(
        registry.eligible(&key("p", "k", "gone"), T0),
        Err(SkipReason::ModelLocked { .. })
    ));
    for _ in 0..5 {
        attempt(&registry, &key("down", "k", "m"), &connect_refused(T0), T0);
    }
    assert!(matches!(
        registry.eligible(&key("down", "k", "m"), T0),
        Err(SkipReason::BreakerOpen { .. })
    ));
    persistence.flush().await;
    assert_eq!(persistence.batches_written(), written);
    persistence.shutdown().await;
}

/// Waits (bounded) until the status is `want`, following the live status rather than polling.
async fn status_becomes(persistence: &Persistence, want: impl Fn(&PersistenceStatus) -> bool) {
    let mut status = persistence.watch_status();
    tokio::time::timeout(std::time::Duration::from_secs(20), status.wait_for(|s| want(s)))
        .await
        .expect("the status never changed as expected")
        .expect("the writer is alive");
}

/// A write error that clears (the disk gets space again) does not leave the app in memory only
/// for the rest of its life: the writer retries with backoff, degrades loudly while it cannot
/// write, and resumes with a full rewrite from the registry once it can.
#[tokio::test]
async fn a_write_error_that_clears_lets_persistence_resume_instead_of_ending_it() {
    let (_dir, path) = state_file();
    let registry = registry();
    let retry = WriteRetry {
        first: std::time::Duration::from_millis(1),
        max: std::time::Duration::from_millis(20),
        degrade_after: 2,
    };
    let persistence = Persistence::start_with(&path, &registry, T0, retry).await;
    persistence.flush().await;

    let mut other =
        SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query(
        "CREATE TRIGGER disk_full BEFORE INSERT ON model_lockouts
         BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END",
    )
    .execute(&mut other)
    .await
    .unwrap();

    attempt(&registry, &key("p", "k", "gone"), &response(404, None, T0), T0);
    // Resolves once the writer has given up for now.
    persistence.flush().await;
    assert!(reason(persistence.status()).contains("full"));
    assert!(persistence.write_failures() >= 2);

    sqlx::query("DROP TRIGGER disk_full").execute(&mut other).await.unwrap();
    other.close().await.unwrap();
    status_becomes(&persistence, PersistenceStatus::is_durable).await;
    persistence.flush().await;
    let stored = persistence.store().unwrap().load_health().await.unwrap();
    assert_eq!(stored.lockouts.len(), 1, "the lock made while failing reached the file");
    persistence.shutdown().await;
}

/// One row the code cannot read (a state from a newer version, a hand edit) costs that row, not
/// the whole restore.
#[tokio::test]
async fn one_unreadable_row_is_skipped_and_the_rest_is_restored() {
    let (_dir, path) = state_file();
    let writer = registry();
    let persistence = Persistence::start(&path, &writer, T0).await;
    for _ in 0..5 {
        attempt(&writer, &key("down", "k", "m"), &connect_refused(T0), T0);
    }
    attempt(&writer, &key("p", "k", "gone"), &response(404, None, T0), T0);
    attempt(&writer, &key("p", "k", "also-gone"), &response(404, None, T0), T0);
    persistence.shutdown().await;

    let mut other =
        SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query("UPDATE model_lockouts SET reason_kind = 'from_the_future' WHERE model = 'gone'")
        .execute(&mut other)
        .await
        .unwrap();
    sqlx::query("UPDATE breakers SET state = 'exploded'").execute(&mut other).await.unwrap();
    other.close().await.unwrap();

    let reader = registry();
    let persistence = Persistence::start(&path, &reader, T0).await;
    assert_eq!(persistence.status(), PersistenceStatus::Durable);
    assert!(matches!(
        reader.eligible(&key("p", "k", "also-gone"), T0),
        Err(SkipReason::ModelLocked { .. })
    ));
    assert_eq!(reader.eligible(&key("p", "k", "gone"), T0), Ok(()), "its row was unreadable");
    assert_eq!(reader.eligible(&key("down", "k", "m"), T0), Ok(()), "its row was unreadable");
    persistence.shutdown().await;
}
