//! The measurements, in the order they run, each as paired alternation: the same request to the
//! mock directly and through the proxy, back to back, so both see the same machine noise and
//! only the difference of each pair is reported. The order inside a pair alternates, so neither
//! side always runs on the warmer cache.

use std::time::Duration;

use anyhow::Context as _;

use super::client::{Endpoint, StreamTiming, call, stream};
use super::cold_start::ColdStart;
use super::flap::{self, BreakerFlap};
use super::fleet::Memory;
use super::passthrough::{self, Passthrough, Rounds, Ways};
use super::stats::{Summary, nanos};
use super::throughput::{self, Pids, Step, Timing};

/// Upstream models the mock script defines (see [`mock_script`]).
const PLAIN: &str = "bench-plain";
const PACED: &str = "bench-paced";
const LONG: &str = "bench-long";
const DOWN: &str = "bench-down";
/// The combo whose first target answers 503 and whose second is [`PLAIN`].
pub(crate) const FALLBACK_COMBO: &str = "bench-fallback";

/// The paced stream: this many deltas, this far apart.
pub(crate) const PACED_CHUNKS: usize = 20;
pub(crate) const PACED_GAP: Duration = Duration::from_millis(20);
/// The streams held open together for the memory figure.
const LONG_CHUNKS: usize = 29;
const LONG_GAP: Duration = Duration::from_millis(100);

/// The mock's script: every model answers the same way on every attempt, except the flapping
/// model (see `flap.rs`). The agents' models are `passthrough.rs`'s.
pub(crate) fn mock_script() -> String {
    let gap = PACED_GAP.as_millis();
    let long_gap = LONG_GAP.as_millis();
    format!(
        r#""{PLAIN}" = {{ default = {{ reply = {{}} }} }}
"{PACED}" = {{ default = {{ reply = {{ chunks = {PACED_CHUNKS}, chunk_gap_ms = {gap} }} }} }}
"{LONG}" = {{ default = {{ reply = {{ chunks = {LONG_CHUNKS}, chunk_gap_ms = {long_gap} }} }} }}
"{DOWN}" = {{ default = {{ status = {{ code = 503 }} }} }}
{}{}{}{}{}"#,
        flap::mock_script(),
        passthrough::mock_script(),
        super::hedge::mock_script(),
        super::usage::mock_script(),
        super::team::mock_script()
    )
}

/// The proxy's config: provider `oa` for the answers, provider `down` for the failing first
/// target, and the Anthropic and Responses providers of `passthrough.rs`. Lockouts, `down`'s
/// breaker and same-target retries are off, so every fallback request makes exactly one failed
/// attempt and one successful one, run after run.
pub(crate) fn proxy_config(mock_url: &str, key_env: &str) -> String {
    format!(
        r#"{}
[[providers]]
id = "down"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]
breaker = {{ enabled = false }}

[[combos]]
name = "{FALLBACK_COMBO}"
targets = [{{ target = "down/{DOWN}" }}, {{ target = "oa/{PLAIN}" }}]

[settings.model_lockouts]
enabled = false

[settings.routing]
retry_budget_percent = 0
retry_budget_min_per_second = 0
{}{}"#,
        openai_provider("oa", mock_url, key_env),
        flap::proxy_config(mock_url, key_env),
        passthrough::proxy_config(mock_url, key_env)
    )
}

/// An OpenAI-dialect provider `id` on the mock, with one key from `key_env`.
pub(crate) fn openai_provider(id: &str, mock_url: &str, key_env: &str) -> String {
    format!(
        r#"[[providers]]
id = "{id}"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]
"#
    )
}

/// How many of each measurement to make.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) warmup: usize,
    pub(crate) pairs: usize,
    pub(crate) stream_pairs: usize,
    pub(crate) paced_pairs: usize,
    pub(crate) fallback_triples: usize,
    pub(crate) concurrent_streams: usize,
    /// The closed-loop throughput steps; `None` skips them.
    pub(crate) throughput: Option<Timing>,
    /// Paired requests with a breaker flapping elsewhere (and as many without); 0 skips them.
    pub(crate) flap_pairs: usize,
    /// Cold starts with the seeded state file (and as many with an empty one); 0 skips them.
    pub(crate) cold_starts: usize,
    /// Rounds of each agent's turn (Claude Code's, Codex's) on every path (`passthrough.rs`).
    pub(crate) agent: Rounds,
    /// The hedged-first-token pairs (`hedge.rs`), on a proxy of their own.
    pub(crate) hedging: bool,
    /// The usage-tracking pairs (`usage.rs`), on two proxies of their own.
    pub(crate) usage: bool,
    /// The session pairs and priced sessions (`sessions.rs`), on proxies of their own.
    pub(crate) sessions: bool,
}

