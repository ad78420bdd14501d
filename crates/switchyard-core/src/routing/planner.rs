//! The planner: from a combo to an ordered list of candidates (target × credential), each
//! checked through the three layers outermost first, with a reason for every one skipped.
//!
//! Order: targets by the combo's strategy, providers whose breaker is degraded after the
//! healthy ones (stable), and within a target the credential the provider's selector picks
//! first, then its other eligible credentials in priority order. The attempt loop re-admits
//! each candidate when it gets to it, since state may change while earlier attempts run.
//!
//! Recovery (RESILIENCE.md §3): a candidate that is eligible again but not yet shown to work
//! (see [`crate::resilience::recovery`]) and that the strategy prefers to the first candidate
//! that can serve without proof is passed over for a probe of the proxy's own: it moves to the
//! end of the list (a last resort) and is named in [`Plan::probes`]. When no candidate could
//! serve without proof (a combo of one, or every target recovering), nothing changes: the
//! user's request is the probe, as before.
//!
//! A preferred target benched again after its first wait ran out, by waits of the proxy's own
//! only (its breaker re-opened, its key or model benched a second time in a row), is named for
//! a probe *through* the bench (see [`crate::resilience::recovery`]); it stays skipped for the
//! users. Probes are named only when due: none in flight for the target, and its scope not
//! probed within [`PROBE_INTERVAL`](crate::resilience::recovery::PROBE_INTERVAL).

use serde::Serialize;

use super::combo::Combo;
use super::strategy::TargetOrderer;
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialId, ProviderId};
use crate::resilience::{Bench, CredentialSelector, HealthRegistry, ProbeScope, SkipReason};

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

/// A recovering candidate to probe, and the bench its probe answers for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub target: usize,
    pub key: CandidateKey,
    pub bench: Bench,
}

/// The planner's answer for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub candidates: Vec<Candidate>,
    pub skipped: Vec<Skipped>,
    /// At most one per probe scope.
    pub probes: Vec<Probe>,
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
    plan_for(combo, roster, orderer, registry, now, true)
}

/// [`plan`] for a request that is `fresh` (a new session, or one without sessions: the
/// combo's strategy and each provider's credential selection choose, and count the choice) or
/// not (a pinned session, RESILIENCE.md §11: strategies spread sessions, not turns, so they
/// neither choose nor count; the targets and credentials come in the user's order, for
/// [`super::session::Sessions::steer`] to put the pin first).
pub fn plan_for<'r>(
    combo: &Combo,
    roster: impl Fn(&ProviderId) -> Option<&'r ProviderRoster>,
    orderer: &TargetOrderer,
    registry: &HealthRegistry,
    now: UnixMillis,
    fresh: bool,
) -> Plan {
    let mut order = Vec::with_capacity(combo.targets.len());
    if fresh {
        orderer.order(combo, now, &mut order);
    } else {
        orderer.order_stateless(combo, now, &mut order);
    }
    // Where the strategy put each target, before degraded ones were moved back.
    let mut preference = vec![0; combo.targets.len()];
    for (position, &target) in order.iter().enumerate() {
        preference[target] = position;
    }
    // Degraded providers still serve, but only after every healthy one.
    let degraded: Vec<bool> =
        order.iter().map(|&i| registry.ranks_last(&combo.targets[i].provider, now)).collect();
    let mut ranked: Vec<(bool, usize)> = degraded.into_iter().zip(order).collect();
    ranked.sort_by_key(|&(degraded, _)| degraded);

    let mut plan = Plan::default();
    let mut eligible: Vec<usize> = Vec::new();
    // Skipped candidates a probe may go through: (target, credential's place, key, bench).
    let mut through: Vec<(usize, usize, CandidateKey, Bench)> = Vec::new();
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
                Err(reason) => {
                    if target.probe
                        && passable(reason)
                        && let Some(bench) = registry.probe_through(&key, now)
                    {
                        through.push((target_index, i, key.clone(), bench));
                    }
                    plan.skipped.push(Skipped { target: target_index, key, reason });
                }
            }
        }
        let first = if fresh { roster.selector.pick(&eligible) } else { eligible.first().copied() };
        let Some(first) = first else { continue };
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
    let ordering = Ordering { preference: &preference, roster: &roster };
    choose_probes(&mut plan, combo, &ordering, &through, registry, now);
    plan
}

