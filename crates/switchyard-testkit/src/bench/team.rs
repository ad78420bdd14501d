//! Team mode: the latency a request pays when its instance shares its health state
//! through `PostgreSQL`, paired against the same proxy without a team, in one run.
//!
//! Two proxies of their own with the same config, one with `[team]` pointing at the database
//! `scripts/bench` starts (`pg_virtualenv`), one without. Each pair sends the same request to
//! both, the order alternating. Two kinds of request:
//! - a plain one: served at once by a healthy provider, so nothing is shared (a success on a
//!   healthy breaker changes nothing and sends nothing);
//! - a fallback: the combo's first target answers 503 (a breaker failure, counted in the
//!   team's database by a conditional write behind the request) and the second serves it.
//!
//! The request path never waits on the database, so both differences should be noise.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;

use super::client::{Endpoint, call};
use super::stats::{Summary, nanos};

/// The section this measurement writes in `docs/benchmarks.md`.
pub(crate) const HEADING: &str = "## Team mode";

/// Where the harness finds the database (set by `scripts/bench`); unset, the pairs are skipped.
pub(crate) const DATABASE_ENV: &str = "SWITCHYARD_BENCH_PG";
/// The variable the team proxy's `[team] database_url` names.
pub(crate) const PROXY_ENV: &str = "BENCH_TEAM_DB";

const PLAIN: &str = "bench-team-plain";
/// [`PLAIN`] on the healthy provider.
const PLAIN_TARGET: &str = "oa/bench-team-plain";
const DOWN: &str = "bench-team-down";
const FALLBACK: &str = "bench-team-fallback";

/// Pairs of each kind in a full run, and in a quick one. With the warm-up, fewer fallbacks than
/// the failing provider's threshold (1,000, the most a breaker takes): it must never open.
pub(crate) const PAIRS: usize = 400;
pub(crate) const QUICK_PAIRS: usize = 100;
/// Requests of each kind to each proxy before the pairs (connections, caches, the first
/// database round trips).
const WARMUP: usize = 30;

/// The models of the mock script this measurement uses.
pub(crate) fn mock_script() -> String {
    format!(
        "\"{PLAIN}\" = {{ default = {{ reply = {{}} }} }}\n\
         \"{DOWN}\" = {{ default = {{ status = {{ code = 503 }} }} }}\n"
    )
}

/// The config of both proxies; `team` adds the `[team]` section. The failing provider's breaker
/// is on but never opens in a run (every failure is counted, none benches it), lockouts and
/// same-target retries are off: every fallback makes exactly one failed attempt and one
/// successful one. The failing provider's base URL names the mock as `localhost`, so the team
/// counts its failures apart from the healthy provider's successes.
pub(crate) fn proxy_config(mock_url: &str, key_env: &str, team: bool) -> String {
    let team = if team {
        format!("\n[team]\ndatabase_url = \"env:{PROXY_ENV}\"\ninstance = \"bench\"\n")
    } else {
        String::new()
    };
    format!(
        r#"[[providers]]
id = "oa"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]

[[providers]]
id = "down"
kind = "openai"
base_url = "http://localhost:{port}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]
breaker = {{ failure_threshold = 1000, degraded_threshold = 1000 }}

[[combos]]
name = "{FALLBACK}"
targets = [{{ target = "down/{DOWN}" }}, {{ target = "oa/{PLAIN}" }}]

[settings.model_lockouts]
enabled = false

[settings.routing]
retry_budget_percent = 0
retry_budget_min_per_second = 0
{team}"#,
        port = mock_url.rsplit(':').next().unwrap_or_default(),
    )
}

/// The paired figures.
#[derive(Clone, Debug)]
pub(crate) struct TeamPairs {
    pub(crate) plain_off: Summary,
    pub(crate) plain_on: Summary,
    /// Per pair: on minus off.
    pub(crate) plain_difference: Summary,
    pub(crate) fallback_off: Summary,
    pub(crate) fallback_on: Summary,
    pub(crate) fallback_difference: Summary,
}

/// `pairs` pairs of each kind; `off` and `on` are the two proxies, with no model prefix.
pub(crate) async fn measure(
    http: &reqwest::Client,
    off: &Endpoint,
    on: &Endpoint,
    pairs: usize,
) -> anyhow::Result<TeamPairs> {
    anyhow::ensure!(
        pairs + WARMUP < 1000,
        "at most {} pairs: the breaker must not open",
        999 - WARMUP
    );
    for _ in 0..WARMUP {
        for endpoint in [off, on] {
            call(http, endpoint, PLAIN_TARGET, 200).await?;
            call(http, endpoint, FALLBACK, 200).await?;
        }
    }
    let mut series: [Vec<i64>; 6] = Default::default();
    for i in 0..pairs {
        for (model, offset) in [(PLAIN_TARGET, 0), (FALLBACK, 3)] {
            let (o, n) = if i.is_multiple_of(2) {
                let o = call(http, off, model, 200).await?;
                (o, call(http, on, model, 200).await?)
            } else {
                let n = call(http, on, model, 200).await?;
                (call(http, off, model, 200).await?, n)
            };
            let (o, n) = (nanos(o), nanos(n));
            series[offset].push(o);
            series[offset + 1].push(n);
            series[offset + 2].push(n - o);
        }
    }
    let summary = |s: &[i64]| Summary::of(s).context("no team pairs");
    Ok(TeamPairs {
        plain_off: summary(&series[0])?,
        plain_on: summary(&series[1])?,
        plain_difference: summary(&series[2])?,
        fallback_off: summary(&series[3])?,
        fallback_on: summary(&series[4])?,
        fallback_difference: summary(&series[5])?,
    })
}

/// The `## Team mode` section, heading included.
pub(crate) fn section(command: &str, source: &str, t: &TeamPairs, written: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Written by `switchyard-bench` (`crates/switchyard-testkit/src/bench/team.rs`) from one \
         run of `{command}` ({source}); run it again to replace this section. Two release builds \
         of the proxy with the same config, one in a team (`[team]`, a throwaway PostgreSQL 15 \
         on the same machine, started by `scripts/bench` with `pg_virtualenv`) and one without, \
         against the testkit mock; the same non-streamed request to both, in {} pairs of each \
         kind (the order alternates). A plain request is served by a healthy provider and shares \
         nothing; a fallback's first target answers 503, a breaker failure the team's database \
         counts by a conditional write behind the request ({written} such writes in the run), \
         and its second target serves it. Figures are the client's time from sending to the \
         last byte.\n",
        t.plain_off.count
    );
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("Plain, no team", &t.plain_off),
        ("Plain, in a team", &t.plain_on),
        ("Plain: team minus no team, per pair", &t.plain_difference),
        ("Fallback, no team", &t.fallback_off),
        ("Fallback, in a team", &t.fallback_on),
        ("Fallback: team minus no team, per pair", &t.fallback_difference),
    ] {
        super::report::row(&mut out, name, s);
    }
    let _ = writeln!(
        out,
        "\nThe request path never waits on the database: a change is queued for the sync task and \
         the request goes on (only a half-open probe waits for its lease, at most 50 ms, and none \
         happens here). What the team proxy pays instead is CPU, not waiting: its sync task runs \
         on the proxy's one thread (a fallback's write is sent while the next requests are \
         served), and this run's PostgreSQL shares the machine's CPUs with the proxies, the mock \
         and the client, where a team's database would normally run elsewhere."
    );
    out
}

/// How long the team proxy may take to connect to the database before the pairs start.
pub(crate) const CONNECT: Duration = Duration::from_secs(30);
