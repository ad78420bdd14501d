//! Providers, their credentials, combos, aliases and the default route: list, create, update,
//! delete; config export and import.
//!
//! Every operation is one edit of the config form through the [`ConfigEditor`]: it is
//! validated whole, saved, then applied, or refused with the field named and nothing changed.
//! Secrets are write-only: a secret sent with a credential goes to the secret store (the OS
//! keychain) and the form keeps only the `keychain:provider/credential` reference; responses
//! say whether a secret is set and show at most its last four characters.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::CredentialKey;
use switchyard_core::binding::{Binding, Confirmed};
use switchyard_core::resilience::registry::ResetScope;
use switchyard_core::resilience::{CredentialKind, SelectionStrategy};
use switchyard_core::settings::{BreakerProfile, BreakerSettings};
use switchyard_secrets::{Secret, SecretId, SecretRef, SecretStore};
use ts_rs::TS;

use super::Services;
use crate::config::editor::CONFIRMS_NOTHING;
use crate::config::{
    AliasForm, ComboForm, Config, ConfigForm, CredentialForm, EditError, ModelEntry, ModelForm,
    OpenAiApi, Problem, ProviderForm, ProviderKind, model_list,
};
use crate::oauth::blocking;
use crate::proxy::Routes;

/// A provider as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct ProviderView {
    pub id: String,
    /// The catalogue preset it names, as configured.
    pub preset: Option<String>,
    /// As configured, else the preset's.
    pub kind: ProviderKind,
    /// As configured; `null` means the kind's public endpoint.
    pub base_url: Option<String>,
    /// Where requests go.
    pub effective_base_url: String,
    pub profile: Option<BreakerProfile>,
    pub breaker: Option<BreakerSettings>,
    pub selection: SelectionStrategy,
    /// As written: a plain id, or a table with the model's facts.
    #[serde(serialize_with = "model_list::serialize")]
    #[ts(as = "Vec<ModelEntry>")]
    pub models: Vec<ModelForm>,
    pub headers: std::collections::BTreeMap<String, String>,
    pub credentials: Vec<ProviderCredential>,
    /// Every binding the provider's credentials (the keyless one a provider without keys
    /// routes with too) still need confirmed: where its requests would go (`reference` null)
    /// and which secret would go there. While any is listed the credentials that need it are
    /// benched (`destination_unconfirmed` or `credential_unconfirmed`); `POST
    /// /api/providers/{id}/confirm` confirms them all, after showing them.
    pub unconfirmed: Vec<Binding>,
    /// Same-dialect requests are forwarded as the client sent them.
    pub passthrough: bool,
    /// `kind = "openai"` only: the API requests go to unless a model says otherwise; `null`
    /// means the default, Chat Completions.
    pub api: Option<OpenAiApi>,
}

/// A credential as the API shows it: never its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ProviderCredential {
    pub id: String,
    pub kind: CredentialKind,
    pub enabled: bool,
    pub priority: u32,
    pub secret: SecretView,
    /// The bindings this credential needs that the user never confirmed: (secret reference,
    /// destination) pairs, and destinations its requests would go to (`reference` null).
    /// While any is listed the credential is benched with status `unconfirmed`. Confirm with
    /// `POST .../credentials/{id}/confirm` after showing them.
    pub unconfirmed: Vec<Binding>,
}

/// What may be shown about a credential's secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct SecretView {
    /// A secret is configured and was read.
    pub set: bool,
    /// Where it is: `env:VAR`, `file:/path` or `keychain:provider/credential`.
    pub reference: Option<String>,
    /// Why the configured secret cannot be read now (`secret_unavailable`): the credential
    /// is out until it can. Read again every few seconds, and at once with
    /// `POST /api/providers/{id}/credentials/{credential}/retry`.
    pub unavailable: Option<String>,
    /// `…` and the last four characters of a key in the keychain (none for secrets under
    /// twelve characters, and none for `env:` values: see `docs/security.md`).
    pub hint: Option<String>,
}

