//! What a provider speaks, as a config names it: the kind (`openai`, `anthropic`, `gemini`) and,
//! for `openai`, which of OpenAI's APIs. Here rather than in the app so the catalogue's presets
//! and the config share one spelling; the wire dialect each maps to is the app's business.

use serde::{Deserialize, Serialize};
use switchyard_core::continuation::Continuation;
use ts_rs::TS;

/// The wire dialect a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Any OpenAI-compatible API: OpenAI, OpenRouter, Groq, DeepSeek, Together, Ollama, LM Studio, vLLM.
    Openai,
    Anthropic,
    Gemini,
}

impl ProviderKind {
    pub const ALLOWED: &'static str = "\"openai\", \"anthropic\" or \"gemini\"";

    /// The continuation mechanism a model of this kind has unless its entry or preset says
    /// otherwise: Anthropic documents the assistant prefill; an OpenAI-compatible host may or
    /// may not (OpenAI itself has none), so it is off until a model or preset says which.
    pub fn default_continuation(self) -> Continuation {
        match self {
            Self::Anthropic => Continuation::Anthropic,
            Self::Openai | Self::Gemini => Continuation::Off,
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }
}

/// Which of OpenAI's APIs an `openai` provider is called through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum OpenAiApi {
    /// Chat Completions (`/chat/completions`): what every OpenAI-compatible host speaks.
    #[default]
    Chat,
    /// Responses (`/responses`): OpenAI's newer API, the only one some models answer on.
    Responses,
}
