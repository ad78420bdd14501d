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
    /// The loopback port editors are pointed at.
    pub port: u16,
    /// Set when that port was taken at start: the app runs (window, tray, config) but serves
    /// nothing, rather than move to another port while editors keep sending their keys and
    /// prompts to whoever holds this one.
    pub port_taken: Option<String>,
    pub api: InProcess,
    pub services: Arc<Services>,
    pub proxy: Arc<Proxy>,
    serving: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl Engine {
    /// Starts the app on the data in `data_dir` and serves it on the config's port. When that
    /// port is taken the app still starts, serving nothing, and [`Engine::port_taken`] says why.
    pub async fn start(data_dir: PathBuf) -> Result<Self, StartError> {
        let port = std::env::var(PORT_ENV).ok().and_then(|p| p.parse().ok());
        Self::start_on(data_dir, port).await
    }

    /// [`Engine::start`] on `port`, else the config's.
    pub async fn start_on(data_dir: PathBuf, port: Option<u16>) -> Result<Self, StartError> {
        let app = App::start(Launch::new(&data_dir)).await?;
        let wanted = port.unwrap_or_else(|| app.config().port);
        let (listening, port_taken) = match app.listen(wanted).await {
            Ok(listening) => (Some(listening), None),
            Err(ListenError::Bind { port, source }) if port != 0 => {
                tracing::error!(port, %source, "the configured port is taken: not serving");
                (None, Some(source.to_string()))
            }
            Err(error) => {
                app.shutdown().await;
                return Err(error.into());
            }
        };
        let state = match &listening {
            Some(listening) => listening.state.clone(),
            None => app.front_door(wanted).await?,
        };
        let port = state.port;
        let api = InProcess::new(state)?;
        let services = Arc::clone(app.services());
        let proxy = Arc::clone(app.proxy());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Some(listening) = listening {
                if let Err(error) =
                    switchyard::server::serve(listening.listener, listening.state, shutdown).await
                {
                    tracing::error!(%error, "the proxy stopped serving");
                }
            } else {
                shutdown.await;
            }
            app.shutdown().await;
        });
        tracing::info!(port, data_dir = %data_dir.display(), serving = port_taken.is_none(), "switchyard desktop started");
        Ok(Self { port, port_taken, api, services, proxy, serving: Mutex::new(Some((stop, task))) })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_port_is_reported_and_never_swapped_for_another() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let taken = squatter.local_addr().expect("addr").port();
        let data = tempfile::tempdir().expect("temp dir");
        let engine = Engine::start_on(data.path().to_owned(), Some(taken)).await.expect("starts");
        assert!(engine.port_taken.is_some(), "the taken port is reported");
        assert_eq!(engine.port, taken, "the endpoint stays the configured one");
        assert_eq!(engine.endpoint(), format!("http://127.0.0.1:{taken}/v1"));
        // The window's API still answers in process.
        let reply = engine
            .api
            .call(switchyard::server::ipc::ApiCall {
                method: "GET".into(),
                path: "/api/settings".into(),
                body: None,
            })
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        engine.stop().await;
    }

    #[tokio::test]
    async fn a_free_port_is_served() {
        let data = tempfile::tempdir().expect("temp dir");
        let engine = Engine::start_on(data.path().to_owned(), Some(0)).await.expect("starts");
        assert!(engine.port_taken.is_none());
        let reached = tokio::net::TcpStream::connect(("127.0.0.1", engine.port)).await;
        assert!(reached.is_ok(), "the engine listens on {}", engine.port);
        engine.stop().await;
    }
}
