//! `switchyard`: the command-line entry point.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use switchyard::{App, default_data_dir};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(
    name = "switchyard",
    version,
    about = "A local LLM router with three layers of failure isolation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run headless: restore health state and keep it until Ctrl-C / SIGTERM.
    Serve {
        /// Where the state database lives [default: the platform data directory].
        #[arg(long, env = "SWITCHYARD_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("SWITCHYARD_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve { data_dir } => {
            let data_dir = data_dir
                .or_else(default_data_dir)
                .context("no data directory: pass --data-dir or set SWITCHYARD_DATA_DIR")?;
            let app = App::start(&data_dir).await;
            let snapshot = app.registry().snapshot(app.clock().now());
            tracing::info!(
                data_dir = %data_dir.display(),
                persistence = ?app.persistence_status(),
                breakers = snapshot.breakers.len(),
                cooling_credentials = snapshot.credentials.len(),
                active_lockouts = snapshot.lockouts.len(),
                "switchyard started; the /v1 endpoint arrives with the proxy (issue 3)"
            );
            shutdown_signal().await?;
            tracing::info!("shutting down");
            app.shutdown().await;
            Ok(())
        }
    }
}

/// Resolves on Ctrl-C or, on unix, SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
