//! The `## Proxy overhead` section of `docs/benchmarks.md`, rendered from one run's results,
//! and the rule that replaces that section (and nothing else) in the document.

use std::fmt::Write as _;

use super::machine::Machine;
use super::run::{FALLBACK_COMBO, PACED_CHUNKS, PACED_GAP, Plan, Results};
use super::stats::{Megabytes, Micros, Summary};

/// The heading this harness owns.
pub(crate) const HEADING: &str = "## Proxy overhead";

/// Issue 6's targets, in nanoseconds and bytes.
const ADDED_P50: i64 = 150_000;
const ADDED_P99: i64 = 400_000;
const FIRST_BYTE_P50: i64 = 300_000;
const FALLBACK_BEYOND: i64 = 1_000_000;
const RSS_IDLE: u64 = 10_000_000;
const RSS_STREAMS: u64 = 50_000_000;

/// How the run was made, for the setup table.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    pub(crate) machine: Machine,
    pub(crate) command: String,
    pub(crate) placement: String,
    pub(crate) plan: Plan,
}

fn met(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

fn row(out: &mut String, name: &str, s: &Summary) {
    let _ = writeln!(
        out,
        "| {name} | {} | {} | {} | {} | {} |",
        s.count,
        Micros(s.p50),
        Micros(s.p90),
        Micros(s.p99),
        Micros(s.max)
    );
}

/// The whole section, heading included, ending with a newline.
pub(crate) fn section(setup: &Setup, r: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Written by `switchyard-bench` (`crates/switchyard-testkit/src/bin/switchyard-bench.rs`) from \
         the run described below; run the command again to replace it. Release builds of `switchyard` \
         and `switchyard-mock` run as separate processes. Every latency figure is a **paired \
         difference**: the same request goes to the mock directly and through the proxy, back to \
         back (the order alternates between pairs), and only the difference within each pair is kept, \
         so both sides see the same machine noise. Percentiles are nearest-rank values that were \
         actually measured; a negative value means the proxied side of that pair happened to be faster.\n"
    );
    setup_table(&mut out, setup);
    targets_table(&mut out, r);
    details(&mut out, r);
    out
}