/// Within each run of candidates of one target, moves those `worse` says to the back of the
/// run, each group keeping its order: another credential of the same target goes first, the
/// target order stays the plan's (a key over its concurrency cap, or under its quota reserve,
/// RESILIENCE.md §11). When every credential of a target is worse, nothing moves.
pub fn prefer_within_targets(candidates: &mut [Candidate], worse: impl Fn(&CandidateKey) -> bool) {
    let mut start = 0;
    while start < candidates.len() {
        let target = candidates[start].target;
        let end = candidates[start..]
            .iter()
            .position(|c| c.target != target)
            .map_or(candidates.len(), |n| start + n);
        // Stable: `false` (not worse) sorts first.
        candidates[start..end].sort_by_key(|c| worse(&c.key));
        start = end;
    }
}

/// Whether a skip for `reason` may be a wait a probe goes through (the registry decides).
fn passable(reason: SkipReason) -> bool {
    matches!(
        reason,
        SkipReason::BreakerOpen { .. }
            | SkipReason::CredentialCooling { .. }
            | SkipReason::ModelLocked { .. }
    )
}

/// How the strategy ranked targets, and where each credential stands in its provider's list.
struct Ordering<'a, R> {
    /// Each target's place in the strategy's order, before degraded ones were moved back.
    preference: &'a [usize],
    roster: &'a R,
}

impl<'r, R: Fn(&ProviderId) -> Option<&'r ProviderRoster>> Ordering<'_, R> {
    /// `key`'s credential's place among its provider's.
    fn credential_place(&self, key: &CandidateKey) -> usize {
        (self.roster)(&key.provider)
            .and_then(|r| r.credentials.iter().position(|c| *c == key.credential))
            .unwrap_or(usize::MAX)
    }
}

