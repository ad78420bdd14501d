//! `switchyard status`: the health page as a few lines and one verdict, what the
//! tray shows, as a pure function of what the management API answers (`GET
//! /api/monitoring/health` and `GET /api/providers`), so a running server and the state file
//! read without one give the same report.
//!
//! The verdict answers "can my tools get answers right now?", with the tray's colours
//! (`src-tauri/src/status.rs`):
//! - red: a provider's breaker is open or half-open, a combo has no candidate that could serve,
//!   or a provider has credentials and every one of them is benched (cooling, or waiting for a
//!   confirmation): nothing it routes to could be served;
//! - amber: something is degraded, cooling, locked, unconfirmed, waiting for its secret
//!   (`secret_unavailable`) or routing is paused, but every combo and provider still has a way
//!   to serve;
//! - green: nothing of the above.
//!
//! The command exits non-zero on red only: amber still serves.

use std::fmt::Write as _;

use serde::Deserialize;
use switchyard_core::resilience::{BreakerState, HealthSnapshot};

/// What the report reads of `GET /api/monitoring/health`.
#[derive(Debug, Deserialize)]
pub struct HealthLook {
    pub paused: bool,
    pub combos: Vec<ComboLook>,
    #[serde(flatten)]
    pub snapshot: HealthSnapshot,
}

#[derive(Debug, Deserialize)]
pub struct ComboLook {
    pub name: String,
    pub eligible: usize,
    pub candidates: usize,
}

/// What the report reads of each entry of `GET /api/providers`.
#[derive(Debug, Deserialize)]
pub struct ProviderLook {
    pub id: String,
    #[serde(default)]
    pub preset: Option<String>,
    pub effective_base_url: String,
    pub credentials: Vec<CredentialLook>,
    #[serde(default)]
    pub unconfirmed: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
pub struct CredentialLook {
    pub id: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub secret: Option<SecretLook>,
}

#[derive(Debug, Deserialize)]
pub struct SecretLook {
    /// Why its secret cannot be read now.
    #[serde(default)]
    pub unavailable: Option<String>,
}

impl CredentialLook {
    fn unavailable(&self) -> Option<&str> {
        self.secret.as_ref()?.unavailable.as_deref()
    }
}

fn yes() -> bool {
    true
}

/// The verdict, as the tray's colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Green,
    Amber,
    Red,
}

impl Level {
    pub fn word(self) -> &'static str {
        match self {
            Self::Green => "green",
            Self::Amber => "amber",
            Self::Red => "red",
        }
    }
}

/// The report: a verdict and the lines that say why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub level: Level,
    pub lines: Vec<String>,
}

/// The report for `health` over the configured `providers` (in config order).
pub fn report(health: &HealthLook, providers: &[ProviderLook]) -> Report {
    let snapshot = &health.snapshot;
    let mut level = Level::Green;
    let mut lines = Vec::new();
    if health.paused {
        raise(Level::Amber, &mut level);
        lines.push("routing is paused: client requests are refused until it resumes".to_owned());
    }
    if providers.is_empty() {
        lines.push(
            "no provider yet: add one with `switchyard providers add PRESET --key env:VAR`"
                .to_owned(),
        );
    }
    for provider in providers {
        lines.push(provider_line(provider, snapshot, &mut level));
    }
    for lockout in &snapshot.lockouts {
        raise(Level::Amber, &mut level);
        lines.push(format!(
            "model {}/{} locked on credential {} for {} s",
            lockout.key.provider,
            lockout.key.model,
            lockout.key.credential,
            lockout.remaining_ms.div_ceil(1000)
        ));
    }
    for combo in &health.combos {
        if combo.eligible == 0 {
            raise(Level::Red, &mut level);
            lines.push(format!(
                "combo {}: nothing can serve it ({} candidates, none eligible)",
                combo.name, combo.candidates
            ));
        } else {
            lines.push(format!(
                "combo {}: ready ({} of {} candidates can serve)",
                combo.name, combo.eligible, combo.candidates
            ));
        }
    }
    Report { level, lines }
}

/// One provider's line: its breaker, benched credentials and confirmations; raises `level`.
fn provider_line(provider: &ProviderLook, snapshot: &HealthSnapshot, level: &mut Level) -> String {
    let breaker = snapshot.breakers.iter().find(|b| b.provider.as_str() == provider.id);
    let mut line = format!("provider {}", provider.id);
    if let Some(preset) = &provider.preset {
        let _ = write!(line, " ({preset})");
    }
    let _ = write!(line, " -> {}: ", provider.effective_base_url);
    match breaker.map(|b| b.state) {
        Some(BreakerState::Open | BreakerState::HalfOpen) => {
            let b = breaker.expect("matched");
            raise(Level::Red, level);
            let _ = write!(
                line,
                "breaker {} after {} failures, retried in {} s",
                if b.state == BreakerState::Open { "open" } else { "half-open" },
                b.failures,
                b.retry_in_ms.div_ceil(1000)
            );
        }
        Some(BreakerState::Degraded) => {
            raise(Level::Amber, level);
            let failures = breaker.map_or(0, |b| b.failures);
            let _ = write!(line, "breaker degraded ({failures} recent failures)");
        }
        Some(BreakerState::Closed) | None => line.push_str("breaker closed"),
    }
    let usable: Vec<&CredentialLook> = provider.credentials.iter().filter(|c| c.enabled).collect();
    let cooling: Vec<String> = snapshot
        .credentials
        .iter()
        .filter(|c| c.key.provider.as_str() == provider.id)
        .map(|c| match c.retry_in_ms {
            Some(ms) => {
                format!("{} ({}, {} s)", c.key.credential, status_word(c), ms.div_ceil(1000))
            }
            None => format!("{} ({}, until someone acts)", c.key.credential, status_word(c)),
        })
        .collect();
    if !cooling.is_empty() {
        raise(Level::Amber, level);
        let _ = write!(line, "; benched credentials: {}", cooling.join(", "));
    }
    let waiting: Vec<String> =
        usable.iter().filter_map(|c| Some(format!("{} ({})", c.id, c.unavailable()?))).collect();
    if !waiting.is_empty() {
        // Amber: the combos say whether anything is left to serve them.
        raise(Level::Amber, level);
        let _ = write!(
            line,
            "; credentials waiting for their secret (secret_unavailable, read again every few \
             seconds): {}",
            waiting.join(", ")
        );
    }
    if !provider.unconfirmed.is_empty() {
        raise(Level::Amber, level);
        let _ = write!(
            line,
            "; {} destinations or secrets wait for a confirmation (`switchyard config confirm` or the Providers page)",
            provider.unconfirmed.len()
        );
    }
    let benched = usable
        .iter()
        .filter(|c| {
            snapshot.credentials.iter().any(|v| {
                v.key.provider.as_str() == provider.id && v.key.credential.as_str() == c.id
            })
        })
        .count();
    // Benched by the registry, that is: a credential without its secret is amber above.
    if !usable.is_empty() && benched == usable.len() {
        raise(Level::Red, level);
        line.push_str("; no credential can serve");
    }
    line
}

