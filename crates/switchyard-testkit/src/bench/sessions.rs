//! Sessions (RESILIENCE.md §11): what keeping each agent session on its key costs a
//! request, and what it saves a session, paired in one run.
//!
//! Two proxies of their own with the same config but `[settings.routing] sessions`: an
//! Anthropic provider (the catalogue's `anthropic` preset, so its model is priced at the
//! catalogue's prices) pooling three keys with `round_robin`, in front of a mock that keeps a
//! prompt cache per key (`switchyard-mock --cache-prompts`).
//!
//! - **Lookup**: the same small Anthropic request to both, back to back, the order alternating;
//!   once naming its session as Claude Code does (`X-Claude-Code-Session-Id`) and once naming
//!   none, so the session is derived from the system prompt and first message (a digest per
//!   request). The pair's difference is the whole per-request cost of sessions: reading the
//!   session, the pin lookup, steering the plan and re-pinning after the answer.
//! - **A 20-turn session**: Claude Code's shape (tool definitions, a system prompt, a history
//!   that grows by a turn each time) on each proxy, each with content of its own so neither
//!   warms the other's cache; the cost is what the proxy itself priced (`x-switchyard-cost`).

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::stats::{Summary, nanos};

/// The section this measurement writes in `docs/benchmarks.md`.
pub(crate) const HEADING: &str = "## Sessions";

/// The combo both proxies serve.
const COMBO: &str = "bench-sessions";
/// A catalogue model of the `anthropic` preset: priced at the catalogue's prices.
const MODEL: &str = "claude-sonnet-4-20250514";
/// Pairs in a full run, of each kind.
pub(crate) const PAIRS: usize = 2000;
pub(crate) const QUICK_PAIRS: usize = 200;
const WARMUP: usize = 100;
/// Turns of the priced session.
pub(crate) const TURNS: usize = 20;
/// The upstream keys' variables: three keys, so each has a prompt cache of its own.
pub(crate) const KEY_ENVS: [&str; 3] =
    ["BENCH_SESSION_KEY_1", "BENCH_SESSION_KEY_2", "BENCH_SESSION_KEY_3"];

/// A proxy's whole config: sessions on or off.
pub(crate) fn proxy_config(mock_url: &str, sessions: bool) -> String {
    let keys: Vec<String> = KEY_ENVS
        .iter()
        .enumerate()
        .map(|(i, env)| format!("{{ id = \"k{}\", secret = \"env:{env}\" }}", i + 1))
        .collect();
    format!(
        r#"[[providers]]
id = "an"
preset = "anthropic"
base_url = "{mock_url}"
selection = {{ strategy = "round_robin" }}
credentials = [{keys}]

[[combos]]
name = "{COMBO}"
targets = [{{ target = "an/{MODEL}" }}]

[settings.routing]
sessions = {sessions}
"#,
        keys = keys.join(", ")
    )
}

/// Where one proxy is.
#[derive(Clone, Debug)]
pub(crate) struct Side {
    /// `…/v1/messages`.
    pub(crate) url: String,
    pub(crate) key: String,
}

/// The paired figures and the two sessions' costs.
#[derive(Clone, Debug)]
pub(crate) struct SessionFigures {
    pub(crate) named_off: Summary,
    pub(crate) named_on: Summary,
    pub(crate) named_difference: Summary,
    pub(crate) derived_off: Summary,
    pub(crate) derived_on: Summary,
    pub(crate) derived_difference: Summary,
    /// Pairs whose sessions side was the faster, named and derived.
    pub(crate) on_faster: (usize, usize),
    pub(crate) on: SessionCost,
    pub(crate) off: SessionCost,
}

/// What one 20-turn session cost and read from the cache.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SessionCost {
    pub(crate) usd: f64,
    pub(crate) prompt_tokens: u64,
    pub(crate) cache_read: u64,
}

