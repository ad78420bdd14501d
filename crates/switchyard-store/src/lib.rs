//! Switchyard's durable state in one `SQLite` file: the three resilience layers and the settings
//! sections (RESILIENCE.md §6).
//!
//! [`Store`] is the file: open it, load and save health records and settings. [`Persistence`]
//! is what the app runs: it never fails to start, restores the health registry from the file
//! and keeps the file up to date with a write-behind task, so no request ever waits on `SQLite`.
//! When the file cannot be written (read-only, corrupt, disk full) it degrades to memory only,
//! says so loudly, and reports it through [`PersistenceStatus`].
//!
//! [`team`] is the other store: the `PostgreSQL` database several instances share their health
//! state through, and the task that keeps the registry in step with it.
//!
//! sqlx lives here and nowhere else; no sqlx type appears in this crate's public API.

mod error;
mod persistence;
mod store;
pub mod team;

pub use self::error::StoreError;
pub use self::persistence::{Persistence, PersistenceStatus, WriteRetry};
pub use self::store::migrate::{Pause, VERSION, backup_path, schema_version};
pub use self::store::{
    ApiKeyRecord, RequestFilter, RequestRecord, SessionPin, Store, StoredSection, UsageBatch,
};
