//! How long a target recently took to its first real event: a small, mergeable histogram
//! (RESILIENCE.md §10).
//!
//! A percentile, not an average: hedging asks "is this attempt later than 95 % of recent ones",
//! and an average hides exactly the tail it is about. The sketch is the one place this is
//! kept, so usage statistics read the same numbers the hedge decides by.
//!
//! Invariants:
//! - Fixed logarithmic buckets (each 20 % wider than the last, from 10 ms to about 50 s, the
//!   last one open-ended): a percentile is exact to within one bucket, about 20 %, whatever
//!   the scale, and two sketches merge by adding counts.
//! - "Recent" is two windows of [`WINDOW`], aligned to the epoch so that any two sketches
//!   roll at the same instants: what is read covers the last one to two windows. Counts are
//!   whole samples, never decayed fractions, so "20 samples" means twenty answers.
//! - A clock that jumps back does not roll the windows (the samples stay where they are); one
//!   that jumps forward past two windows empties the sketch, as a long silence would.
//! - Two windows of [`BUCKETS`] `u32`s plus a timestamp: under 400 bytes.

use std::time::Duration;

use crate::clock::UnixMillis;

/// Buckets per window.
pub const BUCKETS: usize = 48;

/// The upper bound of the first bucket, in milliseconds.
const FIRST_BOUND_MS: f64 = 10.0;

/// Each bucket's upper bound is this many times the previous one's.
const GROWTH: f64 = 1.2;

/// The length of one window: samples count for between one and two of these.
pub const WINDOW: Duration = Duration::from_secs(10 * 60);

/// Recent times to first real event of one target. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstEventSketch {
    /// The start of the current window (a multiple of [`WINDOW`] since the epoch).
    window_start: UnixMillis,
    current: [u32; BUCKETS],
    previous: [u32; BUCKETS],
}

impl Default for FirstEventSketch {
    fn default() -> Self {
        Self { window_start: UnixMillis::EPOCH, current: [0; BUCKETS], previous: [0; BUCKETS] }
    }
}

fn window_of(now: UnixMillis) -> UnixMillis {
    let w = crate::clock::millis(WINDOW);
    UnixMillis(now.0 - now.0 % w)
}

/// The bucket `took` falls in: the first whose upper bound is at or above it.
fn bucket(took: Duration) -> usize {
    let ms = took.as_secs_f64() * 1000.0;
    if ms <= FIRST_BOUND_MS {
        return 0;
    }
    let i = ((ms / FIRST_BOUND_MS).ln() / GROWTH.ln()).ceil();
    // Float rounding can put a value sitting exactly on a bound one bucket high; the bound is
    // what is reported, so that is at most one bucket's error on the safe (later) side.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive value, clamped to the bucket count below"
    )]
    let i = i as usize;
    i.min(BUCKETS - 1)
}

/// The upper bound of bucket `i`.
fn upper_bound(i: usize) -> Duration {
    #[expect(clippy::cast_possible_wrap, clippy::cast_possible_truncation, reason = "i < 48")]
    let ms = FIRST_BOUND_MS * GROWTH.powi(i as i32);
    Duration::from_secs_f64(ms / 1000.0)
}

impl FirstEventSketch {
    /// Moves the windows along to `now`'s.
    fn roll(&mut self, now: UnixMillis) {
        let start = window_of(now);
        if start <= self.window_start {
            return;
        }
        if start == self.window_start.plus(WINDOW) {
            self.previous = self.current;
        } else {
            self.previous = [0; BUCKETS];
        }
        self.current = [0; BUCKETS];
        self.window_start = start;
    }

    /// Records one time to first real event, seen at `now`.
    pub fn observe(&mut self, took: Duration, now: UnixMillis) {
        self.roll(now);
        let slot = &mut self.current[bucket(took)];
        *slot = slot.saturating_add(1);
    }

    /// The recent counts per bucket as of `now`.
    fn recent(&self, now: UnixMillis) -> [u32; BUCKETS] {
        let mut at = self.clone();
        at.roll(now);
        let mut counts = at.current;
        for (c, p) in counts.iter_mut().zip(at.previous) {
            *c = c.saturating_add(p);
        }
        counts
    }

    /// How many recent samples there are at `now`.
    pub fn samples(&self, now: UnixMillis) -> u32 {
        self.recent(now).iter().fold(0u32, |sum, &c| sum.saturating_add(c))
    }

