//! `/metrics`: the Prometheus text exposition (format 0.0.4) of the proxy's counters and
//! latency histograms, of the health registry's state, and of usage by the provider and model
//! that served (label values bounded as `usage.rs` says).

use std::fmt::Write as _;

use switchyard_core::resilience::BreakerState;

use super::Services;
use crate::proxy::{HistogramValues, LATENCY_BUCKETS};
use crate::usage::Counters;

impl Services {
    /// Every metric, each with its `# HELP` and `# TYPE` lines.
    pub fn metrics(&self) -> String {
        let snapshot = self.registry.snapshot(self.clock.now());
        let counters = self.proxy.counters();
        let mut out = Exposition::default();
        out.single(
            "switchyard_requests_total",
            "counter",
            "Client requests handled.",
            counters.requests,
        );
        out.single(
            "switchyard_attempts_total",
            "counter",
            "Upstream attempts made.",
            counters.attempts,
        );
        out.single(
            "switchyard_fallbacks_total",
            "counter",
            "Requests served by other than their first attempt.",
            counters.fallbacks,
        );
        out.head(
            "switchyard_hedges_total",
            "counter",
            "Hedged first tokens (a second attempt started beside a slow one), started and won by the hedge.",
        );
        for (what, n) in [("started", counters.hedges_started), ("won", counters.hedges_won)] {
            out.line(format_args!("switchyard_hedges_total{{result=\"{what}\"}} {n}"));
        }
        queue_metrics(&mut out, &counters);
        out.head(
            "switchyard_streams_total",
            "counter",
            "Streams relayed to clients, by how they ended.",
        );
        for (outcome, n) in [
            ("complete", counters.streams_complete),
            ("broken", counters.streams_broken),
            ("client_gone", counters.streams_client_gone),
        ] {
            out.line(format_args!("switchyard_streams_total{{outcome=\"{outcome}\"}} {n}"));
        }
        out.single(
            "switchyard_continuations_total",
            "counter",
            "Streams broken mid-answer and finished on another target.",
            counters.continuations,
        );
        out.single(
            "switchyard_continuation_refusals_total",
            "counter",
            "Streams broken mid-answer that were not continued (the client got the terminal error).",
            counters.continuation_refusals,
        );
        out.histogram(
            "switchyard_request_duration_seconds",
            "From a request's arrival until its response starts.",
            &counters.request_latency,
        );
        out.histogram(
            "switchyard_upstream_first_event_seconds",
            "From sending an attempt that served until its first real event.",
            &counters.upstream_latency,
        );
        out.head(
            "switchyard_breaker_state",
            "gauge",
            "Provider breaker: 0 closed, 1 degraded, 2 half-open, 3 open.",
        );
        for b in &snapshot.breakers {
            let state = match b.state {
                BreakerState::Closed => 0,
                BreakerState::Degraded => 1,
                BreakerState::HalfOpen => 2,
                BreakerState::Open => 3,
            };
            let provider = escape(b.provider.as_str());
            out.line(format_args!("switchyard_breaker_state{{provider=\"{provider}\"}} {state}"));
        }
        out.single(
            "switchyard_cooling_credentials",
            "gauge",
            "Credentials benched right now.",
            snapshot.credentials.len(),
        );
        out.single(
            "switchyard_active_lockouts",
            "gauge",
            "Model lockouts in force right now.",
            snapshot.lockouts.len(),
        );
        self.headroom_metrics(&mut out);
        self.usage_metrics(&mut out);
        out.text
    }

    /// Each measured credential's quota windows (RESILIENCE.md §11).
    fn headroom_metrics(&self, out: &mut Exposition) {
        out.head(
            "switchyard_credential_headroom",
            "gauge",
            "What a credential has left of each quota window its answers describe, 0 to 1.",
        );
        for view in self.proxy.headroom() {
            let (provider, credential) =
                (escape(view.provider.as_str()), escape(view.credential.as_str()));
            for window in &view.windows {
                let name = escape(&window.name);
                out.line(format_args!(
                    "switchyard_credential_headroom{{provider=\"{provider}\",credential=\"{credential}\",window=\"{name}\"}} {}",
                    window.remaining
                ));
            }
        }
    }

