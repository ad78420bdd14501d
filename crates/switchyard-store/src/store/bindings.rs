//! Confirmed bindings: the only record of where the user allowed requests and each secret to
//! go (see `switchyard_core::binding`). Secret bindings (reference, destination) live in
//! `secret_bindings`, destination bindings (no reference) in `destination_bindings`.
//! Confirming a binding again keeps its first confirmation time; rows are removed only by the
//! one-time narrowing of host-wide bindings to paths (`switchyard_core::binding::narrowed`).

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
        self.replace_bindings(&[], bindings, now).await
    }

    /// Removes `removed` and records `added` as confirmed at `now`, in one transaction.
    pub async fn replace_bindings(
        &self,
        removed: &[Binding],
        added: &[Binding],
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::database)?;
        for binding in removed {
            let delete = match &binding.reference {
                Some(reference) => sqlx::query(
                    "DELETE FROM secret_bindings WHERE reference = ? AND destination = ?",
                )
                .bind(reference),
                None => sqlx::query("DELETE FROM destination_bindings WHERE destination = ?"),
            };
            delete
                .bind(&binding.destination)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::database)?;
        }
        // Each kind in one statement over a JSON array: a fleet's first start confirms
        // thousands of bindings, and a statement each cost a round trip to the database
        // thread each (about 140 ms for 2,000 credentials, most of that cold start).
        let (secrets, destinations): (Vec<&Binding>, Vec<&Binding>) =
            added.iter().partition(|b| b.reference.is_some());
        if !secrets.is_empty() {
            let rows: Vec<(&str, &str)> = secrets
                .iter()
                .filter_map(|b| Some((b.reference.as_deref()?, b.destination.as_str())))
                .collect();
            sqlx::query(
                "INSERT OR IGNORE INTO secret_bindings (reference, destination, confirmed_at)
                 SELECT value ->> 0, value ->> 1, ?
                 FROM json_each(?)",
            )
            .bind(millis(now))
            .bind(json_array(&rows))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::database)?;
        }
        if !destinations.is_empty() {
            let rows: Vec<&str> = destinations.iter().map(|b| b.destination.as_str()).collect();
            sqlx::query(
                "INSERT OR IGNORE INTO destination_bindings (destination, confirmed_at)
                 SELECT value, ? FROM json_each(?)",
            )
            .bind(millis(now))
            .bind(json_array(&rows))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::database)?;
        }
        tx.commit().await.map_err(StoreError::database)
    }
}

fn json_array(rows: &impl serde::Serialize) -> String {
    serde_json::to_string(rows).expect("strings serialize")
}
