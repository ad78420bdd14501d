//! The request log: what each client request asked for, what served it and the routing trace;
//! and the usage aggregates that sum it, written in the same transaction.

use sqlx::Row as _;
use sqlx::sqlite::SqliteRow;
use switchyard_core::UnixMillis;
use switchyard_core::usage::ledger::{Labels, Ledger, Totals, UsageEntry};
use switchyard_core::usage::sketch::LatencySketch;
use switchyard_core::usage::{Nanodollars, Usage};

use super::Store;
use super::columns::millis;
use crate::StoreError;

/// The row counts the request log's `INSERT` is written for, largest first: a batch goes in
/// the largest that fit, so each statement's text is one of a few and stays prepared. One
/// text per batch size made SQLite parse 23 placeholders a row anew for every batch, more
/// work than the rest of the write.
const INSERT_ROWS: [usize; 4] = [64, 16, 4, 1];

/// The `INSERT` of each of [`INSERT_ROWS`]'s row counts, in the same order.
static INSERTS: std::sync::LazyLock<[String; INSERT_ROWS.len()]> = std::sync::LazyLock::new(|| {
    let row = format!("({})", ["?"; 23].join(", "));
    INSERT_ROWS.map(|rows| {
        format!(
            "INSERT INTO requests (at, dialect, model, served_by, status, attempts,
                    duration_ms, trace, outcome, first_byte_ms, uncached_input_tokens,
                    cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
                    usage_estimated, cost_nanodollars, local_key, combo, fallback, session,
                    credential, session_home) VALUES {}",
            vec![row.as_str(); rows].join(", ")
        )
    })
});

/// The usage table's columns, in the order every statement names them (a macro: sqlx takes
/// only literal SQL).
macro_rules! usage_columns {
    () => {
        "hour, local_key, combo, provider, model, requests, fallbacks, errors,
         uncached_input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
         reasoning_tokens, estimated, cost_nanodollars, cost_unknown, ttft"
    };
}

/// The columns a [`RequestRecord`] is read from, with `$trace` for the trace (a macro: sqlx
/// takes only literal SQL).
macro_rules! request_columns {
    ($trace:literal) => {
        concat!(
            "at, dialect, model, served_by, status, attempts, duration_ms, ",
            $trace,
            ", outcome, first_byte_ms, uncached_input_tokens, cache_read_tokens,
             cache_write_tokens, output_tokens, reasoning_tokens, usage_estimated,
             cost_nanodollars, local_key, combo, fallback, session, credential, session_home"
        )
    };
}

/// One logged request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub at: UnixMillis,
    /// `openai` or `anthropic`.
    pub dialect: String,
    /// The model the client asked for.
    pub model: String,
    /// `provider/model` that answered, if any did.
    pub served_by: Option<String>,
    pub status: u16,
    pub attempts: u32,
    /// Until the answer was over: a stream's last byte, not its first.
    pub duration_ms: u64,
    /// The routing trace as JSON.
    pub trace: String,
    /// How a streamed answer ended: `complete`, `broken` or `client_gone`; `None` when the
    /// answer was not streamed.
    pub outcome: Option<String>,
    /// When the response started (a stream's first real event reached the client).
    pub first_byte_ms: Option<u64>,
    /// Tokens summed over the attempts that reported usage (a hedge's loser and a
    /// continuation's both halves included); `None` when none did.
    pub usage: Option<Usage>,
    /// What those tokens cost, each attempt at its own model's prices; `None` when some
    /// attempt's prices are not known.
    pub cost: Option<Nanodollars>,
    /// The id of the local key the client presented; `None` for a request no key made (the
    /// UI's "try it").
    pub local_key: Option<String>,
    /// The combo the requested model resolved to (`provider/model` for a target asked for by
    /// name); `None` when it resolved to nothing.
    pub combo: Option<String>,
    /// Served by other than its first attempt: a fallback, or a hedge that won.
    pub fallback: bool,
    /// The agent session it belonged to (32 hex digits), when sessions are on.
    pub session: Option<String>,
    /// The credential that served, when one did.
    pub credential: Option<String>,
    /// The target (`provider/model`) the session moved off while it was benched, to return to.
    pub session_home: Option<String>,
}

/// Which logged requests to list: each field narrows it, `None` (or the default) lets every
/// request through. [`Self::matches`] and [`Store::requests_page`] agree on it: the first
/// filters the requests in memory, the second those in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFilter {
    /// The model the client asked for.
    pub model: Option<String>,
    /// The provider that served it.
    pub provider: Option<String>,
    /// Succeeded (`true`) or failed ([`RequestRecord::is_error`]).
    pub ok: Option<bool>,
    /// Took more than one attempt (`true`) or one.
    pub fallback: Option<bool>,
    /// Its session starts with these hex digits (never an empty prefix).
    pub session: Option<String>,
}

