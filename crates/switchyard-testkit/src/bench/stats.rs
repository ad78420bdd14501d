//! Order statistics over signed nanosecond samples (paired differences can be negative).
//!
//! Nearest-rank percentiles on a sorted copy: no interpolation, so every figure reported is a
//! value that was actually measured.

use std::fmt;
use std::time::Duration;

/// Nanoseconds of a duration, saturating (a benchmark never sees 292 years).
pub(crate) fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The summary of one series of samples.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Summary {
    pub(crate) count: usize,
    pub(crate) p50: i64,
    pub(crate) p90: i64,
    pub(crate) p99: i64,
    pub(crate) max: i64,
}

impl Summary {
    /// `None` for an empty series.
    pub(crate) fn of(samples: &[i64]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank = |per_mille: usize| {
            let index = (sorted.len() * per_mille).div_ceil(1000).saturating_sub(1);
            sorted[index.min(sorted.len() - 1)]
        };
        Some(Self {
            count: sorted.len(),
            p50: rank(500),
            p90: rank(900),
            p99: rank(990),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// Nanoseconds shown in the unit a reader compares with the targets: µs below 10 ms, else ms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Micros(pub(crate) i64);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "−" } else { "" };
        let n = self.0.unsigned_abs();
        if n >= 10_000_000 {
            write!(f, "{sign}{}.{} ms", n / 1_000_000, (n % 1_000_000) / 100_000)
        } else {
            write!(f, "{sign}{}.{} µs", n / 1000, (n % 1000) / 100)
        }
    }
}

/// Bytes shown as MB with one decimal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Megabytes(pub(crate) u64);

impl fmt::Display for Megabytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = self.0 * 10 / 1_000_000;
        write!(f, "{}.{} MB", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_values_that_were_measured() {
        let samples: Vec<i64> = (1..=100).rev().collect();
        let s = Summary::of(&samples).unwrap();
        assert_eq!((s.count, s.p50, s.p90, s.p99, s.max), (100, 50, 90, 99, 100));
        let one = Summary::of(&[-7]).unwrap();
        assert_eq!((one.p50, one.p99, one.max), (-7, -7, -7));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn durations_print_in_the_unit_of_the_targets() {
        assert_eq!(Micros(108_400).to_string(), "108.4 µs");
        assert_eq!(Micros(-2_500).to_string(), "−2.5 µs");
        assert_eq!(Micros(40_250_000).to_string(), "40.2 ms");
        assert_eq!(Megabytes(3_400_000).to_string(), "3.4 MB");
    }
}