/// A new credential. `secret` is the key itself (kept in the OS keychain); `secret_ref` points
/// at one kept elsewhere (`env:VAR`). At most one of the two.
#[derive(Clone, Debug, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct CredentialInput {
    pub id: String,
    #[serde(default)]
    #[ts(optional)]
    pub kind: Option<CredentialKind>,
    #[serde(default)]
    #[ts(optional)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[ts(optional)]
    pub priority: Option<u32>,
    #[serde(default)]
    #[ts(optional)]
    pub secret: Option<String>,
    #[serde(default)]
    #[ts(optional)]
    pub secret_ref: Option<String>,
    /// The caller showed the user where this credential's secret goes and the user agreed:
    /// its new (reference, destination) pairs are confirmed with the edit.
    #[serde(default)]
    #[ts(optional)]
    pub confirm: Option<bool>,
}

/// Changes to a credential; absent fields stay as they are.
#[derive(Clone, Debug, Default, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct CredentialPatch {
    #[serde(default)]
    #[ts(optional)]
    pub kind: Option<CredentialKind>,
    #[serde(default)]
    #[ts(optional)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[ts(optional)]
    pub priority: Option<u32>,
    #[serde(default)]
    #[ts(optional)]
    pub secret: Option<String>,
    #[serde(default)]
    #[ts(optional)]
    pub secret_ref: Option<String>,
    /// As [`CredentialInput::confirm`].
    #[serde(default)]
    #[ts(optional)]
    pub confirm: Option<bool>,
}

/// Every alias and the default route: what `GET /api/aliases` shows and `PUT` replaces whole.
/// They are one list because precedence between aliases depends on all of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct AliasesForm {
    /// In the order written, which breaks ties between equally specific patterns.
    pub aliases: Vec<AliasForm>,
    /// A combo or `provider/model` for names nothing else routes; `null` leaves them a 404.
    #[serde(default)]
    pub default_route: Option<String>,
}

/// What an import replaced the config with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ImportSummary {
    pub providers: usize,
    pub combos: usize,
    /// `true` when the config was only checked, not applied.
    pub dry_run: bool,
    /// Everything the imported config would send where, each `new` (never confirmed: its
    /// credentials stay benched until confirmed) or `known`: every destination its requests
    /// go to (`reference` null: prompts, and whatever they carry, keyless providers included)
    /// and every (secret reference, destination) pair.
    pub pairs: Vec<ImportedPair>,
    /// The file's `[team]` section, when it has one: from the next start this instance
    /// connects to the database it names.
    pub team: Option<ImportedTeam>,
    /// Credentials whose secret cannot be read yet (`provider/credential: why`): accepted,
    /// they serve once it can be read.
    pub waiting: Vec<String>,
}

/// One binding an imported config needs, and whether the user confirmed it before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ImportedPair {
    /// The secret sent there; `null` for where requests go.
    pub reference: Option<String>,
    pub destination: String,
    /// `new` or `known`.
    pub state: PairState,
    /// The credentials that send it (`provider/credential`).
    pub credentials: Vec<String>,
}

/// The `[team]` section of an imported config (docs/team.md): at the next start this instance
/// connects to the `PostgreSQL` database the reference names, shares health state with every
/// instance there and trusts what they write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ImportedTeam {
    /// Where the database URL is read from (`env:VAR`, `keychain:team/database`): a
    /// reference, never the URL.
    pub database_url: String,
    /// The instance name the file sets, if any.
    pub instance: Option<String>,
    /// `known` when the running config names the same database reference, else `new`.
    pub state: PairState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum PairState {
    New,
    Known,
}

impl Services {
    // -- providers ------------------------------------------------------------------------

    pub fn providers(&self) -> Vec<ProviderView> {
        let routes = self.proxy.routes();
        let config = routes.config();
        config.form.providers.iter().map(|p| provider_view(&routes, p)).collect()
    }

    pub fn provider(&self, id: &str) -> Result<ProviderView, EditError> {
        let routes = self.proxy.routes();
        let form = routes
            .config()
            .form
            .providers
            .iter()
            .find(|p| p.id == id)
            .ok_or_else(|| no_provider(id))?;
        Ok(provider_view(&routes, form))
    }

    /// Confirms what provider `provider`'s credentials (only `credential`, when given) still
    /// need confirmed: the user saw the pairs and agreed. Returns the provider as it is now.
    pub async fn confirm_credentials(
        &self,
        provider: &str,
        credential: Option<&str>,
    ) -> Result<ProviderView, EditError> {
        let view = self.provider(provider)?;
        if let Some(id) = credential
            && !view.credentials.iter().any(|c| c.id == id)
        {
            return Err(no_credential(provider, id));
        }
        let confirms = |key: &CredentialKey, _: &Binding| {
            key.provider.as_str() == provider
                && credential.is_none_or(|id| key.credential.as_str() == id)
        };
        let confirmed = self.confirm(&confirms).await?;
        tracing::info!(provider, bindings = confirmed.len(), "destinations confirmed");
        self.provider(provider)
    }

