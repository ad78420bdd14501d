//! Cold start: from spawning `switchyard serve` to the first proxied 200, with a state file of
//! [`ROWS`] health rows; for comparison, with an empty data directory (same config), and with an
//! empty data directory and only the base config (no fleet), so the differences show what the
//! rows cost to restore and what the fleet's config costs to load.
//!
//! The rows are written with `switchyard-store` itself (`Store::replace_all`, the writer's own
//! resync path) and describe the configured fleet: every breaker open or degraded, credentials
//! cooling, invalid or out of quota, models locked, all with deadlines an hour ahead so that
//! restore keeps (and clamps) every one of them. Each run gets a fresh copy of that file.
//!
//! The harness picks a free port, spawns the server on it and sends the request in a loop until
//! it answers: a refused connection is retried after [`PROBE_PAUSE`], so the figure is within
//! 0.1 ms of when the server could first serve, not when a coarse poll happened to look. The
//! pause is not cosmetic: a loop that reconnects with no pause at all (every ~15 µs) was
//! measured to slow the server's own start from about 15 ms to 35–60 ms on this machine (the
//! refused connections cost the kernel work the starting server then waits for), so the figure
//! would describe the probe rather than the server. The server runs under `taskset` (its exec is
//! part of the figure, as for the other processes).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use switchyard_core::outcome::{BreakerFault, CredentialFault, OutcomeKind};
use switchyard_core::resilience::{
    BreakerRecord, BreakerState, CredentialRecord, CredentialStatus, HealthRecords, LockReason,
    ModelLockout,
};
use switchyard_core::{CandidateKey, Clock as _, CredentialKey, SystemClock, UnixMillis};
use switchyard_store::Store;
use tokio::process::Command;

use super::client::{Endpoint, http_client, now};
use super::stats::{Summary, nanos};

/// Health rows in the seeded state file.
pub(crate) const ROWS: usize = 10_000;
/// The fleet those rows describe: providers × credentials × models.
const PROVIDERS: usize = 10;
const CREDENTIALS: usize = 200;
const MODELS: usize = 4;
/// Between a refused connection and the next try (see the module comment).
const PROBE_PAUSE: Duration = Duration::from_micros(100);
/// How long one start may take before the run is declared broken.
const GIVE_UP: Duration = Duration::from_secs(20);

/// Both series, in nanoseconds.
#[derive(Clone, Debug)]
pub(crate) struct ColdStart {
    pub(crate) seeded: Summary,
    pub(crate) empty: Summary,
    /// Empty data directory, base config only.
    pub(crate) bare: Summary,
    /// Rows `Store::load_health` read back from the seeded file.
    pub(crate) rows: usize,
    /// Requests that got an answer other than 200 before the first 200 (none expected).
    pub(crate) early_answers: usize,
    /// Per series (seeded, empty, bare): spawn to the last refused connection, i.e. about when
    /// the server began to listen; the rest of each start is the first request itself.
    pub(crate) refused_until: [Summary; 3],
}

/// What one start needs.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) switchyard: &'a Path,
    pub(crate) env: Vec<(&'a str, String)>,
    pub(crate) local_key: &'a str,
    /// The proxy config of the other measurements (provider `oa` on the mock).
    pub(crate) base_config: String,
    pub(crate) mock_url: &'a str,
    pub(crate) key_env: &'a str,
    pub(crate) cpu: Option<usize>,
}

