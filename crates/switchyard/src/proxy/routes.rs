//! The routing table: one validated config and what is derived from it for routing (the
//! provider rosters, the retry budget, the HTTP client).
//!
//! Invariant: a request reads one [`Routes`] for its whole life. A config change builds a new
//! table and swaps it in whole, so a request never sees half of an edit, and requests in
//! flight finish on the table they started with.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use switchyard_core::binding::{self, Binding, Confirmed, Unconfirmed};
use switchyard_core::resilience::{CredentialKind, CredentialSelector, HealthRegistry};
use switchyard_core::routing::{
    Combo, ProviderRoster, RetryBudget, RouteStrategy, Target, TargetOrderer, plan,
};
use switchyard_core::settings::AutoPreset;
use switchyard_core::{CredentialKey, ProviderId, UnixMillis};
use switchyard_providers::executor::Executor;
use ts_rs::TS;

use super::slots::Slots;
use crate::config::{Config, ProviderConfig, parse_target};

/// One combo's readiness, as the health page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ComboHealth {
    pub name: String,
    /// Candidates (target and credential) that could serve now.
    pub eligible: usize,
    /// Candidates in all.
    pub candidates: usize,
}

#[derive(Debug)]
pub struct Routes {
    pub(super) config: Arc<Config>,
    rosters: Vec<ProviderRoster>,
    pub(super) budget: RetryBudget,
    pub(super) executor: Executor,
    /// Credentials whose requests would go where the user never confirmed, or that would send
    /// a secret where the user never confirmed it for: no request of theirs is sent and no
    /// secret of theirs handed out while they are here (see [`Routes::unconfirmed`]).
    unconfirmed: Vec<Unconfirmed>,
    /// The `max_in_flight` caps (see `slots`).
    pub(super) slots: Slots,
    /// `auto`, `auto:fast`, `auto:cheap` and `auto:smart`: every model configured
    /// that `[settings.auto] allow` lets in, ranked per request.
    auto: Vec<(AutoPreset, Combo)>,
    /// Some credential is of kind `client`.
    client_credentials: bool,
}

