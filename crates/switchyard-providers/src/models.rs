//! Model lists: where each dialect lists the models a key may use, and reading the answer.
//! A model list is the cheapest authenticated call every provider offers, so it doubles as
//! the connection test.

use serde::Deserialize;

use crate::dialect::Dialect;
use crate::error::ProviderError;

impl Dialect {
    /// The model list's path, relative to the provider's base URL (`GET`).
    pub fn models_path(self) -> &'static str {
        match self {
            // OpenAI-compatible base URLs already end in the version (`.../v1`).
            Self::OpenAi | Self::Responses | Self::Gemini => "models",
            Self::Anthropic => "v1/models",
        }
    }

    /// The model ids in a 2xx model-list body, as requests name them (Gemini's `models/`
    /// prefix removed), sorted and without duplicates.
    pub fn decode_model_list(self, body: &[u8]) -> Result<Vec<String>, ProviderError> {
        #[derive(Deserialize)]
        struct Listed {
            #[serde(alias = "name")]
            id: String,
        }
        #[derive(Deserialize)]
        struct List {
            #[serde(alias = "models")]
            data: Vec<Listed>,
        }
        let list: List =
            serde_json::from_slice(body).map_err(|e| ProviderError::InvalidResponse {
                dialect: self,
                message: format!("not a model list: {e}"),
            })?;
        let mut ids: Vec<String> = list
            .data
            .into_iter()
            .map(|m| m.id.strip_prefix("models/").map_or(m.id.clone(), str::to_owned))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dialect_model_list_reads_as_bare_ids() {
        let openai =
            br#"{"object":"list","data":[{"id":"gpt-4o","object":"model"},{"id":"gpt-4o-mini"}]}"#;
        let anthropic = br#"{"data":[{"type":"model","id":"claude-sonnet-4-5"}],"has_more":false}"#;
        let gemini = br#"{"models":[{"name":"models/gemini-2.5-pro","version":"001"}]}"#;
        assert_eq!(Dialect::OpenAi.decode_model_list(openai).unwrap(), ["gpt-4o", "gpt-4o-mini"]);
        assert_eq!(Dialect::Anthropic.decode_model_list(anthropic).unwrap(), ["claude-sonnet-4-5"]);
        assert_eq!(Dialect::Gemini.decode_model_list(gemini).unwrap(), ["gemini-2.5-pro"]);
    }

    #[test]
    fn a_body_that_is_not_a_model_list_is_refused_with_the_dialect_named() {
        let error = Dialect::Anthropic.decode_model_list(b"<html>").unwrap_err();
        assert!(error.to_string().contains("anthropic"), "{error}");
    }
}
