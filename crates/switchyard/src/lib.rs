//! The Switchyard app: the composition root and the localhost server.
//!
//! Everything heavy has one owner and is built here, once: the [`HealthRegistry`] (hot routing
//! state, in memory), the [`Persistence`] that restores it from and keeps it in `SQLite`, the
//! [`Proxy`] (planner, attempt loop, HTTP client) and the clock every decision reads. The CLI,
//! the tests and later the desktop shell all run an [`App`].

pub mod config;
pub mod connect;
pub mod descriptors;
pub mod keys;
pub mod oauth;
pub mod phases;
pub mod proxy;
pub mod requests;
pub mod running;
pub mod server;
pub mod services;
pub mod status;
pub mod team;
pub mod usage;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard_catalogue::local::LocalPorts;
use switchyard_core::binding::{self, Binding, Confirmed};
use switchyard_core::resilience::HealthRegistry;
use switchyard_core::{Clock, SystemClock};
use switchyard_providers::executor::Executor;
use switchyard_secrets::{KeychainStore, SecretStore};
use switchyard_store::team::Team;
use switchyard_store::{Persistence, PersistenceStatus, Store, StoreError};

use crate::config::editor::Env;
use crate::config::stored::{self, StoredConfig};
use crate::config::{Config, ConfigEditor, ConfigError, ConfigForm, Saving};
use crate::keys::LocalKeys;
use crate::oauth::{OAuth, OAuthOptions};
use crate::proxy::Proxy;
use crate::requests::RequestLog;
use crate::server::ServerState;
use crate::services::Services;
use crate::usage::UsageTracker;

/// The file name of the state database inside the data directory.
pub const STATE_FILE: &str = "switchyard.db";

/// Where this machine's model servers are looked for (`GET /api/local-servers`, `switchyard
/// providers detect`) instead of their default ports: `ollama:11434,lmstudio:1234`, or `none`.
pub const LOCAL_PORTS_ENV: &str = "SWITCHYARD_LOCAL_PORTS";

/// Where the config comes from, and where edits made through the API go.
#[derive(Clone, Debug)]
pub enum ConfigSource {
    /// A `--config` file: read at start, rewritten on every edit.
    File(PathBuf),
    /// The state file (the desktop app, or `serve` without `--config`); empty at first.
    Stored,
}

/// What an [`App`] starts from. [`Launch::new`] has the defaults: the config in the state
/// file, the system clock, the OS keychain and the process environment.
#[derive(Clone)]
pub struct Launch {
    pub data_dir: PathBuf,
    pub config: ConfigSource,
    pub clock: Arc<dyn Clock>,
    pub secrets: Arc<dyn SecretStore>,
    pub env: Env,
    /// How many requests the Requests page reads from memory before it reads the state file.
    pub request_ring: usize,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("data_dir", &self.data_dir)
            .field("config", &self.config)
            .field("secrets", &self.secrets.backend())
            .finish_non_exhaustive()
    }
}

impl Launch {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            config: ConfigSource::Stored,
            clock: Arc::new(SystemClock),
            secrets: Arc::new(KeychainStore::new()),
            env: Arc::new(|var| std::env::var(var).ok()),
            request_ring: requests::RING,
        }
    }

    /// Keeps `n` requests in memory (a test's small ring: older pages come from the file).
    #[must_use]
    pub fn request_ring(mut self, n: usize) -> Self {
        self.request_ring = n;
        self
    }

    #[must_use]
    pub fn config_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.config = ConfigSource::File(file.into());
        self
    }

    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    #[must_use]
    pub fn secrets(mut self, secrets: Arc<dyn SecretStore>) -> Self {
        self.secrets = secrets;
        self
    }

    #[must_use]
    pub fn env(mut self, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        self.env = Arc::new(env);
        self
    }
}

