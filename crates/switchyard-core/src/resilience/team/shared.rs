//! What the team's database holds, and how one instance's change composes with the others'.
//!
//! A shared entry is the record of one breaker, credential cooldown or model lockout, in the
//! database's time. An instance never overwrites it with its own view: it sends a *change* (a
//! failure, a success, a probe's result, a lease request) and the change is applied to the
//! entry as it is in the database at that moment, at the database's `now`, by the very state
//! machines the local layers run ([`Breaker`], [`CredentialCooldown`], [`ModelLockout`]). The
//! database half writes the result only if the entry is still the version it read (a
//! conditional update), and applies the change again to the newer entry otherwise; so changes
//! compose like increments: three instances' failures add up in one count, and the breaker
//! opens at the threshold of the sum.
//!
//! The half-open probe slot is a [`Lease`]: granted to one instance while the breaker is
//! half-open and no other live lease exists, with the probe's deadline; only its holder's
//! result moves the breaker, and a holder that dies simply lets the deadline pass.
//!
//! Invariant: applying a change returns `None` exactly when it changes nothing, so nothing is
//! written (and no one is notified) for a success on a healthy entry.

use std::time::Duration;

use super::offset::ClockOffset;
use crate::clock::UnixMillis;
use crate::ids::InstanceId;
use crate::outcome::{BreakerFault, CredentialFault};
use crate::resilience::breaker::Admission;
use crate::resilience::lockout::LockReason;
use crate::resilience::{
    Breaker, BreakerRecord, BreakerState, Changed, CredentialCooldown, CredentialKind,
    CredentialRecord, CredentialStatus, LockoutRecord, ModelLockout,
};
use crate::settings::{BreakerPolicy, CooldownPolicy, LockoutPolicy};

/// Who wrote a shared entry last, and when in the database's order: a larger version is newer,
/// across all entries (one sequence), so "everything since version N" is one query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub version: i64,
    pub recorded_by: InstanceId,
}

/// A half-open breaker's probe slot, held by one instance until `until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub holder: InstanceId,
    /// When it was granted (`None` from an instance that did not say): another instance honours
    /// it for its own `probe_timeout` from then at most (see [`super::trust`]).
    pub since: Option<UnixMillis>,
    pub until: UnixMillis,
}

/// A provider's breaker as the team shares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedBreaker {
    pub record: BreakerRecord,
    /// Only meaningful while the breaker is half-open and `until` is ahead.
    pub lease: Option<Lease>,
}

/// A credential's cooldown as the team shares it.
pub type SharedCredential = CredentialRecord;

/// A model lockout as the team shares it.
pub type SharedLockout = LockoutRecord;

/// What an instance did to a provider's breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerChange {
    /// A failure charged to the provider by an attempt that was not a probe.
    Failure(BreakerFault),
    /// An answer that did not blame the provider, from an attempt that was not a probe.
    Success,
    /// A recovery probe found a degraded provider answering: its failures are forgotten.
    Heal,
    /// Asks for the half-open probe slot.
    Lease,
    /// The lease holder's probe: the provider answers again.
    ProbeSucceeded,
    /// The lease holder's probe failed.
    ProbeFailed(BreakerFault),
    /// The lease holder's probe ended without a verdict (the client went away).
    Release,
    /// Cleared by hand, or lifted by a recovery probe through an open breaker.
    Clear,
}

/// What an instance did to a credential's cooldown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialChange {
    Failure { fault: CredentialFault, hint: Option<Duration> },
    Success,
    Heal,
    Clear,
}

/// What an instance did to a model lockout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockoutChange {
    Failure { reason: LockReason, hint: Option<Duration>, at_once: bool },
    Success,
    Heal,
    Clear,
}

