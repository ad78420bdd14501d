//! The `## Proxy overhead` section of `docs/benchmarks.md`, rendered from one run's results,
//! and the rule that replaces that section (and nothing else) in the document.

use std::fmt::Write as _;

use super::cold_start::{ColdStart, ROWS};
use super::flap::{BreakerFlap, DRIVER_EVERY, FLAP};
use super::fleet::Memory;
use super::machine::Machine;
use super::passthrough::{CASES, Client, Passthrough, Series};
use super::run::{FALLBACK_COMBO, PACED_CHUNKS, PACED_GAP, Plan, Results};
use super::stats::{Megabytes, Micros, Summary};
use super::throughput::{BOUNDS, CONCURRENCY, Step, best_under};

/// The heading this harness owns.
pub(crate) const HEADING: &str = "## Proxy overhead";

/// Issue 6's targets, in nanoseconds and bytes.
const ADDED_P50: i64 = 150_000;
const ADDED_P99: i64 = 400_000;
const FIRST_BYTE_P50: i64 = 300_000;
const FALLBACK_BEYOND: i64 = 1_000_000;
const RSS_IDLE: u64 = 10_000_000;
const RSS_STREAMS: u64 = 50_000_000;
const THROUGHPUT: f64 = 8_000.0;
const COLD_START: i64 = 50_000_000;
/// Issue 33's targets for Switchyard's extra over the bare pass-through, in nanoseconds.
const OVER_FLOOR_P50: i64 = 15_000;
const OVER_FLOOR_P99: i64 = 150_000;
const OVER_FLOOR_FIRST_BYTE_P50: i64 = 25_000;
const OVER_FLOOR_AGENT_P50: i64 = 50_000;
/// The issue sets no number for the flapping run; this harness asks that its added p99 stay
/// within this much of the run with the same background load but no state changes.
const FLAP_SLACK: i64 = 100_000;

/// How the run was made, for the setup table.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    pub(crate) machine: Machine,
    /// `/proc/loadavg` when the measurements ended (the run itself adds about 2).
    pub(crate) load_after: String,
    pub(crate) command: String,
    pub(crate) placement: String,
    pub(crate) plan: Plan,
}

