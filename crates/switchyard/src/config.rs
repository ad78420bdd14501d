//! The declarative config file (`switchyard serve --config FILE`, TOML).
//!
//! A file is parsed into forms (what people write) and validated into a [`Config`] (what the app
//! runs on) in one step that either succeeds completely or fails with one error naming the
//! file, the path of the offending field and what is allowed: nothing ever starts
//! half-configured. Secrets are never written inline; a credential says `env:VAR` and the value
//! is read when the file is loaded. `docs/configuration.md` documents every field.

pub mod editor;
mod form;
pub mod stored;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use switchyard_catalogue::{CatalogueProvider, ModelFacts, ModelPrice};
use switchyard_core::binding::{self, Binding, Exposure};
use switchyard_core::continuation::Continuation;
use switchyard_core::ending::Trust;
use switchyard_core::resilience::{CredentialKind, SelectionStrategy};
use switchyard_core::routing::{AliasTable, Combo, HedgeAfter, Pattern, Price, Target};
use switchyard_core::settings::{
    AutoSettings, BreakerPolicy, BreakerProfile, BudgetPolicy, CooldownPolicy, LockoutPolicy,
    RoutingSettings, SettingsError, Timeouts, UsageSettings,
};
use switchyard_core::{CredentialId, CredentialKey, InstanceId, ModelId, ProviderId};
use switchyard_providers::dialect::Dialect;
use switchyard_providers::executor::Url;
use switchyard_secrets::{KeychainStore, LiveSecret, Secret, SecretRef, SecretStore};
use switchyard_store::team::TeamUrl;

use crate::oauth::OAuthClient;

pub use self::editor::{ConfigEditor, EditError, Saving};
pub(crate) use self::form::model_list;
pub use self::form::{
    AliasForm, BreakerProfiles, ComboForm, ConfigForm, CredentialForm, ModelEntry, ModelForm,
    NotificationSettings, OpenAiApi, PriceForm, ProviderForm, ProviderKind, ServerForm,
    SettingsForm, TargetForm, TeamForm,
};

/// The port `serve` listens on when neither the config nor `--port` says otherwise.
pub const DEFAULT_PORT: u16 = 4141;

/// How many connections are open at most when `[server] max_connections` does not say.
/// Editors and agents open a handful each (Claude Code's subagents, Codex, an IDE, the web
/// UI); a burst of parallel agents or a load test opens one per request in flight, so the
/// default leaves room for a thousand. Where the limit on open files leaves room for fewer
/// (each client connection may hold an upstream one too), `serve` caps connections lower
/// itself (`descriptors::ConnectionCap`). The accept loop defaults to it as well.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1_100;

/// Where credentials' secrets are looked up while a config is loaded.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// Environment variables, for `env:VAR`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The OS keychain, for `keychain:provider/credential`; `None` refuses those.
    pub secrets: Option<&'a dyn SecretStore>,
    /// Leave credentials' `keychain:` secrets to be read after validation
    /// ([`Config::unread_secrets`]), where waiting can be bounded: a locked keychain
    /// answers a read with an unlock prompt, which must not hold up the app's start or an
    /// edit. A provider's secret headers are read at once all the same.
    pub defer_keychain: bool,
}

impl fmt::Debug for Sources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources").field("secrets", &self.secrets).finish_non_exhaustive()
    }
}

/// A config file that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{file}: {field}: {problem}")]
    Invalid { file: PathBuf, field: String, problem: String },
    /// The state file was migrated by a newer Switchyard that this one cannot run on.
    #[error("{0}")]
    StateTooNew(String),
    /// An environment variable the app reads at start does not hold what it must.
    #[error("{var}: {problem}")]
    Environment { var: &'static str, problem: String },
}

/// A form that breaks a rule: the path of the field (`providers[1].credentials[0].secret`) and
/// what is wrong or allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Problem {
    pub field: String,
    pub problem: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        Self { field: field.into(), problem: problem.to_string() }
    }

    /// The same problem with `prefix` (and the dot after it) taken off the field path, so an
    /// error about one item of a list names the field as the caller sent it.
    #[must_use]
    pub fn relative_to(mut self, prefix: &str) -> Self {
        if let Some(rest) = self.field.strip_prefix(prefix) {
            let rest = rest.strip_prefix('.').unwrap_or(rest);
            self.field = if rest.is_empty() { prefix.to_owned() } else { rest.to_owned() };
        }
        self
    }
}

impl Problem {
    /// The problem as an error about `file`.
    pub fn in_file(self, file: &Path) -> ConfigError {
        ConfigError::Invalid { file: file.to_owned(), field: self.field, problem: self.problem }
    }
}

impl From<SettingsError> for Problem {
    fn from(e: SettingsError) -> Self {
        Self { field: e.field, problem: e.problem }
    }
}

// ---------------------------------------------------------------------------------------------
// The validated config

/// One credential, its secret resolved.
#[derive(Clone, Debug)]
pub struct CredentialConfig {
    pub id: CredentialId,
    pub kind: CredentialKind,
    /// `None` for providers that take no key. Read when the config was loaded; one that could
    /// not be read leaves only this credential unavailable (`secret_unavailable`) and is read
    /// again off the request path (see [`LiveSecret`]).
    pub secret: Option<Arc<LiveSecret>>,
    pub enabled: bool,
    pub priority: u32,
    /// Requests at once at most; `None`: no limit.
    pub max_in_flight: Option<u32>,
    /// Every binding this credential's requests need: a (secret reference, destination) pair
    /// for its own secret and the provider's secret headers to the base URL, and an OAuth
    /// credential's tokens to the token endpoint too; then a destination binding for each
    /// destination its requests reach (the base URL, an OAuth token endpoint), so a keyless
    /// credential needs one as well. Each must be confirmed before the credential is used
    /// (see `switchyard_core::binding`).
    pub bindings: Vec<Binding>,
}

/// One model a provider lists, its facts resolved against the provider's.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub id: ModelId,
    /// The wire dialect this model is called in: its own `api`, else the provider's.
    pub dialect: Dialect,
    /// The chat endpoint for [`Self::dialect`] (see [`ProviderConfig::chat_url`]).
    pub chat_url: Option<Url>,
    /// Recovery probes may be sent to it (`probe = false` turns them off).
    pub probe: bool,
    /// How it continues a partial answer: its own fact, else the provider's default.
    pub continuation: Continuation,
    /// Its window, prices and capabilities: each written fact, else the preset's catalogue
    /// fact.
    pub facts: ModelFacts,
    /// The model whose embedding space its vectors share (`embeds_like`'s model part).
    pub embeds_like: Option<ModelId>,
}