impl RequestFilter {
    pub fn matches(&self, r: &RequestRecord) -> bool {
        self.model.as_ref().is_none_or(|m| *m == r.model)
            && self.provider.as_ref().is_none_or(|p| {
                r.served_by
                    .as_deref()
                    .and_then(|s| s.split_once('/'))
                    .is_some_and(|(sp, _)| sp == p)
            })
            && self.ok.is_none_or(|ok| ok != r.is_error())
            && self.fallback.is_none_or(|f| (r.attempts > 1) == f)
            && self.session.as_ref().is_none_or(|wanted| {
                r.session
                    .as_deref()
                    .is_some_and(|s| !wanted.is_empty() && s.starts_with(wanted.as_str()))
            })
    }
}

impl RequestRecord {
    /// Answered with an error status, or a stream that broke after it started.
    pub fn is_error(&self) -> bool {
        !(200..300).contains(&self.status) || self.outcome.as_deref() == Some("broken")
    }

    /// What this request adds to the usage aggregates: counted under its key, combo and the
    /// target that served it, with a time to first token when it was a stream that was served.
    pub fn usage_entry(&self) -> UsageEntry {
        let target = self.served_by.as_deref().and_then(|s| s.split_once('/'));
        UsageEntry {
            at: self.at,
            labels: Labels {
                key: self.local_key.clone(),
                combo: self.combo.clone(),
                provider: target.map(|(p, _)| p.to_owned()),
                model: target.map(|(_, m)| m.to_owned()),
            },
            fallback: self.fallback,
            error: self.is_error(),
            usage: self.usage,
            cost: self.cost,
            ttft_ms: self.first_byte_ms.filter(|_| self.outcome.is_some() && target.is_some()),
        }
    }
}

/// Where a session was pinned, as its newest served request says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPin {
    /// 32 hex digits.
    pub session: String,
    /// `provider/model`.
    pub served_by: String,
    pub credential: String,
    /// `provider/model` it returns to once that heals.
    pub home: Option<String>,
    pub at: UnixMillis,
}

/// What a batch of request-log entries adds to the usage aggregates.
#[derive(Debug)]
pub struct UsageBatch<'a> {
    /// The batch's entries summed (only those made while usage was tracked).
    pub sums: &'a Ledger,
    /// Hours before this one are past retention and deleted.
    pub first_kept_hour: Option<u64>,
}

