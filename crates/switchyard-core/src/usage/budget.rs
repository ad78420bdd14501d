//! Budgets: what has been spent today and this month (UTC), overall and per local key, held
//! against the configured limits, in memory, so the check before a request reads no database.
//!
//! Spend is the cost of finished requests (a request is charged to the day and month it
//! arrived in); requests in flight are not in it yet, so concurrent requests can take a
//! budget a little past its limit before the first of them is refused. A key's budget follows
//! the key's *name*: one per tool, kept across a key revoked and made again.
//!
//! Crossing 80 % and reaching 100 % of a budget are announced once per period each; a request
//! that jumps past both announces only the higher. A restart rebuilds the spend from the
//! aggregates and counts whatever was already crossed as announced.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::calendar::{DAY_MS, HOUR_MS, day_of, start_of_day, start_of_month, start_of_next_month};
use crate::clock::UnixMillis;
use crate::settings::{BudgetPolicy, Limit, Limits};

use super::Nanodollars;
use super::ledger::Ledger;

/// The share of a budget at which it is announced as nearly spent.
pub const WARN_PERCENT: u32 = 80;

/// How long a budget runs before it starts again from zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    /// A UTC day.
    Daily,
    /// A UTC calendar month.
    Monthly,
}

impl BudgetPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Daily => "daily",
            Self::Monthly => "monthly",
        }
    }
}

/// How far along a budget is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum BudgetState {
    Ok,
    /// At least [`WARN_PERCENT`] spent.
    Warning,
    /// All spent: an enforced budget refuses requests until it resets.
    Reached,
}

/// A budget and how much of it is spent: `GET /api/usage/budgets`, the tray's tooltip, and
/// the `budget` event at 80 % and 100 %.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct BudgetView {
    /// The local key's name; `null` for the budget over every request.
    pub key: Option<String>,
    pub period: BudgetPeriod,
    /// Requests are refused once it is reached.
    pub enforce: bool,
    /// USD, as a decimal (`"5"`, `"0.25"`).
    pub limit: String,
    #[ts(type = "number")]
    pub limit_nanodollars: u64,
    pub spent: String,
    #[ts(type = "number")]
    pub spent_nanodollars: u64,
    /// Spent, in whole percent of the limit (past 100 when requests in flight took it over).
    pub percent: u32,
    pub state: BudgetState,
    /// When the period ends and the spend starts again from zero: 00:00 UTC.
    pub resets_at: UnixMillis,
}

impl BudgetView {
    /// Names the budget for a person: `the daily budget` or `the daily budget of key "editor"`.
    pub fn name(&self) -> String {
        match &self.key {
            None => format!("the {} budget", self.period.as_str()),
            Some(key) => format!("the {} budget of key {key:?}", self.period.as_str()),
        }
    }
}

/// Spend in the current day and month.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Spent {
    day: Nanodollars,
    month: Nanodollars,
}

impl Spent {
    fn of(self, period: BudgetPeriod) -> Nanodollars {
        match period {
            BudgetPeriod::Daily => self.day,
            BudgetPeriod::Monthly => self.month,
        }
    }
}

/// Which announcement: (key name, period, percent).
type Announced = (Option<String>, BudgetPeriod, u32);

/// The spend of the current day and month, overall and by key name.
#[derive(Debug, Default)]
pub struct Spending {
    /// Days since the epoch of the day being counted.
    day: u64,
    /// The first instant of the month being counted.
    month: UnixMillis,
    overall: Spent,
    keys: HashMap<String, Spent>,
    announced: HashSet<Announced>,
}

impl Spending {
    /// Moves to `now`'s day and month, starting each anew when it has ended. A clock that went
    /// back changes nothing: spend is never given back.
    fn roll(&mut self, now: UnixMillis) {
        if day_of(now) > self.day {
            self.day = day_of(now);
            self.overall.day = Nanodollars::default();
            self.keys.values_mut().for_each(|s| s.day = Nanodollars::default());
            self.announced.retain(|(_, period, _)| *period != BudgetPeriod::Daily);
        }
        if start_of_month(now) > self.month {
            self.month = start_of_month(now);
            self.overall.month = Nanodollars::default();
            self.keys.values_mut().for_each(|s| s.month = Nanodollars::default());
            self.announced.retain(|(_, period, _)| *period != BudgetPeriod::Monthly);
        }
    }

