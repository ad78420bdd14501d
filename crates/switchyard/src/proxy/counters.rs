//! Running totals for `/metrics`: lock-free counters and fixed-bucket latency histograms,
//! updated on the request path with relaxed atomic adds and read whole for the exposition.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds (Prometheus' defaults, stretched to the
/// minutes a long generation takes).
pub const LATENCY_BUCKETS: [f64; 14] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) attempts: AtomicU64,
    pub(super) fallbacks: AtomicU64,
    /// Streams relayed to the client, by how they ended.
    pub(super) streams_complete: AtomicU64,
    pub(super) streams_broken: AtomicU64,
    pub(super) streams_client_gone: AtomicU64,
    /// Broken streams finished on another target, and those that were not (RESILIENCE.md §10).
    pub(super) continuations: AtomicU64,
    pub(super) continuation_refusals: AtomicU64,
    /// Hedges started beside a slow first event, and those whose first event came first.
    pub(super) hedges_started: AtomicU64,
    pub(super) hedges_won: AtomicU64,
    /// Waits for a `max_in_flight` slot, those that got one, and their time in line.
    pub(super) queued: AtomicU64,
    pub(super) queued_served: AtomicU64,
    pub(super) queued_micros: AtomicU64,
    /// From a request's arrival until its response starts (headers sent, stream opened).
    pub(super) request_latency: Histogram,
    /// From sending an attempt until its first real event, for attempts that served.
    pub(super) upstream_latency: Histogram,
}

impl Counters {
    /// One wait in line for a concurrency slot, `got` one or not.
    pub(super) fn queued(&self, waited: Duration, got: bool) {
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.queued_served.fetch_add(u64::from(got), Ordering::Relaxed);
        let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        self.queued_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub(super) fn stream_ended(&self, outcome: super::forward::StreamOutcome) {
        use super::forward::StreamOutcome;
        let counter = match outcome {
            StreamOutcome::Complete => &self.streams_complete,
            StreamOutcome::Broken => &self.streams_broken,
            StreamOutcome::ClientGone => &self.streams_client_gone,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn values(&self) -> CounterValues {
        CounterValues {
            requests: self.requests.load(Ordering::Relaxed),
            attempts: self.attempts.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            streams_complete: self.streams_complete.load(Ordering::Relaxed),
            streams_broken: self.streams_broken.load(Ordering::Relaxed),
            streams_client_gone: self.streams_client_gone.load(Ordering::Relaxed),
            continuations: self.continuations.load(Ordering::Relaxed),
            continuation_refusals: self.continuation_refusals.load(Ordering::Relaxed),
            hedges_started: self.hedges_started.load(Ordering::Relaxed),
            hedges_won: self.hedges_won.load(Ordering::Relaxed),
            queued: self.queued.load(Ordering::Relaxed),
            queued_served: self.queued_served.load(Ordering::Relaxed),
            queued_micros: self.queued_micros.load(Ordering::Relaxed),
            request_latency: self.request_latency.values(),
            upstream_latency: self.upstream_latency.values(),
        }
    }
}

/// The totals at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterValues {
    pub requests: u64,
    pub attempts: u64,
    pub fallbacks: u64,
    pub streams_complete: u64,
    pub streams_broken: u64,
    pub streams_client_gone: u64,
    pub continuations: u64,
    pub continuation_refusals: u64,
    pub hedges_started: u64,
    pub hedges_won: u64,
    pub queued: u64,
    pub queued_served: u64,
    pub queued_micros: u64,
    pub request_latency: HistogramValues,
    pub upstream_latency: HistogramValues,
}

/// Counts per bucket (not cumulative) plus one for above the last bound.
#[derive(Debug, Default)]
pub(super) struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    pub(super) fn observe(&self, latency: Duration) {
        let secs = latency.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|&bound| secs <= bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn values(&self) -> HistogramValues {
        let mut cumulative = Vec::with_capacity(self.buckets.len());
        let mut total = 0;
        for bucket in &self.buckets {
            total += bucket.load(Ordering::Relaxed);
            cumulative.push(total);
        }
        HistogramValues { cumulative, sum_micros: self.sum_micros.load(Ordering::Relaxed) }
    }
}

/// A histogram as the exposition wants it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramValues {
    /// Observations at or below each of [`LATENCY_BUCKETS`], then the total (`+Inf`).
    pub cumulative: Vec<u64>,
    pub sum_micros: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_the_last_is_the_count() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(40));
        h.observe(Duration::from_secs(600));
        let v = h.values();
        assert_eq!(v.cumulative.len(), LATENCY_BUCKETS.len() + 1);
        assert_eq!(v.cumulative[0], 1, "3 ms is within the 5 ms bucket");
        assert_eq!(v.cumulative[3], 2, "40 ms is within the 50 ms bucket");
        assert_eq!(v.cumulative[LATENCY_BUCKETS.len() - 1], 2, "600 s is above every bound");
        assert_eq!(*v.cumulative.last().unwrap(), 3);
        assert_eq!(v.sum_micros, 3_000 + 40_000 + 600_000_000);
    }
}
