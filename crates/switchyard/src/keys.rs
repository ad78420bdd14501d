//! Local API keys: the secret a client must present to use `/v1`.
//!
//! A key is `sy-` followed by 32 random bytes in hex, shown once at creation. The database keeps
//! its SHA-256; the server keeps the digests of live keys in memory and checks a presented key
//! with one hash and one set lookup. A key preset through `SWITCHYARD_API_KEY` (for scripts and
//! tests) is accepted without being stored.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use switchyard_core::UnixMillis;
use switchyard_secrets::Secret;
use switchyard_store::{ApiKeyRecord, Store, StoreError};

/// The environment variable that presets one accepted key.
pub const PRESET_ENV: &str = "SWITCHYARD_API_KEY";

/// The id and name of the key preset through [`PRESET_ENV`]: it has no record to name it.
pub const PRESET_KEY: &str = "preset";

/// The local key a client presented: its id, which the request log and the usage aggregates
/// record (exact, never reused), and its name, which budgets go by (one per tool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalKey {
    pub id: Arc<str>,
    pub name: Arc<str>,
}

impl LocalKey {
    fn preset() -> Self {
        Self { id: Arc::from(PRESET_KEY), name: Arc::from(PRESET_KEY) }
    }
}

/// A newly created key: the only moment its text exists outside the client.
#[derive(Debug)]
pub struct NewKey {
    pub record: ApiKeyRecord,
    pub key: Secret,
}

/// Creates and stores a key named `name`. Names are unique among live keys, so a name
/// always means one key (to revoke it, above all).
pub async fn create(store: &Store, name: &str, now: UnixMillis) -> Result<NewKey, KeyError> {
    if name.is_empty() || name.len() > 64 {
        return Err(KeyError::Name(name.to_owned()));
    }
    if let Some(taken) =
        store.api_keys().await?.into_iter().find(|k| k.revoked_at.is_none() && k.name == name)
    {
        return Err(KeyError::NameTaken { name: name.to_owned(), id: taken.id });
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

/// Revokes the one live key whose id, else whose name, is `id_or_name`, and returns its id;
/// `None` when no live key has it. A name two live keys share (a store from before names were
/// unique) revokes neither: the ids are asked for.
pub async fn revoke(
    store: &Store,
    id_or_name: &str,
    now: UnixMillis,
) -> Result<Option<String>, KeyError> {
    let live: Vec<ApiKeyRecord> =
        store.api_keys().await?.into_iter().filter(|k| k.revoked_at.is_none()).collect();
    let id = if let Some(key) = live.iter().find(|k| k.id == id_or_name) {
        key.id.clone()
    } else {
        let named: Vec<&ApiKeyRecord> = live.iter().filter(|k| k.name == id_or_name).collect();
        match named.as_slice() {
            [] => return Ok(None),
            [one] => one.id.clone(),
            many => {
                return Err(KeyError::Ambiguous {
                    name: id_or_name.to_owned(),
                    ids: many.iter().map(|k| k.id.clone()).collect(),
                });
            }
        }
    };
    Ok(store.revoke_api_key(&id, now).await?.then_some(id))
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key name {0:?} must be 1 to 64 characters")]
    Name(String),
    #[error("a live key is already named {name:?} ({id}): choose another name, or revoke it first")]
    NameTaken { name: String, id: String },
    #[error("{} live keys are named {name:?}: revoke one by its id ({})", ids.len(), ids.join(", "))]
    Ambiguous { name: String, ids: Vec<String> },
    #[error(
        "the management token file {} may be read by other users (mode {mode:o}): run `chmod 600 {}` and start again; the token in it may have been seen, rotate it with `switchyard keys rotate-management-token`",
        path.display(), path.display()
    )]
    TokenFileOpen { path: PathBuf, mode: u32 },
    #[error("the operating system gave no randomness: {0}")]
    Random(getrandom::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("keys live in the state file, which is not available (the app runs in memory only)")]
    NoStore,
    #[error("cannot write {path} (owner-only): {source}")]
    TokenFile { path: PathBuf, source: std::io::Error },
}

/// Where a client whose `Authorization` is its own upstream credential sends the local key:
/// the front door reads the key there, the request path knows a login by it, and `connect`
/// writes it into the clients' settings, so it lives below all three.
pub const SIDE_KEY_HEADER: &str = "x-switchyard-key";

/// The environment variable that sets the management token.
pub const MANAGEMENT_ENV: &str = "SWITCHYARD_MANAGEMENT_TOKEN";