impl BreakerChange {
    /// The entry after `me` made this change at `now` (the database's time) to `current`;
    /// `None` when nothing changes. A [`Self::Lease`] that is refused changes nothing: the
    /// caller tells a grant by the lease of the result.
    pub fn apply(
        self,
        current: Option<&SharedBreaker>,
        me: &InstanceId,
        now: UnixMillis,
        policy: &BreakerPolicy,
    ) -> Option<SharedBreaker> {
        // Within this instance's bounds, as it takes team entries in (see `trust`): a forged
        // row's wait or lease ends here too, so a probe can heal it.
        let current = current.map(|c| super::trust::breaker(c, me, now, policy));
        let current = current.as_ref();
        let mut breaker =
            current.map_or_else(|| Breaker::new(now), |c| Breaker::restore(&c.record, now, policy));
        let _ = breaker.refresh(now, policy);
        let half_open = breaker.state(policy) == BreakerState::HalfOpen;
        let live = current
            .and_then(|c| c.lease.clone())
            .filter(|l| half_open && super::trust::lease_live(l, now, policy.probe_timeout));
        let mine = live.as_ref().is_some_and(|l| l.holder == *me);
        let (changed, lease) = match self {
            Self::Failure(fault) => {
                (breaker.on_failure(now, policy, fault, Admission::Normal), live)
            }
            Self::Success => (breaker.on_success(now, Admission::Normal), live),
            Self::Heal => (breaker.heal(now), live),
            Self::Lease if half_open && (live.is_none() || mine) => {
                let until = now.plus(policy.probe_timeout);
                let lease = Lease { holder: me.clone(), since: Some(now), until };
                (Changed::Yes, Some(lease))
            }
            Self::ProbeSucceeded if mine => (breaker.close_after_probe(now), None),
            Self::ProbeFailed(fault) if mine => {
                (breaker.reopen_after_probe(now, policy, fault), None)
            }
            Self::Release if mine => (Changed::Yes, None),
            Self::Lease | Self::ProbeSucceeded | Self::ProbeFailed(_) | Self::Release => {
                (Changed::No, live)
            }
            Self::Clear => {
                let pristine = breaker.is_pristine() && live.is_none();
                let cleared = Breaker::new(now).record(policy);
                return (current.is_some() && !pristine)
                    .then_some(SharedBreaker { record: cleared, lease: None });
            }
        };
        changed.is_yes().then(|| SharedBreaker { record: breaker.record(policy), lease })
    }
}

impl SharedBreaker {
    /// Whether `me` holds the lease, live at `now`.
    pub fn leased_to(&self, me: &InstanceId, now: UnixMillis) -> bool {
        self.lease.as_ref().is_some_and(|l| l.holder == *me && l.until > now)
    }
}

impl CredentialChange {
    /// The entry after this change at `now` (the database's time); `None` when nothing changes.
    pub fn apply(
        self,
        current: Option<&SharedCredential>,
        now: UnixMillis,
        policy: &CooldownPolicy,
        kind: CredentialKind,
    ) -> Option<SharedCredential> {
        let mut cooldown = current.map_or_else(
            || CredentialCooldown::new(now),
            |r| CredentialCooldown::restore(r, now, policy),
        );
        let _ = cooldown.refresh(now, policy);
        let changed = match self {
            Self::Failure { fault, hint } => cooldown.on_failure(now, policy, kind, fault, hint),
            // A success with this very key shows it is not refused, whoever reported it.
            Self::Success if cooldown.status() == CredentialStatus::Invalid => {
                let record = cooldown.record();
                let accepted = CredentialRecord {
                    status: CredentialStatus::Active,
                    cooling_until: None,
                    changed_at: now,
                    ..record
                };
                return Some(accepted);
            }
            Self::Success => cooldown.on_success(now),
            Self::Heal => cooldown.heal(now),
            Self::Clear => {
                let cleared = CredentialCooldown::new(now);
                return (current.is_some() && !cooldown.is_pristine()).then(|| cleared.record());
            }
        };
        changed.is_yes().then(|| cooldown.record())
    }
}

impl LockoutChange {
    /// The entry after this change at `now` (the database's time); `None` when nothing changes.
    pub fn apply(
        self,
        current: Option<&SharedLockout>,
        now: UnixMillis,
        policy: &LockoutPolicy,
    ) -> Option<SharedLockout> {
        let mut lockout = current
            .map_or_else(|| ModelLockout::new(now), |r| ModelLockout::restore(r, now, policy));
        let _ = lockout.refresh(now, policy);
        let changed = match self {
            Self::Failure { reason, hint, at_once } => {
                lockout.on_failure(now, policy, reason, hint, at_once)
            }
            Self::Success => lockout.on_success(now),
            Self::Heal => lockout.heal(now),
            Self::Clear => {
                return (current.is_some() && !lockout.is_pristine())
                    .then(|| ModelLockout::new(now));
            }
        };
        changed.is_yes().then_some(lockout)
    }
}

/// A shared entry's instants, read in this instance's time.
pub trait InLocalTime {
    #[must_use]
    fn in_local_time(&self, offset: &ClockOffset) -> Self;
}