    /// Charges `cost`, of a request that arrived `at` through the key named `key`.
    pub fn spend(&mut self, at: UnixMillis, key: Option<&str>, cost: Nanodollars, now: UnixMillis) {
        self.roll(now.max(at));
        let today = day_of(at) == self.day;
        let this_month = start_of_month(at) == self.month;
        let charge = |spent: &mut Spent| {
            if today {
                spent.day += cost;
            }
            if this_month {
                spent.month += cost;
            }
        };
        charge(&mut self.overall);
        if let Some(key) = key {
            // Every priced request passes here: the key's name is copied once, not per request.
            match self.keys.get_mut(key) {
                Some(spent) => charge(spent),
                None => charge(self.keys.entry(key.to_owned()).or_default()),
            }
        }
    }

    fn spent(&self, key: Option<&str>) -> Spent {
        match key {
            None => self.overall,
            Some(key) => self.keys.get(key).copied().unwrap_or_default(),
        }
    }

    /// The budgets that apply to a request through the key named `key`: the key's own first,
    /// then the overall ones; daily before monthly.
    fn applicable<'p>(
        policy: &'p BudgetPolicy,
        key: Option<&'p str>,
    ) -> impl Iterator<Item = (Option<&'p str>, BudgetPeriod, Limit)> {
        let own = key.and_then(|k| policy.keys.get_key_value(k));
        let own = own.into_iter().flat_map(|(name, limits)| periods(Some(name.as_str()), limits));
        own.chain(periods(None, &policy.overall))
    }

    fn view(
        &self,
        key: Option<&str>,
        period: BudgetPeriod,
        limit: Limit,
        now: UnixMillis,
    ) -> BudgetView {
        let spent = self.spent(key).of(period);
        let percent = u128::from(spent.0) * 100 / u128::from(limit.amount.0.max(1));
        let percent = u32::try_from(percent).unwrap_or(u32::MAX);
        let state = if spent >= limit.amount {
            BudgetState::Reached
        } else if percent >= WARN_PERCENT {
            BudgetState::Warning
        } else {
            BudgetState::Ok
        };
        let resets_at = match period {
            BudgetPeriod::Daily => UnixMillis(start_of_day(now).0 + DAY_MS),
            BudgetPeriod::Monthly => start_of_next_month(now),
        };
        BudgetView {
            key: key.map(str::to_owned),
            period,
            enforce: limit.enforce,
            limit: limit.amount.to_string(),
            limit_nanodollars: limit.amount.0,
            spent: spent.to_string(),
            spent_nanodollars: spent.0,
            percent,
            state,
            resets_at,
        }
    }

    /// The enforced budget a request through the key named `key` would break, if any: the
    /// refusal names it.
    pub fn check(
        &mut self,
        policy: &BudgetPolicy,
        key: Option<&str>,
        now: UnixMillis,
    ) -> Result<(), BudgetView> {
        self.roll(now);
        for (name, period, limit) in Self::applicable(policy, key) {
            if limit.enforce && self.spent(name).of(period) >= limit.amount {
                return Err(self.view(name, period, limit, now));
            }
        }
        Ok(())
    }

    /// The budgets of a request through `key` that have crossed 80 % or 100 % since they were
    /// last announced: each to announce now, once.
    pub fn crossings(
        &mut self,
        policy: &BudgetPolicy,
        key: Option<&str>,
        now: UnixMillis,
    ) -> Vec<BudgetView> {
        self.roll(now);
        let mut crossed = Vec::new();
        for (name, period, limit) in Self::applicable(policy, key) {
            let view = self.view(name, period, limit, now);
            let level = match view.state {
                BudgetState::Ok => continue,
                BudgetState::Warning => WARN_PERCENT,
                BudgetState::Reached => 100,
            };
            let owner = name.map(str::to_owned);
            if self.announced.insert((owner.clone(), period, level)) {
                // Past 100 % at one go: the warning is spent too.
                self.announced.insert((owner, period, WARN_PERCENT));
                crossed.push(view);
            }
        }
        crossed
    }

    /// Every configured budget, overall first, then by key name.
    pub fn views(&mut self, policy: &BudgetPolicy, now: UnixMillis) -> Vec<BudgetView> {
        self.roll(now);
        let overall = periods(None, &policy.overall);
        let keys =
            policy.keys.iter().flat_map(|(name, limits)| periods(Some(name.as_str()), limits));
        overall
            .chain(keys)
            .map(|(name, period, limit)| self.view(name, period, limit, now))
            .collect()
    }

    /// The spend of `now`'s day and month as `ledger` has it, `name_of` naming each key id;
    /// what `policy`'s budgets had already crossed counts as announced.
    pub fn rebuild(
        ledger: &Ledger,
        policy: &BudgetPolicy,
        name_of: &dyn Fn(&str) -> Option<String>,
        now: UnixMillis,
    ) -> Self {
        let mut spending = Self::default();
        spending.roll(now);
        let from = start_of_month(now).0 / HOUR_MS;
        for row in ledger.rows_between(from, u64::MAX) {
            let at = Ledger::hour_start(row.hour);
            let name = row.labels.key.as_deref().and_then(name_of);
            spending.spend(at, name.as_deref(), row.totals.cost, now);
        }
        let keys: Vec<Option<String>> =
            std::iter::once(None).chain(policy.keys.keys().cloned().map(Some)).collect();
        for key in keys {
            spending.crossings(policy, key.as_deref(), now);
        }
        spending
    }
}

