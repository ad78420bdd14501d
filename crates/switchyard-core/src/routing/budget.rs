//! The retry budget (RESILIENCE.md §8): same-target retries across all requests may add at most
//! `ratio` of recent traffic, but always at least `min_per_second`, so a struggling upstream is
//! never hit by a retry storm while a quiet proxy can still retry.
//!
//! Recent means the last ten seconds, kept as ten one-second buckets indexed by wall-clock
//! second: no timers, O(1) per call, and a clock that jumps just starts from empty buckets.

use parking_lot::Mutex;

use crate::clock::UnixMillis;

const WINDOW_SECS: u32 = 10;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    second: u64,
    requests: u32,
    retries: u32,
}

/// A shared retry budget.
#[derive(Debug)]
pub struct RetryBudget {
    ratio: f64,
    min_per_second: u32,
    buckets: Mutex<[Bucket; WINDOW_SECS as usize]>,
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new(0.2, 3)
    }
}

impl RetryBudget {
    pub fn new(ratio: f64, min_per_second: u32) -> Self {
        Self {
            ratio,
            min_per_second,
            buckets: Mutex::new([Bucket::default(); WINDOW_SECS as usize]),
        }
    }

    /// Counts one client request.
    pub fn on_request(&self, now: UnixMillis) {
        let mut buckets = self.buckets.lock();
        bucket(&mut buckets, now).requests += 1;
    }

    /// Withdraws one retry if the budget allows it.
    pub fn try_retry(&self, now: UnixMillis) -> bool {
        let mut buckets = self.buckets.lock();
        let _ = bucket(&mut buckets, now);
        let second = now.0 / 1000;
        let live =
            buckets.iter().filter(|b| second.saturating_sub(b.second) < u64::from(WINDOW_SECS));
        let (requests, retries) =
            live.fold((0u32, 0u32), |(q, r), b| (q + b.requests, r + b.retries));
        let floor = self.min_per_second * WINDOW_SECS;
        let allowed = (self.ratio * f64::from(requests)).max(f64::from(floor));
        if f64::from(retries) >= allowed {
            return false;
        }
        bucket(&mut buckets, now).retries += 1;
        true
    }
}

/// The bucket for `now`'s second, emptied first if it last held an older second.
fn bucket(buckets: &mut [Bucket; WINDOW_SECS as usize], now: UnixMillis) -> &mut Bucket {
    let second = now.0 / 1000;
    let slot = &mut buckets[usize::try_from(second % u64::from(WINDOW_SECS)).expect("below 10")];
    if slot.second != second {
        *slot = Bucket { second, ..Bucket::default() };
    }
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);

    fn retries_allowed(b: &RetryBudget, now: UnixMillis) -> usize {
        std::iter::from_fn(|| b.try_retry(now).then_some(())).take(10_000).count()
    }

    #[test]
    fn a_quiet_proxy_may_still_retry_three_times_a_second() {
        assert_eq!(retries_allowed(&RetryBudget::default(), T0), 30);
    }

    #[test]
    fn busy_traffic_may_add_a_fifth_in_retries() {
        let b = RetryBudget::default();
        for _ in 0..1_000 {
            b.on_request(T0);
        }
        assert_eq!(retries_allowed(&b, T0), 200);
    }

    #[test]
    fn the_window_forgets_after_ten_seconds() {
        let b = RetryBudget::default();
        assert_eq!(retries_allowed(&b, T0), 30);
        assert_eq!(retries_allowed(&b, T0.plus(std::time::Duration::from_secs(9))), 0);
        assert_eq!(retries_allowed(&b, T0.plus(std::time::Duration::from_secs(10))), 30);
    }
}
