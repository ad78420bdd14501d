//! The doctor: findings read from the health state and the config, each
//! with its evidence, a digest of that evidence, and what to do about it: a change it can
//! apply in one step, or advice with a link to the fix. Nothing is applied here, and nothing
//! is applied unasked: the caller applies one finding at a time, only with the digest the user
//! was shown, so a state that changed meanwhile is refused instead of acted on.
//!
//! Invariants:
//! - Pure: the caller gathers [`Inputs`] and performs a [`Change`].
//! - Evidence is stable while the state is: counts and states, never a countdown, so the
//!   digest a user saw still matches when nothing changed but the clock.
//! - Ids are stable across looks (`kind:subject`), so a finding can be named from the CLI.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::binding::Binding;
use crate::ids::{CredentialKey, ModelId, ProviderId};
use crate::outcome::OutcomeKind;
use crate::resilience::lockout::LockReason;
use crate::resilience::registry::{BreakerView, CredentialView, LockoutView, ResetScope};
use crate::resilience::{BreakerState, CredentialStatus};
use crate::settings::LockoutPolicy;

/// A breaker that re-opened this many times in a row, without closing in between, keeps
/// failing: "again and again".
pub const FLAPPING_REOPENS: u32 = 2;

/// A model locked as not found this many times (in a row on one key, or on several keys at
/// once) is taken as retired.
pub const RETIRED_AFTER: u32 = 2;

/// A provider's recent median time to first token is "far above its usual" at this many times
/// its usual median...
pub const SLOW_FACTOR: u64 = 3;

/// ...and at least this much above it, in milliseconds: 30 ms against 10 ms is three times,
/// and nothing a person would notice.
pub const SLOW_MIN_EXTRA_MS: u64 = 500;

/// Samples either median needs before it is compared: a few slow answers are not a trend.
pub const SLOW_MIN_RECENT: u64 = 5;
pub const SLOW_MIN_USUAL: u64 = 20;

/// One combo as the doctor reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComboInput {
    pub name: String,
    /// `provider/model` of each target, in order.
    pub targets: Vec<(ProviderId, ModelId)>,
    /// Candidates that could serve now.
    pub eligible: usize,
}

/// One configured provider as the doctor reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInput {
    pub id: ProviderId,
    pub credentials: Vec<crate::ids::CredentialId>,
    /// Its `models` list; empty when it lists none (then any model is its).
    pub models: Vec<ModelId>,
    /// Bindings its credentials still need confirmed.
    pub unconfirmed: Vec<Binding>,
    /// Its credentials whose secret cannot be read now, each with why.
    pub secrets_unavailable: Vec<(crate::ids::CredentialId, String)>,
}

/// One provider's time to first token, recent and usual, as the doctor reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyInput {
    pub provider: ProviderId,
    /// The median of the last 10 to 20 minutes' streams (the hedge's first-event sketches).
    pub recent_p50_ms: u64,
    pub recent_samples: u64,
    /// The median of the last 7 days' streams (the usage aggregates).
    pub usual_p50_ms: u64,
    pub usual_samples: u64,
}

/// What the doctor reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    pub breakers: Vec<BreakerView>,
    pub credentials: Vec<CredentialView>,
    pub lockouts: Vec<LockoutView>,
    pub combos: Vec<ComboInput>,
    pub providers: Vec<ProviderInput>,
    /// Enforced budgets that are spent, by name.
    pub budgets_spent: Vec<String>,
    /// Credentials under their quota reserve.
    pub under_reserve: Vec<CredentialKey>,
    /// The model-lockout settings in force: a lock they would no longer set has lost its cause.
    pub lockout_policy: LockoutPolicy,
    /// Providers' times to first token.
    pub latencies: Vec<LatencyInput>,
}

