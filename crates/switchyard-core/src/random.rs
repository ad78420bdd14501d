//! A tiny seeded random generator for load spreading.
//!
//! Routing only needs "spread evenly and unpredictably enough", not cryptographic randomness;
//! a seeded generator keeps tests repeatable and keeps the domain free of OS entropy.

/// `SplitMix64` (Steele, Lea & Flood 2014): one add and three xor-multiplies per number.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for any `n` here).
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        usize::try_from((u128::from(self.next_u64()) * u128::from(n)) >> 64).expect("below n")
    }

    /// Uniform in `(0, 1]`.
    pub fn unit(&mut self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "53 random bits make an exact f64 fraction")]
        let fraction = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        1.0 - fraction
    }
}
