//! The three shared tables, each described once: its SQL and how its rows map to the domain's
//! shared entries. Rows travel as JSON (`row_to_json` out, `json_populate_record` in), so a
//! row read by a query and a row announced by `NOTIFY` decode the same way, and the code that
//! reads, writes and catches up is written once for all three tables.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use switchyard_core::UnixMillis;
use switchyard_core::resilience::LockoutRecord;
use switchyard_core::resilience::team::{
    Lease, SharedBreaker, SharedCredential, SharedLockout, Stamp, TeamCredential, TeamModel,
    TeamProvider,
};
use switchyard_core::{InstanceId, ModelId};

use crate::StoreError;
use crate::store::columns::{
    breaker_record, cooldown_record, instant, lock_reason, millis, name, number,
};

/// One shared entry as read from the database: its name, its value, who wrote it and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<N, V> {
    pub name: N,
    pub value: V,
    pub stamp: Stamp,
}

/// What one shared table needs to be read, written and caught up with.
pub trait Table {
    /// The table's name, as `NOTIFY` announces it.
    const NAME: &'static str;
    /// `$1`: a JSON object holding the key columns. Returns the database's `now` and the row,
    /// as JSON, or NULL.
    const READ: &'static str;
    /// `$1`: the whole row as JSON; `$2`: the version it must still have, or NULL for a row that
    /// must not exist yet. Returns the new version, or no row when that condition failed.
    const WRITE: &'static str;
    /// `$1`: a version. Returns every row written after it, as JSON, oldest first.
    const SINCE: &'static str;

    type Name: Clone + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync;
    type Value: Clone + PartialEq + std::fmt::Debug + Send + Sync;
    type Row: Serialize + DeserializeOwned;

    fn key(name: &Self::Name) -> serde_json::Value;
    fn row(name: &Self::Name, value: &Self::Value, by: &InstanceId) -> Self::Row;
    fn entry(row: Self::Row) -> Result<Entry<Self::Name, Self::Value>, StoreError>;

    fn decode(json: &str) -> Result<Entry<Self::Name, Self::Value>, StoreError> {
        let row = serde_json::from_str(json)
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", Self::NAME)))?;
        Self::entry(row)
    }

    fn encode(name: &Self::Name, value: &Self::Value, by: &InstanceId) -> String {
        serde_json::to_string(&Self::row(name, value, by)).expect("rows serialize")
    }
}

/// The database's clock, in unix milliseconds, as SQL text for `concat!` (sqlx takes only
/// literal SQL); `clock_timestamp()` rather than `now()`, which is the start of the transaction.
macro_rules! db_now {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}
pub(super) use db_now;

/// A table's `READ`: the database's `now`, and the row whose key columns (`$matches`, comparing
/// `t` with the key `k` read from `$1`) match.
macro_rules! read_sql {
    ($table:literal, $matches:literal) => {
        concat!(
            "SELECT ",
            db_now!(),
            ", (SELECT row_to_json(t)::text FROM ",
            $table,
            " t, json_populate_record(NULL::",
            $table,
            ", $1::json) k WHERE ",
            $matches,
            ")"
        )
    };
}

/// A table's `SINCE`.
macro_rules! since_sql {
    ($table:literal) => {
        concat!(
            "SELECT row_to_json(t)::text FROM ",
            $table,
            " t WHERE version > $1 ORDER BY version"
        )
    };
}

/// `team_breakers`.
#[derive(Debug)]
pub struct Breakers;
/// `team_credentials`.
#[derive(Debug)]
pub struct Credentials;
/// `team_lockouts`.
#[derive(Debug)]
pub struct Lockouts;

#[derive(Debug, Serialize, Deserialize)]
pub struct BreakerRow {
    provider: String,
    state: String,
    failures: i64,
    reopens: i64,
    open_until: Option<i64>,
    last_fault: Option<String>,
    changed_at: i64,
    lease_holder: Option<String>,
    lease_until: Option<i64>,
    recorded_by: String,
    version: i64,
    /// Absent from a row an instance of an older version announced.
    #[serde(default)]
    lease_since: Option<i64>,
}

