//! Layer 1: the provider circuit breaker (RESILIENCE.md §3).
//!
//! Invariants:
//! - `closed`/`degraded` is one phase; degraded is derived from the leaky failure count, so a
//!   live change of the thresholds reclassifies at once.
//! - `open` → `half_open` happens lazily on the first read at or after `until`.
//! - `half_open` holds at most `half_open_probes` probes, each with a deadline: the one its
//!   caller names at admission, as long as the request it rides on may take (RESILIENCE.md §3),
//!   so a slow answer that is still coming keeps its slot and its success still closes the
//!   breaker. A probe that is released (its attempt dropped) or that passes its deadline frees
//!   its slot, so a breaker can never stay half-open forever waiting for a result that will
//!   not come.
//! - Only a probe's own result moves `half_open`; stragglers admitted before the breaker opened
//!   are ignored while it is open or half-open.
//! - The leaky count also leaks with time: it halves every `reset_timeout` since the breaker
//!   last changed, computed lazily on read. A degraded provider ranks last and so sees no
//!   successes; without the decay it would stay demoted for ever (RESILIENCE.md §3).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Changed, SkipReason};
use crate::clock::{UnixMillis, millis};
use crate::outcome::BreakerFault;
use crate::settings::BreakerPolicy;

/// The state a breaker shows to the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    /// Still admitting traffic, but failing often enough that the planner ranks it lower.
    Degraded,
    Open,
    HalfOpen,
}

/// Identifies one half-open probe; unique for the life of the registry.
pub type ProbeId = u64;

/// The slot another instance of the team holds under its lease. The registry never
/// hands it out: its probe ids start at 1.
pub const TEAM_LEASE: ProbeId = 0;

/// Who holds a shared breaker's half-open probe slot, as a team member sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseHolder {
    Nobody,
    /// This instance: its own probes stay in flight.
    Me,
    /// Another instance, until the lease's deadline (in this instance's time).
    Other {
        until: UnixMillis,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Probe {
    id: ProbeId,
    deadline: UnixMillis,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: UnixMillis },
    HalfOpen { probes: Vec<Probe> },
}

/// How the breaker let an attempt through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Normal,
    /// A half-open probe; its result decides the breaker.
    Probe(ProbeId),
}

/// One provider's breaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breaker {
    phase: Phase,
    /// Leaky: +1 per failure, −1 per success.
    failures: u32,
    /// Consecutive re-opens without a successful probe: the backoff exponent.
    reopens: u32,
    last_fault: Option<BreakerFault>,
    changed_at: UnixMillis,
}

/// What is persisted of a breaker. Probes in flight are not: they die with the process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct BreakerRecord {
    pub state: BreakerState,
    pub failures: u32,
    pub reopens: u32,
    /// Set while open: when it may become half-open.
    pub open_until: Option<UnixMillis>,
    pub last_fault: Option<BreakerFault>,
    pub changed_at: UnixMillis,
}

impl Breaker {
    pub fn new(now: UnixMillis) -> Self {
        Self { phase: Phase::Closed, failures: 0, reopens: 0, last_fault: None, changed_at: now }
    }

    /// A closed breaker with no failures carries no information: it need not be tracked.
    pub fn is_pristine(&self) -> bool {
        self.phase == Phase::Closed && self.failures == 0 && self.reopens == 0
    }

