//! Hedged first token: the client's time to first token for a combo whose primary is
//! slow one time in ten, with hedging off and on, paired in one run.
//!
//! Two combos with the same shape: provider `hp`'s model first, provider `oa`'s
//! `bench-plain` (answers at once) second. Their primaries are two mock models with the same
//! queue, nine quick replies then one whose first event comes after [`SLOW`], over and over; as
//! each request of a pair takes exactly one answer from its own primary's queue, the two sides
//! of every pair meet the same primary behaviour. Only `bench-hedge-on` hedges
//! (`hedge_after_ms` = [`HEDGE_AFTER`]). The proxy is one of its own, with the default retry
//! budget: the main run's proxy has the budget off, and a hedge spends it.
//!
//! Every figure is the client's time from sending the request to the first byte of the
//! streamed answer (the proxy sends nothing before the first real event).

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;

use super::client::{Endpoint, stream};
use super::stats::{Summary, nanos};

/// The section this measurement writes in `docs/benchmarks.md`.
pub(crate) const HEADING: &str = "## Hedged first token";

/// The primary's slow answers: first event this late, one answer in [`SLOW_EVERY`].
pub(crate) const SLOW: Duration = Duration::from_secs(1);
pub(crate) const SLOW_EVERY: usize = 10;
/// The hedging combo's `hedge_after_ms`.
pub(crate) const HEDGE_AFTER: Duration = Duration::from_millis(200);
/// Pairs in a full run.
pub(crate) const PAIRS: usize = 400;

const OFF: &str = "bench-hedge-off";
const ON: &str = "bench-hedge-on";
const PRIMARY_OFF: &str = "bench-hedge-a";
const PRIMARY_ON: &str = "bench-hedge-b";
/// Periods in each primary's queue: more than any run asks for (a quick reply after).
const PERIODS: usize = 200;

/// The primaries' entries in the mock script.
pub(crate) fn mock_script() -> String {
    let slow = format!("{{ reply = {{ first_event_delay_ms = {} }} }}", SLOW.as_millis());
    let period: Vec<&str> = std::iter::repeat_n("{ reply = {} }", SLOW_EVERY - 1)
        .chain(std::iter::once(slow.as_str()))
        .collect();
    let period = period.join(", ");
    let queue = vec![period.as_str(); PERIODS].join(", ");
    let mut out = String::new();
    for model in [PRIMARY_OFF, PRIMARY_ON] {
        let _ =
            writeln!(out, "\"{model}\" = {{ queue = [{queue}], default = {{ reply = {{}} }} }}");
    }
    out
}

/// The hedging proxy's whole config.
pub(crate) fn proxy_config(mock_url: &str, key_env: &str) -> String {
    format!(
        r#"[[providers]]
id = "hp"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]

[[providers]]
id = "oa"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]

[[combos]]
name = "{OFF}"
targets = [{{ target = "hp/{PRIMARY_OFF}" }}, {{ target = "oa/bench-plain" }}]

[[combos]]
name = "{ON}"
targets = [{{ target = "hp/{PRIMARY_ON}" }}, {{ target = "oa/bench-plain" }}]
hedge_after_ms = {}
"#,
        HEDGE_AFTER.as_millis()
    )
}

/// The paired figures.
#[derive(Clone, Debug)]
pub(crate) struct Hedging {
    pub(crate) off: Summary,
    pub(crate) on: Summary,
    /// Per pair: on minus off.
    pub(crate) difference: Summary,
}

/// `pairs` pairs, the order inside a pair alternating; `proxied` is the hedging proxy with no
/// model prefix.
pub(crate) async fn measure(
    http: &reqwest::Client,
    proxied: &Endpoint,
    pairs: usize,
) -> anyhow::Result<Hedging> {
    anyhow::ensure!(pairs <= PERIODS * SLOW_EVERY, "at most {} pairs", PERIODS * SLOW_EVERY);
    let (mut off, mut on, mut difference) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (o, h) = if i.is_multiple_of(2) {
            let o = stream(http, proxied, OFF).await?;
            (o, stream(http, proxied, ON).await?)
        } else {
            let h = stream(http, proxied, ON).await?;
            (stream(http, proxied, OFF).await?, h)
        };
        let (o, h) = (nanos(o.first_byte), nanos(h.first_byte));
        off.push(o);
        on.push(h);
        difference.push(h - o);
    }
    let summary = |s: &[i64]| Summary::of(s).context("no hedging pairs");
    Ok(Hedging { off: summary(&off)?, on: summary(&on)?, difference: summary(&difference)? })
}

/// The `## Hedged first token` section, heading included.
pub(crate) fn section(command: &str, source: &str, h: &Hedging) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Written by `switchyard-bench` (`crates/switchyard-testkit/src/bench/hedge.rs`) from one \
         run of `{command}` ({source}); run it again to replace this section. A combo whose \
         primary answers one request in {SLOW_EVERY} with its first event after {} ms, the others \
         at once, and whose second target (another provider) answers at once; the same requests \
         with hedging off and with `hedge_after_ms = {}`, in {} pairs (the order alternates), \
         each side meeting the same primary behaviour. The figure is the client's time from \
         sending a streamed request to its first byte, through a release build of the proxy on \
         its own process, against the testkit mock.\n",
        SLOW.as_millis(),
        HEDGE_AFTER.as_millis(),
        h.off.count
    );
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("Time to first token, hedging off", &h.off),
        ("Time to first token, hedging on", &h.on),
        ("On minus off, per pair", &h.difference),
    ] {
        super::report::row(&mut out, name, s);
    }
    let _ = writeln!(
        out,
        "\nWith one request in {SLOW_EVERY} slow, the slowest tenth of each series is the slow \
         primary's: p99 and max fall on them (p90 is still a quick answer). Off, they wait for \
         the slow first event; on, they get the hedge's answer about {} ms in. Per pair, on minus \
         off is about −{} ms for the slow tenth (below p10, not shown) and noise around zero for \
         the rest: the quick majority starts no hedge and pays nothing for it.",
        HEDGE_AFTER.as_millis(),
        SLOW.saturating_sub(HEDGE_AFTER).as_millis()
    );
    out
}
