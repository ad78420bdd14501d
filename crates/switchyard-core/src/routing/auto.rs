//! `auto`: "the best thing I have that fits this request", chosen by a score whose
//! every factor has a stated unit and range and is computed from the candidate alone, never
//! scaled against whichever candidates happen to be in the pool. Adding a worse candidate
//! therefore never changes the winner, and a user can read why one won: each factor's value
//! and weight, and the winner's margin over the next.
//!
//! Invariants:
//! - Pure: the caller gathers what is known of each candidate (facts, breaker, headroom,
//!   latency, prices) and the request's needs; nothing here reads a clock or the registry.
//! - A candidate that cannot serve the request (known too small, known to lack tools, vision or
//!   reasoning the request needs) is left out with its reason; a fact not known does not exclude,
//!   it lowers the `fit` factor.
//! - A benched candidate never wins: it is left out before scoring.
//! - Equal scores spread: among candidates tied for first, `spread` picks which leads.
//!
//! The factors, each a value in `[0, 1]`, higher is better:
//!
//! | factor | unit read | value |
//! |---|---|---|
//! | `health` | breaker state, failures since its last reset | closed: `1 − ½·failures/threshold`; degraded `0.5`; half-open `0.25` |
//! | `headroom` | fraction of the tightest quota window left | as read; `0.5` when no answer said |
//! | `affinity` | the request's session is pinned here | `1` or `0` |
//! | `latency` | time to first token, ms | `1000 / (1000 + ttft)`; an unmeasured target takes the median of every measured one |
//! | `price` | this request's estimated cost, USD | `0.01 / (0.01 + cost)`; `0.5` (as one cent) when the price is not known |
//! | `fit` | facts the request needs that are not known | `½` per unknown capability, `0.9` for an unknown window |
//! | `capability` | reasoning and window size | `½·reasoning + ½·min(window / 200k, 1)`; unknowns count `0.25` each |
//!
//! The score is the weighted mean of the factors (weights from the preset), in `[0, 1]`.

use std::time::Duration;

use serde::Serialize;

use super::combo::Price;

/// What a request needs of the model that answers it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Estimated input tokens.
    pub input_tokens: u32,
    /// The most output tokens it asked for (or a typical answer's, when it did not say).
    pub output_tokens: u32,
    pub tools: bool,
    pub vision: bool,
    pub reasoning: bool,
}

/// The provider breaker's state as the score reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Health {
    /// Closed, with `failures` of `threshold` counted.
    Closed {
        failures: u32,
        threshold: u32,
    },
    Degraded,
    /// Admitting probes only: recovering, not yet shown to work.
    HalfOpen,
}

/// What is known of one candidate target.
#[derive(Clone, Debug, PartialEq)]
pub struct Known {
    /// Tokens of input and output together; `None`: not known.
    pub context_window: Option<u32>,
    pub tools: Option<bool>,
    pub vision: Option<bool>,
    pub reasoning: Option<bool>,
    /// Per million tokens; `None`: not known.
    pub price: Option<Price>,
    pub health: Health,
    /// Fraction left of the tightest quota window of its credential; `None`: never said.
    pub headroom: Option<f64>,
    /// The request's session is pinned to this target.
    pub pinned: bool,
    /// Measured time to first token; `None`: never measured.
    pub ttft: Option<Duration>,
    /// Benched by a layer: never chosen.
    pub benched: bool,
}

/// Why a candidate cannot serve a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "unfit", rename_all = "snake_case")]
pub enum Unfit {
    /// The estimated input does not fit its known window.
    TooLarge {
        need: u32,
        window: u32,
    },
    NoTools,
    NoVision,
    NoReasoning,
    Benched,
}

impl Unfit {
    /// The skip reason the trace gives.
    pub fn code(self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "auto_window_too_small",
            Self::NoTools => "auto_no_tools",
            Self::NoVision => "auto_no_vision",
            Self::NoReasoning => "auto_no_reasoning",
            Self::Benched => "auto_benched",
        }
    }
}

/// How much each factor counts. Any non-negative finite numbers; they need not sum to one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Weights {
    pub health: f64,
    pub headroom: f64,
    pub affinity: f64,
    pub latency: f64,
    pub price: f64,
    pub fit: f64,
    pub capability: f64,
}

