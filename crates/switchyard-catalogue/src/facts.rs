//! What is known about one model: its window, its output limit, its prices and what it can do.
//!
//! Every fact is optional: a source that does not know one says nothing rather than a guess,
//! and [`ModelFacts::or`] lets a more trusted source (what the user wrote) win fact by fact over
//! a less trusted one (the catalogue).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// Dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ModelPrice {
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

impl ModelPrice {
    /// Every price is a finite number, not negative: the `cost` strategy sorts by them.
    pub fn is_valid(&self) -> bool {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        ok(self.input_per_mtok)
            && ok(self.output_per_mtok)
            && self.cache_read_per_mtok.is_none_or(ok)
            && self.cache_write_per_mtok.is_none_or(ok)
    }
}

/// The facts about one model; `None` where the source does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ModelFacts {
    /// Tokens of input and output together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_window: Option<u32>,
    /// The most tokens one answer may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub max_output: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub price: Option<ModelPrice>,
    /// It calls tools (functions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub tools: Option<bool>,
    /// It reads images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub vision: Option<bool>,
    /// It reasons (thinks) before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub reasoning: Option<bool>,
}

impl ModelFacts {
    /// Each fact from `self` when it has one, else from `fallback`. A price is one fact: a
    /// written price replaces the catalogue's whole, so cache prices of another tariff never
    /// mix into it.
    #[must_use]
    pub fn or(self, fallback: Self) -> Self {
        Self {
            context_window: self.context_window.or(fallback.context_window),
            max_output: self.max_output.or(fallback.max_output),
            price: self.price.or(fallback.price),
            tools: self.tools.or(fallback.tools),
            vision: self.vision.or(fallback.vision),
            reasoning: self.reasoning.or(fallback.reasoning),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_facts_win_one_by_one_and_a_price_replaces_the_whole_price() {
        let catalogue = ModelFacts {
            context_window: Some(128_000),
            max_output: Some(8_192),
            price: Some(ModelPrice {
                input_per_mtok: 1.0,
                output_per_mtok: 2.0,
                cache_read_per_mtok: Some(0.1),
                cache_write_per_mtok: None,
            }),
            tools: Some(true),
            vision: Some(false),
            reasoning: None,
        };
        let written = ModelFacts {
            context_window: Some(64_000),
            price: Some(ModelPrice {
                input_per_mtok: 0.5,
                output_per_mtok: 0.5,
                cache_read_per_mtok: None,
                cache_write_per_mtok: None,
            }),
            vision: Some(true),
            ..ModelFacts::default()
        };
        let merged = written.or(catalogue);
        assert_eq!(merged.context_window, Some(64_000));
        assert_eq!(merged.max_output, Some(8_192));
        assert_eq!(merged.price, written.price, "no cache price of the catalogue leaks in");
        assert_eq!((merged.tools, merged.vision, merged.reasoning), (Some(true), Some(true), None));
    }
}
