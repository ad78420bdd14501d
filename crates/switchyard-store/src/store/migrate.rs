//! Running the schema's migrations so that the way back stays open.
//!
//! Invariants:
//! - Before the first statement of the first pending migration, an existing file is copied
//!   whole with `VACUUM INTO` to `<file>.<schema>.bak` (`<schema>`: the last migration it had),
//!   written under a temporary name and renamed once complete; the three newest backups are
//!   kept.
//! - Each migration runs in one transaction together with its row in sqlx's
//!   `_sqlx_migrations` (the table files migrated by earlier builds have): killed midway, the
//!   file is as it was before that migration.
//! - Migrations only add: tables, columns with defaults, indexes. From the first one that
//!   records it, each migration declares on a line of its own
//!   `-- min_reader_version: X.Y.Z`, the oldest Switchyard that can run on its result, and the
//!   file keeps the newest declared in `compatibility` (same transaction).
//! - A file with migrations this build does not know was written by a newer build: this build
//!   runs on it unmigrated when it is at least the file's minimum reader, and otherwise
//!   refuses it with the version needed and the backup that holds this build's schema. No
//!   build deletes or rewrites what it does not know.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use sqlx::migrate::{Migration, Migrator};
use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Executor, SqlitePool};

use crate::StoreError;

static MIGRATOR: Migrator = sqlx::migrate!();

/// This build's version: what a file's minimum reader is compared with.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How many backups are kept beside the file.
const KEPT_BACKUPS: usize = 3;

/// The marker a migration declares its minimum reader with.
const MIN_READER_MARK: &str = "-- min_reader_version:";

/// sqlx's bookkeeping table, exactly as sqlx creates it.
const CREATE_MIGRATIONS_TABLE: &str = "
CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    success BOOLEAN NOT NULL,
    checksum BLOB NOT NULL,
    execution_time BIGINT NOT NULL
);";

/// Called inside the first pending migration's transaction, after its statements and before
/// its commit: the crash tests stop the process there.
pub type Pause<'a> = Box<dyn FnOnce() + Send + 'a>;

/// What [`migrate`] did.
#[derive(Debug, Default)]
pub(crate) struct Migrated {
    /// The copy made before the first migration ran, if any ran on an existing file.
    pub backup: Option<PathBuf>,
}

/// The newest migration this build knows: the schema it reads and writes.
pub fn schema_version() -> i64 {
    known().map(|m| m.version).max().unwrap_or(0)
}

/// The minimum reader a migration declares, if it does.
fn declared_min_reader(sql: &str) -> Option<&str> {
    sql.lines().find_map(|line| line.trim().strip_prefix(MIN_READER_MARK)).map(str::trim)
}

fn known() -> impl Iterator<Item = &'static Migration> {
    MIGRATOR.iter().filter(|m| m.migration_type.is_up_migration())
}

