//! Headroom per credential (RESILIENCE.md §11): how much of each quota window a key has left,
//! read from the headers of every answer, success or not, so routing sees quota before the 429.
//!
//! Windows, by the headers that say them:
//! - Anthropic API keys: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
//!   {limit,remaining,reset}`;
//! - OpenAI, Groq and most OpenAI-compatible hosts: `x-ratelimit-{limit,remaining,reset}-
//!   {requests,tokens}`;
//! - Claude subscriptions: `anthropic-ratelimit-unified-{5h,7d}-utilization` (a fraction used),
//!   `-reset`, and `-status: rejected` (nothing left);
//! - Codex (`ChatGPT` plans): `x-codex-{primary,secondary}-used-percent` and `-reset-at`.
//!
//! Invariants: a window's remaining fraction is within `[0, 1]`; a window past its reset is
//! unknown again (the quota refilled, or nobody knows); the smallest remaining fraction of a
//! credential's known windows governs; a credential never measured has no headroom figure, and
//! unknown counts as headroom (a key not yet measured is not avoided). Pure: `now` is the
//! caller's clock.

use std::collections::HashMap;

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::clock::UnixMillis;
use crate::ids::CredentialKey;
use crate::outcome::reset_value;

/// One quota window of a credential, as its latest answer described it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct Window {
    /// `requests`, `tokens`, `input-tokens`, `output-tokens`, `5h`, `7d`, `primary`,
    /// `secondary`.
    pub name: String,
    /// What is left, from 0 (nothing) to 1 (all of it).
    pub remaining: f64,
    /// When it refills; `None` when the answer did not say.
    pub resets_at: Option<UnixMillis>,
}

/// The windows `headers` describe, as of `now`.
pub fn windows(headers: &HeaderMap, now: UnixMillis) -> Vec<Window> {
    // Most answers carry none of these: one pass over the names spares the twenty lookups.
    if !carries_quota(headers) {
        return Vec::new();
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let number =
        |name: &str| text(name).and_then(|v| v.parse::<f64>().ok()).filter(|n| n.is_finite());
    let reset =
        |name: &str| text(name).and_then(|v| reset_value(v, now)).map(|wait| now.plus(wait));
    let mut found = Vec::new();
    let mut push = |name: &str, remaining: f64, resets_at: Option<UnixMillis>| {
        found.push(Window {
            name: name.to_owned(),
            remaining: remaining.clamp(0.0, 1.0),
            resets_at,
        });
    };
    for kind in ["requests", "tokens", "input-tokens", "output-tokens"] {
        let limit = number(&format!("anthropic-ratelimit-{kind}-limit"));
        let left = number(&format!("anthropic-ratelimit-{kind}-remaining"));
        if let (Some(limit), Some(left)) = (limit, left)
            && limit > 0.0
        {
            push(kind, left / limit, reset(&format!("anthropic-ratelimit-{kind}-reset")));
        }
    }
    for kind in ["requests", "tokens"] {
        let limit = number(&format!("x-ratelimit-limit-{kind}"));
        let left = number(&format!("x-ratelimit-remaining-{kind}"));
        if let (Some(limit), Some(left)) = (limit, left)
            && limit > 0.0
        {
            push(kind, left / limit, reset(&format!("x-ratelimit-reset-{kind}")));
        }
    }
    let rejected = text("anthropic-ratelimit-unified-status") == Some("rejected");
    for window in ["5h", "7d"] {
        let used = number(&format!("anthropic-ratelimit-unified-{window}-utilization"));
        if let Some(used) = used {
            let resets = reset(&format!("anthropic-ratelimit-unified-{window}-reset"))
                .or_else(|| reset("anthropic-ratelimit-unified-reset"));
            push(window, if rejected { 0.0 } else { 1.0 - used }, resets);
        }
    }
    for window in ["primary", "secondary"] {
        if let Some(used) = number(&format!("x-codex-{window}-used-percent")) {
            push(window, 1.0 - used / 100.0, reset(&format!("x-codex-{window}-reset-at")));
        }
    }
    found
}

/// The prefixes of every header a quota window is read from.
pub const QUOTA_HEADER_PREFIXES: [&str; 3] = ["anthropic-ratelimit-", "x-ratelimit-", "x-codex-"];

/// Whether `headers` has any header a quota window is read from.
pub fn carries_quota(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| QUOTA_HEADER_PREFIXES.iter().any(|p| name.as_str().starts_with(p)))
}

