//! Time as the domain sees it: absolute wall-clock milliseconds, read from an injected [`Clock`].
//!
//! Everything that is persisted (cooldown ends, breaker re-open times) is a [`UnixMillis`], so a
//! value written before a restart means the same instant after it. Wall clocks jump; the layers
//! defend against that by clamping every stored deadline to `[now, now + longest cooldown]` when
//! they read it, so a clock that leaps back can never lock a provider for a year.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ts_rs::TS,
)]
#[ts(export)]
#[serde(transparent)]
#[ts(type = "number")]
pub struct UnixMillis(pub u64);

impl UnixMillis {
    pub const EPOCH: Self = Self(0);

    /// The instant `d` after `self`, saturating instead of overflowing.
    #[must_use]
    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(millis(d)))
    }

    /// The instant `d` before `self`, saturating at the epoch.
    #[must_use]
    pub fn minus(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(millis(d)))
    }

    /// How long from `earlier` until `self`; zero when `self` is not later.
    pub fn since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// How long from `now` until `self`; zero when `self` has passed.
    pub fn remaining_from(self, now: Self) -> Duration {
        self.since(now)
    }

    /// `self`, pulled into `[now, now + longest]`: the read-side defence against clock jumps.
    #[must_use]
    pub fn clamp_from(self, now: Self, longest: Duration) -> Self {
        self.clamp(now, now.plus(longest))
    }

    pub fn from_system_time(t: SystemTime) -> Self {
        Self(t.duration_since(UNIX_EPOCH).map_or(0, millis))
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// A `Duration` in whole milliseconds, saturating at `u64::MAX`.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The source of `now` for every time-dependent decision.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    fn now(&self) -> UnixMillis;
}

/// The operating system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[expect(clippy::disallowed_methods, reason = "this is the one place that reads the OS clock")]
    fn now(&self) -> UnixMillis {
        UnixMillis::from_system_time(SystemTime::now())
    }
}

/// A clock that moves only when told to; clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start: UnixMillis) -> Self {
        Self { now: Arc::new(AtomicU64::new(start.0)) }
    }

    pub fn set(&self, to: UnixMillis) {
        self.now.store(to.0, Ordering::SeqCst);
    }

    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(millis(by), Ordering::SeqCst);
    }

    /// Moves the clock backwards, as an NTP correction or a user changing the date would.
    pub fn rewind(&self, by: Duration) {
        let by = millis(by);
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| Some(t.saturating_sub(by)));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.now.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_one_time() {
        let a = ManualClock::new(UnixMillis(1_000));
        let b = a.clone();
        a.advance(Duration::from_millis(500));
        assert_eq!(b.now(), UnixMillis(1_500));
        b.rewind(Duration::from_secs(10));
        assert_eq!(a.now(), UnixMillis(0));
    }

    #[test]
    fn clamp_pulls_a_far_future_deadline_back_to_the_longest_cooldown() {
        let now = UnixMillis(10_000);
        let year = Duration::from_secs(365 * 24 * 3600);
        assert_eq!(now.plus(year).clamp_from(now, Duration::from_secs(60)), UnixMillis(70_000));
        assert_eq!(UnixMillis(5).clamp_from(now, Duration::from_secs(60)), now);
    }

    #[test]
    fn system_clock_reads_a_plausible_date() {
        // 2024-01-01T00:00:00Z; any machine running this is later than that.
        assert!(SystemClock.now() > UnixMillis(1_704_067_200_000));
    }
}