    /// The `percentile`th (1..=99) recent time to first real event at `now`, rounded up to
    /// its bucket's bound; `None` without samples.
    pub fn percentile(&self, percentile: u8, now: UnixMillis) -> Option<Duration> {
        let counts = self.recent(now);
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if total == 0 {
            return None;
        }
        // The rank of the sample at or above which `percentile` % of the samples lie.
        let rank = (total * u64::from(percentile.min(100))).div_ceil(100).max(1);
        let mut seen = 0u64;
        for (i, &c) in counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(upper_bound(i));
            }
        }
        Some(upper_bound(BUCKETS - 1))
    }

    /// Adds `other`'s samples to this one's, both taken as of `now` (usage statistics merge
    /// the sketches of several credentials or periods this way).
    pub fn merge(&mut self, other: &Self, now: UnixMillis) {
        self.roll(now);
        let mut other = other.clone();
        other.roll(now);
        for (mine, theirs) in
            [(&mut self.current, other.current), (&mut self.previous, other.previous)]
        {
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m = m.saturating_add(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window boundary (a multiple of ten minutes), so tests know where rolls happen.
    const T0: UnixMillis = UnixMillis(1_800_000_000_000);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_bound_their_values_within_twenty_percent() {
        for n in [1u32, 10, 11, 250, 999, 1000, 4321, 30_000] {
            let bound = upper_bound(bucket(ms(n.into())));
            assert!(bound >= ms(n.into()), "{n} ms is at or below its bucket's bound {bound:?}");
            let widest = f64::from(n.max(10)) / 1000.0 * 1.2 * 1.0001;
            assert!(bound.as_secs_f64() <= widest, "{n} ms: {bound:?}");
        }
        assert_eq!(bucket(Duration::from_secs(3600)), BUCKETS - 1, "the last bucket is open");
    }

    #[test]
    fn the_p95_of_mostly_fast_answers_with_a_slow_tail_is_the_tail() {
        let mut s = FirstEventSketch::default();
        for _ in 0..90 {
            s.observe(ms(200), T0);
        }
        for _ in 0..10 {
            s.observe(ms(3000), T0);
        }
        let p50 = s.percentile(50, T0).unwrap();
        let p95 = s.percentile(95, T0).unwrap();
        assert!(p50 >= ms(200) && p50 < ms(240), "{p50:?}");
        assert!(p95 >= ms(3000) && p95 < ms(3600), "{p95:?}");
        assert_eq!(s.samples(T0), 100);
    }

    #[test]
    fn an_empty_sketch_has_no_percentile() {
        assert_eq!(FirstEventSketch::default().percentile(95, T0), None);
    }

    #[test]
    fn samples_count_for_two_windows_then_are_forgotten() {
        let mut s = FirstEventSketch::default();
        s.observe(ms(100), T0);
        assert_eq!(s.samples(T0.plus(WINDOW)), 1, "still recent in the next window");
        assert_eq!(s.samples(T0.plus(WINDOW * 2)), 0, "forgotten two windows on");
        s.observe(ms(100), T0.plus(WINDOW));
        assert_eq!(s.samples(T0.plus(WINDOW)), 2);
        s.observe(ms(100), T0.plus(WINDOW * 2));
        assert_eq!(s.samples(T0.plus(WINDOW * 2)), 2, "the oldest window rolled off");
    }

    #[test]
    fn a_clock_that_jumps_back_keeps_the_samples() {
        let mut s = FirstEventSketch::default();
        s.observe(ms(100), T0.plus(WINDOW));
        s.observe(ms(100), T0);
        assert_eq!(s.samples(T0.plus(WINDOW)), 2);
    }

    #[test]
    fn merging_adds_counts_of_the_same_windows() {
        let (mut a, mut b) = (FirstEventSketch::default(), FirstEventSketch::default());
        for _ in 0..19 {
            a.observe(ms(100), T0);
        }
        b.observe(ms(5000), T0.plus(WINDOW));
        a.merge(&b, T0.plus(WINDOW));
        assert_eq!(a.samples(T0.plus(WINDOW)), 20);
        assert!(a.percentile(99, T0.plus(WINDOW)).unwrap() >= ms(5000));
    }

    #[test]
    fn the_sketch_is_a_few_hundred_bytes() {
        assert!(size_of::<FirstEventSketch>() < 400);
    }
}
