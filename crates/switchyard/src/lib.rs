//! The Switchyard app: the composition root and the localhost server.
//!
//! Everything heavy has one owner and is built here, once: the [`HealthRegistry`] (hot routing
//! state, in memory), the [`Persistence`] that restores it from and keeps it in `SQLite`, the
//! [`Proxy`] (planner, attempt loop, HTTP client) and the clock every decision reads. The CLI,
//! the tests and later the desktop shell all run an [`App`].

pub mod config;
pub mod keys;
pub mod oauth;
pub mod proxy;
pub mod requests;
pub mod server;
pub mod services;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard_core::resilience::HealthRegistry;
use switchyard_core::{Clock, SystemClock};
use switchyard_store::{Persistence, PersistenceStatus, Store};

use crate::config::Config;
use crate::keys::LocalKeys;
use crate::proxy::Proxy;
use crate::requests::RequestLog;
use crate::server::ServerState;
use crate::services::Services;

/// The file name of the state database inside the data directory.
pub const STATE_FILE: &str = "switchyard.db";

/// The running app's shared state.
#[derive(Debug)]
pub struct App {
    config: Arc<Config>,
    registry: Arc<HealthRegistry>,
    persistence: Persistence,
    proxy: Arc<Proxy>,
    services: Arc<Services>,
    clock: Arc<dyn Clock>,
    data_dir: PathBuf,
}

impl App {
    /// Configures the health registry from `config`, restores its state from `data_dir` and
    /// starts persisting it. Never fails on a bad state file: the app then runs in memory only
    /// and [`App::persistence_status`] says why.
    pub async fn start(data_dir: &Path, config: Arc<Config>) -> Self {
        Self::start_with_clock(data_dir, config, Arc::new(SystemClock)).await
    }

    pub async fn start_with_clock(
        data_dir: &Path,
        config: Arc<Config>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let registry = Arc::new(HealthRegistry::default());
        // Policies first: restoring clamps every deadline by them.
        proxy::configure_registry(&registry, &config);
        let persistence =
            Persistence::start(data_dir.join(STATE_FILE), &registry, clock.now()).await;
        let log = RequestLog::start(persistence.store().cloned());
        let proxy = Proxy::new(Arc::clone(&config), Arc::clone(&registry), Arc::clone(&clock), log);
        let proxy = Arc::new(proxy);
        let services = Services::new(
            Arc::clone(&registry),
            Arc::clone(&clock),
            persistence.store().cloned(),
            persistence.status(),
            Arc::clone(&proxy),
        );
        services.load_saved_settings().await;
        let services = Arc::new(services);
        Self {
            config,
            registry,
            persistence,
            proxy,
            services,
            clock,
            data_dir: data_dir.to_owned(),
        }
    }

    pub fn registry(&self) -> &Arc<HealthRegistry> {
        &self.registry
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
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
        ServerState {
            port,
            keys,
            management: LocalKeys::new(None),
            config: Arc::clone(&self.config),
            proxy: Arc::clone(&self.proxy),
            services: Arc::clone(&self.services),
        }
    }

    /// Writes out every pending state change and stops the writer.
    pub async fn shutdown(self) {
        self.persistence.shutdown().await;
    }
}

/// The platform's data directory for Switchyard (e.g. `~/.local/share/switchyard` on Linux).
pub fn default_data_dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("switchyard"))
}
