//! Passthrough against translation (issue 12), with the request passthrough was built for: a
//! coding agent's turn (`agent_turn.rs`, about 80 KB) sent to `POST /v1/messages`.
//!
//! Four sides, one call each per round: the mock's own Anthropic endpoint (the direct call),
//! and through the proxy to provider `an` (Anthropic, passthrough: the client's bytes go
//! upstream with `model` rewritten, the events come back relayed), to `an-tr` (the same
//! upstream with `passthrough = false`: decoded into the canonical model and encoded again, both
//! ways) and to `oa` (OpenAI: Anthropic → OpenAI and back). Each proxied call is paired with
//! the direct call of its own round; passthrough is also paired with each translated call of
//! its round, and that difference needs no direct call at all. The order inside a round runs
//! through all 24 permutations, so no side always follows another one or always goes first.
//!
//! `oa`'s upstream is the mock's OpenAI endpoint, which parses the translated (smaller) body
//! and renders an OpenAI answer; its added figure is still taken against the direct Anthropic
//! call, the request the client made.
//!
//! Before any figure, the run reads the proxy's request log (`GET /api/requests`) to check that
//! each provider served its warm-up through the path this module says it measures.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;

use super::agent_turn;
use super::client::now;
use super::stats::{Summary, nanos};

/// The upstream model of every side.
pub(crate) const AGENT: &str = "bench-agent";

/// The proxied sides, in the order of every per-path array in [`Passthrough`].
pub(crate) const PATHS: [Proxied; 3] = [
    Proxied {
        provider: "an",
        path: "passthrough",
        label: "Passthrough: Anthropic → `an` (Anthropic)",
    },
    Proxied {
        provider: "an-tr",
        path: "translated",
        label: "Translated: Anthropic → `an-tr` (Anthropic, `passthrough = false`)",
    },
    Proxied {
        provider: "oa", path: "translated", label: "Translated: Anthropic → `oa` (OpenAI)"
    },
];

/// One proxied side.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Proxied {
    pub(crate) provider: &'static str,
    /// What the request log must say of its attempts.
    path: &'static str,
    pub(crate) label: &'static str,
}

/// The mock's answer to the agent: what a turn usually ends with, a sentence and a tool call,
/// the sentence streamed in eight deltas.
pub(crate) fn mock_script() -> String {
    format!(
        r#""{AGENT}" = {{ default = {{ reply = {{ text = "I'll run the core tests once more to see whether the fix holds.", chunks = 8, tool_call = {{ name = "Bash", arguments = {{ command = "cargo test -p switchyard-core", description = "Run the core tests" }} }} }} }} }}
"#
    )
}

/// Providers `an` and `an-tr` (`oa` is the run's own OpenAI provider).
pub(crate) fn proxy_config(mock_url: &str, key_env: &str) -> String {
    format!(
        r#"
[[providers]]
id = "an"
kind = "anthropic"
base_url = "{mock_url}"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]

[[providers]]
id = "an-tr"
kind = "anthropic"
base_url = "{mock_url}"
passthrough = false
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]
"#
    )
}

/// Where each side sends the turn, with the bodies made once (outside every timing).
#[derive(Clone, Debug)]
pub(crate) struct Ways {
    /// The direct side first, then [`PATHS`].
    sides: [Side; 4],
    /// `{proxy}/api/requests` and the management token that reads it.
    requests: (String, String),
    body_bytes: usize,
}

#[derive(Clone, Debug)]
struct Side {
    url: String,
    key: String,
    model: String,
    /// Non-streamed, streamed.
    bodies: [Bytes; 2],
}

impl Side {
    fn new(url: String, key: &str, model: String) -> Self {
        let bodies = [false, true].map(|stream| Bytes::from(agent_turn::body(&model, stream)));
        Self { url, key: key.to_owned(), model, bodies }
    }
}

impl Ways {
    /// `mock` and `proxy` are base URLs (no `/v1`).
    pub(crate) fn new(
        mock: &str,
        upstream_key: &str,
        proxy: &str,
        local_key: &str,
        management_token: &str,
    ) -> Self {
        let direct = Side::new(format!("{mock}/v1/messages"), upstream_key, AGENT.to_owned());
        let proxied = PATHS.map(|p| {
            Side::new(format!("{proxy}/v1/messages"), local_key, format!("{}/{AGENT}", p.provider))
        });
        let [a, b, c] = proxied;
        let body_bytes = direct.bodies[0].len();
        Self {
            sides: [direct, a, b, c],
            requests: (format!("{proxy}/api/requests"), management_token.to_owned()),
            body_bytes,
        }
    }
}

/// One series (non-streamed, first byte or whole stream) of every side.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub(crate) direct: Summary,
    /// Proxied minus direct, per path of [`PATHS`].
    pub(crate) added: [Summary; 3],
    /// Passthrough minus each translated path, same round.
    pub(crate) versus: [Versus; 2],
}