impl Table for Breakers {
    const NAME: &'static str = "team_breakers";
    const READ: &'static str = read_sql!("team_breakers", "t.provider = k.provider");
    const WRITE: &'static str = "INSERT INTO team_breakers \
        SELECT * FROM json_populate_record(NULL::team_breakers, $1::json) \
        ON CONFLICT (provider) DO UPDATE SET \
        (state, failures, reopens, open_until, last_fault, changed_at, lease_holder, lease_until, \
         lease_since, recorded_by) = (EXCLUDED.state, EXCLUDED.failures, EXCLUDED.reopens, \
         EXCLUDED.open_until, EXCLUDED.last_fault, EXCLUDED.changed_at, EXCLUDED.lease_holder, \
         EXCLUDED.lease_until, EXCLUDED.lease_since, EXCLUDED.recorded_by) \
        WHERE team_breakers.version = $2 RETURNING version";
    const SINCE: &'static str = since_sql!("team_breakers");

    type Name = TeamProvider;
    type Value = SharedBreaker;
    type Row = BreakerRow;

    fn key(name: &TeamProvider) -> serde_json::Value {
        serde_json::json!({ "provider": name.as_str() })
    }

    fn row(name: &TeamProvider, value: &SharedBreaker, by: &InstanceId) -> BreakerRow {
        let r = &value.record;
        BreakerRow {
            provider: name.as_str().to_owned(),
            state: self::name(r.state),
            failures: i64::from(r.failures),
            reopens: i64::from(r.reopens),
            open_until: r.open_until.map(millis),
            last_fault: r.last_fault.map(self::name),
            changed_at: millis(r.changed_at),
            lease_holder: value.lease.as_ref().map(|l| l.holder.to_string()),
            lease_until: value.lease.as_ref().map(|l| millis(l.until)),
            lease_since: value.lease.as_ref().and_then(|l| l.since).map(millis),
            recorded_by: by.to_string(),
            version: 0,
        }
    }

