//! The crate's one error type. Driver errors are carried as text so sqlx stays an implementation
//! detail: callers decide what to do from the variant, people read the message.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Preparing the file or its directory failed, before `SQLite` was involved.
    #[error("cannot prepare {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// `SQLite` refused: not a database, read-only, disk full, locked, I/O error.
    #[error("database error: {0}")]
    Database(String),
    #[error("cannot migrate the schema: {0}")]
    Migrate(String),
    /// The file has migrations of a newer Switchyard that declares this version too old to
    /// run on it.
    #[error(
        "{path} was migrated by a newer Switchyard and needs version {needs} or newer (this is {ours}): update Switchyard{}",
        match backup {
            Some(backup) => format!(", or go back to this version's schema by stopping Switchyard and copying {} over {} (what changed since that backup is lost)", backup.display(), path.display()),
            None => format!("; no backup of this version's schema was found beside it ({})", crate::store::migrate::backup_path(path, crate::store::migrate::schema_version()).display()),
        }
    )]
    TooNew { path: PathBuf, needs: String, ours: String, backup: Option<PathBuf> },
    /// The file is a database but its content is damaged or unreadable by this version.
    #[error("corrupt state: {0}")]
    Corrupt(String),
    #[error("settings section `{section}`: {message}")]
    SettingsBody { section: String, message: String },
    /// Team mode: the shared database's URL or answers. Never carries the URL.
    #[error("team database: {0}")]
    Team(String),
}

impl StoreError {
    pub(crate) fn database(error: sqlx::Error) -> Self {
        Self::Database(match error {
            // The driver's own wording wraps SQLite's message in boilerplate.
            sqlx::Error::Database(e) => match e.code() {
                Some(code) => format!("{} (code {code})", e.message()),
                None => e.message().to_owned(),
            },
            other => other.to_string(),
        })
    }
}
