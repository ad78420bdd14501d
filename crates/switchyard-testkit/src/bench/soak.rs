//! Soak: the proxy under a moderate, mixed, faulty load for a long time (ten minutes
//! unless told otherwise), its resident memory sampled every few seconds, to show whether it
//! grows. A leak shows as a slope: the least-squares fit of RSS against time over the samples
//! after a warm-up (allocator pools, connection pools and the bounded request log fill up in
//! the first minute and then should stay flat), in MB per hour.
//!
//! The load is open loop: one request every `1 / rate` seconds whatever the answers, so a proxy
//! that slows down faces the same arrivals (up to a cap on requests in flight, beyond which a
//! request is counted as not sent rather than queued without end). Requests cycle through ten
//! shapes: half streamed, both client dialects, and four in ten through a combo whose first
//! target flaps (5xx bursts, 429s with `Retry-After`, resets before the headers and mid-body,
//! stalls before the first event and mid-stream) in front of a healthy fallback.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::client::now;
use super::fleet::Memory;
use super::machine::Machine;
use super::stats::Megabytes;

/// The heading this mode owns in the docs.
pub(crate) const HEADING: &str = "## Soak";

/// Upstream models of the mock script (see [`mock_script`]).
const PLAIN: &str = "soak-plain";
const PACED: &str = "soak-paced";
const FLAKY: &str = "soak-flaky";
/// The combo with the flapping first target and a healthy fallback.
const COMBO: &str = "soak-combo";

/// The paced stream: this many deltas, this far apart (so streams overlap).
const PACED_CHUNKS: usize = 10;
const PACED_GAP: Duration = Duration::from_millis(50);
/// Gives up on a request (and counts it as timed out) after this long: far beyond any deadline
/// of the proxy config below.
const CLIENT_DEADLINE: Duration = Duration::from_secs(30);

/// How long, how hard, and how often to look.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) duration: Duration,
    /// Samples before this are shown but left out of the slope.
    pub(crate) warmup: Duration,
    pub(crate) sample_every: Duration,
    /// Requests started per second.
    pub(crate) rate: u32,
    /// Requests in flight at most; an arrival beyond it is counted as not sent.
    pub(crate) max_in_flight: usize,
}

impl Plan {
    pub(crate) fn new(duration: Duration) -> Self {
        Self {
            duration,
            // A tenth of the run, at most a minute: a short trial run still has a slope.
            warmup: (duration / 10).min(Duration::from_secs(60)),
            sample_every: Duration::from_secs(5),
            rate: 40,
            max_in_flight: 256,
        }
    }
}

/// The mock's script: a healthy plain model, a paced one, and the flapping one, whose repeating
/// queue mixes replies with every fault (17 attempts, 10 of them failures).
pub(crate) fn mock_script() -> String {
    let gap = PACED_GAP.as_millis();
    format!(
        r#""{PLAIN}" = {{ default = {{ reply = {{}} }} }}
"{PACED}" = {{ default = {{ reply = {{ chunks = {PACED_CHUNKS}, chunk_gap_ms = {gap} }} }} }}
"{FLAKY}" = {{ repeat = true, queue = [
  {{ reply = {{}} }},
  {{ status = {{ code = 503 }} }},
  {{ status = {{ code = 503 }} }},
  {{ reply = {{}} }},
  {{ status = {{ code = 429, headers = {{ retry-after = "1" }} }} }},
  {{ reply = {{}} }},
  "reset",
  {{ reply = {{ chunks = 4, fault = {{ stall_after = 2 }} }} }},
  {{ reply = {{}} }},
  {{ status = {{ code = 500 }} }},
  {{ reply = {{}} }},
  {{ reply = {{ fault = {{ reset_after = 2 }} }} }},
  {{ reply = {{}} }},
  {{ reply = {{ fault = {{ cut_after = 1 }} }} }},
  "hang",
  {{ reply = {{}} }},
  {{ status = {{ code = 529 }} }},
] }}
"#
    )
}

