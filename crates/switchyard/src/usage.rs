//! Usage tracking: the aggregates behind `GET /api/usage`, the budgets checked
//! before a request is routed, and the per-provider, per-model counters of `/metrics`.
//!
//! Everything here is memory: a request's record is counted the moment the request log takes
//! it, and the request log's writer puts the same records' sums in the state file in the same
//! transaction as the records (see `requests.rs`); at start the aggregates are read back from
//! there. So no request waits on the database, and after any crash the aggregates in the file
//! are exactly the request-log entries in it, summed.
//!
//! Labels are bounded, in `/metrics` and in the ledger (memory and file) alike: a provider that
//! is not configured, or a model that neither its provider lists nor a combo or the default
//! route names (a client may name any model on a provider without a `models` list), is counted
//! as `other`; in `/metrics` a request nothing served as `none`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use switchyard_core::calendar::{DAY_MS, HOUR_MS, day_of};
use switchyard_core::resilience::{HealthEvent, HealthRegistry};
use switchyard_core::settings::{BudgetPolicy, UsageSettings};
use switchyard_core::usage::Nanodollars;
use switchyard_core::usage::budget::{BudgetView, Spending};
use switchyard_core::usage::ledger::{Ledger, UsageEntry};
use switchyard_core::usage::report::{ReportSpec, UsageReport};
use switchyard_core::{Clock, UnixMillis};
use switchyard_store::RequestRecord;

use crate::config::Config;
use crate::keys::LocalKey;

/// The label of what is not configured.
pub const OTHER: &str = "other";
/// The label of a request nothing served.
pub const NONE: &str = "none";

/// The usage tracker: shared by the proxy (budgets), the request log (counting) and the
/// services (reports, budgets, metrics).
#[derive(Debug)]
pub struct UsageTracker {
    state: Mutex<State>,
    policy: ArcSwap<Policy>,
    clock: Arc<dyn Clock>,
    /// Where budget crossings are announced: the one event stream.
    registry: Arc<HealthRegistry>,
}

#[derive(Debug, Default)]
struct State {
    ledger: Ledger,
    spending: Spending,
    /// The first hour kept when the ledger was last compacted.
    compacted_from: u64,
    /// Counters since start, by (provider, model) label.
    metrics: HashMap<(Arc<str>, Arc<str>), Counters>,
}

/// What `/metrics` counts per provider and model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub requests: u64,
    pub fallbacks: u64,
    pub uncached_input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cost: Nanodollars,
}

/// The settings the tracker runs on, swapped whole when the config changes.
#[derive(Debug, Default)]
struct Policy {
    usage: UsageSettings,
    budgets: BudgetPolicy,
    /// Each configured provider and the models it is configured with.
    labels: HashMap<Arc<str>, HashSet<Arc<str>>>,
}

impl Policy {
    fn of(config: &Config) -> Self {
        let mut labels: HashMap<Arc<str>, HashSet<Arc<str>>> = HashMap::new();
        for provider in &config.providers {
            let models = labels.entry(Arc::from(provider.id.as_str())).or_default();
            models.extend(provider.models.iter().map(|m| Arc::from(m.id.as_str())));
        }
        let targets = config.combos.iter().flat_map(|c| &c.targets);
        let named = targets.map(|t| (t.provider.as_str(), t.model.as_str()));
        let default = config.default_route.as_deref().and_then(|to| to.split_once('/'));
        for (provider, model) in named.chain(default) {
            if let Some(models) = labels.get_mut(provider) {
                models.insert(Arc::from(model));
            }
        }
        Self { usage: config.usage.clone(), budgets: config.budgets.clone(), labels }
    }

    /// The bounded metrics labels of what served.
    fn labels(&self, served_by: Option<&str>) -> (Arc<str>, Arc<str>) {
        let Some((provider, model)) = served_by.and_then(|s| s.split_once('/')) else {
            return (Arc::from(NONE), Arc::from(NONE));
        };
        match self.labels.get_key_value(provider) {
            Some((provider, models)) => {
                let model = models.get(model).map_or_else(|| Arc::from(OTHER), Arc::clone);
                (Arc::clone(provider), model)
            }
            None => (Arc::from(OTHER), Arc::from(OTHER)),
        }
    }
}

