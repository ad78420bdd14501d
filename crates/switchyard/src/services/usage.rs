//! `GET /api/usage` (and its CSV) and `GET /api/usage/budgets`: the usage aggregates as chart
//! series, and what each budget has spent. The query is read parameter by parameter, so a
//! refusal names the one at fault and says what it accepts.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use switchyard_core::UnixMillis;
use switchyard_core::calendar::{DAY_MS, HOUR_MS, Moment, rfc3339};
use switchyard_core::usage::budget::BudgetView;
use switchyard_core::usage::report::{
    Bucket, Filter, GroupBy, ReportSpec, UsagePoint, UsageReport, session_report,
};
use ts_rs::TS;

use super::Services;
use crate::config::Problem;
use crate::keys::PRESET_KEY;

/// The most hourly buckets one report holds: 31 days.
const MAX_HOURS: u64 = 31 * 24;
/// The most daily buckets one report holds: ten years, the longest retention.
const MAX_DAYS: u64 = 3660;

/// `GET /api/usage`: every parameter is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, TS)]
#[ts(export)]
pub struct UsageQuery {
    /// The first day (`2026-01-01`, from its 00:00 UTC) or instant (RFC 3339) [default: 30
    /// days before `to` with `bucket=day`, 24 hours with `bucket=hour`].
    #[ts(optional)]
    pub from: Option<String>,
    /// The last day, included (`2026-01-31`), or an instant, excluded [default: now]. Both
    /// ends are rounded out to whole buckets.
    #[ts(optional)]
    pub to: Option<String>,
    /// `day` (UTC) or `hour` [default: day].
    #[ts(optional)]
    pub bucket: Option<Bucket>,
    /// One series per `model` (`provider/model`), `provider`, `key`, `combo` or `session`
    /// (an agent session, summed from the request log, as far back as it keeps).
    #[ts(optional)]
    pub group_by: Option<GroupBy>,
    /// Only requests through this local key (its id or name).
    #[ts(optional)]
    pub key: Option<String>,
    /// Only requests whose model resolved to this combo.
    #[ts(optional)]
    pub combo: Option<String>,
    /// Only what this provider served.
    #[ts(optional)]
    pub provider: Option<String>,
    /// Only what this `provider/model` served, or this model id on any provider.
    #[ts(optional)]
    pub model: Option<String>,
    /// `csv` for the CSV export (as `GET /api/usage.csv`) [default: json].
    #[ts(optional)]
    pub format: Option<UsageFormat>,
}

/// What `GET /api/usage` answers in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum UsageFormat {
    #[default]
    Json,
    Csv,
}

const PARAMETERS: &str = "from, to, bucket, group_by, key, combo, provider, model, format";

impl UsageQuery {
    /// Reads the query string's parameters; a refusal names the parameter.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Self, Problem> {
        let mut query = Self::default();
        for (name, value) in pairs {
            let text = || Some(value.clone());
            let slot = match name.as_str() {
                "from" => &mut query.from,
                "to" => &mut query.to,
                "key" => &mut query.key,
                "combo" => &mut query.combo,
                "provider" => &mut query.provider,
                "model" => &mut query.model,
                "bucket" => {
                    query.bucket = Some(choice(name, value)?);
                    continue;
                }
                "group_by" => {
                    query.group_by = Some(choice(name, value)?);
                    continue;
                }
                "format" => {
                    query.format = Some(choice(name, value)?);
                    continue;
                }
                other => {
                    return Err(Problem::new(
                        other,
                        format!("no such parameter; the parameters are {PARAMETERS}"),
                    ));
                }
            };
            *slot = text().filter(|v| !v.is_empty());
        }
        Ok(query)
    }
}

/// One of an enum's serde names.
fn choice<T: serde::de::DeserializeOwned>(name: &str, value: &str) -> Result<T, Problem> {
    serde_json::from_value(serde_json::Value::String(value.to_owned()))
        .map_err(|e| Problem::new(name, e.to_string()))
}

/// A date or RFC 3339 parameter; `end` reads a date as the end of that day.
fn moment(name: &str, text: &str, end: bool) -> Result<UnixMillis, Problem> {
    match Moment::parse(text).map_err(|e| Problem::new(name, e))? {
        Moment::Day(at) if end => Ok(UnixMillis(at.0 + DAY_MS)),
        Moment::Day(at) | Moment::Instant(at) => Ok(at),
    }
}

impl Services {
    /// The report `query` asks for, from memory; key series are labelled with the keys'
    /// names.
    pub async fn usage(&self, query: &UsageQuery) -> Result<UsageReport, Problem> {
        let names = self.key_names().await;
        let spec = self.report_spec(query, &names)?;
        let log = self.proxy.request_log();
        let mut report = if spec.group_by == Some(GroupBy::Session) {
            let (from, to) = spec.aligned();
            let records = log.between(from, to).await;
            let entries: Vec<_> = records.iter().map(|r| (r.usage_entry(), r)).collect();
            session_report(&spec, entries.iter().map(|(e, r)| (e, r.session.as_deref())))
        } else {
            log.usage().report(&spec)
        };
        if spec.group_by == Some(GroupBy::Key) {
            for series in &mut report.series {
                if let Some(name) = series.key.as_ref().and_then(|id| names.get(id)) {
                    series.label.clone_from(name);
                }
            }
        }
        Ok(report)
    }