/// The proxy's config: provider `oa` (healthy) and provider `flaky` (two keys, the flapping
/// model) on the same mock, the combo in front of them, and deadlines short enough that a stall
/// costs a second or two, not minutes.
pub(crate) fn proxy_config(mock_url: &str, key_env: &str) -> String {
    format!(
        r#"[[providers]]
id = "oa"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]

[[providers]]
id = "flaky"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}, {{ id = "k2", secret = "env:{key_env}" }}]
breaker = {{ failure_threshold = 4, reset_timeout_ms = 2000, max_backoff_multiplier = 4 }}

[[combos]]
name = "{COMBO}"
targets = [{{ target = "flaky/{FLAKY}" }}, {{ target = "oa/{PLAIN}" }}]

[settings.model_lockouts]
base_cooldown_ms = 1000
max_cooldown_ms = 10000

[settings.timeouts]
first_event_ms = 500
first_byte_ms = 2000
idle_ms = 1000
total_ms = 10000
"#
    )
}

/// One request shape of the cycle.
#[derive(Clone, Copy, Debug)]
struct Shape {
    model: &'static str,
    stream: bool,
    anthropic: bool,
}

/// The cycle of ten: half streamed, four through the combo, four in the Anthropic dialect.
const SHAPES: [Shape; 10] = {
    const fn s(model: &'static str, stream: bool, anthropic: bool) -> Shape {
        Shape { model, stream, anthropic }
    }
    const P: &str = "oa/soak-plain";
    const S: &str = "oa/soak-paced";
    [
        s(P, false, false),
        s(S, true, false),
        s(COMBO, false, true),
        s(COMBO, true, false),
        s(COMBO, false, false),
        s(S, true, true),
        s(P, false, false),
        s(COMBO, true, true),
        s(P, true, false),
        s(P, false, true),
    ]
};

/// Where the proxy is and who may call it.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) http: reqwest::Client,
    /// `http://127.0.0.1:PORT` (the proxy's `listening on` URL without a path).
    pub(crate) base: String,
    pub(crate) key: String,
    pub(crate) pid: u32,
}

/// One RSS reading.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub(crate) at: Duration,
    pub(crate) rss: u64,
}

/// What a soak run saw.
#[derive(Clone, Debug)]
pub(crate) struct Soak {
    pub(crate) plan: Plan,
    /// Before the first request.
    pub(crate) idle: Memory,
    pub(crate) samples: Vec<Sample>,
    /// Once the load stopped and every request in flight had finished.
    pub(crate) after: Memory,
    pub(crate) lasted: Duration,
    /// Answers by kind: `200`, `200 stream complete`, `200 stream ended with an error event`,
    /// `503`, ..., and anything that went wrong on the client side.
    pub(crate) answers: BTreeMap<String, usize>,
    pub(crate) sent: usize,
    /// Arrivals not sent because the in-flight cap was reached.
    pub(crate) not_sent: usize,
}

impl Soak {
    /// Samples from the end of the warm-up on.
    pub(crate) fn steady(&self) -> &[Sample] {
        let from = self.samples.iter().position(|s| s.at >= self.plan.warmup).unwrap_or(0);
        &self.samples[from..]
    }

    /// Least-squares slope of RSS over time after the warm-up, in MB per hour.
    pub(crate) fn slope_mb_per_hour(&self) -> Option<f64> {
        slope(self.steady()).map(|bytes_per_second| bytes_per_second * 3600.0 / 1e6)
    }

    /// Requests the proxy did not answer at all (client timeouts, refused or broken
    /// connections): the proxy must answer every one, with an answer or an error.
    pub(crate) fn unanswered(&self) -> usize {
        self.answers.iter().filter(|(k, _)| k.starts_with("client:")).map(|(_, n)| n).sum()
    }
}

