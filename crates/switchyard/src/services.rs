//! Services: what the management API (and later the desktop shell) can do, as plain methods.
//! Handlers stay thin: they parse, call one of these, and render.
//!
//! Every change validates first and changes nothing when validation fails.

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use switchyard_core::resilience::registry::{ResetCounts, ResetScope};
use switchyard_core::resilience::{BreakerState, HealthRegistry, HealthSnapshot};
use switchyard_core::settings::{LockoutSettings, SettingsError};
use switchyard_core::{CandidateKey, Clock};
use switchyard_store::{ApiKeyRecord, PersistenceStatus, RequestRecord, Store};

use crate::keys::{self, KeyError};
use crate::proxy::Proxy;

/// The settings section name of the model lockouts, and its form's schema version.
const LOCKOUTS: (&str, u32) = ("model_lockouts", 1);

/// The management operations.
#[derive(Debug)]
pub struct Services {
    registry: Arc<HealthRegistry>,
    clock: Arc<dyn Clock>,
    store: Option<Store>,
    persistence: PersistenceStatus,
    proxy: Arc<Proxy>,
    /// The lockout settings as last accepted (the registry holds the validated policy).
    lockouts: Mutex<LockoutSettings>,
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
    ) -> Self {
        let lockouts = Mutex::new(registry.lockout_policy().to_settings());
        Self { registry, clock, store, persistence, proxy, lockouts }
    }

    /// Restores settings saved through the API, over the config file's.
    pub async fn load_saved_settings(&self) {
        let Some(store) = &self.store else { return };
        match store.load_settings::<LockoutSettings>(LOCKOUTS.0, LOCKOUTS.1).await {
            Ok(Some(saved)) => match saved.validate() {
                Ok(policy) => {
                    self.registry.set_lockout_policy(policy);
                    *self.lockouts.lock() = saved;
                }
                Err(error) => tracing::warn!(%error, "ignoring saved model lockout settings"),
            },
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "cannot read saved model lockout settings"),
        }
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

    pub fn lockout_settings(&self) -> LockoutSettings {
        self.lockouts.lock().clone()
    }

    /// Applies `patch` (some fields of the form) live and saves it. Nothing changes when any
    /// field is unknown or invalid.
    pub async fn patch_lockout_settings(
        &self,
        patch: &Value,
    ) -> Result<LockoutSettings, SettingsError> {
        let Value::Object(fields) = patch else {
            return Err(SettingsError {
                field: "model_lockouts".into(),
                problem: "expected a JSON object".into(),
            });
        };
        let mut merged = serde_json::to_value(self.lockout_settings()).expect("settings serialize");
        for (name, value) in fields {
            merged[name] = value.clone();
        }
        let settings: LockoutSettings =
            serde_path_to_error::deserialize(merged).map_err(|e| SettingsError {
                field: format!("model_lockouts.{}", e.path()),
                problem: e.inner().to_string(),
            })?;
        let policy = settings.validate()?;
        if let Some(store) = &self.store
            && let Err(error) =
                store.save_settings(LOCKOUTS.0, LOCKOUTS.1, &settings, self.clock.now()).await
        {
            tracing::warn!(%error, "model lockout settings applied but not saved");
        }
        self.registry.set_lockout_policy(policy);
        *self.lockouts.lock() = settings.clone();
        Ok(settings)
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

    /// The Prometheus text exposition.
    pub fn metrics(&self) -> String {
        use std::fmt::Write as _;
        let snapshot = self.registry.snapshot(self.clock.now());
        let counters = self.proxy.counters();
        let mut text = String::new();
        for (name, kind, help) in [
            ("switchyard_requests_total", "counter", "Client requests handled."),
            ("switchyard_attempts_total", "counter", "Upstream attempts made."),
            (
                "switchyard_fallbacks_total",
                "counter",
                "Requests served by other than their first attempt.",
            ),
        ] {
            let value = match name {
                "switchyard_requests_total" => counters.requests,
                "switchyard_attempts_total" => counters.attempts,
                _ => counters.fallbacks,
            };
            let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        let _ = writeln!(
            text,
            "# HELP switchyard_breaker_state Provider breaker: 0 closed, 1 degraded, 2 half-open, 3 open.\n# TYPE switchyard_breaker_state gauge"
        );
        for b in &snapshot.breakers {
            let state = match b.state {
                BreakerState::Closed => 0,
                BreakerState::Degraded => 1,
                BreakerState::HalfOpen => 2,
                BreakerState::Open => 3,
            };
            let _ = writeln!(
                text,
                "switchyard_breaker_state{{provider=\"{}\"}} {state}",
                escape(b.provider.as_str())
            );
        }
        let _ = writeln!(
            text,
            "# HELP switchyard_cooling_credentials Credentials benched right now.\n# TYPE switchyard_cooling_credentials gauge\nswitchyard_cooling_credentials {}",
            snapshot.credentials.len()
        );
        let _ = writeln!(
            text,
            "# HELP switchyard_active_lockouts Model lockouts in force right now.\n# TYPE switchyard_active_lockouts gauge\nswitchyard_active_lockouts {}",
            snapshot.lockouts.len()
        );
        text
    }
}

/// A label value as the exposition format wants it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
