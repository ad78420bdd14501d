//! Where API keys and OAuth tokens live: the OS keychain (`keyring`) behind a `SecretStore`
//! trait, with an in-memory implementation for tests. The database only ever holds references.
//!
//! Empty until the keychain issue: the crate exists now so `keyring` has exactly one owner.