impl Store {
    /// Appends `records` (owned, or shared with a ring as `Arc`s) and adds `usage` to the
    /// aggregates, in one transaction, and keeps only the newest `keep` rows of the log (the
    /// aggregates keep their own period).
    pub async fn append_requests<R: std::borrow::Borrow<RequestRecord>>(
        &self,
        records: &[R],
        keep: u32,
        usage: Option<UsageBatch<'_>>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::database)?;
        // A few statements per batch, not one per record: each costs a round trip to the
        // database thread, and each woke the proxy's thread that serves requests.
        let mut rest = records;
        while !rest.is_empty() {
            let size =
                INSERT_ROWS.iter().position(|&rows| rows <= rest.len()).expect("one row fits");
            let (chunk, tail) = rest.split_at(INSERT_ROWS[size]);
            rest = tail;
            let mut insert = sqlx::query(INSERTS[size].as_str());
            for r in chunk.iter().map(std::borrow::Borrow::borrow) {
                insert = insert
                    .bind(millis(r.at))
                    .bind(&r.dialect)
                    .bind(&r.model)
                    .bind(&r.served_by)
                    .bind(i64::from(r.status))
                    .bind(i64::from(r.attempts))
                    .bind(count(r.duration_ms))
                    .bind(&r.trace)
                    .bind(&r.outcome)
                    .bind(r.first_byte_ms.map(count))
                    .bind(r.usage.map(|u| count(u.uncached_input)))
                    .bind(r.usage.map(|u| count(u.cache_read)))
                    .bind(r.usage.map(|u| count(u.cache_write)))
                    .bind(r.usage.map(|u| count(u.output)))
                    .bind(r.usage.map(|u| count(u.reasoning)))
                    .bind(r.usage.map(|u| u.estimated))
                    .bind(r.cost.map(|c| count(c.0)))
                    .bind(&r.local_key)
                    .bind(&r.combo)
                    .bind(r.fallback)
                    .bind(&r.session)
                    .bind(&r.credential)
                    .bind(&r.session_home);
            }
            insert.execute(&mut *tx).await.map_err(StoreError::database)?;
        }
        sqlx::query("DELETE FROM requests WHERE id <= (SELECT MAX(id) FROM requests) - ?")
            .bind(i64::from(keep))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::database)?;
        if let Some(usage) = usage {
            add_usage(&mut tx, usage).await.map_err(StoreError::database)?;
        }
        tx.commit().await.map_err(StoreError::database)
    }

    /// Each session's newest served request since `since`, oldest first: where the session
    /// was pinned, to restore at start.
    pub async fn session_pins(&self, since: UnixMillis) -> Result<Vec<SessionPin>, StoreError> {
        let rows: Vec<(String, String, String, Option<String>, i64)> = sqlx::query_as(
            "SELECT session, served_by, credential, session_home, at FROM requests
             WHERE id IN (SELECT MAX(id) FROM requests
                          WHERE session IS NOT NULL AND served_by IS NOT NULL
                            AND credential IS NOT NULL AND at >= ?
                          GROUP BY session)
             ORDER BY id",
        )
        .bind(millis(since))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        let at = |n: i64| UnixMillis(u64::try_from(n).unwrap_or(0));
        Ok(rows
            .into_iter()
            .map(|(session, served_by, credential, home, t)| SessionPin {
                session,
                served_by,
                credential,
                home,
                at: at(t),
            })
            .collect())
    }

    /// The usage aggregates from `first_hour` on.
    pub async fn usage(&self, first_hour: u64) -> Result<Ledger, StoreError> {
        let rows = sqlx::query(concat!("SELECT ", usage_columns!(), " FROM usage WHERE hour >= ?"))
            .bind(count(first_hour))
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
        let mut ledger = Ledger::default();
        for row in &rows {
            let (hour, labels, totals) = read_usage(row).map_err(StoreError::database)?;
            ledger.add_totals(hour, &labels, &totals);
        }
        Ok(ledger)
    }

    /// The newest `limit` requests, newest first.
    pub async fn recent_requests(&self, limit: u32) -> Result<Vec<RequestRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            request_columns!("trace"),
            " FROM requests ORDER BY id DESC LIMIT ?"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        read_requests(&rows)
    }

    /// The requests that `filter` lets through, newest first (as they were logged), after
    /// skipping `skip` of them: the Requests page past what memory holds.
    pub async fn requests_page(
        &self,
        filter: &RequestFilter,
        skip: u32,
        limit: u32,
    ) -> Result<Vec<RequestRecord>, StoreError> {
        // The same conditions as `RequestFilter::matches`, each off when its value is NULL.
        let rows = sqlx::query(concat!(
            "SELECT ",
            request_columns!("trace"),
            " FROM requests
              WHERE (?1 IS NULL OR model = ?1)
                AND (?2 IS NULL OR substr(served_by, 1, length(?2) + 1) = ?2 || '/')
                AND (?3 IS NULL OR ?3 = (status BETWEEN 200 AND 299
                                         AND coalesce(outcome, '') != 'broken'))
                AND (?4 IS NULL OR ?4 = (attempts > 1))
                AND (?5 IS NULL OR (?5 != '' AND substr(session, 1, length(?5)) = ?5))
              ORDER BY id DESC LIMIT ?6 OFFSET ?7"
        ))
        .bind(filter.model.as_deref())
        .bind(filter.provider.as_deref())
        .bind(filter.ok)
        .bind(filter.fallback)
        .bind(filter.session.as_deref())
        .bind(i64::from(limit))
        .bind(i64::from(skip))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        read_requests(&rows)
    }

    /// The requests that arrived in `[from, to)`, oldest first, without their traces (an empty
    /// string): what usage by session sums. The log keeps its newest rows only, so this is
    /// bounded by its size.
    pub async fn requests_between(
        &self,
        from: UnixMillis,
        to: UnixMillis,
    ) -> Result<Vec<RequestRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            request_columns!("'' AS trace"),
            " FROM requests WHERE at >= ? AND at < ? ORDER BY id"
        ))
        .bind(millis(from))
        .bind(millis(to))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        read_requests(&rows)
    }
}

/// A count as SQLite stores it; past `i64::MAX` it saturates (no request gets there).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn read_requests(rows: &[SqliteRow]) -> Result<Vec<RequestRecord>, StoreError> {
    rows.iter().map(read_request).collect::<Result<_, sqlx::Error>>().map_err(StoreError::database)
}

