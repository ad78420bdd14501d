//! How long a request waits for the team's answer to a lease: derived from the round trips to
//! the database measured lately, not fixed. A fixed 50 ms was refused by every
//! database more than 12 ms away, so a half-open breaker could never close.
//!
//! The wait is a high percentile of the recent round trips, with headroom for the sync task's
//! own scheduling, bounded on both sides: a database on the same machine still gets a wait long
//! enough for a busy machine, and a database that answers in seconds does not hold a request
//! for seconds (past the ceiling the request moves on and the late grant is handed on or
//! released, see `link`).
//!
//! Invariant: before the first sample the wait is [`RoundTrips::UNMEASURED`].

use std::collections::VecDeque;
use std::time::Duration;

/// Samples kept: a moving window, so a database that moved (or a network that got slower) is
/// followed within a few dozen statements.
const KEPT: usize = 64;

/// Recent round trips to the database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundTrips {
    samples: VecDeque<Duration>,
}

impl RoundTrips {
    /// The shortest wait: a database on the same machine answers in about a millisecond, but a
    /// machine under load schedules the answer's task later than that.
    pub const FLOOR: Duration = Duration::from_millis(50);
    /// The longest: a request never waits more than this for a lease.
    pub const CEILING: Duration = Duration::from_secs(1);
    /// Before anything was measured.
    pub const UNMEASURED: Duration = Duration::from_millis(250);
    /// Samples before the percentile is trusted over [`Self::UNMEASURED`].
    const TRUSTED_AFTER: usize = 3;

    pub fn observe(&mut self, round_trip: Duration) {
        if self.samples.len() == KEPT {
            self.samples.pop_front();
        }
        self.samples.push_back(round_trip);
    }

    /// The `per_mille`th percentile of the kept samples (nearest rank), if any.
    pub fn percentile(&self, per_mille: usize) -> Option<Duration> {
        if self.samples.is_empty() {
            return None;
        }
        let mut sorted: Vec<Duration> = self.samples.iter().copied().collect();
        sorted.sort_unstable();
        let rank = (sorted.len() * per_mille).div_ceil(1000).max(1);
        Some(sorted[rank - 1])
    }

    /// How long a request waits for a lease: one and a half times the 95th percentile of the
    /// recent round trips plus 20 ms, within [`Self::FLOOR`] and [`Self::CEILING`].
    pub fn lease_wait(&self) -> Duration {
        if self.samples.len() < Self::TRUSTED_AFTER {
            return Self::UNMEASURED;
        }
        let p95 = self.percentile(950).unwrap_or(Self::UNMEASURED);
        (p95 * 3 / 2 + Duration::from_millis(20)).clamp(Self::FLOOR, Self::CEILING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_database_thirty_milliseconds_away_gets_a_wait_longer_than_its_round_trip() {
        let mut trips = RoundTrips::default();
        assert_eq!(trips.lease_wait(), RoundTrips::UNMEASURED);
        for n in 0..40 {
            trips.observe(ms(60 + n % 5));
        }
        let wait = trips.lease_wait();
        assert!(wait > ms(64) && wait < ms(150), "{wait:?}");
    }

    #[test]
    fn the_wait_is_bounded_both_ways() {
        let mut near = RoundTrips::default();
        let mut far = RoundTrips::default();
        for _ in 0..10 {
            near.observe(Duration::from_micros(300));
            far.observe(Duration::from_secs(5));
        }
        assert_eq!(near.lease_wait(), RoundTrips::FLOOR);
        assert_eq!(far.lease_wait(), RoundTrips::CEILING);
    }

    #[test]
    fn the_window_moves_so_a_faster_database_is_followed() {
        let mut trips = RoundTrips::default();
        for _ in 0..KEPT {
            trips.observe(ms(400));
        }
        assert_eq!(trips.lease_wait(), ms(620));
        for _ in 0..KEPT {
            trips.observe(ms(2));
        }
        assert_eq!(trips.lease_wait(), RoundTrips::FLOOR);
    }
}