impl Weights {
    /// `auto`: health first, then what keeps a session cheap and quick.
    pub const BALANCED: Self = Self {
        health: 3.0,
        headroom: 1.0,
        affinity: 2.0,
        latency: 1.0,
        price: 1.0,
        fit: 2.0,
        capability: 1.0,
    };
    /// `auto:fast`: the quickest first token among the healthy.
    pub const FAST: Self = Self { latency: 5.0, price: 0.5, capability: 0.5, ..Self::BALANCED };
    /// `auto:cheap`: the cheapest for this request among the healthy.
    pub const CHEAP: Self = Self { price: 6.0, latency: 0.5, capability: 0.5, ..Self::BALANCED };
    /// `auto:smart`: the most capable (reasoning, a large window), whatever it costs.
    pub const SMART: Self = Self { capability: 6.0, price: 0.25, latency: 0.5, ..Self::BALANCED };

    fn of(self, factor: FactorName) -> f64 {
        match factor {
            FactorName::Health => self.health,
            FactorName::Headroom => self.headroom,
            FactorName::Affinity => self.affinity,
            FactorName::Latency => self.latency,
            FactorName::Price => self.price,
            FactorName::Fit => self.fit,
            FactorName::Capability => self.capability,
        }
    }

    /// The first weight that is negative or not finite, or `None` when every weight is zero:
    /// what validation refuses.
    pub fn problem(self) -> Option<&'static str> {
        let all = FACTORS.map(|f| (f.as_str(), self.of(f)));
        if let Some((name, _)) = all.iter().find(|(_, w)| !w.is_finite() || *w < 0.0) {
            return Some(name);
        }
        all.iter().all(|(_, w)| *w == 0.0).then_some("all")
    }
}

/// A factor's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FactorName {
    Health,
    Headroom,
    Affinity,
    Latency,
    Price,
    Fit,
    Capability,
}

const FACTORS: [FactorName; 7] = [
    FactorName::Health,
    FactorName::Headroom,
    FactorName::Affinity,
    FactorName::Latency,
    FactorName::Price,
    FactorName::Fit,
    FactorName::Capability,
];

impl FactorName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Health => "health",
            Self::Headroom => "headroom",
            Self::Affinity => "affinity",
            Self::Latency => "latency",
            Self::Price => "price",
            Self::Fit => "fit",
            Self::Capability => "capability",
        }
    }
}

/// One factor of one candidate: its value in `[0, 1]` and its weight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Factor {
    pub name: FactorName,
    pub value: f64,
    pub weight: f64,
}

/// One candidate's score.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scored {
    /// Index into the candidates given.
    pub index: usize,
    /// The weighted mean of the factors, in `[0, 1]`.
    pub score: f64,
    pub factors: [Factor; 7],
}

/// The candidates ranked for one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ranking {
    /// Best first.
    pub ranked: Vec<Scored>,
    /// Left out, with why.
    pub unfit: Vec<(usize, Unfit)>,
}

impl Ranking {
    /// How far the winner is ahead of the next, when there are two.
    pub fn margin(&self) -> Option<f64> {
        match self.ranked.as_slice() {
            [first, second, ..] => Some(first.score - second.score),
            _ => None,
        }
    }
}

/// Scores closer than this are equal: they spread.
const TIE: f64 = 1e-9;

/// Ranks `candidates` for a request that `needs` what it needs, by `weights`. `unmeasured` is
/// the time to first token an unmeasured candidate is taken to have (the median of every
/// measured target, see [`median`]); `spread` picks among candidates tied for first (a counter
/// that moves with each request, so equal candidates take turns).
pub fn rank(
    needs: &Needs,
    candidates: &[Known],
    weights: Weights,
    unmeasured: Option<Duration>,
    spread: u64,
) -> Ranking {
    let mut ranking = Ranking::default();
    for (index, known) in candidates.iter().enumerate() {
        match fits(needs, known) {
            Err(unfit) => ranking.unfit.push((index, unfit)),
            Ok(fit) => {
                let factors = factors(needs, known, fit, unmeasured, weights);
                ranking.ranked.push(Scored { index, score: score(&factors), factors });
            }
        }
    }
    // Best first; equal scores keep the caller's order, then the tied lead takes turns.
    ranking.ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
    let tied =
        ranking.ranked.iter().take_while(|s| ranking.ranked[0].score - s.score <= TIE).count();
    if tied > 1 {
        let lead = usize::try_from(spread % tied as u64).unwrap_or(0);
        ranking.ranked[..tied].rotate_left(lead);
    }
    ranking
}