    /// Requests, fallbacks, tokens and cost since start, by the provider and model that served
    /// (only while usage is tracked).
    fn usage_metrics(&self, out: &mut Exposition) {
        let counters = self.proxy.request_log().usage().counters();
        let labelled: Vec<(String, &Counters)> = counters
            .iter()
            .map(|(p, m, c)| (format!("provider=\"{}\",model=\"{}\"", escape(p), escape(m)), c))
            .collect();
        let by_target = [
            (
                "switchyard_served_requests_total",
                "Client requests by the provider and model that served them (`none`: nothing \
                 did; `other`: not in the config).",
                (|c: &Counters| c.requests) as fn(&Counters) -> u64,
            ),
            (
                "switchyard_served_fallbacks_total",
                "Requests served by other than their first attempt, by what served them.",
                |c: &Counters| c.fallbacks,
            ),
        ];
        for (name, help, value) in by_target {
            out.head(name, "counter", help);
            for (labels, c) in &labelled {
                out.line(format_args!("{name}{{{labels}}} {}", value(c)));
            }
        }
        out.head(
            "switchyard_tokens_total",
            "counter",
            "Tokens by billing bucket (output includes reasoning), by the provider and model that served.",
        );
        for (labels, c) in &labelled {
            for (bucket, n) in [
                ("uncached_input", c.uncached_input),
                ("cache_read", c.cache_read),
                ("cache_write", c.cache_write),
                ("output", c.output),
                ("reasoning", c.reasoning),
            ] {
                out.line(format_args!(
                    "switchyard_tokens_total{{{labels},bucket=\"{bucket}\"}} {n}"
                ));
            }
        }
        out.head(
            "switchyard_cost_usd_total",
            "counter",
            "What requests cost in USD at the configured prices (requests without a known price add nothing), by what served them.",
        );
        for (labels, c) in &labelled {
            out.line(format_args!("switchyard_cost_usd_total{{{labels}}} {}", c.cost));
        }
    }
}

#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn line(&mut self, line: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.text, "{line}");
    }

    fn head(&mut self, name: &str, kind: &str, help: &str) {
        self.line(format_args!("# HELP {name} {help}\n# TYPE {name} {kind}"));
    }

    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.head(name, kind, help);
        self.line(format_args!("{name} {value}"));
    }

    fn histogram(&mut self, name: &str, help: &str, values: &HistogramValues) {
        self.head(name, "histogram", help);
        for (bound, count) in LATENCY_BUCKETS.iter().zip(&values.cumulative) {
            self.line(format_args!("{name}_bucket{{le=\"{bound}\"}} {count}"));
        }
        let count = values.cumulative.last().copied().unwrap_or(0);
        self.line(format_args!("{name}_bucket{{le=\"+Inf\"}} {count}"));
        #[expect(clippy::cast_precision_loss, reason = "a sum of microseconds fits f64 for years")]
        let sum = values.sum_micros as f64 / 1e6;
        self.line(format_args!("{name}_sum {sum}"));
        self.line(format_args!("{name}_count {count}"));
    }
}

/// A label value as the exposition wants it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Waits for a `max_in_flight` slot (RESILIENCE.md §11).
fn queue_metrics(out: &mut Exposition, counters: &crate::proxy::CounterValues) {
    out.head(
        "switchyard_queued_total",
        "counter",
        "Waits for a max_in_flight slot, by whether a slot came in time.",
    );
    let refused = counters.queued - counters.queued_served;
    for (result, n) in [("served", counters.queued_served), ("moved_on", refused)] {
        out.line(format_args!("switchyard_queued_total{{result=\"{result}\"}} {n}"));
    }
    #[expect(clippy::cast_precision_loss, reason = "seconds of waiting fit an f64")]
    let waited = counters.queued_micros as f64 / 1e6;
    out.head(
        "switchyard_queued_seconds_total",
        "counter",
        "Time requests spent waiting for a max_in_flight slot.",
    );
    out.line(format_args!("switchyard_queued_seconds_total {waited}"));
}