/// The management token's file in the data directory.
pub const MANAGEMENT_FILE: &str = "management-token";

/// The management token: from [`MANAGEMENT_ENV`], else from the data directory's
/// [`MANAGEMENT_FILE`] (see [`token_from_file`]).
pub fn management_token(data_dir: &Path) -> Result<Secret, KeyError> {
    match env_token() {
        Some(token) => Ok(token),
        None => token_from_file(data_dir),
    }
}

/// Who may call the management API: the token from [`MANAGEMENT_ENV`], else the one in the
/// data directory's file, followed as it is rotated (see [`LocalKeys::management`]).
pub fn management_keys(data_dir: &Path) -> Result<LocalKeys, KeyError> {
    match env_token() {
        Some(token) => Ok(LocalKeys::new(Some(token))),
        None => Ok(LocalKeys::management(data_dir, token_from_file(data_dir)?)),
    }
}

fn env_token() -> Option<Secret> {
    std::env::var(MANAGEMENT_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Secret::new(t.trim()))
}

/// The token in the data directory's [`MANAGEMENT_FILE`], created (owner-only) on first use.
/// A file other users may read is refused: whoever read it holds the whole management API.
pub fn token_from_file(data_dir: &Path) -> Result<Secret, KeyError> {
    let path = data_dir.join(MANAGEMENT_FILE);
    if let Ok(metadata) = std::fs::metadata(&path) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(KeyError::TokenFileOpen { path, mode });
            }
        }
        #[cfg(not(unix))]
        let _ = metadata;
        if let Ok(token) = std::fs::read_to_string(&path)
            && !token.trim().is_empty()
        {
            return Ok(Secret::new(token.trim()));
        }
    }
    let token = generate()?;
    write_owner_only(data_dir, &path, &token)?;
    Ok(token)
}

/// Whether only the owner may read `path` (always true where permissions are not Unix's).
fn owner_only(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode().trailing_zeros() >= 6)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        true
    }
}

/// Replaces the management token with a new one and returns it. The file is replaced whole
/// (written to a temporary owner-only file, then renamed over the old one), so no reader ever
/// sees half a token, and a running server takes the new one at its next check.
pub fn rotate_management_token(data_dir: &Path) -> Result<Secret, KeyError> {
    let token = generate()?;
    write_owner_only(data_dir, &data_dir.join(MANAGEMENT_FILE), &token)?;
    Ok(token)
}

/// The data directory's key for the digests that name a client's login (`proxy::login`): the
/// same across restarts, so a login's bench outlives one, and of this directory alone, so a
/// digest seen in a trace cannot be checked against a guessed token elsewhere.
pub const LOGIN_SALT_FILE: &str = "login-salt";

/// The login digests' key: the data directory's [`LOGIN_SALT_FILE`], made (owner-only) on
/// first use. When it cannot be read or written, a key of this process alone, with a warning:
/// logins are then benched until a restart at most.
pub fn login_salt(data_dir: &Path) -> Secret {
    let path = data_dir.join(LOGIN_SALT_FILE);
    if let Ok(text) = std::fs::read_to_string(&path)
        && !text.trim().is_empty()
    {
        return Secret::new(text.trim());
    }
    let made = random_token::<32>("").and_then(|salt| {
        write_owner_only(data_dir, &path, &salt)?;
        Ok(salt)
    });
    made.unwrap_or_else(|error| {
        tracing::warn!(%error, "no login salt in the data directory: logins are scoped for this run only");
        random_token::<32>("").expect("the OS gives random bytes")
    })
}

fn write_owner_only(data_dir: &Path, path: &Path, token: &Secret) -> Result<(), KeyError> {
    let failed = |source| KeyError::TokenFile { path: path.to_owned(), source };
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(KeyError::Random)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(MANAGEMENT_FILE);
    let temporary = data_dir.join(format!(".{name}.{}", u64::from_le_bytes(suffix)));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = std::fs::create_dir_all(data_dir)
        .and_then(|()| options.open(&temporary))
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, token.expose().as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.map_err(failed)
}

/// A fresh random token: `sy-` and 32 random bytes in hex.
pub(crate) fn generate() -> Result<Secret, KeyError> {
    random_token::<32>("sy-")
}

/// `prefix` and `N` random bytes in hex.
pub(crate) fn random_token<const N: usize>(prefix: &str) -> Result<Secret, KeyError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(KeyError::Random)?;
    let mut text = String::with_capacity(prefix.len() + 2 * N);
    text.push_str(prefix);
    for b in bytes {
        let _ = write!(text, "{b:02x}");
    }
    Ok(Secret::new(text))
}