fn setup_table(out: &mut String, setup: &Setup) {
    let m = &setup.machine;
    let _ = writeln!(out, "### Setup\n\n| | |\n|---|---|");
    let _ = writeln!(out, "| Command | `{}` |", setup.command);
    let _ = writeln!(out, "| Commit | {} |", m.commit);
    let _ = writeln!(
        out,
        "| Machine | {} CPUs (`nproc`), `{}`; load average {} when the run started |",
        m.cpus, m.cpu_model, m.load
    );
    let _ = writeln!(
        out,
        "| Toolchain | `{}`, `release` profile (thin LTO, one codegen unit) |",
        m.rustc
    );
    let _ = writeln!(out, "| Placement | {} |", setup.placement);
    let p = setup.plan;
    let _ = writeln!(
        out,
        "| Load | one connection per side (c = 1), keep-alive, `TCP_NODELAY`; {} warm-up rounds, then {} \
         non-streamed pairs, {} streamed pairs, {} paced-stream pairs, {} fallback triples{} |",
        p.warmup,
        p.pairs,
        p.stream_pairs,
        p.paced_pairs,
        p.fallback_triples,
        if p.concurrent_streams > 0 {
            format!(", {} concurrent streams", p.concurrent_streams)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "| Proxy config | one OpenAI-dialect provider on the mock; the fallback combo `{FALLBACK_COMBO}` \
         has a first target on a second provider that always answers 503 (its breaker, model \
         lockouts and same-target retries off, so every request makes exactly one failed attempt) |\n"
    );
}

fn targets_table(out: &mut String, r: &Results) {
    let _ = writeln!(out, "### Against the targets of issue 6\n");
    let _ = writeln!(out, "| Metric | Measured | Target | Met |\n|---|---:|---|---|");
    let a = &r.added;
    let _ = writeln!(
        out,
        "| Added latency p50 / p99, non-streaming, c = 1 | {} / {} | ≤ 150 µs / ≤ 400 µs | {} |",
        Micros(a.p50),
        Micros(a.p99),
        met(a.p50 <= ADDED_P50 && a.p99 <= ADDED_P99)
    );
    let fb = &r.first_byte_added;
    let _ = writeln!(
        out,
        "| Added first SSE byte p50; proxied gaps ≥ 40 ms over the paced gap | {}; {} | ≤ 300 µs, and never a 40 ms step | {} |",
        Micros(fb.p50),
        r.paced.stalls,
        met(fb.p50 <= FIRST_BYTE_P50 && r.paced.stalls == 0)
    );
    let f = &r.fallback.beyond_failed;
    let _ = writeln!(
        out,
        "| Fallback hop beyond the failed attempt itself, p50 / p99 | {} / {} | ≤ 1 ms | {} |",
        Micros(f.p50),
        Micros(f.p99),
        met(f.p99 <= FALLBACK_BEYOND)
    );
    let _ = writeln!(
        out,
        "| RSS idle (headless proxy) | {} | ≤ 10 MB | {} |",
        Megabytes(r.idle.rss),
        met(r.idle.rss <= RSS_IDLE)
    );
    match r.streams {
        Some((count, memory)) => {
            let _ = writeln!(
                out,
                "| RSS with {count} open streams | {} | ≤ 50 MB (256 streams) | {} |",
                Megabytes(memory.rss),
                met(memory.rss <= RSS_STREAMS)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "| RSS with 256 open streams | not measured (quick run) | ≤ 50 MB | |"
            );
        }
    }
    let _ = writeln!(
        out,
        "| Throughput on one core at p99 < 10 ms; cold start with a 10k-row state DB; p99 while a breaker flaps | not measured by this harness yet | ≥ 8,000 req/s; ≤ 50 ms; — | |\n"
    );
}

fn details(out: &mut String, r: &Results) {
    let gap_ms = PACED_GAP.as_millis();
    let _ = writeln!(out, "### Latency, in detail\n");
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    row(out, "Direct call to the mock, non-streamed (for scale)", &r.direct);
    row(out, "**Added** by the proxy, non-streamed", &r.added);
    row(out, "Direct first SSE byte (for scale)", &r.first_byte_direct);
    row(out, "**Added** to the first SSE byte", &r.first_byte_added);
    row(
        out,
        &format!(
            "**Added** to the first SSE byte, paced stream ({PACED_CHUNKS} chunks, {gap_ms} ms apart)"
        ),
        &r.paced.first_byte_added,
    );
    row(
        out,
        "**Added** worst inter-chunk gap per paced pair (proxied worst − direct worst)",
        &r.paced.added_worst_gap,
    );
    row(out, "Direct 503 from the mock (the failed attempt by itself)", &r.fallback.failed);
    row(out, "Fallback combo minus a direct call to the second target", &r.fallback.over_second);
    row(
        out,
        "Fallback combo minus (direct 503 + direct call to the second target)",
        &r.fallback.beyond_failed,
    );
    let _ = writeln!(
        out,
        "\nPaced stream: the configured gap is {gap_ms} ms; the worst gap seen at the client over all \
         {} pairs was {} direct and {} through the proxy.\n",
        r.paced.pairs,
        Micros(r.paced.direct_worst_gap),
        Micros(r.paced.proxied_worst_gap)
    );
    let _ = writeln!(out, "### Memory of the proxy process (`/proc/PID/status`)\n");
    let _ = writeln!(out, "| When | VmRSS | VmHWM (peak so far) |\n|---|---:|---:|");
    let _ = writeln!(
        out,
        "| Idle, after start, before any request | {} | {} |",
        Megabytes(r.idle.rss),
        Megabytes(r.idle.peak)
    );
    if let Some((count, memory)) = r.streams {
        let _ = writeln!(
            out,
            "| {count} streams open at once | {} | {} |",
            Megabytes(memory.rss),
            Megabytes(memory.peak)
        );
    }
    let _ = writeln!(
        out,
        "| After all of the load above | {} | {} |",
        Megabytes(r.after.rss),
        Megabytes(r.after.peak)
    );
}

/// `doc` with the [`HEADING`] section replaced by `section` (up to the next `## ` heading), or
/// with `section` appended when there is none. Every other byte stays as it was.
pub(crate) fn replace_section(doc: &str, section: &str) -> String {
    let lines: Vec<&str> = doc.split_inclusive('\n').collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == HEADING) else {
        let mut out = doc.trim_end().to_owned();
        out.push_str("\n\n");
        out.push_str(section);
        return out;
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + 1 + i);
    let mut out: String = lines[..start].concat();
    out.push_str(section);
    if end < lines.len() {
        out.push('\n');
        out.push_str(&lines[end..].concat());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_is_appended_once_then_replaced_in_place() {
        let doc = "# Benchmarks\n\n## Routing decision\n\ntext\n";
        let once = replace_section(doc, "## Proxy overhead\n\nfirst\n");
        assert_eq!(
            once,
            "# Benchmarks\n\n## Routing decision\n\ntext\n\n## Proxy overhead\n\nfirst\n"
        );
        let twice = replace_section(&once, "## Proxy overhead\n\nsecond\n");
        assert_eq!(twice, once.replace("first", "second"));
        let before_other = "## Proxy overhead\n\nold\n\n## Other\n\nkept\n";
        assert_eq!(
            replace_section(before_other, "## Proxy overhead\n\nnew\n"),
            "## Proxy overhead\n\nnew\n\n## Other\n\nkept\n"
        );
    }
}
