//! The store against real `SQLite` files in temporary directories: restart, degradation, the
//! write-behind writer and settings. One test binary, so the crate links once.

mod bindings;
mod degraded;
mod fixture;
mod migrations;
mod requests;
mod restart;
#[path = "../common/rows.rs"]
mod rows;
mod settings;
mod team;
mod writer;