/// One provider, ready to route to.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of a provider, each its own setting in the config"
)]
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    pub id: ProviderId,
    pub kind: ProviderKind,
    pub base_url: String,
    /// The chat endpoint, parsed once, for dialects whose endpoint does not name the model.
    pub chat_url: Option<Url>,
    /// The Anthropic Messages endpoint beside an OpenAI one (`anthropic_base_url`), parsed once.
    pub anthropic_url: Option<Url>,
    pub breaker: BreakerPolicy,
    pub selection: SelectionStrategy,
    /// Empty when the provider serves any model.
    pub models: Vec<ModelConfig>,
    /// Sent with every request to this provider; values from secret references are resolved
    /// and marked sensitive.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Never empty: a provider configured without keys gets one credential named `default`.
    pub credentials: Vec<CredentialConfig>,
    /// Set whenever a credential is of kind `oauth`.
    pub oauth: Option<OAuthClient>,
    /// Forward same-dialect requests as the client sent them (see [`ProviderForm::passthrough`]).
    pub passthrough: bool,
    /// Ask Chat streams for usage (see [`ProviderForm::stream_usage`]).
    pub stream_usage: bool,
    /// It keys its prompt cache by `prompt_cache_key` (see [`ProviderForm::prompt_cache_key`]).
    pub prompt_cache_key: bool,
    /// Whether its stream's end marker alone proves an answer whole (see
    /// [`ProviderForm::trust_end_marker`]).
    pub trust: Trust,
    /// Requests at once at most, over all its credentials; `None`: no limit.
    pub max_in_flight: Option<u32>,
    /// The wire dialect requests go out in unless the model says otherwise: the kind's, or
    /// Responses for an `openai` provider with `api = "responses"`.
    pub dialect: Dialect,
    /// The catalogue preset the provider names, whose model facts fill what the user did not
    /// write.
    pub preset: Option<&'static CatalogueProvider>,
    /// How a model continues a partial answer unless its entry says otherwise: the preset's
    /// mechanism when it fits the provider's dialect, else the kind's default.
    pub continuation: Continuation,
    /// Shared in a team although at a private address (see [`ProviderForm::share`]).
    pub share: bool,
}

impl ProviderConfig {
    /// `text` (an upstream's error message, on its way to the client, the trace and the log)
    /// with every secret value a request to this provider carried taken out: the credential's
    /// `secret` (an API key or an OAuth access token) and each secret header's value. An
    /// upstream may echo any of them ("Incorrect API key provided: sk-…", a gateway that
    /// quotes the headers it refused).
    pub fn scrub(&self, secret: Option<&Secret>, text: &str) -> String {
        let headers = self.headers.iter().filter(|(_, value)| value.is_sensitive());
        let values = headers.filter_map(|(_, value)| value.to_str().ok()).map(Secret::new);
        values.chain(secret.cloned()).fold(text.to_owned(), |text, secret| secret.scrub(&text))
    }

    /// The provider's own wire dialect: what its model list and connection test speak. A
    /// request for a model goes out in [`Self::dialect_for`] instead.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The one answer to "which dialect does a request for `model` go out in": the model's
    /// own `api` when it lists one, else the provider's.
    pub fn dialect_for(&self, model: &str) -> Dialect {
        self.model(model).map_or(self.dialect, |m| m.dialect)
    }

    /// The embedding space `model`'s vectors live in: the model it `embeds_like`, else its
    /// own id. Embeddings fall back only within one space.
    pub fn embedding_space<'m>(&'m self, model: &'m str) -> &'m str {
        self.model(model).and_then(|m| m.embeds_like.as_ref()).map_or(model, ModelId::as_str)
    }

    /// The chat endpoint a request for `model` goes to (`None` for Gemini, whose endpoint
    /// names the model); it follows [`Self::dialect_for`].
    pub fn chat_url_for(&self, model: &str) -> Option<&Url> {
        self.model(model).map_or(self.chat_url.as_ref(), |m| m.chat_url.as_ref())
    }

    /// What is known about `model`: a listed model's resolved facts, else the preset's
    /// catalogue facts (a model need not be listed to have them), else none.
    pub fn facts(&self, model: &str) -> ModelFacts {
        match self.model(model) {
            Some(listed) => listed.facts,
            None => self.preset.map(|p| p.facts(model)).unwrap_or_default(),
        }
    }

    /// What `model` costs by its facts, for a target that names no price of its own: a
    /// `provider/model` asked for directly costs what it costs in a combo.
    pub fn price_for(&self, model: &str) -> Option<Price> {
        self.facts(model).price.map(charged)
    }

    /// How `model` continues a partial answer: its own fact, else the provider's default.
    pub fn continuation_for(&self, model: &str) -> Continuation {
        self.model(model).map_or(self.continuation, |m| m.continuation)
    }

    /// The one answer to "which dialect does a request of a `client`-dialect client for `model`
    /// go out in": Anthropic's when the provider has an Anthropic endpoint beside its own
    /// (`anthropic_base_url`) and the client speaks it, so its request is taken as it was
    /// sent; else the model's ([`Self::dialect_for`]).
    pub fn dialect_toward(&self, model: &str, client: Dialect) -> Dialect {
        if client == Dialect::Anthropic && self.anthropic_url.is_some() {
            Dialect::Anthropic
        } else {
            self.dialect_for(model)
        }
    }

    /// The endpoint a request for `model` in `dialect` (from [`Self::dialect_toward`]) goes to:
    /// the Anthropic endpoint when that is the dialect and the model's own is another, else the
    /// model's chat endpoint (`None` for Gemini, whose endpoint names the model).
    pub fn url_toward(&self, model: &str, dialect: Dialect) -> Option<&Url> {
        match &self.anthropic_url {
            Some(url) if dialect == Dialect::Anthropic && self.dialect_for(model) != dialect => {
                Some(url)
            }
            _ => self.chat_url_for(model),
        }
    }

    /// The listed model `id`, with its facts.
    pub fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| m.id.as_str() == id)
    }

    /// Whether a target may name `model`: any model when none is listed.
    pub fn serves(&self, model: &str) -> bool {
        self.models.is_empty() || self.model(model).is_some()
    }

    /// The listed model ids, for errors that say what is allowed.
    pub fn listed(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.id.as_str()).collect()
    }

    /// The credential `id` names; a `client` credential's id scoped to an account
    /// (`login~3f2a…`) names the credential it was scoped from.
    pub fn credential(&self, id: &CredentialId) -> Option<&CredentialConfig> {
        let configured = id.configured();
        self.credentials.iter().find(|c| c.id.as_str() == configured)
    }

    /// The credentials that may serve, in priority order (ties keep the order written).
    pub fn routable_credentials(&self) -> Vec<&CredentialConfig> {
        let mut routable: Vec<&CredentialConfig> =
            self.credentials.iter().filter(|c| c.enabled).collect();
        routable.sort_by_key(|c| c.priority);
        routable
    }
}

/// What `[server] max_connections` may be: enough for one editor's connections, and no more
/// than a process can keep descriptors for.
pub const MAX_CONNECTIONS_RANGE: std::ops::RangeInclusive<u32> = 8..=65_536;

/// Everything `serve` runs on, and the form it was validated from.
#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    /// `[server] max_connections`, checked to be within [`MAX_CONNECTIONS_RANGE`].
    pub max_connections: usize,
    pub providers: Vec<ProviderConfig>,
    pub combos: Vec<Combo>,
    /// Compiled once here, so a request only compares text.
    pub aliases: AliasTable,
    /// A combo name or `provider/model`, checked to exist.
    pub default_route: Option<String>,
    pub lockout: LockoutPolicy,
    pub cooldown: CooldownPolicy,
    pub timeouts: Timeouts,
    pub routing: RoutingSettings,
    /// How `auto` chooses.
    pub auto: AutoSettings,
    pub usage: UsageSettings,
    pub budgets: BudgetPolicy,
    /// Team mode: `None` without a `[team]` database. Read at start only.
    pub team: Option<TeamConfig>,
    /// What this config was made from: what the API shows and edits, and what export writes.
    pub form: ConfigForm,
}

/// `[team]`, validated: the database's URL parsed (never kept as text: it holds a password).
#[derive(Clone, Debug)]
pub struct TeamConfig {
    pub url: TeamUrl,
    pub instance: Option<InstanceId>,
}

impl Default for Config {
    fn default() -> Self {
        let sources = Sources { env: &|_| None, secrets: None, defer_keychain: false };
        ConfigForm::default().validate(&sources).expect("the empty config is valid")
    }
}