    /// Reads `provider`'s `credential`'s secret again now (Retry now), whatever its wait.
    pub async fn retry_secret(
        &self,
        provider: &str,
        credential: &str,
    ) -> Result<ProviderView, EditError> {
        let view = self.provider(provider)?;
        if !view.credentials.iter().any(|c| c.id == credential) {
            return Err(no_credential(provider, credential));
        }
        let key = CredentialKey { provider: provider.into(), credential: credential.into() };
        self.editor.retry_secret(self.proxy.config(), &key).await;
        self.provider(provider)
    }

    /// Adds a provider. Its credentials, if any, carry secret references only. With
    /// `confirm`, where its requests go is confirmed with it (see [`own_destinations`]).
    pub async fn create_provider(
        &self,
        form: ProviderForm,
        confirm: bool,
    ) -> Result<ProviderView, EditError> {
        let id = form.id.clone();
        let at = format!("providers[{}]", self.proxy.config().form.providers.len());
        let confirms = own_destinations(&id, confirm);
        self.edit_confirming(&confirms, |config| {
            append_new(&mut config.providers, form, |p| &p.id, "id", "provider")
        })
        .await
        .map_err(|e| relative(e, &at))?;
        self.provider(&id)
    }

    /// Changes the provider's fields named in `patch` (a JSON merge patch of its form; `id`
    /// and `credentials` cannot be changed here). With `confirm`, the destinations the change
    /// introduces are confirmed with it, never a secret sent there.
    pub async fn update_provider(
        &self,
        id: &str,
        patch: &Value,
        confirm: bool,
    ) -> Result<ProviderView, EditError> {
        let Value::Object(fields) = patch else {
            return Err(Problem::new("(body)", "expected a JSON object of provider fields").into());
        };
        if let Some(new_id) = fields.get("id").and_then(Value::as_str)
            && new_id != id
        {
            return Err(Problem::new(
                "id",
                "a provider's id cannot change (combos and keychain entries name it); create a new provider instead",
            )
            .into());
        }
        if fields.contains_key("credentials") {
            return Err(Problem::new(
                "credentials",
                format!("edit credentials through /api/providers/{id}/credentials"),
            )
            .into());
        }
        let index = provider_index(&self.proxy.config().form, id)?;
        let confirms = own_destinations(id, confirm);
        self.edit_confirming(&confirms, |config| {
            let index = provider_index(config, id)?;
            let slot = &mut config.providers[index];
            let mut merged = serde_json::to_value(&*slot).expect("forms serialize");
            merge_patch(&mut merged, patch);
            *slot = from_json(merged)?;
            Ok(())
        })
        .await
        .map_err(|e| relative(e, &format!("providers[{index}]")))?;
        self.provider(id)
    }

    /// Removes a provider and the secrets it kept in the keychain. Refused while a combo routes
    /// to it.
    pub async fn delete_provider(&self, id: &str) -> Result<(), EditError> {
        let (removed, _) = self
            .edit(|config| {
                let index = provider_index(config, id)?;
                let users = combos_using(config, id, None);
                if !users.is_empty() {
                    return Err(EditError::Conflict(Problem::new(
                        "id",
                        format!(
                            "combos {users:?} route to provider \"{id}\"; remove it from them first"
                        ),
                    )));
                }
                let on_provider =
                    |to: &str| crate::config::parse_target(to).is_some_and(|(p, _)| p == id);
                let users = routes_using(config, on_provider);
                if !users.is_empty() {
                    return Err(EditError::Conflict(Problem::new(
                        "id",
                        format!("{users:?} route to provider \"{id}\"; point them elsewhere first"),
                    )));
                }
                Ok(config.providers.remove(index))
            })
            .await?;
        for credential in &removed.credentials {
            self.forget_secret(&removed.id, credential).await;
        }
        self.registry.reset(&ResetScope::Provider { provider: id.into() }, self.clock.now());
        Ok(())
    }

    // -- credentials ----------------------------------------------------------------------