/// Least squares of `rss` against `at` (seconds), in bytes per second; `None` with fewer than
/// two samples.
#[expect(clippy::cast_precision_loss, reason = "byte counts and seconds of one run")]
fn slope(samples: &[Sample]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let n = samples.len() as f64;
    let xs = samples.iter().map(|s| s.at.as_secs_f64());
    let mean_x = xs.clone().sum::<f64>() / n;
    let mean_y = samples.iter().map(|s| s.rss as f64).sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for s in samples {
        let dx = s.at.as_secs_f64() - mean_x;
        sxy += dx * (s.rss as f64 - mean_y);
        sxx += dx * dx;
    }
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Runs the load for `plan.duration`, sampling the proxy's memory, then waits for the requests
/// in flight and reads it once more.
pub(crate) async fn run(target: &Target, plan: Plan) -> anyhow::Result<Soak> {
    let idle = Memory::of(target.pid)?;
    let started = now();
    let ends = started + plan.duration;
    let period = Duration::from_secs(1) / plan.rate.max(1);
    let mut arrivals = tokio::time::interval(period);
    arrivals.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sampling = tokio::time::interval(plan.sample_every);
    sampling.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut in_flight = JoinSet::new();
    let mut answers = BTreeMap::<String, usize>::new();
    let (mut samples, mut sent, mut not_sent) = (Vec::new(), 0usize, 0usize);
    loop {
        tokio::select! {
            at = arrivals.tick() => {
                if at >= ends {
                    break;
                }
                if in_flight.len() >= plan.max_in_flight {
                    not_sent += 1;
                    continue;
                }
                let shape = SHAPES[sent % SHAPES.len()];
                let target = target.clone();
                in_flight.spawn(async move { one(&target, shape).await });
                sent += 1;
            }
            _ = sampling.tick() => {
                let rss = Memory::of(target.pid).context("the proxy is gone")?.rss;
                samples.push(Sample { at: now() - started, rss });
            }
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                *answers.entry(done.context("a request task panicked")?).or_default() += 1;
            }
        }
    }
    let lasted = now() - started;
    if samples.last().is_none_or(|s| lasted.saturating_sub(s.at) >= Duration::from_secs(1)) {
        let rss = Memory::of(target.pid).context("the proxy is gone")?.rss;
        samples.push(Sample { at: lasted, rss });
    }
    while let Some(done) = in_flight.join_next().await {
        *answers.entry(done.context("a request task panicked")?).or_default() += 1;
    }
    let after = Memory::of(target.pid)?;
    Ok(Soak { plan, idle, samples, after, lasted, answers, sent, not_sent })
}

