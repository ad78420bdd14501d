//! Team mode's database half: health state shared by several instances through
//! `PostgreSQL`, beside the `SQLite` state file each instance keeps.
//!
//! - [`TeamDatabase`]: the database itself, the second implementation of this crate's store
//!   (migrations in `migrations-postgres/`): the salt, the instances, and shared entries read
//!   and written only on the version they were read at.
//! - [`Team`]: what the app runs: the sync task between the registry and the database
//!   (see `sync`), and the status the health page and the tray show.
//!
//! The state file is not replaced: it keeps recording this instance's transitions (what it
//! learns from the team included) and restores them at start, so an instance that starts while
//! the database is down still knows what it knew.

mod database;
mod sync;
mod tables;

pub use self::database::{CHANNEL, Member, TeamDatabase, TeamUrl};
pub use self::sync::{Identities, MEMBERS_WITHIN, Team, TeamOptions, TeamStatus};
pub use self::tables::{Breakers, Credentials, Entry, Lockouts, Table};
