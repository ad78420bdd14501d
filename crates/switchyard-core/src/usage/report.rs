//! A usage report, shaped for charts: every bucket of the range in order (empty ones
//! included), one series per group with a point per bucket, and the totals per bucket and
//! overall, so a stacked chart, a line per provider or a "top keys" table reads straight off
//! it with no joins and no gaps to fill.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::calendar::{DAY_MS, HOUR_MS};
use crate::clock::UnixMillis;

use super::TokenCounts;
use super::ledger::{Labels, Ledger, Totals, UsageEntry};

/// How wide a report's buckets are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// A UTC day.
    #[default]
    Day,
    Hour,
}

impl Bucket {
    pub fn millis(self) -> u64 {
        match self {
            Self::Day => DAY_MS,
            Self::Hour => HOUR_MS,
        }
    }
}

/// What a report's series are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// `provider/model` that served.
    Model,
    /// The provider that served.
    Provider,
    /// The local key (one per tool) the client presented.
    Key,
    /// The combo the requested model resolved to.
    Combo,
    /// The agent session (RESILIENCE.md §11): what one agent task cost. Summed from the
    /// request log's entries ([`session_report`]), not from the hourly aggregates, which do
    /// not keep sessions.
    Session,
}

impl GroupBy {
    fn key_of(self, labels: &Labels) -> Option<String> {
        match self {
            Self::Model => labels.target(),
            Self::Provider => labels.provider.clone(),
            Self::Key => labels.key.clone(),
            Self::Combo => labels.combo.clone(),
            Self::Session => None,
        }
    }

    /// What a series without a value is called.
    fn none_label(self) -> &'static str {
        match self {
            Self::Model | Self::Provider => "(not served)",
            Self::Key => "(no key)",
            Self::Combo => "(no route)",
            Self::Session => "(no session)",
        }
    }
}

/// Which requests a report counts; every condition is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only these local key ids.
    pub keys: Option<Vec<String>>,
    pub combo: Option<String>,
    /// Only what this provider served.
    pub provider: Option<String>,
    /// Only what this `provider/model` served, or this model id on any provider.
    pub model: Option<String>,
}

impl Filter {
    fn admits(&self, labels: &Labels) -> bool {
        let is = |want: &Option<String>, have: &Option<String>| {
            want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
        };
        self.keys.as_ref().is_none_or(|keys| labels.key.as_ref().is_some_and(|k| keys.contains(k)))
            && is(&self.combo, &labels.combo)
            && is(&self.provider, &labels.provider)
            && self.model.as_ref().is_none_or(|m| {
                labels.model.as_ref() == Some(m) || labels.target().as_ref() == Some(m)
            })
    }
}

/// What to report. `from` is rounded down and `to` up to whole buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportSpec {
    pub from: UnixMillis,
    /// Exclusive.
    pub to: UnixMillis,
    pub bucket: Bucket,
    pub group_by: Option<GroupBy>,
    pub filter: Filter,
}

impl ReportSpec {
    /// The range rounded out to whole buckets: `[from, to)`.
    pub fn aligned(&self) -> (UnixMillis, UnixMillis) {
        let width = self.bucket.millis();
        let from = self.from.0 / width * width;
        let to = self.to.0.div_ceil(width).saturating_mul(width).max(from);
        (UnixMillis(from), UnixMillis(to))
    }

    /// How many buckets the report has.
    pub fn buckets(&self) -> u64 {
        let (from, to) = self.aligned();
        (to.0 - from.0) / self.bucket.millis()
    }
}

/// `GET /api/usage`: the range, rounded out to whole buckets, and what it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct UsageReport {
    /// The first bucket's start.
    pub from: UnixMillis,
    /// The end of the last bucket (exclusive).
    pub to: UnixMillis,
    pub bucket: Bucket,
    pub group_by: Option<GroupBy>,
    /// Every bucket's start, oldest first; every `points` and `totals` array is aligned with it.
    pub buckets: Vec<UnixMillis>,
    /// One per group, the largest spend first (then the most requests); empty without
    /// `group_by`.
    pub series: Vec<UsageSeries>,
    /// Per bucket, everything the filters let through.
    pub totals: Vec<UsagePoint>,
    /// The whole range.
    pub total: UsagePoint,
}

/// One group's figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct UsageSeries {
    /// The group's value: a `provider/model`, a provider id, a local key's id or a combo;
    /// `null` for requests it does not apply to (not served, no key, no route).
    pub key: Option<String>,
    /// What to show: the key's name for a local key, else the value, or `(not served)`,
    /// `(no key)`, `(no route)`.
    pub label: String,
    pub points: Vec<UsagePoint>,
    pub total: UsagePoint,
}

