//! OAuth token timing: when an access token must be refreshed, and how the per-provider refresh
//! breaker behaves (RESILIENCE.md §3 breaker profiles).
//!
//! Only decisions live here; tokens, HTTP and the keychain belong to the crates around this one.
//!
//! Invariants:
//! - A token with no known expiry is never refreshed ahead of time: only an upstream 401 can
//!   show it has gone stale.
//! - A token is used for at least half its lifetime before it is refreshed ahead of expiry, so
//!   an identity provider that hands out tokens shorter than the skew does not get one refresh
//!   per request.
//! - The refresh breaker is the ordinary [`Breaker`](crate::resilience::Breaker) machine with
//!   its own policy: an identity provider is one endpoint that every credential of a provider
//!   depends on, so it trips sooner than an upstream and backs off further.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::UnixMillis;
use crate::outcome::BreakerFault;
use crate::settings::{BreakerPolicy, BreakerSettings, FaultOverride, SettingsError};

const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// When an access token was obtained and when the identity provider said it expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenLifetime {
    pub obtained_at: UnixMillis,
    /// `None` when the token response carried no `expires_in`.
    pub expires_at: Option<UnixMillis>,
}

impl TokenLifetime {
    /// The lifetime of a token obtained at `obtained_at` whose response said `expires_in`.
    pub fn from_expires_in(obtained_at: UnixMillis, expires_in: Option<Duration>) -> Self {
        Self { obtained_at, expires_at: expires_in.map(|d| obtained_at.plus(d)) }
    }

    /// From when on a refresh ahead of expiry is due: `expires_at − skew`, but never earlier
    /// than halfway through the token's life. `None` when the expiry is unknown.
    pub fn refresh_at(&self, policy: &RefreshPolicy) -> Option<UnixMillis> {
        let expires_at = self.expires_at?;
        let half_life = expires_at.since(self.obtained_at) / 2;
        Some(expires_at.minus(policy.skew.min(half_life)))
    }

    /// Whether the next use should refresh first.
    pub fn refresh_due(&self, now: UnixMillis, policy: &RefreshPolicy) -> bool {
        self.refresh_at(policy).is_some_and(|at| now >= at)
    }

    /// Whether the token is past its expiry and must not be sent any more.
    pub fn is_expired(&self, now: UnixMillis) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// The form: how OAuth credentials are kept fresh.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RefreshSettings {
    /// Refresh this long before the token expires.
    pub skew_ms: u64,
    /// The breaker in front of each provider's token endpoint.
    pub breaker: BreakerSettings,
}

impl Default for RefreshSettings {
    fn default() -> Self {
        Self { skew_ms: MINUTE, breaker: refresh_breaker_settings() }
    }
}

/// Validated [`RefreshSettings`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefreshPolicy {
    pub skew: Duration,
    pub breaker: BreakerPolicy,
}

impl RefreshSettings {
    pub fn validate(&self) -> Result<RefreshPolicy, SettingsError> {
        const S: &str = "oauth_refresh";
        if self.skew_ms > HOUR {
            return Err(SettingsError {
                field: format!("{S}.skew_ms"),
                problem: format!("{} is out of range; allowed 0..={HOUR}", self.skew_ms),
            });
        }
        let breaker = self.breaker.validate().map_err(|e| SettingsError {
            // `breaker.failure_threshold` → `oauth_refresh.breaker.failure_threshold`.
            field: format!("{S}.{}", e.field),
            problem: e.problem,
        })?;
        Ok(RefreshPolicy { skew: Duration::from_millis(self.skew_ms), breaker })
    }
}

impl Default for RefreshPolicy {
    fn default() -> Self {
        RefreshSettings::default().validate().expect("defaults are valid")
    }
}