/// What kind of trouble a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export, rename = "DoctorKind")]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A breaker that opened again and again, on a combo with healthy alternatives.
    BreakerFlapping,
    /// A model locked as not found again and again: retired.
    ModelRetired,
    /// A lockout, cooldown or breaker whose cause is gone: of something no longer configured,
    /// or a lock the model-lockout settings no longer set.
    StaleBench,
    /// A destination waiting for confirmation.
    DestinationUnconfirmed,
    /// A key the upstream refused as invalid.
    KeyRefused,
    /// An OAuth credential that needs signing in again.
    SignInNeeded,
    /// A combo with nothing ready to serve.
    ComboNothingReady,
    /// An enforced budget that is spent.
    BudgetSpent,
    /// A key under its quota reserve.
    UnderReserve,
    /// A provider whose recent time to first token is far above its usual.
    SlowFirstToken,
    /// A credential whose secret cannot be read (a variable not set, a keychain entry
    /// missing or locked, a file missing or unsafe).
    SecretUnavailable,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BreakerFlapping => "breaker_flapping",
            Self::ModelRetired => "model_retired",
            Self::StaleBench => "stale_bench",
            Self::DestinationUnconfirmed => "destination_unconfirmed",
            Self::KeyRefused => "key_refused",
            Self::SignInNeeded => "sign_in_needed",
            Self::ComboNothingReady => "combo_nothing_ready",
            Self::BudgetSpent => "budget_spent",
            Self::UnderReserve => "under_reserve",
            Self::SlowFirstToken => "slow_first_token",
            Self::SecretUnavailable => "secret_unavailable",
        }
    }
}

/// A change the doctor can apply in one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export, rename = "DoctorChange")]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// Move `target` (`provider/model`) to the end of `combo`.
    MoveDown { combo: String, target: String },
    /// Take `model` out of `provider`'s `models` list and out of `combos`.
    Retire { provider: ProviderId, model: ModelId, combos: Vec<String> },
    /// Clear a bench.
    Clear { scope: ResetScope },
    /// Confirm `provider`'s destinations: `bindings` is what would then be sent where.
    Confirm { provider: ProviderId, bindings: Vec<Binding> },
}

/// What to do about a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export, rename = "DoctorAction")]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Applicable in one step with `POST /api/doctor/{id}/apply`.
    Apply { says: String, change: Change },
    /// A person's fix: `link` is where in the app it is made.
    Advice { says: String, link: String },
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export, rename = "DoctorFinding")]
pub struct Finding {
    /// `kind:subject`, stable across looks.
    pub id: String,
    pub kind: Kind,
    pub title: String,
    /// What was seen, a line each.
    pub evidence: Vec<String>,
    /// Names exactly this evidence: an apply must bring it back (see the module's docs).
    pub digest: String,
    pub action: Action,
}

impl Finding {
    fn new(
        kind: Kind,
        subject: &str,
        title: String,
        evidence: Vec<String>,
        action: Action,
    ) -> Self {
        let id = format!("{}:{subject}", kind.as_str());
        let digest = digest(&id, &evidence, &action);
        Self { id, kind, title, evidence, digest, action }
    }
}