    /// Adds a credential to a provider, storing its secret in the keychain when one is sent.
    pub async fn create_credential(
        &self,
        provider: &str,
        input: CredentialInput,
    ) -> Result<ProviderCredential, EditError> {
        let current = self.proxy.config();
        let index = provider_index(&current.form, provider)?;
        let count = current.form.providers[index].credentials.len();
        let at = format!("providers[{index}].credentials[{count}]");
        let mut form = CredentialForm::new(input.id.clone());
        form.kind = input.kind.unwrap_or_default();
        form.enabled = input.enabled.unwrap_or(true);
        form.priority = input.priority.unwrap_or(0);
        let id = input.id.clone();
        let confirm = input.confirm.unwrap_or(false);
        let staged = self.stage_secret(provider, &id, input.secret, input.secret_ref).await?;
        form.secret = staged.reference.clone();
        let confirms = own_pairs(provider, &id, typed(&staged), confirm);
        let edited = self
            .edit_confirming(&confirms, |config| {
                let index = provider_index(config, provider)?;
                let credentials = &mut config.providers[index].credentials;
                append_new(credentials, form, |c| &c.id, "id", "credential")
            })
            .await
            .map_err(|e| relative(e, &at));
        self.settle_secret(staged, edited.is_ok()).await;
        edited?;
        self.credential(provider, &id)
    }

    /// Changes a credential's fields; a new `secret` replaces the one in the keychain, and with
    /// it goes the old key's cooldown and lockouts.
    pub async fn update_credential(
        &self,
        provider: &str,
        id: &str,
        patch: CredentialPatch,
    ) -> Result<ProviderCredential, EditError> {
        let current = self.proxy.config();
        let index = provider_index(&current.form, provider)?;
        let Some(position) =
            current.form.providers[index].credentials.iter().position(|c| c.id == id)
        else {
            return Err(no_credential(provider, id));
        };
        let at = format!("providers[{index}].credentials[{position}]");
        let confirm = patch.confirm.unwrap_or(false);
        let staged = self.stage_secret(provider, id, patch.secret, patch.secret_ref).await?;
        let confirms = own_pairs(provider, id, typed(&staged), confirm);
        let replaced = staged.reference.is_some();
        let edited = self
            .edit_confirming(&confirms, |config| {
                let index = provider_index(config, provider)?;
                let p = &mut config.providers[index];
                let c = p
                    .credentials
                    .iter_mut()
                    .find(|c| c.id == id)
                    .ok_or_else(|| no_credential(provider, id))?;
                if let Some(kind) = patch.kind {
                    c.kind = kind;
                }
                if let Some(enabled) = patch.enabled {
                    c.enabled = enabled;
                }
                if let Some(priority) = patch.priority {
                    c.priority = priority;
                }
                if staged.reference.is_some() {
                    c.secret.clone_from(&staged.reference);
                }
                Ok(())
            })
            .await
            .map_err(|e| relative(e, &at));
        self.settle_secret(staged, edited.is_ok()).await;
        edited?;
        if replaced {
            // What benched the old key (refused, spent, rate-limited) says nothing of the new.
            self.registry.reset(
                &ResetScope::Credential { provider: provider.into(), credential: id.into() },
                self.clock.now(),
            );
        }
        self.credential(provider, id)
    }

    /// Removes a credential and its keychain entry. Refused while a combo target pins it.
    pub async fn delete_credential(&self, provider: &str, id: &str) -> Result<(), EditError> {
        let (removed, _) = self
            .edit(|config| {
                let users = combos_using(config, provider, Some(id));
                let index = provider_index(config, provider)?;
                let p = &mut config.providers[index];
                let position = p
                    .credentials
                    .iter()
                    .position(|c| c.id == id)
                    .ok_or_else(|| no_credential(provider, id))?;
                if !users.is_empty() {
                    return Err(EditError::Conflict(Problem::new(
                        "id",
                        format!(
                            "combos {users:?} pin credential \"{id}\"; change those targets first"
                        ),
                    )));
                }
                Ok(p.credentials.remove(position))
            })
            .await?;
        self.forget_secret(provider, &removed).await;
        self.registry.reset(
            &ResetScope::Credential { provider: provider.into(), credential: id.into() },
            self.clock.now(),
        );
        Ok(())
    }