impl Routes {
    /// The table for `config`. `executor` (the previous table's HTTP client, with its warm
    /// connection pool) is kept when the connect timeout did not change.
    /// `confirmed` is every binding the user confirmed.
    pub(super) fn build(
        config: Arc<Config>,
        seed: u64,
        executor: &Executor,
        confirmed: &Confirmed,
    ) -> Self {
        let rosters = config
            .providers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let credentials: Vec<_> =
                    p.routable_credentials().into_iter().map(|c| c.id.clone()).collect();
                ProviderRoster {
                    provider: p.id.clone(),
                    selector: CredentialSelector::new(
                        p.selection,
                        credentials.len(),
                        seed ^ (i as u64),
                    ),
                    credentials,
                }
            })
            .collect();
        let routing = &config.routing;
        let budget = RetryBudget::new(
            f64::from(routing.retry_budget_percent) / 100.0,
            routing.retry_budget_min_per_second,
        );
        let executor = if executor.connect_timeout() == config.timeouts.connect {
            executor.clone()
        } else {
            Executor::new(config.timeouts.connect)
                .expect("the HTTP client builds with static settings")
        };
        let unconfirmed = binding::unconfirmed(&config.exposures(), confirmed);
        let slots = Slots::of(&config);
        let pool = auto_pool(&config);
        let auto = AutoPreset::ALL
            .into_iter()
            .map(|preset| {
                let name = preset.model().to_owned();
                let combo = Combo {
                    name,
                    strategy: RouteStrategy::Auto,
                    targets: pool.clone(),
                    hedge: None,
                };
                (preset, combo)
            })
            .collect();
        let client_credentials = config
            .providers
            .iter()
            .flat_map(|p| &p.credentials)
            .any(|c| c.kind == CredentialKind::Client);
        Self { config, rosters, budget, executor, unconfirmed, slots, auto, client_credentials }
    }

    /// Every credential benched as unconfirmed, with the bindings the user has to confirm.
    pub fn unconfirmed(&self) -> &[Unconfirmed] {
        &self.unconfirmed
    }

    /// The bindings `key` still needs confirmed; `None` when it may send its requests (and
    /// its secret).
    /// A `client` credential scoped to an account answers for the credential configured.
    pub fn unconfirmed_for(&self, key: &CredentialKey) -> Option<&Unconfirmed> {
        let configured = key.credential.configured();
        self.unconfirmed
            .iter()
            .find(|u| u.key.provider == key.provider && u.key.credential.as_str() == configured)
    }

    /// Every binding `provider`'s credentials still need confirmed, the keyless `default` one
    /// a provider without keys routes with included, each once.
    pub fn unconfirmed_of(&self, provider: &ProviderId) -> Vec<Binding> {
        let mut missing: Vec<Binding> = Vec::new();
        for unconfirmed in self.unconfirmed.iter().filter(|u| &u.key.provider == provider) {
            for binding in &unconfirmed.missing {
                if !missing.contains(binding) {
                    missing.push(binding.clone());
                }
            }
        }
        missing
    }

    /// Whether any credential passes its caller's own login through.
    pub(super) fn has_client_credentials(&self) -> bool {
        self.client_credentials
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The pooled HTTP client upstream requests go through.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The combo a requested model names, first rule that applies:
    /// 1. a configured combo, or `provider/model` of a configured provider (a combo of one);
    /// 2. an alias, the most specific matching pattern (see `routing::alias`);
    /// 3. `default_route`.
    ///
    /// `None` when nothing applies. Aliases and `default_route` were checked to name a combo
    /// or `provider/model` when the config was validated, so step 1 resolves them.
    pub fn resolve(&self, model: &str) -> Option<Cow<'_, Combo>> {
        if let Some(combo) = self.exact(model) {
            return Some(combo);
        }
        let to = match self.config.aliases.lookup(model) {
            Some(alias) => &alias.to,
            None => self.config.default_route.as_ref()?,
        };
        self.exact(to)
    }

    /// A combo by name, `auto` (or one of its presets, unless a combo has its name), or
    /// `provider/model` as a combo of one.
    fn exact(&self, model: &str) -> Option<Cow<'_, Combo>> {
        if let Some(combo) = self.config.combo(model) {
            return Some(Cow::Borrowed(combo));
        }
        if let Some((_, combo)) = self.auto.iter().find(|(preset, _)| preset.model() == model) {
            return Some(Cow::Borrowed(combo));
        }
        let (provider, model) = parse_target(model)?;
        let config = self.provider(&ProviderId::from(provider))?;
        // A provider whose user wrote a `models` list serves those models only, asked for
        // directly too: the list is the user's say of what may be sent there.
        if !config.serves(model) {
            return None;
        }
        Some(Cow::Owned(Combo::single(direct(config, model))))
    }

    /// Why `model` routes nowhere, with everything that would: the 404's message.
    pub fn unknown_model(&self, model: &str) -> String {
        if self.config.combo(model).is_none()
            && let Some((provider, name)) = parse_target(model)
            && let Some(config) = self.provider(&ProviderId::from(provider))
            && !config.serves(name)
        {
            return format!(
                "provider \"{provider}\" lists its models and \"{name}\" is not one of them: \
                 listed {:?}; add \"{name}\" to the `models` of provider \"{provider}\" (in the \
                 config file or on the Providers page) to ask for it directly",
                config.listed()
            );
        }
        let known: Vec<String> = self.model_names().collect();
        let patterns: Vec<&str> = self.config.aliases.iter().map(|a| a.pattern.as_str()).collect();
        format!(
            "unknown model \"{model}\": ask for a combo or provider/model, or add an alias ([[aliases]]) or default_route that catches it; configured: {known:?}; aliases: {patterns:?}"
        )
    }

    /// Every model name a client may ask for: combos first, then each provider's listed models.
    pub fn model_names(&self) -> impl Iterator<Item = String> + '_ {
        let combos = self.config.combos.iter().map(|c| c.name.clone());
        let models = self
            .config
            .providers
            .iter()
            .flat_map(|p| p.models.iter().map(move |m| format!("{}/{}", p.id, m.id)));
        combos.chain(models)
    }

    /// For each combo, how many of its candidates the planner would offer at `now` and how
    /// many it has in all: a combo with none to offer fails every request until one recovers.
    pub fn combo_health(&self, registry: &HealthRegistry, now: UnixMillis) -> Vec<ComboHealth> {
        let orderer = TargetOrderer::new(0);
        self.config
            .combos
            .iter()
            .map(|combo| {
                let plan = plan(combo, |p| self.roster(p), &orderer, registry, now);
                // An unconfirmed credential, or one whose secret cannot be read, is planned (the
                // registry knows nothing of it) but never sent to: it is no help to the combo.
                let usable = plan.candidates.iter().filter(|c| {
                    let key = CredentialKey {
                        provider: c.key.provider.clone(),
                        credential: c.key.credential.clone(),
                    };
                    let readable = self
                        .provider(&key.provider)
                        .and_then(|p| p.credential(&key.credential))
                        .and_then(|c| c.secret.as_ref())
                        .is_none_or(|s| s.unavailable().is_none());
                    self.unconfirmed_for(&key).is_none() && readable
                });
                ComboHealth {
                    name: combo.name.clone(),
                    eligible: usable.count(),
                    candidates: plan.candidates.len() + plan.skipped.len(),
                }
            })
            .collect()
    }

    pub(super) fn provider(&self, id: &ProviderId) -> Option<&ProviderConfig> {
        self.config.provider(id)
    }

    pub(super) fn roster(&self, id: &ProviderId) -> Option<&ProviderRoster> {
        self.rosters.iter().find(|r| &r.provider == id)
    }
}

