//! Combos: a named virtual model with an ordered list of targets and a strategy.

use serde::{Deserialize, Serialize};

use super::hedge::HedgeAfter;
use crate::continuation::Continuation;
use crate::ids::{CredentialId, ModelId, ProviderId};

/// How a combo orders its targets for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum RouteStrategy {
    /// The order as written: the first target serves, the rest are fallbacks.
    #[default]
    Priority,
    /// A weighted random order: weight 3 leads three times as often as weight 1.
    Weighted,
    /// Rotate which target leads.
    RoundRobin,
    /// The lowest moving average of time to first event leads (unmeasured targets first).
    LeastLatency,
    /// The cheapest by price leads; targets without a price go last.
    Cost,
    /// A uniformly random order.
    Random,
    /// Ranked for each request by `routing::auto`'s score: health, quota headroom,
    /// session affinity, time to first token, this request's price and what it needs.
    Auto,
}

impl RouteStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Priority => "priority",
            Self::Weighted => "weighted",
            Self::RoundRobin => "round_robin",
            Self::LeastLatency => "least_latency",
            Self::Cost => "cost",
            Self::Random => "random",
            Self::Auto => "auto",
        }
    }
}

/// What a target costs, in currency units per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input read from the provider's prompt cache; billed at `input_per_mtok` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// Input written to the provider's prompt cache; billed at `input_per_mtok` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

impl Price {
    /// One number to sort by: a typical chat turn reads about three times what it writes.
    pub fn blended(self) -> f64 {
        0.75f64.mul_add(self.input_per_mtok, 0.25 * self.output_per_mtok)
    }
}

/// One `provider/model` a combo may route to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub provider: ProviderId,
    pub model: ModelId,
    /// Use only this credential of the provider.
    pub credential: Option<CredentialId>,
    /// For the `weighted` strategy; 1 when not given.
    pub weight: u32,
    /// Tokens; lets a `request_too_large` failure move only to larger targets.
    pub context_window: Option<u32>,
    pub price: Option<Price>,
    /// Whether the proxy may send this target recovery probes of its own (RESILIENCE.md §3):
    /// off for a model billed per request, where a one-token probe costs a whole request.
    #[serde(default = "probes_allowed")]
    pub probe: bool,
    /// How this target continues a partial answer after another target's stream broke
    /// (RESILIENCE.md §10): the model's fact, else its provider kind's default.
    #[serde(default)]
    pub continuation: Continuation,
}

fn probes_allowed() -> bool {
    true
}

impl Target {
    pub fn new(provider: impl Into<ProviderId>, model: impl Into<ModelId>) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
            credential: None,
            weight: 1,
            context_window: None,
            price: None,
            probe: true,
            continuation: Continuation::Off,
        }
    }

    /// `provider/model`, as shown in routing headers and traces.
    pub fn label(&self) -> String {
        crate::ids::target_label(&self.provider, &self.model)
    }
}

/// A named, ordered set of targets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Combo {
    pub name: String,
    pub strategy: RouteStrategy,
    pub targets: Vec<Target>,
    /// Hedged first token (RESILIENCE.md §10); `None`, the default, never hedges.
    #[serde(skip)]
    pub hedge: Option<HedgeAfter>,
}

impl Combo {
    /// A model name that is not a combo but `provider/model` is a combo of one.
    pub fn single(target: Target) -> Self {
        Self {
            name: target.label(),
            strategy: RouteStrategy::Priority,
            targets: vec![target],
            hedge: None,
        }
    }
}
