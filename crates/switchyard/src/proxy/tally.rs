//! What one request used and spent, attempt by attempt.
//!
//! Every attempt gets a [`Meter`] when it is sent, and reports the upstream's cumulative
//! usage as soon as it is decoded, not when the attempt ends: a hedge that loses the race is
//! dropped mid-stream, and what it reported until then was still used (the upstream may
//! bill it). A continuation is an attempt with a meter of its own, at its own model's prices.
//! The request log reads the [`Tally`] once everything that will report has.
//!
//! Invariant: a slot holds its attempt's latest cumulative usage, never a sum of reports, so
//! a stream that repeats its counts (Anthropic's `message_delta`) is not counted twice.

use std::sync::Arc;

use parking_lot::Mutex;
use switchyard_core::CandidateKey;
use switchyard_core::routing::Target;
use switchyard_core::usage::{Prices, Spent, Usage};

use super::exhausted::{TraceEntry, TraceEvent};

/// The attempts of one request and what each reported.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    slots: Mutex<Vec<Slot>>,
}

#[derive(Debug)]
struct Slot {
    key: CandidateKey,
    prices: Prices,
    usage: Option<Usage>,
    /// The upstream finished: its last report is its final word, not a lower bound.
    settled: bool,
    /// The attempt failed before any content: nothing it reported is billed.
    void: bool,
}

impl Slot {
    fn usage(&self) -> Option<Usage> {
        if self.void {
            return None;
        }
        self.usage.map(|usage| Usage { estimated: usage.estimated || !self.settled, ..usage })
    }
}

/// One attempt's line in the tally: two words, since it rides in every attempt's future.
#[derive(Debug)]
pub(crate) struct Meter {
    tally: Arc<Tally>,
    index: usize,
}

/// A target's prices as far as they are known: its `price` today, the model's facts later.
pub(crate) fn prices(target: &Target) -> Prices {
    target.price.map(Prices::from).unwrap_or_default()
}

impl Tally {
    /// A meter for an attempt at `key`, billed at `prices`.
    pub(crate) fn meter(self: &Arc<Self>, key: &CandidateKey, prices: Prices) -> Meter {
        let mut slots = self.slots.lock();
        slots.push(Slot { key: key.clone(), prices, usage: None, settled: false, void: false });
        Meter { tally: Arc::clone(self), index: slots.len() - 1 }
    }

    /// The request's usage summed over the attempts that reported any, and its cost; `None`
    /// when no attempt reported usage.
    pub(crate) fn spent(&self) -> Option<Spent> {
        let slots = self.slots.lock();
        let mut spent: Option<Spent> = None;
        for slot in slots.iter() {
            if let Some(usage) = slot.usage() {
                spent.get_or_insert_with(Spent::default).add(usage, &slot.prices);
            }
        }
        spent
    }

    /// One trace line per attempt that reported usage, naming its buckets and cost.
    pub(crate) fn trace_entries(&self) -> Vec<TraceEntry> {
        let slots = self.slots.lock();
        slots
            .iter()
            .filter_map(|slot| {
                let usage = slot.usage()?;
                Some(TraceEntry {
                    target: format!("{}/{}", slot.key.provider, slot.key.model),
                    credential: slot.key.credential.to_string(),
                    what: TraceEvent::Used {
                        uncached_input: usage.uncached_input,
                        cache_read: usage.cache_read,
                        cache_write: usage.cache_write,
                        output: usage.output,
                        reasoning: usage.reasoning,
                        estimated: usage.estimated,
                        cost: usage.cost(&slot.prices).map(|c| c.to_string()),
                    },
                })
            })
            .collect()
    }
}

impl Meter {
    /// The attempt's cumulative usage so far, as the upstream last reported it.
    pub(crate) fn report(&mut self, usage: Option<Usage>) {
        if usage.is_some() {
            // Uncontended but for a hedge's two attempts: a few nanoseconds per chunk.
            self.tally.slots.lock()[self.index].usage = usage;
        }
    }