    pub fn changed_at(&self) -> UnixMillis {
        self.changed_at
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn reopens(&self) -> u32 {
        self.reopens
    }

    pub fn last_fault(&self) -> Option<BreakerFault> {
        self.last_fault
    }

    /// The state at `now`, performing the lazy open → half-open move (and the clamp against
    /// clock jumps). Returns whether anything changed.
    pub fn refresh(&mut self, now: UnixMillis, policy: &BreakerPolicy) -> Changed {
        let mut changed = self.decay(now, policy);
        if let Phase::Open { until } = &mut self.phase {
            if now >= *until {
                // It became half-open at `until`, whenever someone happens to look.
                self.changed_at = *until;
                self.phase = Phase::HalfOpen { probes: Vec::new() };
                changed = true;
            } else if *until > now.plus(policy.longest()) {
                *until = now.plus(policy.longest());
                self.changed_at = now;
                changed = true;
            }
        }
        if let Phase::HalfOpen { probes } = &mut self.phase {
            // Abandon probes that never reported back: their slots are free again.
            probes.retain(|p| p.deadline > now);
        }
        Changed::from(changed)
    }

    /// Halves the failure count for every whole `reset_timeout` since the last change (a
    /// failure, or a success that lowered the count), keeping the remainder for next time so
    /// reads at any rhythm decay alike. Only a change a reader can see counts as a change: the
    /// state moving (degraded back to closed) or the count reaching zero; a count that only
    /// shrinks is a counter, travelling with the next transition's record (§6).
    fn decay(&mut self, now: UnixMillis, policy: &BreakerPolicy) -> bool {
        if self.phase != Phase::Closed || self.failures == 0 || policy.reset_timeout.is_zero() {
            return false;
        }
        let period = millis(policy.reset_timeout);
        let halvings = now.0.saturating_sub(self.changed_at.0) / period;
        if halvings == 0 {
            return false;
        }
        let before = self.state(policy);
        self.failures =
            self.failures.checked_shr(u32::try_from(halvings).unwrap_or(u32::MAX)).unwrap_or(0);
        self.changed_at = UnixMillis(self.changed_at.0 + halvings * period);
        self.state(policy) != before || self.failures == 0
    }

    /// The state as last refreshed.
    pub fn state(&self, policy: &BreakerPolicy) -> BreakerState {
        match self.phase {
            Phase::Closed if self.failures >= policy.degraded_threshold => BreakerState::Degraded,
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Would an attempt be let through at `now`? Call [`Self::refresh`] first.
    pub fn check(&self, now: UnixMillis, policy: &BreakerPolicy) -> Result<(), SkipReason> {
        if !policy.enabled {
            return Ok(());
        }
        match &self.phase {
            Phase::Closed => Ok(()),
            Phase::Open { until } => {
                Err(SkipReason::BreakerOpen { retry_in_ms: ms(until.since(now)) })
            }
            Phase::HalfOpen { probes } if probes.len() < policy.half_open_probes as usize => Ok(()),
            Phase::HalfOpen { probes } => {
                let first_free = probes.iter().map(|p| p.deadline).min().unwrap_or(now);
                Err(SkipReason::BreakerProbing { retry_in_ms: ms(first_free.since(now)) })
            }
        }
    }

    /// Lets an attempt through, claiming a probe slot when half-open. The slot is held until
    /// `deadline` at the latest: the caller's, as long as the attempt itself may take (a
    /// non-streamed answer may take minutes). Call [`Self::refresh`] first. Claiming a slot is
    /// not a persisted change: probes do not survive a restart.
    pub fn admit(
        &mut self,
        now: UnixMillis,
        policy: &BreakerPolicy,
        deadline: UnixMillis,
        probe_id: impl FnOnce() -> ProbeId,
    ) -> Result<Admission, SkipReason> {
        self.check(now, policy)?;
        match &mut self.phase {
            Phase::HalfOpen { probes } if policy.enabled => {
                let id = probe_id();
                probes.push(Probe { id, deadline: deadline.max(now.plus(MIN_PERMIT)) });
                Ok(Admission::Probe(id))
            }
            _ => Ok(Admission::Normal),
        }
    }

    /// Whether a recovery probe may go through this breaker while it is open: it re-opened
    /// after a failed half-open probe, so its first wait has run out and what benches it now is
    /// the proxy's own backoff, never a wait the provider stated (RESILIENCE.md §3).
    pub fn may_probe_through(&self, policy: &BreakerPolicy) -> bool {
        policy.enabled && matches!(self.phase, Phase::Open { .. }) && self.reopens > 0
    }

    /// A recovery probe through the open breaker found the provider answering: closed, counters
    /// reset, as a half-open probe's success would.
    pub fn close_through(&mut self, now: UnixMillis) -> Changed {
        if !matches!(self.phase, Phase::Open { .. }) || self.reopens == 0 {
            return Changed::No;
        }
        self.phase = Phase::Closed;
        self.failures = 0;
        self.reopens = 0;
        self.changed_at = now;
        Changed::Yes
    }

    /// A recovery probe failed on the provider's account while it ranks last: the count is not
    /// raised (users go elsewhere already, and probes every few seconds would open it for
    /// nothing) but held, its decay restarting as after any failure, so a provider still seen
    /// failing does not drift back to its users.
    pub fn hold(&mut self, now: UnixMillis) -> Changed {
        if self.phase != Phase::Closed || self.failures == 0 {
            return Changed::No;
        }
        self.changed_at = now;
        Changed::Yes
    }

    /// Frees a probe's slot without a verdict (the client left, the attempt was dropped).
    pub fn release(&mut self, probe: ProbeId) {
        if let Phase::HalfOpen { probes } = &mut self.phase {
            probes.retain(|p| p.id != probe);
        }
    }

    /// The provider answered without a fault of its own.
    pub fn on_success(&mut self, now: UnixMillis, admission: Admission) -> Changed {
        match (&self.phase, admission) {
            (Phase::Closed, _) if self.failures > 0 => {
                self.failures -= 1;
            }
            (Phase::HalfOpen { probes }, Admission::Probe(id))
                if probes.iter().any(|p| p.id == id) =>
            {
                return self.close_after_probe(now);
            }
            _ => return Changed::No,
        }
        self.changed_at = now;
        Changed::Yes
    }

    /// A half-open probe succeeded: closed, counters reset. The probe may have been admitted
    /// here or, in a team, by whichever instance held the lease (see `team::shared`).
    pub fn close_after_probe(&mut self, now: UnixMillis) -> Changed {
        if !matches!(self.phase, Phase::HalfOpen { .. }) {
            return Changed::No;
        }
        self.phase = Phase::Closed;
        self.failures = 0;
        self.reopens = 0;
        self.changed_at = now;
        Changed::Yes
    }

    /// A half-open probe failed with `fault`: open again, one backoff step longer.
    pub fn reopen_after_probe(
        &mut self,
        now: UnixMillis,
        policy: &BreakerPolicy,
        fault: BreakerFault,
    ) -> Changed {
        if !matches!(self.phase, Phase::HalfOpen { .. }) {
            return Changed::No;
        }
        self.last_fault = Some(fault);
        self.reopens = self.reopens.saturating_add(1);
        self.open(now, policy, fault);
        self.changed_at = now;
        Changed::Yes
    }

    /// A recovery probe found the provider answering: a closed (degraded) breaker forgets its
    /// failures at once instead of leaking them one success at a time.
    pub fn heal(&mut self, now: UnixMillis) -> Changed {
        if self.phase != Phase::Closed || self.failures == 0 {
            return Changed::No;
        }
        self.failures = 0;
        self.changed_at = now;
        Changed::Yes
    }

    /// The provider failed with `fault`.
    pub fn on_failure(
        &mut self,
        now: UnixMillis,
        policy: &BreakerPolicy,
        fault: BreakerFault,
        admission: Admission,
    ) -> Changed {
        if !policy.enabled {
            return Changed::No;
        }
        match (&self.phase, admission) {
            (Phase::Closed, _) => {
                self.failures = self.failures.saturating_add(1);
                self.last_fault = Some(fault);
                let o = policy.for_fault(fault);
                let threshold = o.threshold.unwrap_or(policy.failure_threshold);
                if o.immediate_open || self.failures >= threshold {
                    self.open(now, policy, fault);
                }
            }
            (Phase::HalfOpen { probes }, Admission::Probe(id))
                if probes.iter().any(|p| p.id == id) =>
            {
                return self.reopen_after_probe(now, policy, fault);
            }
            _ => return Changed::No,
        }
        self.changed_at = now;
        Changed::Yes
    }

    fn open(&mut self, now: UnixMillis, policy: &BreakerPolicy, fault: BreakerFault) {
        self.phase = Phase::Open { until: now.plus(cooldown(policy, fault, self.reopens)) };
    }

    /// How long until an attempt could be admitted; zero when it could be now.
    pub fn retry_in(&self, now: UnixMillis, policy: &BreakerPolicy) -> Duration {
        self.check(now, policy).err().and_then(SkipReason::retry_in).unwrap_or_default()
    }

    pub fn record(&self, policy: &BreakerPolicy) -> BreakerRecord {
        BreakerRecord {
            state: self.state(policy),
            failures: self.failures,
            reopens: self.reopens,
            open_until: match self.phase {
                Phase::Open { until } => Some(until),
                _ => None,
            },
            last_fault: self.last_fault,
            changed_at: self.changed_at,
        }
    }

    /// Rebuilds a breaker from its record. The re-open time is pulled back to at most
    /// `now + longest` (one already past lapses on the next read, exactly as in memory); a
    /// breaker saved half-open comes back half-open with no probes.
    pub fn restore(record: &BreakerRecord, now: UnixMillis, policy: &BreakerPolicy) -> Self {
        let phase = match (record.state, record.open_until) {
            (BreakerState::Open, Some(until)) => {
                Phase::Open { until: until.min(now.plus(policy.longest())) }
            }
            (BreakerState::Open | BreakerState::HalfOpen, _) => {
                Phase::HalfOpen { probes: Vec::new() }
            }
            (BreakerState::Closed | BreakerState::Degraded, _) => Phase::Closed,
        };
        Self {
            phase,
            failures: record.failures,
            reopens: record.reopens,
            last_fault: record.last_fault,
            changed_at: record.changed_at,
        }
    }
}

impl Breaker {
    /// The breaker a team's shared record stands for here, the record already in
    /// this instance's time: restored like a record from the state file, with the lease's slot
    /// taken while another instance probes, and this instance's own probes kept while it holds
    /// the lease (their results still settle the breaker).
    pub fn adopt(
        record: &BreakerRecord,
        now: UnixMillis,
        policy: &BreakerPolicy,
        lease: LeaseHolder,
        previous: Option<&Self>,
    ) -> Self {
        let mut adopted = Self::restore(record, now, policy);
        if let Phase::HalfOpen { probes } = &mut adopted.phase {
            match lease {
                LeaseHolder::Me => {
                    if let Some(Self { phase: Phase::HalfOpen { probes: mine }, .. }) = previous {
                        probes.extend(mine.iter().filter(|p| p.id != TEAM_LEASE).cloned());
                    }
                }
                LeaseHolder::Other { until } if until > now => {
                    probes.push(Probe { id: TEAM_LEASE, deadline: until });
                }
                LeaseHolder::Nobody | LeaseHolder::Other { .. } => {}
            }
        }
        adopted
    }

    /// Whether another instance's lease holds the half-open slot at `now`.
    pub fn leased_elsewhere(&self, now: UnixMillis) -> bool {
        matches!(&self.phase, Phase::HalfOpen { probes }
            if probes.iter().any(|p| p.id == TEAM_LEASE && p.deadline > now))
    }
}

/// `base × min(2^reopens, max_backoff_multiplier)`, where the base may be overridden per fault.
pub fn cooldown(policy: &BreakerPolicy, fault: BreakerFault, reopens: u32) -> Duration {
    let base = policy.for_fault(fault).cooldown.unwrap_or(policy.reset_timeout);
    let multiplier =
        1u32.checked_shl(reopens).unwrap_or(u32::MAX).min(policy.max_backoff_multiplier);
    base.saturating_mul(multiplier)
}

/// The shortest probe permit: a caller's deadline already in the past must not make the slot
/// free before the attempt even started.
const MIN_PERMIT: Duration = Duration::from_secs(1);

fn ms(d: Duration) -> u64 {
    millis(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{BreakerSettings, FaultOverride};

    const T0: UnixMillis = UnixMillis(1_700_000_000_000);
    const SEC: Duration = Duration::from_secs(1);

    fn policy() -> BreakerPolicy {
        BreakerPolicy::default()
    }

    fn fail(b: &mut Breaker, now: UnixMillis, p: &BreakerPolicy) -> Changed {
        let _ = b.refresh(now, p);
        b.on_failure(now, p, BreakerFault::Transient, Admission::Normal)
    }

    fn state_at(b: &mut Breaker, now: UnixMillis, p: &BreakerPolicy) -> BreakerState {
        let _ = b.refresh(now, p);
        b.state(p)
    }

    fn trip(b: &mut Breaker, now: UnixMillis, p: &BreakerPolicy) {
        for _ in 0..p.failure_threshold {
            let _ = fail(b, now, p);
        }
        assert_eq!(state_at(b, now, p), BreakerState::Open);
    }

    fn probe(
        b: &mut Breaker,
        now: UnixMillis,
        p: &BreakerPolicy,
        id: ProbeId,
    ) -> Result<Admission, SkipReason> {
        let _ = b.refresh(now, p);
        b.admit(now, p, now.plus(p.probe_timeout), || id)
    }

    #[test]
    fn third_failure_degrades_and_fifth_opens_with_default_thresholds() {
        let p = policy();
        assert_eq!((p.failure_threshold, p.degraded_threshold), (5, 3));
        let mut b = Breaker::new(T0);
        let expected = [
            BreakerState::Closed,
            BreakerState::Closed,
            BreakerState::Degraded,
            BreakerState::Degraded,
            BreakerState::Open,
        ];
        for (call, want) in expected.into_iter().enumerate() {
            assert!(fail(&mut b, T0, &p).is_yes());
            assert_eq!(state_at(&mut b, T0, &p), want, "after failure {}", call + 1);
        }
    }

    #[test]
    fn open_admits_nothing_until_the_cooldown_has_elapsed() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let just_before = T0.plus(p.reset_timeout).minus(Duration::from_millis(1));
        assert_eq!(probe(&mut b, T0, &p, 1), Err(SkipReason::BreakerOpen { retry_in_ms: 30_000 }));
        assert_eq!(
            probe(&mut b, just_before, &p, 2),
            Err(SkipReason::BreakerOpen { retry_in_ms: 1 })
        );
        assert_eq!(b.retry_in(just_before, &p), Duration::from_millis(1));
    }

    #[test]
    fn first_read_after_the_cooldown_is_half_open() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        assert!(b.refresh(at, &p).is_yes());
        assert_eq!(b.state(&p), BreakerState::HalfOpen);
        assert!(b.refresh(at, &p) == Changed::No, "the move happens once");
    }

    #[test]
    fn half_open_admits_only_the_configured_number_of_probes() {
        let p = BreakerSettings { half_open_probes: 2, ..BreakerSettings::default() }
            .validate()
            .unwrap();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        assert_eq!(probe(&mut b, at, &p, 1), Ok(Admission::Probe(1)));
        assert_eq!(probe(&mut b, at, &p, 2), Ok(Admission::Probe(2)));
        assert_eq!(
            probe(&mut b, at, &p, 3),
            Err(SkipReason::BreakerProbing { retry_in_ms: ms(p.probe_timeout) })
        );
    }

    #[test]
    fn released_probe_frees_its_slot_and_leaves_the_breaker_half_open() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        assert_eq!(probe(&mut b, at, &p, 7), Ok(Admission::Probe(7)));
        assert!(probe(&mut b, at, &p, 8).is_err());
        b.release(7);
        assert_eq!(b.state(&p), BreakerState::HalfOpen);
        assert_eq!(probe(&mut b, at, &p, 9), Ok(Admission::Probe(9)));
    }

    #[test]
    fn probe_past_its_deadline_is_abandoned_and_its_late_result_ignored() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        assert_eq!(probe(&mut b, at, &p, 1), Ok(Admission::Probe(1)));
        let late = at.plus(p.probe_timeout);
        assert_eq!(probe(&mut b, late, &p, 2), Ok(Admission::Probe(2)));
        assert!(b.on_success(late, Admission::Probe(1)) == Changed::No);
        assert_eq!(b.state(&p), BreakerState::HalfOpen);
        assert!(b.on_success(late, Admission::Probe(2)).is_yes());
        assert_eq!(b.state(&p), BreakerState::Closed);
    }

