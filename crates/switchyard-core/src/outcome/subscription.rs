//! A subscription's window that ran out (RESILIENCE.md §11): a Claude plan's 429 with
//! `anthropic-ratelimit-unified-status: rejected`, or Codex's `usage_limit_reached`. Unlike a
//! rate limit, it lasts until the window's reset, however far that is (five hours, a week), so
//! the one-hour cap on upstream hints ([`super::MAX_RETRY_AFTER`]) does not apply; the
//! subscription is benched until exactly that reset and serves again then.
//!
//! Pure: `now` is the caller's clock.

use std::time::Duration;

use http::HeaderMap;

use super::BodyHint;
use super::hint::reset_value;
use crate::clock::UnixMillis;
use crate::resilience::headroom;

/// The longest a subscription's window can bench it: a weekly window, and a day to spare for
/// an upstream whose reset is late. A reset said to be further away is read as this.
pub const MAX_SUBSCRIPTION_WAIT: Duration = Duration::from_secs(8 * 24 * 3600);

/// A subscription's window that ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Spent {
    /// How long until the window's reset, within [`MAX_SUBSCRIPTION_WAIT`]; `None` when the
    /// answer did not say.
    pub(super) wait: Option<Duration>,
}

/// What this answer says of a subscription's window: `None` when it is no subscription's limit.
pub(super) fn limit(
    status: u16,
    headers: &HeaderMap,
    body: BodyHint,
    now: UnixMillis,
) -> Option<Spent> {
    let stated = match body {
        BodyHint::SubscriptionLimit { resets_in, resets_at } => {
            resets_in.or_else(|| resets_at.map(|at| at.since(now)))
        }
        _ if status == 429 && rejected(headers) => None,
        _ => return None,
    };
    let wait = stated.or_else(|| window_reset(headers, now));
    Some(Spent { wait: wait.map(|wait| wait.min(MAX_SUBSCRIPTION_WAIT)) })
}

/// Anthropic's unified (subscription) limiter refused the request.
fn rejected(headers: &HeaderMap) -> bool {
    headers
        .get("anthropic-ratelimit-unified-status")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"rejected"))
}

/// When the window that ran out refills: the latest reset of the windows with nothing left
/// (the weekly one, when both the five-hour and the weekly are out), else the unified reset.
fn window_reset(headers: &HeaderMap, now: UnixMillis) -> Option<Duration> {
    let out = headroom::windows(headers, now)
        .into_iter()
        .filter(|w| w.remaining <= 0.0)
        .filter_map(|w| w.resets_at)
        .max()
        .map(|at| at.since(now));
    out.or_else(|| {
        let value = headers.get("anthropic-ratelimit-unified-reset")?.to_str().ok()?;
        reset_value(value.trim(), now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
    const HOUR: Duration = Duration::from_secs(3600);

    fn spent(wait: Duration) -> Spent {
        Spent { wait: Some(wait) }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(n, v)| (http::HeaderName::from_static(n), v.parse().unwrap())).collect()
    }

    #[test]
    fn a_claude_plans_rejection_lasts_until_its_windows_reset_however_far() {
        let five_hours = (NOW.0 / 1000 + 5 * 3600).to_string();
        let h = headers(&[
            ("anthropic-ratelimit-unified-status", "rejected"),
            ("anthropic-ratelimit-unified-5h-utilization", "1.0"),
            ("anthropic-ratelimit-unified-reset", &five_hours),
        ]);
        assert_eq!(limit(429, &h, BodyHint::None, NOW), Some(spent(5 * HOUR)));
        // Both windows out: the weekly one's reset, the later.
        let week = (NOW.0 / 1000 + 6 * 24 * 3600).to_string();
        let h = headers(&[
            ("anthropic-ratelimit-unified-status", "rejected"),
            ("anthropic-ratelimit-unified-5h-utilization", "1.0"),
            ("anthropic-ratelimit-unified-5h-reset", &five_hours),
            ("anthropic-ratelimit-unified-7d-utilization", "1.0"),
            ("anthropic-ratelimit-unified-7d-reset", &week),
        ]);
        assert_eq!(limit(429, &h, BodyHint::None, NOW), Some(spent(6 * 24 * HOUR)));
        // No reset said: a subscription's limit still, its length the cooldown's to choose.
        let bare = headers(&[("anthropic-ratelimit-unified-status", "rejected")]);
        assert_eq!(limit(429, &bare, BodyHint::None, NOW), Some(Spent { wait: None }));
    }

    #[test]
    fn codexs_usage_limit_resets_when_its_body_or_headers_say() {
        let body = BodyHint::SubscriptionLimit { resets_in: Some(7 * HOUR), resets_at: None };
        assert_eq!(limit(429, &HeaderMap::new(), body, NOW), Some(spent(7 * HOUR)));
        let at =
            BodyHint::SubscriptionLimit { resets_in: None, resets_at: Some(NOW.plus(2 * HOUR)) };
        assert_eq!(limit(429, &HeaderMap::new(), at, NOW), Some(spent(2 * HOUR)));
        let reset = (NOW.0 / 1000 + 3 * 3600).to_string();
        let h = headers(&[
            ("x-codex-primary-used-percent", "100"),
            ("x-codex-primary-reset-at", &reset),
            ("x-codex-secondary-used-percent", "40"),
        ]);
        let unsaid = BodyHint::SubscriptionLimit { resets_in: None, resets_at: None };
        assert_eq!(limit(429, &h, unsaid, NOW), Some(spent(3 * HOUR)));
    }

    #[test]
    fn a_reset_beyond_eight_days_is_read_as_eight_and_anything_else_is_no_subscription_limit() {
        let far = BodyHint::SubscriptionLimit { resets_in: Some(100 * 24 * HOUR), resets_at: None };
        assert_eq!(limit(429, &HeaderMap::new(), far, NOW), Some(spent(MAX_SUBSCRIPTION_WAIT)));
        let allowed = headers(&[("anthropic-ratelimit-unified-status", "allowed")]);
        assert_eq!(limit(429, &allowed, BodyHint::None, NOW), None);
        let rejected = headers(&[("anthropic-ratelimit-unified-status", "rejected")]);
        assert_eq!(limit(200, &rejected, BodyHint::None, NOW), None, "a 2xx is served");
        assert_eq!(limit(429, &HeaderMap::new(), BodyHint::None, NOW), None);
    }
}