impl Config {
    /// Reads again the credentials' secrets that are due (one that could not be read, at the
    /// end of its wait; a file secret whose file changed), or only `only`'s, at once. Blocking
    /// (keychain and file reads): run it off the request path. Returns what changed.
    pub fn refresh_secrets(
        &self,
        sources: &Sources<'_>,
        now: switchyard_core::UnixMillis,
        only: Option<&CredentialKey>,
    ) -> Vec<(CredentialKey, switchyard_secrets::live::Refreshed)> {
        use switchyard_secrets::live::{self, Refreshed};
        let live = live::Sources { env: sources.env, store: sources.secrets };
        let mut changed = Vec::new();
        for p in &self.providers {
            for c in &p.credentials {
                let Some(secret) = &c.secret else { continue };
                let key = CredentialKey { provider: p.id.clone(), credential: c.id.clone() };
                let refreshed = match only {
                    Some(wanted) if *wanted != key => continue,
                    Some(_) => secret.refresh(live, now.0, true),
                    None if secret.is_due(now.0) => secret.refresh(live, now.0, false),
                    None => continue,
                };
                if refreshed != Refreshed::Unchanged || only.is_some() {
                    changed.push((key, refreshed));
                }
            }
        }
        changed
    }

    /// The credentials' secrets a validation left unread ([`Sources::defer_keychain`]).
    pub fn unread_secrets(&self) -> Vec<Arc<LiveSecret>> {
        let all = self.providers.iter().flat_map(|p| &p.credentials);
        all.filter_map(|c| c.secret.clone()).filter(|s| s.is_unread()).collect()
    }

    /// Every credential whose secret cannot be read now, and why.
    pub fn unavailable_secrets(&self) -> Vec<(CredentialKey, String)> {
        self.providers
            .iter()
            .flat_map(|p| {
                p.credentials.iter().filter_map(|c| {
                    let why = c.secret.as_ref()?.unavailable()?;
                    Some((CredentialKey { provider: p.id.clone(), credential: c.id.clone() }, why))
                })
            })
            .collect()
    }

    /// Reads, parses and validates `file`, resolving `env:` secrets from the process
    /// environment and `keychain:` ones from the OS keychain.
    pub fn load(file: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(file)
            .map_err(|source| ConfigError::Read { file: file.to_owned(), source })?;
        let keychain = KeychainStore::new();
        let sources = Sources {
            env: &|var| std::env::var(var).ok(),
            secrets: Some(&keychain),
            defer_keychain: false,
        };
        Self::parse_with(&text, file, &sources)
    }

    /// Parses and validates config text; `file` only names it in errors, `env` resolves
    /// `env:` secrets (`keychain:` ones are refused: there is no keychain here).
    pub fn parse(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::parse_with(text, file, &Sources { env, secrets: None, defer_keychain: false })
    }

    /// Parses and validates config text, resolving secrets from `sources`.
    pub fn parse_with(text: &str, file: &Path, sources: &Sources<'_>) -> Result<Self, ConfigError> {
        ConfigForm::from_toml(text).and_then(|form| form.validate(sources)).map_err(|p| {
            ConfigError::Invalid { file: file.to_owned(), field: p.field, problem: p.problem }
        })
    }

    pub fn provider(&self, id: &ProviderId) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| &p.id == id)
    }

    /// What each credential sends where: the input of `switchyard_core::binding::unconfirmed`.
    pub fn exposures(&self) -> Vec<Exposure> {
        self.providers
            .iter()
            .flat_map(|p| {
                p.credentials.iter().map(|c| Exposure {
                    key: CredentialKey { provider: p.id.clone(), credential: c.id.clone() },
                    bindings: c.bindings.clone(),
                })
            })
            .collect()
    }

    pub fn combo(&self, name: &str) -> Option<&Combo> {
        self.combos.iter().find(|c| c.name == name)
    }
}

fn toml_message(e: &toml::de::Error) -> String {
    e.message().trim().to_owned()
}

impl ConfigForm {
    /// Parses TOML (a config file, an import) into a form, naming the field that does not fit.
    pub fn from_toml(text: &str) -> Result<Self, Problem> {
        let deserializer = toml::Deserializer::parse(text)
            .map_err(|e| Problem::new("(syntax)", toml_message(&e)))?;
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            Problem::new(
                if path == "." { "(top level)".to_owned() } else { path },
                toml_message(e.inner()),
            )
        })
    }

    /// The form as a config file (what export writes and `--config` reads back).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config forms serialize to TOML")
    }

    /// Checks every field and resolves every secret: a [`Config`] or the first problem.
    pub fn validate(&self, sources: &Sources<'_>) -> Result<Config, Problem> {
        let mut providers = Vec::with_capacity(self.providers.len());
        let mut ids = HashSet::new();
        for (i, p) in self.providers.iter().enumerate() {
            let at = format!("providers[{i}]");
            check_name(&format!("{at}.id"), &p.id)?;
            if p.id == RESERVED_PROVIDER_ID {
                return Err(Problem::new(
                    format!("{at}.id"),
                    "\"team\" is reserved: the keychain entries under it belong to team mode \
                     (its database URL); pick another id",
                ));
            }
            if !ids.insert(p.id.as_str()) {
                return Err(Problem::new(
                    format!("{at}.id"),
                    format!("\"{}\" is used by another provider", p.id),
                ));
            }
            providers.push(p.validate(&at, &self.settings.breaker_profiles, sources)?);
        }
        let mut combos = Vec::with_capacity(self.combos.len());
        let mut names = HashSet::new();
        for (i, c) in self.combos.iter().enumerate() {
            let at = format!("combos[{i}]");
            check_name(&format!("{at}.name"), &c.name)?;
            if !names.insert(c.name.as_str()) {
                return Err(Problem::new(
                    format!("{at}.name"),
                    format!("\"{}\" is used by another combo", c.name),
                ));
            }
            combos.push(c.validate(&at, &providers)?);
        }
        let aliases = validate_aliases(&self.aliases, &combos, &providers)?;
        if let Some(to) = &self.default_route {
            check_route("default_route", to, &combos, &providers)?;
        }
        let settings = &self.settings;
        let in_settings =
            |e: SettingsError| Problem::new(format!("settings.{}", e.field), e.problem);
        for (name, profile) in [
            ("api_key", &settings.breaker_profiles.api_key),
            ("oauth", &settings.breaker_profiles.oauth),
            ("local", &settings.breaker_profiles.local),
        ] {
            profile.validate().map_err(|e| {
                let field = e.field.strip_prefix("breaker.").unwrap_or(&e.field);
                Problem::new(format!("settings.breaker_profiles.{name}.{field}"), e.problem)
            })?;
        }
        let usage = settings.usage.validate().map_err(in_settings)?;
        let budgets = settings.budgets.validate().map_err(in_settings)?;
        if !usage.tracking && !budgets.is_empty() {
            return Err(Problem::new(
                "settings.usage.tracking",
                "false leaves the budgets in settings.budgets unchecked: budgets are kept \
                 from the usage aggregates; turn tracking on or remove the budgets",
            ));
        }
        let max_connections = match self.server.max_connections {
            None => DEFAULT_MAX_CONNECTIONS,
            Some(n) if MAX_CONNECTIONS_RANGE.contains(&n) => n as usize,
            Some(n) => {
                return Err(Problem::new(
                    "server.max_connections",
                    format!(
                        "{n} is out of range: write {} to {} (default {}); each editor or agent \
                         keeps a few connections open",
                        MAX_CONNECTIONS_RANGE.start(),
                        MAX_CONNECTIONS_RANGE.end(),
                        DEFAULT_MAX_CONNECTIONS
                    ),
                ));
            }
        };
        Ok(Config {
            port: self.server.port.unwrap_or(DEFAULT_PORT),
            max_connections,
            providers,
            combos,
            aliases,
            default_route: self.default_route.clone(),
            lockout: settings.model_lockouts.validate().map_err(in_settings)?,
            cooldown: settings.credential_cooldown.validate().map_err(in_settings)?,
            timeouts: settings.timeouts.validate().map_err(in_settings)?,
            routing: settings.routing.validate().map_err(in_settings)?,
            auto: settings.auto.validate().map_err(in_settings)?,
            usage,
            budgets,
            team: self.team.validate(sources)?,
            form: self.clone(),
        })
    }
}