impl Plan {
    pub(crate) fn full(pairs: usize) -> Self {
        Self {
            warmup: 300,
            pairs,
            stream_pairs: pairs / 2,
            paced_pairs: 25,
            fallback_triples: pairs / 2,
            concurrent_streams: 256,
            throughput: Some(Timing {
                warmup: Duration::from_millis(500),
                window: Duration::from_secs(3),
            }),
            flap_pairs: pairs * 3,
            cold_starts: 10,
            agent: Rounds { warmup: 24, non_streamed: pairs / 2, streamed: pairs / 2 },
            hedging: true,
            usage: true,
            sessions: true,
        }
    }

    pub(crate) fn quick(pairs: usize) -> Self {
        Self {
            warmup: 50,
            pairs,
            stream_pairs: pairs / 2,
            paced_pairs: 3,
            fallback_triples: pairs / 4,
            concurrent_streams: 0,
            throughput: None,
            flap_pairs: 0,
            cold_starts: 0,
            agent: Rounds { warmup: 4, non_streamed: pairs / 4, streamed: pairs / 4 },
            hedging: false,
            usage: false,
            sessions: false,
        }
    }
}

/// The sides of every pair: the mock directly, the bare pass-through in front of it (the
/// floor, `switchyard-floor`) and the proxy.
#[derive(Clone, Debug)]
pub(crate) struct Sides {
    pub(crate) http: reqwest::Client,
    pub(crate) direct: Endpoint,
    pub(crate) floor: Endpoint,
    pub(crate) proxied: Endpoint,
    /// Each agent's turn (`passthrough::CASES`), to the mock's endpoint for its dialect and
    /// through the proxy to each of its providers.
    pub(crate) turns: Vec<Ways>,
    pub(crate) proxy_pid: u32,
    pub(crate) mock_pid: u32,
}

/// Every figure of one run.
#[derive(Clone, Debug)]
pub(crate) struct Results {
    pub(crate) idle: Memory,
    /// Direct round trips (context for the differences).
    pub(crate) direct: Summary,
    /// Proxied minus direct, non-streamed.
    pub(crate) added: Summary,
    pub(crate) first_byte_direct: Summary,
    pub(crate) first_byte_added: Summary,
    /// Proxied minus the bare pass-through, and the pass-through minus direct, of the same
    /// rounds: non-streamed, then the first SSE byte.
    pub(crate) floor: Floor,
    pub(crate) first_byte_floor: Floor,
    /// The same streamed rounds to the first event with content (`StreamTiming::first_content`).
    pub(crate) first_content_floor: Floor,
    pub(crate) paced: Paced,
    pub(crate) fallback: Fallback,
    /// Per case of `passthrough::CASES`, in that order.
    pub(crate) passthrough: Vec<Passthrough>,
    /// RSS with this many streams open at once, if measured.
    pub(crate) streams: Option<(usize, Memory)>,
    pub(crate) after: Memory,
    pub(crate) throughput: Option<Vec<Step>>,
    pub(crate) flapping: Option<BreakerFlap>,
    /// Filled in by the caller, which owns the binaries (see `cold_start.rs`).
    pub(crate) cold_start: Option<ColdStart>,
    /// Filled in by the caller, on a proxy of its own (see `hedge.rs`).
    pub(crate) hedging: Option<super::hedge::Hedging>,
    /// Filled in by the caller, on two proxies of their own (see `usage.rs`).
    pub(crate) usage: Option<super::usage::Tracking>,
    /// Filled in by the caller, on proxies of their own (see `sessions.rs`).
    pub(crate) sessions: Option<super::sessions::SessionFigures>,
    /// Filled in by the caller, on two proxies of their own, when a database was given (see
    /// `team.rs`): the pairs, and how many failures the team's database counted.
    pub(crate) team: Option<(super::team::TeamPairs, u64)>,
}

