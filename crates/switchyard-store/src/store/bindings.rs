//! Confirmed (secret reference, destination) pairs: the only record of where the user allowed
//! each secret to go (see `switchyard_core::binding`). Rows are only ever added: confirming a
//! pair again keeps its first confirmation time.

use switchyard_core::UnixMillis;
use switchyard_core::binding::Binding;

use super::Store;
use super::columns::millis;
use crate::StoreError;

impl Store {
    /// Every confirmed pair, in a stable order.
    pub async fn bindings(&self) -> Result<Vec<Binding>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT reference, destination FROM secret_bindings ORDER BY reference, destination",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        Ok(rows.into_iter().map(|(r, d)| Binding::new(r, d)).collect())
    }

    /// Records `bindings` as confirmed at `now`, in one transaction: all or none.
    pub async fn confirm_bindings(
        &self,
        bindings: &[Binding],
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::database)?;
        for binding in bindings {
            sqlx::query(
                "INSERT OR IGNORE INTO secret_bindings (reference, destination, confirmed_at)
                 VALUES (?, ?, ?)",
            )
            .bind(&binding.reference)
            .bind(&binding.destination)
            .bind(millis(now))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::database)?;
        }
        tx.commit().await.map_err(StoreError::database)
    }
}