impl TeamForm {
    /// The team's database, resolved and parsed; `None` when there is no team. An error never
    /// repeats the URL: it names the reference and says what it should hold.
    fn validate(&self, sources: &Sources<'_>) -> Result<Option<TeamConfig>, Problem> {
        let instance = self
            .instance
            .as_deref()
            .map(|name| check_name("team.instance", name).map(|()| InstanceId::new(name)))
            .transpose()?;
        if self.database_url.trim().is_empty() {
            return match instance {
                Some(_) => Err(Problem::new(
                    "team.database_url",
                    "required with [team]: a secret reference to the PostgreSQL URL, e.g. \
                     env:SWITCHYARD_TEAM_DB",
                )),
                None => Ok(None),
            };
        }
        let field = "team.database_url";
        let reference = SecretRef::parse(self.database_url.trim())
            .map_err(|e| Problem::new(field, format!("{e} (the URL itself never goes here)")))?;
        let url = reference
            .resolve_using(sources.env, sources.secrets)
            .map_err(|e| Problem::new(field, e))?;
        let url = TeamUrl::parse(url.expose()).map_err(|e| {
            let why = match e {
                switchyard_store::StoreError::Team(why) => why,
                other => other.to_string(),
            };
            Problem::new(field, format!("the value of {reference}: {why}"))
        })?;
        Ok(Some(TeamConfig { url, instance }))
    }
}

impl ProviderForm {
    fn validate(
        &self,
        at: &str,
        profiles: &BreakerProfiles,
        sources: &Sources<'_>,
    ) -> Result<ProviderConfig, Problem> {
        let (kind, preset_fits) = self.kind_and_preset(at)?;
        let base_url = self
            .base_url
            .as_deref()
            .or(preset_fits.map(|p| p.base_url.as_str()))
            .unwrap_or_else(|| kind.default_base_url());
        check_url(&format!("{at}.base_url"), base_url)?;
        let breaker = match &self.breaker {
            Some(own) => own,
            None => profiles.get(self.profile.unwrap_or(BreakerProfile::ApiKey)),
        };
        let breaker =
            breaker.validate().map_err(|e| Problem::new(format!("{at}.{}", e.field), e.problem))?;
        let headers = self.validate_headers(at, preset_fits, sources)?;
        let client = preset_fits.is_some_and(|p| p.auth == switchyard_catalogue::AuthStyle::Client);
        let (mut credentials, references) = self.validate_credentials(at, sources, client)?;
        let dialect = self.dialect(at, kind, preset_fits)?;
        let login = Login {
            reference: binding::login_reference(dialect == Dialect::Anthropic),
            home: preset_fits.and_then(|p| binding::destination(&p.base_url)),
        };
        self.bind(at, base_url, &mut credentials, &references, &login)?;
        let base_url = base_url.trim_end_matches('/').to_owned();
        let chat_url = chat_url(at, dialect, &base_url)?;
        let anthropic_url = self.anthropic_url(at, kind, preset_fits, &base_url)?;
        // The preset's mechanism only where it fits what the provider now speaks (a preset
        // switched to Responses has none); a refusal is for what the user wrote, not this.
        let continuation = preset_fits
            .map(|p| p.continuation)
            .filter(|c| mechanism_fits(*c, dialect))
            .unwrap_or_else(|| kind.default_continuation());
        let resolved = Resolved { kind, dialect, continuation, preset: preset_fits };
        let models = self.validate_models(at, &resolved, chat_url.as_ref(), &base_url)?;
        let passthrough = self.passthrough.or(preset_fits.map(|p| p.passthrough)).unwrap_or(true);
        check_cap(&format!("{at}.max_in_flight"), self.max_in_flight)?;
        Ok(ProviderConfig {
            id: self.id.as_str().into(),
            kind,
            base_url,
            chat_url,
            anthropic_url,
            breaker,
            selection: self.selection,
            models,
            headers,
            credentials,
            oauth: self.oauth.clone(),
            passthrough,
            prompt_cache_key: self
                .prompt_cache_key
                .or(preset_fits.map(|p| p.prompt_cache_key))
                .unwrap_or(false),
            stream_usage: self.stream_usage,
            trust: if self.trust_end_marker { Trust::EndMarker } else { Trust::FinishReason },
            max_in_flight: self.max_in_flight,
            dialect,
            preset: preset_fits,
            continuation,
            share: self.share,
        })
    }

    /// The credentials, checked, with what each one's secret is as a reference (bound to
    /// destinations by [`ProviderForm::bind`]); a provider without any gets one `default`
    /// credential with no secret, or (a subscription preset, `client`) one `login` credential
    /// that passes the caller's own login through.
    fn validate_credentials(
        &self,
        at: &str,
        sources: &Sources<'_>,
        client: bool,
    ) -> Result<(Vec<CredentialConfig>, Vec<Option<String>>), Problem> {
        let mut credentials = Vec::new();
        // What each credential's secret is, as a reference: bound to destinations below.
        let mut references = Vec::new();
        let mut ids = HashSet::new();
        for (i, c) in self.credentials.iter().enumerate() {
            let cat = format!("{at}.credentials[{i}]");
            check_name(&format!("{cat}.id"), &c.id)?;
            if !ids.insert(c.id.as_str()) {
                return Err(Problem::new(
                    format!("{cat}.id"),
                    format!("\"{}\" is used by another credential of this provider", c.id),
                ));
            }
            check_cap(&format!("{cat}.max_in_flight"), c.max_in_flight)?;
            if c.kind == CredentialKind::Oauth && c.secret.is_some() {
                return Err(Problem::new(
                    format!("{cat}.secret"),
                    "an oauth credential keeps its tokens in the keychain after signing in; remove secret",
                ));
            }
            if c.kind == CredentialKind::Client && c.secret.is_some() {
                return Err(Problem::new(
                    format!("{cat}.secret"),
                    "a client credential passes the caller's own login through and keeps no secret; remove secret (or write kind = \"api_key\" to use this key)",
                ));
            }
            let reference = c
                .secret
                .as_deref()
                .map(SecretRef::parse)
                .transpose()
                .map_err(|e| Problem::new(format!("{cat}.secret"), e))?;
            if let Some(SecretRef::Keychain(id)) = &reference {
                own_keychain_entry(&format!("{cat}.secret"), id, &self.id, Some(&c.id))?;
            }
            // A secret that cannot be read now leaves the credential unavailable, not the
            // config invalid: the rest of the config serves meanwhile.
            let secret = reference.clone().map(|r| {
                let live =
                    switchyard_secrets::live::Sources { env: sources.env, store: sources.secrets };
                Arc::new(match r {
                    SecretRef::Keychain(_) if sources.defer_keychain => LiveSecret::unread(r),
                    r => LiveSecret::read(r, live),
                })
            });
            // An OAuth credential's secret is its token set, kept under its own name.
            references.push(match c.kind {
                CredentialKind::Oauth => Some(format!("keychain:{}/{}", self.id, c.id)),
                CredentialKind::ApiKey => c.secret.clone(),
                // Nothing of Switchyard's goes with it: the caller's login goes to the
                // destination alone, which its destination binding covers.
                CredentialKind::Client => None,
            });
            credentials.push(CredentialConfig {
                id: c.id.as_str().into(),
                kind: c.kind,
                secret,
                enabled: c.enabled,
                priority: c.priority,
                max_in_flight: c.max_in_flight,
                bindings: Vec::new(),
            });
        }
        if let Some(client) = &self.oauth {
            client.validate().map_err(|e| match e {
                crate::oauth::OAuthError::Config { field, problem } => {
                    Problem::new(format!("{at}.{field}"), problem)
                }
                other => Problem::new(format!("{at}.oauth"), other),
            })?;
        } else if let Some(i) = credentials.iter().position(|c| c.kind == CredentialKind::Oauth) {
            return Err(Problem::new(
                format!("{at}.credentials[{i}].kind"),
                "oauth credentials need the provider's oauth client (authorize_url, token_url, client_id); add [providers.oauth]",
            ));
        }
        if credentials.is_empty() {
            credentials.push(CredentialConfig {
                id: if client { "login" } else { "default" }.into(),
                kind: if client { CredentialKind::Client } else { CredentialKind::ApiKey },
                secret: None,
                enabled: true,
                priority: 0,
                max_in_flight: None,
                bindings: Vec::new(),
            });
            references.push(None);
        }
        Ok((credentials, references))
    }
}

