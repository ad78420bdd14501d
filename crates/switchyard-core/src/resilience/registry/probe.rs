//! Recovery probes (RESILIENCE.md §3): which bench a candidate is recovering from or may be
//! probed through, starting a probe, and judging its verdict by its bench's layer.

use std::sync::Arc;
use std::time::Duration;

use super::HealthRegistry;
use super::attempt::Attempt;
use super::layer::CredRef;
use super::state::State;
use super::table::Publisher;
use crate::clock::UnixMillis;
use crate::ids::CandidateKey;
use crate::outcome::{OutcomeKind, Verdict};
use crate::resilience::lockout::LockReason;
use crate::resilience::recovery::{Bench, ProbeRefused, ProbeResult, ProbeScope};
use crate::resilience::team::link::{LeaseAnswer, LeaseScope};
use crate::resilience::team::{BreakerChange, CredentialChange, LockoutChange, TeamTarget};
use crate::resilience::{BreakerState, CredentialCooldown};

impl State {
    /// Which bench `key` is recovering from, if any (see [`crate::resilience::recovery`]): eligible, but
    /// not yet shown to work since a layer benched it. Outermost layer first.
    fn recovering(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        out: &Publisher,
    ) -> Option<Bench> {
        self.check(key, now, out).ok()?;
        let ranks_last = self.ranks_last(&key.provider, now, out);
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let policy = policies.breaker(&key.provider);
        if let Some(b) = breakers.map.get(&key.provider) {
            match b.state(policy) {
                BreakerState::HalfOpen => return Some(Bench::BreakerHalfOpen),
                BreakerState::Degraded | BreakerState::Closed if ranks_last => {
                    return Some(Bench::BreakerDegraded);
                }
                BreakerState::Degraded | BreakerState::Closed | BreakerState::Open => {}
            }
        }
        if credentials.map.get(&CredRef::from(key)).is_some_and(CredentialCooldown::is_recovering) {
            return Some(Bench::CredentialCooled);
        }
        if lockouts.map.get(key).is_some_and(|l| l.is_recovering(now, &policies.lockout)) {
            return Some(Bench::ModelLockLapsed);
        }
        None
    }

    /// Which benches of the proxy's own a recovery probe of `key` would go through at `now`
    /// (see [`crate::resilience::recovery`]), and the outermost one's [`Bench`]: `None` when nothing
    /// benches `key`, or when a layer benches it that no probe may go through (a first wait, a
    /// wait the upstream stated, a refused key).
    fn passage(
        &mut self,
        key: &CandidateKey,
        now: UnixMillis,
        out: &Publisher,
    ) -> Option<(Bench, Passage)> {
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let policy = policies.breaker(&key.provider);
        let breaker = match breakers.get(&key.provider, now, policy, out) {
            Some(b) if b.check(now, policy).is_err() => b.may_probe_through(policy).then_some(true),
            _ => Some(false),
        };
        let credential = match credentials.get(&CredRef::from(key), now, &policies.cooldown, out) {
            Some(c) if c.check(now).is_err() => c.may_probe_through(now).then_some(true),
            _ => Some(false),
        };
        let lock = match lockouts.get(key, now, &policies.lockout, out) {
            Some(l) if l.check(now).is_err() => l.may_probe_through(now).then_some(true),
            _ => Some(false),
        };
        let passage = Passage { breaker: breaker?, credential: credential?, lock: lock? };
        let bench = if passage.breaker {
            Bench::BreakerOpen
        } else if passage.credential {
            Bench::CredentialCooling
        } else if passage.lock {
            Bench::ModelLocked
        } else {
            return None;
        };
        Some((bench, passage))
    }

    /// Whether a probe of `key` on `bench` may start at `now`: none in flight for it (under any
    /// bench) and its scope not probed within [`crate::resilience::recovery::PROBE_INTERVAL`].
    fn probe_due(
        &self,
        key: &CandidateKey,
        bench: Bench,
        now: UnixMillis,
    ) -> Result<(), ProbeRefused> {
        let scope = bench.scope(key);
        if self.probes.iter().any(|(s, t)| t.in_flight && (*s == scope || s.covers(key))) {
            return Err(ProbeRefused::InFlight);
        }
        match self.probes.get(&scope) {
            Some(track) if !track.due(now) => Err(ProbeRefused::NotDue),
            _ => Ok(()),
        }
    }

