//! The declarative config file (`switchyard serve --config FILE`, TOML).
//!
//! A file is parsed into forms (what people write) and validated into a [`Config`] (what the app
//! runs on) in one step that either succeeds completely or fails with one error naming the
//! file, the path of the offending field and what is allowed: nothing ever starts
//! half-configured. Secrets are never written inline; a credential says `env:VAR` and the value
//! is read when the file is loaded. `docs/configuration.md` documents every field.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use switchyard_core::resilience::{CredentialKind, SelectionStrategy};
use switchyard_core::routing::{Combo, Price, RouteStrategy, Target};
use switchyard_core::settings::{
    BreakerPolicy, BreakerProfile, BreakerSettings, CooldownPolicy, CooldownSettings,
    LockoutPolicy, LockoutSettings, RoutingSettings, SettingsError, TimeoutSettings, Timeouts,
};
use switchyard_core::{CredentialId, ModelId, ProviderId};
use switchyard_secrets::{KeychainStore, Secret, SecretRef, SecretStore};

/// The port `serve` listens on when neither the config nor `--port` says otherwise.
pub const DEFAULT_PORT: u16 = 4141;

/// Where credentials' secrets are looked up while a config is loaded.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// Environment variables, for `env:VAR`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The OS keychain, for `keychain:provider/credential`; `None` refuses those.
    pub secrets: Option<&'a dyn SecretStore>,
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
}

/// The wire dialect a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Any OpenAI-compatible API: OpenAI, OpenRouter, Groq, DeepSeek, Together, Ollama, LM Studio, vLLM.
    Openai,
    Anthropic,
    Gemini,
}

