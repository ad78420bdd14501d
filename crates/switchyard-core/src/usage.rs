//! Token usage in buckets that never double-count, and what it cost.
//!
//! Every dialect reports tokens its own way: OpenAI counts cached input inside
//! `prompt_tokens`, Anthropic outside `input_tokens`, Gemini counts thinking outside
//! `candidatesTokenCount`. Providers map each onto [`Usage`], whose billed buckets are
//! disjoint, so adding them up (across buckets, attempts, requests or days) never counts a
//! token twice and a cost is one multiplication per bucket.
//!
//! Money is integer: prices are converted once, on the way in, to pico-dollars per token
//! (which is micro-dollars per million tokens, the precision every price list uses), and a
//! cost is rounded once per attempt to [`Nanodollars`]. Floating point never touches a sum.
//!
//! Invariants:
//! - `uncached_input + cache_read + cache_write` is every prompt token; `output` is every
//!   generated token, `reasoning` included. `reasoning <= output` as the upstream reports it;
//!   it is informative only and never billed on its own.
//! - A sum is estimated when any of its parts is.
//!
//! What requests used is summed per hour in [`ledger`] (read as [`report`]s), and spending is
//! held against [`budget`]s; time to first token is kept as a [`sketch`].

pub mod budget;
pub mod ledger;
pub mod report;
pub mod sketch;

use std::fmt;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Tokens one attempt (or a sum of attempts) used, by billing bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens neither read from nor written to a prompt cache.
    pub uncached_input: u64,
    /// Prompt tokens read from the provider's prompt cache (billed at the cache-read price).
    pub cache_read: u64,
    /// Prompt tokens written to the provider's prompt cache (billed at the cache-write price).
    pub cache_write: u64,
    /// Every generated token, reasoning included.
    pub output: u64,
    /// Of `output`, the tokens spent reasoning: shown, not billed separately.
    pub reasoning: u64,
    /// The counts are not the upstream's final word: a stream cut before its final usage,
    /// a hedge cancelled mid-stream. They are what was reported, a lower bound.
    pub estimated: bool,
}

impl Usage {
    /// Every prompt token, cached or not.
    pub fn input(&self) -> u64 {
        self.uncached_input.saturating_add(self.cache_read).saturating_add(self.cache_write)
    }

    /// Every token, prompt and output.
    pub fn total(&self) -> u64 {
        self.input().saturating_add(self.output)
    }

    pub fn is_zero(&self) -> bool {
        self.total() == 0
    }

    /// What these tokens cost at `prices`; `None` when a bucket that holds tokens has no price.
    /// Cache buckets without a price of their own are billed at the input price: a provider
    /// that does not say otherwise charges cached tokens as ordinary ones.
    pub fn cost(&self, prices: &Prices) -> Option<Nanodollars> {
        let input = prices.input;
        let buckets = [
            (self.uncached_input, input),
            (self.cache_read, prices.cache_read.or(input)),
            (self.cache_write, prices.cache_write.or(input)),
            (self.output, prices.output),
        ];
        let mut pico: u128 = 0;
        for (tokens, price) in buckets {
            if tokens == 0 {
                continue;
            }
            pico += u128::from(tokens) * u128::from(price?.0);
        }
        Some(Nanodollars::from_pico(pico))
    }
}

impl Add for Usage {
    type Output = Self;

    fn add(mut self, other: Self) -> Self {
        self += other;
        self
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.uncached_input = self.uncached_input.saturating_add(other.uncached_input);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.output = self.output.saturating_add(other.output);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
        // A sum is an estimate when any part is: `||`, which clippy takes for a typo in an
        // `AddAssign` that is not one here.
        self.estimated = self.estimated || other.estimated;
    }
}

/// Tokens by billing bucket as the API shows them (a request's, a bucket's of a report): the
/// buckets do not overlap, except `reasoning`, which is part of `output` and shown apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
pub struct TokenCounts {
    #[ts(type = "number")]
    pub uncached_input: u64,
    #[ts(type = "number")]
    pub cache_read: u64,
    #[ts(type = "number")]
    pub cache_write: u64,
    /// Every generated token, `reasoning` included.
    #[ts(type = "number")]
    pub output: u64,
    #[ts(type = "number")]
    pub reasoning: u64,
}