    /// A recovery probe went through `passage`'s waits of the proxy's own: each one passed is
    /// judged by its own layer's rule; a wait the answer states replaces it exactly
    /// (RESILIENCE.md §3). Returns what the team hears: a bench lifted, as cleared (it only ever
    /// holds such a wait as a stated one).
    fn pass_judgement(
        &mut self,
        key: &CandidateKey,
        passage: Passage,
        verdict: &Verdict,
        now: UnixMillis,
        out: &Publisher,
    ) -> Vec<TeamTarget> {
        let State { policies, breakers, credentials, lockouts, .. } = self;
        let mut shared = Vec::new();
        let provider = || key.provider.clone();

        let policy = policies.breaker(&key.provider);
        if passage.breaker
            && Bench::BreakerOpen.healed_by(verdict)
            && breakers.force(&key.provider, now, policy, out, |b| b.close_through(now))
        {
            shared.push(TeamTarget::Breaker { provider: provider(), change: BreakerChange::Clear });
        }
        let cooldown = &policies.cooldown;
        let cred = CredRef::from(key);
        if passage.credential && Bench::CredentialCooling.healed_by(verdict) {
            if credentials.force(&cred, now, cooldown, out, |c| c.heal(now)) {
                let change = CredentialChange::Clear;
                shared.push(TeamTarget::Credential { key: key.credential_key(), change });
            }
        } else if passage.credential
            && let Some(hint) = verdict.retry_after.filter(|_| verdict.charges.credential.is_some())
        {
            credentials.force(&cred, now, cooldown, out, |c| c.restate(now, hint));
        }
        let lockout = &policies.lockout;
        if passage.lock && Bench::ModelLocked.healed_by(verdict) {
            if lockouts.force(key, now, lockout, out, |l| l.heal(now)) {
                shared.push(TeamTarget::Lockout { key: key.clone(), change: LockoutChange::Clear });
            }
        } else if passage.lock
            && let Some(hint) = verdict.retry_after.filter(|_| verdict.charges.model)
        {
            lockouts.force(key, now, lockout, out, |l| l.restate(now, hint));
        }
        shared
    }
}

impl HealthRegistry {
    /// Which bench `key` is recovering from, if any: eligible again, but not yet shown to work
    /// (RESILIENCE.md §3). The planner passes such a target over for a probe when another
    /// candidate can serve. Performs lazy transitions, claims nothing.
    pub fn recovering(&self, key: &CandidateKey, now: UnixMillis) -> Option<Bench> {
        self.state.lock().recovering(key, now, &self.events)
    }

    /// Which bench a recovery probe of `key` would go through, if `key` is benched at `now`
    /// only by waits of the proxy's own whose first has run out (RESILIENCE.md §3): the planner
    /// names such a target for a probe while another candidate serves. Performs lazy
    /// transitions, claims nothing.
    pub fn probe_through(&self, key: &CandidateKey, now: UnixMillis) -> Option<Bench> {
        self.state.lock().passage(key, now, &self.events).map(|(bench, _)| bench)
    }

    /// Whether a probe of `key` on `bench` may start at `now`: none in flight for `key`, and
    /// its scope not probed within [`crate::resilience::recovery::PROBE_INTERVAL`]. Claims nothing.
    pub fn probe_due(&self, key: &CandidateKey, bench: Bench, now: UnixMillis) -> bool {
        self.state.lock().probe_due(key, bench, now).is_ok()
    }