impl ProviderKind {
    fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forms

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    #[serde(default)]
    server: ServerForm,
    #[serde(default)]
    providers: Vec<ProviderForm>,
    #[serde(default)]
    combos: Vec<ComboForm>,
    #[serde(default)]
    settings: SettingsForm,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerForm {
    port: Option<u16>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderForm {
    id: String,
    kind: ProviderKind,
    base_url: Option<String>,
    /// Breaker defaults: `api_key` (default), `oauth` or `local`.
    profile: Option<BreakerProfile>,
    /// Overrides of the profile's breaker settings.
    breaker: Option<BreakerSettings>,
    #[serde(default)]
    selection: SelectionStrategy,
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    credentials: Vec<CredentialForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialForm {
    id: String,
    /// `env:VAR`; absent for providers that need no key (a local Ollama).
    secret: Option<String>,
    #[serde(default)]
    kind: CredentialKind,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ComboForm {
    name: String,
    #[serde(default)]
    strategy: RouteStrategy,
    targets: Vec<TargetForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetForm {
    /// `provider/model`.
    target: String,
    credential: Option<String>,
    weight: Option<u32>,
    context_window: Option<u32>,
    price: Option<PriceForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceForm {
    input_per_mtok: f64,
    output_per_mtok: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsForm {
    #[serde(default)]
    model_lockouts: LockoutSettings,
    #[serde(default)]
    credential_cooldown: CooldownSettings,
    #[serde(default)]
    timeouts: TimeoutSettings,
    #[serde(default)]
    routing: RoutingSettings,
}

// ---------------------------------------------------------------------------------------------
// The validated config

/// One credential, its secret resolved.
#[derive(Clone, Debug)]
pub struct CredentialConfig {
    pub id: CredentialId,
    pub kind: CredentialKind,
    /// `None` for providers that take no key.
    pub secret: Option<Secret>,
}

/// One provider, ready to route to.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    pub id: ProviderId,
    pub kind: ProviderKind,
    pub base_url: String,
    pub breaker: BreakerPolicy,
    pub selection: SelectionStrategy,
    pub models: Vec<ModelId>,
    pub headers: Vec<(String, String)>,
    /// Never empty: a provider configured without keys gets one credential named `default`.
    pub credentials: Vec<CredentialConfig>,
}

/// Everything `serve` runs on.
#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    pub providers: Vec<ProviderConfig>,
    pub combos: Vec<Combo>,
    pub lockout: LockoutPolicy,
    pub cooldown: CooldownPolicy,
    pub timeouts: Timeouts,
    pub routing: RoutingSettings,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            port: DEFAULT_PORT,
            providers: Vec::new(),
            combos: Vec::new(),
            lockout: LockoutPolicy::default(),
            cooldown: CooldownPolicy::default(),
            timeouts: Timeouts::default(),
            routing: RoutingSettings::default(),
        }
    }
}

/// A validation failure before the file name is attached.
struct Problem {
    field: String,
    problem: String,
}

impl Problem {
    fn new(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        Self { field: field.into(), problem: problem.to_string() }
    }
}

impl From<SettingsError> for Problem {
    fn from(e: SettingsError) -> Self {
        Self { field: e.field, problem: e.problem }
    }
}

impl Config {
    /// Reads, parses and validates `file`, resolving `env:` secrets from the process
    /// environment.
    pub fn load(file: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(file)
            .map_err(|source| ConfigError::Read { file: file.to_owned(), source })?;
        let keychain = KeychainStore::new();
        let sources = Sources { env: &|var| std::env::var(var).ok(), secrets: Some(&keychain) };
        Self::parse_with(&text, file, &sources)
    }

    /// Parses and validates config text; `file` only names it in errors, `env` resolves
    /// `env:` secrets (`keychain:` ones are refused: there is no keychain here).
    pub fn parse(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::parse_with(text, file, &Sources { env, secrets: None })
    }

    /// Parses and validates config text, resolving secrets from `sources`.
    pub fn parse_with(text: &str, file: &Path, sources: &Sources<'_>) -> Result<Self, ConfigError> {
        Self::parse_form(text, sources).map_err(|p| ConfigError::Invalid {
            file: file.to_owned(),
            field: p.field,
            problem: p.problem,
        })
    }

    fn parse_form(text: &str, sources: &Sources<'_>) -> Result<Self, Problem> {
        let deserializer = toml::Deserializer::parse(text)
            .map_err(|e| Problem::new("(syntax)", toml_message(&e)))?;
        let form: FileForm = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            Problem::new(
                if path == "." { "(top level)".to_owned() } else { path },
                toml_message(e.inner()),
            )
        })?;
        form.validate(sources)
    }

    pub fn provider(&self, id: &ProviderId) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| &p.id == id)
    }

    pub fn combo(&self, name: &str) -> Option<&Combo> {
        self.combos.iter().find(|c| c.name == name)
    }
}

fn toml_message(e: &toml::de::Error) -> String {
    e.message().trim().to_owned()
}

impl FileForm {
    fn validate(self, sources: &Sources<'_>) -> Result<Config, Problem> {
        let mut providers = Vec::with_capacity(self.providers.len());
        let mut ids = HashSet::new();
        for (i, p) in self.providers.into_iter().enumerate() {
            let at = format!("providers[{i}]");
            check_name(&format!("{at}.id"), &p.id)?;
            if !ids.insert(p.id.clone()) {
                return Err(Problem::new(
                    format!("{at}.id"),
                    format!("\"{}\" is used by another provider", p.id),
                ));
            }
            providers.push(p.validate(&at, sources)?);
        }
        let mut combos = Vec::with_capacity(self.combos.len());
        let mut names = HashSet::new();
        for (i, c) in self.combos.into_iter().enumerate() {
            let at = format!("combos[{i}]");
            check_name(&format!("{at}.name"), &c.name)?;
            if c.name.contains('/') {
                return Err(Problem::new(
                    format!("{at}.name"),
                    "must not contain '/': that form means provider/model",
                ));
            }
            if !names.insert(c.name.clone()) {
                return Err(Problem::new(
                    format!("{at}.name"),
                    format!("\"{}\" is used by another combo", c.name),
                ));
            }
            combos.push(c.validate(&at, &providers)?);
        }
        Ok(Config {
            port: self.server.port.unwrap_or(DEFAULT_PORT),
            providers,
            combos,
            lockout: self.settings.model_lockouts.validate()?,
            cooldown: self.settings.credential_cooldown.validate()?,
            timeouts: self.settings.timeouts.validate()?,
            routing: self.settings.routing.validate()?,
        })
    }
}