/// Says what a secret's new read changed, naming the credential and never the secret.
pub fn log_refreshed(key: &CredentialKey, refreshed: &switchyard_secrets::live::Refreshed) {
    use switchyard_secrets::live::Refreshed;
    let credential = format!("{}/{}", key.provider, key.credential);
    match refreshed {
        Refreshed::Unchanged => {}
        Refreshed::Available => {
            tracing::info!(%credential, "the credential's secret can be read again: it serves from now on");
        }
        Refreshed::Changed => {
            tracing::info!(%credential, "the credential's secret file changed: the new key is used from now on");
        }
        Refreshed::Lost(why) => {
            tracing::warn!(%credential, %why, "the credential's secret cannot be read any more: it is out until it can (secret_unavailable)");
        }
        Refreshed::StillUnavailable(why) => {
            tracing::debug!(%credential, %why, "the credential's secret still cannot be read");
        }
    }
}

/// A `max_in_flight` lets at least one request through.
fn check_cap(field: &str, cap: Option<u32>) -> Result<(), Problem> {
    match cap {
        Some(0) => Err(Problem::new(
            field,
            "0 lets no request through: write 1 or more, or leave it out for no limit",
        )),
        _ => Ok(()),
    }
}

/// The login a provider's `client` credentials pass through: its reference in bindings, and
/// the preset's own host, where it goes without a binding of its own.
struct Login {
    reference: &'static str,
    home: Option<String>,
}

/// What a provider resolved to from its form and preset, which each model starts from.
struct Resolved {
    kind: ProviderKind,
    dialect: Dialect,
    continuation: Continuation,
    preset: Option<&'static CatalogueProvider>,
}

/// The wire dialect a provider kind speaks (before any `api` choice).
fn kind_dialect(kind: ProviderKind) -> Dialect {
    match kind {
        ProviderKind::Openai => Dialect::OpenAi,
        ProviderKind::Anthropic => Dialect::Anthropic,
        ProviderKind::Gemini => Dialect::Gemini,
    }
}

impl ProviderForm {
    /// The kind (written, else the preset's) and the preset when it is of that kind: a preset
    /// of another kind than the one written says nothing about this endpoint.
    fn kind_and_preset(
        &self,
        at: &str,
    ) -> Result<(ProviderKind, Option<&'static CatalogueProvider>), Problem> {
        let preset = self.preset(at)?;
        let kind = self.kind.or(preset.map(|p| p.kind)).ok_or_else(|| {
            Problem::new(
                format!("{at}.kind"),
                format!(
                    "missing: write kind = {} or name a catalogue preset (preset = \"openrouter\")",
                    ProviderKind::ALLOWED
                ),
            )
        })?;
        Ok((kind, preset.filter(|p| p.kind == kind)))
    }

