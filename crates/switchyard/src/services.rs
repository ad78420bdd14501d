//! Services: what the management API (and the desktop shell through it) can do, as plain
//! methods. Handlers stay thin: they parse, call one of these, and render.
//!
//! Every change validates first and changes nothing when validation fails.

mod catalog;
mod doctor;
mod edits;
mod local;
mod metrics;
mod probe;
mod requests;
mod settings;
mod signin;
mod trial;
mod usage;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchyard_core::resilience::registry::{ResetCounts, ResetScope};
use switchyard_core::resilience::{HealthRegistry, HealthSnapshot};
use switchyard_core::{CandidateKey, Clock, UnixMillis};
use switchyard_store::team::TeamStatus;
use switchyard_store::{ApiKeyRecord, PersistenceStatus, Store};
use tokio::sync::watch;
use ts_rs::TS;

pub use self::catalog::{
    AliasesForm, CredentialInput, CredentialPatch, ImportSummary, ImportedPair, ImportedTeam,
    PairState, ProviderCredential, ProviderView, SecretView, imported_pairs, imported_team,
};
pub use self::doctor::{Applied, ApplyRequest};
pub use self::local::{PROBE_LIMIT, probe_all};
pub use self::probe::{ConnectionReport, DiscoveredModels};
pub use self::requests::{RequestEntry, RequestQuery};
pub use self::settings::{Section, SettingsView};
pub use self::trial::{TryRequest, TryResult};
pub use self::usage::{UsageFormat, UsageQuery};
use crate::config::{ConfigEditor, Saving};
use crate::keys::{self, KeyError};
use crate::oauth::OAuth;
use crate::proxy::{ComboHealth, HeadroomView, Proxy};

/// The management operations.
#[derive(Debug)]
pub struct Services {
    registry: Arc<HealthRegistry>,
    clock: Arc<dyn Clock>,
    store: Option<Store>,
    /// Read on every look: a write failure turns it memory-only while the app runs.
    persistence: watch::Receiver<PersistenceStatus>,
    proxy: Arc<Proxy>,
    editor: ConfigEditor,
    oauth: OAuth,
    /// Team mode, read on every look like persistence: the database comes and goes.
    team: Option<watch::Receiver<TeamStatus>>,
    /// Where the model servers of this machine are looked for (`SWITCHYARD_LOCAL_PORTS`).
    local_ports: switchyard_catalogue::local::LocalPorts,
}

/// The health page.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub struct Health {
    /// Routing is paused: client requests are refused until it resumes.
    pub paused: bool,
    pub persistence: Persistence,
    /// Where changes to the config are saved.
    pub config_saved_to: ConfigSaving,
    /// Each combo's candidates that could serve now.
    pub combos: Vec<ComboHealth>,
    /// Team mode; `null` without a `[team]` database.
    pub team: Option<TeamView>,
    /// What each measured credential has left of its quota windows (RESILIENCE.md §11).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<HeadroomView>>", optional)]
    pub headroom: Vec<HeadroomView>,
    #[serde(flatten)]
    pub snapshot: HealthSnapshot,
}

/// This instance's team, as the health page and the tray show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct TeamView {
    /// This instance's name in the team.
    pub instance: String,
    /// The team's database answers: breaker, cooldown and lockout state is shared. `false`:
    /// this instance serves from its own memory and state file, and sends what changed once
    /// the database is back.
    pub connected: bool,
    /// Why it is not connected.
    pub reason: Option<String>,
    /// Since when `connected` has been as it is.
    pub since: UnixMillis,
    /// The instances seen in the last minute, this one included.
    pub members: Vec<TeamMemberView>,
    /// How far the database's clock is ahead of this instance's (negative: behind); shared
    /// deadlines are converted by it.
    #[ts(type = "number")]
    pub clock_offset_ms: i64,
    /// Changes waiting for the database.
    #[ts(type = "number")]
    pub backlog: u64,
    /// Changes dropped because too many waited.
    #[ts(type = "number")]
    pub dropped: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct TeamMemberView {
    pub id: String,
    pub version: String,
    /// Its last heartbeat, as of this instance's last one.
    #[ts(type = "number")]
    pub seen_ms_ago: u64,
}