/// The running app's shared state.
#[derive(Debug)]
pub struct App {
    registry: Arc<HealthRegistry>,
    persistence: Persistence,
    /// Team mode: the sync task with the team's database, when `[team]` names one.
    team: Option<Team>,
    /// Background upkeep (OAuth retries); stopped with the app.
    upkeep: tokio::task::JoinHandle<()>,
    /// Reads again the secrets that could not be read, and file secrets whose file changed.
    secrets_upkeep: tokio::task::JoinHandle<()>,
    proxy: Arc<Proxy>,
    services: Arc<Services>,
    clock: Arc<dyn Clock>,
    data_dir: PathBuf,
}

impl App {
    /// Loads the config, configures the health registry from it, restores its state from the
    /// data directory and starts persisting it. A config that does not validate stops the start
    /// with an error naming the field; a bad state file never does: the app then runs in memory
    /// only and [`App::persistence_status`] says why.
    #[expect(
        clippy::too_many_lines,
        reason = "one start, read top to bottom as its phases, each timed where it ends"
    )]
    pub async fn start(launch: Launch) -> Result<Self, ConfigError> {
        let Launch { data_dir, config: source, clock, secrets, env, request_ring } = launch;
        let mut phases = phases::Phases::start();
        let local_ports = match env(LOCAL_PORTS_ENV).filter(|spec| !spec.trim().is_empty()) {
            None => LocalPorts::default(),
            Some(spec) => LocalPorts::parse(&spec)
                .map_err(|problem| ConfigError::Environment { var: LOCAL_PORTS_ENV, problem })?,
        };
        let state_file = data_dir.join(STATE_FILE);
        let registry = Arc::new(HealthRegistry::default());
        // The config first: its policies clamp restored deadlines. The stored config is read
        // through a short-lived connection, before the writer owns the file.
        let (mut stored, origin) = match &source {
            ConfigSource::File(file) => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| ConfigError::Read { file: file.clone(), source: e })?;
                let form = ConfigForm::from_toml(&text).map_err(|p| p.in_file(file))?;
                refuse_too_new(&state_file).await?;
                (StoredConfig { form, read_only: None }, file.clone())
            }
            ConfigSource::Stored => (stored_config(&state_file).await?, state_file.clone()),
        };
        let config = stored::validate_read_only(&mut stored, async |form| {
            config::editor::validate(form, Arc::clone(&secrets), Arc::clone(&env), clock.now())
                .await
        })
        .await
        .map_err(|p| p.in_file(&origin))?;
        if let Some(read_only) = &stored.read_only {
            tracing::warn!(set_aside = ?read_only.set_aside, "{}", read_only.message);
        }
        for (key, why) in config.unavailable_secrets() {
            tracing::warn!(
                credential = %format!("{}/{}", key.provider, key.credential),
                %why,
                "this credential's secret cannot be read: it is out until it can (read again \
                 every few seconds; Retry now on the Providers page); the rest serves"
            );
        }
        let config = Arc::new(config);
        proxy::configure_registry(&registry, &config);
        phases.done("config read and validated");
        // The HTTP client loads the system's root certificates (milliseconds of file reads):
        // on a blocking thread, while the state file is restored.
        let connect = config.timeouts.connect;
        let executor = tokio::task::spawn_blocking(move || Executor::new(connect));
        // The writer starts once the app is ready (below): its first write of every entry would
        // otherwise hold the file while this start writes it too.
        let mut persistence = Persistence::restore(state_file, &registry, clock.now()).await;
        phases.done("state file opened, health restored");
        let usage = Arc::new(UsageTracker::new(Arc::clone(&clock), Arc::clone(&registry)));
        usage.configure(&config);
        if let Some(store) = persistence.store() {
            load_usage(store, &usage).await;
        }
        let log = RequestLog::start(persistence.store().cloned(), usage, request_ring).await;
        phases.done("usage and the request log restored");
        // One HTTP client (one pool, one root store) for upstreams and identity providers.
        let executor = executor
            .await
            .expect("building the HTTP client does not panic")
            .expect("the HTTP client builds with static settings");
        phases.done("HTTP client built");
        let oauth = OAuth::new(
            Arc::clone(&secrets),
            Arc::clone(&registry),
            Arc::clone(&clock),
            executor.clone(),
            OAuthOptions::default(),
        );
        let upkeep = tokio::spawn(oauth_upkeep(oauth.clone(), Arc::clone(&clock)));
        let confirmed = confirmed_bindings(persistence.store(), &config, clock.now()).await;
        phases.done("destination bindings read");
        let proxy = Proxy::new(
            config,
            Arc::clone(&registry),
            Arc::clone(&clock),
            log,
            oauth.clone(),
            &executor,
            confirmed,
            keys::login_salt(&data_dir),
        );
        if let Some(store) = persistence.store() {
            proxy.restore(store).await;
        }
        let proxy = Arc::new(proxy);
        let secrets_upkeep = tokio::spawn(secret_upkeep(
            Arc::clone(&proxy),
            Arc::clone(&secrets),
            Arc::clone(&env),
            Arc::clone(&clock),
        ));
        phases.done("sessions and quota headroom restored");
        let team = match &proxy.config().team {
            Some(team) => {
                let live = Arc::clone(&proxy);
                let started =
                    team::start(team, &registry, move || live.config(), Arc::clone(&clock));
                Some(started.expect("a new registry belongs to no team yet"))
            }
            None => None,
        };
        let saving = match (source, persistence.store(), stored.read_only) {
            (ConfigSource::File(file), ..) => Saving::File(file),
            // Nothing can be saved anyway, so edits apply in memory.
            (ConfigSource::Stored, None, _) => Saving::Nowhere,
            (ConfigSource::Stored, Some(_), Some(read_only)) => Saving::ReadOnly(read_only),
            (ConfigSource::Stored, Some(store), None) => Saving::Store(store.clone()),
        };
        let editor = ConfigEditor::new(
            secrets,
            env,
            saving,
            Arc::clone(&clock),
            persistence.store().cloned(),
        );
        let mut services = Services::new(
            Arc::clone(&registry),
            Arc::clone(&clock),
            persistence.store().cloned(),
            persistence.watch_status(),
            Arc::clone(&proxy),
            editor,
            oauth,
        );
        if let Some(team) = &team {
            services = services.with_team(team.watch_status());
        }
        services = services.with_local_ports(local_ports);
        persistence.write_behind();
        phases.done("services set up");
        Ok(Self {
            registry,
            persistence,
            team,
            upkeep,
            secrets_upkeep,
            proxy,
            services: Arc::new(services),
            clock,
            data_dir,
        })
    }

    pub fn registry(&self) -> &Arc<HealthRegistry> {
        &self.registry
    }

    /// The config requests start on now.
    pub fn config(&self) -> Arc<Config> {
        self.proxy.config()
    }

    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The state file, unless the app runs in memory only because it could not be opened.
    pub fn store(&self) -> Option<&Store> {
        self.persistence.store()
    }

    pub fn persistence_status(&self) -> PersistenceStatus {
        self.persistence.status()
    }

    /// What the server's handlers share. Starts keeping `keys` in step with the state file, so
    /// keys created or revoked with the CLI take effect within two seconds.
    pub fn server_state(&self, port: u16, keys: LocalKeys) -> ServerState {
        if let Some(store) = self.store().cloned() {
            let keys = keys.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(std::time::Duration::from_secs(2));
                loop {
                    every.tick().await;
                    if let Err(error) = keys.reload(&store).await {
                        tracing::warn!(%error, "cannot reload local API keys; keeping the last known set");
                    }
                }
            });
        }
        ServerState::from(server::Shared {
            port,
            ipv6: false,
            keys,
            management: LocalKeys::new(None),
            ui_sessions: server::UiSessions::default(),
            proxy: Arc::clone(&self.proxy),
            services: Arc::clone(&self.services),
            ui: None,
            connections: None,
        })
    }

    /// Binds `127.0.0.1:port` (0 picks a free port; `[::1]` on the same port too where the
    /// machine has it) and sets up the front door that goes with
    /// it: the local API keys from the state file (and [`keys::PRESET_ENV`]) and the
    /// management token from the data directory. What `serve` and the desktop app both run.
    pub async fn listen(&self, port: u16) -> Result<Listening, ListenError> {
        let listener = server::bind_loopback(port)
            .await
            .map_err(|source| ListenError::Bind { port, source })?;
        let port =
            listener.local_addr().map_err(|source| ListenError::Bind { port, source })?.port();
        let mut state = self.front_door(port).await?;
        state.ipv6 = listener.has_ipv6();
        Ok(Listening { listener, state })
    }

    /// The front door for `port` without a listener: the local API keys and the management
    /// token. The desktop window's API (in process) needs it even when the port could not be
    /// bound.
    pub async fn front_door(&self, port: u16) -> Result<ServerState, ListenError> {
        let preset = std::env::var(keys::PRESET_ENV)
            .ok()
            .filter(|k| !k.trim().is_empty())
            .map(switchyard_secrets::Secret::new);
        let local_keys = LocalKeys::new(preset);
        if let Some(store) = self.store() {
            local_keys.reload(store).await.map_err(ListenError::Keys)?;
        }
        if local_keys.is_empty() {
            tracing::warn!(
                "no local API key exists yet: create one with `switchyard keys create` (or set {})",
                keys::PRESET_ENV
            );
        }
        let management = keys::management_keys(&self.data_dir).map_err(ListenError::Token)?;
        let mut state = self.server_state(port, local_keys);
        state.management = management;
        Ok(state)
    }

    /// Whether the team's database answers, and who is in the team; `None` without a team.
    pub fn team_status(&self) -> Option<switchyard_store::team::TeamStatus> {
        self.team.as_ref().map(Team::status)
    }

    /// Writes out every pending state change (to the team's database too) and stops.
    pub async fn shutdown(self) {
        self.upkeep.abort();
        self.secrets_upkeep.abort();
        self.proxy.close().await;
        self.proxy.request_log().close().await;
        if let Some(team) = self.team {
            team.shutdown().await;
        }
        self.persistence.shutdown().await;
    }
}