    fn credential(&self, provider: &str, id: &str) -> Result<ProviderCredential, EditError> {
        self.provider(provider)?
            .credentials
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(|| no_credential(provider, id))
    }

    /// Puts a sent secret in the keychain ahead of the edit that will reference it, keeping
    /// what was there so a refused edit can put it back.
    async fn stage_secret(
        &self,
        provider: &str,
        credential: &str,
        secret: Option<String>,
        secret_ref: Option<String>,
    ) -> Result<Staged, EditError> {
        match (secret, secret_ref) {
            (Some(_), Some(_)) => Err(Problem::new(
                "secret",
                "send either secret (the key itself) or secret_ref (env:VAR), not both",
            )
            .into()),
            (None, Some(reference)) => {
                SecretRef::parse(&reference).map_err(|e| Problem::new("secret_ref", e))?;
                Ok(Staged { reference: Some(reference), written: None })
            }
            (None, None) => Ok(Staged { reference: None, written: None }),
            (Some(value), None) => {
                if value.trim().is_empty() || value.len() > 8192 || value.contains(['\r', '\n']) {
                    return Err(Problem::new(
                        "secret",
                        "must be the key itself: not empty, one line, at most 8192 bytes",
                    )
                    .into());
                }
                let id = SecretId::new(provider, credential).map_err(|e| Problem::new("id", e))?;
                let store = Arc::clone(self.editor.secrets());
                let secret = Secret::new(value);
                let key = id.clone();
                let previous = blocking(move || {
                    store.check_available()?;
                    let previous = store.get(&key)?;
                    store.set(&key, &secret)?;
                    Ok(previous)
                })
                .await
                .map_err(|e| {
                    Problem::new(
                        "secret",
                        format!(
                            "{e}; keep the key in an environment variable and send secret_ref \"env:VAR\" instead"
                        ),
                    )
                })?;
                Ok(Staged {
                    reference: Some(SecretRef::Keychain(id.clone()).to_string()),
                    written: Some((id, previous)),
                })
            }
        }
    }

    /// After the edit: a refused edit restores the keychain as it was.
    async fn settle_secret(&self, staged: Staged, accepted: bool) {
        let Some((id, previous)) = staged.written else { return };
        if accepted {
            return;
        }
        let store = Arc::clone(self.editor.secrets());
        let restored = blocking(move || match previous {
            Some(previous) => store.set(&id, &previous),
            None => store.delete(&id).map(drop),
        })
        .await;
        if let Err(error) = restored {
            tracing::warn!(%error, "cannot restore a keychain entry after a refused edit");
        }
    }

    /// Deletes the keychain entry a removed credential owned (`keychain:provider/credential`
    /// naming itself, or an OAuth credential's tokens); secrets kept elsewhere are not ours to
    /// delete.
    async fn forget_secret(&self, provider: &str, credential: &CredentialForm) {
        if credential.kind == CredentialKind::Oauth {
            // Its tokens are its keychain entry.
            let (p, c) = (provider.into(), credential.id.as_str().into());
            if let Err(error) = self.oauth.sign_out(&p, &c).await {
                tracing::warn!(%error, "cannot delete the OAuth tokens of a removed credential");
            }
            return;
        }
        let Some(Ok(SecretRef::Keychain(id))) = credential.secret.as_deref().map(SecretRef::parse)
        else {
            return;
        };
        if id.provider() != provider || id.credential() != credential.id {
            return;
        }
        let store = Arc::clone(self.editor.secrets());
        if let Err(error) = blocking(move || store.delete(&id)).await {
            tracing::warn!(%error, "cannot delete the keychain entry of a removed credential");
        }
    }

    // -- combos ---------------------------------------------------------------------------

    pub fn combos(&self) -> Vec<ComboForm> {
        self.proxy.config().form.combos.clone()
    }

    pub fn combo(&self, name: &str) -> Result<ComboForm, EditError> {
        self.proxy
            .config()
            .form
            .combos
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .ok_or_else(|| no_combo(name))
    }

    pub async fn create_combo(&self, combo: ComboForm) -> Result<ComboForm, EditError> {
        let name = combo.name.clone();
        let at = format!("combos[{}]", self.proxy.config().form.combos.len());
        self.edit(|config| append_new(&mut config.combos, combo, |c| &c.name, "name", "combo"))
            .await
            .map_err(|e| relative(e, &at))?;
        self.combo(&name)
    }

