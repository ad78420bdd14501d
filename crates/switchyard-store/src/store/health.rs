//! The three health tables: breakers, credential cooldowns, model lockouts.
//!
//! Events carry an entry's whole new state (or `None`: forget it), so writing is an upsert or a
//! delete per key and a batch can be coalesced to its last event per key. Every batch is one
//! transaction: after a crash the file holds a state the registry actually had.

use std::collections::HashSet;

use sqlx::{Connection as _, SqliteConnection};
use switchyard_core::resilience::event::HealthRecords;
use switchyard_core::resilience::{BreakerRecord, CredentialRecord, HealthEvent, LockoutRecord};
use switchyard_core::{CandidateKey, CredentialKey, ProviderId};

use super::Store;
use super::columns::{breaker_record, cooldown_record, instant, lock_reason, millis, name, number};
use crate::StoreError;

/// `BEGIN IMMEDIATE` takes the write lock up front, so a busy file makes the transaction wait
/// (busy timeout) instead of failing halfway on a lock upgrade.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

impl Store {
    /// Every persisted entry, read in one transaction so the three tables agree.
    ///
    /// A row that cannot be read (a value this version does not know, a hand edit) is skipped
    /// with a warning: losing one entry's state is a blip, losing the whole restore over it
    /// would un-bench every provider, key and model at once.
    pub async fn load_health(&self) -> Result<HealthRecords, StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::database)?;
        // Each table comes back as one JSON array built inside SQLite: one row across the
        // connection's thread instead of one per entry, which is most of a cold start with
        // thousands of entries.
        let breakers = rows(&mut tx, "breakers", BREAKERS).await?;
        let credentials = rows(&mut tx, "credential_cooldowns", CREDENTIALS).await?;
        let lockouts = rows(&mut tx, "model_lockouts", LOCKOUTS).await?;
        Ok(HealthRecords {
            breakers: readable("breakers", breakers, BreakerRow::decode),
            credentials: readable("credential_cooldowns", credentials, CredentialRow::decode),
            lockouts: readable("model_lockouts", lockouts, LockoutRow::decode),
        })
    }

    /// Writes a batch of events in one transaction, keeping only the last event per entry.
    /// Events that are no layer's state (a budget crossing) have nothing to keep.
    pub async fn apply(&self, events: &[HealthEvent]) -> Result<(), StoreError> {
        let mut seen = HashSet::new();
        let latest: Vec<&HealthEvent> = events
            .iter()
            .rev()
            .filter(|e| Entry::of(e).is_some_and(|entry| seen.insert(entry)))
            .collect();
        if latest.is_empty() {
            return Ok(());
        }
        let mut conn = self.writable().await?;
        let written = apply_on(&mut conn, &latest).await;
        settle(conn, written).await
    }

    /// Makes the file hold exactly `records`, in one transaction: the resync after a consumer
    /// fell behind the event stream.
    pub async fn replace_all(&self, records: &HealthRecords) -> Result<(), StoreError> {
        let mut conn = self.writable().await?;
        let written = replace_on(&mut conn, records).await;
        settle(conn, written).await
    }

    /// A pooled connection that is not stuck inside a transaction. Any writer of this file
    /// whose transaction failed on a full disk can leave one behind (see [`settle`]); such a
    /// connection is closed and another taken, so a retry does not fail for a past error.
    async fn writable(&self) -> Result<sqlx::pool::PoolConnection<sqlx::Sqlite>, StoreError> {
        for _ in 0..8 {
            let conn = self.pool.acquire().await.map_err(StoreError::database)?;
            if !conn.is_in_transaction() {
                return Ok(conn);
            }
            if let Err(error) = conn.close().await {
                tracing::debug!(%error, "closing a connection left inside a transaction");
            }
        }
        self.pool.acquire().await.map_err(StoreError::database)
    }
}

async fn apply_on(conn: &mut SqliteConnection, latest: &[&HealthEvent]) -> Result<(), sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_WRITE).await?;
    for event in latest {
        write(&mut tx, event).await?;
    }
    tx.commit().await
}

