//! Confirmed bindings: the only record of where the user allowed requests and each secret to
//! go (see `switchyard_core::binding`). Secret bindings (reference, destination) live in
//! `secret_bindings`, destination bindings (no reference) in `destination_bindings`. Rows are
//! only ever added: confirming a binding again keeps its first confirmation time.

use switchyard_core::UnixMillis;
use switchyard_core::binding::Binding;

use super::Store;
use super::columns::millis;
use crate::StoreError;

impl Store {
    /// Every confirmed binding in a stable order: secret bindings, then destination bindings.
    pub async fn bindings(&self) -> Result<Vec<Binding>, StoreError> {
        let secrets: Vec<(String, String)> = sqlx::query_as(
            "SELECT reference, destination FROM secret_bindings ORDER BY reference, destination",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::database)?;
        let destinations: Vec<(String,)> =
            sqlx::query_as("SELECT destination FROM destination_bindings ORDER BY destination")
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::database)?;
        let secrets = secrets.into_iter().map(|(r, d)| Binding::new(r, d));
        let destinations = destinations.into_iter().map(|(d,)| Binding::destination_only(d));
        Ok(secrets.chain(destinations).collect())
    }

    /// Records `bindings` as confirmed at `now`, in one transaction: all or none.
    pub async fn confirm_bindings(
        &self,
        bindings: &[Binding],
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::database)?;
        for binding in bindings {
            let insert = match &binding.reference {
                Some(reference) => sqlx::query(
                    "INSERT OR IGNORE INTO secret_bindings (reference, destination, confirmed_at)
                     VALUES (?, ?, ?)",
                )
                .bind(reference),
                None => sqlx::query(
                    "INSERT OR IGNORE INTO destination_bindings (destination, confirmed_at)
                     VALUES (?, ?)",
                ),
            };
            insert
                .bind(&binding.destination)
                .bind(millis(now))
                .execute(&mut *tx)
                .await
                .map_err(StoreError::database)?;
        }
        tx.commit().await.map_err(StoreError::database)
    }
}
