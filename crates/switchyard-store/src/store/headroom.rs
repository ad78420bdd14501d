//! Each credential's quota windows across a restart (RESILIENCE.md §11): written on
//! transitions only (crossing the reserve), read back at start.

use switchyard_core::resilience::headroom::Window;
use switchyard_core::{CredentialKey, UnixMillis};

use super::Store;
use super::columns::millis;
use crate::StoreError;

impl Store {
    /// Keeps `windows` as `key`'s, as of `at`; a write older than the one kept changes nothing,
    /// so writes that race each other leave the newest.
    pub async fn save_headroom(
        &self,
        key: &CredentialKey,
        windows: &[Window],
        at: UnixMillis,
    ) -> Result<(), StoreError> {
        let windows = serde_json::to_string(windows).expect("windows serialise");
        sqlx::query(
            "INSERT INTO credential_headroom (provider, credential, windows, updated_at)
             VALUES (?, ?, ?, ?)
             ON CONFLICT (provider, credential) DO UPDATE
               SET windows = excluded.windows, updated_at = excluded.updated_at
               WHERE excluded.updated_at >= credential_headroom.updated_at",
        )
        .bind(key.provider.as_str())
        .bind(key.credential.as_str())
        .bind(windows)
        .bind(millis(at))
        .execute(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(())
    }

    /// Every credential's windows as last saved. A row that does not parse is skipped (and
    /// logged): it says nothing routing could rely on.
    pub async fn load_headroom(&self) -> Result<Vec<(CredentialKey, Vec<Window>)>, StoreError> {
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT provider, credential, windows FROM credential_headroom")
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::database)?;
        Ok(rows
            .into_iter()
            .filter_map(|(provider, credential, windows)| {
                let key = CredentialKey { provider: provider.into(), credential: credential.into() };
                match serde_json::from_str(&windows) {
                    Ok(windows) => Some((key, windows)),
                    Err(error) => {
                        tracing::warn!(%error, provider = %key.provider, credential = %key.credential, "unreadable quota windows skipped");
                        None
                    }
                }
            })
            .collect())
    }
}