/// A bound loopback listener and the front door that goes with it: ready to serve.
#[derive(Debug)]
pub struct Listening {
    pub listener: server::Loopback,
    pub state: ServerState,
}

impl Listening {
    pub fn port(&self) -> u16 {
        self.state.port
    }
}

/// Why [`App::listen`] could not get ready.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on 127.0.0.1:{port} (pass --port to choose another): {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("cannot read the local API keys from the state file: {0}")]
    Keys(StoreError),
    #[error("cannot set up the management token: {0}")]
    Token(keys::KeyError),
}

/// How often credentials benched because their identity provider was failing are tried again
/// (only where that provider's refresh breaker allows it; nothing is sent otherwise).
const OAUTH_RETRY_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

async fn oauth_upkeep(oauth: OAuth, clock: Arc<dyn Clock>) {
    let mut every = tokio::time::interval(OAUTH_RETRY_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let back = oauth.retry_expired(clock.now()).await;
        if back > 0 {
            tracing::info!(credentials = back, "OAuth credentials usable again");
        }
    }
}

/// How often the credentials' secrets are looked at: a file secret's file (one `stat`), and
/// whether a secret that could not be read is due to be read again (see `LiveSecret`).
const SECRETS_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps the running config's secrets readable: reads again, off the request path, those
/// that are due. A change takes effect on the next request; each is logged.
async fn secret_upkeep(
    proxy: Arc<Proxy>,
    secrets: Arc<dyn SecretStore>,
    env: Env,
    clock: Arc<dyn Clock>,
) {
    let mut every = tokio::time::interval(SECRETS_LOOK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let config = proxy.config();
        let now = clock.now();
        let due = config
            .providers
            .iter()
            .flat_map(|p| &p.credentials)
            .any(|c| c.secret.as_ref().is_some_and(|s| s.is_due(now.0)));
        if !due {
            continue;
        }
        let (secrets, env) = (Arc::clone(&secrets), Arc::clone(&env));
        let changed = tokio::task::spawn_blocking(move || {
            let sources =
                config::Sources { env: &*env, secrets: Some(&*secrets), defer_keychain: false };
            config.refresh_secrets(&sources, now, None)
        })
        .await
        .unwrap_or_default();
        for (key, refreshed) in changed {
            config::log_refreshed(&key, &refreshed);
        }
    }
}