    /// Starts a recovery probe of `key` on `bench`: takes the scope's probe slot (and a
    /// half-open breaker's, for `permit`: as long as the probe may take), so no other probe of
    /// the scope starts until this one is settled with [`RecoveryProbe::finish`] or dropped.
    /// A probe through a bench ([`Bench::is_through`]) passes the waits of the proxy's own that
    /// [`Self::probe_through`] names, and nothing else. `afford` is asked last, once the probe
    /// could go out (the retry budget: a probe refused for another reason spends nothing).
    pub fn start_probe(
        self: &Arc<Self>,
        key: &CandidateKey,
        bench: Bench,
        now: UnixMillis,
        permit: Duration,
        afford: impl FnOnce() -> bool,
    ) -> Result<RecoveryProbe, ProbeRefused> {
        let scope = bench.scope(key);
        let out = &self.events;
        let mut st = self.state.lock();
        st.probe_due(key, bench, now)?;
        let passage = if bench.is_through() {
            match st.passage(key, now, out) {
                Some((through, passage)) if through == bench => passage,
                _ => return Err(ProbeRefused::NotEligible),
            }
        } else {
            st.check(key, now, out).map_err(|_| ProbeRefused::NotEligible)?;
            Passage::default()
        };
        if !afford() {
            return Err(ProbeRefused::Budget);
        }
        let deadline = now.plus(permit);
        let probe = if passage.breaker {
            // Through the open breaker: no half-open slot to claim.
            None
        } else {
            st.claim(key, now, deadline, out, &self.next_probe)
                .map_err(|_| ProbeRefused::NotEligible)?
        };
        let track = st.probes.entry(scope.clone()).or_default();
        track.in_flight = true;
        track.last_sent = Some(now);
        drop(st);
        let attempt = Attempt::admitted(self, key, probe, (now, deadline), true);
        Ok(RecoveryProbe { attempt: Some(attempt), bench, scope, passage, scope_leased: false })
    }

    /// Judges a probe's verdict by its bench's layer: success clears the bench at once; a
    /// failure the verdict did not already charge to a lapsed lock extends it by the usual
    /// backoff. Frees the scope's slot and keeps the result for the health page.
    fn judge_probe(
        &self,
        key: &CandidateKey,
        (bench, scope, passage): (Bench, &ProbeScope, Passage),
        verdict: &Verdict,
        now: UnixMillis,
    ) -> bool {
        let out = &self.events;
        let mut st = self.state.lock();
        let aborted = verdict.kind == OutcomeKind::Aborted;
        let healed = !aborted && bench.healed_by(verdict);
        let State { policies, breakers, credentials, lockouts, .. } = &mut *st;
        let provider = || key.provider.clone();
        // A half-open probe closed (or re-opened) the breaker through its own admission, and
        // the verdict has charged every other failure already: only these change more.
        let shared = match bench {
            Bench::BreakerDegraded if healed => {
                let policy = policies.breaker(&key.provider);
                breakers.force(&key.provider, now, policy, out, |b| b.heal(now)).then(|| {
                    TeamTarget::Breaker { provider: provider(), change: BreakerChange::Heal }
                })
            }
            Bench::CredentialCooled if healed => {
                let cooldown = &policies.cooldown;
                credentials.force(&CredRef::from(key), now, cooldown, out, |c| c.heal(now)).then(
                    || TeamTarget::Credential {
                        key: key.credential_key(),
                        change: CredentialChange::Heal,
                    },
                )
            }
            Bench::ModelLockLapsed if healed => lockouts
                .force(key, now, &policies.lockout, out, |l| l.heal(now))
                .then(|| TeamTarget::Lockout { key: key.clone(), change: LockoutChange::Heal }),
            Bench::ModelLockLapsed if !verdict.charges.model && !aborted => {
                let lockout = &policies.lockout;
                let reason = LockReason { kind: verdict.kind, status: verdict.status };
                let hint = verdict.retry_after;
                lockouts
                    .force(key, now, lockout, out, |l| {
                        l.on_failure(now, lockout, reason, hint, true)
                    })
                    .then(|| TeamTarget::Lockout {
                        key: key.clone(),
                        change: LockoutChange::Failure { reason, hint, at_once: true },
                    })
            }
            Bench::BreakerHalfOpen
            | Bench::BreakerDegraded
            | Bench::CredentialCooled
            | Bench::ModelLockLapsed
            | Bench::BreakerOpen
            | Bench::CredentialCooling
            | Bench::ModelLocked => None,
        };
        let mut shared: Vec<TeamTarget> = shared.into_iter().collect();
        if !aborted {
            shared.extend(st.pass_judgement(key, passage, verdict, now, out));
        }
        let State { probes, .. } = &mut *st;
        let track = probes.entry(scope.clone()).or_default();
        track.in_flight = false;
        if !aborted && matches!(scope, ProbeScope::Provider { .. }) {
            track.suspect = !healed;
        }
        if !aborted {
            track.last = Some(ProbeResult {
                at: now,
                bench,
                outcome: verdict.kind,
                status: verdict.status,
                healed,
            });
        }
        drop(st);
        self.share(shared, now);
        healed
    }