    /// Replaces a combo whole (its name may change).
    pub async fn replace_combo(
        &self,
        name: &str,
        combo: ComboForm,
    ) -> Result<ComboForm, EditError> {
        let new_name = combo.name.clone();
        let index = combo_index(&self.proxy.config().form, name)?;
        self.edit(|config| {
            let index = combo_index(config, name)?;
            if combo.name != name && config.combos.iter().any(|c| c.name == combo.name) {
                return Err(taken("name", "combo", &combo.name));
            }
            // Aliases and the default route follow a rename: they name the combo, not
            // whatever takes its old name.
            if combo.name != name {
                for alias in config.aliases.iter_mut().filter(|a| a.to == name) {
                    alias.to.clone_from(&combo.name);
                }
                if let Some(to) = config.default_route.as_mut().filter(|to| to.as_str() == name) {
                    to.clone_from(&combo.name);
                }
            }
            config.combos[index] = combo;
            Ok(())
        })
        .await
        .map_err(|e| relative(e, &format!("combos[{index}]")))?;
        self.combo(&new_name)
    }

    /// Puts a combo's targets in a new order: `order` lists every current index once.
    pub async fn reorder_combo(&self, name: &str, order: &[usize]) -> Result<ComboForm, EditError> {
        self.edit(|config| {
            let index = combo_index(config, name)?;
            let combo = &mut config.combos[index];
            let n = combo.targets.len();
            let mut seen = vec![false; n];
            let permutation = order.len() == n
                && order.iter().all(|&i| i < n && !std::mem::replace(&mut seen[i], true));
            if !permutation {
                let problem =
                    format!("must list each target index 0..{n} exactly once; got {order:?}");
                return Err(Problem::new("order", problem).into());
            }
            combo.targets = order.iter().map(|&i| combo.targets[i].clone()).collect();
            Ok(())
        })
        .await?;
        self.combo(name)
    }

    pub async fn delete_combo(&self, name: &str) -> Result<(), EditError> {
        self.edit(|config| {
            let index = combo_index(config, name)?;
            let users = routes_using(config, |to| to == name);
            if !users.is_empty() {
                return Err(EditError::Conflict(Problem::new(
                    "name",
                    format!("{users:?} route to combo \"{name}\"; point them elsewhere first"),
                )));
            }
            config.combos.remove(index);
            Ok(())
        })
        .await?;
        Ok(())
    }

    // -- aliases ----------------------------------------------------------------------------

    pub fn aliases(&self) -> AliasesForm {
        let form = &self.proxy.config().form;
        AliasesForm { aliases: form.aliases.clone(), default_route: form.default_route.clone() }
    }

    /// Replaces every alias and the default route. Field paths in a refusal (`aliases[2].to`,
    /// `default_route`) are the body's own.
    pub async fn replace_aliases(&self, form: AliasesForm) -> Result<AliasesForm, EditError> {
        self.edit(|config| {
            config.aliases = form.aliases;
            config.default_route = form.default_route;
            Ok(())
        })
        .await?;
        Ok(self.aliases())
    }

    // -- export and import ----------------------------------------------------------------

    /// The running config as a config file: references only, never a secret.
    pub fn export_config(&self) -> String {
        self.proxy.config().form.to_toml()
    }

    /// Replaces the whole config with `text` (a config file), or with `dry_run` only checks it.
    /// `confirm`: the caller listed the summary's pairs to the user, who agreed to all of them.
    pub async fn import_config(
        &self,
        text: &str,
        dry_run: bool,
        confirm: bool,
    ) -> Result<ImportSummary, EditError> {
        let form = ConfigForm::from_toml(text)?;
        let checked = self.editor.check(form.clone()).await?;
        let summary = ImportSummary {
            providers: form.providers.len(),
            combos: form.combos.len(),
            dry_run,
            pairs: imported_pairs(&checked, &self.proxy.confirmed()),
            team: imported_team(&form, &self.proxy.config().form),
            waiting: checked
                .unavailable_secrets()
                .into_iter()
                .map(|(key, why)| format!("{}/{}: {why}", key.provider, key.credential))
                .collect(),
        };
        if !dry_run {
            let confirms: &(dyn Fn(&CredentialKey, &Binding) -> bool + Send + Sync) =
                // Never a client's login: only its own Confirm, which says so, sends it elsewhere.
                if confirm { &|_, b: &Binding| !b.is_login() } else { CONFIRMS_NOTHING };
            self.replace_config(form, confirms).await?;
        }
        Ok(summary)
    }
}