impl InLocalTime for SharedBreaker {
    fn in_local_time(&self, offset: &ClockOffset) -> Self {
        let record = &self.record;
        Self {
            record: BreakerRecord {
                open_until: record.open_until.map(|t| offset.to_local(t)),
                changed_at: offset.to_local(record.changed_at),
                ..record.clone()
            },
            lease: self.lease.as_ref().map(|l| Lease {
                holder: l.holder.clone(),
                since: l.since.map(|t| offset.to_local(t)),
                until: offset.to_local(l.until),
            }),
        }
    }
}

impl InLocalTime for SharedCredential {
    fn in_local_time(&self, offset: &ClockOffset) -> Self {
        Self {
            cooling_until: self.cooling_until.map(|t| offset.to_local(t)),
            changed_at: offset.to_local(self.changed_at),
            ..self.clone()
        }
    }
}

impl InLocalTime for SharedLockout {
    fn in_local_time(&self, offset: &ClockOffset) -> Self {
        Self {
            locked_until: self.locked_until.map(|t| offset.to_local(t)),
            changed_at: offset.to_local(self.changed_at),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::OutcomeKind;
    use crate::settings::BreakerSettings;

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);
    const SEC: Duration = Duration::from_secs(1);

    fn instance(name: &str) -> InstanceId {
        InstanceId::new(name)
    }

    /// The database's entry, changed by whoever sends a change: what the store does, minus SQL.
    #[derive(Default)]
    struct Table {
        breaker: Option<SharedBreaker>,
    }

    impl Table {
        fn send(&mut self, by: &str, change: BreakerChange, now: UnixMillis, p: &BreakerPolicy) {
            if let Some(next) = change.apply(self.breaker.as_ref(), &instance(by), now, p) {
                self.breaker = Some(next);
            }
        }

        fn state(&self) -> BreakerState {
            self.breaker.as_ref().map_or(BreakerState::Closed, |b| b.record.state)
        }

        fn lease(&mut self, by: &str, now: UnixMillis, p: &BreakerPolicy) -> bool {
            self.send(by, BreakerChange::Lease, now, p);
            self.breaker.as_ref().is_some_and(|b| {
                b.lease.as_ref().is_some_and(|l| l.holder.as_str() == by && l.until > now)
            })
        }
    }

    fn open_table(p: &BreakerPolicy) -> Table {
        let mut table = Table::default();
        for _ in 0..p.failure_threshold {
            table.send("a", BreakerChange::Failure(BreakerFault::Transient), T0, p);
        }
        assert_eq!(table.state(), BreakerState::Open);
        table
    }

    #[test]
    fn two_instances_at_three_of_five_open_the_breaker_at_the_fifth_failure_not_the_tenth() {
        let p = BreakerPolicy::default();
        let mut table = Table::default();
        let fail = BreakerChange::Failure(BreakerFault::Transient);
        let order = ["a", "b", "a", "b", "a"];
        for (i, by) in order.into_iter().enumerate() {
            assert_ne!(table.state(), BreakerState::Open, "open before failure {}", i + 1);
            table.send(by, fail, T0, &p);
        }
        assert_eq!(table.state(), BreakerState::Open, "the fifth failure overall opens it");
        assert_eq!(table.breaker.as_ref().unwrap().record.failures, 5);
    }

    #[test]
    fn a_success_on_a_healthy_breaker_writes_nothing() {
        let p = BreakerPolicy::default();
        assert_eq!(BreakerChange::Success.apply(None, &instance("a"), T0, &p), None);
        let healthy = SharedBreaker { record: Breaker::new(T0).record(&p), lease: None };
        assert_eq!(BreakerChange::Success.apply(Some(&healthy), &instance("a"), T0, &p), None);
    }

    #[test]
    fn only_one_instance_gets_the_half_open_lease() {
        let p = BreakerPolicy::default();
        let mut table = open_table(&p);
        let half_open = T0.plus(p.reset_timeout);
        assert!(!table.lease("b", T0, &p), "no lease while open");
        assert!(table.lease("b", half_open, &p));
        assert!(!table.lease("c", half_open, &p));
        assert!(!table.lease("a", half_open.plus(SEC), &p));
        assert!(table.lease("b", half_open.plus(SEC), &p), "the holder may ask again");
    }

    #[test]
    fn a_dead_holders_lease_frees_the_slot_at_its_deadline() {
        let p = BreakerPolicy::default();
        let mut table = open_table(&p);
        let half_open = T0.plus(p.reset_timeout);
        assert!(table.lease("a", half_open, &p));
        let deadline = half_open.plus(p.probe_timeout);
        assert!(!table.lease("b", deadline.minus(Duration::from_millis(1)), &p));
        assert!(table.lease("b", deadline, &p), "the lease ran out: b probes");
        // The dead holder's late result moves nothing.
        table.send("a", BreakerChange::ProbeSucceeded, deadline, &p);
        assert_eq!(table.state(), BreakerState::HalfOpen);
        table.send("b", BreakerChange::ProbeSucceeded, deadline, &p);
        assert_eq!(table.state(), BreakerState::Closed);
        assert!(table.breaker.as_ref().unwrap().lease.is_none());
    }

    #[test]
    fn the_holders_failed_probe_reopens_one_backoff_step_longer() {
        let p = BreakerPolicy::default();
        let mut table = open_table(&p);
        let half_open = T0.plus(p.reset_timeout);
        assert!(table.lease("c", half_open, &p));
        table.send("b", BreakerChange::ProbeFailed(BreakerFault::Timeout), half_open, &p);
        assert_eq!(table.state(), BreakerState::HalfOpen, "not b's probe");
        table.send("c", BreakerChange::ProbeFailed(BreakerFault::Timeout), half_open, &p);
        let shared = table.breaker.as_ref().unwrap();
        assert_eq!((shared.record.state, shared.record.reopens), (BreakerState::Open, 1));
        assert_eq!(shared.record.open_until, Some(half_open.plus(p.reset_timeout * 2)));
        assert!(shared.lease.is_none());
    }

    #[test]
    fn a_released_lease_lets_another_instance_probe_at_once() {
        let p = BreakerPolicy::default();
        let mut table = open_table(&p);
        let half_open = T0.plus(p.reset_timeout);
        assert!(table.lease("a", half_open, &p));
        table.send("b", BreakerChange::Release, half_open, &p);
        assert!(!table.lease("c", half_open, &p), "only the holder releases");
        table.send("a", BreakerChange::Release, half_open, &p);
        assert!(table.lease("c", half_open, &p));
    }

    #[test]
    fn a_cleared_breaker_is_pristine_and_clearing_nothing_writes_nothing() {
        let p = BreakerPolicy::default();
        let table = open_table(&p);
        let cleared =
            BreakerChange::Clear.apply(table.breaker.as_ref(), &instance("a"), T0, &p).unwrap();
        assert_eq!(cleared.record.state, BreakerState::Closed);
        assert!(Breaker::restore(&cleared.record, T0, &p).is_pristine());
        assert_eq!(BreakerChange::Clear.apply(Some(&cleared), &instance("a"), T0, &p), None);
        assert_eq!(BreakerChange::Clear.apply(None, &instance("a"), T0, &p), None);
    }

    #[test]
    fn concurrent_rate_limits_on_a_shared_key_bench_it_once() {
        let p = CooldownPolicy::default();
        let rate_limit =
            CredentialChange::Failure { fault: CredentialFault::RateLimit, hint: Some(10 * SEC) };
        let first = rate_limit.apply(None, T0, &p, CredentialKind::ApiKey).unwrap();
        assert_eq!(first.cooling_until, Some(T0.plus(10 * SEC)));
        assert_eq!(first.backoff_level, 1);
        let later = T0.plus(2 * SEC);
        assert_eq!(rate_limit.apply(Some(&first), later, &p, CredentialKind::ApiKey), None);
        let after = T0.plus(10 * SEC);
        let second = rate_limit.apply(Some(&first), after, &p, CredentialKind::ApiKey).unwrap();
        assert_eq!(second.backoff_level, 2, "the backoff climbs across the team");
    }

    #[test]
    fn a_success_with_a_key_the_team_calls_refused_clears_the_report() {
        let p = CooldownPolicy::default();
        let auth = CredentialChange::Failure { fault: CredentialFault::Auth, hint: None };
        let invalid = auth.apply(None, T0, &p, CredentialKind::ApiKey).unwrap();
        assert_eq!(invalid.status, CredentialStatus::Invalid);
        let later = T0.plus(SEC);
        let cleared =
            CredentialChange::Success.apply(Some(&invalid), later, &p, CredentialKind::ApiKey);
        let cleared = cleared.expect("a change the team hears of");
        assert_eq!((cleared.status, cleared.cooling_until), (CredentialStatus::Active, None));
    }

    #[test]
    fn a_lockout_counts_failures_from_every_instance_toward_one_threshold() {
        let p = crate::settings::LockoutSettings { failure_threshold: 3, ..Default::default() }
            .validate()
            .unwrap();
        let reason = LockReason { kind: OutcomeKind::ModelUnavailable, status: Some(404) };
        let fail = LockoutChange::Failure { reason, hint: None, at_once: false };
        let mut entry = None;
        for _ in 0..2 {
            entry = fail.apply(entry.as_ref(), T0, &p).or(entry);
            assert!(!entry.as_ref().unwrap().is_locked(T0));
        }
        entry = fail.apply(entry.as_ref(), T0, &p).or(entry);
        assert!(entry.as_ref().unwrap().is_locked(T0), "the third failure, from anyone, locks");
        assert_eq!(LockoutChange::Success.apply(None, T0, &p), None);
    }

    #[test]
    fn shared_deadlines_read_in_a_clock_five_minutes_behind() {
        let p = BreakerPolicy::default();
        let table = open_table(&p);
        let mut offset = ClockOffset::default();
        // The database is five minutes ahead of this instance.
        let five = Duration::from_secs(300);
        offset.observe(T0, T0.plus(five), T0);
        let local = table.breaker.as_ref().unwrap().in_local_time(&offset);
        assert_eq!(local.record.open_until, Some(T0.minus(five).plus(p.reset_timeout)));
        let cooling = CredentialRecord {
            status: CredentialStatus::Cooling,
            cooling_until: Some(T0.plus(10 * SEC)),
            backoff_level: 1,
            last_error: None,
            changed_at: T0,
        };
        let local = cooling.in_local_time(&offset);
        assert_eq!(local.cooling_until.unwrap().since(T0.minus(five)), 10 * SEC);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        #[derive(Clone, Copy, Debug)]
        enum Step {
            Fail(usize),
            Succeed(usize),
            Wait(u64),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                4 => (0usize..3).prop_map(Step::Fail),
                2 => (0usize..3).prop_map(Step::Succeed),
                1 => (0u64..20_000).prop_map(Step::Wait),
            ]
        }

        proptest! {
            /// Three instances sending their failures and successes to one shared breaker end
            /// exactly where one breaker that saw all of their traffic ends: the team behaves
            /// as one proxy, whoever happens to see each outcome.
            #[test]
            fn a_shared_breaker_fed_by_three_instances_behaves_like_one_breaker(
                steps in proptest::collection::vec(step(), 0..60),
            ) {
                let p = BreakerSettings { failure_threshold: 5, reset_timeout_ms: 5_000, ..Default::default() }
                    .validate()
                    .unwrap();
                let names = ["a", "b", "c"].map(instance);
                let mut shared: Option<SharedBreaker> = None;
                let mut alone = Breaker::new(T0);
                let mut now = T0;
                for step in steps {
                    let _ = alone.refresh(now, &p);
                    let (by, change) = match step {
                        Step::Wait(ms) => {
                            now = now.plus(Duration::from_millis(ms));
                            continue;
                        }
                        Step::Fail(by) => {
                            let _ = alone.on_failure(now, &p, BreakerFault::Transient, Admission::Normal);
                            (by, BreakerChange::Failure(BreakerFault::Transient))
                        }
                        Step::Succeed(by) => {
                            let _ = alone.on_success(now, Admission::Normal);
                            (by, BreakerChange::Success)
                        }
                    };
                    if let Some(next) = change.apply(shared.as_ref(), &names[by], now, &p) {
                        shared = Some(next);
                    }
                    let mut seen = shared.as_ref().map_or_else(
                        || Breaker::new(now),
                        |s| Breaker::restore(&s.record, now, &p),
                    );
                    let _ = seen.refresh(now, &p);
                    prop_assert_eq!(seen.state(&p), alone.state(&p));
                    prop_assert_eq!(seen.failures(), alone.failures());
                }
            }

            /// However the instances interleave their lease requests over time, no two hold a
            /// live lease at once.
            #[test]
            fn no_two_instances_ever_hold_a_live_lease_at_once(
                asks in proptest::collection::vec((0usize..3, 0u64..3_000), 1..40),
            ) {
                let p = BreakerSettings { probe_timeout_ms: 1_000, ..Default::default() }
                    .validate()
                    .unwrap();
                let mut table = open_table(&p);
                let names = ["a", "b", "c"];
                let mut now = T0.plus(p.reset_timeout);
                let mut holder: Option<(usize, UnixMillis)> = None;
                for (by, wait) in asks {
                    now = now.plus(Duration::from_millis(wait));
                    let granted = table.lease(names[by], now, &p);
                    let live = holder.filter(|(_, until)| *until > now);
                    if let Some((held_by, _)) = live {
                        prop_assert!(!granted || held_by == by, "{} took {}'s live lease", names[by], names[held_by]);
                    } else {
                        prop_assert!(granted, "a free slot was refused");
                    }
                    if granted {
                        holder = Some((by, now.plus(p.probe_timeout)));
                    }
                }
            }
        }
    }
}