fn met(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

/// One series as a table row: its count and percentiles.
pub(super) fn row(out: &mut String, name: &str, s: &Summary) {
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
         difference**: the same request goes to the mock directly, through the bare pass-through \
         (the floor, `switchyard-floor`) and through the proxy, back to back (the order runs \
         through every permutation from one round to the next), and only differences within a \
         round are kept, so every side sees the same machine noise. The throughput and cold-start sections are the \
         exceptions: they say what they time. Percentiles are nearest-rank values that were \
         actually measured; a negative value means the proxied side of that pair happened to be faster.\n"
    );
    setup_table(&mut out, setup);
    floor_table(&mut out, r);
    targets_table(&mut out, r);
    for turn in &r.passthrough {
        passthrough_table(&mut out, turn);
    }
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
        "| Machine | {} CPUs (`nproc`), `{}`; load average {} when the run started, {} when it \
         ended (the run itself keeps about two processes busy) |",
        m.cpus, m.cpu_model, m.load, setup.load_after
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
    if let Some(t) = p.throughput {
        let _ = writeln!(
            out,
            "| Throughput load | closed loop, {} clients in turn, each step {} ms of warm-up then a {} ms \
             window, first against the mock directly and then through the proxy (same client code) |",
            CONCURRENCY.map(|c| c.to_string()).join(", "),
            t.warmup.as_millis(),
            t.window.as_millis()
        );
    }
    let calls: Vec<String> = CASES
        .iter()
        .map(|c| format!("{} calls a round to `{}`", c.paths.len() + 2, c.endpoint))
        .collect();
    let _ = writeln!(
        out,
        "| Agent turns | a coding agent's request as Claude Code sends it to `POST /v1/messages` \
         (see *Passthrough vs translated*) and as Codex CLI sends it to `POST /v1/responses` (see \
         *Responses: passthrough vs translated to Chat*): for each, {} warm-up rounds, then {} \
         non-streamed and {} streamed rounds ({}) |",
        p.agent.warmup,
        p.agent.non_streamed,
        p.agent.streamed,
        calls.join(", ")
    );
    if p.flap_pairs > 0 {
        let _ = writeln!(
            out,
            "| Breaker flapping | {} non-streamed pairs quiet, then {} more while a driver sends one \
             request every {} ms to the flapping model `flap/{FLAP}` |",
            p.flap_pairs,
            p.flap_pairs,
            DRIVER_EVERY.as_millis()
        );
    }
    if p.cold_starts > 0 {
        let _ = writeln!(
            out,
            "| Cold starts | {n} with a {}-row state file, {n} with the same config and an empty data \
             directory, {n} with the base config only and an empty data directory, in rotation |",
            thousands(ROWS),
            n = p.cold_starts
        );
    }
    let _ = writeln!(
        out,
        "| Proxy config | one OpenAI-dialect provider on the mock; the fallback combo `{FALLBACK_COMBO}` \
         has a first target on a second provider that always answers 503 (its breaker, model \
         lockouts and same-target retries off, so every request makes exactly one failed attempt); \
         a provider `flap` with `breaker = {{ failure_threshold = 2, degraded_threshold = 1, \
         reset_timeout_ms = 100, max_backoff_multiplier = 1 }}`; two Anthropic-dialect providers \
         on the mock, `an` (passthrough, the default) and `an-tr` (`passthrough = false`); an \
         OpenAI-dialect provider `rs` with `api = \"responses\"` on the mock's `/v1/responses`; \
         state file in the data directory, written behind by the app as usual. The small chat \
         request goes from an OpenAI client to the OpenAI provider `oa`, so since issue 12 it is \
         passed through too |\n"
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
    new_targets(out, r);
    let _ = writeln!(out);
}

fn new_targets(out: &mut String, r: &Results) {
    match &r.throughput {
        Some(steps) => {
            let bound = BOUNDS[BOUNDS.len() - 1];
            let (measured, ok) = match best_under(steps, bound) {
                Some(s) => (
                    format!(
                        "{} req/s (c = {}; mock alone at c = {}: {} req/s)",
                        rate(s.proxied.rate),
                        s.clients,
                        s.clients,
                        rate(s.direct.rate)
                    ),
                    s.proxied.rate >= THROUGHPUT,
                ),
                None => ("no step had p99 < 10 ms".to_owned(), false),
            };
            let _ = writeln!(
                out,
                "| Throughput of the proxy on one core, closed loop, at p99 < 10 ms | {measured} | ≥ 8,000 req/s | {} |",
                met(ok)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "| Throughput of the proxy on one core at p99 < 10 ms | not measured (quick run) | ≥ 8,000 req/s | |"
            );
        }
    }
    match &r.cold_start {
        Some(c) => {
            let _ = writeln!(
                out,
                "| Cold start to the first proxied 200, {}-row state file, p50 / max | {} / {} | ≤ 50 ms (p50) | {} |",
                thousands(ROWS),
                Micros(c.seeded.p50),
                Micros(c.seeded.max),
                met(c.seeded.p50 <= COLD_START)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "| Cold start with a {}-row state file | not measured (quick run) | ≤ 50 ms | |",
                thousands(ROWS)
            );
        }
    }
    match &r.flapping {
        Some(f) => {
            let _ = writeln!(
                out,
                "| Added latency p50 / p99 while another provider's breaker flaps (quiet: {} / {}; same background load without state changes: {} / {}) | {} / {} | p99 within 100 µs of the run with the same background load (the issue sets no number) | {} |",
                Micros(f.quiet.p50),
                Micros(f.quiet.p99),
                Micros(f.steady.p50),
                Micros(f.steady.p99),
                Micros(f.flapping.p50),
                Micros(f.flapping.p99),
                met(f.flapping.p99 <= f.steady.p99 + FLAP_SLACK)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "| Added latency while a breaker flaps | not measured (quick run) | — | |"
            );
        }
    }
}

/// Issue 33: what Switchyard costs beyond a bare relay, the headline figures.
fn floor_table(out: &mut String, r: &Results) {
    let _ = writeln!(out, "### Against the floor (issue 33)\n");
    let _ = writeln!(
        out,
        "The floor is `switchyard-floor` (`crates/switchyard-testkit/src/bin/switchyard-floor.rs`): \
         a bare axum + reqwest pass-through to the same mock, on the proxy's CPU and run as \
         Switchyard's default is (one thread, HTTP/1.1, `TCP_NODELAY`, the same client \
         settings). It reads the request, makes one upstream call to the same path and relays \
         the bytes, and nothing else. Every round sends the same request to the mock directly, \
         through the floor and through Switchyard, in an order that runs through every \
         permutation; *over the floor* is Switchyard minus the floor of the same round. The \
         streamed rounds are also timed to the piece that completes the first event with \
         content (text or a tool call): the floor relays the upstream's role-only first chunk \
         as it comes, while Switchyard holds a stream until its first real event \
         (RESILIENCE.md §7), so its first SSE byte is that event.\n"
    );
    let _ = writeln!(
        out,
        "| Request | Floor over direct, p50 / p99 | **Switchyard over the floor**, p50 / p99 | Target (p50 / p99) | Met |\n|---|---:|---:|---|---|"
    );
    let pair = |s: &Summary| format!("{} / {}", Micros(s.p50), Micros(s.p99));
    let _ = writeln!(
        out,
        "| Small chat request, non-streamed | {} | {} | ≤ 15 µs / ≤ 150 µs | {} |",
        pair(&r.floor.floor),
        pair(&r.floor.over),
        met(r.floor.over.p50 <= OVER_FLOOR_P50 && r.floor.over.p99 <= OVER_FLOOR_P99)
    );
    let _ = writeln!(
        out,
        "| Small chat request, first SSE byte | {} | {} | ≤ 25 µs (p50) | {} |",
        pair(&r.first_byte_floor.floor),
        pair(&r.first_byte_floor.over),
        met(r.first_byte_floor.over.p50 <= OVER_FLOOR_FIRST_BYTE_P50)
    );
    // Not a target: what explains part of the one above. The floor sends the role-only chunk
    // as it comes; Switchyard holds the stream until its first event with content.
    let _ = writeln!(
        out,
        "| Small chat request, first event with content (the same streams) | {} | {} | — |  |",
        pair(&r.first_content_floor.floor),
        pair(&r.first_content_floor.over),
    );
    for turn in &r.passthrough {
        let who = match turn.case.client {
            Client::ClaudeCode => "Claude Code",
            Client::Codex => "Codex",
        };
        let bytes = thousands(turn.body_bytes);
        for (label, series) in
            [("non-streamed", &turn.non_streamed), ("first SSE byte", &turn.first_byte)]
        {
            for (i, path) in turn.case.paths.iter().enumerate() {
                let over = &series.over_floor[i];
                // Issue 33 sets a number for Claude Code's turn passed through, non-streamed.
                let (target, ok) = if turn.case.client == Client::ClaudeCode
                    && i == 0
                    && label == "non-streamed"
                {
                    ("≤ 50 µs (p50)", met(over.p50 <= OVER_FLOOR_AGENT_P50))
                } else {
                    ("—", "")
                };
                let _ = writeln!(
                    out,
                    "| {who}'s {bytes}-byte turn via `{}`, {label} | {} | {} | {target} | {ok} |",
                    path.provider,
                    pair(&series.floor),
                    pair(over)
                );
            }
        }
    }
    let _ = writeln!(out);
}

/// The heading and opening paragraph of one case's section.
fn passthrough_intro(a: &Passthrough) -> (&'static str, String) {
    let case = a.case;
    let sides = case.paths.len() + 2;
    let orders: usize = (1..=sides).product();
    let calls = match sides {
        4 => "four",
        5 => "five",
        _ => "several",
    };
    let rounds = format!(
        "Each round makes {calls} calls, in an order that runs through all {orders} \
         permutations: the direct call to the mock's `{endpoint}`, the same call through the \
         bare pass-through (the floor, see *Against the floor*), and the same body through the \
         proxy to each provider below. *Added* is proxied minus the direct call of the same round",
        endpoint = case.endpoint
    );
    let checked = "Before the figures the run read the proxy's request log (`GET /api/requests`) \
                   and checked that each provider served through the path named here.";
    let bytes = thousands(a.body_bytes);
    match case.client {
        // Issue 12: "passthrough and translated added latency in the same paired run;
        // passthrough is not slower". Reported, not enforced (see the binary's exit status).
        Client::ClaudeCode => (
            "### Passthrough vs translated (issue 12)",
            format!(
                "The request is a coding agent's turn as Claude Code sends it to `POST \
                 /v1/messages` (`crates/switchyard-testkit/src/bench/agent_turn.rs`, generated \
                 with a fixed seed): {bytes} bytes, a 9 KB system prompt with `cache_control`, 20 \
                 tools with JSON schemas, ten rounds of `tool_use` / `tool_result` with an \
                 assistant `thinking` block, and top-level fields the canonical model does not \
                 know (`context_management`, `output_config`, `thinking: {{type: adaptive}}`). The \
                 mock answers model `{model}` with a sentence and a tool call (eight text deltas \
                 when streamed). {rounds}; for `oa` that direct call is still the Anthropic one \
                 (the request the client made), while its upstream is the mock's OpenAI endpoint, \
                 which parses the translated body instead. {checked}",
                model = case.model
            ),
        ),
        // Issue 13: "a Responses request passed through and translated to Chat, paired
        // against a direct call".
        Client::Codex => (
            "### Responses: passthrough vs translated to Chat (issue 13)",
            format!(
                "The request is a coding agent's turn as Codex CLI sends it to `POST \
                 /v1/responses` (`crates/switchyard-testkit/src/bench/codex_turn.rs`, generated \
                 with a fixed seed in the shapes of Codex 0.171.0's recorded request): {bytes} \
                 bytes, 9 KB of `instructions` and a `developer` message, ten rounds of \
                 `function_call` / `function_call_output` after a `reasoning` item with its \
                 `encrypted_content`, the freeform (`custom`) tool `apply_patch` with its Lark \
                 grammar beside 20 function tools, and top-level fields Chat has no place for \
                 (`reasoning: {{effort, summary}}`, `store: false`, `include: \
                 [\"reasoning.encrypted_content\"]`, `prompt_cache_key`, `client_metadata`). The \
                 mock answers model `{model}` with a sentence and an `exec_command` call (eight \
                 text deltas when streamed). `rs` is an `openai` provider with `api = \
                 \"responses\"` on the mock's `/v1/responses`, so Codex's bytes go through with \
                 `model` rewritten; `oa` is the plain (Chat) `openai` provider: the proxy decodes \
                 the turn, encodes it for the mock's `/v1/chat/completions` and turns the Chat \
                 answer (or its chunks) back into a Responses document (or events). The mock, \
                 like the real API, repeats the request's `instructions` and `tools` in every \
                 `response` object it sends (the document; `response.created`, \
                 `response.in_progress` and `response.completed` when streamed), so what `rs` \
                 relays is about 42 KB non-streamed and 131 KB streamed, while the answer the \
                 proxy builds for `oa` does not repeat them (about 1 KB and 7 KB). {rounds}, the \
                 Responses call the client made, for both. {checked}",
                model = case.model
            ),
        ),
    }
}

/// One case's section: its paths against the direct call, then passthrough against each
/// translated path.
fn passthrough_table(out: &mut String, a: &Passthrough) {
    let (heading, intro) = passthrough_intro(a);
    let _ = writeln!(out, "{heading}\n\n{intro}\n");
    let pair = |s: &Summary| format!("{} / {}", Micros(s.p50), Micros(s.p99));
    let series = [&a.non_streamed, &a.first_byte, &a.whole_stream];
    let _ = writeln!(
        out,
        "| Added p50 / p99 | Non-streamed | First SSE byte | Whole stream |\n|---|---:|---:|---:|"
    );
    for (i, path) in a.case.paths.iter().enumerate() {
        let cells: Vec<String> = series.iter().map(|s| pair(&s.added[i])).collect();
        let _ = writeln!(out, "| {} | {} |", path.label, cells.join(" | "));
    }
    let cells: Vec<String> = series.iter().map(|s| pair(&s.direct)).collect();
    let _ =
        writeln!(out, "| Direct call to the mock, for scale (not added) | {} |", cells.join(" | "));
    let _ = writeln!(
        out,
        "\n| Passthrough minus translated, same round: p50 (p99); rounds where passthrough was faster | Non-streamed | First SSE byte | Whole stream |\n|---|---:|---:|---:|"
    );
    for (t, path) in a.case.paths[1..].iter().enumerate() {
        let cells: Vec<String> = series
            .iter()
            .map(|s| {
                let v = &s.versus[t];
                format!(
                    "{} ({}); {}",
                    Micros(v.difference.p50),
                    Micros(v.difference.p99),
                    percent(v.faster)
                )
            })
            .collect();
        let _ = writeln!(out, "| vs `{}` | {} |", path.provider, cells.join(" | "));
    }
    let not_slower = |s: &Series| s.versus.iter().all(|v| v.difference.p50 <= 0);
    let verdict = |s: &Series| if not_slower(s) { "not slower" } else { "**slower**" };
    let against = if a.case.paths.len() > 2 { "both translated paths" } else { "translation" };
    let _ = writeln!(
        out,
        "\nPassthrough against {against}, by the p50 of the paired differences: {} \
         non-streamed, {} to the first SSE byte, {} over the whole stream. ({} non-streamed and \
         {} streamed rounds after {} warm-up rounds.)",
        verdict(&a.non_streamed),
        verdict(&a.first_byte),
        verdict(&a.whole_stream),
        a.non_streamed.direct.count,
        a.first_byte.direct.count,
        a.warmup
    );
    let carried: Vec<String> = a.case.paths[1..]
        .iter()
        .zip(&a.dropped[1..])
        .map(|(path, dropped)| {
            let names: Vec<String> = dropped.iter().map(|d| format!("`{d}`")).collect();
            let names = if names.is_empty() { "nothing".to_owned() } else { names.join(", ") };
            format!("`{}` {names}", path.provider)
        })
        .collect();
    let _ = writeln!(
        out,
        "\nWhat the request log says each translated path could not carry: {}.\n",
        carried.join("; ")
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
    let _ = writeln!(
        out,
        "| When | VmRSS | of it `RssAnon` (heap, stacks) | of it `RssFile` (code) | VmHWM (peak so far) |\n|---|---:|---:|---:|---:|"
    );
    let mut memory_row = |when: &str, m: &Memory| {
        let _ = writeln!(
            out,
            "| {when} | {} | {} | {} | {} |",
            Megabytes(m.rss),
            Megabytes(m.anon),
            Megabytes(m.file),
            Megabytes(m.peak)
        );
    };
    memory_row("Idle, after start, before any request", &r.idle);
    if let Some((count, memory)) = &r.streams {
        memory_row(&format!("{count} streams open at once"), memory);
    }
    memory_row("After all of the load above", &r.after);
    if let Some(steps) = &r.throughput {
        throughput_details(out, steps);
    }
    if let Some(f) = &r.flapping {
        flapping_details(out, f);
    }
    if let Some(c) = &r.cold_start {
        cold_start_details(out, c);
    }
}

/// `10000` as `10,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A rate in requests per second, whole and grouped.
fn rate(per_second: f64) -> String {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a non-negative request rate, rounded for show"
    )]
    let whole = per_second.round() as usize;
    thousands(whole)
}