/// A secret written ahead of an edit, and what it replaced.
struct Staged {
    reference: Option<String>,
    written: Option<(SecretId, Option<Secret>)>,
}

/// Every binding `config` needs, `new` or `known` against `confirmed`, with who needs it.
pub fn imported_pairs(config: &Config, confirmed: &Confirmed) -> Vec<ImportedPair> {
    let mut pairs: Vec<ImportedPair> = Vec::new();
    for exposure in config.exposures() {
        let who = format!("{}/{}", exposure.key.provider, exposure.key.credential);
        for binding in exposure.bindings {
            let at = pairs.iter().position(|p| {
                p.reference == binding.reference && p.destination == binding.destination
            });
            let at = at.unwrap_or_else(|| {
                let known = confirmed.contains(&binding);
                pairs.push(ImportedPair {
                    reference: binding.reference,
                    destination: binding.destination,
                    state: if known { PairState::Known } else { PairState::New },
                    credentials: Vec::new(),
                });
                pairs.len() - 1
            });
            if !pairs[at].credentials.contains(&who) {
                pairs[at].credentials.push(who.clone());
            }
        }
    }
    pairs
}

/// The `[team]` section of `imported`, `new` unless `running` names the same database.
pub fn imported_team(imported: &ConfigForm, running: &ConfigForm) -> Option<ImportedTeam> {
    let team = &imported.team;
    (!team.is_off()).then(|| ImportedTeam {
        database_url: team.database_url.clone(),
        instance: team.instance.clone(),
        state: if team.database_url == running.team.database_url {
            PairState::Known
        } else {
            PairState::New
        },
    })
}

/// What a credential edit confirms: with `confirm`, every new binding of that credential;
/// without, only a secret the user typed for it (kept under its own keychain name), to its
/// provider (which confirms that destination too).
fn own_pairs<'a>(
    provider: &'a str,
    credential: &'a str,
    typed: Option<String>,
    confirm: bool,
) -> impl Fn(&CredentialKey, &Binding) -> bool + Send + Sync + 'a {
    move |key, pair| {
        let own = key.provider.as_str() == provider && key.credential.as_str() == credential;
        own && (confirm || (typed.is_some() && typed == pair.reference))
    }
}

/// What a provider edit confirms: with `confirm` (the user typed its URLs in this edit and
/// agreed), the destination bindings of that provider, so a keyless local server added on the
/// Providers page is used at once; never a secret binding, which its credential confirms.
fn own_destinations(
    provider: &str,
    confirm: bool,
) -> impl Fn(&CredentialKey, &Binding) -> bool + Send + Sync + '_ {
    move |key, binding| {
        confirm && key.provider.as_str() == provider && binding.is_destination_only()
    }
}

/// The reference of a secret the user typed in this call (stored in the keychain for it).
fn typed(staged: &Staged) -> Option<String> {
    staged.written.as_ref().and(staged.reference.clone())
}

fn provider_view(routes: &Routes, form: &ProviderForm) -> ProviderView {
    let config = routes.config();
    let running = config.provider(&form.id.as_str().into());
    let credentials = form
        .credentials
        .iter()
        .map(|c| {
            let secret = running
                .and_then(|p| p.credential(&c.id.as_str().into()))
                .and_then(|c| c.secret.as_ref());
            ProviderCredential {
                id: c.id.clone(),
                kind: c.kind,
                enabled: c.enabled,
                priority: c.priority,
                unconfirmed: routes
                    .unconfirmed_for(&CredentialKey {
                        provider: form.id.as_str().into(),
                        credential: c.id.as_str().into(),
                    })
                    .map(|u| u.missing.clone())
                    .unwrap_or_default(),
                secret: SecretView {
                    set: secret.is_some_and(|s| s.current().is_ok()),
                    reference: c.secret.clone(),
                    unavailable: secret.and_then(|s| s.unavailable()),
                    // Only for keys the user stored: the tail of an `env:` value would let whoever
                    // can edit the config read four characters of any variable, one at a time.
                    hint: secret
                        .filter(|_| c.secret.as_deref().is_some_and(|r| r.starts_with("keychain:")))
                        .and_then(|s| s.current().ok())
                        .map(|s| s.hint()),
                },
            }
        })
        .collect();
    // A form in the config always validated, so `running` exists; the fallbacks only keep
    // this function total.
    let kind = running.map(|p| p.kind).or(form.resolved_kind()).unwrap_or(ProviderKind::Openai);
    ProviderView {
        id: form.id.clone(),
        preset: form.preset.clone(),
        kind,
        base_url: form.base_url.clone(),
        effective_base_url: running
            .map_or_else(|| kind.default_base_url().to_owned(), |p| p.base_url.clone()),
        profile: form.profile,
        breaker: form.breaker.clone(),
        selection: form.selection,
        models: form.models.clone(),
        headers: form.headers.clone(),
        credentials,
        unconfirmed: routes.unconfirmed_of(&form.id.as_str().into()),
        passthrough: running.map_or(form.passthrough != Some(false), |p| p.passthrough),
        api: form.api,
    }
}