    /// The attempt failed before any content (RESILIENCE.md §7, an unanswered stream): the
    /// upstream gave no answer to bill, so what it reported (Anthropic's `message_start` counts
    /// the prompt) is priced at nothing and kept out of budgets. The attempt itself stays in
    /// the trace. A hedge's loser is not void: it was cancelled, not refused, and may be billed.
    pub(crate) fn void(&mut self) {
        self.tally.slots.lock()[self.index].void = true;
    }

    /// The upstream finished its answer: what it reported is final.
    pub(crate) fn settle(&mut self, usage: Option<Usage>) {
        self.report(usage);
        self.tally.slots.lock()[self.index].settled = true;
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::usage::{Nanodollars, TokenPrice};

    use super::*;

    fn key(provider: &str) -> CandidateKey {
        CandidateKey { provider: provider.into(), credential: "k".into(), model: "m".into() }
    }

    fn priced(per_mtok: f64) -> Prices {
        let price = TokenPrice::per_mtok(per_mtok);
        Prices { input: price, output: price, ..Prices::default() }
    }

    #[test]
    fn repeated_cumulative_reports_count_once() {
        let tally = Arc::new(Tally::default());
        let mut meter = tally.meter(&key("a"), priced(1.0));
        meter.report(Some(Usage { uncached_input: 10, output: 1, ..Usage::default() }));
        meter.settle(Some(Usage { uncached_input: 10, output: 5, ..Usage::default() }));
        let spent = tally.spent().unwrap();
        assert_eq!(spent.usage, Usage { uncached_input: 10, output: 5, ..Usage::default() });
        assert_eq!(spent.cost, Some(Nanodollars(15_000)));
    }

    #[test]
    fn an_attempt_that_never_finished_is_counted_as_an_estimate() {
        let tally = Arc::new(Tally::default());
        let mut served = tally.meter(&key("a"), priced(1.0));
        let mut cancelled = tally.meter(&key("b"), priced(2.0));
        let _silent = tally.meter(&key("c"), Prices::default());
        cancelled.report(Some(Usage { uncached_input: 7, ..Usage::default() }));
        drop(cancelled);
        served.settle(Some(Usage { uncached_input: 3, output: 2, ..Usage::default() }));
        let spent = tally.spent().unwrap();
        assert_eq!(spent.usage.uncached_input, 10, "the loser's reported tokens count");
        assert!(spent.usage.estimated);
        // 5 tokens at 1000 n$, 7 at 2000 n$; the silent attempt reported nothing to price.
        assert_eq!(spent.cost, Some(Nanodollars(19_000)));
        let lines = tally.trace_entries();
        assert_eq!(lines.len(), 2, "one line per attempt that reported usage");
        assert!(matches!(&lines[1].what, TraceEvent::Used { estimated: true, .. }));
    }

    #[test]
    fn an_attempt_that_failed_before_content_is_priced_at_nothing() {
        let tally = Arc::new(Tally::default());
        let mut failed = tally.meter(&key("a"), priced(1.0));
        failed.report(Some(Usage { uncached_input: 40, ..Usage::default() }));
        failed.void();
        let mut served = tally.meter(&key("b"), priced(1.0));
        served.settle(Some(Usage { uncached_input: 3, output: 2, ..Usage::default() }));
        let spent = tally.spent().unwrap();
        assert_eq!(spent.usage, Usage { uncached_input: 3, output: 2, ..Usage::default() });
        assert_eq!(spent.cost, Some(Nanodollars(5_000)));
        assert_eq!(tally.trace_entries().len(), 1, "no usage line for the void attempt");
    }

    #[test]
    fn nothing_reported_is_no_usage_at_all() {
        let tally = Arc::new(Tally::default());
        let mut meter = tally.meter(&key("a"), priced(1.0));
        meter.settle(None);
        assert_eq!(tally.spent(), None);
    }
}