    fn release_probe(&self, scope: &ProbeScope) {
        if let Some(track) = self.state.lock().probes.get_mut(scope) {
            track.in_flight = false;
        }
    }
}

/// One recovery probe in flight (see [`crate::resilience::recovery`]). Settle it with
/// [`RecoveryProbe::finish`]; dropping it unsettled frees its scope's slot (and a half-open
/// breaker's probe slot), so a scope never stays "probing" for a probe that cannot answer.
#[derive(Debug)]
pub struct RecoveryProbe {
    /// `None` once settled.
    attempt: Option<Attempt>,
    bench: Bench,
    scope: ProbeScope,
    /// The waits of the proxy's own it goes through, if any.
    passage: Passage,
    /// It holds the team's lease of its scope, released when it is over.
    scope_leased: bool,
}

/// The benches of the proxy's own a recovery probe goes through (see [`Bench::is_through`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Passage {
    breaker: bool,
    credential: bool,
    lock: bool,
}

impl RecoveryProbe {
    pub fn key(&self) -> &CandidateKey {
        &self.attempt.as_ref().expect("unsettled until finished").key
    }

    pub fn bench(&self) -> Bench {
        self.bench
    }

    /// In a team, a recovery probe goes out only under the team's lease of its scope, so one
    /// probe of each bench is in flight across every instance; a probe that is a
    /// half-open breaker's probe needs the breaker's lease like any other attempt (see
    /// [`Attempt::lease`]). `false`: drop it, another instance probes. Without a team, or while
    /// the team's database is unreachable, it goes ahead at once.
    pub async fn lease(&mut self, now: UnixMillis) -> bool {
        let attempt = self.attempt.as_mut().expect("unsettled until finished");
        if attempt.probe.is_some() {
            return attempt.lease(now).await.is_ok();
        }
        let Some(team) = attempt.registry.team.get() else { return true };
        let lasts = attempt.deadline.since(now);
        match team.lease(LeaseScope::Probe(self.scope.clone()), now, lasts).await {
            LeaseAnswer::Granted => {
                self.scope_leased = true;
                true
            }
            LeaseAnswer::Unavailable => true,
            LeaseAnswer::Refused => false,
        }
    }

    /// Frees the team's slot of this probe's scope, if it holds it.
    fn release_scope(&mut self, registry: &HealthRegistry) {
        if std::mem::take(&mut self.scope_leased)
            && let Some(team) = registry.team.get()
        {
            team.release(self.scope.clone());
        }
    }

    /// Records the probe's verdict on all three layers, as any attempt's, then judges it by its
    /// bench's layer. Returns whether the bench was cleared.
    pub fn finish(mut self, verdict: &Verdict, now: UnixMillis) -> bool {
        let attempt = self.attempt.take().expect("settled once");
        let (registry, key) = (Arc::clone(&attempt.registry), attempt.key.clone());
        attempt.finish(verdict, now);
        let healed =
            registry.judge_probe(&key, (self.bench, &self.scope, self.passage), verdict, now);
        self.release_scope(&registry);
        healed
    }
}

impl Drop for RecoveryProbe {
    fn drop(&mut self) {
        if let Some(attempt) = self.attempt.take() {
            attempt.registry.release_probe(&self.scope);
            self.release_scope(&attempt.registry);
        }
    }
}