impl ProviderForm {
    fn validate(self, at: &str, sources: &Sources<'_>) -> Result<ProviderConfig, Problem> {
        let base_url = self.base_url.unwrap_or_else(|| self.kind.default_base_url().to_owned());
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(Problem::new(
                format!("{at}.base_url"),
                format!("\"{base_url}\" must start with http:// or https://"),
            ));
        }
        let profile = self.profile.unwrap_or(BreakerProfile::ApiKey);
        let breaker = self.breaker.unwrap_or_else(|| BreakerSettings::profile(profile));
        let breaker =
            breaker.validate().map_err(|e| Problem::new(format!("{at}.{}", e.field), e.problem))?;
        let mut credentials = Vec::new();
        let mut ids = HashSet::new();
        for (i, c) in self.credentials.into_iter().enumerate() {
            let cat = format!("{at}.credentials[{i}]");
            check_name(&format!("{cat}.id"), &c.id)?;
            if !ids.insert(c.id.clone()) {
                return Err(Problem::new(
                    format!("{cat}.id"),
                    format!("\"{}\" is used by another credential of this provider", c.id),
                ));
            }
            let secret = c
                .secret
                .map(|s| {
                    SecretRef::parse(&s).and_then(|r| r.resolve_using(sources.env, sources.secrets))
                })
                .transpose()
                .map_err(|e| Problem::new(format!("{cat}.secret"), e))?;
            credentials.push(CredentialConfig { id: c.id.into(), kind: c.kind, secret });
        }
        if credentials.is_empty() {
            credentials.push(CredentialConfig {
                id: "default".into(),
                kind: CredentialKind::ApiKey,
                secret: None,
            });
        }
        Ok(ProviderConfig {
            id: self.id.into(),
            kind: self.kind,
            base_url: base_url.trim_end_matches('/').to_owned(),
            breaker,
            selection: self.selection,
            models: self.models.into_iter().map(ModelId::from).collect(),
            headers: self.headers.into_iter().collect(),
            credentials,
        })
    }
}

impl ComboForm {
    fn validate(self, at: &str, providers: &[ProviderConfig]) -> Result<Combo, Problem> {
        if self.targets.is_empty() {
            return Err(Problem::new(format!("{at}.targets"), "must list at least one target"));
        }
        let targets = self
            .targets
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.validate(&format!("{at}.targets[{i}]"), providers))
            .collect::<Result<_, _>>()?;
        Ok(Combo { name: self.name, strategy: self.strategy, targets })
    }
}

impl TargetForm {
    fn validate(self, at: &str, providers: &[ProviderConfig]) -> Result<Target, Problem> {
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
        let mut target = Target::new(provider, model);
        if let Some(credential) = self.credential {
            if !p.credentials.iter().any(|c| c.id.as_str() == credential) {
                return Err(Problem::new(
                    format!("{at}.credential"),
                    format!("provider \"{provider}\" has no credential \"{credential}\""),
                ));
            }
            target.credential = Some(credential.into());
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
        target.context_window = self.context_window;
        if let Some(price) = self.price {
            let ok = |v: f64| v.is_finite() && v >= 0.0;
            if !ok(price.input_per_mtok) || !ok(price.output_per_mtok) {
                return Err(Problem::new(
                    format!("{at}.price"),
                    "prices must be finite and not negative",
                ));
            }
            target.price = Some(Price {
                input_per_mtok: price.input_per_mtok,
                output_per_mtok: price.output_per_mtok,
            });
        }
        Ok(target)
    }
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