    /// The catalogue entry `preset` names; an unknown name is refused with the known ones.
    fn preset(&self, at: &str) -> Result<Option<&'static CatalogueProvider>, Problem> {
        let Some(name) = &self.preset else { return Ok(None) };
        let catalogue = switchyard_catalogue::catalogue();
        catalogue.provider(name).map(Some).ok_or_else(|| {
            Problem::new(
                format!("{at}.preset"),
                format!(
                    "\"{name}\" is not in the catalogue; presets: {:?} (or remove preset and write kind and base_url)",
                    catalogue.ids()
                ),
            )
        })
    }

    /// Fills each credential's [`CredentialConfig::bindings`]: its own secret's reference (in
    /// `references`, one per credential) and the provider's secret headers, each bound to the
    /// base URL's destination, plus the token endpoint's for OAuth credentials; then the
    /// destinations themselves, secret or not.
    fn bind(
        &self,
        at: &str,
        base_url: &str,
        credentials: &mut [CredentialConfig],
        references: &[Option<String>],
        login: &Login,
    ) -> Result<(), Problem> {
        let to = |field: String, url: &str| {
            binding::destination(url)
                .ok_or_else(|| Problem::new(field, "needs a scheme and a host (https://host/...)"))
        };
        let base = to(format!("{at}.base_url"), base_url)?;
        let token = match &self.oauth {
            Some(client) => Some(to(format!("{at}.oauth.token_url"), &client.token_url)?),
            None => None,
        };
        let headers: Vec<&String> =
            self.headers.values().filter(|v| SecretRef::is_reference(v)).collect();
        for (credential, own) in credentials.iter_mut().zip(references) {
            let mut bindings: Vec<Binding> = own
                .iter()
                .chain(headers.iter().copied())
                .map(|r| Binding::new(r.clone(), base.clone()))
                .collect();
            // Requests go to the base URL whatever they carry; an OAuth credential's token
            // requests go to the token endpoint.
            let mut destinations = vec![base.clone()];
            if credential.kind == CredentialKind::Oauth
                && let Some(token) = &token
            {
                bindings.extend(own.iter().map(|r| Binding::new(r.clone(), token.clone())));
                destinations.push(token.clone());
            }
            bindings.extend(destinations.into_iter().map(Binding::destination_only));
            // A client's login goes to its preset's own host as the preset's destination does;
            // to any other it is a secret sent there, confirmed as one.
            if credential.kind == CredentialKind::Client && login.home.as_ref() != Some(&base) {
                bindings.push(Binding::new(login.reference, base.clone()));
            }
            credential.bindings = bindings;
        }
        Ok(())
    }

    /// The wire dialect: the kind's, or Responses for `kind = "openai"` with
    /// `api = "responses"` (written, else the preset's).
    /// The Anthropic Messages endpoint beside an OpenAI one: `anthropic_base_url` (or the
    /// preset's, when `base_url` is on the preset's host) with `/v1/messages`, on the host of
    /// `base_url`, whose bindings (and so whose keys) it shares.
    fn anthropic_url(
        &self,
        at: &str,
        kind: ProviderKind,
        preset: Option<&CatalogueProvider>,
        base_url: &str,
    ) -> Result<Option<Url>, Problem> {
        let field = format!("{at}.anthropic_base_url");
        let host = |url: &str| Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned));
        // The preset's endpoint is its own host's: a provider pointed elsewhere (a gateway, a
        // test server) does not get it.
        let preset = preset
            .and_then(|p| p.anthropic_base_url.as_deref())
            .filter(|url| host(url) == host(base_url));
        let Some(written) = self.anthropic_base_url.as_deref().or(preset) else {
            return Ok(None);
        };
        if kind != ProviderKind::Openai {
            return Err(Problem::new(
                field,
                "only a `kind = \"openai\"` provider has an Anthropic endpoint beside its own; a \
                 `kind = \"anthropic\"` provider speaks Anthropic at its base_url already",
            ));
        }
        check_url(&field, written)?;
        if host(written) != host(base_url) {
            return Err(Problem::new(
                field,
                format!(
                    "\"{}\" is not on the host of base_url \"{base_url}\": the provider's keys go \
                     only to its own host; add another provider for another host",
                    switchyard_core::text::bounded(written)
                ),
            ));
        }
        let url =
            format!("{}/{}", written.trim_end_matches('/'), switchyard_providers::anthropic::PATH);
        Url::parse(&url).map(Some).map_err(|e| Problem::new(field, e.to_string()))
    }

    fn dialect(
        &self,
        at: &str,
        kind: ProviderKind,
        preset: Option<&CatalogueProvider>,
    ) -> Result<Dialect, Problem> {
        let api = self.api.or(preset.and_then(|p| p.api));
        api_dialect(&format!("{at}.api"), kind, api).map(|api| api.unwrap_or(kind_dialect(kind)))
    }

    /// `models`, each resolved against the provider's `dialect` and endpoint.
    /// The provider's extra headers, ready to send. A value may be a secret reference
    /// (`env:VAR`, `keychain:provider/credential`); a header that carries a credential
    /// (`Authorization`, `x-api-key`, ...) must be one, so no key sits in the config in plain
    /// text. Errors never repeat a value: it may be a key.
    ///
    /// A preset's headers come first, each unless the form writes the same name (in any case):
    /// what the user writes wins.
    fn validate_headers(
        &self,
        at: &str,
        preset: Option<&CatalogueProvider>,
        sources: &Sources<'_>,
    ) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, Problem> {
        let written = |name: &str| self.headers.keys().any(|own| own.eq_ignore_ascii_case(name));
        let from_preset =
            preset.into_iter().flat_map(|p| &p.headers).filter(|(name, _)| !written(name));
        let mut headers = Vec::with_capacity(self.headers.len());
        for (name, value) in from_preset.chain(&self.headers) {
            let field = format!("{at}.headers.{name}");
            let header = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                Problem::new(
                    format!("{at}.headers"),
                    format!("\"{name}\" is not a valid HTTP header name"),
                )
            })?;
            let value = if SecretRef::is_reference(value) {
                let reference = SecretRef::parse(value).map_err(|e| Problem::new(&field, e))?;
                if let SecretRef::Keychain(id) = &reference {
                    own_keychain_entry(&field, id, &self.id, None)?;
                    // An OAuth credential's entry holds its token JSON, refresh token included:
                    // a header would send all of it to the API host.
                    let oauth = self
                        .credentials
                        .iter()
                        .any(|c| c.id == id.credential() && c.kind == CredentialKind::Oauth);
                    if oauth {
                        return Err(Problem::new(
                            &field,
                            format!(
                                "\"keychain:{}\" is an OAuth credential's entry (its tokens, the \
                                 refresh token included): a header may name only an API key's \
                                 entry",
                                id.account()
                            ),
                        ));
                    }
                }
                let secret = reference
                    .resolve_using(sources.env, sources.secrets)
                    .map_err(|e| Problem::new(&field, e))?;
                let mut value = http::HeaderValue::from_str(secret.expose()).map_err(|_| {
                    Problem::new(&field, "the secret is not a valid header value (a line break?)")
                })?;
                value.set_sensitive(true);
                value
            } else if carries_credential(&header) {
                return Err(Problem::new(
                    field,
                    "this header carries a credential: write a secret reference instead of the \
                     value (\"env:VAR\", or store it in the keychain and write \
                     \"keychain:provider/credential\")",
                ));
            } else {
                http::HeaderValue::from_str(value).map_err(|_| {
                    Problem::new(&field, "not a valid header value (control characters?)")
                })?
            };
            headers.push((header, value));
        }
        Ok(headers)
    }

    fn validate_models(
        &self,
        at: &str,
        provider: &Resolved,
        provider_url: Option<&Url>,
        base_url: &str,
    ) -> Result<Vec<ModelConfig>, Problem> {
        let dialect = provider.dialect;
        let mut models: Vec<ModelConfig> = Vec::with_capacity(self.models.len());
        for (i, model) in self.models.iter().enumerate() {
            let mat = format!("{at}.models[{i}]");
            let id = model.id.as_str();
            // A plain entry is its id: the error names the entry as written.
            let id_field = if model.is_plain() { mat.clone() } else { format!("{mat}.id") };
            if id.trim().is_empty() || id.len() > 200 {
                return Err(Problem::new(id_field, "a model name is 1 to 200 characters"));
            }
            if let Some(j) = models.iter().position(|m| m.id.as_str() == id) {
                return Err(Problem::new(
                    id_field,
                    format!("\"{id}\" is already {at}.models[{j}]; list each model once"),
                ));
            }
            let own = api_dialect(&format!("{mat}.api"), provider.kind, model.api)?;
            let (dialect, chat_url) = match own {
                Some(own) if own != dialect => (own, chat_url(at, own, base_url)?),
                _ => (dialect, provider_url.cloned()),
            };
            let probe = model.probe.unwrap_or(true);
            let continuation = match model.continuation {
                Some(own) => continuation_fits(&format!("{mat}.continuation"), own, dialect)?,
                // The provider's default was chosen for its own dialect; a model moved to
                // another API (`api = "responses"`) may not have that mechanism.
                None if mechanism_fits(provider.continuation, dialect) => provider.continuation,
                None => Continuation::Off,
            };
            let written = check_facts(&mat, model)?;
            let known = provider.preset.map(|p| p.facts(id)).unwrap_or_default();
            let embeds_like = model
                .embeds_like
                .as_deref()
                .map(|like| embeds_like(&format!("{mat}.embeds_like"), like))
                .transpose()?;
            models.push(ModelConfig {
                id: ModelId::from(id),
                dialect,
                chat_url,
                probe,
                continuation,
                facts: written.or(known),
                embeds_like,
            });
        }
        Ok(models)
    }
}

/// `embeds_like` (at `at`): `"provider/model"`, the model being what names the space.
fn embeds_like(at: &str, like: &str) -> Result<ModelId, Problem> {
    match like.split_once('/') {
        Some((provider, model)) if !provider.trim().is_empty() && !model.trim().is_empty() => {
            Ok(ModelId::from(model))
        }
        _ => Err(Problem::new(
            at,
            format!(
                "\"{}\" is not \"provider/model\": name the model whose vectors this one's are, \
                 e.g. \"openai/text-embedding-3-small\"",
                switchyard_core::text::bounded(like)
            ),
        )),
    }
}