impl UsageTracker {
    pub fn new(clock: Arc<dyn Clock>, registry: Arc<HealthRegistry>) -> Self {
        Self { state: Mutex::default(), policy: ArcSwap::default(), clock, registry }
    }

    /// Runs on `config`'s usage and budget settings from now on.
    pub fn configure(&self, config: &Config) {
        self.policy.store(Arc::new(Policy::of(config)));
    }

    /// Takes the aggregates the state file holds (at start), naming each key id with
    /// `name_of` to rebuild what budgets have spent.
    pub fn load(&self, ledger: Ledger, name_of: &dyn Fn(&str) -> Option<String>) {
        let policy = self.policy.load();
        let now = self.clock.now();
        let mut state = self.state.lock();
        state.spending = Spending::rebuild(&ledger, &policy.budgets, name_of, now);
        state.ledger = ledger;
        state.compacted_from = 0;
        compact(&mut state, &policy.usage, now);
    }

    /// Whether usage is tracked at all.
    pub fn tracking(&self) -> bool {
        self.policy.load().usage.tracking
    }

    /// The first hour the aggregates keep: older ones are past retention.
    pub fn first_kept_hour(&self) -> u64 {
        first_kept_hour(&self.policy.load().usage, self.clock.now())
    }

    /// Refuses a request through `caller` when an enforced budget that applies to it is
    /// spent: the budget is the refusal's subject. Memory only.
    pub fn check(&self, caller: Option<&LocalKey>) -> Result<(), BudgetView> {
        let policy = self.policy.load();
        if !policy.usage.tracking || policy.budgets.is_empty() {
            return Ok(());
        }
        let name = caller.map(|k| &*k.name);
        self.state.lock().spending.check(&policy.budgets, name, self.clock.now())
    }

    /// Counts a request that just ended (through the key named `key`), and returns what it
    /// counted, with bounded labels, for the aggregates in the file; `None` when usage is not
    /// tracked, so the file leaves it out too.
    pub fn observe(&self, record: &RequestRecord, key: Option<&str>) -> Option<UsageEntry> {
        let policy = self.policy.load();
        if !policy.usage.tracking {
            return None;
        }
        let now = self.clock.now();
        let mut entry = record.usage_entry();
        let labels = policy.labels(record.served_by.as_deref());
        if entry.labels.provider.is_some() {
            entry.labels.provider = Some(labels.0.to_string());
            entry.labels.model = Some(labels.1.to_string());
        }
        let crossed = {
            let mut state = self.state.lock();
            state.ledger.add(&entry);
            compact(&mut state, &policy.usage, now);
            let counters = state.metrics.entry(labels).or_default();
            counters.requests += 1;
            counters.fallbacks += u64::from(entry.fallback);
            if let Some(usage) = entry.usage {
                counters.uncached_input += usage.uncached_input;
                counters.cache_read += usage.cache_read;
                counters.cache_write += usage.cache_write;
                counters.output += usage.output;
                counters.reasoning += usage.reasoning;
            }
            counters.cost += entry.cost.unwrap_or_default();
            // Spend is kept whether or not a budget is set: one set later, mid-day, counts
            // what the day has spent already (as one set before a restart does, from the file).
            if let Some(cost) = entry.cost {
                state.spending.spend(entry.at, key, cost, now);
            }
            if policy.budgets.is_empty() {
                Vec::new()
            } else {
                state.spending.crossings(&policy.budgets, key, now)
            }
        };
        for budget in crossed {
            tracing::warn!(budget = %budget.name(), spent = %budget.spent, limit = %budget.limit, state = ?budget.state, "budget");
            self.registry.announce(HealthEvent::Budget { budget, at: now });
        }
        Some(entry)
    }

    /// The report `spec` asks for, from memory.
    pub fn report(&self, spec: &ReportSpec) -> UsageReport {
        self.state.lock().ledger.report(spec)
    }