    /// The report as CSV: a header row, then one row per bucket and series that counted a
    /// request (per bucket when not grouped).
    pub async fn usage_csv(&self, query: &UsageQuery) -> Result<String, Problem> {
        Ok(csv(&self.usage(query).await?))
    }

    /// Every configured budget and what it has spent.
    pub fn budgets(&self) -> Vec<BudgetView> {
        self.proxy.request_log().usage().budgets()
    }

    /// Every local key's name by id, revoked keys and the preset one included.
    async fn key_names(&self) -> HashMap<String, String> {
        let mut names = HashMap::from([(PRESET_KEY.to_owned(), PRESET_KEY.to_owned())]);
        if let Ok(store) = self.store() {
            match store.api_keys().await {
                Ok(keys) => names.extend(keys.into_iter().map(|k| (k.id, k.name))),
                Err(error) => tracing::warn!(%error, "cannot read the local keys' names"),
            }
        }
        names
    }

    fn report_spec(
        &self,
        query: &UsageQuery,
        names: &HashMap<String, String>,
    ) -> Result<ReportSpec, Problem> {
        let bucket = query.bucket.unwrap_or_default();
        let now = self.clock.now();
        let to = match &query.to {
            Some(text) => moment("to", text, true)?,
            None => now,
        };
        let from = match &query.from {
            Some(text) => moment("from", text, false)?,
            None => match bucket {
                Bucket::Day => UnixMillis(to.0.div_ceil(DAY_MS).saturating_sub(30) * DAY_MS),
                Bucket::Hour => UnixMillis(to.0.div_ceil(HOUR_MS).saturating_sub(24) * HOUR_MS),
            },
        };
        if from >= to {
            return Err(Problem::new(
                "from",
                format!(
                    "{} is not before `to` ({}); give from earlier than to",
                    rfc3339(from),
                    rfc3339(to)
                ),
            ));
        }
        let keys = match &query.key {
            None => None,
            Some(key) => {
                let ids: Vec<String> = names
                    .iter()
                    .filter(|(id, name)| *id == key || *name == key)
                    .map(|(id, _)| id.clone())
                    .collect();
                if ids.is_empty() {
                    return Err(Problem::new(
                        "key",
                        format!("no local key has the id or name {key:?} (see GET /api/keys)"),
                    ));
                }
                Some(ids)
            }
        };
        let spec = ReportSpec {
            from,
            to,
            bucket,
            group_by: query.group_by,
            filter: Filter {
                keys,
                combo: query.combo.clone(),
                provider: query.provider.clone(),
                model: query.model.clone(),
            },
        };
        let (most, unit) = match bucket {
            Bucket::Day => (MAX_DAYS, "daily buckets"),
            Bucket::Hour => {
                (MAX_HOURS, "hourly buckets (31 days): narrow the range or use bucket=day")
            }
        };
        if spec.buckets() > most {
            return Err(Problem::new(
                "from",
                format!("the range holds {} buckets; at most {most} {unit}", spec.buckets()),
            ));
        }
        Ok(spec)
    }
}

/// The CSV export of `report`.
fn csv(report: &UsageReport) -> String {
    let mut out = String::from(
        "bucket_start,group,label,requests,fallbacks,errors,uncached_input,cache_read,\
         cache_write,output,reasoning,estimated,cost_usd,cost_unknown,ttft_samples,ttft_p50_ms,\
         ttft_p95_ms\n",
    );
    for (i, start) in report.buckets.iter().enumerate() {
        let start = rfc3339(*start);
        if report.group_by.is_none() {
            row(&mut out, &start, "", "", &report.totals[i]);
            continue;
        }
        for series in &report.series {
            let point = &series.points[i];
            if point.requests > 0 {
                row(&mut out, &start, series.key.as_deref().unwrap_or(""), &series.label, point);
            }
        }
    }
    out
}

fn row(out: &mut String, start: &str, group: &str, label: &str, p: &UsagePoint) {
    let optional = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let _ = writeln!(
        out,
        "{start},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        field(group),
        field(label),
        p.requests,
        p.fallbacks,
        p.errors,
        p.tokens.uncached_input,
        p.tokens.cache_read,
        p.tokens.cache_write,
        p.tokens.output,
        p.tokens.reasoning,
        p.estimated,
        p.cost,
        p.cost_unknown,
        p.ttft_samples,
        optional(p.ttft_p50_ms),
        optional(p.ttft_p95_ms),
    );
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_bad_parameter_is_named_with_what_it_accepts() {
        let refused = |q: &[(&str, &str)]| UsageQuery::from_pairs(&pairs(q)).unwrap_err();
        let bucket = refused(&[("bucket", "week")]);
        assert_eq!(bucket.field, "bucket");
        assert!(bucket.problem.contains("`day`") && bucket.problem.contains("`hour`"), "{bucket}");
        assert_eq!(refused(&[("group_by", "tool")]).field, "group_by");
        let unknown = refused(&[("since", "2026-01-01")]);
        assert_eq!(unknown.field, "since");
        assert!(unknown.problem.contains("from, to, bucket"), "{unknown}");
        let query = UsageQuery::from_pairs(&pairs(&[("bucket", "hour"), ("model", "")])).unwrap();
        assert_eq!((query.bucket, query.model), (Some(Bucket::Hour), None));
    }

    #[test]
    fn a_field_with_a_comma_or_a_quote_is_quoted() {
        assert_eq!(field("oa/gpt-4o"), "oa/gpt-4o");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