/// Brings the file at `path` (open as `pool`) up to this build's schema: see the module's
/// invariants.
pub(crate) async fn migrate(
    pool: &SqlitePool,
    path: &Path,
    pause: Option<Pause<'_>>,
) -> Result<Migrated, StoreError> {
    let mut conn = pool.acquire().await.map_err(StoreError::database)?;
    conn.execute(CREATE_MIGRATIONS_TABLE).await.map_err(StoreError::database)?;
    let applied: Vec<(i64, Vec<u8>, bool)> =
        sqlx::query_as("SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await
            .map_err(StoreError::database)?;
    if let Some((version, ..)) = applied.iter().find(|(.., success)| !success) {
        return Err(StoreError::Migrate(format!(
            "migration {version} was left half-applied by a build that did not run it in a \
             transaction; restore a backup (docs/configuration.md, \"Backups\")"
        )));
    }
    let by_version: HashMap<i64, &Migration> = known().map(|m| (m.version, m)).collect();
    let mut unknown = Vec::new();
    for (version, checksum, _) in &applied {
        match by_version.get(version) {
            Some(m) if *m.checksum != checksum[..] => {
                return Err(StoreError::Migrate(format!(
                    "migration {version} ({}) differs from the one applied to this file",
                    m.description
                )));
            }
            Some(_) => {}
            None => unknown.push(*version),
        }
    }
    let done: Vec<i64> = applied.iter().map(|(v, ..)| *v).collect();
    let pending: Vec<&Migration> = known().filter(|m| !done.contains(&m.version)).collect();
    if !unknown.is_empty() {
        return newer_file(&mut conn, path, &pending).await;
    }
    let Some(&from) = done.last() else {
        apply(&mut conn, &pending, pause).await?;
        return Ok(Migrated::default());
    };
    if pending.is_empty() {
        return Ok(Migrated::default());
    }
    let backup = back_up(&mut conn, path, from).await?;
    tracing::info!(
        backup = %backup.display(),
        from,
        to = schema_version(),
        "backed up the state file before migrating its schema"
    );
    apply(&mut conn, &pending, pause).await?;
    Ok(Migrated { backup: Some(backup) })
}

/// A file a newer build migrated: run on it unmigrated if this build is one of its readers.
async fn newer_file(
    conn: &mut SqliteConnection,
    path: &Path,
    pending: &[&Migration],
) -> Result<Migrated, StoreError> {
    // No such table: a newer build from before minimum readers, which declares none.
    let needs: Option<String> =
        sqlx::query_scalar("SELECT min_reader_version FROM compatibility WHERE id = 1")
            .fetch_optional(&mut *conn)
            .await
            .unwrap_or_default();
    let readable = pending.is_empty()
        && needs.as_deref().is_some_and(|needs| at_least(VERSION, needs).unwrap_or(false));
    if readable {
        tracing::info!(
            file = %path.display(),
            "the state file has migrations of a newer Switchyard that this version may run on; \
             leaving them as they are"
        );
        return Ok(Migrated::default());
    }
    let backup = backup_path(path, schema_version());
    Err(StoreError::TooNew {
        path: path.to_owned(),
        needs: needs.unwrap_or_else(|| "a newer version".to_owned()),
        ours: VERSION.to_owned(),
        backup: backup.exists().then_some(backup),
    })
}

/// Whether `version` is `needs` or newer (semantic versions); `None` when either does not
/// parse.
fn at_least(version: &str, needs: &str) -> Option<bool> {
    let version = semver::Version::parse(version).ok()?;
    let needs = semver::Version::parse(needs).ok()?;
    Some(version >= needs)
}

async fn apply(
    conn: &mut SqliteConnection,
    pending: &[&Migration],
    mut pause: Option<Pause<'_>>,
) -> Result<(), StoreError> {
    for migration in pending {
        let failed = |e: sqlx::Error| {
            StoreError::Migrate(format!(
                "migration {} ({}): {}",
                migration.version,
                migration.description,
                StoreError::database(e)
            ))
        };
        let mut tx = conn.begin().await.map_err(failed)?;
        tx.execute(migration.sql.clone()).await.map_err(failed)?;
        if let Some(needs) = declared_min_reader(migration.sql.as_str()) {
            sqlx::query(
                "INSERT OR REPLACE INTO compatibility (id, min_reader_version) VALUES (1, ?)",
            )
            .bind(needs)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        }
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (?, ?, TRUE, ?, -1)",
        )
        .bind(migration.version)
        .bind(&*migration.description)
        .bind(&*migration.checksum)
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
        if let Some(pause) = pause.take() {
            pause();
        }
        tx.commit().await.map_err(failed)?;
    }
    Ok(())
}

/// `<file>.<schema>.bak` beside the file.
pub fn backup_path(path: &Path, schema: i64) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{schema}.bak"));
    path.with_file_name(name)
}