/// Reads the usage aggregates still within retention from the state file into `usage`, with
/// every local key's name (revoked ones too) for the budgets. A file that cannot be read
/// starts the aggregates empty, and says so.
async fn load_usage(store: &Store, usage: &UsageTracker) {
    let ledger = match store.usage(usage.first_kept_hour()).await {
        Ok(ledger) => ledger,
        Err(error) => {
            tracing::warn!(%error, "cannot read the usage aggregates; they start empty");
            return;
        }
    };
    let names: std::collections::HashMap<String, String> = match store.api_keys().await {
        Ok(keys) => keys.into_iter().map(|k| (k.id, k.name)).collect(),
        Err(error) => {
            tracing::warn!(%error, "cannot read the local keys' names; key budgets start from zero");
            std::collections::HashMap::new()
        }
    };
    let name_of = |id: &str| {
        if id == keys::PRESET_KEY { Some(id.to_owned()) } else { names.get(id).cloned() }
    };
    usage.load(ledger, &name_of);
}

/// The settings section that marks "trust on first use" of secret bindings as done: from
/// then on, a pair new at start (a hand-edited config file, a CLI import) is unconfirmed like
/// any other.
pub const FIRST_USE: (&str, u32) = ("secret_bindings", 1);

/// The same for destination bindings, marked by the first start of the version
/// that added them: from then on, a destination new at start is unconfirmed like any other.
pub const DESTINATIONS_FIRST_USE: (&str, u32) = ("destination_bindings", 1);