/// The figures of one bucket (or a whole range).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct UsagePoint {
    #[ts(type = "number")]
    pub requests: u64,
    /// Requests served by other than their first attempt.
    #[ts(type = "number")]
    pub fallbacks: u64,
    /// Requests answered with an error, or whose stream broke after it started.
    #[ts(type = "number")]
    pub errors: u64,
    #[serde(flatten)]
    pub tokens: TokenCounts,
    /// Requests whose token counts are estimates (a stream cut before its final usage).
    #[ts(type = "number")]
    pub estimated: u64,
    /// What the requests whose prices are known cost, in USD (`"0.01325"`).
    pub cost: String,
    /// The same, in nanodollars (10^-9 USD): exact, and a plain number for charts.
    #[ts(type = "number")]
    pub cost_nanodollars: u64,
    /// Requests that used tokens at a price not known; their tokens are counted, their cost
    /// is not in `cost`.
    #[ts(type = "number")]
    pub cost_unknown: u64,
    /// Streamed requests that were served: what the time-to-first-token figures are of.
    #[ts(type = "number")]
    pub ttft_samples: u64,
    /// Median time to first token, in milliseconds (within 12.5 %); `null` without samples.
    #[ts(type = "number | null")]
    pub ttft_p50_ms: Option<u64>,
    #[ts(type = "number | null")]
    pub ttft_p95_ms: Option<u64>,
}

impl From<&Totals> for UsagePoint {
    fn from(t: &Totals) -> Self {
        Self {
            requests: t.requests,
            fallbacks: t.fallbacks,
            errors: t.errors,
            tokens: TokenCounts {
                uncached_input: t.uncached_input,
                cache_read: t.cache_read,
                cache_write: t.cache_write,
                output: t.output,
                reasoning: t.reasoning,
            },
            estimated: t.estimated,
            cost: t.cost.to_string(),
            cost_nanodollars: t.cost.0,
            cost_unknown: t.cost_unknown,
            ttft_samples: t.ttft.count(),
            ttft_p50_ms: t.ttft.quantile(0.5),
            ttft_p95_ms: t.ttft.quantile(0.95),
        }
    }
}

fn sum(points: &[Totals]) -> Totals {
    let mut total = Totals::default();
    for point in points {
        total.merge(point);
    }
    total
}

impl Ledger {
    /// The report `spec` asks for. Series are labelled with their values; a caller that knows
    /// better names (a local key's) replaces `label`. Grouping by session needs the request
    /// log's entries: see [`session_report`].
    pub fn report(&self, spec: &ReportSpec) -> UsageReport {
        let (from, to) = spec.aligned();
        let rows = self.rows_between(from.0 / HOUR_MS, to.0 / HOUR_MS);
        let group = |labels: &Labels| spec.group_by.map(|g| g.key_of(labels));
        build(
            spec,
            rows.map(|row| (row.hour, row.labels, Cow::Borrowed(row.totals), group(row.labels))),
        )
    }
}

/// The report `spec` asks for, grouped by session whatever its `group_by`, from request-log
/// entries and the session each belonged to (`None` when sessions were off). Series are
/// labelled with the first 12 hex digits of the session, as the routing trace shows it.
pub fn session_report<'e>(
    spec: &ReportSpec,
    entries: impl IntoIterator<Item = (&'e UsageEntry, Option<&'e str>)>,
) -> UsageReport {
    let spec = ReportSpec { group_by: Some(GroupBy::Session), ..spec.clone() };
    let rows = entries.into_iter().map(|(entry, session)| {
        let hour = entry.at.0 / HOUR_MS;
        (hour, &entry.labels, Cow::Owned(Totals::of(entry)), Some(session.map(str::to_owned)))
    });
    let mut report = build(&spec, rows);
    for series in &mut report.series {
        if let Some(session) = &series.key {
            series.label = session.chars().take(12).collect();
        }
    }
    report
}