/// The facts a model entry (at `at`) writes, checked: a window of at least one token, prices
/// that are numbers and not negative.
fn check_facts(at: &str, model: &ModelForm) -> Result<ModelFacts, Problem> {
    for (field, value) in
        [("context_window", model.context_window), ("max_output", model.max_output)]
    {
        if value == Some(0) {
            return Err(Problem::new(format!("{at}.{field}"), "must be at least 1 token"));
        }
    }
    let facts = model.facts();
    if facts.price.is_some_and(|p| !p.is_valid()) {
        return Err(Problem::new(
            format!("{at}.price"),
            "prices must be finite and not negative (dollars per million tokens)",
        ));
    }
    Ok(facts)
}

/// Whether `continuation` is a mechanism of `dialect`'s wire format.
fn mechanism_fits(continuation: Continuation, dialect: Dialect) -> bool {
    match continuation {
        Continuation::Off => true,
        Continuation::Anthropic => dialect == Dialect::Anthropic,
        Continuation::Prefix | Continuation::Partial | Continuation::Vllm => {
            dialect == Dialect::OpenAi
        }
    }
}

/// The provider id team mode keeps its own keychain entries under (`keychain:team/database`):
/// a provider of that id could name them in its headers, or erase them when deleted.
pub const RESERVED_PROVIDER_ID: &str = "team";

/// A `keychain:` reference (at `field`) must name the entry of the credential it is written
/// on (`credential`; for a header, any entry of the provider): otherwise an imported config
/// could lend one provider's stored key, or OAuth tokens, to another provider's host.
fn own_keychain_entry(
    field: &str,
    id: &switchyard_secrets::SecretId,
    provider: &str,
    credential: Option<&str>,
) -> Result<(), Problem> {
    let own_provider = id.provider() == provider;
    let own_credential = credential.is_none_or(|c| id.credential() == c);
    if own_provider && own_credential {
        return Ok(());
    }
    let own = match credential {
        Some(c) => format!("keychain:{provider}/{c}"),
        None => format!("keychain:{provider}/<credential>"),
    };
    Err(Problem::new(
        field,
        format!(
            "a keychain reference names its own entry, {own}; \"keychain:{}\" belongs to \
             another provider or credential: store this provider's key under its own name \
             (send it as the credential's secret on the Providers page or the API) or use \
             \"env:VAR\"",
            id.account()
        ),
    ))
}

/// A model's `continuation` (at `field`), checked against the dialect it is called in: each
/// mechanism is a field of one wire format, so a mismatch could only be refused upstream.
fn continuation_fits(
    field: &str,
    continuation: Continuation,
    dialect: Dialect,
) -> Result<Continuation, Problem> {
    if mechanism_fits(continuation, dialect) {
        return Ok(continuation);
    }
    let hint = match dialect {
        Dialect::Anthropic => "an Anthropic model continues by `\"anthropic\"` (or `false`)",
        Dialect::OpenAi => {
            "a Chat model continues by `\"prefix\"`, `\"partial\"` or `\"vllm\"` (or `false`)"
        }
        Dialect::Responses | Dialect::Gemini => {
            "this model's API has no continuation mechanism: write `false`"
        }
    };
    Err(Problem::new(
        field,
        format!("\"{continuation}\" is not a mechanism of the {dialect} API; {hint}"),
    ))
}

/// The dialect an `api` field (at `field`) chooses for a provider of `kind`; `None` when it
/// is not set. Only `kind = "openai"` has more than one API.
fn api_dialect(
    field: &str,
    kind: ProviderKind,
    api: Option<OpenAiApi>,
) -> Result<Option<Dialect>, Problem> {
    match (kind, api) {
        (_, None) => Ok(None),
        (ProviderKind::Openai, Some(OpenAiApi::Chat)) => Ok(Some(Dialect::OpenAi)),
        (ProviderKind::Openai, Some(OpenAiApi::Responses)) => Ok(Some(Dialect::Responses)),
        (_, Some(_)) => Err(Problem::new(
            field,
            "only `kind = \"openai\"` providers choose an API (`chat` or `responses`); remove `api`",
        )),
    }
}

impl ComboForm {
    fn validate(&self, at: &str, providers: &[ProviderConfig]) -> Result<Combo, Problem> {
        if self.name.contains('/') {
            return Err(Problem::new(
                format!("{at}.name"),
                "must not contain '/': that form means provider/model",
            ));
        }
        if self.targets.is_empty() {
            return Err(Problem::new(format!("{at}.targets"), "must list at least one target"));
        }
        let targets = self
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| t.validate(&format!("{at}.targets[{i}]"), providers))
            .collect::<Result<_, _>>()?;
        let hedge = self.hedge(at)?;
        Ok(Combo { name: self.name.clone(), strategy: self.strategy, targets, hedge })
    }

    /// `hedge_after` or `hedge_after_ms`, at most one of them.
    fn hedge(&self, at: &str) -> Result<Option<HedgeAfter>, Problem> {
        match (&self.hedge_after, self.hedge_after_ms) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => Err(Problem::new(
                format!("{at}.hedge_after_ms"),
                "hedge_after and hedge_after_ms are alternatives; keep one of them",
            )),
            (Some(text), None) => HedgeAfter::parse_percentile(text)
                .map(Some)
                .map_err(|problem| Problem::new(format!("{at}.hedge_after"), problem)),
            (None, Some(ms)) if (1..=MAX_HEDGE_AFTER_MS).contains(&ms) => {
                Ok(Some(HedgeAfter::Fixed(Duration::from_millis(ms))))
            }
            (None, Some(ms)) => Err(Problem::new(
                format!("{at}.hedge_after_ms"),
                format!("{ms} is out of range; allowed 1..={MAX_HEDGE_AFTER_MS} (milliseconds)"),
            )),
        }
    }
}

/// The longest fixed hedge delay: `first_event_ms`'s own upper bound, ten minutes.
const MAX_HEDGE_AFTER_MS: u64 = 600_000;

impl TargetForm {
    fn validate(&self, at: &str, providers: &[ProviderConfig]) -> Result<Target, Problem> {
        let (provider, model) = parse_target(&self.target).ok_or_else(|| {
            Problem::new(
                format!("{at}.target"),
                format!("\"{}\" must be provider/model", self.target),
            )
        })?;
        let Some(p) = providers.iter().find(|p| p.id.as_str() == provider) else {
            let known: Vec<&str> = providers.iter().map(|p| p.id.as_str()).collect();
            return Err(Problem::new(
                format!("{at}.target"),
                format!("unknown provider \"{provider}\"; configured: {known:?}"),
            ));
        };
        if !p.serves(model) {
            let listed = p.listed();
            return Err(Problem::new(
                format!("{at}.target"),
                format!(
                    "provider \"{provider}\" does not list model \"{model}\"; listed: {listed:?} (add it to the provider's models first)"
                ),
            ));
        }
        let mut target = Target::new(provider, model);
        target.probe = p.model(model).is_none_or(|m| m.probe);
        target.continuation = p.continuation_for(model);
        if let Some(credential) = &self.credential {
            if !p.credentials.iter().any(|c| c.id.as_str() == credential) {
                return Err(Problem::new(
                    format!("{at}.credential"),
                    format!("provider \"{provider}\" has no credential \"{credential}\""),
                ));
            }
            target.credential = Some(credential.as_str().into());
        }
        if let Some(weight) = self.weight {
            if !(1..=1000).contains(&weight) {
                return Err(Problem::new(
                    format!("{at}.weight"),
                    format!("{weight} is out of range; allowed 1..=1000"),
                ));
            }
            target.weight = weight;
        }
        if let Some(window) = self.context_window
            && window == 0
        {
            return Err(Problem::new(format!("{at}.context_window"), "must be at least 1 token"));
        }
        if let Some(price) = self.price
            && !price.to_price().is_valid()
        {
            return Err(Problem::new(
                format!("{at}.price"),
                "prices must be finite and not negative",
            ));
        }
        // The target's own numbers, else the model's facts (written, else the catalogue's), so
        // `cost` and the context-window fallback work without repeating them per combo.
        let facts = p.facts(model);
        target.context_window = self.context_window.or(facts.context_window);
        target.price = self.price.map(PriceForm::to_price).or(facts.price).map(charged);
        Ok(target)
    }
}

