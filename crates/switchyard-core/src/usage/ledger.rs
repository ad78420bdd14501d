//! Usage aggregates: per (UTC hour, local key, combo, provider, model), how many requests,
//! fallbacks and errors, the tokens of each bucket, the cost and a time-to-first-token sketch.
//!
//! The hour is the unit, so a chart of requests per hour needs nothing finer and a day is 24
//! rows merged; one user's tools touch a handful of (key, combo, target) sets an hour, so a
//! year is tens of thousands of small rows. Each distinct label set is kept once and shared
//! by every hour that has it.
//!
//! Invariant: a row is the sum of the [`UsageEntry`]s added for its hour and labels, and sums
//! are exact (integer tokens and nanodollars; the sketch merges by adding counts), so rows
//! written in the same transaction as the request-log entries they summarise equal those
//! entries summed, whatever order they arrive or merge in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::calendar::{HOUR_MS, hour_of};
use crate::clock::UnixMillis;

use super::sketch::LatencySketch;
use super::{Nanodollars, Usage};

/// What a request is counted under. `None` is "not applicable", not "unknown".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels {
    /// The id of the local key the client presented; `None` for a request no key made (the
    /// UI's "try it").
    pub key: Option<String>,
    /// The combo the requested model resolved to (`provider/model` for a target asked for by
    /// name); `None` when it resolved to nothing.
    pub combo: Option<String>,
    /// The provider that served; `None` when nothing did.
    pub provider: Option<String>,
    /// The model that served, as the provider names it.
    pub model: Option<String>,
}

impl Labels {
    /// `provider/model` of what served.
    pub fn target(&self) -> Option<String> {
        Some(format!("{}/{}", self.provider.as_deref()?, self.model.as_deref()?))
    }
}

/// One request's contribution, as its request-log entry records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageEntry {
    /// When the request arrived: it is counted in that hour, however long it streamed.
    pub at: UnixMillis,
    pub labels: Labels,
    /// Served by other than its first attempt.
    pub fallback: bool,
    /// Answered with an error status, or a stream that broke after it started.
    pub error: bool,
    pub usage: Option<Usage>,
    pub cost: Option<Nanodollars>,
    /// For a streamed request that was served: when its first event reached the client.
    pub ttft_ms: Option<u64>,
}

/// The sums of one row, or of any set of rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub fallbacks: u64,
    pub errors: u64,
    pub uncached_input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Reasoning included.
    pub output: u64,
    pub reasoning: u64,
    /// Requests whose counts are estimates (a stream that broke before its final usage).
    pub estimated: u64,
    /// What the requests whose cost is known cost.
    pub cost: Nanodollars,
    /// Requests that used tokens at a price not known: their tokens are counted, their cost
    /// is not in `cost`.
    pub cost_unknown: u64,
    /// Time to first token of the streamed requests that were served.
    pub ttft: LatencySketch,
}

impl Totals {
    /// One request.
    pub fn of(entry: &UsageEntry) -> Self {
        let usage = entry.usage.unwrap_or_default();
        Self {
            requests: 1,
            fallbacks: u64::from(entry.fallback),
            errors: u64::from(entry.error),
            uncached_input: usage.uncached_input,
            cache_read: usage.cache_read,
            cache_write: usage.cache_write,
            output: usage.output,
            reasoning: usage.reasoning,
            estimated: u64::from(entry.usage.is_some_and(|u| u.estimated)),
            cost: entry.cost.unwrap_or_default(),
            cost_unknown: u64::from(
                entry.usage.is_some_and(|u| !u.is_zero()) && entry.cost.is_none(),
            ),
            ttft: entry.ttft_ms.map(LatencySketch::of).unwrap_or_default(),
        }
    }

    /// Adds `other` in.
    pub fn merge(&mut self, other: &Self) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.requests, other.requests);
        add(&mut self.fallbacks, other.fallbacks);
        add(&mut self.errors, other.errors);
        add(&mut self.uncached_input, other.uncached_input);
        add(&mut self.cache_read, other.cache_read);
        add(&mut self.cache_write, other.cache_write);
        add(&mut self.output, other.output);
        add(&mut self.reasoning, other.reasoning);
        add(&mut self.estimated, other.estimated);
        self.cost += other.cost;
        add(&mut self.cost_unknown, other.cost_unknown);
        self.ttft.merge(&other.ttft);
    }
}

/// The aggregates, by hour.
#[derive(Debug, Default)]
pub struct Ledger {
    hours: BTreeMap<u64, HashMap<Arc<Labels>, Totals>>,
    /// Every label set some hour holds, once.
    labels: HashSet<Arc<Labels>>,
}

impl Ledger {
    /// Counts one request.
    pub fn add(&mut self, entry: &UsageEntry) {
        self.add_totals(hour_of(entry.at), &entry.labels, &Totals::of(entry));
    }

    /// Adds `totals` to the row of (`hour`, `labels`): a row loaded from the state file, or
    /// a batch's sum.
    pub fn add_totals(&mut self, hour: u64, labels: &Labels, totals: &Totals) {
        let labels = if let Some(shared) = self.labels.get(labels) {
            Arc::clone(shared)
        } else {
            let shared = Arc::new(labels.clone());
            self.labels.insert(Arc::clone(&shared));
            shared
        };
        self.hours.entry(hour).or_default().entry(labels).or_default().merge(totals);
    }