/// Passes recovering candidates the strategy prefers over the first sound one (one that can
/// serve without proof) and names them for probes when due; names the skipped ones a probe may
/// go through (`through`) that it prefers too. A degraded provider keeps the place the ranking
/// gave it (last, but still serving when all else fails).
fn choose_probes<'r, R: Fn(&ProviderId) -> Option<&'r ProviderRoster>>(
    plan: &mut Plan,
    combo: &Combo,
    ordering: &Ordering<'_, R>,
    through: &[(usize, usize, CandidateKey, Bench)],
    registry: &HealthRegistry,
    now: UnixMillis,
) {
    let preference = ordering.preference;
    let benches: Vec<Option<Bench>> = plan
        .candidates
        .iter()
        .map(|c| combo.targets[c.target].probe.then(|| registry.recovering(&c.key, now)).flatten())
        .collect();
    let Some(sound) = benches.iter().position(Option::is_none) else { return };
    let sound_target = plan.candidates[sound].target;
    let sound_preference = preference[sound_target];
    let mut scopes: Vec<ProbeScope> = Vec::new();
    // Benched outright, so never serving: a probe goes through its bench, users elsewhere.
    let sound_place = ordering.credential_place(&plan.candidates[sound].key);
    for (target, place, key, bench) in through {
        let preferred = preference[*target] < sound_preference
            || (*target == sound_target && *place < sound_place);
        let scope = bench.scope(key);
        if preferred && !scopes.contains(&scope) && registry.probe_due(key, *bench, now) {
            scopes.push(scope);
            plan.probes.push(Probe { target: *target, key: key.clone(), bench: *bench });
        }
    }
    let mut kept = Vec::with_capacity(plan.candidates.len());
    let mut passed = Vec::new();
    for (i, (candidate, bench)) in plan.candidates.drain(..).zip(benches).enumerate() {
        let Some(bench) = bench else {
            kept.push(candidate);
            continue;
        };
        let preferred = if bench == Bench::BreakerDegraded {
            preference[candidate.target] < sound_preference
        } else {
            i < sound
        };
        if !preferred {
            kept.push(candidate);
            continue;
        }
        let scope = bench.scope(&candidate.key);
        if !scopes.contains(&scope) && registry.probe_due(&candidate.key, bench, now) {
            scopes.push(scope);
            let (target, key) = (candidate.target, candidate.key.clone());
            plan.probes.push(Probe { target, key, bench });
        }
        if bench == Bench::BreakerDegraded {
            kept.push(candidate);
        } else {
            passed.push(candidate);
        }
    }
    kept.append(&mut passed);
    plan.candidates = kept;
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
    const PERMIT: std::time::Duration = std::time::Duration::from_secs(15);

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
            hedge: None,
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
            hedge: None,
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

    fn fallback_combo() -> Combo {
        Combo {
            name: "c".into(),
            strategy: RouteStrategy::Priority,
            targets: vec![Target::new("a", "m"), Target::new("b", "m")],
            hedge: None,
        }
    }

    fn probes(plan: &Plan) -> Vec<(String, &'static str)> {
        plan.probes.iter().map(|p| (p.key.to_string(), p.bench.code())).collect()
    }

    #[test]
    fn a_half_open_primary_with_a_fallback_is_probed_and_the_request_goes_to_the_fallback() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        for _ in 0..5 {
            fail(&r, &CandidateKey::new("a", "k", "m"), 502);
        }
        let at = T0.plus(std::time::Duration::from_secs(30));
        let plan = plan(&fallback_combo(), find, &TargetOrderer::new(1), &r, at);
        assert_eq!(labels(&plan), ["b/m@k", "a/m@k"], "the primary is only a last resort");
        assert_eq!(probes(&plan), [("a/m@k".to_owned(), "breaker_half_open")]);
    }

    #[test]
    fn a_combo_of_one_keeps_the_user_request_as_the_probe() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        for _ in 0..5 {
            fail(&r, &CandidateKey::new("a", "k", "m"), 502);
        }
        let at = T0.plus(std::time::Duration::from_secs(30));
        let combo = Combo::single(Target::new("a", "m"));
        let plan = plan(&combo, find, &TargetOrderer::new(1), &r, at);
        assert_eq!(labels(&plan), ["a/m@k"]);
        assert_eq!(probes(&plan), []);
    }

    #[test]
    fn a_model_marked_probe_false_is_never_probed_and_keeps_its_place() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        fail(&r, &CandidateKey::new("a", "k", "m"), 404);
        let mut combo = fallback_combo();
        combo.targets[0].probe = false;
        let at = T0.plus(std::time::Duration::from_secs(10));
        let plan = plan(&combo, find, &TargetOrderer::new(1), &r, at);
        assert_eq!(labels(&plan), ["a/m@k", "b/m@k"]);
        assert_eq!(probes(&plan), []);
    }

    #[test]
    fn a_lapsed_lock_on_one_key_probes_that_key_while_the_next_key_serves() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k1", "k2"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        fail(&r, &CandidateKey::new("a", "k1", "m"), 503);
        let at = T0.plus(std::time::Duration::from_secs(10));
        let plan = plan(&fallback_combo(), find, &TargetOrderer::new(1), &r, at);
        assert_eq!(labels(&plan), ["a/m@k2", "b/m@k", "a/m@k1"]);
        assert_eq!(probes(&plan), [("a/m@k1".to_owned(), "model_lock_lapsed")]);
    }

    #[test]
    fn a_primary_locked_again_is_probed_through_its_lock_every_interval_while_the_fallback_serves()
    {
        use crate::resilience::recovery::PROBE_INTERVAL;
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        let primary = CandidateKey::new("a", "k", "m");
        fail(&r, &primary, 503);
        let plan_at = |at| plan(&fallback_combo(), find, &TargetOrderer::new(1), &r, at);
        assert_eq!(probes(&plan_at(T0.plus(std::time::Duration::from_secs(9)))), []);
        let lapsed = T0.plus(std::time::Duration::from_secs(10));
        let p = plan_at(lapsed);
        assert_eq!(probes(&p), [("a/m@k".to_owned(), "model_lock_lapsed")]);
        let probe = r.start_probe(&primary, Bench::ModelLockLapsed, lapsed, PERMIT, || true);
        let headers = http::HeaderMap::new();
        let up = Upstream::Response { status: 503, headers: &headers, body: BodyHint::None };
        let v = classify(&Outcome::new(up), &ClassifyPolicy::default(), lapsed);
        probe.unwrap().finish(&v, lapsed);
        // Locked again (20 s): skipped for users, probed through every interval.
        let next = lapsed.plus(PROBE_INTERVAL);
        let p = plan_at(next.minus(std::time::Duration::from_millis(1)));
        assert_eq!((labels(&p), probes(&p)), (vec!["b/m@k".to_owned()], vec![]));
        let p = plan_at(next);
        assert_eq!(labels(&p), ["b/m@k"]);
        assert_eq!(p.skipped[0].reason.code(), "model_locked");
        assert_eq!(probes(&p), [("a/m@k".to_owned(), "model_locked")]);
        // Nobody's preference when the locked target comes after the one serving.
        let mut combo = fallback_combo();
        combo.targets.reverse();
        let p = plan(&combo, find, &TargetOrderer::new(1), &r, next);
        assert_eq!(probes(&p), []);
        // Nor with `probe = false`.
        let mut combo = fallback_combo();
        combo.targets[0].probe = false;
        let p = plan(&combo, find, &TargetOrderer::new(1), &r, next);
        assert_eq!(probes(&p), []);
    }

    #[test]
    fn a_lapsed_key_probed_a_moment_ago_is_still_passed_over_but_not_probed_again() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k1", "k2"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        let k1 = CandidateKey::new("a", "k1", "m");
        fail(&r, &k1, 503);
        let at = T0.plus(std::time::Duration::from_secs(10));
        let probe = r.start_probe(&k1, Bench::ModelLockLapsed, at, PERMIT, || true).unwrap();
        let p = plan(&fallback_combo(), find, &TargetOrderer::new(1), &r, at);
        assert_eq!(labels(&p), ["a/m@k2", "b/m@k", "a/m@k1"], "passed over while in flight");
        assert_eq!(probes(&p), [], "one in flight is enough");
        drop(probe);
        let p = plan(&fallback_combo(), find, &TargetOrderer::new(1), &r, at);
        assert_eq!(labels(&p), ["a/m@k2", "b/m@k", "a/m@k1"]);
        assert_eq!(probes(&p), [], "probed a moment ago");
    }

    #[test]
    fn a_degraded_primary_keeps_its_place_last_and_is_probed_while_due() {
        let r = Arc::new(HealthRegistry::default());
        let rosters = [roster("a", &["k"]), roster("b", &["k"])];
        let find = |p: &ProviderId| rosters.iter().find(|r| &r.provider == p);
        for _ in 0..3 {
            fail(&r, &CandidateKey::new("a", "k", "m"), 502);
        }
        let plan = plan(&fallback_combo(), find, &TargetOrderer::new(1), &r, T0);
        assert_eq!(labels(&plan), ["b/m@k", "a/m@k"]);
        assert_eq!(probes(&plan), [("a/m@k".to_owned(), "breaker_degraded")]);
        // A degraded fallback behind a sound primary is nobody's preference: no probe.
        let mut combo = fallback_combo();
        combo.targets.reverse();
        let plan = super::plan(&combo, find, &TargetOrderer::new(1), &r, T0);
        assert_eq!(labels(&plan), ["b/m@k", "a/m@k"]);
        assert_eq!(probes(&plan), []);
    }
}