/// A model's price as targets carry it (what the `cost` strategy and usage charge).
fn charged(price: ModelPrice) -> Price {
    Price {
        input_per_mtok: price.input_per_mtok,
        output_per_mtok: price.output_per_mtok,
        cache_read_per_mtok: price.cache_read_per_mtok,
        cache_write_per_mtok: price.cache_write_per_mtok,
    }
}

/// The longest alias pattern, in characters: far longer than any model name in use.
pub const MAX_ALIAS_PATTERN: usize = 200;

/// Checks `[[aliases]]` and compiles them.
///
/// Besides the shape of each pattern, refuses aliases that could never apply, so the config
/// says only what happens: a pattern without `*` equal to a combo name (the combo always wins),
/// and a pattern whose every match is `provider/model` of a configured provider (those always
/// route directly). A catch-all (`*` alone) is refused too: `default_route` says that.
fn validate_aliases(
    aliases: &[AliasForm],
    combos: &[Combo],
    providers: &[ProviderConfig],
) -> Result<AliasTable, Problem> {
    for (i, alias) in aliases.iter().enumerate() {
        let field = format!("aliases[{i}].match");
        let text = alias.pattern.as_str();
        if text.is_empty() || text.chars().count() > MAX_ALIAS_PATTERN {
            return Err(Problem::new(
                field,
                format!(
                    "a pattern is 1 to {MAX_ALIAS_PATTERN} characters: a model name, or one with '*' for any run of characters (\"claude-*haiku*\")"
                ),
            ));
        }
        if text.chars().any(char::is_whitespace) {
            return Err(Problem::new(
                field,
                format!("\"{text}\" contains whitespace, which no model name has"),
            ));
        }
        if let Some(j) = aliases[..i].iter().position(|a| a.pattern == alias.pattern) {
            return Err(Problem::new(
                field,
                format!("\"{text}\" is already aliases[{j}].match; write each pattern once"),
            ));
        }
        let pattern = Pattern::new(text);
        if pattern.is_catch_all() {
            return Err(Problem::new(
                field,
                "a pattern of only '*' matches every name; set default_route instead",
            ));
        }
        if pattern.is_exact() && combos.iter().any(|c| c.name == text) {
            return Err(Problem::new(
                field,
                format!(
                    "\"{text}\" is a combo's name, and a combo's name always routes to the combo; remove this alias or rename the combo"
                ),
            ));
        }
        if let Some((provider, _)) = pattern.prefix().split_once('/')
            && providers.iter().any(|p| p.id.as_str() == provider)
        {
            return Err(Problem::new(
                field,
                format!(
                    "every name \"{text}\" matches is {provider}/model, which routes straight to provider \"{provider}\"; this alias would never apply"
                ),
            ));
        }
        check_route(&format!("aliases[{i}].to"), &alias.to, combos, providers)?;
    }
    Ok(AliasTable::new(aliases.iter().map(|a| (a.pattern.as_str(), a.to.as_str()))))
}

/// Where an alias or `default_route` sends requests: an existing combo, or `provider/model` of
/// a configured provider (a model it lists, when it lists any). Never another alias: a lookup
/// is one step, and no chain can loop.
fn check_route(
    field: &str,
    to: &str,
    combos: &[Combo],
    providers: &[ProviderConfig],
) -> Result<(), Problem> {
    if combos.iter().any(|c| c.name == to) {
        return Ok(());
    }
    let Some((provider, model)) = parse_target(to) else {
        let names: Vec<&str> = combos.iter().map(|c| c.name.as_str()).collect();
        return Err(Problem::new(
            field,
            format!("\"{to}\" is neither a combo nor provider/model; combos: {names:?}"),
        ));
    };
    let Some(p) = providers.iter().find(|p| p.id.as_str() == provider) else {
        let known: Vec<&str> = providers.iter().map(|p| p.id.as_str()).collect();
        return Err(Problem::new(
            field,
            format!(
                "\"{to}\" is no combo, and \"{provider}\" is no provider; providers: {known:?}"
            ),
        ));
    };
    if !p.serves(model) {
        let listed = p.listed();
        return Err(Problem::new(
            field,
            format!(
                "provider \"{provider}\" does not list model \"{model}\"; listed: {listed:?} (add it to the provider's models first)"
            ),
        ));
    }
    Ok(())
}

/// The chat endpoint of a dialect whose endpoint does not name the model, parsed once.
fn chat_url(at: &str, dialect: Dialect, base_url: &str) -> Result<Option<Url>, Problem> {
    if dialect == Dialect::Gemini {
        return Ok(None);
    }
    let path = dialect.endpoint("", false).path;
    Url::parse(&format!("{base_url}/{path}")).map(Some).map_err(|e| {
        Problem::new(format!("{at}.base_url"), format!("\"{base_url}\" is not a valid URL: {e}"))
    })
}

/// `provider/model` → its parts; the model may itself contain slashes (`openrouter/meta/llama`).
pub fn parse_target(text: &str) -> Option<(&str, &str)> {
    let (provider, model) = text.split_once('/')?;
    (!provider.is_empty() && !model.is_empty()).then_some((provider, model))
}

fn check_name(field: &str, name: &str) -> Result<(), Problem> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Problem::new(
            field,
            format!("\"{name}\" must be 1 to 64 characters of letters, digits, '-', '_' or '.'"),
        ))
    }
}

/// Header names that carry a credential, by name or by the words in it (`x-portkey-api-key`,
/// `x-auth-token`): their values must come from a secret reference.
fn carries_credential(name: &http::HeaderName) -> bool {
    let name = name.as_str();
    matches!(name, "authorization" | "proxy-authorization" | "cookie")
        || ["key", "token", "secret", "auth", "password"].iter().any(|word| name.contains(word))
}

fn check_url(field: &str, url: &str) -> Result<(), Problem> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(rest)
            if !rest.is_empty() && !rest.starts_with('/') && !url.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(Problem::new(
            field,
            format!("\"{url}\" must be an http:// or https:// URL with a host"),
        )),
    }?;
    // `https://user:key@host/` would send a credential to wherever the URL points, outside the
    // keychain, and print it wherever the URL is shown. Not repeated: it may hold a key.
    let authority = url.split_once("://").map_or("", |(_, rest)| rest);
    let authority = authority.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(Problem::new(
            field,
            "the URL carries a user name or password (user:pass@host); remove it and give the key \
             as a credential (keychain or env:)",
        ));
    }
    if url.starts_with("http://") && !is_loopback_host(authority) {
        tracing::warn!(
            field,
            url,
            "plain http:// to a host that is not this machine: keys and prompts cross the network unencrypted"
        );
    }
    Ok(())
}

/// `localhost`, `127.x.x.x` or `[::1]`, with or without a port.
fn is_loopback_host(authority: &str) -> bool {
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(host, _)| host)
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_counts_as_loopback_for_the_plain_http_warning() {
        for host in ["localhost:11434", "127.0.0.1:8000", "127.0.1.1", "[::1]:1234", "LOCALHOST"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["api.example.com", "10.0.0.5:8000", "localhost.example.com", "[fe80::1]:80"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
