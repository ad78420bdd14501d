//! Where API keys and OAuth tokens live. The database and config files hold only references
//! ([`SecretRef`]: `env:VAR`, `file:/path` or `keychain:provider/credential`); the secrets
//! themselves stay in the environment, in a file someone else manages ([`file`]) or in a
//! [`SecretStore`], normally the OS keychain ([`KeychainStore`]).
//!
//! Invariants:
//! - A secret's text is reachable only through [`Secret::expose`]; `Debug` and `Display` print
//!   a fixed mask, so it cannot leak into logs, errors or API responses by accident.
//! - No error message carries a secret or anything that might be one ([`SecretError`]).
//! - When no keychain is reachable, `keychain:` references fail with a message that says what
//!   to run, and `env:` references keep working. Nothing ever falls back to plaintext.

mod error;
pub mod file;
mod id;
pub mod live;
mod reference;
mod secret;
mod store;

pub use error::SecretError;
pub use id::{SERVICE, SecretId};
pub use live::LiveSecret;
pub use reference::SecretRef;
pub use secret::Secret;
pub use store::{KeychainStore, MemoryStore, SecretStore};