impl From<Usage> for TokenCounts {
    fn from(u: Usage) -> Self {
        Self {
            uncached_input: u.uncached_input,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            output: u.output,
            reasoning: u.reasoning,
        }
    }
}

/// A price per token in pico-dollars (10^-12 USD), which is micro-dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenPrice(pub u64);

impl TokenPrice {
    /// Nothing per token.
    pub const FREE: Self = Self(0);

    /// From a config's USD per million tokens. `None` for a negative, infinite or NaN price,
    /// which validation refuses first; finer than a micro-dollar per million is rounded.
    pub fn per_mtok(usd: f64) -> Option<Self> {
        let micro = (usd * 1e6).round();
        // `as` saturates; the range check makes the conversion exact.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked to be a non-negative integer below 2^63 just before"
        )]
        (usd.is_finite() && (0.0..9.2e18).contains(&micro)).then_some(Self(micro as u64))
    }
}

/// A model's prices, any of which may be unknown. Built from a combo target's `price` today,
/// and from the model facts (`[[providers.models]]`) when they carry cache prices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prices {
    pub input: Option<TokenPrice>,
    pub output: Option<TokenPrice>,
    pub cache_read: Option<TokenPrice>,
    pub cache_write: Option<TokenPrice>,
}

impl Prices {
    /// What a subscription's requests cost beyond its plan: every bucket priced, at
    /// nothing. Their tokens are counted; their spend is none, known, and outside every
    /// enforced budget, rather than a price not known.
    pub const COVERED: Self = Self {
        input: Some(TokenPrice::FREE),
        output: Some(TokenPrice::FREE),
        cache_read: Some(TokenPrice::FREE),
        cache_write: Some(TokenPrice::FREE),
    };

    /// From USD per million tokens, as configs write them.
    pub fn per_mtok(
        input: Option<f64>,
        output: Option<f64>,
        cache_read: Option<f64>,
        cache_write: Option<f64>,
    ) -> Self {
        Self {
            input: input.and_then(TokenPrice::per_mtok),
            output: output.and_then(TokenPrice::per_mtok),
            cache_read: cache_read.and_then(TokenPrice::per_mtok),
            cache_write: cache_write.and_then(TokenPrice::per_mtok),
        }
    }
}

/// A combo target's `price` (its own, else its model's facts); a cache bucket without a price
/// of its own bills at the input price.
impl From<crate::routing::Price> for Prices {
    fn from(price: crate::routing::Price) -> Self {
        Self::per_mtok(
            Some(price.input_per_mtok),
            Some(price.output_per_mtok),
            price.cache_read_per_mtok,
            price.cache_write_per_mtok,
        )
    }
}

/// An amount of money in nano-dollars (10^-9 USD): a cent is 10^7, and 2^63 of them is
/// nine billion dollars, so sums over years of requests fit.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Nanodollars(pub u64);

impl Nanodollars {
    /// Rounds half up, once: a cost is rounded per attempt, never per bucket.
    fn from_pico(pico: u128) -> Self {
        Self(u64::try_from((pico + 500) / 1000).unwrap_or(u64::MAX))
    }

    /// From USD as configs write them (a budget's limit); `None` for a negative, infinite or
    /// NaN amount. Finer than a nanodollar is rounded.
    pub fn from_usd(usd: f64) -> Option<Self> {
        let nano = (usd * 1e9).round();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked to be a non-negative integer below 2^63 just before"
        )]
        (usd.is_finite() && (0.0..9.2e18).contains(&nano)).then_some(Self(nano as u64))
    }
}