/// A small request; `session` names it (Claude Code's header) or, `None`, leaves it derived.
fn small(http: &reqwest::Client, side: &Side, session: Option<&str>) -> reqwest::RequestBuilder {
    let body = json!({
        "model": COMBO, "max_tokens": 64, "system": "You are a coding agent.",
        "messages": [{"role": "user", "content": "hi"}],
    });
    let request = http
        .post(&side.url)
        .header("x-api-key", &side.key)
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body.to_string());
    match session {
        Some(id) => request.header("x-claude-code-session-id", id),
        None => request,
    }
}

/// Send to last byte; any answer but 200 is an error.
async fn timed(request: reqwest::RequestBuilder) -> anyhow::Result<Duration> {
    let started = super::client::now();
    let response = request.send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = started.elapsed();
    if status != 200 {
        bail!("status {status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(elapsed)
}

/// `pairs` alternating pairs of `send`: (off, on, on minus off, on faster).
async fn paired<F, Fut>(pairs: usize, send: F) -> anyhow::Result<(Summary, Summary, Summary, usize)>
where
    F: Fn(bool) -> Fut,
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let (mut a, mut b, mut d) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (x, y) = if i.is_multiple_of(2) {
            let x = send(false).await?;
            (x, send(true).await?)
        } else {
            let y = send(true).await?;
            (send(false).await?, y)
        };
        let (x, y) = (nanos(x), nanos(y));
        a.push(x);
        b.push(y);
        d.push(y - x);
    }
    let summary = |s: &[i64]| Summary::of(s).context("no session pairs");
    Ok((summary(&a)?, summary(&b)?, summary(&d)?, d.iter().filter(|d| **d < 0).count()))
}

/// The lookup pairs, then one priced session on each side.
pub(crate) async fn measure(
    http: &reqwest::Client,
    on: &Side,
    off: &Side,
    pairs: usize,
) -> anyhow::Result<SessionFigures> {
    let side = |sessions: bool| if sessions { on } else { off };
    for _ in 0..WARMUP {
        for sessions in [true, false] {
            timed(small(http, side(sessions), Some("bench-warm-up"))).await?;
            timed(small(http, side(sessions), None)).await?;
        }
    }
    let named = |sessions| timed(small(http, side(sessions), Some("bench-named-session")));
    let (named_off, named_on, named_difference, named_faster) = paired(pairs, named).await?;
    let derived = |sessions| timed(small(http, side(sessions), None));
    let (derived_off, derived_on, derived_difference, derived_faster) =
        paired(pairs, derived).await?;
    Ok(SessionFigures {
        named_off,
        named_on,
        named_difference,
        derived_off,
        derived_on,
        derived_difference,
        on_faster: (named_faster, derived_faster),
        on: session_cost(http, on, "on").await?,
        off: session_cost(http, off, "off").await?,
    })
}