/// The digest keys are kept and looked up by: a presented key is hashed, never compared.
pub(crate) fn sha256_hex(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

/// The set of keys the server accepts right now. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct LocalKeys {
    /// Each live key's digest, and who it is.
    digests: Arc<RwLock<HashMap<String, LocalKey>>>,
    preset: Arc<RwLock<Option<String>>>,
    /// Where the preset comes from when it is the management token file: followed, so a
    /// rotated token takes effect at once and the old one stops working.
    file: Option<Arc<TokenFile>>,
    /// One reload at a time: a reload that read the store before a key was created must not
    /// write its stale set after the creating request's own reload wrote the new one (the
    /// periodic reload raced `POST /api/keys`, and the new key was refused for two seconds).
    reloading: Arc<tokio::sync::Mutex<()>>,
}

/// The management token file as last read.
#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    seen: Mutex<Option<Stamp>>,
}

/// What tells a replaced file from the one read: a rotation renames a new file over it.
type Stamp = (Option<SystemTime>, u64, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    let metadata = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
    #[cfg(not(unix))]
    let inode = 0;
    Some((metadata.modified().ok(), metadata.len(), inode))
}

impl LocalKeys {
    /// Accepts `preset` (from [`PRESET_ENV`]) in addition to whatever [`Self::reload`] loads.
    pub fn new(preset: Option<Secret>) -> Self {
        Self {
            digests: Arc::default(),
            preset: Arc::new(RwLock::new(preset.map(|p| sha256_hex(p.expose())))),
            file: None,
            reloading: Arc::default(),
        }
    }

    /// Accepts `token`, read from `data_dir`'s [`MANAGEMENT_FILE`], and whatever that file
    /// holds later: checked (one `stat`) on each management request.
    pub fn management(data_dir: &Path, token: Secret) -> Self {
        let path = data_dir.join(MANAGEMENT_FILE);
        let seen = Mutex::new(stamp(&path));
        Self { file: Some(Arc::new(TokenFile { path, seen })), ..Self::new(Some(token)) }
    }

    /// Rereads the token file when it was replaced since it was last read.
    fn follow(&self) {
        let Some(file) = &self.file else { return };
        let now = stamp(&file.path);
        let mut seen = file.seen.lock();
        if *seen == now {
            return;
        }
        *seen = now;
        // A file that vanished or was emptied accepts nothing until a token is back; so does
        // one other users may read (the check `token_from_file` makes at start, made again on
        // every reload: a replaced file is not trusted more than the first one was).
        let token = owner_only(&file.path)
            .then(|| std::fs::read_to_string(&file.path).ok())
            .flatten()
            .filter(|t| !t.trim().is_empty());
        if token.is_none() && file.path.exists() {
            tracing::warn!(path = %file.path.display(), "the management token file is not owner-only (chmod 600) or empty: no management token is accepted until it is");
        }
        *self.preset.write() = token.map(|t| sha256_hex(t.trim()));
    }

    /// Replaces the stored keys with the live ones in `store`.
    pub async fn reload(&self, store: &Store) -> Result<usize, StoreError> {
        let _one_at_a_time = self.reloading.lock().await;
        let live: HashMap<String, LocalKey> = store
            .api_keys()
            .await?
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .map(|k| (k.sha256, LocalKey { id: Arc::from(k.id), name: Arc::from(k.name) }))
            .collect();
        let count = live.len();
        *self.digests.write() = live;
        Ok(count)
    }

    /// Whether `presented` is a live key.
    pub fn accepts(&self, presented: &str) -> bool {
        self.identify(presented).is_some()
    }

    /// The live key `presented` is, if it is one.
    pub fn identify(&self, presented: &str) -> Option<LocalKey> {
        self.follow();
        let digest = sha256_hex(presented);
        if self.preset.read().as_deref() == Some(digest.as_str()) {
            return Some(LocalKey::preset());
        }
        self.digests.read().get(&digest).cloned()
    }

    /// The digest of the token set at start or read from the file (as it is now): what a UI
    /// session belongs to, so that rotating the token ends the sessions opened with the old one.
    pub(crate) fn token_digest(&self) -> Option<String> {
        self.follow();
        self.preset.read().clone()
    }

