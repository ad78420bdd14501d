//! The Switchyard app: the composition root that owns the health registry and its persistence.
//!
//! Everything heavy has one owner and is built here, once: the [`HealthRegistry`] (hot routing
//! state, in memory), the [`Persistence`] that restores it from and keeps it in `SQLite`, and the
//! clock every decision reads. The proxy (`/v1`), the management API (`/api`) and the desktop
//! shell all run on an [`App`].

pub mod config;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard_core::resilience::HealthRegistry;
use switchyard_core::{Clock, SystemClock};
use switchyard_store::{Persistence, PersistenceStatus};

/// The file name of the state database inside the data directory.
pub const STATE_FILE: &str = "switchyard.db";

/// The running app's shared state.
#[derive(Debug)]
pub struct App {
    registry: Arc<HealthRegistry>,
    persistence: Persistence,
    clock: Arc<dyn Clock>,
    data_dir: PathBuf,
}

impl App {
    /// Restores health state from `data_dir` and starts persisting it. Never fails on a bad
    /// state file: the app then runs in memory only and [`App::persistence_status`] says why.
    pub async fn start(data_dir: &Path) -> Self {
        Self::start_with_clock(data_dir, Arc::new(SystemClock)).await
    }

    pub async fn start_with_clock(data_dir: &Path, clock: Arc<dyn Clock>) -> Self {
        let registry = Arc::new(HealthRegistry::default());
        let persistence =
            Persistence::start(data_dir.join(STATE_FILE), &registry, clock.now()).await;
        Self { registry, persistence, clock, data_dir: data_dir.to_owned() }
    }

    pub fn registry(&self) -> &Arc<HealthRegistry> {
        &self.registry
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn persistence_status(&self) -> PersistenceStatus {
        self.persistence.status()
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
