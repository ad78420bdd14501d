//! The team's `PostgreSQL` database: connecting, the schema, the salt, the instances, and shared
//! entries read and written with a condition on their version.
//!
//! Invariants:
//! - The connection URL is parsed once and never kept as text, logged or put in an error: it
//!   carries the password.
//! - Every instant this module writes or returns is the database's clock (`clock_timestamp()`),
//!   so every instance's deadlines are on one clock.
//! - A write succeeds only on the version it read ([`TeamDatabase::write`]), so two instances
//!   never overwrite each other's change: the loser reads again and applies its change on top.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use switchyard_core::{InstanceId, UnixMillis};

use super::tables::{Entry, Table, db_instant, db_now};
use crate::StoreError;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations-postgres");

/// The channel every change is announced on (see the migration's `team_announce`).
pub const CHANNEL: &str = "switchyard_team";

/// How long a connection may take to be had; the request path never waits for this, only the
/// sync task does.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// One team member as the database saw it lately.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: InstanceId,
    pub version: String,
    /// How long ago its last heartbeat was, on the database's clock.
    pub seen_ago: Duration,
}

/// The team's database. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct TeamDatabase {
    pool: PgPool,
}

impl std::fmt::Debug for TeamDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The pool's options hold the password.
        f.debug_struct("TeamDatabase").finish_non_exhaustive()
    }
}

/// A parsed connection URL. Never printed: it carries the password.
#[derive(Clone)]
pub struct TeamUrl(PgConnectOptions);

impl std::fmt::Debug for TeamUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TeamUrl(..)")
    }
}

impl TeamUrl {
    /// Parses a `postgres://` URL, without connecting. The error never repeats the URL.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(StoreError::Team(
                "not a PostgreSQL URL: expected postgres://user:password@host:5432/database".into(),
            ));
        }
        PgConnectOptions::from_str(url)
            .map(|o| Self(o.application_name("switchyard").options([("statement_timeout", "5s")])))
            .map_err(|_| {
                StoreError::Team(
                    "the PostgreSQL URL does not parse: expected \
                     postgres://user:password@host:5432/database?sslmode=require"
                        .into(),
                )
            })
    }
}

impl TeamDatabase {
    /// Connects to the database at `url` and brings the team schema up to date.
    pub async fn connect(url: &TeamUrl) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(url.0.clone())
            .await
            .map_err(StoreError::database)?;
        MIGRATOR.run(&pool).await.map_err(|e| StoreError::Migrate(e.to_string()))?;
        Ok(Self { pool })
    }

    /// The team's salt for keyed hashes, created by the first instance that asks (a
    /// conditional insert: every instance ends up with the same one).
    pub async fn salt(&self) -> Result<Vec<u8>, StoreError> {
        // 244 random bits from PostgreSQL's own generator (no extension needed).
        let created = concat!(
            "INSERT INTO team_meta (id, salt, created_at) SELECT 1, \
             decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'), ",
            db_now!(),
            " ON CONFLICT (id) DO NOTHING"
        );
        sqlx::query(created).execute(&self.pool).await.map_err(StoreError::database)?;
        sqlx::query_scalar("SELECT salt FROM team_meta WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::database)
    }

    /// The database's clock.
    pub async fn now(&self) -> Result<UnixMillis, StoreError> {
        let now: i64 = sqlx::query_scalar(concat!("SELECT ", db_now!()))
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok(db_instant(now))
    }

    /// Says `me` (running `version`) is alive, and forgets instances not seen for a day.
    pub async fn heartbeat(&self, me: &InstanceId, version: &str) -> Result<(), StoreError> {
        let beat = concat!(
            "INSERT INTO team_instances (id, version, started_at, seen_at) VALUES ($1, $2, ",
            db_now!(),
            ", ",
            db_now!(),
            ") ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, seen_at = EXCLUDED.seen_at"
        );
        sqlx::query(beat)
            .bind(me.as_str())
            .bind(version)
            .execute(&self.pool)
            .await
            .map_err(StoreError::database)?;
        sqlx::query(concat!(
            "DELETE FROM team_instances WHERE seen_at < ",
            db_now!(),
            " - 86400000"
        ))
        .execute(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(())
    }

    /// The instances seen within `within`, by name.
    pub async fn members(&self, within: Duration) -> Result<Vec<Member>, StoreError> {
        let list = concat!(
            "SELECT id, version, ",
            db_now!(),
            " - seen_at FROM team_instances WHERE seen_at > ",
            db_now!(),
            " - $1 ORDER BY id"
        );
        let rows: Vec<(String, String, i64)> = sqlx::query_as(list)
            .bind(i64::try_from(within.as_millis()).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok(rows
            .into_iter()
            .map(|(id, version, ago)| Member {
                id: InstanceId::new(id),
                version,
                seen_ago: Duration::from_millis(u64::try_from(ago).unwrap_or(0)),
            })
            .collect())
    }

    /// The database's `now` and the entry `name` of table `T`, if it exists.
    pub async fn read<T: Table>(
        &self,
        name: &T::Name,
    ) -> Result<(UnixMillis, Option<Entry<T::Name, T::Value>>), StoreError> {
        let (now, row): (i64, Option<String>) = sqlx::query_as(T::READ)
            .bind(T::key(name).to_string())
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok((db_instant(now), row.as_deref().map(T::decode).transpose()?))
    }

    /// Writes `value` as the entry `name`, recorded by `by`, if the entry is still at version
    /// `expected` (`None`: if it does not exist yet). The new version, or `None` when someone
    /// else wrote first.
    pub async fn write<T: Table>(
        &self,
        name: &T::Name,
        value: &T::Value,
        by: &InstanceId,
        expected: Option<i64>,
    ) -> Result<Option<i64>, StoreError> {
        sqlx::query_scalar(T::WRITE)
            .bind(T::encode(name, value, by))
            .bind(expected)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)
    }

    /// Every entry of table `T` written after `version`, oldest first. A row this version
    /// cannot read is skipped with a warning.
    pub async fn since<T: Table>(
        &self,
        version: i64,
    ) -> Result<Vec<Entry<T::Name, T::Value>>, StoreError> {
        let rows: Vec<String> = sqlx::query_scalar(T::SINCE)
            .bind(version)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                T::decode(row)
                    .inspect_err(|error| {
                        tracing::warn!(table = T::NAME, %error, "skipped a team row that cannot be read");
                    })
                    .ok()
            })
            .collect())
    }

    /// A connection listening on [`CHANNEL`].
    pub(super) async fn listen(&self) -> Result<PgListener, StoreError> {
        let mut listener =
            PgListener::connect_with(&self.pool).await.map_err(StoreError::database)?;
        listener.eager_reconnect(false);
        listener.listen(CHANNEL).await.map_err(StoreError::database)?;
        Ok(listener)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}
