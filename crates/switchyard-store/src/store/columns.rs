//! How domain values become database columns and back: the state file's (`SQLite`) and the
//! team's (`PostgreSQL`) alike.
//!
//! Enums are stored as their serde names, the same strings the API and the UI show, so a person
//! can read the file with `sqlite3` and a column changes only when the serde form does. Instants
//! are INTEGER unix milliseconds. Decoding never trusts the file: a value out of range is
//! [`StoreError::Corrupt`], except instants, which the registry clamps on restore anyway.

use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer};
use switchyard_core::UnixMillis;
use switchyard_core::resilience::lockout::LockReason;
use switchyard_core::resilience::{BreakerRecord, CredentialRecord};

use crate::StoreError;

/// The serde name of a unit enum variant.
pub(crate) fn name<T: Serialize>(value: T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => unreachable!("only unit enum variants are stored by name, got {other:?}"),
    }
}

/// The unit enum variant with serde name `text`.
pub(crate) fn parse<T: DeserializeOwned>(column: &str, text: &str) -> Result<T, StoreError> {
    T::deserialize(text.into_deserializer()).map_err(|e: serde::de::value::Error| {
        StoreError::Corrupt(format!("{column} `{text}`: {e}"))
    })
}

/// `SQLite` integers are signed; an instant past year 292 million saturates.
pub(crate) fn millis(t: UnixMillis) -> i64 {
    i64::try_from(t.0).unwrap_or(i64::MAX)
}

/// A negative instant reads as the epoch: restore pulls it up to `now`.
pub(crate) fn instant(value: i64) -> UnixMillis {
    UnixMillis(u64::try_from(value).unwrap_or(0))
}

pub(crate) fn number<T: TryFrom<i64>>(column: &str, value: i64) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} {value} is out of range")))
}

/// A lock's reason from its two columns, `reason_kind` and `reason_status`, of `table`.
pub(crate) fn lock_reason(
    table: &str,
    kind: Option<String>,
    status: Option<i64>,
) -> Result<Option<LockReason>, StoreError> {
    let Some(kind) = kind else { return Ok(None) };
    Ok(Some(LockReason {
        kind: parse(&format!("{table}.reason_kind"), &kind)?,
        status: status.map(|s| number(&format!("{table}.reason_status"), s)).transpose()?,
    }))
}

/// A breaker's record from its columns in `table` (the state file's `breakers`, the team's
/// `team_breakers`: the same columns, keyed differently).
pub(crate) fn breaker_record(
    table: &str,
    state: &str,
    failures: i64,
    reopens: i64,
    open_until: Option<i64>,
    last_fault: Option<&str>,
    changed_at: i64,
) -> Result<BreakerRecord, StoreError> {
    Ok(BreakerRecord {
        state: parse(&format!("{table}.state"), state)?,
        failures: number(&format!("{table}.failures"), failures)?,
        reopens: number(&format!("{table}.reopens"), reopens)?,
        open_until: open_until.map(instant),
        last_fault: last_fault.map(|f| parse(&format!("{table}.last_fault"), f)).transpose()?,
        changed_at: instant(changed_at),
    })
}

/// A credential cooldown's record from its columns in `table` (the state file's
/// `credential_cooldowns`, the team's `team_credentials`).
pub(crate) fn cooldown_record(
    table: &str,
    status: &str,
    cooling_until: Option<i64>,
    backoff_level: i64,
    last_error: Option<&str>,
    changed_at: i64,
) -> Result<CredentialRecord, StoreError> {
    Ok(CredentialRecord {
        status: parse(&format!("{table}.status"), status)?,
        cooling_until: cooling_until.map(instant),
        backoff_level: number(&format!("{table}.backoff_level"), backoff_level)?,
        last_error: last_error.map(|e| parse(&format!("{table}.last_error"), e)).transpose()?,
        changed_at: instant(changed_at),
    })
}
