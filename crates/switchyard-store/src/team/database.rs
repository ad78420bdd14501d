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
use switchyard_core::resilience::team::{SharedBreaker, TeamProvider as TeamProviderName};
use switchyard_core::{InstanceId, UnixMillis};

use super::tables::{Breakers, Entry, Table, db_instant, db_now};
use crate::StoreError;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations-postgres");

/// The channel every change is announced on (see the migration's `team_announce`).
pub const CHANNEL: &str = "switchyard_team";

/// How long a connection may take to be had; the request path never waits for this, only the
/// sync task does.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// The answer to a half-open lease request (see [`TeamDatabase::lease_half_open`]).
#[derive(Debug)]
pub struct LeaseReply {
    /// The database's clock.
    pub now: UnixMillis,
    /// The entry as granted to this instance, if it was.
    pub granted: Option<Entry<TeamProviderName, SharedBreaker>>,
    /// The entry as it stood before the request (`None`: the team has no such breaker).
    pub current: Option<Entry<TeamProviderName, SharedBreaker>>,
}

/// See [`TeamDatabase::lease_half_open`]. `$1` provider, `$2` instance, `$3` how long the lease
/// lasts, `$4` how long another's lease is honoured, `$5` the longest wait an open breaker's
/// change may state. Mirrors `BreakerChange::Lease` and `trust` in the core: a breaker open past
/// its wait is written half-open (as of when its wait ran out), as the core's lazy transition
/// would record it.
const LEASE_HALF_OPEN: &str = concat!(
    "WITH clock AS (SELECT ",
    db_now!(),
    " AS t), granted AS (UPDATE team_breakers b SET lease_holder = $2, lease_since = clock.t, \
     lease_until = clock.t + $3, recorded_by = $2, state = 'half_open', open_until = NULL, \
     changed_at = CASE WHEN b.state = 'open' THEN LEAST(COALESCE(b.open_until, clock.t), clock.t) \
       ELSE b.changed_at END FROM clock WHERE b.provider = $1 \
     AND (b.state = 'half_open' OR (b.state = 'open' AND (b.open_until IS NULL \
       OR b.changed_at > clock.t + 60000 OR LEAST(b.open_until, b.changed_at + $5) <= clock.t))) \
     AND (b.lease_holder IS NULL OR b.lease_until IS NULL OR b.lease_holder = $2 \
       OR b.lease_until <= clock.t OR (b.lease_since IS NULL AND b.lease_until > clock.t + $4) \
       OR b.lease_since > clock.t + 60000 OR LEAST(b.lease_since, clock.t) + $4 <= clock.t) \
     RETURNING row_to_json(b)::text AS row) \
     SELECT clock.t, (SELECT row FROM granted), \
     (SELECT row_to_json(c)::text FROM team_breakers c WHERE c.provider = $1) FROM clock"
);

/// See [`TeamDatabase::lease_probe`]. `$1` scope, `$2` instance, `$3` how long, `$4` how long
/// another's slot is honoured.
const LEASE_PROBE: &str = concat!(
    "INSERT INTO team_probes AS p (scope, holder, since, until) SELECT $1, $2, c.t, c.t + $3 \
     FROM (SELECT ",
    db_now!(),
    " AS t) c ON CONFLICT (scope) DO UPDATE SET holder = EXCLUDED.holder, \
     since = EXCLUDED.since, until = EXCLUDED.until WHERE p.holder = EXCLUDED.holder \
     OR p.until <= EXCLUDED.since OR p.since > EXCLUDED.since + 60000 \
     OR LEAST(p.since, EXCLUDED.since) + $4 <= EXCLUDED.since RETURNING p.until"
);