fn read_request(row: &SqliteRow) -> Result<RequestRecord, sqlx::Error> {
    let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
    let usage = match row.try_get::<Option<i64>, _>("uncached_input_tokens")? {
        None => None,
        Some(uncached) => {
            let bucket = |name: &str| -> Result<u64, sqlx::Error> {
                Ok(row.try_get::<Option<i64>, _>(name)?.map_or(0, unsigned))
            };
            Some(Usage {
                uncached_input: unsigned(uncached),
                cache_read: bucket("cache_read_tokens")?,
                cache_write: bucket("cache_write_tokens")?,
                output: bucket("output_tokens")?,
                reasoning: bucket("reasoning_tokens")?,
                estimated: row.try_get::<Option<bool>, _>("usage_estimated")?.unwrap_or(false),
            })
        }
    };
    Ok(RequestRecord {
        at: UnixMillis(unsigned(row.try_get("at")?)),
        dialect: row.try_get("dialect")?,
        model: row.try_get("model")?,
        served_by: row.try_get("served_by")?,
        status: u16::try_from(row.try_get::<i64, _>("status")?).unwrap_or(0),
        attempts: u32::try_from(row.try_get::<i64, _>("attempts")?).unwrap_or(0),
        duration_ms: unsigned(row.try_get("duration_ms")?),
        trace: row.try_get("trace")?,
        outcome: row.try_get("outcome")?,
        first_byte_ms: row.try_get::<Option<i64>, _>("first_byte_ms")?.map(unsigned),
        usage,
        cost: row.try_get::<Option<i64>, _>("cost_nanodollars")?.map(|c| Nanodollars(unsigned(c))),
        local_key: row.try_get("local_key")?,
        combo: row.try_get("combo")?,
        fallback: row.try_get("fallback")?,
        session: row.try_get("session")?,
        credential: row.try_get("credential")?,
        session_home: row.try_get("session_home")?,
    })
}

/// Adds a batch's sums to their rows (each read, merged and written back: the sketch merges in
/// Rust), and deletes the hours past retention.
async fn add_usage(
    tx: &mut sqlx::SqliteConnection,
    usage: UsageBatch<'_>,
) -> Result<(), sqlx::Error> {
    for row in usage.sums.rows() {
        let labels = [&row.labels.key, &row.labels.combo, &row.labels.provider, &row.labels.model]
            .map(|l| l.as_deref().unwrap_or(""));
        let stored = sqlx::query(concat!(
            "SELECT ",
            usage_columns!(),
            " FROM usage WHERE hour = ? AND local_key = ? AND combo = ? AND provider = ? AND model = ?"
        ))
        .bind(count(row.hour))
        .bind(labels[0])
        .bind(labels[1])
        .bind(labels[2])
        .bind(labels[3])
        .fetch_optional(&mut *tx)
        .await?;
        let mut totals = match &stored {
            Some(stored) => read_usage(stored)?.2,
            None => Totals::default(),
        };
        totals.merge(row.totals);
        sqlx::query(concat!(
            "INSERT OR REPLACE INTO usage (",
            usage_columns!(),
            ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .bind(count(row.hour))
        .bind(labels[0])
        .bind(labels[1])
        .bind(labels[2])
        .bind(labels[3])
        .bind(count(totals.requests))
        .bind(count(totals.fallbacks))
        .bind(count(totals.errors))
        .bind(count(totals.uncached_input))
        .bind(count(totals.cache_read))
        .bind(count(totals.cache_write))
        .bind(count(totals.output))
        .bind(count(totals.reasoning))
        .bind(count(totals.estimated))
        .bind(count(totals.cost.0))
        .bind(count(totals.cost_unknown))
        .bind(totals.ttft.to_string())
        .execute(&mut *tx)
        .await?;
    }
    if let Some(first) = usage.first_kept_hour {
        sqlx::query("DELETE FROM usage WHERE hour < ?")
            .bind(count(first))
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

fn read_usage(row: &SqliteRow) -> Result<(u64, Labels, Totals), sqlx::Error> {
    let unsigned = |name: &str| -> Result<u64, sqlx::Error> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    let label = |name: &str| -> Result<Option<String>, sqlx::Error> {
        Ok(Some(row.try_get::<String, _>(name)?).filter(|l| !l.is_empty()))
    };
    let labels = Labels {
        key: label("local_key")?,
        combo: label("combo")?,
        provider: label("provider")?,
        model: label("model")?,
    };
    let ttft: String = row.try_get("ttft")?;
    let ttft = LatencySketch::parse(&ttft).unwrap_or_else(|| {
        // The counts are still good; only the latency spread of this row is lost.
        tracing::warn!(sketch = %ttft, "a usage row's time-to-first-token sketch is damaged; reading it as empty");
        LatencySketch::default()
    });
    let totals = Totals {
        requests: unsigned("requests")?,
        fallbacks: unsigned("fallbacks")?,
        errors: unsigned("errors")?,
        uncached_input: unsigned("uncached_input_tokens")?,
        cache_read: unsigned("cache_read_tokens")?,
        cache_write: unsigned("cache_write_tokens")?,
        output: unsigned("output_tokens")?,
        reasoning: unsigned("reasoning_tokens")?,
        estimated: unsigned("estimated")?,
        cost: Nanodollars(unsigned("cost_nanodollars")?),
        cost_unknown: unsigned("cost_unknown")?,
        ttft,
    };
    Ok((unsigned("hour")?, labels, totals))
}