/// The refresh breaker's defaults. Opens after 3 failures (there is one token endpoint and
/// every credential of the provider waits on it, so there is little to learn from more), stays
/// open 30 s and doubles up to 8 × (4 min): a user who fixed their network gets tokens again
/// soon, an identity provider in a long outage sees a refresh attempt every few minutes, not a
/// storm. A probe (one refresh) that has not answered within a minute frees its slot.
pub fn refresh_breaker_settings() -> BreakerSettings {
    let tls_opens = FaultOverride { immediate_open: true, ..FaultOverride::default() };
    BreakerSettings {
        enabled: true,
        failure_threshold: 3,
        degraded_threshold: None,
        reset_timeout_ms: 30 * SECOND,
        max_backoff_multiplier: 8,
        half_open_probes: 1,
        probe_timeout_ms: MINUTE,
        overrides: [(BreakerFault::Tls, tls_opens)].into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resilience::breaker::{Admission, Breaker};
    use crate::resilience::{BreakerState, SkipReason};

    const OBTAINED: UnixMillis = UnixMillis(1_700_000_000_000);
    const HOUR_D: Duration = Duration::from_secs(3600);
    /// One hour after [`OBTAINED`].
    const EXPIRES: UnixMillis = UnixMillis(OBTAINED.0 + 3_600_000);
    /// One minute before [`EXPIRES`]: the default refresh window opens here.
    const WINDOW_OPENS: UnixMillis = UnixMillis(EXPIRES.0 - 60_000);
    const MS: Duration = Duration::from_millis(1);

    fn hour_token() -> TokenLifetime {
        TokenLifetime::from_expires_in(OBTAINED, Some(HOUR_D))
    }

    #[test]
    fn default_policy_refreshes_one_minute_before_expiry() {
        let p = RefreshPolicy::default();
        assert_eq!(p.skew, Duration::from_secs(60));
        let t = hour_token();
        assert_eq!(t.expires_at, Some(EXPIRES));
        assert_eq!(t.refresh_at(&p), Some(WINDOW_OPENS));
        assert!(!t.refresh_due(OBTAINED, &p));
        assert!(!t.refresh_due(WINDOW_OPENS.minus(MS), &p));
        assert!(t.refresh_due(WINDOW_OPENS, &p));
        assert!(t.refresh_due(EXPIRES.plus(HOUR_D), &p));
    }

    #[test]
    fn token_is_expired_from_its_expiry_on_and_not_a_millisecond_before() {
        let t = hour_token();
        assert!(!t.is_expired(EXPIRES.minus(MS)));
        assert!(t.is_expired(EXPIRES));
    }

    #[test]
    fn token_without_an_expiry_is_never_due_nor_expired() {
        let p = RefreshPolicy::default();
        let t = TokenLifetime::from_expires_in(OBTAINED, None);
        assert_eq!(t.refresh_at(&p), None);
        assert!(!t.refresh_due(OBTAINED.plus(HOUR_D * 1_000), &p));
        assert!(!t.is_expired(OBTAINED.plus(HOUR_D * 1_000)));
    }

    #[test]
    fn token_shorter_than_the_skew_is_used_for_half_its_life_first() {
        let p = RefreshPolicy::default();
        let t = TokenLifetime::from_expires_in(OBTAINED, Some(Duration::from_secs(30)));
        let halfway = OBTAINED.plus(Duration::from_secs(15));
        assert_eq!(t.refresh_at(&p), Some(halfway));
        assert!(!t.refresh_due(halfway.minus(MS), &p));
        assert!(t.refresh_due(halfway, &p));
    }

    #[test]
    fn zero_skew_refreshes_only_at_expiry() {
        let p = RefreshSettings { skew_ms: 0, ..RefreshSettings::default() }.validate().unwrap();
        let t = hour_token();
        assert!(!t.refresh_due(EXPIRES.minus(MS), &p));
        assert!(t.refresh_due(EXPIRES, &p));
    }

    #[test]
    fn validation_names_the_field_including_the_breaker_section() {
        let long = RefreshSettings { skew_ms: HOUR + 1, ..RefreshSettings::default() };
        assert_eq!(long.validate().unwrap_err().field, "oauth_refresh.skew_ms");
        let mut zero = RefreshSettings::default();
        zero.breaker.failure_threshold = 0;
        let err = zero.validate().unwrap_err();
        assert_eq!(err.field, "oauth_refresh.breaker.failure_threshold");
        assert!(err.problem.contains("out of range"), "{}", err.problem);
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<RefreshSettings>(r#"{"skew":1}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn refresh_breaker_opens_on_the_third_failure_for_thirty_seconds() {
        let p = RefreshPolicy::default().breaker;
        let mut b = Breaker::new(OBTAINED);
        for _ in 0..2 {
            let _ = b.on_failure(OBTAINED, &p, BreakerFault::Connect, Admission::Normal);
            let _ = b.refresh(OBTAINED, &p);
            assert_ne!(b.state(&p), BreakerState::Open);
        }
        let _ = b.on_failure(OBTAINED, &p, BreakerFault::Transient, Admission::Normal);
        let _ = b.refresh(OBTAINED, &p);
        assert_eq!(b.state(&p), BreakerState::Open);
        assert_eq!(b.check(OBTAINED, &p), Err(SkipReason::BreakerOpen { retry_in_ms: 30_000 }));
    }

    #[test]
    fn refresh_breaker_backoff_is_capped_at_four_minutes() {
        let p = RefreshPolicy::default().breaker;
        assert_eq!(p.longest(), Duration::from_secs(240));
    }
}