    /// Whether any key could be accepted at all (if not, `serve` says how to make one).
    pub fn is_empty(&self) -> bool {
        self.preset.read().is_none() && self.digests.read().is_empty()
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
        let known = keys.identify(new.key.expose()).unwrap();
        assert_eq!((&*known.id, &*known.name), (new.record.id.as_str(), "editor"));

        let stored = store.api_keys().await.unwrap();
        assert!(
            stored
                .iter()
                .all(|k| k.sha256 != new.key.expose() && !k.sha256.contains(new.key.expose()))
        );

        assert_eq!(revoke(&store, "editor", UnixMillis(2)).await.unwrap(), Some(new.record.id));
        keys.reload(&store).await.unwrap();
        assert!(!keys.accepts(new.key.expose()));
    }

    #[tokio::test]
    async fn a_name_a_live_key_has_is_not_given_to_another_and_a_revoked_ones_may_be() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).await.unwrap();
        let first = create(&store, "editor", UnixMillis(1)).await.unwrap();
        let error = create(&store, "editor", UnixMillis(2)).await.unwrap_err().to_string();
        assert!(error.contains(&first.record.id) && error.contains("revoke it first"), "{error}");
        revoke(&store, "editor", UnixMillis(3)).await.unwrap();
        assert!(create(&store, "editor", UnixMillis(4)).await.is_ok());
    }

    #[tokio::test]
    async fn revoking_a_name_two_live_keys_share_revokes_neither_and_asks_for_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).await.unwrap();
        // Two keys of one name, as stores from before names were unique may hold.
        for (id, at) in [("key_a", 1), ("key_b", 2)] {
            let record = ApiKeyRecord {
                id: id.to_owned(),
                name: "editor".to_owned(),
                sha256: format!("{id}-digest"),
                hint: "…abcd".to_owned(),
                created_at: UnixMillis(at),
                revoked_at: None,
            };
            store.create_api_key(&record).await.unwrap();
        }
        let error = revoke(&store, "editor", UnixMillis(3)).await.unwrap_err().to_string();
        assert!(error.contains("key_a") && error.contains("key_b"), "{error}");
        assert!(store.api_keys().await.unwrap().iter().all(|k| k.revoked_at.is_none()));
        assert_eq!(revoke(&store, "key_b", UnixMillis(4)).await.unwrap(), Some("key_b".into()));
        let live: Vec<String> = store
            .api_keys()
            .await
            .unwrap()
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .map(|k| k.id)
            .collect();
        assert_eq!(live, ["key_a"]);
        assert_eq!(revoke(&store, "nobody", UnixMillis(5)).await.unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_may_read_is_refused_naming_the_file_and_the_fix() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANAGEMENT_FILE);
        std::fs::write(&path, "sy-shared").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = token_from_file(dir.path()).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains(&format!("chmod 600 {}", path.display())), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(token_from_file(dir.path()).unwrap().expose(), "sy-shared");
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_replaced_by_one_others_may_read_is_not_trusted_on_reload() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let old = token_from_file(dir.path()).unwrap();
        let accepted = LocalKeys::management(dir.path(), old.clone());
        assert!(accepted.accepts(old.expose()));
        // Another hand swaps in a world-readable file with a token of its own.
        let planted = dir.path().join("planted");
        std::fs::write(&planted, "sy-planted-token").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&planted, dir.path().join(MANAGEMENT_FILE)).unwrap();
        assert!(!accepted.accepts("sy-planted-token"), "the 0600 check holds on reload");
        assert!(!accepted.accepts(old.expose()), "the file no longer holds the old token");
    }

    #[cfg(unix)]
    #[test]
    fn a_rotated_token_replaces_the_old_one_owner_only_and_the_server_follows_at_once() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let old = token_from_file(dir.path()).unwrap();
        let accepted = LocalKeys::management(dir.path(), old.clone());
        assert!(accepted.accepts(old.expose()));
        let new = rotate_management_token(dir.path()).unwrap();
        assert_ne!(new.expose(), old.expose());
        let path = dir.path().join(MANAGEMENT_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), new.expose());
        assert!(!accepted.accepts(old.expose()), "the old token stops working");
        assert!(accepted.accepts(new.expose()));
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
    }

    #[test]
    fn a_preset_key_is_accepted_without_a_store() {
        let keys = LocalKeys::new(Some(Secret::new("sy-preset")));
        assert!(keys.accepts("sy-preset"));
        assert_eq!(keys.identify("sy-preset").map(|k| k.name), Some(Arc::from(PRESET_KEY)));
        assert!(!keys.accepts("sy-other"));
    }
}