/// FNV-1a over the id, each evidence line and the action: 16 hex digits.
fn digest(id: &str, evidence: &[String], action: &Action) -> String {
    let action = format!("{action:?}");
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in std::iter::once(id).chain(evidence.iter().map(String::as_str)).chain([&*action]) {
        for byte in (part.len() as u64).to_le_bytes().iter().chain(part.as_bytes()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// Every finding, in a stable order: the applicable ones first, by kind, then advice.
pub fn examine(inputs: &Inputs) -> Vec<Finding> {
    let mut findings = Vec::new();
    flapping(inputs, &mut findings);
    retired(inputs, &mut findings);
    stale(inputs, &mut findings);
    unconfirmed(inputs, &mut findings);
    unreadable(inputs, &mut findings);
    advice(inputs, &mut findings);
    findings
}

fn label(provider: &ProviderId, model: &ModelId) -> String {
    format!("{provider}/{model}")
}

fn open(inputs: &Inputs, provider: &ProviderId) -> bool {
    inputs.breakers.iter().any(|b| {
        &b.provider == provider && matches!(b.state, BreakerState::Open | BreakerState::HalfOpen)
    })
}

fn flapping(inputs: &Inputs, findings: &mut Vec<Finding>) {
    for breaker in inputs.breakers.iter().filter(|b| b.reopens >= FLAPPING_REOPENS) {
        for combo in &inputs.combos {
            let Some(at) = combo.targets.iter().position(|(p, _)| *p == breaker.provider) else {
                continue;
            };
            let last = at + 1 == combo.targets.len();
            let healthy_alternative =
                combo.targets.iter().any(|(p, _)| *p != breaker.provider && !open(inputs, p));
            if last || !healthy_alternative {
                continue;
            }
            let (provider, model) = &combo.targets[at];
            let target = label(provider, model);
            let evidence = vec![
                format!(
                    "breaker of {provider}: {:?}, re-opened {} times in a row",
                    breaker.state, breaker.reopens
                ),
                format!(
                    "{target} is target {} of {} in combo \"{}\", and another provider there is healthy",
                    at + 1,
                    combo.targets.len(),
                    combo.name
                ),
            ];
            let says = format!("move {target} to the end of combo \"{}\"", combo.name);
            let change = Change::MoveDown { combo: combo.name.clone(), target: target.clone() };
            findings.push(Finding::new(
                Kind::BreakerFlapping,
                &format!("{}/{target}", combo.name),
                format!("{provider} keeps failing, ahead of healthy targets in \"{}\"", combo.name),
                evidence,
                Action::Apply { says, change },
            ));
        }
    }
}

fn retired(inputs: &Inputs, findings: &mut Vec<Finding>) {
    // Each (provider, model) once, with every key's lock as not found: one key's, or one on
    // each of several keys, adds up to "again and again".
    let not_found =
        |l: &&LockoutView| l.reason.is_some_and(|r| r.kind == OutcomeKind::ModelUnavailable);
    let mut seen: Vec<(&ProviderId, &ModelId)> = Vec::new();
    for lock in inputs.lockouts.iter().filter(not_found) {
        let (provider, model) = (&lock.key.provider, &lock.key.model);
        if seen.contains(&(provider, model)) {
            continue;
        }
        seen.push((provider, model));
        let locks: Vec<&LockoutView> = inputs
            .lockouts
            .iter()
            .filter(not_found)
            .filter(|l| &l.key.provider == provider && &l.key.model == model)
            .collect();
        let times: u32 = locks.iter().map(|l| l.consecutive_failures).sum();
        if times < RETIRED_AFTER {
            continue;
        }
        let target = label(provider, model);
        let combos: Vec<String> = inputs
            .combos
            .iter()
            .filter(|c| c.targets.iter().any(|(p, m)| p == provider && m == model))
            .map(|c| c.name.clone())
            .collect();
        let mut evidence: Vec<String> = locks
            .iter()
            .map(|l| {
                let status =
                    l.reason.and_then(|r| r.status).map_or_else(String::new, |s| format!(" ({s})"));
                format!(
                    "{target} on {}: not found{status}, {} times in a row",
                    l.key.credential, l.consecutive_failures
                )
            })
            .collect();
        evidence.push(format!("named by combos {combos:?}"));
        let says = format!("remove {target} from provider {provider}'s models and from {combos:?}");
        let change = Change::Retire { provider: provider.clone(), model: model.clone(), combos };
        findings.push(Finding::new(
            Kind::ModelRetired,
            &target,
            format!("{target} is gone: the provider answers that it does not exist"),
            evidence,
            Action::Apply { says, change },
        ));
    }
}

fn stale(inputs: &Inputs, findings: &mut Vec<Finding>) {
    let provider = |id: &ProviderId| inputs.providers.iter().find(|p| &p.id == id);
    let has_credential = |key: &CredentialKey| {
        provider(&key.provider).is_some_and(|p| {
            p.credentials.iter().any(|c| c.as_str() == key.credential.configured())
        })
    };
    let serves = |p: &ProviderId, m: &ModelId| {
        provider(p).is_some_and(|p| p.models.is_empty() || p.models.contains(m))
    };
    for breaker in inputs.breakers.iter().filter(|b| provider(&b.provider).is_none()) {
        findings.push(Finding::new(
            Kind::StaleBench,
            breaker.provider.as_str(),
            format!("a breaker of {}, which is no longer configured", breaker.provider),
            vec![format!("breaker of {}: {:?}", breaker.provider, breaker.state)],
            Action::Apply {
                says: format!("clear what is kept of {}", breaker.provider),
                change: Change::Clear {
                    scope: ResetScope::Provider { provider: breaker.provider.clone() },
                },
            },
        ));
    }
    for credential in inputs.credentials.iter().filter(|c| !has_credential(&c.key)) {
        let key = &credential.key;
        findings.push(Finding::new(
            Kind::StaleBench,
            &format!("{}/{}", key.provider, key.credential),
            format!(
                "a cooldown of credential {}/{}, which is no longer configured",
                key.provider, key.credential
            ),
            vec![format!(
                "credential {}/{}: {:?}",
                key.provider, key.credential, credential.status
            )],
            Action::Apply {
                says: format!("clear the cooldown of {}/{}", key.provider, key.credential),
                change: Change::Clear {
                    scope: ResetScope::Credential {
                        provider: key.provider.clone(),
                        credential: key.credential.clone(),
                    },
                },
            },
        ));
    }
    for lock in &inputs.lockouts {
        let key = &lock.key;
        let gone = if !has_credential(&key.credential_key()) || !serves(&key.provider, &key.model) {
            "which is no longer configured".to_owned()
        } else if let Some(why) = lock.reason.and_then(|r| unset_by(&inputs.lockout_policy, r)) {
            why
        } else {
            continue;
        };
        let status =
            lock.reason.and_then(|r| r.status).map_or_else(String::new, |s| format!(" on {s}"));
        findings.push(Finding::new(
            Kind::StaleBench,
            &key.to_string(),
            format!("a lockout of {key}, {gone}"),
            vec![format!("{key} locked{status}, {} failures in a row", lock.consecutive_failures)],
            Action::Apply {
                says: format!("clear the lockout of {key}"),
                change: Change::Clear { scope: ResetScope::Lockout { key: key.clone() } },
            },
        ));
    }
}

/// Why the lockout settings in force would not set a lock for `reason`, if they would not:
/// lockouts turned off, or a 429 or 5xx no longer listed in `error_codes`. A model not found
/// or refused locks whatever the codes (see `outcome::classify`).
fn unset_by(policy: &LockoutPolicy, reason: LockReason) -> Option<String> {
    if !policy.enabled {
        return Some("and model lockouts are now off".to_owned());
    }
    let listed = matches!(reason.kind, OutcomeKind::RateLimit | OutcomeKind::Transient);
    match reason.status {
        Some(status) if listed && !policy.error_codes.contains(status) => {
            Some(format!("and Settings → Model Lockouts no longer locks on {status}"))
        }
        _ => None,
    }
}

fn unconfirmed(inputs: &Inputs, findings: &mut Vec<Finding>) {
    for provider in inputs.providers.iter().filter(|p| !p.unconfirmed.is_empty()) {
        let evidence: Vec<String> =
            provider.unconfirmed.iter().map(|b| format!("would send {b}")).collect();
        let says = format!("confirm {}: {}", provider.id, evidence.join(", "));
        findings.push(Finding::new(
            Kind::DestinationUnconfirmed,
            provider.id.as_str(),
            format!("{} waits for you to confirm where its requests go", provider.id),
            evidence,
            Action::Apply {
                says,
                change: Change::Confirm {
                    provider: provider.id.clone(),
                    bindings: provider.unconfirmed.clone(),
                },
            },
        ));
    }
}

/// A login passed through (a `client` credential's scope, `configured~token digest`) that is
/// benched as invalid has no key to enter: its client signs in anew, and what is left is a
/// bench to clear. Today's logins are benched for a while, never as invalid; an older
/// version's may still be.
fn refused_login(credential: &CredentialView, subject: &str) -> Option<Finding> {
    let key = &credential.key;
    if credential.status != CredentialStatus::Invalid || key.credential.account().is_none() {
        return None;
    }
    let evidence = vec![format!("credential {subject}: {:?}", credential.status)];
    Some(Finding::new(
        Kind::KeyRefused,
        subject,
        format!("{subject} was refused as invalid"),
        evidence,
        Action::Apply {
            says: format!(
                "clear the bench of {subject}: a login has no key to enter; its client signs \
                 in again by itself"
            ),
            change: Change::Clear {
                scope: ResetScope::Credential {
                    provider: key.provider.clone(),
                    credential: key.credential.clone(),
                },
            },
        },
    ))
}

/// A credential whose secret cannot be read: the person's fix, since only they can make it
/// readable.
fn unreadable(inputs: &Inputs, findings: &mut Vec<Finding>) {
    for provider in &inputs.providers {
        for (credential, why) in &provider.secrets_unavailable {
            let subject = format!("{}/{credential}", provider.id);
            findings.push(Finding::new(
                Kind::SecretUnavailable,
                &subject,
                format!("{subject} has no secret to send"),
                vec![format!("credential {subject}: {why}")],
                Action::Advice {
                    says: format!(
                        "make the secret of {subject} readable (set the variable where the \
                         server starts, store the key again, unlock the keychain, or create the \
                         file), then Retry now on the Providers page; it is read again every few \
                         seconds meanwhile"
                    ),
                    link: "#/providers".to_owned(),
                },
            ));
        }
    }
}

fn advice(inputs: &Inputs, findings: &mut Vec<Finding>) {
    let providers = "#/providers".to_owned();
    for credential in &inputs.credentials {
        let key = &credential.key;
        let subject = format!("{}/{}", key.provider, key.credential);
        if let Some(finding) = refused_login(credential, &subject) {
            findings.push(finding);
            continue;
        }
        let (kind, title, says) = match credential.status {
            CredentialStatus::Invalid => (
                Kind::KeyRefused,
                format!("{subject} was refused as invalid"),
                format!("enter the key of {subject} again on the Providers page"),
            ),
            CredentialStatus::Expired => (
                Kind::SignInNeeded,
                format!("{subject} needs signing in again"),
                format!("sign in again for {subject} on the Providers page"),
            ),
            _ => continue,
        };
        let evidence = vec![format!("credential {subject}: {:?}", credential.status)];
        findings.push(Finding::new(
            kind,
            &subject,
            title,
            evidence,
            Action::Advice { says, link: providers.clone() },
        ));
    }
    for combo in inputs.combos.iter().filter(|c| c.eligible == 0) {
        let evidence = vec![format!(
            "combo \"{}\": none of its {} targets can serve now",
            combo.name,
            combo.targets.len()
        )];
        findings.push(Finding::new(
            Kind::ComboNothingReady,
            &combo.name,
            format!("combo \"{}\" has nothing ready to serve", combo.name),
            evidence,
            Action::Advice {
                says: "see why on the Overview, then add a target or fix the benched ones"
                    .to_owned(),
                link: "#/combos".to_owned(),
            },
        ));
    }
    for budget in &inputs.budgets_spent {
        findings.push(Finding::new(
            Kind::BudgetSpent,
            budget,
            format!("{budget} is spent: requests are refused until it resets"),
            vec![format!("{budget}: spent, enforced")],
            Action::Advice {
                says: "raise or remove it in Settings → Budgets".to_owned(),
                link: "#/settings/budgets".to_owned(),
            },
        ));
    }
    for slow in inputs.latencies.iter().filter(|l| is_slow(l)) {
        let provider = &slow.provider;
        let evidence = vec![
            format!(
                "recent median time to first token {} ms, over {} streams in the last 10 to 20 minutes",
                slow.recent_p50_ms, slow.recent_samples
            ),
            format!(
                "usual median {} ms, over {} streams in the last 7 days",
                slow.usual_p50_ms, slow.usual_samples
            ),
        ];
        findings.push(Finding::new(
            Kind::SlowFirstToken,
            provider.as_str(),
            format!("{provider} is answering far slower than usual"),
            evidence,
            Action::Advice {
                says: format!(
                    "check {provider}'s status page; meanwhile put a faster target first in the combos that use it, or turn on hedging"
                ),
                link: "#/combos".to_owned(),
            },
        ));
    }
    for key in &inputs.under_reserve {
        let subject = format!("{}/{}", key.provider, key.credential);
        findings.push(Finding::new(
            Kind::UnderReserve,
            &subject,
            format!("{subject} is under its quota reserve"),
            vec![format!("{subject}: less than the reserve left in a quota window")],
            Action::Advice {
                says: "it takes no new session until its window resets; add a key or wait"
                    .to_owned(),
                link: providers.clone(),
            },
        ));
    }
}

/// Far above its usual: see [`SLOW_FACTOR`], [`SLOW_MIN_EXTRA_MS`] and the sample minimums.
fn is_slow(l: &LatencyInput) -> bool {
    l.recent_samples >= SLOW_MIN_RECENT
        && l.usual_samples >= SLOW_MIN_USUAL
        && l.recent_p50_ms >= l.usual_p50_ms.saturating_mul(SLOW_FACTOR)
        && l.recent_p50_ms >= l.usual_p50_ms.saturating_add(SLOW_MIN_EXTRA_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UnixMillis;
    use crate::ids::{CandidateKey, CredentialId};

    fn breaker(provider: &str, state: BreakerState, reopens: u32) -> BreakerView {
        BreakerView {
            provider: provider.into(),
            state,
            failures: 5,
            reopens,
            last_fault: None,
            retry_in_ms: 1234,
            probing_elsewhere: false,
            recorded_by: None,
        }
    }

    fn provider(id: &str, models: &[&str]) -> ProviderInput {
        ProviderInput {
            secrets_unavailable: Vec::new(),
            id: id.into(),
            credentials: vec![CredentialId::from("k1")],
            models: models.iter().map(|m| ModelId::from(*m)).collect(),
            unconfirmed: Vec::new(),
        }
    }

    fn combo(name: &str, targets: &[(&str, &str)]) -> ComboInput {
        ComboInput {
            name: name.into(),
            targets: targets
                .iter()
                .map(|(p, m)| (ProviderId::from(*p), ModelId::from(*m)))
                .collect(),
            eligible: targets.len(),
        }
    }

    fn inputs() -> Inputs {
        Inputs {
            combos: vec![combo("smart", &[("oa", "gpt-4o"), ("an", "claude")])],
            providers: vec![provider("oa", &["gpt-4o"]), provider("an", &[])],
            ..Inputs::default()
        }
    }

    #[test]
    fn a_refused_login_is_cleared_never_sent_to_enter_a_key() {
        let mut i = inputs();
        let login = |credential: &str| CredentialView {
            key: CredentialKey { provider: "oa".into(), credential: credential.into() },
            status: CredentialStatus::Invalid,
            backoff_level: 0,
            retry_in_ms: None,
            recorded_by: None,
            last_error: None,
        };
        i.credentials.push(login("k1~t0123456789a"));
        i.credentials.push(login("k1"));
        let found = examine(&i);
        assert_eq!(found.len(), 2, "{found:?}");
        let scope =
            ResetScope::Credential { provider: "oa".into(), credential: "k1~t0123456789a".into() };
        let Action::Apply { says, change } = &found[0].action else { panic!("{found:?}") };
        assert_eq!(*change, Change::Clear { scope });
        assert!(says.contains("a login has no key to enter"), "{says}");
        let Action::Advice { says, .. } = &found[1].action else { panic!("{found:?}") };
        assert!(says.contains("enter the key of oa/k1 again"), "{says}");
    }

    #[test]
    fn a_healthy_state_has_no_finding() {
        assert_eq!(examine(&inputs()), []);
    }

    #[test]
    fn a_breaker_that_opens_again_and_again_ahead_of_a_healthy_target_is_moved_down() {
        let mut i = inputs();
        i.breakers.push(breaker("oa", BreakerState::Open, 2));
        let found = examine(&i);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, "breaker_flapping:smart/oa/gpt-4o");
        assert_eq!(
            found[0].action,
            Action::Apply {
                says: "move oa/gpt-4o to the end of combo \"smart\"".into(),
                change: Change::MoveDown { combo: "smart".into(), target: "oa/gpt-4o".into() },
            }
        );
        // Once only, or without a healthy alternative, or already last: nothing to move.
        i.breakers[0].reopens = 1;
        assert_eq!(examine(&i), []);
        i.breakers =
            vec![breaker("oa", BreakerState::Open, 3), breaker("an", BreakerState::Open, 0)];
        assert_eq!(examine(&i), []);
    }

    #[test]
    fn the_digest_ignores_countdowns_and_changes_with_the_evidence() {
        let mut i = inputs();
        i.breakers.push(breaker("oa", BreakerState::Open, 2));
        let first = examine(&i)[0].digest.clone();
        i.breakers[0].retry_in_ms = 1;
        assert_eq!(examine(&i)[0].digest, first, "the clock alone changes nothing");
        i.breakers[0].reopens = 3;
        assert_ne!(examine(&i)[0].digest, first, "more re-opens is other evidence");
    }

    #[test]
    fn a_model_not_found_again_and_again_is_retired_from_its_provider_and_combos() {
        let mut i = inputs();
        i.lockouts.push(LockoutView {
            key: CandidateKey::new("oa", "k1", "gpt-4o"),
            reason: Some(LockReason { kind: OutcomeKind::ModelUnavailable, status: Some(404) }),
            consecutive_failures: 2,
            locked_until: UnixMillis(1),
            remaining_ms: 10,
            recorded_by: None,
        });
        let found = examine(&i);
        assert_eq!(found[0].id, "model_retired:oa/gpt-4o");
        let Action::Apply { change, .. } = &found[0].action else { panic!("{found:?}") };
        assert_eq!(
            *change,
            Change::Retire {
                provider: "oa".into(),
                model: "gpt-4o".into(),
                combos: vec!["smart".into()]
            }
        );
    }

    #[test]
    fn benches_of_what_is_no_longer_configured_are_cleared_and_destinations_confirmed() {
        let mut i = inputs();
        i.breakers.push(breaker("gone", BreakerState::Open, 0));
        i.providers[1].unconfirmed.push(Binding::destination_only("https://api.example.com:443"));
        let found = examine(&i);
        let kinds: Vec<Kind> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [Kind::StaleBench, Kind::DestinationUnconfirmed], "{found:?}");
        assert!(found[1].evidence[0].contains("requests to https://api.example.com:443"));
    }

    #[test]
    fn what_only_a_person_can_fix_is_advice_with_a_link() {
        let mut i = inputs();
        i.combos[0].eligible = 0;
        i.budgets_spent.push("daily budget".into());
        let found = examine(&i);
        assert!(found.iter().all(|f| matches!(f.action, Action::Advice { .. })), "{found:?}");
        assert_eq!(found.len(), 2);
    }

    fn lock(model: &str, kind: OutcomeKind, status: u16) -> LockoutView {
        LockoutView {
            key: CandidateKey::new("oa", "k1", model),
            reason: Some(LockReason { kind, status: Some(status) }),
            consecutive_failures: 1,
            locked_until: UnixMillis(1),
            remaining_ms: 3_600_000,
            recorded_by: None,
        }
    }

    #[test]
    fn a_lock_the_lockout_settings_no_longer_set_has_lost_its_cause() {
        let mut i = inputs();
        i.lockouts.push(lock("gpt-4o", OutcomeKind::RateLimit, 429));
        assert_eq!(examine(&i), [], "429 still locks");
        i.lockout_policy.error_codes = [404, 503].into_iter().collect();
        let found = examine(&i);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, "stale_bench:oa/gpt-4o@k1");
        assert_eq!(
            found[0].title,
            "a lockout of oa/gpt-4o@k1, and Settings → Model Lockouts no longer locks on 429"
        );
        // Not found locks whatever the codes; with lockouts off, nothing does.
        i.lockouts = vec![lock("gpt-4o", OutcomeKind::ModelUnavailable, 404)];
        i.lockout_policy.error_codes = crate::outcome::StatusSet::default();
        assert_eq!(examine(&i), []);
        i.lockout_policy.enabled = false;
        assert_eq!(examine(&i)[0].kind, Kind::StaleBench);
    }

    #[test]
    fn a_provider_far_slower_than_usual_is_advice() {
        let slow = |recent_p50_ms, recent_samples, usual_p50_ms, usual_samples| LatencyInput {
            provider: "oa".into(),
            recent_p50_ms,
            recent_samples,
            usual_p50_ms,
            usual_samples,
        };
        let mut i = inputs();
        i.latencies.push(slow(1_200, 5, 300, 20));
        let found = examine(&i);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, "slow_first_token:oa");
        assert!(matches!(found[0].action, Action::Advice { .. }));
        for not_far in [
            slow(800, 5, 300, 20),   // under 3 times
            slow(45, 50, 10, 500),   // 4.5 times, 35 ms: nobody notices
            slow(1_200, 4, 300, 20), // too few recent streams
            slow(1_200, 5, 300, 19), // too little history
        ] {
            i.latencies = vec![not_far.clone()];
            assert_eq!(examine(&i), [], "{not_far:?}");
        }
    }
}
