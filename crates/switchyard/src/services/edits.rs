//! Edits of the running config, applied: the config editor validates, records and saves an
//! edit and hands it back; the proxy is reconfigured here, while the editor's turn is held, so
//! the next edit starts from the config this one applied.

use std::sync::Arc;

use switchyard_core::binding::Binding;

use super::Services;
use crate::config::editor::{Accepted, CONFIRMS_NOTHING, Confirms};
use crate::config::{Config, ConfigForm, EditError};

impl Services {
    /// Applies `change` to a copy of the running form; validates, saves and applies the
    /// result. Returns what `change` returned and the config now running.
    pub(super) async fn edit<T>(
        &self,
        change: impl FnOnce(&mut ConfigForm) -> Result<T, EditError>,
    ) -> Result<(T, Arc<Config>), EditError> {
        self.edit_confirming(CONFIRMS_NOTHING, change).await
    }

    /// [`Self::edit`], confirming the new bindings `confirms` accepts along with it.
    pub(super) async fn edit_confirming<T>(
        &self,
        confirms: Confirms<'_>,
        change: impl FnOnce(&mut ConfigForm) -> Result<T, EditError>,
    ) -> Result<(T, Arc<Config>), EditError> {
        let turn = self.editor.turn().await;
        let running = self.proxy.config();
        let (out, accepted) =
            turn.edit(&running, &self.proxy.confirmed(), confirms, change).await?;
        Ok((out, self.apply(accepted)))
    }

    /// Replaces the whole config (an import), confirming the new bindings `confirms` accepts.
    pub(super) async fn replace_config(
        &self,
        form: ConfigForm,
        confirms: Confirms<'_>,
    ) -> Result<Arc<Config>, EditError> {
        let turn = self.editor.turn().await;
        let accepted = turn.replace(form, &self.proxy.confirmed(), confirms).await?;
        Ok(self.apply(accepted))
    }

    /// Confirms every binding the running config's credentials still need that `confirms`
    /// accepts; returns them. Credentials they complete are used from the next request on.
    pub(super) async fn confirm(&self, confirms: Confirms<'_>) -> Result<Vec<Binding>, EditError> {
        let turn = self.editor.turn().await;
        let new = turn.confirm(&self.proxy.config(), &self.proxy.confirmed(), confirms).await?;
        self.proxy.confirm(new.iter().cloned());
        Ok(new)
    }

    /// Routes by `accepted` from now on. Called with the turn that accepted it held.
    fn apply(&self, accepted: Accepted) -> Arc<Config> {
        let Accepted { config, confirmed } = accepted;
        self.proxy.add_confirmed(confirmed);
        self.proxy.reconfigure(Arc::clone(&config));
        tracing::info!(
            providers = config.providers.len(),
            combos = config.combos.len(),
            "config changed"
        );
        config
    }
}