async fn replace_on(
    conn: &mut SqliteConnection,
    records: &HealthRecords,
) -> Result<(), sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_WRITE).await?;
    for clear in
        ["DELETE FROM breakers", "DELETE FROM credential_cooldowns", "DELETE FROM model_lockouts"]
    {
        sqlx::query(clear).execute(&mut *tx).await?;
    }
    // Each table in one statement over a JSON array of rows: a statement per row cost a round
    // trip to the database thread each, 10,000 rows about 100 ms that every other writer of
    // the file (the first start's bindings) waited for at start.
    let breakers: Vec<_> = records
        .breakers
        .iter()
        .map(|(provider, r)| {
            (
                provider.as_str(),
                name(r.state),
                r.failures,
                r.reopens,
                r.open_until.map(millis),
                r.last_fault.map(name),
                millis(r.changed_at),
            )
        })
        .collect();
    insert_rows(
        &mut tx,
        "INSERT INTO breakers
            (provider, state, failures, reopens, open_until, last_fault, changed_at)
         SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5,
            value ->> 6
         FROM json_each(?)",
        &breakers,
    )
    .await?;
    let credentials: Vec<_> = records
        .credentials
        .iter()
        .map(|(key, r)| {
            (
                key.provider.as_str(),
                key.credential.as_str(),
                name(r.status),
                r.cooling_until.map(millis),
                r.backoff_level,
                r.last_error.map(name),
                millis(r.changed_at),
            )
        })
        .collect();
    insert_rows(
        &mut tx,
        "INSERT INTO credential_cooldowns
            (provider, credential, status, cooling_until, backoff_level, last_error, changed_at)
         SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5,
            value ->> 6
         FROM json_each(?)",
        &credentials,
    )
    .await?;
    let lockouts: Vec<_> = records
        .lockouts
        .iter()
        .map(|(key, r)| {
            (
                key.provider.as_str(),
                key.credential.as_str(),
                key.model.as_str(),
                r.locked_until.map(millis),
                r.consecutive_failures,
                r.reason.map(|reason| name(reason.kind)),
                r.reason.and_then(|reason| reason.status),
                millis(r.changed_at),
            )
        })
        .collect();
    insert_rows(
        &mut tx,
        "INSERT INTO model_lockouts
            (provider, credential, model, locked_until, consecutive_failures, reason_kind,
             reason_status, changed_at)
         SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5,
            value ->> 6, value ->> 7
         FROM json_each(?)",
        &lockouts,
    )
    .await?;
    tx.commit().await
}

/// `insert` (an `INSERT ... SELECT ... FROM json_each(?)`) of every row of `rows`, each a tuple
/// in the columns' order, bound as one JSON array.
async fn insert_rows<Row: serde::Serialize>(
    conn: &mut SqliteConnection,
    insert: &'static str,
    rows: &[Row],
) -> Result<(), sqlx::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let json = serde_json::to_string(rows).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query(insert).bind(json).execute(conn).await.map(drop)
}

/// A connection whose write transaction failed is closed instead of going back to the pool.
/// After a full disk SQLite has already rolled the transaction back itself, so the `ROLLBACK`
/// sqlx queues for the dropped transaction fails and the connection would stay marked as inside
/// a transaction: every retry on it would fail with "begin at non-zero transaction depth",
/// whatever the disk does. A fresh connection has no such past.
async fn settle(
    conn: sqlx::pool::PoolConnection<sqlx::Sqlite>,
    written: Result<(), sqlx::Error>,
) -> Result<(), StoreError> {
    if written.is_err()
        && let Err(error) = conn.close().await
    {
        tracing::debug!(%error, "closing the connection of a failed health write");
    }
    written.map_err(StoreError::database)
}