/// Passthrough minus one translated path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Versus {
    pub(crate) difference: Summary,
    /// Share of the rounds where passthrough was faster.
    pub(crate) faster: f64,
}

/// The figures of the whole measurement.
#[derive(Clone, Debug)]
pub(crate) struct Passthrough {
    pub(crate) body_bytes: usize,
    pub(crate) warmup: usize,
    pub(crate) non_streamed: Series,
    pub(crate) first_byte: Series,
    pub(crate) whole_stream: Series,
    /// What each translated path's first warm-up attempt could not carry (from the request log).
    pub(crate) dropped: [Vec<String>; 3],
}

/// How many rounds of each kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rounds {
    pub(crate) warmup: usize,
    pub(crate) non_streamed: usize,
    pub(crate) streamed: usize,
}

pub(crate) async fn measure(
    http: &reqwest::Client,
    ways: &Ways,
    rounds: Rounds,
) -> anyhow::Result<Passthrough> {
    for i in 0..rounds.warmup {
        round(http, ways, i, false).await.context("warm-up")?;
        round(http, ways, i, true).await.context("warm-up")?;
    }
    let dropped = check_paths(http, ways).await.context("the paths the proxy took")?;
    let plain = rounds_of(http, ways, rounds.non_streamed, false).await?;
    let streamed = rounds_of(http, ways, rounds.streamed, true).await?;
    Ok(Passthrough {
        body_bytes: ways.body_bytes,
        warmup: rounds.warmup,
        non_streamed: series(&plain, |t| t.whole)?,
        first_byte: series(&streamed, |t| t.first_byte)?,
        whole_stream: series(&streamed, |t| t.whole)?,
        dropped,
    })
}

async fn rounds_of(
    http: &reqwest::Client,
    ways: &Ways,
    count: usize,
    stream: bool,
) -> anyhow::Result<Vec<[Timing; 4]>> {
    let mut all = Vec::with_capacity(count);
    for i in 0..count {
        let what = if stream { "streamed" } else { "non-streamed" };
        all.push(round(http, ways, i, stream).await.with_context(|| format!("{what} round {i}"))?);
    }
    Ok(all)
}

/// The sides of round `i`, in its order, each timed.
async fn round(
    http: &reqwest::Client,
    ways: &Ways,
    i: usize,
    stream: bool,
) -> anyhow::Result<[Timing; 4]> {
    let mut timings = [Timing::default(); 4];
    for side in order(i) {
        timings[side] = send(http, &ways.sides[side], stream).await?;
    }
    Ok(timings)
}

/// The `i`-th of the 24 orders of four sides (factorial number system), cyclically.
fn order(i: usize) -> [usize; 4] {
    let mut left = vec![0, 1, 2, 3];
    let mut k = i % 24;
    let mut out = [0; 4];
    for (slot, weight) in [6, 2, 1, 1].into_iter().enumerate() {
        out[slot] = left.remove(k / weight);
        k %= weight;
    }
    out
}

/// Send to first body byte, and send to last.
#[derive(Clone, Copy, Debug, Default)]
struct Timing {
    first_byte: Duration,
    whole: Duration,
}

/// One call, read to its end; anything but a complete 200 answer with the tool call is an error.
async fn send(http: &reqwest::Client, side: &Side, stream: bool) -> anyhow::Result<Timing> {
    let body = side.bodies[usize::from(stream)].clone();
    let started = now();
    let mut response = http
        .post(&side.url)
        .header("x-api-key", &side.key)
        .header("anthropic-version", "2023-06-01")
        .header(
            "anthropic-beta",
            "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
        )
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    let mut first_byte = None;
    let mut received = Vec::new();
    while let Some(piece) = response.chunk().await? {
        if !piece.is_empty() {
            first_byte.get_or_insert_with(|| started.elapsed());
            received.extend_from_slice(&piece);
        }
    }
    let whole = started.elapsed();
    let status = response.status();
    let has = |needle: &[u8]| received.windows(needle.len()).any(|w| w == needle);
    if status != 200 || !has(b"tool_use") || (stream && !has(b"message_stop")) {
        bail!(
            "{} {} (stream {stream}): status {status}, an incomplete answer: {}",
            side.url,
            side.model,
            String::from_utf8_lossy(&received[..received.len().min(600)])
        );
    }
    let first_byte = first_byte.context("an answer without a body")?;
    Ok(Timing { first_byte, whole })
}

