//! The proxy, running in process: the same [`App`] `switchyard serve` runs, listening on the
//! loopback port for editors and agents, with its management API reachable in process for the
//! window. One engine per desktop app; Quit stops it gracefully (requests in flight finish,
//! pending state is written out) before the process exits.

use std::path::PathBuf;
use std::sync::Arc;

use switchyard::proxy::Proxy;
use switchyard::server::ipc::InProcess;
use switchyard::services::Services;
use switchyard::{App, Launch, ListenError};
use tokio::sync::{Mutex, oneshot};
use tokio::task::JoinHandle;

/// Overrides the config's port (tests use `0`: any free port).
pub const PORT_ENV: &str = "SWITCHYARD_PORT";

pub type StartError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug)]
pub struct Engine {
    pub port: u16,
    pub api: InProcess,
    pub services: Arc<Services>,
    pub proxy: Arc<Proxy>,
    serving: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl Engine {
    /// Starts the app on the data in `data_dir` and serves it on the config's port, or on any
    /// free port when that one is taken (the window shows the endpoint really in use).
    pub async fn start(data_dir: PathBuf) -> Result<Self, StartError> {
        let app = App::start(Launch::new(&data_dir)).await?;
        let wanted = std::env::var(PORT_ENV)
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| app.config().port);
        let listening = match app.listen(wanted).await {
            Ok(listening) => listening,
            Err(ListenError::Bind { port, source }) if port != 0 => {
                tracing::warn!(port, %source, "the configured port is taken; listening on a free one");
                app.listen(0).await?
            }
            Err(error) => {
                app.shutdown().await;
                return Err(error.into());
            }
        };
        let port = listening.port();
        let api = InProcess::new(listening.state.clone())?;
        let services = Arc::clone(app.services());
        let proxy = Arc::clone(app.proxy());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(error) =
                switchyard::server::serve(listening.listener, listening.state, shutdown).await
            {
                tracing::error!(%error, "the proxy stopped serving");
            }
            app.shutdown().await;
        });
        tracing::info!(port, data_dir = %data_dir.display(), "switchyard desktop is serving");
        Ok(Self { port, api, services, proxy, serving: Mutex::new(Some((stop, task))) })
    }

    /// The base URL editors and agents are pointed at.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Stops accepting, lets requests in flight finish and writes out pending state. Later
    /// calls return at once.
    pub async fn stop(&self) {
        let serving = self.serving.lock().await.take();
        if let Some((stop, task)) = serving {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}