fn raise(to: Level, level: &mut Level) {
    *level = (*level).max(to);
}

fn status_word(view: &switchyard_core::resilience::registry::CredentialView) -> String {
    serde_json::to_value(view.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "benched".to_owned())
        .replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn health(value: &serde_json::Value) -> HealthLook {
        let mut base = json!({
            "paused": false, "combos": [],
            "at": 1_000, "breakers": [], "credentials": [], "lockouts": [], "untracked": 0, "probes": [],
        });
        for (k, v) in value.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn providers() -> Vec<ProviderLook> {
        serde_json::from_value(json!([{
            "id": "openrouter", "preset": "openrouter",
            "effective_base_url": "https://openrouter.ai/api/v1",
            "credentials": [{ "id": "main", "enabled": true }], "unconfirmed": [],
        }]))
        .unwrap()
    }

    fn breaker(state: &str) -> serde_json::Value {
        json!([{ "provider": "openrouter", "state": state, "failures": 5, "reopens": 0,
                 "last_fault": null, "retry_in_ms": 29_500, "probing_elsewhere": false, "recorded_by": null }])
    }

    #[test]
    fn nothing_happened_yet_is_green() {
        let report = report(&health(&json!({})), &providers());
        assert_eq!(report.level, Level::Green);
        assert_eq!(
            report.lines,
            ["provider openrouter (openrouter) -> https://openrouter.ai/api/v1: breaker closed"]
        );
    }

    #[test]
    fn an_open_breaker_is_red_and_a_degraded_one_amber() {
        let open = report(&health(&json!({ "breakers": breaker("open") })), &providers());
        assert_eq!(open.level, Level::Red);
        assert!(
            open.lines[0].contains("breaker open after 5 failures, retried in 30 s"),
            "{:?}",
            open.lines
        );
        let half = report(&health(&json!({ "breakers": breaker("half_open") })), &providers());
        assert_eq!(half.level, Level::Red);
        let degraded = report(&health(&json!({ "breakers": breaker("degraded") })), &providers());
        assert_eq!(degraded.level, Level::Amber);
    }

    #[test]
    fn a_combo_with_nothing_eligible_is_red() {
        let combos = json!([{ "name": "main", "eligible": 0, "candidates": 2 }]);
        let report = report(&health(&json!({ "combos": combos })), &providers());
        assert_eq!(report.level, Level::Red);
        assert!(
            report
                .lines
                .iter()
                .any(|l| l == "combo main: nothing can serve it (2 candidates, none eligible)")
        );
        let ready = json!([{ "name": "main", "eligible": 1, "candidates": 2 }]);
        assert_eq!(
            super::report(&health(&json!({ "combos": ready })), &providers()).level,
            Level::Green
        );
    }

    #[test]
    fn a_credential_without_its_secret_is_amber_and_named_with_why() {
        let providers: Vec<ProviderLook> = serde_json::from_value(json!([{
            "id": "openrouter", "effective_base_url": "https://openrouter.ai/api/v1",
            "credentials": [{ "id": "main", "secret": { "set": false,
                "unavailable": "environment variable OPENROUTER_API_KEY is not set (or not valid UTF-8)" } }],
        }]))
        .unwrap();
        let report = report(&health(&json!({})), &providers);
        assert_eq!(report.level, Level::Amber);
        assert!(
            report.lines[0].ends_with(
                "credentials waiting for their secret (secret_unavailable, read again every few \
                 seconds): main (environment variable OPENROUTER_API_KEY is not set (or not valid \
                 UTF-8))"
            ),
            "{:?}",
            report.lines
        );
    }

    #[test]
    fn a_provider_whose_every_credential_is_benched_is_red_and_paused_routing_amber() {
        let cooling = json!([{ "key": { "provider": "openrouter", "credential": "main" },
            "status": "cooling", "backoff_level": 1, "retry_in_ms": 3000, "recorded_by": null }]);
        let report = report(&health(&json!({ "credentials": cooling })), &providers());
        assert_eq!(report.level, Level::Red);
        assert!(
            report.lines[0].contains("benched credentials: main (cooling, 3 s)"),
            "{:?}",
            report.lines
        );
        assert!(report.lines[0].ends_with("no credential can serve"));
        let paused = super::report(&health(&json!({ "paused": true })), &providers());
        assert_eq!(paused.level, Level::Amber);
    }
}