/// Which entry an event is about: the unit of coalescing.
#[derive(PartialEq, Eq, Hash)]
enum Entry<'a> {
    Breaker(&'a ProviderId),
    Credential(&'a CredentialKey),
    Lockout(&'a CandidateKey),
}

impl<'a> Entry<'a> {
    fn of(event: &'a HealthEvent) -> Option<Self> {
        match event {
            HealthEvent::Breaker { provider, .. } => Some(Self::Breaker(provider)),
            HealthEvent::Credential { key, .. } => Some(Self::Credential(key)),
            HealthEvent::Lockout { key, .. } => Some(Self::Lockout(key)),
            HealthEvent::Budget { .. } => None,
        }
    }
}

async fn write(conn: &mut SqliteConnection, event: &HealthEvent) -> Result<(), sqlx::Error> {
    match event {
        HealthEvent::Breaker { provider, record: Some(record), .. } => {
            put_breaker(conn, provider, record).await
        }
        HealthEvent::Breaker { provider, record: None, .. } => {
            sqlx::query("DELETE FROM breakers WHERE provider = ?")
                .bind(provider.as_str())
                .execute(conn)
                .await
                .map(drop)
        }
        HealthEvent::Credential { key, record: Some(record), .. } => {
            put_credential(conn, key, record).await
        }
        HealthEvent::Credential { key, record: None, .. } => {
            sqlx::query("DELETE FROM credential_cooldowns WHERE provider = ? AND credential = ?")
                .bind(key.provider.as_str())
                .bind(key.credential.as_str())
                .execute(conn)
                .await
                .map(drop)
        }
        HealthEvent::Lockout { key, record: Some(record), .. } => {
            put_lockout(conn, key, record).await
        }
        HealthEvent::Lockout { key, record: None, .. } => sqlx::query(
            "DELETE FROM model_lockouts WHERE provider = ? AND credential = ? AND model = ?",
        )
        .bind(key.provider.as_str())
        .bind(key.credential.as_str())
        .bind(key.model.as_str())
        .execute(conn)
        .await
        .map(drop),
        // Filtered out by `apply`: nothing of it is kept.
        HealthEvent::Budget { .. } => Ok(()),
    }
}

async fn put_breaker(
    conn: &mut SqliteConnection,
    provider: &ProviderId,
    r: &BreakerRecord,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT OR REPLACE INTO breakers
            (provider, state, failures, reopens, open_until, last_fault, changed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(provider.as_str())
    .bind(name(r.state))
    .bind(i64::from(r.failures))
    .bind(i64::from(r.reopens))
    .bind(r.open_until.map(millis))
    .bind(r.last_fault.map(name))
    .bind(millis(r.changed_at))
    .execute(conn)
    .await
    .map(drop)
}

async fn put_credential(
    conn: &mut SqliteConnection,
    key: &CredentialKey,
    r: &CredentialRecord,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT OR REPLACE INTO credential_cooldowns
            (provider, credential, status, cooling_until, backoff_level, last_error, changed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(key.provider.as_str())
    .bind(key.credential.as_str())
    .bind(name(r.status))
    .bind(r.cooling_until.map(millis))
    .bind(i64::from(r.backoff_level))
    .bind(r.last_error.map(name))
    .bind(millis(r.changed_at))
    .execute(conn)
    .await
    .map(drop)
}

async fn put_lockout(
    conn: &mut SqliteConnection,
    key: &CandidateKey,
    r: &LockoutRecord,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT OR REPLACE INTO model_lockouts
            (provider, credential, model, locked_until, consecutive_failures, reason_kind,
             reason_status, changed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(key.provider.as_str())
    .bind(key.credential.as_str())
    .bind(key.model.as_str())
    .bind(r.locked_until.map(millis))
    .bind(i64::from(r.consecutive_failures))
    .bind(r.reason.map(|reason| name(reason.kind)))
    .bind(r.reason.and_then(|reason| reason.status).map(i64::from))
    .bind(millis(r.changed_at))
    .execute(conn)
    .await
    .map(drop)
}

#[derive(serde::Deserialize)]
struct BreakerRow {
    provider: String,
    state: String,
    failures: i64,
    reopens: i64,
    open_until: Option<i64>,
    last_fault: Option<String>,
    changed_at: i64,
}

/// Each table as one JSON array of rows, the columns in the order of the row types' fields.
const BREAKERS: &str = "SELECT json_group_array(json_array(provider, state, failures, reopens, \
     open_until, last_fault, changed_at)) FROM (SELECT * FROM breakers ORDER BY provider)";
const CREDENTIALS: &str = "SELECT json_group_array(json_array(provider, credential, status, \
     cooling_until, backoff_level, last_error, changed_at)) \
     FROM (SELECT * FROM credential_cooldowns ORDER BY provider, credential)";
const LOCKOUTS: &str = "SELECT json_group_array(json_array(provider, credential, model, \
     locked_until, consecutive_failures, reason_kind, reason_status, changed_at)) \
     FROM (SELECT * FROM model_lockouts ORDER BY provider, credential, model)";

/// The rows one of the queries above returns, each still as JSON so that one bad row can be
/// told from a bad table.
async fn rows(
    tx: &mut SqliteConnection,
    table: &str,
    sql: &'static str,
) -> Result<Vec<serde_json::Value>, StoreError> {
    let json: String =
        sqlx::query_scalar(sql).fetch_one(&mut *tx).await.map_err(StoreError::database)?;
    serde_json::from_str(&json).map_err(|e| StoreError::Corrupt(format!("{table}: {e}")))
}

/// Every row of `table` that reads as a `Row` and decodes, in order; the others are skipped
/// with a warning naming the table and the reason.
fn readable<Row: serde::de::DeserializeOwned, T>(
    table: &str,
    rows: Vec<serde_json::Value>,
    decode: impl Fn(Row) -> Result<T, StoreError>,
) -> Vec<T> {
    rows.into_iter()
        .filter_map(|row| {
            let decoded = serde_json::from_value::<Row>(row)
                .map_err(|e| StoreError::Corrupt(format!("{table}: {e}")))
                .and_then(&decode);
            decoded
                .inspect_err(|error| {
                    tracing::warn!(
                        table,
                        %error,
                        "skipped a health row that cannot be read; that entry starts fresh"
                    );
                })
                .ok()
        })
        .collect()
}

impl BreakerRow {
    fn decode(self) -> Result<(ProviderId, BreakerRecord), StoreError> {
        let record = breaker_record(
            "breakers",
            &self.state,
            self.failures,
            self.reopens,
            self.open_until,
            self.last_fault.as_deref(),
            self.changed_at,
        )?;
        Ok((self.provider.into(), record))
    }
}

#[derive(serde::Deserialize)]
struct CredentialRow {
    provider: String,
    credential: String,
    status: String,
    cooling_until: Option<i64>,
    backoff_level: i64,
    last_error: Option<String>,
    changed_at: i64,
}

impl CredentialRow {
    fn decode(self) -> Result<(CredentialKey, CredentialRecord), StoreError> {
        let record = cooldown_record(
            "credential_cooldowns",
            &self.status,
            self.cooling_until,
            self.backoff_level,
            self.last_error.as_deref(),
            self.changed_at,
        )?;
        let key =
            CredentialKey { provider: self.provider.into(), credential: self.credential.into() };
        Ok((key, record))
    }
}

#[derive(serde::Deserialize)]
struct LockoutRow {
    provider: String,
    credential: String,
    model: String,
    locked_until: Option<i64>,
    consecutive_failures: i64,
    reason_kind: Option<String>,
    reason_status: Option<i64>,
    changed_at: i64,
}

impl LockoutRow {
    fn decode(self) -> Result<(CandidateKey, LockoutRecord), StoreError> {
        let reason = lock_reason("model_lockouts", self.reason_kind, self.reason_status)?;
        let record = LockoutRecord {
            locked_until: self.locked_until.map(instant),
            consecutive_failures: number(
                "model_lockouts.consecutive_failures",
                self.consecutive_failures,
            )?,
            reason,
            changed_at: instant(self.changed_at),
            // Never stored: a restored lock counts as a stated wait.
            probe_through: false,
        };
        let key = CandidateKey::new(self.provider, self.credential, self.model);
        Ok((key, record))
    }
}