fn percent(share: f64) -> String {
    format!("{:.0} %", share * 100.0)
}

fn throughput_details(out: &mut String, steps: &[Step]) {
    let _ = writeln!(out, "\n### Throughput on one core, closed loop\n");
    let _ = writeln!(
        out,
        "Each of `c` clients sends a non-streamed request, reads the whole answer and sends the next. \
         The rate counts requests started inside the window; the latency is send to last byte of \
         each of them, not a paired difference. CPU is the share of one core each process used \
         over the window (`utime + stime` from `/proc/PID/stat`): the proxy has CPU 1 to itself, \
         the mock and the harness share CPU 0. The proxy's tokio runtime sees one CPU under \
         `taskset`, so it runs one worker thread.\n"
    );
    let _ = writeln!(
        out,
        "| c | Proxied req/s | p50 | p99 | Proxy CPU | Mock CPU | Harness CPU | Mock alone req/s | p99 | Mock CPU | Harness CPU |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for s in steps {
        let (p, d) = (&s.proxied, &s.direct);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.clients,
            rate(p.rate),
            Micros(p.latency.p50),
            Micros(p.latency.p99),
            percent(p.proxy_cpu),
            percent(p.mock_cpu),
            percent(p.harness_cpu),
            rate(d.rate),
            Micros(d.latency.p99),
            percent(d.mock_cpu),
            percent(d.harness_cpu),
        );
    }
    let _ = writeln!(
        out,
        "\n| Tail bound | Highest proxied req/s with p99 under it | at c | Mock alone at that c |\n|---|---:|---:|---:|"
    );
    for bound in BOUNDS {
        match best_under(steps, bound) {
            Some(s) => {
                let _ = writeln!(
                    out,
                    "| p99 < {} ms | {} | {} | {} req/s |",
                    bound / 1_000_000,
                    rate(s.proxied.rate),
                    s.clients,
                    rate(s.direct.rate)
                );
            }
            None => {
                let _ = writeln!(out, "| p99 < {} ms | none | — | — |", bound / 1_000_000);
            }
        }
    }
}

