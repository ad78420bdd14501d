//! Local API keys: the secret a client must present to use `/v1`.
//!
//! A key is `sy-` followed by 32 random bytes in hex, shown once at creation. The database keeps
//! its SHA-256; the server keeps the digests of live keys in memory and checks a presented key
//! with one hash and one set lookup. A key preset through `SWITCHYARD_API_KEY` (for scripts and
//! tests) is accepted without being stored.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use switchyard_core::UnixMillis;
use switchyard_secrets::Secret;
use switchyard_store::{ApiKeyRecord, Store, StoreError};

/// The environment variable that presets one accepted key.
pub const PRESET_ENV: &str = "SWITCHYARD_API_KEY";

/// A newly created key: the only moment its text exists outside the client.
#[derive(Debug)]
pub struct NewKey {
    pub record: ApiKeyRecord,
    pub key: Secret,
}

/// Creates and stores a key named `name`.
pub async fn create(store: &Store, name: &str, now: UnixMillis) -> Result<NewKey, KeyError> {
    if name.is_empty() || name.len() > 64 {
        return Err(KeyError::Name(name.to_owned()));
    }
    let key = generate()?;
    let digest = sha256_hex(key.expose());
    let record = ApiKeyRecord {
        id: format!("key_{}", &digest[..8]),
        name: name.to_owned(),
        sha256: digest,
        hint: key.hint(),
        created_at: now,
        revoked_at: None,
    };
    store.create_api_key(&record).await?;
    Ok(NewKey { record, key })
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key name {0:?} must be 1 to 64 characters")]
    Name(String),
    #[error("the operating system gave no randomness: {0}")]
    Random(getrandom::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("keys live in the state file, which is not available (the app runs in memory only)")]
    NoStore,
    #[error("cannot write the management token to {path}: {source}")]
    TokenFile { path: std::path::PathBuf, source: std::io::Error },
}

/// The environment variable that sets the management token.
pub const MANAGEMENT_ENV: &str = "SWITCHYARD_MANAGEMENT_TOKEN";

/// The management token's file in the data directory.
pub const MANAGEMENT_FILE: &str = "management-token";

/// The management token: from [`MANAGEMENT_ENV`], else from the data directory's
/// [`MANAGEMENT_FILE`], created (owner-only) on first use.
pub fn management_token(data_dir: &std::path::Path) -> Result<Secret, KeyError> {
    if let Ok(token) = std::env::var(MANAGEMENT_ENV)
        && !token.trim().is_empty()
    {
        return Ok(Secret::new(token.trim()));
    }
    let path = data_dir.join(MANAGEMENT_FILE);
    if let Ok(token) = std::fs::read_to_string(&path)
        && !token.trim().is_empty()
    {
        return Ok(Secret::new(token.trim()));
    }
    let token = generate()?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::fs::create_dir_all(data_dir)
        .and_then(|()| options.open(&path))
        .and_then(|mut file| std::io::Write::write_all(&mut file, token.expose().as_bytes()))
        .map_err(|source| KeyError::TokenFile { path, source })?;
    Ok(token)
}

/// A fresh random token: `sy-` and 32 random bytes in hex.
pub(crate) fn generate() -> Result<Secret, KeyError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(KeyError::Random)?;
    let mut text = String::with_capacity(3 + 64);
    text.push_str("sy-");
    for b in bytes {
        let _ = write!(text, "{b:02x}");
    }
    Ok(Secret::new(text))
}

fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// The set of keys the server accepts right now. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct LocalKeys {
    digests: Arc<RwLock<HashSet<String>>>,
    preset: Option<Arc<str>>,
}

impl LocalKeys {
    /// Accepts `preset` (from [`PRESET_ENV`]) in addition to whatever [`Self::reload`] loads.
    pub fn new(preset: Option<Secret>) -> Self {
        Self { digests: Arc::default(), preset: preset.map(|p| Arc::from(sha256_hex(p.expose()))) }
    }

    /// Replaces the stored keys with the live ones in `store`.
    pub async fn reload(&self, store: &Store) -> Result<usize, StoreError> {
        let live: HashSet<String> = store
            .api_keys()
            .await?
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .map(|k| k.sha256)
            .collect();
        let count = live.len();
        *self.digests.write() = live;
        Ok(count)
    }

    /// Whether `presented` is a live key.
    pub fn accepts(&self, presented: &str) -> bool {
        let digest = sha256_hex(presented);
        self.preset.as_deref() == Some(digest.as_str()) || self.digests.read().contains(&digest)
    }

    /// Whether any key could be accepted at all (if not, `serve` says how to make one).
    pub fn is_empty(&self) -> bool {
        self.preset.is_none() && self.digests.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_created_key_is_accepted_until_revoked_and_only_its_digest_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).await.unwrap();
        let keys = LocalKeys::new(None);
        let new = create(&store, "editor", UnixMillis(1)).await.unwrap();
        assert!(new.key.expose().starts_with("sy-") && new.key.expose().len() == 67);
        keys.reload(&store).await.unwrap();
        assert!(keys.accepts(new.key.expose()));
        assert!(!keys.accepts("sy-wrong"));

        let stored = store.api_keys().await.unwrap();
        assert!(
            stored
                .iter()
                .all(|k| k.sha256 != new.key.expose() && !k.sha256.contains(new.key.expose()))
        );

        assert!(store.revoke_api_key("editor", UnixMillis(2)).await.unwrap());
        keys.reload(&store).await.unwrap();
        assert!(!keys.accepts(new.key.expose()));
    }

    #[test]
    fn a_preset_key_is_accepted_without_a_store() {
        let keys = LocalKeys::new(Some(Secret::new("sy-preset")));
        assert!(keys.accepts("sy-preset"));
        assert!(!keys.accepts("sy-other"));
    }
}
