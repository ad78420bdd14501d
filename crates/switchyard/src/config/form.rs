//! The config *forms*: what people write in a config file and what the management API edits.
//!
//! A form is plain data, serialised both ways (TOML for files and export, JSON for the API).
//! It holds only references to secrets (`env:VAR`, `keychain:provider/credential`), never a
//! secret, so any form can be shown, saved or exported as it is. Unknown fields are refused so a
//! typo never silently means "default"; fields at their default are left out when written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use switchyard_catalogue::{CatalogueProvider, ModelFacts, ModelPrice};
use switchyard_core::continuation::Continuation;
use switchyard_core::resilience::{CredentialKind, SelectionStrategy};
use switchyard_core::routing::RouteStrategy;
use switchyard_core::settings::{
    AutoSettings, BreakerProfile, BreakerSettings, BudgetSettings, CooldownSettings,
    LockoutSettings, RoutingSettings, TimeoutSettings, UsageSettings,
};
use ts_rs::TS;

use crate::oauth::OAuthClient;

// The kind and API enums are shared with the catalogue's presets, so both spell them alike.
pub use switchyard_catalogue::{OpenAiApi, ProviderKind};

/// A whole config: the file, the export, and what the API edits piece by piece.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct ConfigForm {
    #[serde(default)]
    pub server: ServerForm,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ProviderForm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub combos: Vec<ComboForm>,
    /// Where a model name goes that no combo, `provider/model` or alias names: a combo or
    /// `provider/model`. Unset, such a name gets a 404 listing what is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub default_route: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<AliasForm>,
    #[serde(default)]
    pub settings: SettingsForm,
    /// Team mode (docs/team.md): share breaker, cooldown and lockout state with other
    /// instances through `PostgreSQL`.
    #[serde(default, skip_serializing_if = "TeamForm::is_off")]
    #[ts(optional, as = "Option<TeamForm>")]
    pub team: TeamForm,
}

/// `[team]`: takes effect at the next start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct TeamForm {
    /// Where the `PostgreSQL` URL is, as a secret reference (`env:SWITCHYARD_TEAM_DB`,
    /// `keychain:team/database`): it carries a password, so it is never written here. Empty:
    /// no team.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[ts(as = "Option<String>", optional)]
    pub database_url: String,
    /// This instance's name in the team, unique among the running instances [default: the host
    /// name and a random suffix, new at every start].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub instance: Option<String>,
}

impl TeamForm {
    /// Nothing set: no team, and nothing to write.
    pub fn is_off(&self) -> bool {
        *self == Self::default()
    }
}

/// `[server]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct ServerForm {
    /// The loopback port [default 4141]. Takes effect at the next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub port: Option<u16>,
    /// How many connections may be open at once [default 128]; when full, the oldest one that
    /// has not made an authenticated request is closed. Takes effect at the next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub max_connections: Option<u32>,
}

