//! Live edits of the running config: the one way the management API changes providers,
//! credentials, combos and settings.
//!
//! An edit is a function over a copy of the running [`ConfigForm`]. The edited form is then
//! validated whole (secrets resolved), its confirmed bindings recorded, and saved: the editor
//! returns it [`Accepted`], and whoever runs the config applies it (the services swap the
//! proxy's routing table). The editor never reaches into what runs the config, so the request
//! path and the editor stay apart. Invariants:
//! - Edits take turns: two concurrent edits never both start from the same form. A [`Turn`] is
//!   held from reading the running config until the accepted edit is applied.
//! - An edit that fails at any step (the change itself, validation, saving) changes nothing:
//!   not the running config, not the saved one.
//! - Requests in flight finish on the config they started with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard_core::binding::{self, Binding, Confirmed};
use switchyard_core::{Clock, CredentialKey};
use switchyard_secrets::SecretStore;
use switchyard_store::Store;

use super::stored::{self, ReadOnly};
use super::{Config, ConfigForm, Problem, Sources};

/// Reads environment variables for `env:` secrets (the process environment, or a test's).
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where an accepted edit is saved, so it survives a restart.
#[derive(Clone, Debug)]
pub enum Saving {
    /// The `--config` file: rewritten whole (atomically) on every edit.
    File(PathBuf),
    /// The state file's `config` section (no `--config` given).
    Store(Store),
    /// Nowhere: the state file's config is more than this build understands (a newer version
    /// wrote it), and saving would lose that. Edits are refused.
    ReadOnly(ReadOnly),
    /// Nowhere: the state file could not be opened. Edits apply until the app stops.
    Nowhere,
}

/// Why an edit was refused. Nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// A field breaks a rule (422).
    #[error("{0}")]
    Invalid(Problem),
    /// The edit names something that does not exist (404).
    #[error("{0}")]
    NotFound(Problem),
    /// The edit clashes with what exists (409): a duplicate name, a provider combos still use.
    #[error("{0}")]
    Conflict(Problem),
    /// A provider did not answer a call made on the user's behalf (502).
    #[error("{0}")]
    Upstream(Problem),
    /// The config is read-only here (409): a newer version wrote it.
    #[error("{0}")]
    ReadOnly(String),
    /// The edit was valid but could not be saved, so it was not applied either.
    #[error("the change could not be saved, so it was not applied: {0}")]
    Save(String),
}

impl From<Problem> for EditError {
    fn from(problem: Problem) -> Self {
        Self::Invalid(problem)
    }
}

/// Which of the bindings an edit introduces (destinations its requests go to, secret
/// reference and destination pairs) the user confirmed with it: the credential and the
/// binding are asked. Only an explicit act of the user confirms (a secret typed for this
/// credential, `confirm` in an API call made with the management token); a binding not
/// confirmed leaves its credential benched as unconfirmed.
pub type Confirms<'a> = &'a (dyn Fn(&CredentialKey, &Binding) -> bool + Send + Sync);

/// Confirms nothing: the default for every edit.
pub const CONFIRMS_NOTHING: Confirms<'static> = &|_, _| false;

/// Owns edits of the running config: their turns, their validation, where they are saved.
pub struct ConfigEditor {
    secrets: Arc<dyn SecretStore>,
    env: Env,
    saving: Saving,
    clock: Arc<dyn Clock>,
    turn: tokio::sync::Mutex<()>,
    /// Where confirmed bindings are recorded: the state file, whichever way the config is
    /// saved.
    bindings: Option<Store>,
}

impl std::fmt::Debug for ConfigEditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigEditor")
            .field("saving", &self.saving)
            .field("secrets", &self.secrets.backend())
            .finish_non_exhaustive()
    }
}

impl ConfigEditor {
    pub fn new(
        secrets: Arc<dyn SecretStore>,
        env: Env,
        saving: Saving,
        clock: Arc<dyn Clock>,
        bindings: Option<Store>,
    ) -> Self {
        Self { secrets, env, saving, clock, turn: tokio::sync::Mutex::new(()), bindings }
    }