/// Copies the file, as of now, to its backup for schema `from`; keeps the newest few.
async fn back_up(
    conn: &mut SqliteConnection,
    path: &Path,
    from: i64,
) -> Result<PathBuf, StoreError> {
    let backup = backup_path(path, from);
    let mut partial = backup.clone().into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let io_error = |source: io::Error| StoreError::Io { path: partial.clone(), source };
    // Created empty and owner-only first: VACUUM INTO writes into an empty file, and would
    // otherwise create it with the umask's permissions.
    match std::fs::remove_file(&partial) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_error(e)),
        _ => {}
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&partial).map_err(io_error)?;
    let target = partial.to_str().ok_or_else(|| {
        io_error(io::Error::new(io::ErrorKind::InvalidInput, "the path is not UTF-8"))
    })?;
    sqlx::query("VACUUM INTO ?").bind(target).execute(&mut *conn).await.map_err(|e| {
        StoreError::Migrate(format!(
            "cannot back up the file before migrating: {}",
            StoreError::database(e)
        ))
    })?;
    std::fs::File::open(&partial).and_then(|f| f.sync_all()).map_err(io_error)?;
    std::fs::rename(&partial, &backup)
        .map_err(|source| StoreError::Io { path: backup.clone(), source })?;
    prune_backups(path);
    Ok(backup)
}

/// Removes all but the newest [`KEPT_BACKUPS`] backups of `path`. A backup that cannot be
/// removed stays, and says so.
fn prune_backups(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{name}.");
    let mut backups: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry.file_name().to_str().is_some_and(|n| {
                n.strip_prefix(&prefix)
                    .and_then(|rest| rest.strip_suffix(".bak"))
                    .is_some_and(|schema| schema.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    backups.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, old) in backups.into_iter().skip(KEPT_BACKUPS) {
        if let Err(error) = std::fs::remove_file(&old) {
            tracing::warn!(%error, backup = %old.display(), "cannot remove an old backup");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_semantic_versions() {
        assert_eq!(at_least("0.10.0", "0.9.3"), Some(true));
        assert_eq!(at_least("0.9.3", "0.10.0"), Some(false));
        assert_eq!(at_least("1.2.3", "1.2.3"), Some(true));
        assert_eq!(at_least("1.2.3", "soon"), None);
    }

    #[test]
    fn backups_are_named_by_the_schema_they_hold() {
        let path = Path::new("/data/switchyard.db");
        assert_eq!(backup_path(path, 10), Path::new("/data/switchyard.db.10.bak"));
    }

    /// The first migration that declares its minimum reader; every later one must too.
    const FIRST_DECLARING: i64 = 11;

    #[test]
    fn migrations_from_the_first_declaring_one_only_add_and_declare_their_readers() {
        let mut newest = semver::Version::new(0, 0, 0);
        for m in known().filter(|m| m.version >= FIRST_DECLARING) {
            let at = format!("migration {} ({})", m.version, m.description);
            let needs = declared_min_reader(m.sql.as_str())
                .unwrap_or_else(|| panic!("{at} declares no `{MIN_READER_MARK} X.Y.Z`"));
            let needs = semver::Version::parse(needs).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert!(needs >= newest, "{at} lowers the minimum reader to {needs}");
            assert!(
                needs <= semver::Version::parse(VERSION).unwrap(),
                "{at} needs {needs}, newer than this build ({VERSION})"
            );
            newest = needs;
            let code: String = m
                .sql
                .as_str()
                .lines()
                .map(|line| line.split("--").next().unwrap_or_default().to_ascii_uppercase())
                .collect::<Vec<_>>()
                .join(" ");
            for word in code.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
                assert!(
                    !["DROP", "RENAME", "UPDATE", "DELETE", "REPLACE"].contains(&word),
                    "{at}: `{word}`: migrations only add (tables, columns with defaults, indexes)"
                );
            }
            for statement in code.split(';').filter(|s| s.contains("ADD COLUMN")) {
                assert!(
                    !statement.contains("NOT NULL") || statement.contains("DEFAULT"),
                    "{at}: a NOT NULL column needs a DEFAULT: {}",
                    statement.trim()
                );
            }
        }
        assert!(known().any(|m| m.version == FIRST_DECLARING));
    }

    #[test]
    fn the_marker_is_read_from_its_own_line() {
        assert_eq!(
            declared_min_reader("-- Adds x.\n-- min_reader_version: 0.2.0\nCREATE"),
            Some("0.2.0")
        );
        assert_eq!(declared_min_reader("CREATE TABLE t (x);"), None);
    }
}