    fn entry(row: BreakerRow) -> Result<Entry<TeamProvider, SharedBreaker>, StoreError> {
        let record = breaker_record(
            "team_breakers",
            &row.state,
            row.failures,
            row.reopens,
            row.open_until,
            row.last_fault.as_deref(),
            row.changed_at,
        )?;
        let lease = match (row.lease_holder, row.lease_until) {
            (Some(holder), Some(until)) => Some(Lease {
                holder: member("team_breakers.lease_holder", holder)?,
                since: row.lease_since.map(instant),
                until: instant(until),
            }),
            _ => None,
        };
        Ok(Entry {
            name: provider_name("team_breakers.provider", row.provider)?,
            value: SharedBreaker { record, lease },
            stamp: Stamp {
                version: row.version,
                recorded_by: member("team_breakers.recorded_by", row.recorded_by)?,
            },
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CredentialRow {
    provider: String,
    key_hash: String,
    status: String,
    cooling_until: Option<i64>,
    backoff_level: i64,
    last_error: Option<String>,
    changed_at: i64,
    recorded_by: String,
    version: i64,
}

impl Table for Credentials {
    const NAME: &'static str = "team_credentials";
    const READ: &'static str =
        read_sql!("team_credentials", "t.provider = k.provider AND t.key_hash = k.key_hash");
    const WRITE: &'static str = "INSERT INTO team_credentials \
        SELECT * FROM json_populate_record(NULL::team_credentials, $1::json) \
        ON CONFLICT (provider, key_hash) DO UPDATE SET \
        (status, cooling_until, backoff_level, last_error, changed_at, recorded_by) = \
        (EXCLUDED.status, EXCLUDED.cooling_until, EXCLUDED.backoff_level, EXCLUDED.last_error, \
         EXCLUDED.changed_at, EXCLUDED.recorded_by) \
        WHERE team_credentials.version = $2 RETURNING version";
    const SINCE: &'static str = since_sql!("team_credentials");

    type Name = TeamCredential;
    type Value = SharedCredential;
    type Row = CredentialRow;

    fn key(name: &TeamCredential) -> serde_json::Value {
        serde_json::json!({ "provider": name.provider.as_str(), "key_hash": &*name.key_hash })
    }

    fn row(name: &TeamCredential, r: &SharedCredential, by: &InstanceId) -> CredentialRow {
        CredentialRow {
            provider: name.provider.as_str().to_owned(),
            key_hash: name.key_hash.to_string(),
            status: self::name(r.status),
            cooling_until: r.cooling_until.map(millis),
            backoff_level: i64::from(r.backoff_level),
            last_error: r.last_error.map(self::name),
            changed_at: millis(r.changed_at),
            recorded_by: by.to_string(),
            version: 0,
        }
    }

    fn entry(row: CredentialRow) -> Result<Entry<TeamCredential, SharedCredential>, StoreError> {
        let value = cooldown_record(
            "team_credentials",
            &row.status,
            row.cooling_until,
            row.backoff_level,
            row.last_error.as_deref(),
            row.changed_at,
        )?;
        Ok(Entry {
            name: TeamCredential {
                provider: provider_name("team_credentials.provider", row.provider)?,
                key_hash: key_hash("team_credentials.key_hash", row.key_hash)?,
            },
            value,
            stamp: Stamp {
                version: row.version,
                recorded_by: member("team_credentials.recorded_by", row.recorded_by)?,
            },
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LockoutRow {
    provider: String,
    key_hash: String,
    model: String,
    locked_until: Option<i64>,
    consecutive_failures: i64,
    reason_kind: Option<String>,
    reason_status: Option<i64>,
    changed_at: i64,
    recorded_by: String,
    version: i64,
}

impl Table for Lockouts {
    const NAME: &'static str = "team_lockouts";
    const READ: &'static str = read_sql!(
        "team_lockouts",
        "t.provider = k.provider AND t.key_hash = k.key_hash AND t.model = k.model"
    );
    const WRITE: &'static str = "INSERT INTO team_lockouts \
        SELECT * FROM json_populate_record(NULL::team_lockouts, $1::json) \
        ON CONFLICT (provider, key_hash, model) DO UPDATE SET \
        (locked_until, consecutive_failures, reason_kind, reason_status, changed_at, \
         recorded_by) = (EXCLUDED.locked_until, EXCLUDED.consecutive_failures, \
         EXCLUDED.reason_kind, EXCLUDED.reason_status, EXCLUDED.changed_at, EXCLUDED.recorded_by) \
        WHERE team_lockouts.version = $2 RETURNING version";
    const SINCE: &'static str = since_sql!("team_lockouts");

    type Name = TeamModel;
    type Value = SharedLockout;
    type Row = LockoutRow;

    fn key(name: &TeamModel) -> serde_json::Value {
        serde_json::json!({
            "provider": name.credential.provider.as_str(),
            "key_hash": &*name.credential.key_hash,
            "model": name.model.as_str(),
        })
    }

    fn row(name: &TeamModel, r: &SharedLockout, by: &InstanceId) -> LockoutRow {
        LockoutRow {
            provider: name.credential.provider.as_str().to_owned(),
            key_hash: name.credential.key_hash.to_string(),
            model: name.model.as_str().to_owned(),
            locked_until: r.locked_until.map(millis),
            consecutive_failures: i64::from(r.consecutive_failures),
            reason_kind: r.reason.map(|reason| self::name(reason.kind)),
            reason_status: r.reason.and_then(|reason| reason.status).map(i64::from),
            changed_at: millis(r.changed_at),
            recorded_by: by.to_string(),
            version: 0,
        }
    }

    fn entry(row: LockoutRow) -> Result<Entry<TeamModel, SharedLockout>, StoreError> {
        let reason = lock_reason("team_lockouts", row.reason_kind, row.reason_status)?;
        let value = LockoutRecord {
            locked_until: row.locked_until.map(instant),
            consecutive_failures: number(
                "team_lockouts.consecutive_failures",
                row.consecutive_failures,
            )?,
            reason,
            changed_at: instant(row.changed_at),
            // Never shared: a team's lock counts as a stated wait.
            probe_through: false,
        };
        let credential = TeamCredential {
            provider: provider_name("team_lockouts.provider", row.provider)?,
            key_hash: key_hash("team_lockouts.key_hash", row.key_hash)?,
        };
        Ok(Entry {
            name: TeamModel { credential, model: model_name("team_lockouts.model", row.model)? },
            value,
            stamp: Stamp {
                version: row.version,
                recorded_by: member("team_lockouts.recorded_by", row.recorded_by)?,
            },
        })
    }
}

/// A change announced on the `switchyard_team` channel: `{"table": ..., "row": {...}}`, taken
/// as a hint that the row it names changed, never as the row itself: any role that
/// can connect may `NOTIFY` anything, so only the table and the key columns are read from it,
/// bounded like any row, and the row is then read from the table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Hint {
    Breaker(TeamProvider),
    Credential(TeamCredential),
    Lockout(TeamModel),
}

impl Hint {
    pub(super) fn parse(payload: &str) -> Result<Self, StoreError> {
        #[derive(Deserialize)]
        #[expect(clippy::struct_field_names, reason = "the tables' own column names")]
        struct Key {
            provider: String,
            key_hash: Option<String>,
            model: Option<String>,
        }
        #[derive(Deserialize)]
        struct Envelope {
            table: String,
            row: Key,
        }
        let corrupt = |e: serde_json::Error| StoreError::Corrupt(format!("notification: {e}"));
        let Envelope { table, row } = serde_json::from_str(payload).map_err(corrupt)?;
        let missing = |column: &str| StoreError::Corrupt(format!("notification without {column}"));
        let provider = || provider_name("notification.provider", row.provider.clone());
        let credential = || -> Result<TeamCredential, StoreError> {
            let hash = row.key_hash.clone().ok_or_else(|| missing("key_hash"))?;
            Ok(TeamCredential {
                provider: provider()?,
                key_hash: key_hash("notification.key_hash", hash)?,
            })
        };
        match table.as_str() {
            Breakers::NAME => Ok(Self::Breaker(provider()?)),
            Credentials::NAME => Ok(Self::Credential(credential()?)),
            Lockouts::NAME => {
                let model = row.model.clone().ok_or_else(|| missing("model"))?;
                let model = model_name("notification.model", model)?;
                Ok(Self::Lockout(TeamModel { credential: credential()?, model }))
            }
            other => Err(StoreError::Corrupt(format!(
                "notification for table {}",
                other.chars().take(64).collect::<String>()
            ))),
        }
    }
}

/// Longest instance name: the config's own bound (`team.instance`).
pub(super) const INSTANCE_NAME_MAX: usize = 64;
/// Longest provider name (a normalised base URL).
const PROVIDER_MAX: usize = 512;
/// Longest key hash (HMAC-SHA256 in hex is 64).
const KEY_HASH_MAX: usize = 128;
/// Longest model id.
const MODEL_MAX: usize = 256;

fn bounded(
    column: &str,
    text: &str,
    max: usize,
    ok: impl Fn(char) -> bool,
) -> Result<(), StoreError> {
    if text.is_empty() || text.len() > max || !text.chars().all(ok) {
        return Err(StoreError::Corrupt(format!(
            "{column}: not 1 to {max} characters of the kind it holds"
        )));
    }
    Ok(())
}

/// An instance's name as the team stores it: what the config accepts for `team.instance` (1 to
/// 64 letters, digits, `-`, `_`, `.`), so nothing else reaches the health page or a log.
pub(super) fn member(column: &str, text: String) -> Result<InstanceId, StoreError> {
    bounded(column, &text, INSTANCE_NAME_MAX, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
    })?;
    Ok(InstanceId::new(text))
}

fn provider_name(column: &str, text: String) -> Result<TeamProvider, StoreError> {
    bounded(column, &text, PROVIDER_MAX, |c| c.is_ascii_graphic())?;
    Ok(TeamProvider::new(text))
}

fn key_hash(column: &str, text: String) -> Result<std::sync::Arc<str>, StoreError> {
    bounded(column, &text, KEY_HASH_MAX, |c| c.is_ascii_alphanumeric() || c == '-')?;
    Ok(text.into())
}

fn model_name(column: &str, text: String) -> Result<ModelId, StoreError> {
    bounded(column, &text, MODEL_MAX, |c| !c.is_control())?;
    Ok(ModelId::new(text))
}

/// Read back as a database instant.
pub(super) fn db_instant(value: i64) -> UnixMillis {
    instant(value)
}