    /// Waits for the edits before to be done. Read the running config once it is taken, and
    /// drop it once what it accepted is applied: the next edit then starts from that.
    pub async fn turn(&self) -> Turn<'_> {
        Turn { editor: self, _held: self.turn.lock().await }
    }

    /// Where secrets written through the API go.
    pub fn secrets(&self) -> &Arc<dyn SecretStore> {
        &self.secrets
    }

    pub fn saving(&self) -> &Saving {
        &self.saving
    }

    /// Reads `key`'s secret in `config` (the running one) again now, off the runtime's threads
    /// (keychain and file reads).
    pub async fn retry_secret(&self, config: Arc<Config>, key: &CredentialKey) {
        let (secrets, env, now, key) =
            (Arc::clone(&self.secrets), Arc::clone(&self.env), self.clock.now(), key.clone());
        let changed = tokio::task::spawn_blocking(move || {
            config.refresh_secrets(
                &Sources { env: &*env, secrets: Some(&*secrets), defer_keychain: false },
                now,
                Some(&key),
            )
        })
        .await
        .unwrap_or_default();
        for (key, refreshed) in changed {
            super::log_refreshed(&key, &refreshed);
        }
    }

    /// Stores confirmed bindings (before they take effect: a binding is never used
    /// unrecorded).
    async fn record(&self, pairs: &[Binding]) -> Result<(), EditError> {
        match (&self.bindings, pairs.is_empty()) {
            (_, true) | (None, _) => Ok(()),
            (Some(store), false) => store
                .confirm_bindings(pairs, self.clock.now())
                .await
                .map_err(|e| EditError::Save(format!("cannot record the confirmation: {e}"))),
        }
    }

    /// Validates `form` with every secret resolved, without applying it.
    pub async fn check(&self, form: ConfigForm) -> Result<Config, Problem> {
        validate(form, Arc::clone(&self.secrets), Arc::clone(&self.env), self.clock.now()).await
    }

    async fn save(&self, form: &ConfigForm) -> Result<(), String> {
        match &self.saving {
            Saving::File(path) => {
                let path = path.clone();
                let text = form.to_toml();
                tokio::task::spawn_blocking(move || write_atomically(&path, &text))
                    .await
                    .map_err(|e| e.to_string())?
            }
            Saving::Store(store) => {
                stored::save(store, form, self.clock.now()).await.map_err(|e| e.to_string())
            }
            Saving::ReadOnly(read_only) => Err(read_only.message.clone()),
            Saving::Nowhere => {
                tracing::warn!("config changed in memory only: the state file is not available");
                Ok(())
            }
        }
    }
}

/// The editor's turn (see [`ConfigEditor::turn`]). Each edit made with it starts from the
/// `running` config and `confirmed` bindings its caller passes: the ones in force now.
pub struct Turn<'a> {
    editor: &'a ConfigEditor,
    _held: tokio::sync::MutexGuard<'a, ()>,
}

impl std::fmt::Debug for Turn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("editor", self.editor).finish_non_exhaustive()
    }
}

/// An edit validated, its bindings recorded and its form saved: to be applied while the turn
/// that accepted it is held.
#[derive(Debug)]
#[must_use = "an accepted edit is saved but does not run until it is applied"]
pub struct Accepted {
    /// The config to route by from now on.
    pub config: Arc<Config>,
    /// The bindings confirmed with it, recorded already: they join the confirmed ones before
    /// `config` is applied, so the routing table built for it uses them.
    pub confirmed: Vec<Binding>,
}

impl Turn<'_> {
    /// Applies `change` to a copy of `running`'s form; validates and saves the result.
    /// Returns what `change` returned and the edit, to apply.
    pub async fn edit<T>(
        &self,
        running: &Config,
        confirmed: &Confirmed,
        confirms: Confirms<'_>,
        change: impl FnOnce(&mut ConfigForm) -> Result<T, EditError>,
    ) -> Result<(T, Accepted), EditError> {
        self.writable()?;
        let mut form = running.form.clone();
        let out = change(&mut form)?;
        let accepted = self.commit(form, confirmed, confirms).await?;
        Ok((out, accepted))
    }

    /// Replaces the whole config (an import), confirming the new bindings `confirms` accepts.
    pub async fn replace(
        &self,
        form: ConfigForm,
        confirmed: &Confirmed,
        confirms: Confirms<'_>,
    ) -> Result<Accepted, EditError> {
        self.writable()?;
        self.commit(form, confirmed, confirms).await
    }

    /// Records every binding the `running` config's credentials still need that `confirms`
    /// accepts; returns them, to be added to the confirmed ones (credentials they complete are
    /// used from the next routing table built).
    pub async fn confirm(
        &self,
        running: &Config,
        confirmed: &Confirmed,
        confirms: Confirms<'_>,
    ) -> Result<Vec<Binding>, EditError> {
        let new = pairs_to_confirm(running, confirmed, confirms);
        self.editor.record(&new).await?;
        Ok(new)
    }

    /// Refuses every edit of a config that is read-only here.
    fn writable(&self) -> Result<(), EditError> {
        match &self.editor.saving {
            Saving::ReadOnly(read_only) => Err(EditError::ReadOnly(read_only.message.clone())),
            _ => Ok(()),
        }
    }

    async fn commit(
        &self,
        form: ConfigForm,
        confirmed: &Confirmed,
        confirms: Confirms<'_>,
    ) -> Result<Accepted, EditError> {
        // Even an unchanged form is validated and applied again: a secret it references may
        // have changed in the keychain.
        let config = Arc::new(self.editor.check(form).await?);
        let new = pairs_to_confirm(&config, confirmed, confirms);
        self.editor.record(&new).await?;
        self.editor.save(&config.form).await.map_err(EditError::Save)?;
        Ok(Accepted { config, confirmed: new })
    }
}