/// Every credential's windows.
#[derive(Debug, Default)]
pub struct Headroom {
    credentials: HashMap<CredentialKey, Vec<Window>>,
}

impl Headroom {
    /// Takes the windows of `key`'s latest answer: each replaces the one of its name. `true`
    /// when this is a transition worth keeping across a restart (RESILIENCE.md §6: not every
    /// answer): the key went under `reserve` or back over it (a window refilled at its reset
    /// included) as of `now`.
    pub fn observe(
        &mut self,
        key: &CredentialKey,
        windows: Vec<Window>,
        reserve: f64,
        now: UnixMillis,
    ) -> bool {
        if windows.is_empty() {
            return false;
        }
        let before = self.below(key, reserve, now);
        let known = self.credentials.entry(key.clone()).or_default();
        for window in windows {
            match known.iter_mut().find(|w| w.name == window.name) {
                Some(old) => *old = window,
                None => known.push(window),
            }
        }
        self.below(key, reserve, now) != before
    }

    /// `key`'s windows as last observed, in force or not: what is persisted.
    pub fn all(&self, key: &CredentialKey) -> &[Window] {
        self.credentials.get(key).map_or(&[], Vec::as_slice)
    }

    /// Windows read back at start; those past their reset say nothing and are left out.
    pub fn restore(&mut self, key: CredentialKey, windows: Vec<Window>, now: UnixMillis) {
        let windows: Vec<Window> = windows.into_iter().filter(|w| in_force(w, now)).collect();
        if !windows.is_empty() {
            self.credentials.insert(key, windows);
        }
    }

    /// No credential was measured yet: nothing to pass over.
    pub fn is_empty(&self) -> bool {
        self.credentials.is_empty()
    }

    /// Every credential measured: those configured, and each account a `client` credential
    /// served (`login~3f2a…`).
    pub fn keys(&self) -> impl Iterator<Item = &CredentialKey> {
        self.credentials.keys()
    }

    /// `key`'s windows still in force at `now`.
    pub fn windows(&self, key: &CredentialKey, now: UnixMillis) -> Vec<Window> {
        self.credentials
            .get(key)
            .map(|windows| windows.iter().filter(|w| in_force(w, now)).cloned().collect())
            .unwrap_or_default()
    }

    /// The smallest remaining fraction of `key`'s windows in force; `None` when unknown.
    pub fn remaining(&self, key: &CredentialKey, now: UnixMillis) -> Option<f64> {
        let windows = self.credentials.get(key)?;
        windows.iter().filter(|w| in_force(w, now)).map(|w| w.remaining).reduce(f64::min)
    }

    /// Whether `key` is known to be under `reserve` (a fraction) at `now`.
    pub fn below(&self, key: &CredentialKey, reserve: f64, now: UnixMillis) -> bool {
        self.remaining(key, now).is_some_and(|left| left < reserve)
    }
}