/// One request of `shape`, read to its end; what came of it, as a tally key.
async fn one(target: &Target, shape: Shape) -> String {
    let messages = json!([{"role": "user", "content": "hi"}]);
    let (path, body) = if shape.anthropic {
        let body = json!({"model": shape.model, "max_tokens": 64, "stream": shape.stream, "messages": messages});
        ("/v1/messages", body)
    } else {
        (
            "/v1/chat/completions",
            json!({"model": shape.model, "stream": shape.stream, "messages": messages}),
        )
    };
    let request = target
        .http
        .post(format!("{}{path}", target.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    // Each dialect's way of presenting the local key; the proxy accepts either on either route.
    let request = if shape.anthropic {
        request.header("x-api-key", &target.key)
    } else {
        request.bearer_auth(&target.key)
    };
    let exchange = async {
        let response = request.send().await?;
        let status = response.status().as_u16();
        let body = response.bytes().await?;
        anyhow::Ok((status, body))
    };
    match tokio::time::timeout(CLIENT_DEADLINE, exchange).await {
        Err(_) => "client: timed out".to_owned(),
        Ok(Err(error)) => format!("client: {}", error.root_cause()),
        Ok(Ok((200, body))) if shape.stream => {
            let end: &[u8] = if shape.anthropic { b"event: message_stop" } else { b"[DONE]" };
            if body.windows(end.len()).any(|w| w == end) {
                "200 stream complete".to_owned()
            } else {
                "200 stream ended with an error event".to_owned()
            }
        }
        Ok(Ok((status, _))) => status.to_string(),
    }
}

/// How the run was made, for the setup table.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    pub(crate) machine: Machine,
    pub(crate) load_after: String,
    pub(crate) command: String,
    pub(crate) placement: String,
}

/// The `## Soak` section, heading included, ending with a newline.
pub(crate) fn section(setup: &Setup, soak: &Soak) -> String {
    let mut out = String::new();
    let p = soak.plan;
    let m = &setup.machine;
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Written by `switchyard-bench --soak` (`crates/switchyard-testkit/src/bench/soak.rs`) from \
         the run described below; run the command again to replace it. A release build of \
         `switchyard` runs in front of a release build of `switchyard-mock`, each its own \
         process, under a moderate, mixed and faulty load for {}; the proxy's resident memory \
         (`VmRSS` in `/proc/PID/status`) is read every {} s. A leak would show as a steady rise: \
         the slope is the least-squares fit of RSS against time over the samples after a {} s \
         warm-up, in which allocator and connection pools and the bounded request log fill up.\n",
        duration(p.duration),
        p.sample_every.as_secs(),
        p.warmup.as_secs()
    );
    let _ = writeln!(out, "### Setup\n\n| | |\n|---|---|");
    let _ = writeln!(out, "| Command | `{}` |", setup.command);
    let _ = writeln!(out, "| Commit | {} |", m.commit);
    let _ = writeln!(
        out,
        "| Machine | {} CPUs (`nproc`), `{}`; load average {} when the run started, {} when it ended |",
        m.cpus, m.cpu_model, m.load, setup.load_after
    );
    let _ = writeln!(out, "| Toolchain | `{}`, `release` profile |", m.rustc);
    let _ = writeln!(out, "| Placement | {} |", setup.placement);
    let _ = writeln!(
        out,
        "| Load | open loop, {} requests per second (at most {} in flight), cycling through ten \
         shapes: half streamed, four in ten in the Anthropic dialect (the rest OpenAI), four in \
         ten through the combo `{COMBO}`; the others to `oa/{PLAIN}` (plain answers) and \
         `oa/{PACED}` ({PACED_CHUNKS} deltas {} ms apart) |",
        p.rate,
        p.max_in_flight,
        PACED_GAP.as_millis()
    );
    let _ = writeln!(
        out,
        "| Faults | `{COMBO}` = `flaky/{FLAKY}` then `oa/{PLAIN}`. The mock answers `{FLAKY}` \
         from a repeating queue of 17: 7 replies, two 503s in a row, a 500, a 529, a 429 with \
         `Retry-After: 1`, a reset before the headers, silence (past the first-event \
         deadline), a stall after two events, a reset after two events and a cut after one. \
         Provider `flaky` has two keys and `breaker = {{ failure_threshold = 4, \
         reset_timeout_ms = 2000, max_backoff_multiplier = 4 }}`; model lockouts 1 s to 10 s; \
         deadlines: first event 500 ms, first byte 2 s, idle 1 s, total 10 s |\n"
    );

    results(&mut out, soak);
    out
}

