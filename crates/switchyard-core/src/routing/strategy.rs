//! Ordering a combo's targets for one request.
//!
//! State shared across requests (the round-robin counter, latency averages, the random
//! generator) lives in one [`TargetOrderer`] per app; ordering a handful of targets costs a
//! few comparisons and no allocation beyond the caller's reused buffer.
//!
//! A latency average only moves when its target serves, and `least_latency` stops sending to
//! the slower target, so a target that was slow once would be judged by that for ever. The
//! average therefore fades toward "unmeasured" (which is tried first) with a half-life of
//! [`LATENCY_HALF_LIFE`] without a sample, computed when read: an unused target is measured
//! again after a while, as the breaker's failure count decays (RESILIENCE.md §3).

use std::time::Duration;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use super::combo::{Combo, RouteStrategy};
use crate::clock::UnixMillis;
use crate::ids::{ModelId, ProviderId};
use crate::random::SplitMix64;

/// Weight of the newest sample in the time-to-first-event moving average.
const EWMA_ALPHA: f64 = 0.3;

/// Without a new sample, a latency average counts half as much per this much time.
pub const LATENCY_HALF_LIFE: Duration = Duration::from_secs(60);

/// A moving average of time to first event and when it last had a sample.
#[derive(Clone, Copy, Debug)]
struct Latency {
    avg_us: f64,
    at: UnixMillis,
}

impl Latency {
    /// How much the average counts at `now`: its value faded toward 0 (unmeasured).
    fn faded(self, now: UnixMillis) -> f64 {
        let half_lives = now.since(self.at).as_secs_f64() / LATENCY_HALF_LIFE.as_secs_f64();
        self.avg_us * (-half_lives).exp2()
    }
}

#[derive(Debug)]
struct State {
    rng: SplitMix64,
    /// Round-robin counter per combo name.
    turns: FxHashMap<String, usize>,
    /// Time to first event, in microseconds, per target.
    latency_us: FxHashMap<(ProviderId, ModelId), Latency>,
}

/// What the orderer knows that `auto` scores on (see [`TargetOrderer::for_auto`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AutoInputs {
    /// Per target of the combo, its measured time to first event.
    pub ttft: Vec<Option<Duration>>,
    /// The median of every measured target's.
    pub unmeasured: Option<Duration>,
    /// Spreads candidates tied for first.
    pub spread: u64,
}

/// Orders targets by a combo's strategy, remembering what strategies need across requests.
#[derive(Debug)]
pub struct TargetOrderer {
    state: Mutex<State>,
}

impl TargetOrderer {
    pub fn new(seed: u64) -> Self {
        Self {
            state: Mutex::new(State {
                rng: SplitMix64::new(seed),
                turns: FxHashMap::default(),
                latency_us: FxHashMap::default(),
            }),
        }
    }

    /// Writes the indices of `combo.targets` into `order`, best first, as of `now`.
    pub fn order(&self, combo: &Combo, now: UnixMillis, order: &mut Vec<usize>) {
        order.clear();
        order.extend(0..combo.targets.len());
        if order.len() < 2 {
            return;
        }
        let mut st = self.state.lock();
        let targets = &combo.targets;
        match combo.strategy {
            // `auto` ranks per request, after planning (the proxy asks `routing::auto`).
            RouteStrategy::Priority | RouteStrategy::Auto => {}
            RouteStrategy::RoundRobin => {
                let turn = st.turns.entry(combo.name.clone()).or_default();
                let lead = *turn % order.len();
                *turn = turn.wrapping_add(1);
                order.rotate_left(lead);
            }
            RouteStrategy::Random => {
                for i in (1..order.len()).rev() {
                    let j = st.rng.below(i + 1);
                    order.swap(i, j);
                }
            }
            RouteStrategy::Weighted => {
                // Efraimidis–Spirakis: sorting by u^(1/w) descending is a weighted shuffle.
                let mut keys: Vec<(f64, usize)> = order
                    .iter()
                    .map(|&i| (st.rng.unit().powf(1.0 / f64::from(targets[i].weight.max(1))), i))
                    .collect();
                keys.sort_by(|a, b| b.0.total_cmp(&a.0));
                order.clear();
                order.extend(keys.into_iter().map(|(_, i)| i));
            }
            RouteStrategy::LeastLatency => {
                let latency = |i: usize| {
                    let t = &targets[i];
                    st.latency_us
                        .get(&(t.provider.clone(), t.model.clone()))
                        .map_or(0.0, |l| l.faded(now))
                };
                order.sort_by(|&a, &b| latency(a).total_cmp(&latency(b)));
            }
            RouteStrategy::Cost => {
                let cost =
                    |i: usize| targets[i].price.map_or(f64::INFINITY, super::combo::Price::blended);
                order.sort_by(|&a, &b| cost(a).total_cmp(&cost(b)));
            }
        }
    }

