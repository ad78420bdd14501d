//! The request log: what each client request asked for, what served it and the routing trace.

use sqlx::Row as _;
use sqlx::sqlite::SqliteRow;
use switchyard_core::UnixMillis;
use switchyard_core::usage::{Nanodollars, Usage};

use super::Store;
use super::columns::millis;
use crate::StoreError;

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
}

impl Store {
    /// Appends `records` in one transaction and keeps only the newest `keep` rows.
    pub async fn append_requests(
        &self,
        records: &[RequestRecord],
        keep: u32,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::database)?;
        for r in records {
            sqlx::query(
                "INSERT INTO requests (at, dialect, model, served_by, status, attempts, duration_ms, trace, outcome, first_byte_ms,
                    uncached_input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
                    reasoning_tokens, usage_estimated, cost_nanodollars)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(millis(r.at))
            .bind(&r.dialect)
            .bind(&r.model)
            .bind(&r.served_by)
            .bind(i64::from(r.status))
            .bind(i64::from(r.attempts))
            .bind(i64::try_from(r.duration_ms).unwrap_or(i64::MAX))
            .bind(&r.trace)
            .bind(&r.outcome)
            .bind(r.first_byte_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
            .bind(r.usage.map(|u| count(u.uncached_input)))
            .bind(r.usage.map(|u| count(u.cache_read)))
            .bind(r.usage.map(|u| count(u.cache_write)))
            .bind(r.usage.map(|u| count(u.output)))
            .bind(r.usage.map(|u| count(u.reasoning)))
            .bind(r.usage.map(|u| u.estimated))
            .bind(r.cost.map(|c| count(c.0)))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::database)?;
        }
        sqlx::query("DELETE FROM requests WHERE id <= (SELECT MAX(id) FROM requests) - ?")
            .bind(i64::from(keep))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::database)?;
        tx.commit().await.map_err(StoreError::database)
    }

    /// The newest `limit` requests, newest first.
    pub async fn recent_requests(&self, limit: u32) -> Result<Vec<RequestRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT at, dialect, model, served_by, status, attempts, duration_ms, trace, outcome, first_byte_ms,
                    uncached_input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
                    reasoning_tokens, usage_estimated, cost_nanodollars
             FROM requests ORDER BY id DESC LIMIT ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        rows.iter()
            .map(read_request)
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::database)
    }
}

/// A count as SQLite stores it; past `i64::MAX` it saturates (no request gets there).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
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
    })
}