/// Switchyard against the bare pass-through, paired within the same rounds.
#[derive(Clone, Debug)]
pub(crate) struct Floor {
    /// The pass-through minus direct: what any relay costs.
    pub(crate) floor: Summary,
    /// Proxied minus the pass-through: what Switchyard costs beyond a relay.
    pub(crate) over: Summary,
}

/// The paced stream's gaps.
#[derive(Clone, Debug)]
pub(crate) struct Paced {
    pub(crate) pairs: usize,
    /// Per pair: the proxied stream's worst gap minus the direct stream's worst gap.
    pub(crate) added_worst_gap: Summary,
    pub(crate) direct_worst_gap: i64,
    pub(crate) proxied_worst_gap: i64,
    pub(crate) first_byte_added: Summary,
    /// Proxied gaps at least 40 ms longer than the configured gap: the Nagle stall's signature.
    pub(crate) stalls: usize,
}

/// One fallback hop.
#[derive(Clone, Debug)]
pub(crate) struct Fallback {
    /// The direct 503 call: what the failed attempt costs by itself.
    pub(crate) failed: Summary,
    /// Proxied combo minus a direct call to the second target.
    pub(crate) over_second: Summary,
    /// Proxied combo minus (direct 503 + direct call to the second target).
    pub(crate) beyond_failed: Summary,
}

pub(crate) async fn measure(sides: &Sides, plan: Plan) -> anyhow::Result<Results> {
    let idle = Memory::of(sides.proxy_pid)?;
    warm_up(sides, plan.warmup).await.context("warm-up")?;
    let (direct, added, floor) =
        non_streamed_rounds(sides, plan.pairs).await.context("non-streamed rounds")?;
    let (first_byte_direct, first_byte_added, first_byte_floor, first_content_floor) =
        first_bytes(sides, plan.stream_pairs).await.context("streamed rounds")?;
    let paced = paced(sides, plan.paced_pairs).await.context("paced streams")?;
    let fallback = fallback(sides, plan.fallback_triples).await.context("fallback hop")?;
    // Before the agents' turns: the proxy keeps translated Responses answers for a later
    // `previous_response_id` (up to 64 MB), which this figure is not about.
    let streams = if plan.concurrent_streams > 0 {
        let memory = concurrent(sides, plan.concurrent_streams).await.context("open streams")?;
        Some((plan.concurrent_streams, memory))
    } else {
        None
    };
    let mut passthrough = Vec::with_capacity(sides.turns.len());
    for ways in &sides.turns {
        let measured = passthrough::measure(&sides.http, ways, plan.agent).await;
        passthrough.push(measured.context("passthrough and translation")?);
    }
    let flapping = if plan.flap_pairs > 0 {
        Some(flapping(sides, plan.flap_pairs).await.context("breaker flapping")?)
    } else {
        None
    };
    let throughput = match plan.throughput {
        Some(timing) => {
            let pids = Pids { proxy: sides.proxy_pid, mock: sides.mock_pid };
            let steps = throughput::measure(
                &sides.http,
                &sides.direct,
                &sides.proxied,
                PLAIN,
                pids,
                timing,
            )
            .await
            .context("throughput")?;
            Some(steps)
        }
        None => None,
    };
    let after = Memory::of(sides.proxy_pid)?;
    Ok(Results {
        idle,
        direct,
        added,
        first_byte_direct,
        first_byte_added,
        floor,
        first_byte_floor,
        first_content_floor,
        paced,
        fallback,
        passthrough,
        streams,
        after,
        throughput,
        flapping,
        cold_start: None,
        hedging: None,
        usage: None,
        sessions: None,
        team: None,
    })
}

