//! Migrations that keep the way back open: a backup before the first statement, every row
//! kept, and a file from a newer build run on or refused by what it declares.

use std::sync::mpsc;

use switchyard_store::{Store, StoreError, VERSION, backup_path, schema_version};

use crate::rows::{assert_kept, connect, previous_release, rows};

/// The schema of the fixture: the last migration of the release before backups.
const PREVIOUS_SCHEMA: i64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_release_migrates_after_a_backup_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = previous_release(dir.path());
    let before = rows(&path).await;
    for (table, (_, found)) in &before {
        assert!(!found.is_empty(), "the fixture has no rows in {table}");
    }
    let backup = backup_path(&path, PREVIOUS_SCHEMA);

    // Inside the first migration's transaction, its statements run but not committed: the
    // backup is complete by then, and holds the schema from before the first statement.
    let (paused, release) = (mpsc::channel(), mpsc::channel::<()>());
    let (tell, wait) = (paused.0, release.1);
    let opening = tokio::spawn({
        let path = path.clone();
        async move {
            Store::open_pausing_in_migration(
                &path,
                Box::new(move || {
                    tell.send(()).unwrap();
                    wait.recv().unwrap();
                }),
            )
            .await
        }
    });
    tokio::task::spawn_blocking(move || paused.1.recv().unwrap()).await.unwrap();
    let in_backup = rows(&backup).await;
    assert_eq!(in_backup, before, "the backup is the file as it was before the migration");
    release.0.send(()).unwrap();
    let store = opening.await.unwrap().unwrap();
    assert_eq!(store.backup(), Some(backup.as_path()));
    store.close().await;

    assert_kept(&before, &path).await;
    let pool = connect(&path).await;
    let applied: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(applied, schema_version());
    let needs: String = sqlx::query_scalar("SELECT min_reader_version FROM compatibility")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(needs, "0.1.0");
    pool.close().await;

    // Opened again: nothing to migrate, no new backup.
    std::fs::remove_file(&backup).unwrap();
    let store = Store::open(&path).await.unwrap();
    assert_eq!(store.backup(), None);
    store.close().await;
    assert!(!backup.exists());
}

#[tokio::test]
async fn only_the_three_newest_backups_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = previous_release(dir.path());
    let old: Vec<_> = [7, 8, 9].iter().map(|schema| backup_path(&path, *schema)).collect();
    for (age, file) in old.iter().enumerate() {
        std::fs::write(file, b"an older backup").unwrap();
        let modified = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(1_700_000_000 + age as u64);
        std::fs::File::options().write(true).open(file).unwrap().set_modified(modified).unwrap();
    }
    let store = Store::open(&path).await.unwrap();
    store.close().await;
    assert!(!old[0].exists(), "the oldest backup goes");
    assert!(old[1].exists() && old[2].exists());
    assert!(backup_path(&path, PREVIOUS_SCHEMA).exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode =
            std::fs::metadata(backup_path(&path, PREVIOUS_SCHEMA)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "a backup is owner-only like the file");
    }
}

/// A file as a newer build leaves it: one more migration (a table of its own) declaring
/// `needs` as its minimum reader.
async fn from_the_future(needs: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = previous_release(dir.path());
    Store::open(&path).await.unwrap().close().await;
    std::fs::remove_file(backup_path(&path, PREVIOUS_SCHEMA)).unwrap();
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE future_things (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
         INSERT INTO future_things (what) VALUES ('kept');
         INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9000, 'future things', TRUE, x'00', 1);",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE compatibility SET min_reader_version = ?")
        .bind(needs)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    (dir, path)
}

#[tokio::test]
async fn a_newer_file_that_declares_this_version_a_reader_is_run_on_unmigrated() {
    let (_dir, path) = from_the_future(VERSION).await;
    let before = rows(&path).await;
    let store = Store::open(&path).await.unwrap();
    assert_eq!(store.backup(), None);
    assert_eq!(store.api_keys().await.unwrap().len(), 1, "the file's data reads as usual");
    store.close().await;
    assert_eq!(rows(&path).await, before, "nothing it does not know is touched");
}

#[tokio::test]
async fn a_newer_file_that_needs_a_newer_reader_is_refused_naming_the_version_and_the_backup() {
    let (_dir, path) = from_the_future("99.0.0").await;
    let before = rows(&path).await;
    let error = Store::open(&path).await.unwrap_err();
    assert!(matches!(error, StoreError::TooNew { .. }), "{error:?}");
    let message = error.to_string();
    let own = backup_path(&path, schema_version());
    assert!(message.contains("needs version 99.0.0 or newer"), "{message}");
    assert!(message.contains(&format!("this is {VERSION}")), "{message}");
    assert!(message.contains("no backup of this version's schema"), "{message}");
    assert!(message.contains(&own.display().to_string()), "{message}");

    // The backup the newer build made when it migrated from this build's schema.
    std::fs::copy(&path, &own).unwrap();
    let message = Store::open(&path).await.unwrap_err().to_string();
    assert!(
        message.contains(&format!("copying {} over {}", own.display(), path.display())),
        "{message}"
    );
    assert_eq!(rows(&path).await, before, "a refused file is left as it was");
}