/// Reads the newest request of each proxied model from the request log: it must have been
/// served, by that provider, through the path [`PATHS`] names. Returns what each could not
/// carry.
async fn check_paths(http: &reqwest::Client, ways: &Ways) -> anyhow::Result<[Vec<String>; 3]> {
    let (url, token) = &ways.requests;
    let mut dropped: [Vec<String>; 3] = Default::default();
    for (i, (path, side)) in PATHS.iter().zip(&ways.sides[1..]).enumerate() {
        // A model is `provider/name`: `/` may stand as it is in a query.
        let answer = http
            .get(format!("{url}?limit=1&model={}", side.model))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        let log: serde_json::Value = serde_json::from_slice(&answer)?;
        let served = log
            .pointer("/0/trace")
            .and_then(|t| t.as_array())
            .and_then(|t| t.last())
            .with_context(|| format!("no logged request for {}: {log}", side.model))?;
        let took = served.get("path").and_then(|p| p.as_str()).unwrap_or("none");
        ensure!(
            served.get("event").and_then(|e| e.as_str()) == Some("attempted")
                && served.get("outcome").and_then(|o| o.as_str()) == Some("success")
                && took == path.path,
            "{} was meant to be served through {}, the log says: {served}",
            side.model,
            path.path
        );
        let names = served.get("dropped").and_then(|d| d.as_array()).into_iter().flatten();
        dropped[i] = names.filter_map(|n| n.as_str().map(str::to_owned)).collect();
    }
    Ok(dropped)
}

fn series(rounds: &[[Timing; 4]], of: impl Fn(&Timing) -> Duration) -> anyhow::Result<Series> {
    let at = |r: &[Timing; 4], side: usize| nanos(of(&r[side]));
    let summary = |samples: Vec<i64>| {
        Summary::of(&samples).context("no rounds: every count in the plan must be at least 1")
    };
    let direct = summary(rounds.iter().map(|r| at(r, 0)).collect())?;
    let mut added = [direct; 3];
    for (p, slot) in added.iter_mut().enumerate() {
        *slot = summary(rounds.iter().map(|r| at(r, p + 1) - at(r, 0)).collect())?;
    }
    let mut versus = [Versus { difference: direct, faster: 0.0 }; 2];
    for (t, slot) in versus.iter_mut().enumerate() {
        let differences: Vec<i64> = rounds.iter().map(|r| at(r, 1) - at(r, t + 2)).collect();
        let faster = differences.iter().filter(|&&d| d < 0).count();
        #[expect(clippy::cast_precision_loss, reason = "a count of rounds, far below 2^52")]
        let share = faster as f64 / differences.len() as f64;
        *slot = Versus { difference: summary(differences)?, faster: share };
    }
    Ok(Series { direct, added, versus })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_scripts_the_agent_and_configures_both_anthropic_providers() {
        let script = switchyard_testkit::Script::from_toml(&crate::run::mock_script()).unwrap();
        let Some(switchyard_testkit::Behavior::Reply(reply)) = &script.models[AGENT].default else {
            panic!("{AGENT} does not reply");
        };
        assert_eq!(reply.tool_call.as_ref().map(|c| c.name.as_str()), Some("Bash"));
        let config = crate::run::proxy_config("http://127.0.0.1:1", "K");
        let config: toml::Value = toml::from_str(&config).unwrap();
        let providers = config["providers"].as_array().unwrap();
        for path in PATHS {
            let provider = providers.iter().find(|p| p["id"].as_str() == Some(path.provider));
            let provider = provider.unwrap_or_else(|| panic!("no provider {}", path.provider));
            let forced = provider.get("passthrough").and_then(toml::Value::as_bool) == Some(false);
            let kind = provider["kind"].as_str().unwrap();
            assert_eq!(path.path == "passthrough", kind == "anthropic" && !forced, "{provider}");
        }
    }

    #[test]
    fn every_side_takes_every_place_equally_often_over_24_rounds() {
        let mut seen = std::collections::BTreeSet::new();
        let mut places = [[0; 4]; 4];
        for i in 0..24 {
            let order = order(i);
            seen.insert(order);
            for (place, side) in order.into_iter().enumerate() {
                places[side][place] += 1;
            }
        }
        assert_eq!(seen.len(), 24);
        assert_eq!(places, [[6; 4]; 4]);
        assert_eq!(order(24), order(0));
    }

    #[test]
    fn passthrough_is_compared_with_each_translated_path_in_the_same_round() {
        let ms = |m: u64| Duration::from_millis(m);
        let round =
            |d, p, t, o| [d, p, t, o].map(|w| Timing { first_byte: ms(w) / 2, whole: ms(w) });
        let rounds = [round(10, 11, 13, 12), round(10, 14, 13, 15)];
        let s = series(&rounds, |t| t.whole).unwrap();
        assert_eq!(s.direct.p50, nanos(ms(10)));
        assert_eq!(s.added.map(|a| a.max), [4, 3, 5].map(|m| nanos(ms(m))));
        assert_eq!(s.versus[0].difference.p50, -nanos(ms(2)));
        assert_eq!(s.versus[0].difference.max, nanos(ms(1)));
        assert!((s.versus[0].faster - 0.5).abs() < f64::EPSILON);
        assert!((s.versus[1].faster - 1.0).abs() < f64::EPSILON);
    }
}