/// `provider/model` asked for directly, or as a candidate of `auto`: a target of its own.
fn direct(provider: &ProviderConfig, model: &str) -> Target {
    let mut target = Target::new(provider.id.clone(), model);
    // A combo of one still has a provider's other keys to serve while one key is probed.
    target.probe = provider.model(model).is_none_or(|m| m.probe);
    // Its usage is charged at the model's price, as a combo's target of it would be.
    target.price = provider.price_for(model);
    target.context_window = provider.facts(model).context_window;
    target
}

/// Every model `auto` may choose from: each provider's listed models, or for a
/// provider that lists none, the models its combos, aliases and default route name; then only
/// what `[settings.auto] allow` lets in. In the config's order, each once.
fn auto_pool(config: &Config) -> Vec<Target> {
    let named = config
        .combos
        .iter()
        .flat_map(|c| c.targets.iter().map(|t| (t.provider.as_str(), t.model.as_str())))
        .chain(
            config
                .aliases
                .iter()
                .map(|a| a.to.as_str())
                .chain(config.default_route.as_deref())
                .filter_map(parse_target),
        );
    let named: Vec<(&str, &str)> = named.collect();
    let mut pool: Vec<Target> = Vec::new();
    for provider in &config.providers {
        let id = provider.id.as_str();
        let models: Vec<&str> = if provider.models.is_empty() {
            named.iter().filter(|(p, _)| *p == id).map(|(_, m)| *m).collect()
        } else {
            provider.models.iter().map(|m| m.id.as_str()).collect()
        };
        for model in models {
            let fresh =
                !pool.iter().any(|t| t.provider.as_str() == id && t.model.as_str() == model);
            if fresh && config.auto.allows(id, model) {
                pool.push(direct(provider, model));
            }
        }
    }
    pool
}