/// Marked once the host-wide bindings of the versions before destinations had paths (issue
/// 26, point 7) were narrowed to the paths the config uses.
pub const DESTINATION_PATHS: (&str, u32) = ("destination_paths", 1);

/// Marks trust on first use as done, for secrets and destinations alike: an import counts as
/// the first use, or the next start would trust whatever the imported file sends where.
pub async fn mark_first_use(
    store: &Store,
    now: switchyard_core::UnixMillis,
) -> Result<(), StoreError> {
    for (section, version) in [FIRST_USE, DESTINATIONS_FIRST_USE, DESTINATION_PATHS] {
        if store.settings(section).await?.is_none() {
            let marker = serde_json::json!({ "first_use": true });
            store.save_settings(section, version, &marker, now).await?;
        }
    }
    Ok(())
}

/// The confirmed bindings. On the first start with this state file (a fresh install, or the
/// first start after the upgrade that added secret bindings) every binding of the config the
/// app starts with is the user's own and is recorded as confirmed: trust on first use. The
/// first start after the upgrade that added destination bindings trusts the destinations of
/// the credentials whose secrets are all confirmed (a local Ollama, no secret, keeps working;
/// an import still waiting for a confirmation gains nothing). Without a writable state file
/// nothing can be remembered, so the starting config is trusted for this run only
/// (`docs/security.md` names both limits).
async fn confirmed_bindings(
    store: Option<&Store>,
    config: &Config,
    now: switchyard_core::UnixMillis,
) -> Confirmed {
    let exposures = config.exposures();
    let starting = || exposures.iter().flat_map(|e| e.bindings.iter().cloned());
    let Some(store) = store else { return starting().collect() };
    let first = |section: &'static str| async move {
        store.settings(section).await.map(|marker| marker.is_none())
    };
    let (secrets_first, destinations_first) = match (
        first(FIRST_USE.0).await,
        first(DESTINATIONS_FIRST_USE.0).await,
    ) {
        (Ok(secrets), Ok(destinations)) => (secrets, destinations),
        (Err(error), _) | (_, Err(error)) => {
            tracing::warn!(%error, "cannot read whether destinations were bound before; trusting the starting config for this run");
            return starting().collect();
        }
    };
    let mut confirmed: Confirmed = match store.bindings().await {
        Ok(stored) => narrow_once(store, stored, &exposures, now).await.into_iter().collect(),
        Err(error) => {
            tracing::warn!(%error, "cannot read confirmed destinations");
            Confirmed::default()
        }
    };
    if !(secrets_first || destinations_first) {
        return confirmed;
    }
    let trusted: Vec<Binding> = if secrets_first {
        starting().collect()
    } else {
        binding::trusted_destinations(&exposures, &confirmed)
    };
    let recorded = store.confirm_bindings(&trusted, now).await;
    let marked = mark_first_use(store, now).await;
    if let Err(error) = recorded.and(marked) {
        tracing::warn!(%error, "cannot record the starting config's destinations");
    }
    tracing::info!(
        bindings = trusted.len(),
        "destinations of the starting config confirmed (first use)"
    );
    // Even when recording them failed (a read-only state file), the first use trusts them
    // for this run.
    confirmed.extend(trusted);
    confirmed
}