impl Add for Nanodollars {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl AddAssign for Nanodollars {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// USD as a decimal with nine places, trailing zeros trimmed (`0.00042`, `1.5`, `0`): what
/// the `x-switchyard-cost` header and the UI show.
impl fmt::Display for Nanodollars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, fraction) = (self.0 / 1_000_000_000, self.0 % 1_000_000_000);
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{fraction:09}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

/// What a request used over all its attempts, and what that cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub usage: Usage,
    /// `None` when some attempt that used tokens has no known price for them: a partial sum
    /// would read as the whole bill.
    pub cost: Option<Nanodollars>,
}

impl Spent {
    /// Adds one attempt's usage, billed at its own model's `prices`.
    pub fn add(&mut self, usage: Usage, prices: &Prices) {
        let first = self.usage.is_zero();
        self.usage += usage;
        if usage.is_zero() {
            return;
        }
        self.cost = match (first, self.cost, usage.cost(prices)) {
            (true, _, cost) => cost,
            (false, Some(sum), Some(cost)) => Some(sum + cost),
            (false, _, _) => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(per_mtok: f64) -> Option<TokenPrice> {
        TokenPrice::per_mtok(per_mtok)
    }

    /// gpt-4o-like: $2.50 in, $10 out, $1.25 cached read; writes unpriced.
    fn prices() -> Prices {
        Prices { input: usd(2.5), output: usd(10.0), cache_read: usd(1.25), cache_write: None }
    }

    #[test]
    fn each_bucket_is_billed_at_its_own_price() {
        let usage = Usage {
            uncached_input: 1_000,
            cache_read: 2_000,
            cache_write: 0,
            output: 300,
            reasoning: 100,
            estimated: false,
        };
        // At 2500, 1250 and 10000 n$ a token: 2.5 + 2.5 + 3 m$ = $0.008.
        assert_eq!(usage.cost(&prices()), Some(Nanodollars(8_000_000)));
        assert_eq!(usage.input(), 3_000);
        assert_eq!(usage.total(), 3_300);
    }

    #[test]
    fn a_targets_price_carries_its_cache_prices_and_the_input_price_covers_a_missing_one() {
        let price = crate::routing::Price {
            input_per_mtok: 2.5,
            output_per_mtok: 10.0,
            cache_read_per_mtok: Some(1.25),
            cache_write_per_mtok: None,
        };
        assert_eq!(Prices::from(price), prices());
        let cached = Usage { cache_read: 1_000, cache_write: 1_000, ..Usage::default() };
        // 1000 × 1250 n$ read + 1000 × 2500 n$ written at the input price = $0.00375.
        assert_eq!(cached.cost(&Prices::from(price)), Some(Nanodollars(3_750_000)));
    }

    #[test]
    fn reasoning_is_not_billed_on_top_of_output() {
        let plain = Usage { output: 500, ..Usage::default() };
        let thinking = Usage { output: 500, reasoning: 400, ..Usage::default() };
        assert_eq!(plain.cost(&prices()), thinking.cost(&prices()));
    }

    #[test]
    fn cache_buckets_without_a_price_of_their_own_cost_the_input_price() {
        let written = Usage { cache_write: 1_000_000, ..Usage::default() };
        assert_eq!(written.cost(&prices()), Some(Nanodollars(2_500_000_000)));
    }

    #[test]
    fn a_bucket_with_tokens_and_no_price_makes_the_cost_unknown() {
        let usage = Usage { uncached_input: 10, output: 1, ..Usage::default() };
        let no_output = Prices { output: None, ..prices() };
        assert_eq!(usage.cost(&no_output), None);
        // An empty bucket needs no price.
        let input_only = Usage { uncached_input: 10, ..Usage::default() };
        assert_eq!(input_only.cost(&no_output), Some(Nanodollars(25_000)));
        assert_eq!(usage.cost(&Prices::default()), None);
    }

    #[test]
    fn cost_is_exact_where_floating_point_is_not() {
        // $0.1 + $0.2 per Mtok over a million tokens each is exactly 30 cents here, where
        // 0.1 + 0.2 in f64 is 0.30000000000000004.
        let usage = Usage { uncached_input: 1_000_000, output: 1_000_000, ..Usage::default() };
        let p = Prices { input: usd(0.1), output: usd(0.2), ..Prices::default() };
        assert_eq!(usage.cost(&p), Some(Nanodollars(300_000_000)));
        assert_eq!(Nanodollars(300_000_000).to_string(), "0.3");
    }

    #[test]
    fn a_cost_rounds_half_up_once_to_the_nanodollar() {
        // 0.0005 $/Mtok is 500 pico-dollars a token, half a nano-dollar.
        let p = Prices { input: usd(0.0005), output: usd(0.0004), ..Prices::default() };
        let half = Usage { uncached_input: 1, ..Usage::default() };
        assert_eq!(half.cost(&p), Some(Nanodollars(1)), "500 p$ rounds up");
        let less = Usage { output: 1, ..Usage::default() };
        assert_eq!(less.cost(&p), Some(Nanodollars(0)), "400 p$ rounds down");
        // Rounded once over the buckets, not per bucket: 500 + 3×400 = 1700 p$.
        let both = Usage { uncached_input: 1, output: 3, ..Usage::default() };
        assert_eq!(both.cost(&p), Some(Nanodollars(2)));
    }

    #[test]
    fn prices_that_are_not_money_are_refused() {
        assert_eq!(TokenPrice::per_mtok(-1.0), None);
        assert_eq!(TokenPrice::per_mtok(f64::NAN), None);
        assert_eq!(TokenPrice::per_mtok(f64::INFINITY), None);
        assert_eq!(TokenPrice::per_mtok(0.0), Some(TokenPrice(0)));
        assert_eq!(TokenPrice::per_mtok(15.0), Some(TokenPrice(15_000_000)));
    }

    #[test]
    fn sums_add_bucket_by_bucket_and_stay_estimated() {
        let a = Usage {
            uncached_input: 1,
            cache_read: 2,
            cache_write: 3,
            output: 4,
            reasoning: 1,
            estimated: false,
        };
        let b = Usage {
            uncached_input: 10,
            cache_read: 20,
            cache_write: 30,
            output: 40,
            reasoning: 5,
            estimated: true,
        };
        let sum = a + b;
        assert_eq!(
            sum,
            Usage {
                uncached_input: 11,
                cache_read: 22,
                cache_write: 33,
                output: 44,
                reasoning: 6,
                estimated: true
            }
        );
        assert_eq!(sum.total(), a.total() + b.total());
    }

    #[test]
    fn a_request_costs_the_sum_of_its_attempts_each_at_its_own_prices() {
        let cheap = Prices { input: usd(0.15), output: usd(0.6), ..Prices::default() };
        let mut spent = Spent::default();
        spent.add(Usage { uncached_input: 1_000, output: 100, ..Usage::default() }, &prices());
        spent.add(Usage { uncached_input: 1_000, output: 100, ..Usage::default() }, &cheap);
        // 2.5 + 1 m$, then 0.15 + 0.06 m$.
        assert_eq!(spent.cost, Some(Nanodollars(3_710_000)));
        assert_eq!(spent.usage.output, 200);
    }

    #[test]
    fn an_unpriced_attempt_makes_the_request_cost_unknown_but_an_empty_one_does_not() {
        let mut spent = Spent::default();
        spent.add(Usage { uncached_input: 10, ..Usage::default() }, &prices());
        spent.add(Usage::default(), &Prices::default());
        assert_eq!(spent.cost, Some(Nanodollars(25_000)));
        spent.add(Usage { output: 1, ..Usage::default() }, &Prices::default());
        assert_eq!(spent.cost, None);
        spent.add(Usage { output: 1, ..Usage::default() }, &prices());
        assert_eq!(spent.cost, None, "once unknown, the sum stays unknown");
    }

    #[test]
    fn dollars_print_as_trimmed_decimals() {
        assert_eq!(Nanodollars(0).to_string(), "0");
        assert_eq!(Nanodollars(1).to_string(), "0.000000001");
        assert_eq!(Nanodollars(420_000).to_string(), "0.00042");
        assert_eq!(Nanodollars(1_500_000_000).to_string(), "1.5");
    }
}