impl From<&TeamStatus> for TeamView {
    fn from(s: &TeamStatus) -> Self {
        Self {
            instance: s.instance.to_string(),
            connected: s.connected,
            reason: s.reason.clone(),
            since: s.since,
            members: s
                .members
                .iter()
                .map(|m| TeamMemberView {
                    id: m.id.to_string(),
                    version: m.version.clone(),
                    seen_ms_ago: switchyard_core::clock::millis(m.seen_ago),
                })
                .collect(),
            clock_offset_ms: s.clock_offset_ms,
            backlog: u64::try_from(s.backlog).unwrap_or(u64::MAX),
            dropped: s.dropped,
        }
    }
}

/// `GET`/`PUT /api/routing`: whether client requests are routed at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct RoutingState {
    pub paused: bool,
}

/// Where an edit of the config goes, so the UI can say whether it survives a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "to", rename_all = "snake_case")]
#[ts(export)]
pub enum ConfigSaving {
    /// The `--config` file, rewritten on every edit.
    File { path: String },
    /// The state file in the data directory.
    StateFile,
    /// Nowhere: the state file could not be opened; edits last until the app stops.
    MemoryOnly,
    /// Nowhere, and edits are refused: the stored config is more than this version
    /// understands (a newer one wrote it), and saving over it would lose that.
    ReadOnly(crate::config::stored::ReadOnly),
}

/// A local API key for `/v1`, as listed: never its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct LocalKeyView {
    pub id: String,
    pub name: String,
    /// `…` and the last four characters.
    pub hint: String,
    pub created_at: UnixMillis,
    pub revoked_at: Option<UnixMillis>,
}

impl From<&ApiKeyRecord> for LocalKeyView {
    fn from(k: &ApiKeyRecord) -> Self {
        Self {
            id: k.id.clone(),
            name: k.name.clone(),
            hint: k.hint.clone(),
            created_at: k.created_at,
            revoked_at: k.revoked_at,
        }
    }
}

/// A key just created: the only response that ever carries the key itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct NewLocalKey {
    #[serde(flatten)]
    pub view: LocalKeyView,
    pub key: String,
}

/// Whether state changes reach the state file, and if not, why.
#[derive(Debug, Serialize, TS)]
#[ts(export)]
pub struct Persistence {
    pub durable: bool,
    pub reason: Option<String>,
}

impl Services {
    pub fn new(
        registry: Arc<HealthRegistry>,
        clock: Arc<dyn Clock>,
        store: Option<Store>,
        persistence: watch::Receiver<PersistenceStatus>,
        proxy: Arc<Proxy>,
        editor: ConfigEditor,
        oauth: OAuth,
    ) -> Self {
        Self {
            registry,
            clock,
            store,
            persistence,
            proxy,
            editor,
            oauth,
            team: None,
            local_ports: switchyard_catalogue::local::LocalPorts::default(),
        }
    }

    /// Looks for this machine's model servers on `ports` instead of their default ports.
    #[must_use]
    pub fn with_local_ports(mut self, ports: switchyard_catalogue::local::LocalPorts) -> Self {
        self.local_ports = ports;
        self
    }

    /// Shows the team's status on the health page.
    #[must_use]
    pub fn with_team(mut self, status: watch::Receiver<TeamStatus>) -> Self {
        self.team = Some(status);
        self
    }

    /// The app's `now` (a test's manual clock, or the system's).
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    pub fn editor(&self) -> &ConfigEditor {
        &self.editor
    }

