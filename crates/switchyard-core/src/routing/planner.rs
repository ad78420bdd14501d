//! The planner: from a combo to an ordered list of candidates (target × credential), each
//! checked through the three layers outermost first, with a reason for every one skipped.
//!
//! Order: targets by the combo's strategy, providers whose breaker is degraded after the
//! healthy ones (stable), and within a target the credential the provider's selector picks
//! first, then its other eligible credentials in priority order. The attempt loop re-admits
//! each candidate when it gets to it, since state may change while earlier attempts run.

use serde::Serialize;

use super::combo::Combo;
use super::strategy::TargetOrderer;
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialId, ProviderId};
use crate::resilience::{BreakerState, CredentialSelector, HealthRegistry, SkipReason};

/// A provider's credentials in priority order, and how to choose among them.
#[derive(Debug)]
pub struct ProviderRoster {
    pub provider: ProviderId,
    pub credentials: Vec<CredentialId>,
    pub selector: CredentialSelector,
}

/// One candidate to try.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// Index into the combo's targets.
    pub target: usize,
    pub key: CandidateKey,
}

/// One candidate the planner did not offer, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub target: usize,
    pub key: CandidateKey,
    pub reason: SkipReason,
}

/// The planner's answer for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub candidates: Vec<Candidate>,
    pub skipped: Vec<Skipped>,
}

/// Orders and filters `combo`'s candidates at `now`. `roster` finds a provider's credentials;
/// a target whose provider has none configured is skipped without a candidate.
pub fn plan<'r>(
    combo: &Combo,
    roster: impl Fn(&ProviderId) -> Option<&'r ProviderRoster>,
    orderer: &TargetOrderer,
    registry: &HealthRegistry,
    now: UnixMillis,
) -> Plan {
    let mut order = Vec::with_capacity(combo.targets.len());
    orderer.order(combo, now, &mut order);
    // Degraded providers still serve, but only after every healthy one.
    let degraded: Vec<bool> = order
        .iter()
        .map(|&i| registry.breaker_state(&combo.targets[i].provider, now) == BreakerState::Degraded)
        .collect();
    let mut ranked: Vec<(bool, usize)> = degraded.into_iter().zip(order).collect();
    ranked.sort_by_key(|&(degraded, _)| degraded);

    let mut plan = Plan::default();
    let mut eligible: Vec<usize> = Vec::new();
    for (_, target_index) in ranked {
        let target = &combo.targets[target_index];
        let Some(roster) = roster(&target.provider) else { continue };
        eligible.clear();
        for (i, credential) in roster.credentials.iter().enumerate() {
            if target.credential.as_ref().is_some_and(|pinned| pinned != credential) {
                continue;
            }
            let key = CandidateKey {
                provider: target.provider.clone(),
                credential: credential.clone(),
                model: target.model.clone(),
            };
            match registry.eligible(&key, now) {
                Ok(()) => eligible.push(i),
                Err(reason) => plan.skipped.push(Skipped { target: target_index, key, reason }),
            }
        }
        let Some(first) = roster.selector.pick(&eligible) else { continue };
        for i in std::iter::once(first).chain(eligible.iter().copied().filter(|&i| i != first)) {
            plan.candidates.push(Candidate {
                target: target_index,
                key: CandidateKey {
                    provider: target.provider.clone(),
                    credential: roster.credentials[i].clone(),
                    model: target.model.clone(),
                },
            });
        }
    }
    plan
}

impl Plan {
    /// The earliest moment any skipped candidate becomes eligible again by itself.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.skipped.iter().filter_map(|s| s.reason.retry_in()).min()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::outcome::{BodyHint, ClassifyPolicy, Outcome, Upstream, classify};
    use crate::resilience::SelectionStrategy;
    use crate::routing::combo::{RouteStrategy, Target};

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);

    fn roster(provider: &str, keys: &[&str]) -> ProviderRoster {
        ProviderRoster {
            provider: provider.into(),
            credentials: keys.iter().map(|&k| k.into()).collect(),
            selector: CredentialSelector::new(SelectionStrategy::FillFirst, keys.len(), 1),
        }
    }

    fn fail(r: &Arc<HealthRegistry>, key: &CandidateKey, status: u16) {
        let headers = http::HeaderMap::new();
        let up = Upstream::Response { status, headers: &headers, body: BodyHint::None };
        let v = classify(&Outcome::new(up), &ClassifyPolicy::default(), T0);
        r.admit(key, T0).unwrap().finish(&v, T0);
    }

    fn labels(plan: &Plan) -> Vec<String> {
        plan.candidates.iter().map(|c| c.key.to_string()).collect()
    }

    #[test]
    fn candidates_follow_target_order_then_credential_priority_and_skips_carry_reasons() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("openai", &["a", "b"]), roster("groq", &["g"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        let combo = Combo {
            name: "smart".into(),
            strategy: RouteStrategy::Priority,
            targets: vec![Target::new("openai", "gpt-4o"), Target::new("groq", "llama")],
        };
        fail(&r, &CandidateKey::new("openai", "a", "gpt-4o"), 404);
        let plan = plan(&combo, find, &TargetOrderer::new(1), &r, T0);
        assert_eq!(labels(&plan), ["openai/gpt-4o@b", "groq/llama@g"]);
        assert_eq!(plan.skipped.len(), 1);
        assert_eq!(plan.skipped[0].reason.code(), "model_locked");
        assert_eq!(plan.retry_after(), Some(std::time::Duration::from_secs(10)));
    }

    #[test]
    fn a_degraded_provider_ranks_after_healthy_ones() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        for _ in 0..3 {
            fail(&r, &CandidateKey::new("a", "k", "other"), 502);
        }
        let combo = Combo {
            name: "c".into(),
            strategy: RouteStrategy::Priority,
            targets: vec![Target::new("a", "m"), Target::new("b", "m")],
        };
        assert_eq!(labels(&plan(&combo, find, &TargetOrderer::new(1), &r, T0)), ["b/m@k", "a/m@k"]);
    }

    #[test]
    fn a_pinned_credential_is_the_only_one_offered() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("openai", &["a", "b", "c"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        let mut target = Target::new("openai", "gpt-4o");
        target.credential = Some("c".into());
        let plan = plan(&Combo::single(target), find, &TargetOrderer::new(1), &r, T0);
        assert_eq!(labels(&plan), ["openai/gpt-4o@c"]);
    }
}