    /// Every configured budget and how much of it is spent.
    pub fn budgets(&self) -> Vec<BudgetView> {
        let policy = self.policy.load();
        self.state.lock().spending.views(&policy.budgets, self.clock.now())
    }

    /// The counters since start, by (provider, model) label, sorted.
    pub fn counters(&self) -> Vec<(Arc<str>, Arc<str>, Counters)> {
        let state = self.state.lock();
        let mut all: Vec<_> =
            state.metrics.iter().map(|((p, m), c)| (Arc::clone(p), Arc::clone(m), *c)).collect();
        all.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        all
    }
}

fn first_kept_hour(usage: &UsageSettings, now: UnixMillis) -> u64 {
    let first_day = day_of(now).saturating_sub(u64::from(usage.retention_days) - 1);
    first_day * DAY_MS / HOUR_MS
}

/// Drops the hours past retention, once each time a day passes out of it.
fn compact(state: &mut State, usage: &UsageSettings, now: UnixMillis) {
    let first = first_kept_hour(usage, now);
    if first > state.compacted_from {
        state.ledger.compact(first);
        state.compacted_from = first;
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::ManualClock;
    use switchyard_core::usage::Usage;

    use super::*;
    use crate::config::Config;

    fn config(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("t.toml"), &|_| Some("k".to_owned())).unwrap()
    }

    const PROVIDERS: &str = r#"
[[providers]]
id = "oa"
kind = "openai"
models = ["gpt-4o"]
credentials = [{ id = "k", secret = "env:K" }]

[[providers]]
id = "an"
kind = "anthropic"
credentials = [{ id = "k", secret = "env:K" }]

[[combos]]
name = "smart"
targets = [{ target = "an/claude" }]
"#;

    fn record(served_by: Option<&str>) -> RequestRecord {
        RequestRecord {
            at: UnixMillis(1_800_000_000_000),
            dialect: "openai".into(),
            model: "smart".into(),
            served_by: served_by.map(str::to_owned),
            status: if served_by.is_some() { 200 } else { 503 },
            attempts: 1,
            duration_ms: 1,
            trace: "[]".into(),
            outcome: None,
            first_byte_ms: Some(1),
            usage: Some(Usage { uncached_input: 10, output: 2, ..Usage::default() }),
            cost: Some(Nanodollars(5)),
            local_key: Some("preset".into()),
            combo: Some("smart".into()),
            fallback: false,
            session: None,
            credential: None,
            session_home: None,
        }
    }

    #[test]
    fn metrics_labels_are_only_configured_providers_and_models() {
        let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
        let tracker = UsageTracker::new(Arc::new(clock), Arc::default());
        tracker.configure(&config(PROVIDERS));
        for served_by in [
            Some("oa/gpt-4o"),
            Some("an/claude"),
            Some("an/claude-made-up-by-a-client"),
            Some("ghost/x"),
            None,
        ] {
            assert!(tracker.observe(&record(served_by), None).is_some());
        }
        let labels: Vec<(String, String, u64)> = tracker
            .counters()
            .into_iter()
            .map(|(p, m, c)| (p.to_string(), m.to_string(), c.requests))
            .collect();
        let expected = [
            ("an", "claude", 1),
            ("an", "other", 1),
            ("none", "none", 1),
            ("oa", "gpt-4o", 1),
            ("other", "other", 1),
        ];
        let expected: Vec<(String, String, u64)> =
            expected.iter().map(|(p, m, n)| ((*p).to_owned(), (*m).to_owned(), *n)).collect();
        assert_eq!(labels, expected);
    }

    #[test]
    fn with_tracking_off_nothing_is_counted_and_no_budget_is_checked() {
        let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
        let tracker = UsageTracker::new(Arc::new(clock), Arc::default());
        tracker.configure(&config(&format!("{PROVIDERS}\n[settings.usage]\ntracking = false\n")));
        assert!(tracker.observe(&record(Some("oa/gpt-4o")), None).is_none());
        assert!(tracker.counters().is_empty());
        assert_eq!(tracker.check(None), Ok(()));
    }
}
