//! Throughput of the proxy on one core, closed loop: `c` clients each send one non-streamed
//! request, wait for the whole answer, and send the next, for a fixed time per step; `c` doubles
//! from step to step. Each step runs twice, against the mock directly and then through the
//! proxy, so every proxied figure has the mock's own capacity beside it.
//!
//! The CPU time of the proxy, the mock and the harness itself (from `/proc/PID/stat`) is read at
//! the start and end of each measured window: a proxy near one full core while the mock and the
//! harness share the other core with room to spare is what shows the proxy, and not the load
//! generator, set the limit.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use parking_lot::Mutex;

use super::client::{Endpoint, call, now};
use super::fleet::CpuTime;
use super::stats::{Summary, nanos};

/// Closed-loop clients per step.
pub(crate) const CONCURRENCY: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
/// The tail bounds the issue asks about, in nanoseconds.
pub(crate) const BOUNDS: [i64; 3] = [1_000_000, 5_000_000, 10_000_000];

/// How long each side of each step runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// Load before the window opens (connections, pools), not counted.
    pub(crate) warmup: Duration,
    pub(crate) window: Duration,
}

/// One side of one step.
#[derive(Clone, Debug)]
pub(crate) struct Load {
    /// Requests started inside the window, per second of window.
    pub(crate) rate: f64,
    /// Send to last byte, for every request started inside the window.
    pub(crate) latency: Summary,
    /// Share of one CPU over the window (1.0 = one core busy), for each process.
    pub(crate) proxy_cpu: f64,
    pub(crate) mock_cpu: f64,
    pub(crate) harness_cpu: f64,
}

/// One concurrency level, both sides.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) clients: usize,
    pub(crate) direct: Load,
    pub(crate) proxied: Load,
}

/// The processes whose CPU time each window reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pids {
    pub(crate) proxy: u32,
    pub(crate) mock: u32,
}

pub(crate) async fn measure(
    http: &reqwest::Client,
    direct: &Endpoint,
    proxied: &Endpoint,
    model: &str,
    pids: Pids,
    timing: Timing,
) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::with_capacity(CONCURRENCY.len());
    for clients in CONCURRENCY {
        let d = closed_loop(http, direct, model, clients, pids, timing)
            .await
            .with_context(|| format!("direct, {clients} clients"))?;
        let p = closed_loop(http, proxied, model, clients, pids, timing)
            .await
            .with_context(|| format!("proxied, {clients} clients"))?;
        steps.push(Step { clients, direct: d, proxied: p });
    }
    Ok(steps)
}

/// The highest proxied rate among the steps whose p99 is under `bound`, with its step.
pub(crate) fn best_under(steps: &[Step], bound: i64) -> Option<&Step> {
    steps
        .iter()
        .filter(|s| s.proxied.latency.p99 < bound)
        .max_by(|a, b| a.proxied.rate.total_cmp(&b.proxied.rate))
}

async fn closed_loop(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    model: &str,
    clients: usize,
    pids: Pids,
    timing: Timing,
) -> anyhow::Result<Load> {
    let opens = now() + timing.warmup;
    let closes = opens + timing.window;
    let samples = Arc::new(Mutex::new(Vec::<i64>::with_capacity(clients * 4096)));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (http, endpoint, model, samples) =
            (http.clone(), endpoint.clone(), model.to_owned(), Arc::clone(&samples));
        tasks.spawn(async move {
            let mut mine = Vec::with_capacity(4096);
            loop {
                let started = now();
                if started >= closes {
                    break;
                }
                let took = call(&http, &endpoint, &model, 200).await?;
                if started >= opens {
                    mine.push(nanos(took));
                }
            }
            samples.lock().extend(mine);
            anyhow::Ok(())
        });
    }
    // The CPU readings happen on the same runtime, at the window's edges.
    let harness = std::process::id();
    tokio::time::sleep_until(opens).await;
    let before = [CpuTime::of(pids.proxy)?, CpuTime::of(pids.mock)?, CpuTime::of(harness)?];
    let opened = now();
    tokio::time::sleep_until(closes).await;
    let after = [CpuTime::of(pids.proxy)?, CpuTime::of(pids.mock)?, CpuTime::of(harness)?];
    let wall = now() - opened;
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let samples = std::mem::take(&mut *samples.lock());
    #[expect(clippy::cast_precision_loss, reason = "a request count")]
    let rate = samples.len() as f64 / timing.window.as_secs_f64();
    Ok(Load {
        rate,
        latency: Summary::of(&samples).context("no request completed in the window")?,
        proxy_cpu: before[0].share(after[0], wall),
        mock_cpu: before[1].share(after[1], wall),
        harness_cpu: before[2].share(after[2], wall),
    })
}