/// The median of measured times to first token: what an unmeasured candidate is scored at, so
/// it is neither favoured nor shunned for being new. `None` when nothing is measured (then
/// every candidate scores one second).
pub fn median(mut measured: Vec<Duration>) -> Option<Duration> {
    if measured.is_empty() {
        return None;
    }
    measured.sort_unstable();
    let mid = measured.len() / 2;
    Some(if measured.len().is_multiple_of(2) {
        (measured[mid - 1] + measured[mid]) / 2
    } else {
        measured[mid]
    })
}

/// Whether `known` can serve the request, and its `fit` factor when it can.
fn fits(needs: &Needs, known: &Known) -> Result<f64, Unfit> {
    if known.benched {
        return Err(Unfit::Benched);
    }
    let mut fit = 1.0;
    match known.context_window {
        // The input must fit with room for an answer; how long the answer will be is not
        // known, so only the input is held against the window.
        Some(window) if needs.input_tokens >= window => {
            return Err(Unfit::TooLarge { need: needs.input_tokens, window });
        }
        Some(_) => {}
        None => fit *= 0.9,
    }
    for (needed, fact, unfit) in [
        (needs.tools, known.tools, Unfit::NoTools),
        (needs.vision, known.vision, Unfit::NoVision),
        (needs.reasoning, known.reasoning, Unfit::NoReasoning),
    ] {
        match (needed, fact) {
            (true, Some(false)) => return Err(unfit),
            (true, None) => fit *= 0.5,
            _ => {}
        }
    }
    Ok(fit)
}

fn factors(
    needs: &Needs,
    known: &Known,
    fit: f64,
    unmeasured: Option<Duration>,
    weights: Weights,
) -> [Factor; 7] {
    let value = |name| match name {
        FactorName::Health => health(known.health),
        FactorName::Headroom => known.headroom.map_or(0.5, |left| left.clamp(0.0, 1.0)),
        FactorName::Affinity => f64::from(u8::from(known.pinned)),
        FactorName::Latency => {
            let ttft = known.ttft.or(unmeasured).unwrap_or(Duration::from_secs(1));
            1000.0 / (1000.0 + ttft.as_secs_f64() * 1000.0)
        }
        FactorName::Price => known.price.map_or(0.5, |price| {
            let cost = cost_usd(needs, price);
            0.01 / (0.01 + cost)
        }),
        FactorName::Fit => fit,
        FactorName::Capability => {
            let reasoning = known.reasoning.map_or(0.25, |r| f64::from(u8::from(r)));
            let window = known.context_window.map_or(0.25, |w| (f64::from(w) / 200_000.0).min(1.0));
            0.5 * reasoning + 0.5 * window
        }
    };
    FACTORS.map(|name| Factor { name, value: value(name), weight: weights.of(name) })
}

/// What the request would cost on a target with `price`, in USD.
pub fn cost_usd(needs: &Needs, price: Price) -> f64 {
    let input = f64::from(needs.input_tokens) * price.input_per_mtok.max(0.0);
    let output = f64::from(needs.output_tokens) * price.output_per_mtok.max(0.0);
    (input + output) / 1e6
}

fn health(health: Health) -> f64 {
    match health {
        Health::Closed { failures, threshold } => {
            1.0 - 0.5 * (f64::from(failures) / f64::from(threshold.max(1))).min(1.0)
        }
        Health::Degraded => 0.5,
        Health::HalfOpen => 0.25,
    }
}