    #[test]
    fn probe_success_closes_with_counters_reset() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        let admission = probe(&mut b, at, &p, 1).unwrap();
        assert!(b.on_success(at, admission).is_yes());
        assert_eq!(b.state(&p), BreakerState::Closed);
        assert!(b.is_pristine());
    }

    #[test]
    fn backoff_doubles_per_reopen_up_to_the_cap() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let mut now = T0;
        let mut cooldowns = Vec::new();
        for id in 0..7 {
            let retry_in = b.retry_in(now, &p);
            cooldowns.push(retry_in.as_secs());
            now = now.plus(retry_in);
            let admission = probe(&mut b, now, &p, id).unwrap();
            assert!(b.on_failure(now, &p, BreakerFault::Timeout, admission).is_yes());
            assert_eq!(b.state(&p), BreakerState::Open);
        }
        assert_eq!(cooldowns, [30, 60, 120, 240, 480, 480, 480]);
    }

    #[test]
    fn tls_failure_opens_at_once_by_default() {
        let p = policy();
        let mut b = Breaker::new(T0);
        assert!(b.on_failure(T0, &p, BreakerFault::Tls, Admission::Normal).is_yes());
        assert_eq!(state_at(&mut b, T0, &p), BreakerState::Open);
    }

    #[test]
    fn per_fault_threshold_and_cooldown_override_the_profile() {
        let mut s = BreakerSettings::default();
        s.overrides.insert(
            BreakerFault::Timeout,
            FaultOverride { threshold: Some(2), cooldown_ms: Some(5_000), immediate_open: false },
        );
        let p = s.validate().unwrap();
        let mut b = Breaker::new(T0);
        let _ = b.on_failure(T0, &p, BreakerFault::Timeout, Admission::Normal);
        assert_eq!(state_at(&mut b, T0, &p), BreakerState::Closed);
        let _ = b.on_failure(T0, &p, BreakerFault::Timeout, Admission::Normal);
        assert_eq!(state_at(&mut b, T0, &p), BreakerState::Open);
        assert_eq!(b.retry_in(T0, &p), 5 * SEC);
    }

    #[test]
    fn success_leaks_one_failure_so_a_half_failing_provider_never_trips() {
        let p = policy();
        let mut b = Breaker::new(T0);
        for _ in 0..1_000 {
            let _ = fail(&mut b, T0, &p);
            let _ = b.on_success(T0, Admission::Normal);
        }
        assert_eq!(state_at(&mut b, T0, &p), BreakerState::Closed);
        assert!(b.is_pristine());
    }

    #[test]
    fn success_on_a_healthy_breaker_changes_nothing() {
        let mut b = Breaker::new(T0);
        assert!(b.on_success(T0, Admission::Normal) == Changed::No);
    }

    #[test]
    fn stragglers_do_not_move_an_open_or_half_open_breaker() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        assert!(b.on_failure(T0, &p, BreakerFault::Transient, Admission::Normal) == Changed::No);
        assert!(b.on_success(T0, Admission::Normal) == Changed::No);
        let at = T0.plus(p.reset_timeout);
        let _ = b.refresh(at, &p);
        assert!(b.on_success(at, Admission::Normal) == Changed::No);
        assert_eq!(b.state(&p), BreakerState::HalfOpen);
    }

    #[test]
    fn opted_out_provider_is_always_admitted_and_never_trips() {
        let p =
            BreakerSettings { enabled: false, ..BreakerSettings::default() }.validate().unwrap();
        let mut b = Breaker::new(T0);
        for _ in 0..100 {
            assert!(fail(&mut b, T0, &p) == Changed::No);
        }
        assert_eq!(probe(&mut b, T0, &p, 1), Ok(Admission::Normal));
    }

    /// A non-streamed half-open probe may take `non_stream_ms` (10 min);
    /// with the slot's deadline at `probe_timeout` (2 min) its success came too late to count,
    /// and another probe was admitted every 2 minutes meanwhile.
    #[test]
    fn a_probe_keeps_its_slot_for_the_deadline_its_caller_named_and_its_late_success_closes() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        let _ = b.refresh(at, &p);
        let ten_minutes = at.plus(Duration::from_secs(600));
        assert_eq!(b.admit(at, &p, ten_minutes, || 1), Ok(Admission::Probe(1)));
        let later = at.plus(p.probe_timeout).plus(Duration::from_secs(60));
        let _ = b.refresh(later, &p);
        assert_eq!(
            b.admit(later, &p, later.plus(p.probe_timeout), || 2),
            Err(SkipReason::BreakerProbing { retry_in_ms: ms(ten_minutes.since(later)) }),
            "still probing: nobody else is let through meanwhile"
        );
        assert!(b.on_success(later, Admission::Probe(1)).is_yes());
        assert_eq!(b.state(&p), BreakerState::Closed);
    }

    #[test]
    fn a_permit_whose_deadline_has_passed_already_still_holds_its_slot_for_a_moment() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout);
        let _ = b.refresh(at, &p);
        assert_eq!(b.admit(at, &p, T0, || 1), Ok(Admission::Probe(1)));
        assert!(b.check(at, &p).is_err(), "the slot is taken");
        let _ = b.refresh(at.plus(MIN_PERMIT), &p);
        assert_eq!(b.check(at.plus(MIN_PERMIT), &p), Ok(()));
    }

    #[test]
    fn only_a_breaker_that_reopened_may_be_probed_through_and_that_probe_closes_it() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        assert!(!b.may_probe_through(&p), "its first wait has not run out");
        assert!(b.close_through(T0) == Changed::No);
        let at = T0.plus(p.reset_timeout);
        let admission = probe(&mut b, at, &p, 1).unwrap();
        let _ = b.on_failure(at, &p, BreakerFault::Transient, admission);
        assert_eq!((b.state(&p), b.reopens()), (BreakerState::Open, 1));
        assert!(b.may_probe_through(&p));
        let opted_out =
            BreakerSettings { enabled: false, ..BreakerSettings::default() }.validate().unwrap();
        assert!(!b.may_probe_through(&opted_out));
        assert!(b.close_through(at.plus(SEC)).is_yes());
        assert_eq!(b.state(&p), BreakerState::Closed);
        assert!(b.is_pristine(), "counters reset, as after a half-open probe's success");
    }

    #[test]
    fn a_held_count_restarts_its_decay_without_growing() {
        let p = policy();
        let mut b = Breaker::new(T0);
        for _ in 0..3 {
            let _ = fail(&mut b, T0, &p);
        }
        let almost = T0.plus(p.reset_timeout.saturating_sub(SEC));
        let _ = b.refresh(almost, &p);
        assert!(b.hold(almost).is_yes());
        assert_eq!(state_at(&mut b, T0.plus(p.reset_timeout), &p), BreakerState::Degraded);
        assert_eq!(b.failures(), 3, "held, not raised");
        assert_eq!(state_at(&mut b, almost.plus(p.reset_timeout), &p), BreakerState::Closed);
        assert!(Breaker::new(T0).hold(T0) == Changed::No, "nothing to hold");
    }

    #[test]
    fn clock_jumping_back_cannot_stretch_an_open_breaker_past_its_longest_cooldown() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let year_ago = T0.minus(Duration::from_secs(365 * 24 * 3600));
        let _ = b.refresh(year_ago, &p);
        assert!(b.retry_in(year_ago, &p) <= p.longest());
    }

    #[test]
    fn record_round_trip_restores_an_identical_breaker() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let restored = Breaker::restore(&b.record(&p), T0, &p);
        assert_eq!(restored, b);
    }

    #[test]
    fn failures_halve_every_reset_timeout_so_a_degraded_provider_drifts_back_to_closed() {
        let p = policy();
        let mut b = Breaker::new(T0);
        for _ in 0..4 {
            let _ = fail(&mut b, T0, &p);
        }
        assert_eq!((b.failures(), b.state(&p)), (4, BreakerState::Degraded));
        let period = p.reset_timeout;
        // Table: time since the last failure -> (count, state, was it a transition).
        let table = [
            (period.saturating_sub(Duration::from_millis(1)), 4, BreakerState::Degraded, false),
            (period, 2, BreakerState::Closed, true),
            ((period * 2).saturating_sub(Duration::from_millis(1)), 2, BreakerState::Closed, false),
            (period * 2, 1, BreakerState::Closed, false),
            (period * 3, 0, BreakerState::Closed, true),
        ];
        for (after, count, state, transition) in table {
            let changed = b.refresh(T0.plus(after), &p);
            assert_eq!((b.failures(), b.state(&p)), (count, state), "after {after:?}");
            assert_eq!(changed.is_yes(), transition, "after {after:?}");
        }
        assert!(b.is_pristine());
    }

    #[test]
    fn a_new_failure_restarts_the_decay_clock() {
        let p = policy();
        let mut b = Breaker::new(T0);
        for _ in 0..3 {
            let _ = fail(&mut b, T0, &p);
        }
        let later = T0.plus(p.reset_timeout.saturating_sub(SEC));
        let _ = fail(&mut b, later, &p);
        assert_eq!(state_at(&mut b, T0.plus(p.reset_timeout), &p), BreakerState::Degraded);
        assert_eq!(b.failures(), 4);
        assert_eq!(state_at(&mut b, later.plus(p.reset_timeout), &p), BreakerState::Closed);
    }

    #[test]
    fn decay_leaves_open_and_half_open_breakers_alone() {
        let p = policy();
        let mut b = Breaker::new(T0);
        trip(&mut b, T0, &p);
        let at = T0.plus(p.reset_timeout * 100);
        assert_eq!(state_at(&mut b, at, &p), BreakerState::HalfOpen);
        assert_eq!(b.failures(), p.failure_threshold);
    }

    mod decay_properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            /// However often (or rarely) someone looks, the count at a given instant is the
            /// same, never grows without a failure, and is at most the count at the last
            /// failure halved once per whole `reset_timeout` since.
            #[test]
            fn decay_does_not_depend_on_when_it_is_read(
                failures in 1u32..5,
                looks in proptest::collection::vec(0u64..200_000, 0..12),
                end in 0u64..400_000,
            ) {
                let p = BreakerSettings { failure_threshold: 10, ..BreakerSettings::default() }
                    .validate()
                    .unwrap();
                let mut watched = Breaker::new(T0);
                for _ in 0..failures {
                    let _ = fail(&mut watched, T0, &p);
                }
                let mut unwatched = watched.clone();
                let mut looks = looks;
                looks.sort_unstable();
                let mut last = failures;
                for at in looks.into_iter().filter(|&at| at <= end) {
                    let _ = watched.refresh(T0.plus(Duration::from_millis(at)), &p);
                    prop_assert!(watched.failures() <= last);
                    last = watched.failures();
                }
                let end = T0.plus(Duration::from_millis(end));
                let _ = watched.refresh(end, &p);
                let _ = unwatched.refresh(end, &p);
                prop_assert_eq!(watched.failures(), unwatched.failures());
                let halvings = end.since(T0).as_millis() / p.reset_timeout.as_millis();
                let bound = u32::try_from(halvings).ok().and_then(|h| failures.checked_shr(h));
                prop_assert_eq!(watched.failures(), bound.unwrap_or(0));
            }
        }
    }
}
