//! How far the database's clock is from this instance's.
//!
//! Measured the way NTP does it: the database's reading is taken to be at the midpoint of the
//! round trip that fetched it, so one sample is off by at most half that round trip. Of the
//! last few samples the one with the shortest round trip wins (a sample held up on a busy
//! network says least about the clocks), and only the last few count, so a clock that was
//! corrected (NTP, a user changing the date) is followed within a few samples.
//!
//! Invariant: before the first sample the offset is zero, which is what a machine with a
//! synchronised clock has anyway.

use std::collections::VecDeque;

use crate::clock::UnixMillis;

/// Samples kept; one is taken per heartbeat.
const KEPT: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sample {
    /// Database minus local, in milliseconds.
    offset_ms: i64,
    round_trip_ms: u64,
}

/// The database's clock as seen from here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClockOffset {
    samples: VecDeque<Sample>,
}

impl ClockOffset {
    /// Records one reading: the database said `db_now` to a query sent at `sent` and answered
    /// at `received` (both read from this instance's clock). A reading whose answer came
    /// "before" its question (the local clock stepped back in between) says nothing and is
    /// dropped.
    pub fn observe(&mut self, sent: UnixMillis, db_now: UnixMillis, received: UnixMillis) {
        let Some(round_trip_ms) = received.0.checked_sub(sent.0) else { return };
        let midpoint = sent.0 + round_trip_ms / 2;
        let offset_ms = signed(db_now.0) - signed(midpoint);
        if self.samples.len() == KEPT {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample { offset_ms, round_trip_ms });
    }

    fn best(&self) -> Option<Sample> {
        self.samples.iter().copied().min_by_key(|s| s.round_trip_ms)
    }

    /// Database minus local, in milliseconds: positive when the database's clock is ahead.
    pub fn offset_ms(&self) -> i64 {
        self.best().map_or(0, |s| s.offset_ms)
    }

    /// How wrong [`Self::offset_ms`] may be: half the best sample's round trip.
    pub fn error_ms(&self) -> u64 {
        self.best().map_or(0, |s| s.round_trip_ms.div_ceil(2))
    }

    /// Whether any reading was taken yet.
    pub fn is_measured(&self) -> bool {
        !self.samples.is_empty()
    }

    /// The local instant that is `db` on the database's clock.
    pub fn to_local(&self, db: UnixMillis) -> UnixMillis {
        shift(db, -self.offset_ms())
    }

    /// The database instant that is `local` on this instance's clock.
    pub fn to_db(&self, local: UnixMillis) -> UnixMillis {
        shift(local, self.offset_ms())
    }
}

fn signed(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn shift(t: UnixMillis, by_ms: i64) -> UnixMillis {
    UnixMillis(t.0.saturating_add_signed(by_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);
    const FIVE_MINUTES: u64 = 5 * 60 * 1000;

    fn at(ms: u64) -> UnixMillis {
        UnixMillis(T0.0 + ms)
    }

    #[test]
    fn an_unmeasured_offset_is_zero_and_converts_nothing() {
        let offset = ClockOffset::default();
        assert!(!offset.is_measured());
        assert_eq!((offset.offset_ms(), offset.error_ms()), (0, 0));
        assert_eq!(offset.to_local(T0), T0);
        assert_eq!(offset.to_db(T0), T0);
    }

    #[test]
    fn a_database_five_minutes_ahead_reads_its_deadlines_five_minutes_earlier_here() {
        let mut offset = ClockOffset::default();
        // Sent at 0, answered at 10: the database's reading belongs to 5.
        offset.observe(at(0), at(FIVE_MINUTES + 5), at(10));
        assert_eq!(offset.offset_ms(), 300_000);
        assert_eq!(offset.error_ms(), 5);
        let db_deadline = at(FIVE_MINUTES + 30_000);
        assert_eq!(offset.to_local(db_deadline), at(30_000));
        assert_eq!(offset.to_db(at(30_000)), db_deadline);
    }

    #[test]
    fn a_local_clock_ahead_of_the_database_gives_a_negative_offset() {
        let mut offset = ClockOffset::default();
        offset.observe(at(FIVE_MINUTES), at(2), at(FIVE_MINUTES + 4));
        assert_eq!(offset.offset_ms(), -300_000);
        assert_eq!(offset.to_local(at(10_000)), at(FIVE_MINUTES + 10_000));
    }

    #[test]
    fn the_shortest_round_trip_of_the_recent_samples_wins() {
        let mut offset = ClockOffset::default();
        offset.observe(at(0), at(1_000 + 400), at(800)); // slow: says 1000
        offset.observe(at(1_000), at(1_000 + 1_000 + 1), at(1_002)); // quick: says 1000 exactly
        offset.observe(at(2_000), at(2_000 + 900), at(2_600)); // slow: says 600
        assert_eq!((offset.offset_ms(), offset.error_ms()), (1_000, 1));
    }

    #[test]
    fn old_samples_age_out_so_a_corrected_clock_is_followed() {
        let mut offset = ClockOffset::default();
        offset.observe(at(0), at(FIVE_MINUTES), at(0));
        for i in 1..=KEPT as u64 {
            let sent = at(i * 10_000);
            offset.observe(sent, UnixMillis(sent.0 + 3), UnixMillis(sent.0 + 6));
        }
        assert_eq!(offset.offset_ms(), 0, "the exact but old sample is forgotten");
    }

    #[test]
    fn an_answer_before_its_question_is_ignored() {
        let mut offset = ClockOffset::default();
        offset.observe(at(1_000), at(FIVE_MINUTES), at(0));
        assert!(!offset.is_measured());
    }
}
