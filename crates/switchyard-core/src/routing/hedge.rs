//! When to hedge a slow first token (RESILIENCE.md §10): how long a streamed attempt may go
//! without its first real event before the next eligible candidate on another provider is
//! started too.
//!
//! Pure: the decision reads a target's [`FirstEventSketch`] as of an injected `now`. Whether a
//! candidate is there to hedge with, and whether the attempts and the retry budget allow it,
//! is the attempt loop's to ask.

use std::fmt;
use std::time::Duration;

use crate::clock::UnixMillis;
use crate::resilience::first_event::FirstEventSketch;

/// A percentile is trusted only after this many recent samples of the target.
pub const MIN_SAMPLES: u32 = 20;

/// A percentile-based delay is never shorter than this: below a second, a hedge would double
/// the traffic of a merely busy target for little gain.
pub const PERCENTILE_FLOOR: Duration = Duration::from_secs(1);

/// A combo's hedging rule: `hedge_after = "p95"` or `hedge_after_ms = 800`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HedgeAfter {
    /// This percentile (1..=99) of the target's recent time to first real event.
    Percentile(u8),
    /// A fixed delay.
    Fixed(Duration),
}

impl HedgeAfter {
    /// Parses `pNN` (`p50`, `p95`, `p99`); the error says what is allowed.
    pub fn parse_percentile(text: &str) -> Result<Self, String> {
        let n = text
            .strip_prefix('p')
            .and_then(|digits| digits.parse::<u8>().ok())
            .filter(|n| (1..=99).contains(n));
        n.map(Self::Percentile).ok_or_else(|| {
            format!("\"{text}\" is not a percentile; write p1 to p99, such as \"p95\"")
        })
    }

    /// How long to wait for the primary's first real event before hedging, at `now`; `None`
    /// when no hedge is to be started: a percentile without [`MIN_SAMPLES`] recent samples,
    /// or a delay that reaches `first_event` (the attempt's own deadline moves on then).
    pub fn delay(
        self,
        sketch: Option<&FirstEventSketch>,
        first_event: Duration,
        now: UnixMillis,
    ) -> Option<Duration> {
        let delay = match self {
            Self::Fixed(delay) => delay,
            Self::Percentile(p) => {
                let sketch = sketch.filter(|s| s.samples(now) >= MIN_SAMPLES)?;
                sketch.percentile(p, now)?.max(PERCENTILE_FLOOR)
            }
        };
        (delay < first_event).then_some(delay)
    }
}

impl fmt::Display for HedgeAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Percentile(p) => write!(f, "p{p}"),
            Self::Fixed(d) => write!(f, "{} ms", d.as_millis()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);
    const FIRST_EVENT: Duration = Duration::from_secs(15);

    fn sketch(samples: u32, took: Duration) -> FirstEventSketch {
        let mut s = FirstEventSketch::default();
        for _ in 0..samples {
            s.observe(took, T0);
        }
        s
    }

    #[test]
    fn percentiles_parse_from_p1_to_p99_only() {
        assert_eq!(HedgeAfter::parse_percentile("p95"), Ok(HedgeAfter::Percentile(95)));
        assert_eq!(HedgeAfter::parse_percentile("p1"), Ok(HedgeAfter::Percentile(1)));
        for bad in ["95", "p0", "p100", "P95", "p9.5", "pp", ""] {
            let error = HedgeAfter::parse_percentile(bad).unwrap_err();
            assert!(error.contains("p1 to p99"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_fixed_delay_is_used_as_written() {
        let after = HedgeAfter::Fixed(Duration::from_millis(200));
        assert_eq!(after.delay(None, FIRST_EVENT, T0), Some(Duration::from_millis(200)));
    }

    #[test]
    fn a_percentile_is_not_used_before_twenty_samples() {
        let after = HedgeAfter::Percentile(95);
        let few = sketch(MIN_SAMPLES - 1, Duration::from_secs(2));
        assert_eq!(after.delay(None, FIRST_EVENT, T0), None);
        assert_eq!(after.delay(Some(&few), FIRST_EVENT, T0), None);
        let enough = sketch(MIN_SAMPLES, Duration::from_secs(2));
        let delay = after.delay(Some(&enough), FIRST_EVENT, T0).unwrap();
        assert!(delay >= Duration::from_secs(2) && delay < Duration::from_millis(2400));
    }

    #[test]
    fn a_percentile_is_floored_at_one_second() {
        let fast = sketch(50, Duration::from_millis(80));
        let delay = HedgeAfter::Percentile(95).delay(Some(&fast), FIRST_EVENT, T0);
        assert_eq!(delay, Some(PERCENTILE_FLOOR));
    }

    #[test]
    fn no_hedge_at_or_past_the_first_event_deadline() {
        let slow = sketch(50, Duration::from_secs(20));
        assert_eq!(HedgeAfter::Percentile(95).delay(Some(&slow), FIRST_EVENT, T0), None);
        assert_eq!(HedgeAfter::Fixed(FIRST_EVENT).delay(None, FIRST_EVENT, T0), None);
    }

    #[test]
    fn old_samples_stop_counting() {
        let s = sketch(50, Duration::from_secs(2));
        let later = T0.plus(crate::resilience::first_event::WINDOW * 3);
        assert_eq!(HedgeAfter::Percentile(95).delay(Some(&s), FIRST_EVENT, later), None);
    }
}