/// Connections open, caches and allocator pools warm, on both paths and every request shape.
async fn warm_up(sides: &Sides, rounds: usize) -> anyhow::Result<()> {
    for _ in 0..rounds {
        call(&sides.http, &sides.direct, PLAIN, 200).await?;
        call(&sides.http, &sides.floor, PLAIN, 200).await?;
        call(&sides.http, &sides.proxied, PLAIN, 200).await?;
    }
    for _ in 0..rounds.div_ceil(4) {
        stream(&sides.http, &sides.direct, PLAIN).await?;
        stream(&sides.http, &sides.floor, PLAIN).await?;
        stream(&sides.http, &sides.proxied, PLAIN).await?;
        call(&sides.http, &sides.proxied, FALLBACK_COMBO, 200).await?;
        call(&sides.http, &sides.direct, DOWN, 503).await?;
    }
    Ok(())
}

/// The non-streamed pairs again: quiet, with a driver on provider `down` (failing, breaker off),
/// and with the driver on provider `flap` (its breaker flapping). See `flap.rs`.
async fn flapping(sides: &Sides, pairs: usize) -> anyhow::Result<BreakerFlap> {
    let (http, proxied) = (&sides.http, &sides.proxied);
    let (_, quiet) = non_streamed(sides, pairs).await.context("quiet pairs")?;
    let ((_, steady), steady_driven) =
        flap::while_driving(http, proxied, ("down", DOWN), non_streamed(sides, pairs))
            .await
            .context("pairs beside a failing provider")?;
    let ((_, flapping), driven) =
        flap::while_driving(http, proxied, ("flap", flap::FLAP), non_streamed(sides, pairs))
            .await
            .context("pairs beside a flapping breaker")?;
    Ok(BreakerFlap {
        quiet,
        steady,
        steady_answers: steady_driven.answers,
        flapping,
        answers: driven.answers,
        recoveries: driven.recoveries,
        lasted: driven.lasted,
    })
}

async fn non_streamed(sides: &Sides, pairs: usize) -> anyhow::Result<(Summary, Summary)> {
    let mut direct = Vec::with_capacity(pairs);
    let mut added = Vec::with_capacity(pairs);
    for i in 0..pairs {
        let (d, p) = if i.is_multiple_of(2) {
            let d = call(&sides.http, &sides.direct, PLAIN, 200).await?;
            (d, call(&sides.http, &sides.proxied, PLAIN, 200).await?)
        } else {
            let p = call(&sides.http, &sides.proxied, PLAIN, 200).await?;
            (call(&sides.http, &sides.direct, PLAIN, 200).await?, p)
        };
        direct.push(nanos(d));
        added.push(nanos(p) - nanos(d));
    }
    Ok((summary(&direct)?, summary(&added)?))
}

/// The small chat request, non-streamed, to the mock, the floor and the proxy in every round
/// (the order runs through all six permutations): direct, proxied minus direct, and the floor.
async fn non_streamed_rounds(
    sides: &Sides,
    rounds: usize,
) -> anyhow::Result<(Summary, Summary, Floor)> {
    let mut timings = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let mut round = [0; 3];
        for side in passthrough::order(i, 3) {
            round[side] = nanos(call(&sides.http, three(sides)[side], PLAIN, 200).await?);
        }
        timings.push(round);
    }
    against_floor(&timings)
}

/// [`non_streamed_rounds`] for the first SSE byte, and the floor's figures for the first
/// event with content in the same rounds.
async fn first_bytes(
    sides: &Sides,
    rounds: usize,
) -> anyhow::Result<(Summary, Summary, Floor, Floor)> {
    let mut timings = Vec::with_capacity(rounds);
    let mut content = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let (mut round, mut round_content) = ([0; 3], [0; 3]);
        for side in passthrough::order(i, 3) {
            let timing = stream(&sides.http, three(sides)[side], PLAIN).await?;
            round[side] = nanos(timing.first_byte);
            let first_content = timing.first_content.context("a stream without content")?;
            round_content[side] = nanos(first_content);
        }
        timings.push(round);
        content.push(round_content);
    }
    let (direct, added, floor) = against_floor(&timings)?;
    let (_, _, content_floor) = against_floor(&content)?;
    Ok((direct, added, floor, content_floor))
}

/// Direct, floor, proxied: the index of each in a round of [`non_streamed_rounds`].
fn three(sides: &Sides) -> [&Endpoint; 3] {
    [&sides.direct, &sides.floor, &sides.proxied]
}