fn provider_index(config: &ConfigForm, id: &str) -> Result<usize, EditError> {
    config.providers.iter().position(|p| p.id == id).ok_or_else(|| no_provider(id))
}

fn combo_index(config: &ConfigForm, name: &str) -> Result<usize, EditError> {
    config.combos.iter().position(|c| c.name == name).ok_or_else(|| no_combo(name))
}

/// The combos with a target on `provider` (pinned to `credential`, when given).
fn combos_using(config: &ConfigForm, provider: &str, credential: Option<&str>) -> Vec<String> {
    config
        .combos
        .iter()
        .filter(|combo| {
            combo.targets.iter().any(|t| {
                let on_provider =
                    crate::config::parse_target(&t.target).is_some_and(|(p, _)| p == provider);
                on_provider && credential.is_none_or(|id| t.credential.as_deref() == Some(id))
            })
        })
        .map(|combo| combo.name.clone())
        .collect()
}

/// The aliases (`aliases[0] (claude-*)`) and `default_route` whose route `uses` accepts.
fn routes_using(config: &ConfigForm, uses: impl Fn(&str) -> bool) -> Vec<String> {
    let aliases = config
        .aliases
        .iter()
        .enumerate()
        .filter(|(_, a)| uses(&a.to))
        .map(|(i, a)| format!("aliases[{i}] ({})", a.pattern));
    let default =
        config.default_route.as_deref().filter(|to| uses(to)).map(|_| "default_route".to_owned());
    aliases.chain(default).collect()
}

/// Appends `item` unless an item of the same name is there already (a 409 on `field`).
fn append_new<T>(
    list: &mut Vec<T>,
    item: T,
    name: impl Fn(&T) -> &String,
    field: &str,
    what: &str,
) -> Result<(), EditError> {
    if list.iter().any(|other| name(other) == name(&item)) {
        return Err(taken(field, what, name(&item)));
    }
    list.push(item);
    Ok(())
}

/// A create or rename that would repeat a name.
fn taken(field: &str, what: &str, name: &str) -> EditError {
    EditError::Conflict(Problem::new(field, format!("a {what} \"{name}\" exists already")))
}

fn no_provider(id: &str) -> EditError {
    EditError::NotFound(Problem::new("provider", format!("no provider \"{id}\"")))
}

fn no_credential(provider: &str, id: &str) -> EditError {
    EditError::NotFound(Problem::new(
        "credential",
        format!("provider \"{provider}\" has no credential \"{id}\""),
    ))
}

fn no_combo(name: &str) -> EditError {
    EditError::NotFound(Problem::new("combo", format!("no combo \"{name}\"")))
}

/// Field paths of the edited item, as the caller sent it.
fn relative(error: EditError, prefix: &str) -> EditError {
    match error {
        EditError::Invalid(p) => EditError::Invalid(p.relative_to(prefix)),
        EditError::Conflict(p) => EditError::Conflict(p.relative_to(prefix)),
        other => other,
    }
}

/// RFC 7396: objects merge field by field, `null` removes, anything else replaces.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(into) = target else { unreachable!("made an object above") };
    for (name, value) in fields {
        if value.is_null() {
            into.remove(name);
        } else {
            merge_patch(into.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

/// A form from JSON, naming the field that does not fit.
pub(super) fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "(body)".to_owned() } else { path };
        Problem::new(field, e.inner())
    })
}