/// The report of `rows`: (hour, labels, totals, group) where the group is `None` when the
/// report is not grouped, else the group's value.
fn build<'r>(
    spec: &ReportSpec,
    rows: impl Iterator<Item = (u64, &'r Labels, Cow<'r, Totals>, Option<Option<String>>)>,
) -> UsageReport {
    let (from, to) = spec.aligned();
    let width = spec.bucket.millis();
    let n = usize::try_from(spec.buckets()).unwrap_or(usize::MAX);
    let mut totals = vec![Totals::default(); n];
    let mut groups: HashMap<Option<String>, Vec<Totals>> = HashMap::new();
    for (hour, labels, row, group) in rows {
        if !spec.filter.admits(labels) || hour * HOUR_MS < from.0 || hour * HOUR_MS >= to.0 {
            continue;
        }
        let i = usize::try_from((hour * HOUR_MS - from.0) / width).unwrap_or(usize::MAX);
        let Some(bucket) = totals.get_mut(i) else { continue };
        bucket.merge(&row);
        if let Some(key) = group {
            let points = groups.entry(key).or_insert_with(|| vec![Totals::default(); n]);
            points[i].merge(&row);
        }
    }
    let mut series: Vec<(Totals, UsageSeries)> = groups
        .into_iter()
        .map(|(key, points)| {
            let total = sum(&points);
            let label = key.clone().unwrap_or_else(|| {
                spec.group_by.map(GroupBy::none_label).unwrap_or_default().to_owned()
            });
            let series = UsageSeries {
                key,
                label,
                points: points.iter().map(UsagePoint::from).collect(),
                total: UsagePoint::from(&total),
            };
            (total, series)
        })
        .collect();
    series.sort_by(|(a, x), (b, y)| {
        b.cost.cmp(&a.cost).then(b.requests.cmp(&a.requests)).then_with(|| {
            // Named groups before the one without a value, then by name.
            (x.key.is_none(), &x.key).cmp(&(y.key.is_none(), &y.key))
        })
    });
    let total = sum(&totals);
    UsageReport {
        from,
        to,
        bucket: spec.bucket,
        group_by: spec.group_by,
        buckets: (0..n as u64).map(|i| UnixMillis(from.0 + i * width)).collect(),
        series: series.into_iter().map(|(_, s)| s).collect(),
        totals: totals.iter().map(UsagePoint::from).collect(),
        total: UsagePoint::from(&total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::ledger::UsageEntry;
    use crate::usage::{Nanodollars, Usage};

    const DAY0: u64 = 20_000;

    /// A request at `hour` hours into day 0 through `key`, served by `target` at `cost` n$.
    fn request(hour: u64, key: &str, target: Option<&str>, cost: u64) -> UsageEntry {
        let (provider, model) = match target.and_then(|t| t.split_once('/')) {
            Some((p, m)) => (Some(p.to_owned()), Some(m.to_owned())),
            None => (None, None),
        };
        UsageEntry {
            at: UnixMillis(DAY0 * DAY_MS + hour * HOUR_MS + 59_000),
            labels: Labels {
                key: Some(key.to_owned()),
                combo: Some("smart".into()),
                provider,
                model,
            },
            fallback: hour % 2 == 1,
            error: target.is_none(),
            usage: target.map(|_| Usage { uncached_input: 100, output: 10, ..Usage::default() }),
            cost: target.map(|_| Nanodollars(cost)),
            ttft_ms: target.map(|_| 50 * (hour + 1)),
        }
    }

    fn ledger() -> Ledger {
        let mut ledger = Ledger::default();
        for e in [
            request(0, "a", Some("oa/gpt-4o"), 300),
            request(1, "a", Some("an/claude"), 500),
            request(1, "b", Some("oa/gpt-4o"), 300),
            request(25, "b", Some("oa/gpt-4o"), 300),
            request(26, "b", None, 0),
        ] {
            ledger.add(&e);
        }
        ledger
    }

    fn spec(bucket: Bucket, group_by: Option<GroupBy>) -> ReportSpec {
        ReportSpec {
            from: UnixMillis(DAY0 * DAY_MS),
            to: UnixMillis((DAY0 + 2) * DAY_MS),
            bucket,
            group_by,
            filter: Filter::default(),
        }
    }

    #[test]
    fn every_bucket_of_the_range_is_there_and_series_align_with_it() {
        let report = ledger().report(&spec(Bucket::Hour, Some(GroupBy::Model)));
        assert_eq!(report.buckets.len(), 48);
        assert_eq!(report.buckets[1].0 - report.buckets[0].0, HOUR_MS);
        assert!(report.series.iter().all(|s| s.points.len() == 48));
        let requests: Vec<u64> = report.totals.iter().map(|p| p.requests).collect();
        assert_eq!(&requests[..3], [1, 2, 0]);
        assert_eq!(&requests[25..27], [1, 1]);
        assert_eq!(report.total.requests, 5);
        assert_eq!(report.total.fallbacks, 3);
        assert_eq!(report.total.errors, 1);
    }

    #[test]
    fn series_go_by_spend_and_the_group_without_a_value_comes_last() {
        let report = ledger().report(&spec(Bucket::Day, Some(GroupBy::Model)));
        let order: Vec<(&str, &str)> =
            report.series.iter().map(|s| (s.label.as_str(), s.total.cost.as_str())).collect();
        assert_eq!(
            order,
            [("oa/gpt-4o", "0.0000009"), ("an/claude", "0.0000005"), ("(not served)", "0")]
        );
        let gpt = &report.series[0];
        assert_eq!(gpt.points.iter().map(|p| p.requests).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(gpt.total.tokens.uncached_input, 300);
        assert_eq!(report.series[2].key, None);
    }

    #[test]
    fn a_session_report_sums_each_sessions_requests_and_equals_the_ledgers_totals() {
        let one = "0123456789abcdef0123456789abcdef";
        let two = "fedcba9876543210fedcba9876543210";
        let entries = [
            (request(0, "a", Some("oa/gpt-4o"), 300), Some(one)),
            (request(1, "a", Some("an/claude"), 500), Some(one)),
            (request(1, "b", Some("oa/gpt-4o"), 300), Some(two)),
            (request(25, "b", Some("oa/gpt-4o"), 300), None),
            (request(26, "b", None, 0), Some(two)),
        ];
        let spec = spec(Bucket::Day, None);
        let report = session_report(&spec, entries.iter().map(|(e, s)| (e, *s)));
        assert_eq!(report.group_by, Some(GroupBy::Session));
        let series: Vec<(&str, Option<&str>, u64, &str)> = report
            .series
            .iter()
            .map(|s| (s.label.as_str(), s.key.as_deref(), s.total.requests, s.total.cost.as_str()))
            .collect();
        assert_eq!(
            series,
            [
                ("0123456789ab", Some(one), 2, "0.0000008"),
                ("fedcba987654", Some(two), 2, "0.0000003"),
                ("(no session)", None, 1, "0.0000003"),
            ]
        );
        // The same requests, whatever they are grouped by, add up to the same totals.
        assert_eq!(report.totals, ledger().report(&spec).totals);
        let filtered = Filter { keys: Some(vec!["a".into()]), ..Filter::default() };
        let narrowed = session_report(
            &ReportSpec { filter: filtered, ..spec },
            entries.iter().map(|(e, s)| (e, *s)),
        );
        assert_eq!(narrowed.series.len(), 1, "filters apply");
    }

    #[test]
    fn filters_narrow_the_totals_and_the_series() {
        let mut s = spec(Bucket::Day, Some(GroupBy::Key));
        s.filter.model = Some("gpt-4o".into());
        let report = ledger().report(&s);
        assert_eq!(report.total.requests, 3);
        assert_eq!(report.series.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        s.filter = Filter {
            keys: Some(vec!["a".into()]),
            provider: Some("an".into()),
            ..Filter::default()
        };
        assert_eq!(ledger().report(&s).total.cost_nanodollars, 500);
        s.filter = Filter { model: Some("oa/claude".into()), ..Filter::default() };
        assert_eq!(ledger().report(&s).total.requests, 0, "the model on another provider");
    }

    #[test]
    fn a_range_is_rounded_out_to_whole_buckets() {
        let s = ReportSpec {
            from: UnixMillis(DAY0 * DAY_MS + HOUR_MS + 5),
            to: UnixMillis(DAY0 * DAY_MS + 2 * HOUR_MS + 1),
            ..spec(Bucket::Hour, None)
        };
        let report = ledger().report(&s);
        assert_eq!(report.from.0, DAY0 * DAY_MS + HOUR_MS);
        assert_eq!(report.to.0, DAY0 * DAY_MS + 3 * HOUR_MS);
        assert_eq!(report.totals.iter().map(|p| p.requests).collect::<Vec<_>>(), [2, 0]);
        assert!(report.series.is_empty(), "no group_by, no series");
    }

    #[test]
    fn time_to_first_token_percentiles_come_from_the_merged_sketches() {
        let report = ledger().report(&spec(Bucket::Day, None));
        let day0 = &report.totals[0];
        // 50, 100 and 100 ms on day 0; 100 ms is read as its bucket's midpoint, 104.
        assert_eq!(
            (day0.ttft_samples, day0.ttft_p50_ms, day0.ttft_p95_ms),
            (3, Some(104), Some(104))
        );
        assert_eq!(report.totals[1].ttft_samples, 1, "the failed request has none");
    }
}
