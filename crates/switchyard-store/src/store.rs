//! The state file: how it is created and opened, and the schema it holds.
//!
//! Invariants:
//! - The file and its directory are created by us, owner-only (0600 and 0700 on unix), before
//!   `SQLite` touches them. `SQLite` gives its `-wal` and `-shm` files the mode of the database file,
//!   so credential-adjacent state is never readable by other users.
//! - A file without write permission is opened read-only, even when the process could write it
//!   anyway (root ignores permission bits): whoever made it read-only meant it.
//! - A writable file is in WAL mode with `synchronous=NORMAL`: a committed transaction survives
//!   the process being killed (only a power cut can lose the last ones), and commits cost no
//!   fsync, which matters because every state transition becomes one.
//! - A file written by a newer Switchyard (migrations this build does not know) is never
//!   rewritten: run on when this build is one of the readers it declares, refused otherwise
//!   (`migrate`). An existing file is backed up before any migration touches it.

mod api_keys;
mod bindings;
pub(crate) mod columns;
mod headroom;
mod health;
pub(crate) mod migrate;
mod requests;
mod settings;

pub use self::api_keys::ApiKeyRecord;
pub use self::requests::{RequestFilter, RequestRecord, SessionPin, UsageBatch};
pub use self::settings::StoredSection;

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use self::migrate::Pause;
use crate::StoreError;

/// How long a statement waits for another connection's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// One writer (the health writer) plus room for settings and reads beside it.
const MAX_CONNECTIONS: u32 = 4;

/// The state file, opened. Cheap to clone: clones share one connection pool.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    path: Arc<Path>,
    read_only: bool,
    /// The copy made before this open migrated the file.
    backup: Option<Arc<Path>>,
}

impl Store {
    /// Opens the state file, creating it (and its directory) owner-only when missing, and brings
    /// its schema up to date. A file without write permission opens read-only, unmigrated.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path.as_ref(), None).await
    }

    /// [`Self::open`], calling `pause` inside the first migration's transaction, before it
    /// commits: how the crash tests kill a process mid-migration.
    #[doc(hidden)]
    pub async fn open_pausing_in_migration(
        path: impl AsRef<Path>,
        pause: Pause<'_>,
    ) -> Result<Self, StoreError> {
        Self::open_with(path.as_ref(), Some(pause)).await
    }

    async fn open_with(path: &Path, pause: Option<Pause<'_>>) -> Result<Self, StoreError> {
        let read_only =
            prepare(path).map_err(|source| StoreError::Io { path: path.to_owned(), source })?;
        let mut options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(read_only)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        if !read_only {
            // Setting the journal mode writes the file header, so only a writable file gets it;
            // a read-only file keeps the mode it was written with.
            options =
                options.journal_mode(SqliteJournalMode::Wal).synchronous(SqliteSynchronous::Normal);
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(StoreError::database)?;
        let mut backup = None;
        if !read_only {
            let migrated = migrate::migrate(&pool, path, pause).await;
            match migrated {
                Ok(migrated) => backup = migrated.backup.map(Arc::from),
                Err(error) => {
                    pool.close().await;
                    return Err(error);
                }
            }
        }
        Ok(Self { pool, path: path.into(), read_only, backup })
    }

    /// Opens an existing state file for reading only, changing nothing in it: no migration, no
    /// journal mode. For looking at a file another process is writing: a reader sees every
    /// transaction committed before its read began, and nothing uncommitted.
    pub async fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let options =
            SqliteConnectOptions::new().filename(path).read_only(true).busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(StoreError::database)?;
        Ok(Self { pool, path: path.into(), read_only: true, backup: None })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The copy of the file made before this open migrated it, if it did.
    pub fn backup(&self) -> Option<&Path> {
        self.backup.as_deref()
    }

    /// Whether the file was opened read-only because it has no write permission.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Runs `SQLite`'s full `integrity_check`: every page, index and constraint.
    pub async fn integrity_check(&self) -> Result<(), StoreError> {
        let report: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
        if report == ["ok"] { Ok(()) } else { Err(StoreError::Corrupt(report.join("; "))) }
    }

    /// Closes every connection; the last one to close checkpoints the WAL into the file.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Makes sure the directory and the file exist, creating them owner-only; `SQLite` would create
/// them with the umask's permissions. Returns whether the existing file is read-only.
fn prepare(path: &Path) -> io::Result<bool> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut builder = DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)?;
    }
    match std::fs::metadata(path) {
        Ok(meta) => Ok(meta.permissions().readonly()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut options = OpenOptions::new();
            options.write(true).create(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            options.open(path)?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