    pub fn health(&self) -> Health {
        let persistence = match &*self.persistence.borrow() {
            PersistenceStatus::Durable => Persistence { durable: true, reason: None },
            PersistenceStatus::MemoryOnly { reason } => {
                Persistence { durable: false, reason: Some(reason.clone()) }
            }
        };
        let config_saved_to = match self.editor.saving() {
            Saving::File(path) => ConfigSaving::File { path: path.display().to_string() },
            Saving::Store(_) => ConfigSaving::StateFile,
            Saving::Nowhere => ConfigSaving::MemoryOnly,
            Saving::ReadOnly(read_only) => ConfigSaving::ReadOnly(read_only.clone()),
        };
        let now = self.clock.now();
        Health {
            paused: self.proxy.is_paused(),
            persistence,
            config_saved_to,
            combos: self.proxy.routes().combo_health(&self.registry, now),
            team: self.team.as_ref().map(|status| TeamView::from(&*status.borrow())),
            headroom: self.proxy.headroom(),
            snapshot: self.registry.snapshot(now),
        }
    }

    pub fn routing(&self) -> RoutingState {
        RoutingState { paused: self.proxy.is_paused() }
    }

    /// Pauses or resumes routing (see [`Proxy::set_paused`]).
    pub fn set_routing(&self, state: RoutingState) -> RoutingState {
        self.proxy.set_paused(state.paused);
        self.routing()
    }

    pub fn reset(&self, scope: &ResetScope) -> ResetCounts {
        self.registry.reset(scope, self.clock.now())
    }

    pub fn lockouts(&self) -> Vec<switchyard_core::resilience::registry::LockoutView> {
        self.registry.snapshot(self.clock.now()).lockouts
    }

    /// Clears one lockout, or all of them.
    pub fn clear_lockouts(&self, key: Option<CandidateKey>) -> usize {
        let scope = key.map_or(ResetScope::All, |key| ResetScope::Lockout { key });
        match scope {
            ResetScope::All => {
                let now = self.clock.now();
                let keys: Vec<CandidateKey> =
                    self.registry.snapshot(now).lockouts.into_iter().map(|l| l.key).collect();
                keys.into_iter()
                    .map(|key| self.registry.reset(&ResetScope::Lockout { key }, now).lockouts)
                    .sum()
            }
            scope => self.registry.reset(&scope, self.clock.now()).lockouts,
        }
    }

    /// Every state change from now on.
    pub fn events(
        &self,
    ) -> tokio::sync::broadcast::Receiver<switchyard_core::resilience::HealthEvent> {
        self.registry.subscribe()
    }

    /// Every request recorded from now on (the request log's listeners): what tells the UI
    /// that usage moved. A slow listener misses records, it never slows requests down.
    pub fn requests_done(&self) -> tokio::sync::broadcast::Receiver<crate::requests::Shared> {
        self.proxy.request_log().subscribe()
    }

    /// The local API keys, never their secrets.
    pub async fn keys(&self) -> Result<Vec<LocalKeyView>, KeyError> {
        Ok(self.store()?.api_keys().await?.iter().map(LocalKeyView::from).collect())
    }

    /// Creates a local API key; the returned secret is shown this once.
    pub async fn create_key(&self, name: &str) -> Result<NewLocalKey, KeyError> {
        let new = keys::create(self.store()?, name, self.clock.now()).await?;
        Ok(NewLocalKey { key: new.key.expose().to_owned(), view: LocalKeyView::from(&new.record) })
    }

    /// Revokes a key by id or name; `false` when no live key has it.
    pub async fn revoke_key(&self, id_or_name: &str) -> Result<bool, KeyError> {
        Ok(keys::revoke(self.store()?, id_or_name, self.clock.now()).await?.is_some())
    }

    /// Brings the server's accepted keys in step with the state file at once (instead of at
    /// its next periodic reload).
    pub async fn refresh_keys(&self, keys: &keys::LocalKeys) {
        if let Some(store) = &self.store
            && let Err(error) = keys.reload(store).await
        {
            tracing::warn!(%error, "cannot reload local API keys");
        }
    }

    fn store(&self) -> Result<&Store, KeyError> {
        self.store.as_ref().ok_or(KeyError::NoStore)
    }
}