/// A window past its reset says nothing any more.
fn in_force(window: &Window, now: UnixMillis) -> bool {
    window.resets_at.is_none_or(|at| now < at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = UnixMillis(1_800_000_000_000);

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn named(found: &[Window]) -> Vec<(&str, f64)> {
        found.iter().map(|w| (w.name.as_str(), (w.remaining * 1000.0).round() / 1000.0)).collect()
    }

    #[test]
    fn each_family_of_quota_headers_gives_its_windows() {
        let anthropic = windows(
            &headers(&[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "5"),
                ("anthropic-ratelimit-requests-reset", "2027-01-15T08:00:30Z"),
                ("anthropic-ratelimit-tokens-limit", "100000"),
                ("anthropic-ratelimit-tokens-remaining", "75000"),
            ]),
            NOW,
        );
        assert_eq!(named(&anthropic), [("requests", 0.1), ("tokens", 0.75)]);
        assert!(anthropic[0].resets_at.is_some());
        let openai = windows(
            &headers(&[
                ("x-ratelimit-limit-requests", "500"),
                ("x-ratelimit-remaining-requests", "499"),
                ("x-ratelimit-reset-requests", "120ms"),
                ("x-ratelimit-limit-tokens", "30000"),
                ("x-ratelimit-remaining-tokens", "0"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ]),
            NOW,
        );
        assert_eq!(named(&openai), [("requests", 0.998), ("tokens", 0.0)]);
        assert_eq!(openai[1].resets_at, Some(UnixMillis(NOW.0 + 360_000)));
        let subscription = windows(
            &headers(&[
                ("anthropic-ratelimit-unified-status", "allowed"),
                ("anthropic-ratelimit-unified-5h-utilization", "0.92"),
                ("anthropic-ratelimit-unified-7d-utilization", "0.4"),
                ("anthropic-ratelimit-unified-reset", "1800003600"),
            ]),
            NOW,
        );
        assert_eq!(named(&subscription), [("5h", 0.08), ("7d", 0.6)]);
        assert_eq!(subscription[0].resets_at, Some(UnixMillis(NOW.0 + 3_600_000)));
        let codex = windows(
            &headers(&[
                ("x-codex-primary-used-percent", "100"),
                ("x-codex-secondary-used-percent", "30"),
            ]),
            NOW,
        );
        assert_eq!(named(&codex), [("primary", 0.0), ("secondary", 0.7)]);
        assert!(windows(&headers(&[("content-type", "application/json")]), NOW).is_empty());
        let garbled = headers(&[
            ("x-ratelimit-limit-requests", "0"),
            ("x-ratelimit-remaining-requests", "x"),
        ]);
        assert!(windows(&garbled, NOW).is_empty(), "nothing is made of nonsense");
    }

    #[test]
    fn the_smallest_window_governs_and_a_window_past_its_reset_is_unknown() {
        let key = CredentialKey { provider: "p".into(), credential: "k".into() };
        let mut headroom = Headroom::default();
        assert_eq!(headroom.remaining(&key, NOW), None, "never measured");
        assert!(!headroom.below(&key, 0.05, NOW), "unknown counts as headroom");
        let window = |name: &str, remaining: f64, reset_in: u64| Window {
            name: name.into(),
            remaining,
            resets_at: Some(UnixMillis(NOW.0 + reset_in)),
        };
        let went_under = headroom.observe(
            &key,
            vec![window("requests", 0.5, 60_000), window("tokens", 0.02, 1_000)],
            0.05,
            NOW,
        );
        assert!(went_under, "crossing the reserve is a transition");
        assert_eq!(headroom.remaining(&key, NOW), Some(0.02));
        assert!(
            !headroom.observe(&key, vec![window("tokens", 0.01, 1_000)], 0.05, NOW),
            "an answer that changes no side of the reserve is not"
        );
        assert!(headroom.below(&key, 0.05, NOW));
        let later = UnixMillis(NOW.0 + 1_000);
        assert_eq!(headroom.remaining(&key, later), Some(0.5), "tokens refilled at their reset");
        assert!(!headroom.below(&key, 0.05, later));
        assert!(headroom.observe(&key, vec![window("requests", 0.01, 120_000)], 0.05, later));
        assert_eq!(headroom.remaining(&key, later), Some(0.01), "the newest answer replaces");
        assert_eq!(headroom.windows(&key, later).len(), 1);

        let mut restored = Headroom::default();
        restored.restore(key.clone(), headroom.all(&key).to_vec(), later);
        assert_eq!(restored.windows(&key, later), headroom.windows(&key, later));
        assert_eq!(restored.all(&key).len(), 1, "a window past its reset is not restored");
    }
}