/// The memory table, the requests and every sample.
fn results(out: &mut String, soak: &Soak) {
    let p = soak.plan;
    let _ = writeln!(out, "### Memory of the proxy process\n");
    let steady = soak.steady();
    let first = steady.first().map_or(0, |s| s.rss);
    let last = steady.last().map_or(0, |s| s.rss);
    let (low, high) =
        steady.iter().fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s.rss), hi.max(s.rss)));
    let _ = writeln!(out, "| | |\n|---|---:|");
    let _ = writeln!(out, "| RSS idle, before the first request | {} |", Megabytes(soak.idle.rss));
    let _ = writeln!(
        out,
        "| RSS at the end of the warm-up (start of the fit) | {} |",
        Megabytes(first)
    );
    let _ = writeln!(out, "| RSS at the end of the load (end of the fit) | {} |", Megabytes(last));
    let _ = writeln!(
        out,
        "| RSS lowest / highest after the warm-up | {} / {} |",
        Megabytes(if steady.is_empty() { 0 } else { low }),
        Megabytes(high)
    );
    let _ = writeln!(
        out,
        "| RSS once every request in flight had finished | {} |",
        Megabytes(soak.after.rss)
    );
    let _ =
        writeln!(out, "| Peak RSS of the whole run (`VmHWM`) | {} |", Megabytes(soak.after.peak));
    let _ = writeln!(
        out,
        "| **Slope** after the warm-up, least squares over {} samples | **{}** |",
        steady.len(),
        soak.slope_mb_per_hour()
            .map_or_else(|| "not enough samples".to_owned(), |s| format!("{s:+.2} MB/hour"))
    );
    let _ = writeln!(out);

    let _ = writeln!(out, "### Requests\n");
    #[expect(clippy::cast_precision_loss, reason = "a request count")]
    let rate = soak.sent as f64 / soak.lasted.as_secs_f64().max(1e-9);
    let _ = writeln!(
        out,
        "{} requests sent in {:.1} s ({rate:.1} per second); {} arrivals not sent because {} were \
         already in flight. The proxy must answer every request, with an answer or with an \
         error in the client's dialect: requests it did not answer at all: {}.\n",
        soak.sent,
        soak.lasted.as_secs_f64(),
        soak.not_sent,
        p.max_in_flight,
        soak.unanswered()
    );
    let _ = writeln!(out, "| Answer | Count |\n|---|---:|");
    for (answer, count) in &soak.answers {
        let _ = writeln!(out, "| `{answer}` | {count} |");
    }
    let _ = writeln!(
        out,
        "\n<details><summary>Every sample (seconds since the load started, VmRSS)</summary>\n"
    );
    let _ = writeln!(out, "| t | RSS |\n|---:|---:|");
    for s in &soak.samples {
        let _ = writeln!(out, "| {:.0} s | {} |", s.at.as_secs_f64(), Megabytes(s.rss));
    }
    let _ = writeln!(out, "\n</details>");
}

/// `10 min`, `90 s`, `1 h 30 min`.
fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h} h"));
    }
    if m > 0 {
        parts.push(format!("{m} min"));
    }
    if s > 0 || parts.is_empty() {
        parts.push(format!("{s} s"));
    }
    parts.join(" ")
}

/// `--duration`: `600`, `600s`, `10m`, `1h`.
pub(crate) fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let (number, unit) =
        text.find(|c: char| !c.is_ascii_digit()).map_or((text, ""), |at| text.split_at(at));
    let n: u64 = number.parse().with_context(|| format!("{text:?} is not a duration"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" | "min" => n * 60,
        "h" => n * 3600,
        _ => bail!("{text:?}: use seconds (600 or 600s), minutes (10m) or hours (1h)"),
    };
    if secs == 0 {
        bail!("a soak of zero seconds measures nothing");
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(points: &[(u64, u64)]) -> Vec<Sample> {
        points.iter().map(|&(at, rss)| Sample { at: Duration::from_secs(at), rss }).collect()
    }

    #[test]
    fn the_slope_is_the_least_squares_fit() {
        // 1 MB per 100 s is 36 MB per hour.
        let rising = samples(&[(0, 10_000_000), (100, 11_000_000), (200, 12_000_000)]);
        let s = slope(&rising).unwrap();
        assert!((s * 3600.0 / 1e6 - 36.0).abs() < 1e-9, "{s}");
        let flat = samples(&[(0, 5), (10, 7), (20, 5), (30, 7)]);
        assert!(slope(&flat).unwrap().abs() < 0.2);
        assert!(slope(&samples(&[(0, 1)])).is_none());
    }

    #[test]
    fn durations_read_and_print_in_plain_units() {
        assert_eq!(parse_duration("600").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("0s").is_err());
        assert_eq!(duration(Duration::from_secs(600)), "10 min");
        assert_eq!(duration(Duration::from_secs(5400)), "1 h 30 min");
        assert_eq!(duration(Duration::from_secs(45)), "45 s");
    }

    #[test]
    fn the_mock_script_and_the_proxy_config_parse() {
        let script = switchyard_testkit::Script::from_toml(&mock_script()).unwrap();
        assert!(script.models[FLAKY].repeat);
        assert_eq!(script.models[FLAKY].queue.len(), 17);
        let config: toml::Value = toml::from_str(&proxy_config("http://127.0.0.1:1", "K")).unwrap();
        assert_eq!(config["combos"][0]["name"].as_str(), Some(COMBO));
    }
}