    /// [`Self::order`] without choosing: the strategies that spread requests (round robin,
    /// random, weighted) leave the user's order and their state as they are; the ones that
    /// rank by what is known (latency, cost) rank as usual.
    pub fn order_stateless(&self, combo: &Combo, now: UnixMillis, order: &mut Vec<usize>) {
        match combo.strategy {
            RouteStrategy::RoundRobin | RouteStrategy::Random | RouteStrategy::Weighted => {
                order.clear();
                order.extend(0..combo.targets.len());
            }
            RouteStrategy::Priority
            | RouteStrategy::LeastLatency
            | RouteStrategy::Cost
            | RouteStrategy::Auto => {
                self.order(combo, now, order);
            }
        }
    }

    /// What `auto` reads for `combo`: each target's time-to-first-event average
    /// (`None`: never measured), the median over every target measured so far (what an
    /// unmeasured one is scored at: taken from all targets, not this request's pool, so adding
    /// a candidate never moves it), and a turn of the combo's counter, which spreads tied
    /// candidates.
    pub fn for_auto(&self, combo: &Combo) -> AutoInputs {
        let mut st = self.state.lock();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a non-negative average of microseconds, far below 2^64"
        )]
        let micros = |l: &Latency| Duration::from_micros(l.avg_us.max(0.0).round() as u64);
        let ttft = combo
            .targets
            .iter()
            .map(|t| st.latency_us.get(&(t.provider.clone(), t.model.clone())).map(micros))
            .collect();
        let unmeasured = super::auto::median(st.latency_us.values().map(micros).collect());
        let turn = st.turns.entry(combo.name.clone()).or_default();
        let spread = *turn as u64;
        *turn = turn.wrapping_add(1);
        AutoInputs { ttft, unmeasured, spread }
    }

    /// Feeds one time-to-first-event sample, taken at `now`, for `least_latency`. An average
    /// that had faded for a half-life or more is stale: the sample replaces it.
    pub fn observe_latency(
        &self,
        provider: &ProviderId,
        model: &ModelId,
        latency: Duration,
        now: UnixMillis,
    ) {
        #[expect(
            clippy::cast_precision_loss,
            reason = "microseconds of a latency fit an f64 exactly"
        )]
        let sample = latency.as_micros() as f64;
        let mut st = self.state.lock();
        let fresh = Latency { avg_us: sample, at: now };
        let entry = st.latency_us.entry((provider.clone(), model.clone())).or_insert(fresh);
        let avg = if now.since(entry.at) >= LATENCY_HALF_LIFE {
            sample
        } else {
            EWMA_ALPHA.mul_add(sample - entry.avg_us, entry.avg_us)
        };
        *entry = Latency { avg_us: avg, at: now };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::combo::{Price, Target};

    fn combo(strategy: RouteStrategy, n: usize) -> Combo {
        Combo {
            name: "c".into(),
            strategy,
            targets: (0..n).map(|i| Target::new(format!("p{i}"), "m")).collect(),
            hedge: None,
        }
    }

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);

    fn order(o: &TargetOrderer, c: &Combo) -> Vec<usize> {
        order_at(o, c, T0)
    }

    fn order_at(o: &TargetOrderer, c: &Combo, now: UnixMillis) -> Vec<usize> {
        let mut out = Vec::new();
        o.order(c, now, &mut out);
        out
    }

    #[test]
    fn priority_keeps_the_written_order() {
        assert_eq!(order(&TargetOrderer::new(1), &combo(RouteStrategy::Priority, 3)), [0, 1, 2]);
    }

    #[test]
    fn round_robin_rotates_the_lead() {
        let o = TargetOrderer::new(1);
        let c = combo(RouteStrategy::RoundRobin, 3);
        let leads: Vec<usize> = (0..4).map(|_| order(&o, &c)[0]).collect();
        assert_eq!(leads, [0, 1, 2, 0]);
        assert_eq!(order(&o, &c), [1, 2, 0], "the rest keep their order after the lead");
    }

    #[test]
    fn weighted_leads_in_proportion_to_weight() {
        let o = TargetOrderer::new(9);
        let mut c = combo(RouteStrategy::Weighted, 2);
        c.targets[0].weight = 3;
        let first = (0..4_000).filter(|_| order(&o, &c)[0] == 0).count();
        assert!((2_800..=3_200).contains(&first), "weight 3 of 4 led {first} of 4000");
    }

    #[test]
    fn least_latency_tries_unmeasured_then_fastest_first() {
        let o = TargetOrderer::new(1);
        let c = combo(RouteStrategy::LeastLatency, 3);
        o.observe_latency(&"p0".into(), &"m".into(), Duration::from_millis(300), T0);
        o.observe_latency(&"p1".into(), &"m".into(), Duration::from_millis(100), T0);
        assert_eq!(order(&o, &c), [2, 1, 0]);
    }

    #[test]
    fn a_slow_target_no_longer_used_fades_back_ahead_of_one_still_measured() {
        let o = TargetOrderer::new(1);
        let c = combo(RouteStrategy::LeastLatency, 2);
        o.observe_latency(&"p0".into(), &"m".into(), Duration::from_millis(300), T0);
        o.observe_latency(&"p1".into(), &"m".into(), Duration::from_millis(100), T0);
        // p1 keeps serving (its average stays fresh); p0 is no longer tried.
        let mut now = T0;
        let mut leads = Vec::new();
        for _ in 0..4 {
            now = now.plus(LATENCY_HALF_LIFE / 2);
            o.observe_latency(&"p1".into(), &"m".into(), Duration::from_millis(100), now);
            leads.push(order_at(&o, &c, now)[0]);
        }
        // 300 ms fades to 212, 150, 106, then 75 ms: below p1's 100 ms after two half-lives.
        assert_eq!(leads, [1, 1, 1, 0]);
        // Measured again, it is judged by the new sample, not by the stale average.
        o.observe_latency(&"p0".into(), &"m".into(), Duration::from_millis(300), now);
        assert_eq!(order_at(&o, &c, now), [1, 0]);
    }

    #[test]
    fn cost_puts_the_cheapest_first_and_unpriced_last() {
        let o = TargetOrderer::new(1);
        let mut c = combo(RouteStrategy::Cost, 3);
        c.targets[0].price =
            Some(Price { input_per_mtok: 3.0, output_per_mtok: 15.0, ..Price::default() });
        c.targets[2].price =
            Some(Price { input_per_mtok: 0.15, output_per_mtok: 0.6, ..Price::default() });
        assert_eq!(order(&o, &c), [2, 0, 1]);
    }

    #[test]
    fn random_is_a_permutation() {
        let o = TargetOrderer::new(5);
        let c = combo(RouteStrategy::Random, 4);
        let mut leads = [0; 4];
        for _ in 0..400 {
            let mut got = order(&o, &c);
            leads[got[0]] += 1;
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2, 3]);
        }
        assert!(leads.iter().all(|&n| n > 60), "{leads:?}");
    }
}