/// A row of `T`, or `None` (with a warning) for one that cannot be read or is out of bounds.
fn decoded<T: Table>(row: &str) -> Option<Entry<T::Name, T::Value>> {
    T::decode(row)
        .inspect_err(|error| {
            tracing::warn!(table = T::NAME, %error, "skipped a team row that cannot be read");
        })
        .ok()
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

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
            // sqlx pings every connection it hands out by default: a round trip more per
            // statement, which at 15 ms away made every lease late. A broken
            // connection fails its statement instead, and the sync task reconnects.
            .test_before_acquire(false)
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
        // Bounded like every text the team shows: a name that is not one is skipped.
        Ok(rows
            .into_iter()
            .filter_map(|(id, version, ago)| {
                let id = super::tables::member("team_instances.id", id).ok()?;
                let version: String =
                    version.chars().filter(|c| !c.is_control()).take(32).collect();
                let seen_ago = Duration::from_millis(u64::try_from(ago).unwrap_or(0));
                Some(Member { id, version, seen_ago })
            })
            .collect())
    }

    /// The database's `now` and the entry `name` of table `T`, if it exists. A row this
    /// version cannot read (or one out of bounds: a forged one) counts as absent, with a
    /// warning: it must not end the session, or one row could keep an instance out of the team.
    pub async fn read<T: Table>(
        &self,
        name: &T::Name,
    ) -> Result<(UnixMillis, Option<Entry<T::Name, T::Value>>), StoreError> {
        let (now, row): (i64, Option<String>) = sqlx::query_as(T::READ)
            .bind(T::key(name).to_string())
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok((db_instant(now), row.as_deref().and_then(decoded::<T>)))
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
        Ok(rows.iter().filter_map(|row| decoded::<T>(row)).collect())
    }

    /// Asks for the half-open probe lease of breaker `name` for `me`, lasting `lasts`, in one
    /// conditional statement (one round trip): granted when the team's breaker is half-open (or
    /// open past its wait, bounded by `longest` after its change) and no other lease is live
    /// (one granted within `honoured`, this instance's `probe_timeout`). Returns the database's
    /// clock, the entry as granted, and the entry as it stood before (for a refusal).
    pub async fn lease_half_open(
        &self,
        name: &TeamProviderName,
        me: &InstanceId,
        (lasts, honoured, longest): (Duration, Duration, Duration),
    ) -> Result<LeaseReply, StoreError> {
        let (now, granted, current): (i64, Option<String>, Option<String>) =
            sqlx::query_as(LEASE_HALF_OPEN)
                .bind(name.as_str())
                .bind(me.as_str())
                .bind(ms(lasts))
                .bind(ms(honoured))
                .bind(ms(longest))
                .fetch_one(&self.pool)
                .await
                .map_err(StoreError::database)?;
        let decode = |row: Option<String>| row.as_deref().and_then(decoded::<Breakers>);
        Ok(LeaseReply { now: db_instant(now), granted: decode(granted), current: decode(current) })
    }

    /// Lets go of a half-open lease `me` holds on breaker `name` (one nobody waits for any
    /// more). The entry as it is afterwards, if it was held.
    pub async fn release_half_open(
        &self,
        name: &TeamProviderName,
        me: &InstanceId,
    ) -> Result<Option<Entry<TeamProviderName, SharedBreaker>>, StoreError> {
        let row: Option<String> = sqlx::query_scalar(
            "UPDATE team_breakers b SET lease_holder = NULL, lease_since = NULL, \
             lease_until = NULL WHERE b.provider = $1 AND b.lease_holder = $2 \
             RETURNING row_to_json(b)::text",
        )
        .bind(name.as_str())
        .bind(me.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(row.as_deref().and_then(decoded::<Breakers>))
    }

    /// Asks for the probe slot of `scope` (a recovery probe's) for `me`, lasting `lasts`, in one
    /// conditional statement: granted when no other holder's slot is live (granted within
    /// `honoured`). Whether it was granted.
    pub async fn lease_probe(
        &self,
        scope: &str,
        me: &InstanceId,
        (lasts, honoured): (Duration, Duration),
    ) -> Result<bool, StoreError> {
        let granted: Option<i64> = sqlx::query_scalar(LEASE_PROBE)
            .bind(scope)
            .bind(me.as_str())
            .bind(ms(lasts))
            .bind(ms(honoured))
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok(granted.is_some())
    }

    /// Frees the probe slot of `scope` if `me` holds it.
    pub async fn release_probe(&self, scope: &str, me: &InstanceId) -> Result<(), StoreError> {
        sqlx::query("UPDATE team_probes SET until = since WHERE scope = $1 AND holder = $2")
            .bind(scope)
            .bind(me.as_str())
            .execute(&self.pool)
            .await
            .map_err(StoreError::database)?;
        Ok(())
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
