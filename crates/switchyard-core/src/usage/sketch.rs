//! A latency sketch: a log-scale histogram of milliseconds with fixed buckets, so sketches of
//! any two hours, keys or providers merge by adding counts, and p50 / p95 come out within a
//! known error without keeping a single sample.
//!
//! Buckets: one per millisecond below 8 ms, then four per doubling (a quarter-octave: a
//! bucket is at most a quarter of its lower bound wide), up to 2^25 ms (9.3 h), past which
//! everything shares the last bucket. A quantile is read as its bucket's midpoint, at most
//! 12.5 % from any value in that bucket. Only buckets that hold something are kept, sorted:
//! an hour of one provider's requests is a handful of pairs, never more than [`BUCKETS`].

use std::fmt;

/// How many buckets there are.
pub const BUCKETS: usize = LAST as usize + 1;
const LAST: u8 = 4 * 24 - 1;

/// Counts of latencies by bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LatencySketch {
    /// (bucket, count), sorted by bucket, no zero counts.
    buckets: Vec<(u8, u64)>,
}

/// The bucket of `ms`: exact below 8 ms, then four per doubling.
pub fn bucket_of(ms: u64) -> u8 {
    if ms < 8 {
        #[expect(clippy::cast_possible_truncation, reason = "below 8")]
        return ms as u8;
    }
    // ms ≥ 8, so k ≥ 3.
    let k = ms.ilog2();
    let sub = (ms >> (k - 2)) & 3;
    let index = u64::from(4 * k - 4) + sub;
    #[expect(clippy::cast_possible_truncation, reason = "clamped to the last bucket")]
    let index = index.min(u64::from(LAST)) as u8;
    index
}

/// The values bucket `index` holds: `[low, low + width)`.
pub fn bucket_range(index: u8) -> (u64, u64) {
    if index < 8 {
        return (u64::from(index), 1);
    }
    let k = u32::from(index) / 4 + 1;
    let sub = u64::from(index % 4);
    ((4 + sub) << (k - 2), 1 << (k - 2))
}

impl LatencySketch {
    /// A sketch of one latency.
    pub fn of(ms: u64) -> Self {
        let mut sketch = Self::default();
        sketch.record(ms);
        sketch
    }

    pub fn record(&mut self, ms: u64) {
        self.add_to(bucket_of(ms), 1);
    }

    fn add_to(&mut self, index: u8, count: u64) {
        if count == 0 {
            return;
        }
        match self.buckets.binary_search_by_key(&index, |(i, _)| *i) {
            Ok(at) => self.buckets[at].1 = self.buckets[at].1.saturating_add(count),
            Err(at) => self.buckets.insert(at, (index, count)),
        }
    }

    /// Adds `other`'s counts: the sketch of both sets of latencies.
    pub fn merge(&mut self, other: &Self) {
        for &(index, count) in &other.buckets {
            self.add_to(index, count);
        }
    }

    /// How many latencies it holds.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|(_, n)| n).fold(0, |a, n| a.saturating_add(*n))
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The `q`-quantile (0 < q ≤ 1) by nearest rank, as its bucket's midpoint; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a rank between 1 and count"
        )]
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0u64;
        for &(index, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(index);
                return Some(low + width / 2);
            }
        }
        None
    }

    /// The buckets that hold something, as `(bucket, count)`.
    pub fn buckets(&self) -> &[(u8, u64)] {
        &self.buckets
    }

    /// Reads the text [`fmt::Display`] writes (`9:3 12:1`); `None` for anything else, so a
    /// damaged row is noticed rather than half-read.
    pub fn parse(text: &str) -> Option<Self> {
        let mut sketch = Self::default();
        for pair in text.split_ascii_whitespace() {
            let (index, count) = pair.split_once(':')?;
            let index: u8 = index.parse().ok()?;
            if usize::from(index) >= BUCKETS {
                return None;
            }
            sketch.add_to(index, count.parse().ok()?);
        }
        Some(sketch)
    }
}