/// `[[providers]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct ProviderForm {
    pub id: String,
    /// A catalogue preset (`GET /api/catalogue`, docs/configuration.md) that fills what this
    /// form leaves out: kind, API, base URL, headers, passthrough, the continuation default and
    /// its models' facts. What is written here wins. Its models are facts, not a list of what
    /// may be routed: that stays `models`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub preset: Option<String>,
    /// Required unless a `preset` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub kind: Option<ProviderKind>,
    /// The preset's endpoint, else the kind's public one, when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub base_url: Option<String>,
    /// `kind = "openai"` only: the same host's Anthropic-compatible endpoint (Kimi, GLM, Qwen
    /// and others serve one for Claude Code), without `/v1/messages`. An Anthropic
    /// client's requests then go there as it sent them; every other client's go to `base_url`
    /// [default: the preset's, else none].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub anthropic_base_url: Option<String>,
    /// Which of `settings.breaker_profiles` applies [default `api_key`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub profile: Option<BreakerProfile>,
    /// A whole breaker section for this provider alone, replacing its profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub breaker: Option<BreakerSettings>,
    #[serde(default, skip_serializing_if = "is_default")]
    #[ts(as = "Option<SelectionStrategy>", optional)]
    pub selection: SelectionStrategy,
    /// The models it serves, each a plain id or a table with the model's facts; empty means
    /// any model the provider serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "model_list")]
    #[ts(as = "Option<Vec<ModelEntry>>", optional)]
    pub models: Vec<ModelForm>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[ts(as = "Option<BTreeMap<String, String>>", optional)]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<CredentialForm>>", optional)]
    pub credentials: Vec<CredentialForm>,
    /// The OAuth client its `oauth` credentials sign in and refresh with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub oauth: Option<OAuthClient>,
    /// A client of this provider's own dialect is forwarded as it sent its request, with only
    /// `model` rewritten [default: the preset's, else true]. `false` re-encodes every request
    /// instead, for hosts that refuse fields they do not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub passthrough: Option<bool>,
    /// The provider keys its prompt cache by `prompt_cache_key` (OpenAI's Chat and Responses
    /// APIs): a request translated to it from another dialect carries its session's key there,
    /// so the session's turns reach the same cache [default: the preset's, else false].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub prompt_cache_key: Option<bool>,
    /// Chat streams ask for usage (`stream_options.include_usage`) so their tokens and cost
    /// are known [default true]; `false` for OpenAI-compatible hosts that refuse the field.
    /// The usage chunk is kept from clients that did not ask for it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    #[ts(as = "Option<bool>", optional)]
    pub stream_usage: bool,
    /// The provider's stream end marker (`[DONE]`) proves an answer whole even without a
    /// finish reason [default false]: only for an OpenAI-compatible server known to end good
    /// answers that way. Off, such an answer counts as cut short (RESILIENCE.md §7).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[ts(as = "Option<bool>", optional)]
    pub trust_end_marker: bool,
    /// At most this many requests at once to this provider, over all its credentials
    /// [default: no limit]; see [`CredentialForm::max_in_flight`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub max_in_flight: Option<u32>,
    /// `kind = "openai"` only: which API requests go to [default `chat`]; a model's own `api`
    /// wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub api: Option<OpenAiApi>,
    /// In team mode, share this provider's breaker (and its keys' cooldowns) although its base
    /// URL is a private address (a team's internal gateway) [default false]. A provider at a
    /// loopback address is never shared: `localhost` is another server on every machine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[ts(as = "Option<bool>", optional)]
    pub share: bool,
}

impl ProviderForm {
    pub fn new(id: impl Into<String>, kind: ProviderKind) -> Self {
        Self {
            id: id.into(),
            preset: None,
            kind: Some(kind),
            base_url: None,
            anthropic_base_url: None,
            profile: None,
            breaker: None,
            selection: SelectionStrategy::default(),
            models: Vec::new(),
            headers: BTreeMap::new(),
            credentials: Vec::new(),
            oauth: None,
            passthrough: None,
            prompt_cache_key: None,
            stream_usage: true,
            trust_end_marker: false,
            max_in_flight: None,
            api: None,
            share: false,
        }
    }

    pub fn credential(&self, id: &str) -> Option<&CredentialForm> {
        self.credentials.iter().find(|c| c.id == id)
    }

    /// The catalogue entry `preset` names, if it names one that exists.
    pub fn catalogue_entry(&self) -> Option<&'static CatalogueProvider> {
        self.preset.as_deref().and_then(|id| switchyard_catalogue::catalogue().provider(id))
    }

    /// The kind as written, else the preset's; `None` only for a form validation refuses.
    pub fn resolved_kind(&self) -> Option<ProviderKind> {
        self.kind.or_else(|| self.catalogue_entry().map(|p| p.kind))
    }
}

/// `[[providers.models]]`: one model and the facts known about it. Facts left out are the
/// provider's (or, later, the catalogue's); a fact written here wins.
///
/// An entry without facts is written as its plain id (`"gpt-4o"`), so configs from before
/// model facts existed read and write back unchanged. A new fact is one more optional field
/// here: the spelling of the list does not change again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct ModelForm {
    /// The model's name as the provider knows it.
    pub id: String,
    /// `kind = "openai"` only: which API this model is called through, whatever the
    /// provider's `api` (`gpt-5-codex` answers only on Responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub api: Option<OpenAiApi>,
    /// Whether Switchyard may send this model one-token recovery probes of its own when it is
    /// benched and another target can serve meanwhile [default true]. Set `false` for a model
    /// billed per request, where a probe costs as much as a real request: it then gets its
    /// traffic back by serving a user's request, as a combo of one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub probe: Option<bool>,
    /// How this model continues a partial answer when another target's stream broke
    /// mid-answer (RESILIENCE.md §10): `"anthropic"` (assistant prefill), `"prefix"`
    /// (DeepSeek, Mistral), `"partial"` (Moonshot), `"vllm"` (`continue_final_message`), or
    /// `false` [default `"anthropic"` for `kind = "anthropic"`, else `false`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "false | \"anthropic\" | \"prefix\" | \"partial\" | \"vllm\"")]
    pub continuation: Option<Continuation>,
    /// Tokens of input and output together [default: the catalogue's]. Combo targets use it
    /// for the context-window fallback unless they set their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_window: Option<u32>,
    /// The most tokens one answer may have [default: the catalogue's].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub max_output: Option<u32>,
    /// Dollars per million tokens [default: the catalogue's]; the `cost` strategy reads it
    /// unless a target sets its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub price: Option<PriceForm>,
    /// It calls tools [default: the catalogue's].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub tools: Option<bool>,
    /// It reads images [default: the catalogue's].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub vision: Option<bool>,
    /// It reasons before answering [default: the catalogue's].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub reasoning: Option<bool>,
    /// An embedding model whose vectors are those of another, written `"provider/model"`
    /// (the same model served by another host): a combo's embeddings fall back between them.
    /// Vectors of different models do not mix, so without it embeddings fall back only to
    /// targets of the same model id [default: none].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub embeds_like: Option<String>,
}