/// Direct, proxied minus direct, and the floor's figures, from rounds of [`three`].
fn against_floor(rounds: &[[i64; 3]]) -> anyhow::Result<(Summary, Summary, Floor)> {
    let of = |f: fn(&[i64; 3]) -> i64| summary(&rounds.iter().map(f).collect::<Vec<_>>());
    let floor = Floor { floor: of(|r| r[1] - r[0])?, over: of(|r| r[2] - r[1])? };
    Ok((of(|r| r[0])?, of(|r| r[2] - r[0])?, floor))
}

async fn paced(sides: &Sides, pairs: usize) -> anyhow::Result<Paced> {
    let stall = nanos(PACED_GAP + Duration::from_millis(40));
    let mut added_worst = Vec::with_capacity(pairs);
    let mut first_byte_added = Vec::with_capacity(pairs);
    let (mut direct_worst, mut proxied_worst, mut stalls) = (0, 0, 0);
    for i in 0..pairs {
        let (d, p) = stream_pair(sides, PACED, i).await?;
        let (dw, pw) = (nanos(d.worst_gap()), nanos(p.worst_gap()));
        added_worst.push(pw - dw);
        first_byte_added.push(nanos(p.first_byte) - nanos(d.first_byte));
        direct_worst = direct_worst.max(dw);
        proxied_worst = proxied_worst.max(pw);
        stalls += p.gaps.iter().filter(|&&g| nanos(g) >= stall).count();
    }
    Ok(Paced {
        pairs,
        added_worst_gap: summary(&added_worst)?,
        direct_worst_gap: direct_worst,
        proxied_worst_gap: proxied_worst,
        first_byte_added: summary(&first_byte_added)?,
        stalls,
    })
}

async fn stream_pair(
    sides: &Sides,
    model: &str,
    i: usize,
) -> anyhow::Result<(StreamTiming, StreamTiming)> {
    Ok(if i.is_multiple_of(2) {
        let d = stream(&sides.http, &sides.direct, model).await?;
        (d, stream(&sides.http, &sides.proxied, model).await?)
    } else {
        let p = stream(&sides.http, &sides.proxied, model).await?;
        (stream(&sides.http, &sides.direct, model).await?, p)
    })
}

async fn fallback(sides: &Sides, triples: usize) -> anyhow::Result<Fallback> {
    let mut failed = Vec::with_capacity(triples);
    let mut over_second = Vec::with_capacity(triples);
    let mut beyond_failed = Vec::with_capacity(triples);
    for _ in 0..triples {
        let down = nanos(call(&sides.http, &sides.direct, DOWN, 503).await?);
        let second = nanos(call(&sides.http, &sides.direct, PLAIN, 200).await?);
        let proxied = nanos(call(&sides.http, &sides.proxied, FALLBACK_COMBO, 200).await?);
        failed.push(down);
        over_second.push(proxied - second);
        beyond_failed.push(proxied - second - down);
    }
    Ok(Fallback {
        failed: summary(&failed)?,
        over_second: summary(&over_second)?,
        beyond_failed: summary(&beyond_failed)?,
    })
}

/// Opens `count` slow streams through the proxy at once and reads its memory once every one of
/// them has delivered its first byte (all are open then: none can finish in under 2.8 s).
async fn concurrent(sides: &Sides, count: usize) -> anyhow::Result<Memory> {
    let (opened, mut open) = tokio::sync::mpsc::channel::<()>(count);
    let mut streams = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (http, endpoint, opened) = (sides.http.clone(), sides.proxied.clone(), opened.clone());
        streams.spawn(async move {
            let mut response =
                endpoint.request(&http, LONG, true).send().await?.error_for_status()?;
            let mut signalled = false;
            while let Some(piece) = response.chunk().await? {
                if !signalled && !piece.is_empty() {
                    signalled = true;
                    let _ = opened.send(()).await;
                }
            }
            anyhow::Ok(())
        });
    }
    drop(opened);
    for _ in 0..count {
        open.recv().await.context("a stream ended before all were open")?;
    }
    let memory = Memory::of(sides.proxy_pid)?;
    while let Some(done) = streams.join_next().await {
        done??;
    }
    Ok(memory)
}

fn summary(samples: &[i64]) -> anyhow::Result<Summary> {
    Summary::of(samples).context("no samples: every count in the plan must be at least 1")
}