pub(crate) async fn measure(
    target: &Target<'_>,
    runs: usize,
    work: &Path,
) -> anyhow::Result<ColdStart> {
    let config = work.join("cold-start.toml");
    std::fs::write(&config, fleet_config(target))?;
    let bare_config = work.join("cold-start-bare.toml");
    std::fs::write(&bare_config, &target.base_config)?;
    let template = work.join("cold-start-template");
    std::fs::create_dir_all(&template)?;
    let rows = seed(&template.join("switchyard.db")).await.context("seed the state file")?;
    let (mut seeded, mut empty, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    let mut early_answers = 0;
    let mut refused: [Vec<i64>; 3] = Default::default();
    for i in 0..runs * 3 {
        let with_rows = i % 3 == 0;
        let (config, series) = match i % 3 {
            0 => (&config, &mut seeded),
            1 => (&config, &mut empty),
            _ => (&bare_config, &mut bare),
        };
        let data = work.join(format!("cold-start-{i}"));
        std::fs::create_dir_all(&data)?;
        if with_rows {
            for entry in std::fs::read_dir(&template)? {
                let entry = entry?;
                std::fs::copy(entry.path(), data.join(entry.file_name()))?;
            }
        }
        let log = work.join(format!("cold-start-{i}.log"));
        let (took, early, last_refusal) = start_once(target, config, &data, &log)
            .await
            .with_context(|| format!("cold start {i}"))?;
        early_answers += early;
        refused[i % 3].push(nanos(last_refusal));
        series.push(nanos(took));
    }
    Ok(ColdStart {
        seeded: Summary::of(&seeded).context("no cold start")?,
        empty: Summary::of(&empty).context("no cold start")?,
        bare: Summary::of(&bare).context("no cold start")?,
        rows,
        early_answers,
        refused_until: [
            Summary::of(&refused[0]).context("no cold start")?,
            Summary::of(&refused[1]).context("no cold start")?,
            Summary::of(&refused[2]).context("no cold start")?,
        ],
    })
}

/// Spawn to first 200; the server is killed afterwards. Its stderr goes to `log`.
async fn start_once(
    target: &Target<'_>,
    config: &Path,
    data: &Path,
    log: &Path,
) -> anyhow::Result<(Duration, usize, Duration)> {
    let port = free_port()?;
    let endpoint = Endpoint {
        url: format!("http://127.0.0.1:{port}/v1/chat/completions"),
        key: target.local_key.to_owned(),
        model_prefix: "oa/".to_owned(),
    };
    let http = http_client()?;
    let log = std::fs::File::create(log)?;
    let args: Vec<String> = vec![
        "serve".into(),
        "--config".into(),
        config.display().to_string(),
        "--port".into(),
        port.to_string(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    let mut command = match target.cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(target.switchyard);
            c
        }
        None => Command::new(target.switchyard),
    };
    command
        .args(&args)
        .envs(target.env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true);
    let (mut early, mut last_refusal) = (0, Duration::ZERO);
    let started = now();
    let mut child = command.spawn().context("spawn switchyard serve")?;
    let took = loop {
        if started.elapsed() > GIVE_UP {
            bail!("no 200 within {GIVE_UP:?}");
        }
        let Ok(response) = endpoint.request(&http, "bench-plain", false).send().await else {
            // Not listening yet (connection refused): ask again almost at once.
            last_refusal = started.elapsed();
            pause(PROBE_PAUSE);
            continue;
        };
        let status = response.status();
        let body = response.bytes().await;
        if status == 200 && body.is_ok() {
            break started.elapsed();
        }
        early += 1;
    };
    child.kill().await.context("stop the server")?;
    Ok((took, early, last_refusal))
}

/// Blocks this thread for `d`: tokio's timer counts in whole milliseconds, too coarse for the
/// probe, and nothing else runs on the harness's thread during a cold start.
#[expect(
    clippy::disallowed_methods,
    reason = "a sub-millisecond pause between readiness probes; see the module comment"
)]
fn pause(d: Duration) {
    std::thread::sleep(d);
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// The base config plus the fleet the rows describe.
fn fleet_config(target: &Target<'_>) -> String {
    let mut config = target.base_config.clone();
    let models: Vec<String> = (0..MODELS).map(|m| format!("\"model-{m}\"")).collect();
    for p in 0..PROVIDERS {
        let credentials: Vec<String> = (0..CREDENTIALS)
            .map(|c| format!("{{ id = \"k{c:03}\", secret = \"env:{}\" }}", target.key_env))
            .collect();
        let _ = write!(
            config,
            "\n[[providers]]\nid = \"fleet-{p}\"\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [{}]\ncredentials = [\n  {},\n]\n",
            target.mock_url,
            models.join(", "),
            credentials.join(",\n  ")
        );
    }
    config
}

/// Writes [`ROWS`] rows into a new state file and returns how many read back.
async fn seed(path: &Path) -> anyhow::Result<usize> {
    let store = Store::open(path).await?;
    store.replace_all(&records(SystemClock.now())).await?;
    let rows = store.load_health().await?.len();
    store.close().await;
    if rows != ROWS {
        bail!("the seeded state file holds {rows} rows, not {ROWS}");
    }
    Ok(rows)
}

fn records(now: UnixMillis) -> HealthRecords {
    let later = UnixMillis(now.0 + 3_600_000);
    let provider = |p: usize| format!("fleet-{p}");
    let breakers = (0..PROVIDERS)
        .map(|p| {
            let open = p % 2 == 0;
            let record = BreakerRecord {
                state: if open { BreakerState::Open } else { BreakerState::Degraded },
                failures: if open { 5 } else { 3 },
                reopens: u32::from(open),
                open_until: open.then_some(later),
                last_fault: Some(BreakerFault::Transient),
                changed_at: now,
            };
            (provider(p).into(), record)
        })
        .collect();
    let credentials = (0..PROVIDERS * CREDENTIALS)
        .map(|i| {
            let key = CredentialKey {
                provider: provider(i / CREDENTIALS).into(),
                credential: format!("k{:03}", i % CREDENTIALS).into(),
            };
            let record = match i % 3 {
                0 => CredentialRecord {
                    status: CredentialStatus::Cooling,
                    cooling_until: Some(later),
                    backoff_level: 3,
                    last_error: Some(CredentialFault::RateLimit),
                    changed_at: now,
                },
                1 => CredentialRecord {
                    status: CredentialStatus::Invalid,
                    cooling_until: None,
                    backoff_level: 0,
                    last_error: Some(CredentialFault::Auth),
                    changed_at: now,
                },
                _ => CredentialRecord {
                    status: CredentialStatus::QuotaExhausted,
                    cooling_until: Some(later),
                    backoff_level: 1,
                    last_error: Some(CredentialFault::Quota),
                    changed_at: now,
                },
            };
            (key, record)
        })
        .collect();
    let lockouts = (0..ROWS - PROVIDERS - PROVIDERS * CREDENTIALS)
        .map(|i| {
            let credential = i / MODELS;
            let key = CandidateKey {
                provider: provider(credential / CREDENTIALS).into(),
                credential: format!("k{:03}", credential % CREDENTIALS).into(),
                model: format!("model-{}", i % MODELS).into(),
            };
            let record = ModelLockout {
                locked_until: Some(later),
                consecutive_failures: 2,
                reason: Some(LockReason { kind: OutcomeKind::ModelUnavailable, status: Some(404) }),
                changed_at: now,
                probe_through: false,
            };
            (key, record)
        })
        .collect();
    HealthRecords { breakers, credentials, lockouts }
}