impl ModelForm {
    /// A model with no facts of its own.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            api: None,
            probe: None,
            continuation: None,
            context_window: None,
            max_output: None,
            price: None,
            tools: None,
            vision: None,
            reasoning: None,
            embeds_like: None,
        }
    }

    /// The facts written here (unchecked; validation checks them).
    pub fn facts(&self) -> ModelFacts {
        ModelFacts {
            context_window: self.context_window,
            max_output: self.max_output,
            price: self.price.map(PriceForm::to_price),
            tools: self.tools,
            vision: self.vision,
            reasoning: self.reasoning,
        }
    }

    /// No fact is set: the entry is written as its plain id.
    pub fn is_plain(&self) -> bool {
        *self == Self::new(self.id.clone())
    }
}

impl From<&str> for ModelForm {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

/// How one entry of `models` is spelled: a plain id, or a table with the model's facts.
#[derive(Clone, Debug, PartialEq, Serialize, TS)]
#[ts(export)]
#[serde(untagged)]
pub enum ModelEntry {
    Id(String),
    Facts(ModelForm),
}

impl From<ModelEntry> for ModelForm {
    fn from(entry: ModelEntry) -> Self {
        match entry {
            ModelEntry::Id(id) => Self::new(id),
            ModelEntry::Facts(form) => form,
        }
    }
}

impl From<ModelForm> for ModelEntry {
    fn from(form: ModelForm) -> Self {
        if form.is_plain() { Self::Id(form.id) } else { Self::Facts(form) }
    }
}

/// Written by hand rather than `untagged`: an untagged enum answers every mistake inside a
/// table with "did not match any variant", while this passes the table's own error on
/// ("unknown variant completions, expected chat or responses") at the field's path.
impl<'de> Deserialize<'de> for ModelEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ModelEntry;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a model id (\"gpt-4o\") or a table with `id` and the model's facts")
            }

            fn visit_str<E: serde::de::Error>(self, id: &str) -> Result<ModelEntry, E> {
                Ok(ModelEntry::Id(id.to_owned()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ModelEntry, A::Error> {
                ModelForm::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ModelEntry::Facts)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `models` as written: each entry a [`ModelEntry`], held as [`ModelForm`]s.
pub(crate) mod model_list {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{ModelEntry, ModelForm};

    pub(crate) fn serialize<S: Serializer>(
        models: &[ModelForm],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(models.iter().cloned().map(ModelEntry::from))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<ModelForm>, D::Error> {
        let entries = Vec::<ModelEntry>::deserialize(deserializer)?;
        Ok(entries.into_iter().map(ModelForm::from).collect())
    }
}

/// `[[providers.credentials]]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct CredentialForm {
    pub id: String,
    /// Where the secret is: `env:VAR` or `keychain:provider/credential`; absent for providers
    /// that take no key (a local Ollama).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub secret: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    #[ts(as = "Option<CredentialKind>", optional)]
    pub kind: CredentialKind,
    /// A disabled credential is kept but never routed to.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    #[ts(as = "Option<bool>", optional)]
    pub enabled: bool,
    /// Lower goes first; equal priorities keep the order written.
    #[serde(default, skip_serializing_if = "is_default")]
    #[ts(as = "Option<u32>", optional)]
    pub priority: u32,
    /// At most this many requests at once on this credential (a plan's or a local server's
    /// limit), streams until their last byte; more wait (`[settings.routing] queue_ms`) or go
    /// elsewhere [default: no limit].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub max_in_flight: Option<u32>,
}

impl CredentialForm {
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            secret: None,
            kind: CredentialKind::default(),
            enabled: true,
            priority: 0,
            max_in_flight: None,
        }
    }
}

/// `[[combos]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct ComboForm {
    pub name: String,
    #[serde(default, skip_serializing_if = "is_default")]
    #[ts(as = "Option<RouteStrategy>", optional)]
    pub strategy: RouteStrategy,
    pub targets: Vec<TargetForm>,
    /// Hedged first token (RESILIENCE.md §10): when a streamed attempt has sent no real event
    /// after this percentile (`"p95"`, any of `p1`..`p99`) of its target's recent time to
    /// first event, the next eligible candidate on another provider is started too. Used only
    /// after 20 samples, never below 1 s nor at or past `first_event_ms`. Not with
    /// `hedge_after_ms`; neither (the default) never hedges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub hedge_after: Option<String>,
    /// Hedged first token after this many milliseconds without a real event. Not with
    /// `hedge_after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "number")]
    pub hedge_after_ms: Option<u64>,
}