fn flapping_details(out: &mut String, f: &BreakerFlap) {
    let _ = writeln!(out, "\n### Latency while a breaker flaps\n");
    let _ = writeln!(
        out,
        "Paired non-streamed requests to provider `oa`, first quiet and then while a driver sends one \
         request every {} ms to `flap/{FLAP}`, whose mock answers two 503s then four replies, over \
         and over: its breaker opens, turns half-open after 100 ms, lets a probe through and closes \
         again. Every transition is an event the app's write-behind task commits to its state file. \
         The middle run is the control: the same driver at the same pace, sent to provider `down`, \
         whose every attempt fails with a 503 but whose breaker is off, so nothing changes state.\n",
        DRIVER_EVERY.as_millis()
    );
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    row(out, "**Added** by the proxy, quiet", &f.quiet);
    row(out, "**Added** by the proxy, driver on `down` (no state changes)", &f.steady);
    row(out, "**Added** by the proxy, driver on `flap` (breaker flapping)", &f.flapping);
    let list = |answers: &std::collections::BTreeMap<String, usize>| -> String {
        answers.iter().map(|(k, n)| format!("`{k}` × {n}")).collect::<Vec<_>>().join(", ")
    };
    let _ = writeln!(
        out,
        "\nOn `flap` the driver ran for {:.1} s; its answers: {}; a success right after a failure \
         or refusal (the breaker closing again) {} times. On `down`: {}.",
        f.lasted.as_secs_f64(),
        list(&f.answers),
        f.recoveries,
        list(&f.steady_answers)
    );
}

