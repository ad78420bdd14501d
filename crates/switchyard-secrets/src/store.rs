//! Where secrets are kept: the [`SecretStore`] trait and its two implementations.
//!
//! The trait is synchronous because the OS keychains are (keyring's API is blocking). The app
//! calls it at config load and when a credential changes, never on the request path; from async
//! code, call it inside `tokio::task::spawn_blocking` because a call may wait on D-Bus or on a
//! user answering an unlock prompt.
//!
//! Contract every implementation keeps:
//! - `get` of an id never stored, or deleted, is `Ok(None)`, not an error;
//! - `set` replaces; it refuses blank secrets with [`SecretError::EmptySecret`];
//! - `delete` says whether there was something to delete;
//! - an unreachable store fails every call with [`SecretError::Unavailable`] and never falls
//!   back to somewhere else.

mod keychain;
mod memory;

use std::sync::Arc;

pub use keychain::KeychainStore;
pub use memory::MemoryStore;

use crate::{Secret, SecretError, SecretId};

/// Keeps secrets by [`SecretId`]. Object safe: the app holds an `Arc<dyn SecretStore>`.
pub trait SecretStore: std::fmt::Debug + Send + Sync {
    /// Where the secrets go, for status lines: "Secret Service", "macOS Keychain", "memory".
    fn backend(&self) -> &'static str;

    /// `Ok` when the store answers now; otherwise the error says why and what to do. Checking
    /// never prompts the user or changes anything.
    fn check_available(&self) -> Result<(), SecretError>;

    fn get(&self, id: &SecretId) -> Result<Option<Secret>, SecretError>;

    fn set(&self, id: &SecretId, secret: &Secret) -> Result<(), SecretError>;

    /// `Ok(true)` when an entry was removed, `Ok(false)` when there was none.
    fn delete(&self, id: &SecretId) -> Result<bool, SecretError>;
}

impl<S: SecretStore + ?Sized> SecretStore for Arc<S> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }

    fn check_available(&self) -> Result<(), SecretError> {
        (**self).check_available()
    }

    fn get(&self, id: &SecretId) -> Result<Option<Secret>, SecretError> {
        (**self).get(id)
    }

    fn set(&self, id: &SecretId, secret: &Secret) -> Result<(), SecretError> {
        (**self).set(id, secret)
    }

    fn delete(&self, id: &SecretId) -> Result<bool, SecretError> {
        (**self).delete(id)
    }
}
