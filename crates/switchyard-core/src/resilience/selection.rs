//! Choosing among a provider's eligible credentials (RESILIENCE.md §4).
//!
//! The planner hands over the eligible credentials as ascending indices into the provider's
//! credential list (ascending index = priority order) and gets one back. Every strategy costs
//! O(1) or one pass over the eligible slice, with no allocation. Randomness comes from a seeded
//! generator so tests are repeatable; the app seeds it once at start.

use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::random::SplitMix64;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "strategy", rename_all = "snake_case")]
pub enum SelectionStrategy {
    /// The first eligible credential in priority order: spend one key before touching the next.
    #[default]
    FillFirst,
    /// Rotate, staying on one credential for `sticky` new sessions [default 1]: with sessions
    /// on (RESILIENCE.md §11) a session keeps its credential however many turns it takes, so
    /// this spreads sessions, not turns; with them off it counts requests.
    RoundRobin {
        #[serde(default = "one")]
        sticky: u32,
    },
    /// The credential picked least often so far.
    LeastUsed,
    /// Power of two choices on latency: sample two, take the faster (EWMA).
    P2c,
    Random,
}

fn one() -> u32 {
    1
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    picks: u64,
    /// Exponentially weighted moving average of latency in microseconds; 0 = no sample yet.
    latency_ewma_us: f64,
}

#[derive(Debug)]
struct State {
    stats: Vec<Stats>,
    /// Round robin: the current credential and how many requests it has served in its turn.
    current: Option<usize>,
    served: u32,
    rng: SplitMix64,
}

/// Per-provider credential selection state.
#[derive(Debug)]
pub struct CredentialSelector {
    strategy: SelectionStrategy,
    state: Mutex<State>,
}

/// Weight of the newest latency sample in the moving average.
const EWMA_ALPHA: f64 = 0.2;

impl CredentialSelector {
    pub fn new(strategy: SelectionStrategy, credentials: usize, seed: u64) -> Self {
        Self {
            strategy,
            state: Mutex::new(State {
                stats: vec![Stats::default(); credentials],
                current: None,
                served: 0,
                rng: SplitMix64::new(seed),
            }),
        }
    }

    pub fn strategy(&self) -> SelectionStrategy {
        self.strategy
    }

    /// Picks one of `eligible` (ascending credential indices) and counts the pick.
    pub fn pick(&self, eligible: &[usize]) -> Option<usize> {
        let first = *eligible.first()?;
        let mut st = self.state.lock();
        let chosen = match self.strategy {
            SelectionStrategy::FillFirst => first,
            SelectionStrategy::RoundRobin { sticky } => {
                let stay = st
                    .current
                    .filter(|c| st.served < sticky.max(1) && eligible.binary_search(c).is_ok());
                let chosen = stay.unwrap_or_else(|| {
                    st.served = 0;
                    let after = st.current.map_or(0, |c| eligible.partition_point(|&i| i <= c));
                    eligible.get(after).copied().unwrap_or(first)
                });
                st.current = Some(chosen);
                st.served += 1;
                chosen
            }
            SelectionStrategy::LeastUsed => *eligible
                .iter()
                .min_by_key(|&&i| st.stats.get(i).map_or(0, |s| s.picks))
                .expect("eligible is not empty"),
            SelectionStrategy::P2c => {
                let a = eligible[st.rng.below(eligible.len())];
                let b = eligible[st.rng.below(eligible.len())];
                let cost = |i: usize| st.stats.get(i).map_or(0.0, |s| s.latency_ewma_us);
                if cost(b) < cost(a) { b } else { a }
            }
            SelectionStrategy::Random => eligible[st.rng.below(eligible.len())],
        };
        if let Some(s) = st.stats.get_mut(chosen) {
            s.picks += 1;
        }
        Some(chosen)
    }

    /// Feeds one observed latency (time to first event) into the credential's moving average.
    pub fn observe_latency(&self, credential: usize, latency: Duration) {
        let mut st = self.state.lock();
        let Some(s) = st.stats.get_mut(credential) else {
            return;
        };
        #[expect(
            clippy::cast_precision_loss,
            reason = "microseconds of a latency fit an f64 exactly"
        )]
        let sample = latency.as_micros() as f64;
        s.latency_ewma_us = if s.latency_ewma_us == 0.0 {
            sample
        } else {
            EWMA_ALPHA.mul_add(sample - s.latency_ewma_us, s.latency_ewma_us)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(s: &CredentialSelector, eligible: &[usize], n: usize) -> Vec<usize> {
        (0..n).map(|_| s.pick(eligible).unwrap()).collect()
    }

    #[test]
    fn fill_first_takes_the_highest_priority_eligible_key() {
        let s = CredentialSelector::new(SelectionStrategy::FillFirst, 4, 1);
        assert_eq!(picks(&s, &[1, 3], 3), [1, 1, 1]);
        assert_eq!(s.pick(&[]), None);
    }

    #[test]
    fn round_robin_stays_sticky_for_n_requests_then_moves_on() {
        let s = CredentialSelector::new(SelectionStrategy::RoundRobin { sticky: 2 }, 3, 1);
        assert_eq!(picks(&s, &[0, 1, 2], 7), [0, 0, 1, 1, 2, 2, 0]);
    }

    #[test]
    fn round_robin_skips_a_key_that_became_ineligible_mid_turn() {
        let s = CredentialSelector::new(SelectionStrategy::RoundRobin { sticky: 3 }, 3, 1);
        assert_eq!(s.pick(&[0, 1, 2]), Some(0));
        assert_eq!(picks(&s, &[1, 2], 4), [1, 1, 1, 2]);
    }

    #[test]
    fn least_used_spreads_picks_evenly() {
        let s = CredentialSelector::new(SelectionStrategy::LeastUsed, 3, 1);
        let mut counts = [0; 3];
        for i in picks(&s, &[0, 1, 2], 30) {
            counts[i] += 1;
        }
        assert_eq!(counts, [10, 10, 10]);
    }

    #[test]
    fn p2c_prefers_the_faster_key() {
        let s = CredentialSelector::new(SelectionStrategy::P2c, 2, 7);
        s.observe_latency(0, Duration::from_millis(500));
        s.observe_latency(1, Duration::from_millis(50));
        let fast = picks(&s, &[0, 1], 1_000).iter().filter(|&&i| i == 1).count();
        // Both samples land on the slow key a quarter of the time; otherwise the fast one wins.
        assert!((650..=850).contains(&fast), "fast key picked {fast} of 1000");
    }

    #[test]
    fn random_covers_every_eligible_key_and_nothing_else() {
        let s = CredentialSelector::new(SelectionStrategy::Random, 5, 3);
        let mut seen = [false; 5];
        for i in picks(&s, &[0, 2, 4], 300) {
            seen[i] = true;
        }
        assert_eq!(seen, [true, false, true, false, true]);
    }

    #[test]
    fn latency_average_moves_a_fifth_of_the_way_to_each_sample() {
        let s = CredentialSelector::new(SelectionStrategy::P2c, 1, 1);
        s.observe_latency(0, Duration::from_micros(1_000));
        s.observe_latency(0, Duration::from_micros(2_000));
        let ewma = s.state.lock().stats[0].latency_ewma_us;
        assert!((ewma - 1_200.0).abs() < 1e-9);
    }
}
