//! Local API keys: who may call `/v1`. The table holds a digest and a four-character hint per
//! key, never the key.

use switchyard_core::UnixMillis;

use super::Store;
use super::columns::millis;
use crate::StoreError;

/// One stored key, without its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub id: String,
    pub name: String,
    /// Hex SHA-256 of the key.
    pub sha256: String,
    /// The key's last four characters.
    pub hint: String,
    pub created_at: UnixMillis,
    pub revoked_at: Option<UnixMillis>,
}

impl Store {
    pub async fn create_api_key(&self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_keys (id, name, sha256, hint, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)",
        )
        .bind(&key.id)
        .bind(&key.name)
        .bind(&key.sha256)
        .bind(&key.hint)
        .bind(millis(key.created_at))
        .execute(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(())
    }

    /// Every key, revoked ones included, oldest first.
    pub async fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let rows: Vec<(String, String, String, String, i64, Option<i64>)> = sqlx::query_as(
            "SELECT id, name, sha256, hint, created_at, revoked_at FROM api_keys ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(rows
            .into_iter()
            .map(|(id, name, sha256, hint, created_at, revoked_at)| ApiKeyRecord {
                id,
                name,
                sha256,
                hint,
                created_at: UnixMillis(u64::try_from(created_at).unwrap_or(0)),
                revoked_at: revoked_at.map(|t| UnixMillis(u64::try_from(t).unwrap_or(0))),
            })
            .collect())
    }

    /// Revokes the key with this id (names are resolved to one id by the caller, so a name
    /// never revokes two keys). Returns whether a live key was revoked.
    pub async fn revoke_api_key(&self, id: &str, now: UnixMillis) -> Result<bool, StoreError> {
        let done =
            sqlx::query("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
                .bind(millis(now))
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(StoreError::database)?;
        Ok(done.rows_affected() > 0)
    }
}
