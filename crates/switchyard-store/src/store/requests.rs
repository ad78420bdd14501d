//! The request log: what each client request asked for, what served it and the routing trace.

use switchyard_core::UnixMillis;

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
                "INSERT INTO requests (at, dialect, model, served_by, status, attempts, duration_ms, trace, outcome, first_byte_ms)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        type Row = (
            i64,
            String,
            String,
            Option<String>,
            i64,
            i64,
            i64,
            String,
            Option<String>,
            Option<i64>,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT at, dialect, model, served_by, status, attempts, duration_ms, trace, outcome, first_byte_ms
             FROM requests ORDER BY id DESC LIMIT ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(rows
            .into_iter()
            .map(
                |(
                    at,
                    dialect,
                    model,
                    served_by,
                    status,
                    attempts,
                    duration_ms,
                    trace,
                    outcome,
                    first_byte,
                )| {
                    RequestRecord {
                        at: UnixMillis(u64::try_from(at).unwrap_or(0)),
                        dialect,
                        model,
                        served_by,
                        status: u16::try_from(status).unwrap_or(0),
                        attempts: u32::try_from(attempts).unwrap_or(0),
                        duration_ms: u64::try_from(duration_ms).unwrap_or(0),
                        trace,
                        outcome,
                        first_byte_ms: first_byte.and_then(|ms| u64::try_from(ms).ok()),
                    }
                },
            )
            .collect())
    }
}
