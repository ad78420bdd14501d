//! Services: what the management API (and the desktop shell through it) can do, as plain
//! methods. Handlers stay thin: they parse, call one of these, and render.
//!
//! Every change validates first and changes nothing when validation fails.

mod catalog;
mod metrics;
mod probe;
mod settings;

use std::sync::Arc;

use serde::Serialize;
use switchyard_core::resilience::registry::{ResetCounts, ResetScope};
use switchyard_core::resilience::{HealthRegistry, HealthSnapshot};
use switchyard_core::{CandidateKey, Clock};
use switchyard_store::{ApiKeyRecord, PersistenceStatus, RequestRecord, Store};

pub use self::catalog::{
    CredentialInput, CredentialPatch, CredentialView, ImportSummary, ProviderView, SecretView,
};
pub use self::probe::{ConnectionReport, DiscoveredModels};
pub use self::settings::{Section, SettingsView};
use crate::config::ConfigEditor;
use crate::keys::{self, KeyError};
use crate::proxy::Proxy;

/// The management operations.
#[derive(Debug)]
pub struct Services {
    registry: Arc<HealthRegistry>,
    clock: Arc<dyn Clock>,
    store: Option<Store>,
    persistence: PersistenceStatus,
    proxy: Arc<Proxy>,
    editor: ConfigEditor,
}

/// The health page.
#[derive(Debug, Serialize)]
pub struct Health {
    pub persistence: Persistence,
    #[serde(flatten)]
    pub snapshot: HealthSnapshot,
}

/// Whether state changes reach the state file, and if not, why.
#[derive(Debug, Serialize)]
pub struct Persistence {
    pub durable: bool,
    pub reason: Option<String>,
}

impl Services {
    pub fn new(
        registry: Arc<HealthRegistry>,
        clock: Arc<dyn Clock>,
        store: Option<Store>,
        persistence: PersistenceStatus,
        proxy: Arc<Proxy>,
        editor: ConfigEditor,
    ) -> Self {
        Self { registry, clock, store, persistence, proxy, editor }
    }

    pub fn editor(&self) -> &ConfigEditor {
        &self.editor
    }

    pub fn health(&self) -> Health {
        let persistence = match &self.persistence {
            PersistenceStatus::Durable => Persistence { durable: true, reason: None },
            PersistenceStatus::MemoryOnly { reason } => {
                Persistence { durable: false, reason: Some(reason.clone()) }
            }
        };
        Health { persistence, snapshot: self.registry.snapshot(self.clock.now()) }
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

    /// The local API keys, never their secrets.
    pub async fn keys(&self) -> Result<Vec<ApiKeyRecord>, KeyError> {
        Ok(self.store()?.api_keys().await?)
    }

    /// Creates a local API key; the returned secret is shown this once.
    pub async fn create_key(&self, name: &str) -> Result<keys::NewKey, KeyError> {
        keys::create(self.store()?, name, self.clock.now()).await
    }

    /// Revokes a key by id or name; `false` when no live key has it.
    pub async fn revoke_key(&self, id_or_name: &str) -> Result<bool, KeyError> {
        Ok(self.store()?.revoke_api_key(id_or_name, self.clock.now()).await?)
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

    pub fn requests(&self, limit: usize) -> Vec<RequestRecord> {
        self.proxy.request_log().recent(limit)
    }
}