/// `stored` with its host-wide bindings narrowed to the paths the config uses, the first time
/// a version with paths in destinations starts on this state file (see
/// `binding::narrowed`). Should the marker fail to be recorded, narrowing again at the next
/// start changes nothing: what it adds covers nothing host-wide but root base URLs, which it
/// keeps.
async fn narrow_once(
    store: &Store,
    stored: Vec<Binding>,
    exposures: &[binding::Exposure],
    now: switchyard_core::UnixMillis,
) -> Vec<Binding> {
    match store.settings(DESTINATION_PATHS.0).await {
        Ok(None) => {}
        Ok(Some(_)) => return stored,
        Err(error) => {
            tracing::warn!(%error, "cannot read whether confirmed destinations have paths");
            return stored;
        }
    }
    let narrowed = binding::narrowed(&stored, exposures);
    let marker = serde_json::json!({ "narrowed": narrowed.removed.len() });
    let recorded = async {
        store.replace_bindings(&narrowed.removed, &narrowed.added, now).await?;
        let (section, version) = DESTINATION_PATHS;
        store.save_settings(section, version, &marker, now).await
    };
    if let Err(error) = recorded.await {
        // The host-wide bindings then stay for this run: what worked yesterday still works.
        tracing::warn!(%error, "cannot narrow confirmed destinations to paths");
        return stored;
    }
    if !narrowed.removed.is_empty() {
        tracing::info!(
            host_wide = narrowed.removed.len(),
            with_paths = narrowed.added.len(),
            "confirmed destinations narrowed to the paths the config uses"
        );
    }
    let mut kept: Vec<Binding> =
        stored.into_iter().filter(|b| !narrowed.removed.contains(b)).collect();
    kept.extend(narrowed.added);
    kept
}

/// The config saved in the state file; empty when there is none. One that cannot be read
/// (the file is locked or damaged) starts the app empty and read-only, so nothing saves over
/// it; a file a newer Switchyard migrated beyond what this one runs on stops the start.
async fn stored_config(state_file: &Path) -> Result<StoredConfig, ConfigError> {
    if !state_file.exists() {
        return Ok(StoredConfig::default());
    }
    let read = match Store::open(state_file).await {
        Ok(store) => {
            let read = stored::read(&store).await;
            store.close().await;
            read
        }
        Err(error) => Err(error),
    };
    match read {
        Ok(stored) => Ok(stored.unwrap_or_default()),
        Err(error @ StoreError::TooNew { .. }) => Err(ConfigError::StateTooNew(error.to_string())),
        Err(error) => {
            let read_only = stored::ReadOnly::unreadable(&error);
            Ok(StoredConfig { form: ConfigForm::default(), read_only: Some(read_only) })
        }
    }
}

/// Stops the start when the state file was migrated by a newer Switchyard that this one
/// cannot run on (the config comes from a file, but health, keys and history from there).
async fn refuse_too_new(state_file: &Path) -> Result<(), ConfigError> {
    if !state_file.exists() {
        return Ok(());
    }
    match Store::open(state_file).await {
        Ok(store) => {
            store.close().await;
            Ok(())
        }
        Err(error @ StoreError::TooNew { .. }) => Err(ConfigError::StateTooNew(error.to_string())),
        // Anything else: the app runs in memory only, and says so (see `Persistence`).
        Err(_) => Ok(()),
    }
}

/// The platform's data directory for Switchyard (e.g. `~/.local/share/switchyard` on Linux).
pub fn default_data_dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("switchyard"))
}
