//! `auto` on the request path: what is known of each target of an `auto` combo is
//! gathered here (model facts, prices, the breaker, quota headroom, measured time to first
//! token, the request's needs), `switchyard_core::routing::auto` ranks them, and the plan is
//! reordered by that ranking. The decision is kept for the trace (every factor of the top
//! candidates, with its weight, and the winner's margin) and the `x-switchyard-decision`
//! header.
//!
//! Only a new session is ranked: a session keeps its pin (RESILIENCE.md §11), so a pinned
//! request is planned as any other combo's.

use std::fmt::Write as _;

use axum::http::HeaderValue;
use switchyard_core::routing::auto::{self, Factor, Known, Needs, Unfit};
use switchyard_core::routing::{Candidate, Combo, Plan};
use switchyard_core::settings::AutoPreset;
use switchyard_core::{CandidateKey, CredentialKey, UnixMillis};
use switchyard_providers::chat::{ChatRequest, Part};

use super::Proxy;
use super::count::tokens_in;
use super::routes::Routes;

/// How many candidates the trace lists with their factors.
const TRACE_TOP: usize = 3;

/// The output a request is taken to want when it does not say: a typical agent turn's.
const TYPICAL_OUTPUT_TOKENS: u32 = 1_024;

/// The response header that says why `auto` chose what it chose.
pub(super) const DECISION_HEADER: &str = "x-switchyard-decision";

/// What `auto` decided for one request.
#[derive(Debug)]
pub(super) struct Decision {
    pub preset: AutoPreset,
    /// The top candidates, best first: target label, score and factors.
    pub top: Vec<(CandidateKey, f64, [Factor; 7])>,
    /// How far the winner is ahead of the next.
    pub margin: Option<f64>,
    /// The candidates left out, and why.
    pub unfit: Vec<(Candidate, Unfit)>,
}

impl Decision {
    /// `auto:cheap oa/gpt-4o-mini score=0.812 margin=0.120 next=an/claude-x`: the short form.
    pub(super) fn header(&self) -> Option<HeaderValue> {
        let mut text = self.preset.model().to_owned();
        if let Some((key, score, _)) = self.top.first() {
            let _ = write!(text, " {}/{} score={score:.3}", key.provider, key.model);
        }
        if let Some(margin) = self.margin {
            let _ = write!(text, " margin={margin:.3}");
        }
        if let Some((key, _, _)) = self.top.get(1) {
            let _ = write!(text, " next={}/{}", key.provider, key.model);
        }
        HeaderValue::from_str(&text).ok()
    }
}

/// What `request` needs of the model that answers it.
fn needs(request: &ChatRequest<'_>) -> Needs {
    let vision =
        request.messages.iter().flat_map(|m| &m.content).any(|part| matches!(part, Part::Image(_)));
    Needs {
        input_tokens: u32::try_from(tokens_in(request)).unwrap_or(u32::MAX),
        output_tokens: request.sampling.max_tokens.unwrap_or(TYPICAL_OUTPUT_TOKENS),
        tools: !request.tools.is_empty(),
        vision,
        reasoning: request.reasoning.is_some(),
    }
}

/// Ranks an `auto` combo's targets for `request` and reorders `plan` by that ranking: the
/// winner's candidates first, then the rest in score order, each target's credentials in the
/// order the planner chose; the targets that cannot serve the request are taken out.
pub(super) fn rank_auto(
    proxy: &Proxy,
    routes: &Routes,
    combo: &Combo,
    request: &ChatRequest<'_>,
    plan: &mut Plan,
    now: UnixMillis,
) -> Decision {
    let preset = AutoPreset::of_model(&combo.name).unwrap_or_default();
    let weights = routes.config.auto.weights(preset);
    let inputs = proxy.orderer.for_auto(combo);
    let needs = needs(request);
    let reserve = proxy.headroom.lock();
    let known: Vec<Known> = combo
        .targets
        .iter()
        .enumerate()
        .map(|(i, target)| {
            let facts = routes
                .provider(&target.provider)
                .map(|p| p.facts(target.model.as_str()))
                .unwrap_or_default();
            let credentials = plan.candidates.iter().filter(|c| c.target == i);
            let headroom = credentials
                .clone()
                .filter_map(|c| {
                    let key = CredentialKey {
                        provider: c.key.provider.clone(),
                        credential: c.key.credential.clone(),
                    };
                    reserve.remaining(&key, now)
                })
                .reduce(f64::max);
            Known {
                context_window: target.context_window.or(facts.context_window),
                tools: facts.tools,
                vision: facts.vision,
                reasoning: facts.reasoning,
                price: target.price,
                health: proxy.registry.auto_health(&target.provider, now),
                headroom,
                pinned: false,
                ttft: inputs.ttft.get(i).copied().flatten(),
                // Every credential of it benched, or none configured.
                benched: credentials.count() == 0,
            }
        })
        .collect();
    drop(reserve);
    let ranking = auto::rank(&needs, &known, weights, inputs.unmeasured, inputs.spread);
    let mut unfit = Vec::new();
    let mut ordered = Vec::with_capacity(plan.candidates.len());
    for scored in &ranking.ranked {
        ordered.extend(plan.candidates.iter().filter(|c| c.target == scored.index).cloned());
    }
    for &(index, why) in &ranking.unfit {
        let left_out = plan.candidates.iter().filter(|c| c.target == index).cloned();
        unfit.extend(left_out.map(|c| (c, why)));
    }
    plan.candidates = ordered;
    let top = ranking
        .ranked
        .iter()
        .take(TRACE_TOP)
        .map(|s| {
            let t = &combo.targets[s.index];
            let first = plan.candidates.iter().find(|c| c.target == s.index);
            let credential = first.map_or_else(|| "".into(), |c| c.key.credential.clone());
            (CandidateKey::new(t.provider.clone(), credential, t.model.clone()), s.score, s.factors)
        })
        .collect();
    Decision { preset, top, margin: ranking.margin(), unfit }
}