    /// Forgets every hour before `first_kept`; returns how many rows went.
    pub fn compact(&mut self, first_kept: u64) -> usize {
        let kept = self.hours.split_off(&first_kept);
        let gone = std::mem::replace(&mut self.hours, kept);
        let removed = gone.values().map(HashMap::len).sum();
        drop(gone);
        // A label set no hour holds any more is only held by the set itself.
        self.labels.retain(|l| Arc::strong_count(l) > 1);
        removed
    }

    /// Every row of the hours in `[from, to)`, oldest hour first.
    pub fn rows_between(&self, from: u64, to: u64) -> impl Iterator<Item = Row<'_>> {
        self.hours.range(from..to.max(from)).flat_map(|(hour, rows)| {
            rows.iter().map(|(labels, totals)| Row { hour: *hour, labels, totals })
        })
    }

    /// Every row, oldest hour first.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows_between(0, u64::MAX)
    }

    /// How many rows there are.
    pub fn len(&self) -> usize {
        self.hours.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }

    /// The first instant of `hour`.
    pub fn hour_start(hour: u64) -> UnixMillis {
        UnixMillis(hour.saturating_mul(HOUR_MS))
    }
}

/// One row of the ledger.
#[derive(Clone, Copy, Debug)]
pub struct Row<'l> {
    /// Hours since the epoch.
    pub hour: u64,
    pub labels: &'l Labels,
    pub totals: &'l Totals,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hour: u64, key: &str, target: Option<(&str, &str)>) -> UsageEntry {
        UsageEntry {
            at: UnixMillis(hour * HOUR_MS + 1234),
            labels: Labels {
                key: Some(key.to_owned()),
                combo: Some("smart".to_owned()),
                provider: target.map(|(p, _)| p.to_owned()),
                model: target.map(|(_, m)| m.to_owned()),
            },
            fallback: false,
            error: target.is_none(),
            usage: target.map(|_| Usage { uncached_input: 10, output: 5, ..Usage::default() }),
            cost: target.map(|_| Nanodollars(1_000)),
            ttft_ms: target.map(|_| 120),
        }
    }

    #[test]
    fn requests_of_one_hour_and_labels_share_a_row() {
        let mut ledger = Ledger::default();
        ledger.add(&entry(5, "k1", Some(("oa", "gpt-4o"))));
        ledger.add(&entry(5, "k1", Some(("oa", "gpt-4o"))));
        ledger.add(&entry(5, "k2", Some(("oa", "gpt-4o"))));
        ledger.add(&entry(6, "k1", None));
        assert_eq!(ledger.len(), 3);
        let row =
            ledger.rows().find(|r| r.hour == 5 && r.labels.key.as_deref() == Some("k1")).unwrap();
        assert_eq!(
            (row.totals.requests, row.totals.uncached_input, row.totals.cost),
            (2, 20, Nanodollars(2_000))
        );
        assert_eq!(row.totals.ttft.count(), 2);
        let failed = ledger.rows().find(|r| r.hour == 6).unwrap();
        assert_eq!(
            (failed.totals.requests, failed.totals.errors, failed.totals.ttft.count()),
            (1, 1, 0)
        );
    }

    #[test]
    fn tokens_without_a_price_are_counted_but_their_cost_is_marked_unknown() {
        let mut unpriced = entry(1, "k", Some(("oa", "m")));
        unpriced.cost = None;
        let totals = Totals::of(&unpriced);
        assert_eq!((totals.cost, totals.cost_unknown, totals.output), (Nanodollars(0), 1, 5));
        let mut silent = unpriced.clone();
        silent.usage = None;
        assert_eq!(Totals::of(&silent).cost_unknown, 0, "no tokens, nothing to price");
    }

    #[test]
    fn compaction_drops_old_hours_and_label_sets_nobody_holds() {
        let mut ledger = Ledger::default();
        ledger.add(&entry(1, "gone", Some(("oa", "m"))));
        ledger.add(&entry(2, "kept", Some(("oa", "m"))));
        ledger.add(&entry(3, "kept", Some(("oa", "m"))));
        assert_eq!(ledger.compact(2), 1);
        assert_eq!(ledger.rows().map(|r| r.hour).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(ledger.labels.len(), 1, "one label set left, shared by both hours");
    }

    #[test]
    fn loading_rows_and_adding_entries_give_the_same_sums() {
        let entries: Vec<UsageEntry> = (0..20)
            .map(|i| entry(i % 3, ["a", "b"][usize::try_from(i % 2).unwrap()], Some(("oa", "m"))))
            .collect();
        let mut direct = Ledger::default();
        for e in &entries {
            direct.add(e);
        }
        // As the state file would hand them back: a batch summed first, then loaded row by row.
        let mut batch = Ledger::default();
        for e in &entries {
            batch.add(e);
        }
        let mut loaded = Ledger::default();
        for row in batch.rows() {
            loaded.add_totals(row.hour, row.labels, row.totals);
        }
        let sums = |l: &Ledger| {
            let mut rows: Vec<(u64, Labels, Totals)> =
                l.rows().map(|r| (r.hour, r.labels.clone(), r.totals.clone())).collect();
            rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            rows
        };
        assert_eq!(sums(&direct), sums(&loaded));
    }
}
