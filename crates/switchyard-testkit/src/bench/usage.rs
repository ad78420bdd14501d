//! Usage tracking: what counting every request into the usage aggregates, and
//! checking a budget before it is routed, adds to a request, paired in one run.
//!
//! Two proxies of their own with the same config but `[settings.usage]`: one tracks usage and
//! holds an enforced monthly budget (never reached) so the check before each request and the
//! spend after it run; the other has `tracking = false`. Both serve the combo [`COMBO`], a
//! priced target whose mock model reports usage in every answer, so the request log's per-request
//! usage and cost (which both keep) are the same work on both sides and only the tracking
//! differs. Each pair sends the same request to both, back to back, the order alternating.
//!
//! Non-streamed, the record is counted before the answer returns: the pair's difference is the
//! whole cost. Streamed, it is counted when the stream ends, after the client's first byte; the
//! first-byte difference shows the budget check alone.

use std::fmt::Write as _;

use anyhow::Context as _;

use super::client::{Endpoint, call, stream};
use super::stats::{Summary, nanos};

/// The section this measurement writes in `docs/benchmarks.md`.
pub(crate) const HEADING: &str = "## Usage tracking";

/// The combo both proxies serve, and its mock model.
const COMBO: &str = "bench-usage";
const MODEL: &str = "bench-usage";
/// Pairs in a full run, of each kind.
pub(crate) const PAIRS: usize = 2000;
const WARMUP: usize = 200;

/// The mock model's entry: an answer that reports usage, as a coding agent's upstream does.
pub(crate) fn mock_script() -> String {
    format!(
        "\"{MODEL}\" = {{ default = {{ reply = {{ usage = {{ input = 1000, cache_read = 4000, \
         output = 300, reasoning = 50 }} }} }} }}\n"
    )
}

/// A usage proxy's whole config: tracking on with a budget, or off.
pub(crate) fn proxy_config(mock_url: &str, key_env: &str, tracking: bool) -> String {
    let usage = if tracking {
        "[settings.budgets]\nmonthly = { limit_usd = 1000000.0, enforce = true }\n"
    } else {
        "[settings.usage]\ntracking = false\n"
    };
    let provider = super::run::openai_provider("oa", mock_url, key_env);
    format!(
        r#"{provider}
[[combos]]
name = "{COMBO}"
targets = [{{ target = "oa/{MODEL}", price = {{ input_per_mtok = 2.5, output_per_mtok = 10.0, cache_read_per_mtok = 1.25 }} }}]

{usage}"#
    )
}

/// The paired figures.
#[derive(Clone, Debug)]
pub(crate) struct Tracking {
    pub(crate) off: Summary,
    pub(crate) on: Summary,
    /// Per pair: on minus off.
    pub(crate) difference: Summary,
    pub(crate) first_byte_off: Summary,
    pub(crate) first_byte_on: Summary,
    pub(crate) first_byte_difference: Summary,
    /// Pairs whose tracking side was the faster, non-streamed and first byte: about half when
    /// the difference is noise.
    pub(crate) on_faster: (usize, usize),
}

/// `pairs` non-streamed and `pairs` streamed pairs, the order inside a pair alternating.
pub(crate) async fn measure(
    http: &reqwest::Client,
    on: &Endpoint,
    off: &Endpoint,
    pairs: usize,
) -> anyhow::Result<Tracking> {
    for _ in 0..WARMUP {
        call(http, on, COMBO, 200).await?;
        call(http, off, COMBO, 200).await?;
        stream(http, on, COMBO).await?;
        stream(http, off, COMBO).await?;
    }
    let (mut a, mut b, mut d) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (x, y) = if i.is_multiple_of(2) {
            let x = call(http, off, COMBO, 200).await?;
            (x, call(http, on, COMBO, 200).await?)
        } else {
            let y = call(http, on, COMBO, 200).await?;
            (call(http, off, COMBO, 200).await?, y)
        };
        let (x, y) = (nanos(x), nanos(y));
        a.push(x);
        b.push(y);
        d.push(y - x);
    }
    let (mut fa, mut fb, mut fd) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (x, y) = if i.is_multiple_of(2) {
            let x = stream(http, off, COMBO).await?;
            (x, stream(http, on, COMBO).await?)
        } else {
            let y = stream(http, on, COMBO).await?;
            (stream(http, off, COMBO).await?, y)
        };
        let (x, y) = (nanos(x.first_byte), nanos(y.first_byte));
        fa.push(x);
        fb.push(y);
        fd.push(y - x);
    }
    let summary = |s: &[i64]| Summary::of(s).context("no usage-tracking pairs");
    let faster = |s: &[i64]| s.iter().filter(|d| **d < 0).count();
    Ok(Tracking {
        on_faster: (faster(&d), faster(&fd)),
        off: summary(&a)?,
        on: summary(&b)?,
        difference: summary(&d)?,
        first_byte_off: summary(&fa)?,
        first_byte_on: summary(&fb)?,
        first_byte_difference: summary(&fd)?,
    })
}

/// The `## Usage tracking` section, heading included.
pub(crate) fn section(command: &str, source: &str, t: &Tracking) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Written by `switchyard-bench` (`crates/switchyard-testkit/src/bench/usage.rs`) from one \
         run of `{command}` ({source}); run it again to replace this section. Two release builds \
         of the proxy, each a process of its own on the same core, with the same config but \
         `[settings.usage]`: one tracks usage (aggregates, metrics labels) and holds an enforced \
         monthly budget that is never reached, so the check before every request and the spend \
         after it run; the other has `tracking = false`. Both serve a priced combo whose mock \
         model reports usage in every answer. Each pair sends the same request to both, back to \
         back, the order alternating, {} pairs of each kind; the figures are the client's times \
         (non-streamed: send to last byte; streamed: send to first byte).\n",
        t.off.count
    );
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("Non-streamed, tracking off", &t.off),
        ("Non-streamed, tracking on", &t.on),
        ("**Non-streamed, on minus off, per pair**", &t.difference),
        ("First SSE byte, tracking off", &t.first_byte_off),
        ("First SSE byte, tracking on", &t.first_byte_on),
        ("**First SSE byte, on minus off, per pair**", &t.first_byte_difference),
    ] {
        super::report::row(&mut out, name, s);
    }
    let _ = writeln!(
        out,
        "\nThe tracking side was the faster in {} of {} non-streamed pairs and {} of {} \
         first-byte pairs (about half: apart from its p50, a difference is the machine's noise, \
         which falls on either side). A non-streamed request is counted before its answer returns, so \
         its p50 difference is the whole cost of tracking on the request path (a lock, a map \
         update, the budget's check and spend); a stream is counted when it ends, so its first \
         byte carries only the budget check. The state file's share (the aggregates upserted in \
         the request log's own transaction) is written behind, off the request path.",
        t.on_faster.0, t.difference.count, t.on_faster.1, t.first_byte_difference.count
    );
    out
}