/// One Claude Code-shaped session of [`TURNS`] turns: about 6,000 tokens of tools and 800 of
/// system prompt of its own (`tag` makes them differ between the sides), then the turns.
async fn session_cost(
    http: &reqwest::Client,
    side: &Side,
    tag: &str,
) -> anyhow::Result<SessionCost> {
    // Marked as Claude Code marks them: the last tool, the system prompt and (below) the last
    // message are breakpoints, as Anthropic (and the mock) caches nothing unmarked.
    let breakpoint = || json!({"type": "ephemeral"});
    let mut tools: Vec<Value> = (0..20)
        .map(|n| {
            let description =
                format!("Tool {n} of {tag}: {}", "does one careful thing. ".repeat(46));
            json!({"name": format!("tool_{n}"), "description": description,
                "input_schema": {"type": "object", "properties": {}}})
        })
        .collect();
    if let Some(last) = tools.last_mut() {
        last["cache_control"] = breakpoint();
    }
    let text = format!("You are the agent of side {tag}. {}", "Work on the task. ".repeat(90));
    let system = json!([{"type": "text", "text": text, "cache_control": breakpoint()}]);
    let mut messages: Vec<Value> = Vec::new();
    let mut cost = SessionCost::default();
    for turn in 0..TURNS {
        messages.push(
            json!({"role": "user", "content": format!("Turn {turn}: go on with the change.")}),
        );
        let mut marked = messages.clone();
        if let Some(last) = marked.last_mut() {
            let text = last["content"].take();
            last["content"] =
                json!([{"type": "text", "text": text, "cache_control": breakpoint()}]);
        }
        let body = json!({"model": COMBO, "max_tokens": 256, "system": system, "tools": tools,
            "messages": marked});
        let response = http
            .post(&side.url)
            .header("x-api-key", &side.key)
            .header("anthropic-version", "2023-06-01")
            .header("x-claude-code-session-id", format!("bench-priced-{tag}"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await?;
        if response.status() != 200 {
            bail!("turn {turn}: status {}", response.status());
        }
        let usd = response
            .headers()
            .get("x-switchyard-cost")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<f64>().ok())
            .context("the proxy priced no turn: is the model in the catalogue?")?;
        let answer: Value = serde_json::from_slice(&response.bytes().await?)?;
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        let usage = &answer["usage"];
        let read = n(&usage["cache_read_input_tokens"]);
        cost.usd += usd;
        cost.cache_read += read;
        cost.prompt_tokens +=
            n(&usage["input_tokens"]) + read + n(&usage["cache_creation_input_tokens"]);
        let text = answer["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        messages.push(json!({"role": "assistant", "content": text}));
    }
    Ok(cost)
}

/// The `## Sessions` section, heading included.
pub(crate) fn section(command: &str, source: &str, f: &SessionFigures) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Written by `switchyard-bench` (`crates/switchyard-testkit/src/bench/sessions.rs`) from \
         one run of `{command}` ({source}); run it again to replace this section. Two release \
         builds of the proxy, each a process of its own on the same core, with the same config \
         but `[settings.routing] sessions`: an Anthropic provider pooling three keys with \
         `round_robin`, in front of a mock that keeps a prompt cache per key. Each pair sends the \
         same small non-streamed request to both, back to back, the order alternating, {} pairs \
         of each kind; the figures are the client's times, send to last byte.\n",
        f.named_off.count
    );
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("Named session (Claude Code's header), sessions off", &f.named_off),
        ("Named session, sessions on", &f.named_on),
        ("**Named session, on minus off, per pair**", &f.named_difference),
        ("Derived session (no id: system prompt and first message), off", &f.derived_off),
        ("Derived session, on", &f.derived_on),
        ("**Derived session, on minus off, per pair**", &f.derived_difference),
    ] {
        super::report::row(&mut out, name, s);
    }
    let _ = writeln!(
        out,
        "\nThe sessions side was the faster in {} of {} named pairs and {} of {} derived pairs \
         (about half: apart from its p50, a difference is the machine's noise).\n",
        f.on_faster.0, f.named_difference.count, f.on_faster.1, f.derived_difference.count
    );
    let _ = writeln!(
        out,
        "A {TURNS}-turn Claude Code-shaped session (about 6,000 tokens of tools and 800 of system \
         prompt, a history growing by a turn each time) through the same round robin over three \
         keys, priced by the proxy at the catalogue's prices for `{MODEL}` (input $3, cache read \
         $0.30, cache write $3.75, output $15 per million tokens):\n"
    );
    let _ = writeln!(
        out,
        "| Sessions | Prompt tokens | Read from the cache | Cost |\n|---|---:|---:|---:|"
    );
    for (name, c) in [("on (affinity)", &f.on), ("off (every turn rotates)", &f.off)] {
        let share = if c.prompt_tokens == 0 {
            0.0
        } else {
            #[expect(clippy::cast_precision_loss, reason = "token counts fit an f64")]
            let share = c.cache_read as f64 / c.prompt_tokens as f64;
            share
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {:.1} % | ${:.4} |",
            c.prompt_tokens,
            share * 100.0,
            c.usd
        );
    }
    let ratio = if f.on.usd > 0.0 { f.off.usd / f.on.usd } else { 0.0 };
    let _ = writeln!(
        out,
        "\nWithout affinity the same session costs {ratio:.2} times as much: each key caches its \
         own prefixes, so a turn on a key other than the last one's writes what the last one had \
         cached."
    );
    out
}