/// `[[aliases]]`: model names other tools send on their own (Claude Code's
/// `claude-haiku-4-5-20251001`), routed to a combo or `provider/model` without changing the tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct AliasForm {
    /// The name, or a pattern where `*` stands for any run of characters: `claude-*haiku*`.
    /// Case-sensitive.
    #[serde(rename = "match")]
    pub pattern: String,
    /// A combo name or `provider/model` (not another alias).
    pub to: String,
}

impl AliasForm {
    pub fn new(pattern: impl Into<String>, to: impl Into<String>) -> Self {
        Self { pattern: pattern.into(), to: to.into() }
    }
}

/// One target of a combo.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct TargetForm {
    /// `provider/model`.
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub credential: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub weight: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_window: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub price: Option<PriceForm>,
}

impl TargetForm {
    pub fn new(target: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            credential: None,
            weight: None,
            context_window: None,
            price: None,
        }
    }
}

/// Dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct PriceForm {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub cache_read_per_mtok: Option<f64>,
    /// Input written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub cache_write_per_mtok: Option<f64>,
}

impl PriceForm {
    pub fn to_price(self) -> ModelPrice {
        ModelPrice {
            input_per_mtok: self.input_per_mtok,
            output_per_mtok: self.output_per_mtok,
            cache_read_per_mtok: self.cache_read_per_mtok,
            cache_write_per_mtok: self.cache_write_per_mtok,
        }
    }
}

/// `[settings]`: one section per settings page.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct SettingsForm {
    #[serde(default)]
    pub model_lockouts: LockoutSettings,
    #[serde(default)]
    pub credential_cooldown: CooldownSettings,
    #[serde(default)]
    pub breaker_profiles: BreakerProfiles,
    #[serde(default)]
    pub timeouts: TimeoutSettings,
    #[serde(default)]
    pub routing: RoutingSettings,
    #[serde(default, skip_serializing_if = "is_default")]
    pub auto: AutoSettings,
    #[serde(default)]
    pub notifications: NotificationSettings,
    #[serde(default)]
    pub usage: UsageSettings,
    #[serde(default)]
    pub budgets: BudgetSettings,
}

/// `[settings.notifications]`: which events the desktop app announces with a desktop
/// notification. The headless proxy keeps them but shows none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct NotificationSettings {
    /// A provider's breaker opened [default true].
    #[serde(default = "yes")]
    pub breaker_open: bool,
    /// A combo was served by a fallback target after its first choice failed [default true].
    #[serde(default = "yes")]
    pub fallback: bool,
}

impl Default for NotificationSettings {
    fn default() -> Self {
        Self { breaker_open: true, fallback: true }
    }
}

/// The breaker defaults each provider starts from, by profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerProfiles {
    pub api_key: BreakerSettings,
    pub oauth: BreakerSettings,
    pub local: BreakerSettings,
}

impl Default for BreakerProfiles {
    fn default() -> Self {
        Self {
            api_key: BreakerSettings::profile(BreakerProfile::ApiKey),
            oauth: BreakerSettings::profile(BreakerProfile::Oauth),
            local: BreakerSettings::profile(BreakerProfile::Local),
        }
    }
}

impl BreakerProfiles {
    pub fn get(&self, profile: BreakerProfile) -> &BreakerSettings {
        match profile {
            BreakerProfile::ApiKey => &self.api_key,
            BreakerProfile::Oauth => &self.oauth,
            BreakerProfile::Local => &self.local,
        }
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_true(value: &bool) -> bool {
    *value
}

fn yes() -> bool {
    true
}
