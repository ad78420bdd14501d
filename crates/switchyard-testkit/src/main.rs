//! `switchyard-mock`: the mock upstream as a process, for benchmarks and manual poking.
//!
//! Prints `listening on http://127.0.0.1:PORT` on stdout (flushed, so a parent process can read
//! the port from the first line) and serves until interrupted.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use switchyard_testkit::{MockUpstream, Script};

/// A fault-injecting mock of the OpenAI (Chat and Responses), Anthropic and Gemini APIs on
/// 127.0.0.1.
#[derive(Debug, Parser)]
#[command(name = "switchyard-mock", version)]
struct Args {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// TOML (or `.json`) file mapping model names to lists of behaviours.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Model names the listing endpoints report besides the scripted ones.
    #[arg(long = "model")]
    models: Vec<String>,
    /// Embedding models the listing endpoints report (Gemini's with the embedding methods);
    /// a listed model whose name mentions `embed` is one already.
    #[arg(long = "embedding-model")]
    embedding_models: Vec<String>,
    /// Count attempts without storing them (long benchmark runs).
    #[arg(long)]
    forget_attempts: bool,
    /// Write every attempt to DIR as `<seq>.json` (path, query, headers with credentials
    /// redacted, parsed and raw body), written before the answer: how a test that runs a real
    /// client against this process sees what reached the upstream.
    #[arg(long, value_name = "DIR")]
    record_dir: Option<PathBuf>,
    /// Keep a prompt cache per credential: a prompt prefix a key was sent before is reported
    /// read from the cache in the dialect's usage fields (the session benchmark).
    #[arg(long)]
    cache_prompts: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let script = match &args.script {
        Some(path) => Script::from_file(path)?,
        None => Script::default(),
    };
    let mut builder = MockUpstream::builder()
        .port(args.port)
        .script(script)
        .models(args.models)
        .embedding_models(args.embedding_models);
    if args.forget_attempts {
        builder = builder.forget_attempts();
    }
    if let Some(dir) = args.record_dir {
        builder = builder.record_dir(dir);
    }
    let mock = builder.start().await.with_context(|| format!("bind 127.0.0.1:{}", args.port))?;
    if args.cache_prompts {
        mock.cache_prompts();
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", mock.base_url())?;
    stdout.flush()?;
    drop(stdout);
    tokio::signal::ctrl_c().await.context("wait for Ctrl-C")?;
    mock.shutdown().await;
    Ok(())
}
