//! How domain values become database columns and back: the state file's (`SQLite`) and the
//! team's (`PostgreSQL`, issue 20) alike.
//!
//! Enums are stored as their serde names, the same strings the API and the UI show, so a person
//! can read the file with `sqlite3` and a column changes only when the serde form does. Instants
//! are INTEGER unix milliseconds. Decoding never trusts the file: a value out of range is
//! [`StoreError::Corrupt`], except instants, which the registry clamps on restore anyway.

use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer};
use switchyard_core::UnixMillis;
use switchyard_core::resilience::lockout::LockReason;

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
