//! Settings sections: one row per section, its serde form as JSON plus the schema version that
//! form was written with and the Switchyard that wrote it.
//!
//! The version lets a newer build migrate an older body, and tells an older build that a body
//! holds more than it understands: it may read what it knows, but must not save over it.

use serde::Serialize;
use switchyard_core::UnixMillis;

use super::Store;
use super::columns::{millis, number};
use super::migrate::VERSION;
use crate::StoreError;

/// A settings section as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSection {
    /// The schema version of the body's form.
    pub version: u32,
    /// The version of Switchyard that saved it; `None` before versions were recorded.
    pub written_by: Option<String>,
    pub body: serde_json::Value,
}

impl Store {
    /// A section as stored.
    pub async fn settings(&self, section: &str) -> Result<Option<StoredSection>, StoreError> {
        let row: Option<(i64, Option<String>, String)> = sqlx::query_as(
            "SELECT schema_version, written_by, body FROM settings WHERE section = ?",
        )
        .bind(section)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::database)?;
        let Some((version, written_by, body)) = row else {
            return Ok(None);
        };
        let version = number("settings.schema_version", version)?;
        let body = serde_json::from_str(&body).map_err(|e| body_error(section, &e))?;
        Ok(Some(StoredSection { version, written_by, body }))
    }

    /// A section's body exactly as stored: what proves a section was left alone.
    pub async fn settings_text(&self, section: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT body FROM settings WHERE section = ?")
            .bind(section)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)
    }

    /// Saves a section with the schema version of `T`'s form, as written by this build.
    pub async fn save_settings<T: Serialize>(
        &self,
        section: &str,
        version: u32,
        value: &T,
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(value).map_err(|e| body_error(section, &e))?;
        sqlx::query(
            "INSERT OR REPLACE INTO settings (section, schema_version, written_by, body, updated_at)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(section)
        .bind(i64::from(version))
        .bind(VERSION)
        .bind(body)
        .bind(millis(now))
        .execute(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(())
    }
}

fn body_error(section: &str, error: &serde_json::Error) -> StoreError {
    StoreError::SettingsBody { section: section.to_owned(), message: error.to_string() }
}