pub(crate) fn cold_start_details(out: &mut String, c: &ColdStart) {
    let _ = writeln!(out, "\n### Cold start\n");
    let _ = writeln!(
        out,
        "From spawning `switchyard serve --config FILE --port PORT --data-dir DIR` (under `taskset`) \
         to the first 200 of a proxied non-streamed request, which the harness sends in a loop \
         from the moment of the spawn (a refused connection is retried after 100 µs: a loop with \
         no pause at all was measured to slow the server's own start by 20–40 ms, see \
         `cold_start.rs`). The config \
         adds 10 providers of 200 credentials and 4 models each to the base config. The seeded state file holds {} \
         health rows written with `switchyard-store` (`Store::replace_all`) and read back with \
         `Store::load_health`: 10 breakers (open or degraded), 2,000 credentials (cooling, invalid \
         or out of quota) and 7,990 model lockouts, every deadline an hour ahead, so restore keeps \
         them all. Each run starts from a fresh copy. Answers other than 200 before the first 200: {}.\n",
        thousands(c.rows),
        c.early_answers
    );
    let _ = writeln!(out, "| Series | n | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|");
    row(out, &format!("Spawn to first 200, {}-row state file", thousands(ROWS)), &c.seeded);
    row(out, "Spawn to first 200, same config, empty data directory", &c.empty);
    row(out, "Spawn to first 200, base config only (no fleet), empty data directory", &c.bare);
    for (name, s) in
        ["10,000-row state file", "same config, empty data directory", "base config only"]
            .iter()
            .zip(&c.refused_until)
    {
        row(out, &format!("Spawn to the last refused connection, {name}"), s);
    }
}

/// `doc` with the section that `section` heads (its first line, such as [`HEADING`]) replaced by
/// `section` (up to the next `## ` heading), or with `section` appended when there is none.
/// Every other byte stays as it was.
pub(crate) fn replace_section(doc: &str, section: &str) -> String {
    let heading = section.lines().next().unwrap_or_default().trim_end();
    let lines: Vec<&str> = doc.split_inclusive('\n').collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == heading) else {
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
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(rate(9_803.6), "9,804");
    }

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
        // Another heading is another section: the first one is left alone.
        assert_eq!(
            replace_section(before_other, "## Other\n\nnew\n"),
            "## Proxy overhead\n\nold\n\n## Other\n\nnew\n"
        );
    }
}