/// The bindings `config` needs that are not in `confirmed` and that `confirms` accepts.
fn pairs_to_confirm(
    config: &Config,
    confirmed: &Confirmed,
    confirms: Confirms<'_>,
) -> Vec<Binding> {
    let mut pairs: Vec<Binding> = Vec::new();
    for unconfirmed in binding::unconfirmed(&config.exposures(), confirmed) {
        for pair in unconfirmed.missing {
            if confirms(&unconfirmed.key, &pair) && !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    pairs
}

/// How long the app's start or an edit waits for the keychain to answer: milliseconds when it
/// is unlocked; a locked one shows an unlock prompt and answers when (if) the user does.
pub const KEYCHAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Validates on a blocking thread, then reads the credentials' keychain secrets on another,
/// waiting for them up to [`KEYCHAIN_WAIT`]: a keychain that does not answer by then (locked,
/// its unlock prompt up) leaves its credentials waiting, and the read goes on; once it is
/// answered they serve.
pub(crate) async fn validate(
    form: ConfigForm,
    secrets: Arc<dyn SecretStore>,
    env: Env,
    now: switchyard_core::UnixMillis,
) -> Result<Config, Problem> {
    let (store, variables) = (Arc::clone(&secrets), Arc::clone(&env));
    let config = tokio::task::spawn_blocking(move || {
        form.validate(&Sources { env: &*variables, secrets: Some(&*store), defer_keychain: true })
    })
    .await
    .map_err(|e| Problem::new("(config)", format!("validation stopped: {e}")))??;
    let unread = config.unread_secrets();
    if !unread.is_empty() {
        let reading = tokio::task::spawn_blocking(move || {
            let sources = switchyard_secrets::live::Sources { env: &*env, store: Some(&*secrets) };
            for secret in unread {
                let _ = secret.refresh(sources, now.0, true);
            }
        });
        if tokio::time::timeout(KEYCHAIN_WAIT, reading).await.is_err() {
            tracing::warn!(
                "the OS keychain has not answered in {} s (locked, with an unlock prompt \
                 waiting?): its credentials wait for it, the rest serves",
                KEYCHAIN_WAIT.as_secs()
            );
        }
    }
    Ok(config)
}

/// Writes `text` to `path` so that a crash leaves either the old file or the new one. The
/// temporary file has a random name (created exclusively, owner-only: nothing can be planted at
/// a predictable path beside the config for us to write through) and takes the old file's
/// permissions before it replaces it, so a config the user made private stays private.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    write_atomically_like(path, text, path)
}

/// [`write_atomically`], the new file taking `like`'s permissions (when it exists) instead of
/// `path`'s: a backup keeps the mode of the file it backs up.
pub fn write_atomically_like(path: &Path, text: &str, like: &Path) -> Result<(), String> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let written = (|| {
        let mut temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".switchyard-tmp")
            .tempfile_in(dir)?;
        if let Ok(old) = std::fs::metadata(like) {
            temp.as_file().set_permissions(old.permissions())?;
        }
        temp.write_all(text.as_bytes())?;
        temp.as_file().sync_all()?;
        // A failed write drops `temp`, which removes it.
        temp.persist(path).map_err(|e| e.error)?;
        Ok::<(), std::io::Error>(())
    })();
    written.map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_rewritten_config_keeps_its_permissions_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("switchyard.toml");
        std::fs::write(&path, "old").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        write_atomically(&path, "new").expect("rewrite");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the rewrite widened a private config to {mode:o}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(left.len(), 1, "only the config is left: {left:?}");
    }

    #[test]
    fn the_temporary_file_is_not_at_a_predictable_path() {
        // A file (or a symlink) planted where the old fixed temporary name was is neither
        // written through nor in the way.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("switchyard.toml");
        let planted = dir.path().join(".switchyard.toml.switchyard-tmp");
        std::fs::write(&planted, "planted").expect("plant");
        write_atomically(&path, "new").expect("write");
        assert_eq!(std::fs::read_to_string(&planted).expect("read"), "planted");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
    }
}