fn periods<'p>(
    key: Option<&'p str>,
    limits: &Limits,
) -> impl Iterator<Item = (Option<&'p str>, BudgetPeriod, Limit)> + use<'p> {
    let daily = limits.daily.map(|l| (key, BudgetPeriod::Daily, l));
    let monthly = limits.monthly.map(|l| (key, BudgetPeriod::Monthly, l));
    daily.into_iter().chain(monthly)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::calendar::Moment;
    use crate::usage::Usage;
    use crate::usage::ledger::{Labels, UsageEntry};

    fn at(text: &str) -> UnixMillis {
        match Moment::parse(text).unwrap() {
            Moment::Day(at) | Moment::Instant(at) => at,
        }
    }

    fn limit(usd: f64, enforce: bool) -> Limit {
        Limit { amount: Nanodollars::from_usd(usd).unwrap(), enforce }
    }

    /// $10 a day overall (warn only), $1 a day and $5 a month enforced for `editor`.
    fn policy() -> BudgetPolicy {
        let editor = Limits { daily: Some(limit(1.0, true)), monthly: Some(limit(5.0, true)) };
        BudgetPolicy {
            overall: Limits { daily: Some(limit(10.0, false)), monthly: None },
            keys: BTreeMap::from([("editor".to_owned(), editor)]),
        }
    }

    const CENTS_40: Nanodollars = Nanodollars(400_000_000);

    #[test]
    fn an_enforced_budget_refuses_once_spent_and_names_itself_and_its_reset() {
        let (mut s, p, now) = (Spending::default(), policy(), at("2026-01-31T10:00:00Z"));
        s.spend(now, Some("editor"), CENTS_40, now);
        s.spend(now, Some("editor"), CENTS_40, now);
        assert_eq!(s.check(&p, Some("editor"), now), Ok(()));
        s.spend(now, Some("editor"), CENTS_40, now);
        let refused = s.check(&p, Some("editor"), now).unwrap_err();
        assert_eq!(refused.name(), "the daily budget of key \"editor\"");
        assert_eq!(
            (refused.spent.as_str(), refused.limit.as_str(), refused.percent),
            ("1.2", "1", 120)
        );
        assert_eq!(refused.resets_at, at("2026-02-01"));
        assert_eq!(s.check(&p, Some("other"), now), Ok(()), "another key has no budget of its own");
        assert_eq!(s.check(&p, None, now), Ok(()), "the overall budget only warns");
        assert_eq!(s.check(&p, Some("editor"), at("2026-02-01T00:00:00Z")), Ok(()), "a new day");
    }

    #[test]
    fn the_monthly_budget_carries_over_days_and_resets_with_the_month() {
        let (mut s, p) = (Spending::default(), policy());
        for day in 1..=6 {
            let now = at(&format!("2026-01-{day:02}T12:00:00Z"));
            s.spend(now, Some("editor"), Nanodollars::from_usd(0.9).unwrap(), now);
        }
        let refused = s.check(&p, Some("editor"), at("2026-01-06T13:00:00Z")).unwrap_err();
        assert_eq!((refused.period, refused.spent.as_str()), (BudgetPeriod::Monthly, "5.4"));
        assert_eq!(refused.resets_at, at("2026-02-01"));
        assert_eq!(s.check(&p, Some("editor"), at("2026-02-01T00:00:01Z")), Ok(()));
    }

    #[test]
    fn eighty_percent_and_the_limit_are_announced_once_each_per_period() {
        let (mut s, p) = (Spending::default(), policy());
        let now = at("2026-01-31T10:00:00Z");
        let mut announced = Vec::new();
        // $0.30 a request: 30, 60, 90 (a warning), 120 (reached) and 150 % of the $1 a day.
        for _ in 0..5 {
            s.spend(now, Some("editor"), Nanodollars::from_usd(0.3).unwrap(), now);
            announced.extend(s.crossings(&p, Some("editor"), now));
        }
        let levels: Vec<(BudgetPeriod, BudgetState, u32)> =
            announced.iter().map(|v| (v.period, v.state, v.percent)).collect();
        assert_eq!(
            levels,
            [
                (BudgetPeriod::Daily, BudgetState::Warning, 90),
                (BudgetPeriod::Daily, BudgetState::Reached, 120)
            ]
        );
        let next_day = at("2026-02-01T01:00:00Z");
        s.spend(next_day, Some("editor"), Nanodollars::from_usd(0.85).unwrap(), next_day);
        let again = s.crossings(&p, Some("editor"), next_day);
        let again: Vec<(BudgetPeriod, BudgetState)> =
            again.iter().map(|v| (v.period, v.state)).collect();
        assert_eq!(again, [(BudgetPeriod::Daily, BudgetState::Warning)], "a new day warns anew");
    }

    #[test]
    fn a_jump_past_the_limit_announces_only_that_it_is_reached() {
        let (mut s, p, now) = (Spending::default(), policy(), at("2026-01-31T10:00:00Z"));
        s.spend(now, None, Nanodollars::from_usd(12.0).unwrap(), now);
        let views = s.crossings(&p, None, now);
        assert_eq!(views.iter().map(|v| v.state).collect::<Vec<_>>(), [BudgetState::Reached]);
        assert!(s.crossings(&p, None, now).is_empty());
    }

    #[test]
    fn spend_is_rebuilt_from_the_aggregates_without_announcing_again() {
        let now = at("2026-01-31T10:00:00Z");
        let mut ledger = Ledger::default();
        for (when, key, usd) in [
            ("2025-12-31T23:00:00Z", "key_a", 9.0),
            ("2026-01-02T08:00:00Z", "key_a", 2.0),
            ("2026-01-31T01:00:00Z", "key_a", 0.9),
            ("2026-01-31T02:00:00Z", "key_b", 0.5),
        ] {
            ledger.add(&UsageEntry {
                at: at(when),
                labels: Labels { key: Some(key.into()), ..Labels::default() },
                fallback: false,
                error: false,
                usage: Some(Usage { output: 1, ..Usage::default() }),
                cost: Nanodollars::from_usd(usd),
                ttft_ms: None,
            });
        }
        let names = |id: &str| (id == "key_a").then(|| "editor".to_owned());
        let mut s = Spending::rebuild(&ledger, &policy(), &names, now);
        let views = s.views(&policy(), now);
        let spent: Vec<(Option<&str>, BudgetPeriod, &str)> =
            views.iter().map(|v| (v.key.as_deref(), v.period, v.spent.as_str())).collect();
        assert_eq!(
            spent,
            [
                (None, BudgetPeriod::Daily, "1.4"),
                (Some("editor"), BudgetPeriod::Daily, "0.9"),
                (Some("editor"), BudgetPeriod::Monthly, "2.9"),
            ]
        );
        assert!(s.crossings(&policy(), Some("editor"), now).is_empty(), "90 % was crossed before");
    }
}
