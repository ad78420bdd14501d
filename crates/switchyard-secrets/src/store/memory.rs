//! An in-memory [`SecretStore`] for tests of code that uses the trait. It is never a fallback
//! for the keychain: nothing in the app constructs one outside tests.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::{Secret, SecretError, SecretId, SecretStore};

/// Secrets in a map, gone when dropped.
pub struct MemoryStore {
    entries: Mutex<HashMap<SecretId, Secret>>,
    available: bool,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self { entries: Mutex::default(), available: true }
    }

    /// A store that fails every call with [`SecretError::Unavailable`], the way the keychain
    /// does on a headless machine: for testing that path.
    pub fn unavailable() -> Self {
        Self { entries: Mutex::default(), available: false }
    }

    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A panic elsewhere cannot leave the map half-written (every change is one map call), so
    /// a poisoned lock is still good data.
    fn entries(&self) -> MutexGuard<'_, HashMap<SecretId, Secret>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ensure_available(&self) -> Result<(), SecretError> {
        if self.available {
            Ok(())
        } else {
            Err(SecretError::Unavailable(
                "this test store stands for a machine without a keychain; use env: references"
                    .to_owned(),
            ))
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl SecretStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn check_available(&self) -> Result<(), SecretError> {
        self.ensure_available()
    }

    fn get(&self, id: &SecretId) -> Result<Option<Secret>, SecretError> {
        self.ensure_available()?;
        Ok(self.entries().get(id).cloned())
    }

    fn set(&self, id: &SecretId, secret: &Secret) -> Result<(), SecretError> {
        self.ensure_available()?;
        if secret.is_blank() {
            return Err(SecretError::EmptySecret);
        }
        self.entries().insert(id.clone(), secret.clone());
        Ok(())
    }

    fn delete(&self, id: &SecretId) -> Result<bool, SecretError> {
        self.ensure_available()?;
        Ok(self.entries().remove(id).is_some())
    }
}

/// Shows how many entries and which ids, never the secrets.
impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries();
        let mut ids: Vec<&str> = entries.keys().map(SecretId::account).collect();
        ids.sort_unstable();
        f.debug_struct("MemoryStore")
            .field("available", &self.available)
            .field("ids", &ids)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANARY: &str = "sk-canary-memory-7f3a9c";

    fn id(text: &str) -> SecretId {
        SecretId::parse(text).unwrap()
    }

    #[test]
    fn stores_reads_back_overwrites_and_deletes() {
        let store = MemoryStore::new();
        let key = id("openai/default");
        assert_eq!(store.get(&key), Ok(None));
        store.set(&key, &Secret::from("first")).unwrap();
        assert_eq!(store.get(&key).unwrap().unwrap().expose(), "first");
        store.set(&key, &Secret::from("second")).unwrap();
        assert_eq!(store.get(&key).unwrap().unwrap().expose(), "second");
        assert_eq!(store.len(), 1);
        assert_eq!(store.delete(&key), Ok(true));
        assert_eq!(store.get(&key), Ok(None));
        assert_eq!(store.delete(&key), Ok(false));
        assert!(store.is_empty());
    }

    #[test]
    fn ids_that_differ_in_either_part_are_different_entries() {
        let store = MemoryStore::new();
        store.set(&id("openai/a"), &Secret::from("1")).unwrap();
        store.set(&id("openai/b"), &Secret::from("2")).unwrap();
        store.set(&id("anthropic/a"), &Secret::from("3")).unwrap();
        assert_eq!(store.get(&id("openai/b")).unwrap().unwrap().expose(), "2");
        assert_eq!(store.get(&id("anthropic/a")).unwrap().unwrap().expose(), "3");
    }

    #[test]
    fn blank_secrets_are_refused_and_nothing_is_stored() {
        let store = MemoryStore::new();
        assert_eq!(
            store.set(&id("openai/default"), &Secret::from("  ")),
            Err(SecretError::EmptySecret)
        );
        assert!(store.is_empty());
    }

    #[test]
    fn an_unavailable_store_fails_every_call_and_says_to_use_env() {
        let store = MemoryStore::unavailable();
        let key = id("openai/default");
        let errors = [
            store.check_available().unwrap_err(),
            store.get(&key).unwrap_err(),
            store.set(&key, &Secret::from("x")).unwrap_err(),
            store.delete(&key).unwrap_err(),
        ];
        for err in errors {
            assert!(matches!(err, SecretError::Unavailable(_)), "{err:?}");
            assert!(err.to_string().contains("env:"), "{err}");
        }
        assert!(MemoryStore::new().check_available().is_ok());
    }

    #[test]
    fn debug_output_names_ids_but_never_secrets() {
        let store = MemoryStore::new();
        store.set(&id("openai/default"), &Secret::from(CANARY)).unwrap();
        let shown = format!("{store:?} {:?}", store.get(&id("openai/default")));
        assert!(!shown.contains(CANARY), "{shown}");
        assert!(shown.contains("openai/default"), "{shown}");
    }

    #[test]
    fn works_behind_an_arc_dyn() {
        let store: std::sync::Arc<dyn SecretStore> = std::sync::Arc::new(MemoryStore::new());
        store.set(&id("p/c"), &Secret::from("v")).unwrap();
        assert_eq!(store.get(&id("p/c")).unwrap().unwrap().expose(), "v");
        assert_eq!(store.backend(), "memory");
    }
}