/// `bucket:count` pairs separated by spaces, as stored.
impl fmt::Display for LatencySketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (index, count)) in self.buckets.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{index}:{count}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn small_latencies_are_exact_and_larger_ones_fall_in_quarter_octaves() {
        for ms in 0..8 {
            assert_eq!(bucket_range(bucket_of(ms)), (ms, 1));
        }
        assert_eq!(bucket_range(bucket_of(8)), (8, 2));
        assert_eq!(bucket_of(9), bucket_of(8));
        assert_eq!(bucket_range(bucket_of(1000)), (896, 128));
        assert_eq!(bucket_of(u64::MAX), LAST);
        assert_eq!(bucket_of(1 << 30), LAST, "past nine hours, everything shares the last");
    }

    #[test]
    fn every_value_lies_in_its_bucket_and_buckets_tile_the_line_in_order() {
        let mut previous_end = 0;
        for index in 0..=LAST {
            let (low, width) = bucket_range(index);
            assert_eq!(low, previous_end, "bucket {index} starts where {} ends", index.max(1) - 1);
            assert!(width * 4 <= low.max(4), "bucket {index} is at most a quarter of its low end");
            assert_eq!(bucket_of(low), index);
            assert_eq!(bucket_of(low + width - 1), index);
            previous_end = low + width;
        }
    }

    #[test]
    fn p50_and_p95_of_a_known_spread() {
        let mut sketch = LatencySketch::default();
        for ms in 1..=100 {
            sketch.record(ms * 10);
        }
        // Exact: 500 and 950 ms; read as their buckets' midpoints.
        assert_eq!(sketch.quantile(0.5), Some(480));
        assert_eq!(sketch.quantile(0.95), Some(960));
        assert_eq!(sketch.count(), 100);
        assert_eq!(LatencySketch::default().quantile(0.5), None);
    }

    #[test]
    fn the_stored_text_reads_back_and_damage_is_refused() {
        let mut sketch = LatencySketch::of(3);
        sketch.record(1000);
        sketch.record(1001);
        assert_eq!(sketch.to_string(), "3:1 35:2");
        assert_eq!(LatencySketch::parse(&sketch.to_string()), Some(sketch));
        assert_eq!(LatencySketch::parse(""), Some(LatencySketch::default()));
        for bad in ["3", "3:x", "96:1", "-1:2", "3:1;4:1"] {
            assert_eq!(LatencySketch::parse(bad), None, "{bad}");
        }
    }

    /// The exact nearest-rank quantile of `samples`.
    fn exact(samples: &[u64], q: f64) -> u64 {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a test's small rank"
        )]
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn sketch(samples: &[u64]) -> LatencySketch {
        let mut s = LatencySketch::default();
        for &ms in samples {
            s.record(ms);
        }
        s
    }

    proptest! {
        #[test]
        fn merging_is_the_sketch_of_all_samples_in_any_order(
            a in prop::collection::vec(0u64..5_000_000, 0..200),
            b in prop::collection::vec(0u64..5_000_000, 0..200),
            c in prop::collection::vec(0u64..5_000_000, 0..50),
        ) {
            let all: Vec<u64> = a.iter().chain(&b).chain(&c).copied().collect();
            let mut ab_c = sketch(&a);
            ab_c.merge(&sketch(&b));
            ab_c.merge(&sketch(&c));
            let mut c_ba = sketch(&c);
            c_ba.merge(&sketch(&b));
            c_ba.merge(&sketch(&a));
            prop_assert_eq!(&ab_c, &sketch(&all));
            prop_assert_eq!(&c_ba, &sketch(&all));
            prop_assert!(ab_c.buckets().len() <= BUCKETS);
            prop_assert!(ab_c.buckets().windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 > 0));
        }

        #[test]
        fn a_quantile_is_within_an_eighth_of_the_exact_one(
            samples in prop::collection::vec(0u64..20_000_000, 1..300),
            q in prop::sample::select(vec![0.5, 0.9, 0.95, 0.99, 1.0]),
        ) {
            let truth = exact(&samples, q);
            let read = sketch(&samples).quantile(q).unwrap();
            prop_assert_eq!(bucket_of(read), bucket_of(truth), "same bucket");
            #[expect(clippy::cast_precision_loss, reason = "test arithmetic")]
            let error = (read as f64 - truth as f64).abs() / (truth.max(1) as f64);
            prop_assert!(error <= 0.125, "{} read for {}: {:.3}", read, truth, error);
        }
    }
}