fn score(factors: &[Factor; 7]) -> f64 {
    let total: f64 = factors.iter().map(|f| f.weight).sum();
    if total <= 0.0 {
        return 0.0;
    }
    factors.iter().map(|f| f.weight * f.value).sum::<f64>() / total
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn healthy() -> Known {
        Known {
            context_window: Some(128_000),
            tools: Some(true),
            vision: Some(true),
            reasoning: Some(false),
            price: Some(Price { input_per_mtok: 3.0, output_per_mtok: 15.0, ..Price::default() }),
            health: Health::Closed { failures: 0, threshold: 5 },
            headroom: None,
            pinned: false,
            ttft: Some(Duration::from_millis(400)),
            benched: false,
        }
    }

    const CHAT: Needs = Needs {
        input_tokens: 2_000,
        output_tokens: 500,
        tools: false,
        vision: false,
        reasoning: false,
    };

    fn winner(ranking: &Ranking) -> Option<usize> {
        ranking.ranked.first().map(|s| s.index)
    }

    #[test]
    fn a_request_with_tools_skips_a_target_without_them_and_an_unknown_one_scores_lower() {
        let without = Known { tools: Some(false), ..healthy() };
        let unknown = Known { tools: None, ..healthy() };
        let needs = Needs { tools: true, ..CHAT };
        let ranking =
            rank(&needs, &[without, unknown.clone(), healthy()], Weights::BALANCED, None, 0);
        assert_eq!(ranking.unfit, [(0, Unfit::NoTools)]);
        assert_eq!(winner(&ranking), Some(2), "known to have tools beats not known");
        assert!(ranking.margin().unwrap() > 0.0);
    }

    #[test]
    fn a_request_too_large_for_a_small_window_goes_to_a_larger_one() {
        let small = Known { context_window: Some(8_000), ..healthy() };
        let needs = Needs { input_tokens: 20_000, ..CHAT };
        let ranking = rank(&needs, &[small, healthy()], Weights::BALANCED, None, 0);
        assert_eq!(ranking.unfit, [(0, Unfit::TooLarge { need: 20_000, window: 8_000 })]);
        assert_eq!(winner(&ranking), Some(1));
    }

    #[test]
    fn a_cheaper_healthy_target_wins_under_cheap_and_a_faster_one_under_fast() {
        let cheap = Known {
            price: Some(Price { input_per_mtok: 0.15, output_per_mtok: 0.6, ..Price::default() }),
            ttft: Some(Duration::from_millis(900)),
            ..healthy()
        };
        let fast = Known { ttft: Some(Duration::from_millis(120)), ..healthy() };
        let pool = [fast, cheap];
        assert_eq!(winner(&rank(&CHAT, &pool, Weights::CHEAP, None, 0)), Some(1));
        assert_eq!(winner(&rank(&CHAT, &pool, Weights::FAST, None, 0)), Some(0));
    }

    #[test]
    fn every_factor_is_named_with_its_value_and_weight() {
        let ranking = rank(&CHAT, &[healthy()], Weights::CHEAP, None, 0);
        let factors = &ranking.ranked[0].factors;
        let price = factors.iter().find(|f| f.name == FactorName::Price).unwrap();
        assert!((price.weight - Weights::CHEAP.price).abs() < f64::EPSILON, "{price:?}");
        // 2,000 × $3 + 500 × $15 per million: $0.0135, so 0.01 / 0.0235.
        assert!((price.value - 0.01 / 0.0235).abs() < 1e-12, "{price:?}");
        assert!(factors.iter().all(|f| (0.0..=1.0).contains(&f.value)), "{factors:?}");
    }

    #[test]
    fn an_unmeasured_target_takes_the_median_of_the_measured_ones() {
        let ms = Duration::from_millis;
        assert_eq!(median(vec![ms(300), ms(100), ms(200)]), Some(ms(200)));
        assert_eq!(median(vec![ms(100), ms(300)]), Some(ms(200)));
        assert_eq!(median(Vec::new()), None);
        let new = Known { ttft: None, ..healthy() };
        let measured = Known { ttft: Some(ms(200)), ..healthy() };
        let ranking = rank(&CHAT, &[new, measured], Weights::FAST, Some(ms(200)), 0);
        assert!((ranking.ranked[0].score - ranking.ranked[1].score).abs() < TIE);
    }

    #[test]
    fn weights_that_are_negative_not_finite_or_all_zero_are_named() {
        assert_eq!(Weights { price: -1.0, ..Weights::BALANCED }.problem(), Some("price"));
        assert_eq!(Weights { fit: f64::NAN, ..Weights::BALANCED }.problem(), Some("fit"));
        let zero = Weights {
            health: 0.0,
            headroom: 0.0,
            affinity: 0.0,
            latency: 0.0,
            price: 0.0,
            fit: 0.0,
            capability: 0.0,
        };
        assert_eq!(zero.problem(), Some("all"));
        for preset in [Weights::BALANCED, Weights::FAST, Weights::CHEAP, Weights::SMART] {
            assert_eq!(preset.problem(), None);
        }
    }

    fn known() -> impl Strategy<Value = Known> {
        let price = prop::option::of((0.0f64..100.0, 0.0f64..200.0)).prop_map(|p| {
            p.map(|(i, o)| Price { input_per_mtok: i, output_per_mtok: o, ..Price::default() })
        });
        let health = prop_oneof![
            (0u32..5).prop_map(|failures| Health::Closed { failures, threshold: 5 }),
            Just(Health::Degraded),
            Just(Health::HalfOpen),
        ];
        (
            prop::option::of(1_000u32..2_000_000),
            prop::option::of(any::<bool>()),
            prop::option::of(any::<bool>()),
            price,
            health,
            prop::option::of(0.0f64..=1.0),
            any::<bool>(),
            prop::option::of(0u64..20_000),
            prop::bool::weighted(0.2),
        )
            .prop_map(
                |(window, tools, reasoning, price, health, headroom, pinned, ttft, benched)| {
                    Known {
                        context_window: window,
                        tools,
                        vision: None,
                        reasoning,
                        price,
                        health,
                        headroom,
                        pinned,
                        ttft: ttft.map(Duration::from_millis),
                        benched,
                    }
                },
            )
    }

    fn needs() -> impl Strategy<Value = Needs> {
        (0u32..300_000, 1u32..32_000, any::<bool>(), any::<bool>()).prop_map(
            |(input_tokens, output_tokens, tools, reasoning)| Needs {
                input_tokens,
                output_tokens,
                tools,
                vision: false,
                reasoning,
            },
        )
    }

    fn weights() -> impl Strategy<Value = Weights> {
        prop_oneof![
            Just(Weights::BALANCED),
            Just(Weights::FAST),
            Just(Weights::CHEAP),
            Just(Weights::SMART)
        ]
    }

    proptest! {
        #[test]
        fn adding_a_worse_candidate_never_changes_the_winner(
            pool in prop::collection::vec(known(), 1..8),
            extra in known(),
            needs in needs(),
            weights in weights(),
            spread in any::<u64>(),
            unmeasured in prop::option::of(0u64..5_000),
        ) {
            let unmeasured = unmeasured.map(Duration::from_millis);
            let before = rank(&needs, &pool, weights, unmeasured, spread);
            let Some(first) = before.ranked.first() else { return Ok(()) };
            let mut grown = pool.clone();
            grown.push(extra);
            let after = rank(&needs, &grown, weights, unmeasured, spread);
            let added = after.ranked.iter().find(|s| s.index == pool.len());
            if added.is_none_or(|s| s.score < first.score - TIE) {
                prop_assert_eq!(winner(&after), Some(first.index));
            }
        }

        #[test]
        fn a_benched_or_unfit_candidate_never_wins(
            pool in prop::collection::vec(known(), 1..8),
            needs in needs(),
            weights in weights(),
            spread in any::<u64>(),
        ) {
            let ranking = rank(&needs, &pool, weights, None, spread);
            if let Some(won) = winner(&ranking) {
                prop_assert!(!pool[won].benched);
                prop_assert!(fits(&needs, &pool[won]).is_ok());
                prop_assert!(ranking.ranked.iter().all(|s| (0.0..=1.0).contains(&s.score)));
            }
            prop_assert_eq!(ranking.ranked.len() + ranking.unfit.len(), pool.len());
        }

        #[test]
        fn equal_candidates_take_turns(copies in 2usize..6, candidate in known(), needs in needs()) {
            let pool = vec![Known { benched: false, ..candidate }; copies];
            let won: std::collections::BTreeSet<usize> = (0..copies as u64)
                .filter_map(|spread| winner(&rank(&needs, &pool, Weights::BALANCED, None, spread)))
                .collect();
            if fits(&needs, &pool[0]).is_ok() {
                prop_assert_eq!(won.len(), copies, "each of the equal candidates leads once");
            }
        }
    }
}
