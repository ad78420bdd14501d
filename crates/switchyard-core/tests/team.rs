//! Team mode through the registry's public API: three registries joined to one
//! simulated database (the shared entries and their change rules from `team::shared`, minus
//! SQL and the network), each on a clock of its own.
//!
//! What the real sync task adds (`PostgreSQL`, `LISTEN`/`NOTIFY`, reconnects) is tested with a real
//! database in `crates/switchyard/tests/team.rs`; here the rules themselves: what a registry
//! sends, that what it receives is not sent back, that a failure count is the team's, and that
//! a half-open probe needs the lease.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use switchyard_core::outcome::{BodyHint, ClassifyPolicy, Outcome, Upstream, classify};
use switchyard_core::resilience::team::link::TeamTarget;
use switchyard_core::resilience::team::shared::InLocalTime;
use switchyard_core::resilience::team::{
    ClockOffset, SharedBreaker, SharedCredential, TeamInbox, TeamLink, TeamOp,
};
use switchyard_core::resilience::{BreakerState, HealthRegistry, SkipReason};
use switchyard_core::settings::BreakerSettings;
use switchyard_core::{CandidateKey, InstanceId, ProviderId, UnixMillis, Verdict};

const T0: UnixMillis = UnixMillis(1_800_000_000_000);
const SEC: Duration = Duration::from_secs(1);

fn status(code: u16) -> Verdict {
    let headers = HeaderMap::new();
    let upstream = Upstream::Response { status: code, headers: &headers, body: BodyHint::None };
    classify(&Outcome::new(upstream), &ClassifyPolicy::default(), T0)
}

fn rate_limited(secs: u64) -> Verdict {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", secs.to_string().parse().unwrap());
    let upstream = Upstream::Response { status: 429, headers: &headers, body: BodyHint::None };
    let policy =
        ClassifyPolicy { lockout_codes: [404].into_iter().collect(), ..ClassifyPolicy::default() };
    classify(&Outcome::new(upstream), &policy, T0)
}

fn key() -> CandidateKey {
    CandidateKey::new("openai", "main", "gpt-4o")
}

/// One instance: its registry, its end of the link, its clock's distance from the database's.
struct Member {
    name: InstanceId,
    registry: Arc<HealthRegistry>,
    inbox: TeamInbox,
    /// Database minus local.
    skew_ms: i64,
    /// The last of its own changes the database has applied: what a delivered entry includes.
    covered: std::cell::Cell<u64>,
}

impl Member {
    fn local(&self, db: UnixMillis) -> UnixMillis {
        UnixMillis(db.0.saturating_add_signed(-self.skew_ms))
    }

    fn offset(&self) -> ClockOffset {
        let mut offset = ClockOffset::default();
        offset.observe(self.local(T0), T0, self.local(T0));
        offset
    }
}

/// The team's database: the shared entries, by the same names on every member (one config).
#[derive(Default)]
struct Database {
    breakers: HashMap<ProviderId, SharedBreaker>,
    credentials: HashMap<String, SharedCredential>,
    changed_by: HashMap<String, InstanceId>,
}

struct Team {
    members: Vec<Member>,
    db: Database,
}

impl Team {
    fn new(skews_ms: &[i64]) -> Self {
        let policy = BreakerSettings {
            reset_timeout_ms: 10_000,
            probe_timeout_ms: 5_000,
            ..Default::default()
        }
        .validate()
        .unwrap();
        let members = skews_ms
            .iter()
            .enumerate()
            .map(|(i, &skew_ms)| {
                let name = InstanceId::new(["a", "b", "c"][i]);
                let registry = Arc::new(HealthRegistry::default());
                registry.set_default_breaker_policy(policy.clone());
                let (link, inbox) = TeamLink::new(name.clone(), 64);
                registry.join_team(link).unwrap();
                Member { name, registry, inbox, skew_ms, covered: std::cell::Cell::new(0) }
            })
            .collect();
        Self { members, db: Database::default() }
    }

    /// What the sync tasks do: every member's queued changes applied to the database at
    /// `db_now`, and every changed entry delivered to every member (the writer included, as
    /// its write's answer).
    fn sync(&mut self, db_now: UnixMillis) -> usize {
        let mut sent = 0;
        for i in 0..self.members.len() {
            while let Ok(op) = self.members[i].inbox.ops.try_recv() {
                sent += 1;
                self.apply(i, &op, db_now);
            }
        }
        sent
    }

    fn apply(&mut self, by: usize, op: &TeamOp, db_now: UnixMillis) {
        let member = &self.members[by];
        member.covered.set(op.seq);
        let at = op.db_instant(db_now, member.local(db_now));
        match &op.target {
            TeamTarget::Breaker { provider, change } => {
                let policy = member.registry.breaker_policy(provider);
                let current = self.db.breakers.get(provider);
                if let Some(next) = change.apply(current, &member.name, at, &policy) {
                    self.db.breakers.insert(provider.clone(), next);
                    self.db.changed_by.insert(provider.to_string(), member.name.clone());
                }
                self.deliver_breaker(provider, db_now);
            }
            TeamTarget::Credential { key, change } => {
                let policy = member.registry.cooldown_policy();
                let kind = member.registry.credential_kind(key);
                let name = format!("{}/{}", key.provider, key.credential);
                let current = self.db.credentials.get(&name);
                if let Some(next) = change.apply(current, at, &policy, kind) {
                    self.db.credentials.insert(name.clone(), next);
                    self.db.changed_by.insert(name.clone(), member.name.clone());
                }
                let shared = self.db.credentials.get(&name).cloned();
                let by = self.db.changed_by.get(&name).cloned();
                if let (Some(shared), Some(by)) = (shared, by) {
                    for m in &self.members {
                        let local = shared.in_local_time(&m.offset());
                        m.registry.apply_shared_credential(
                            std::slice::from_ref(key),
                            &local,
                            &by,
                            m.covered.get(),
                            m.local(db_now),
                        );
                    }
                }
            }
            TeamTarget::Lockout { .. } => {}
        }
    }

    fn deliver_breaker(&self, provider: &ProviderId, db_now: UnixMillis) {
        let (Some(shared), Some(by)) =
            (self.db.breakers.get(provider), self.db.changed_by.get(provider.as_str()))
        else {
            return;
        };
        for m in &self.members {
            let local = shared.in_local_time(&m.offset());
            m.registry.apply_shared_breaker(
                std::slice::from_ref(provider),
                &local,
                by,
                m.covered.get(),
                m.local(db_now),
            );
        }
    }

    fn registry(&self, i: usize) -> &Arc<HealthRegistry> {
        &self.members[i].registry
    }

    fn state(&self, i: usize, db_now: UnixMillis) -> BreakerState {
        let member = &self.members[i];
        member.registry.breaker_state(&"openai".into(), member.local(db_now))
    }
}

#[test]
fn failures_spread_over_three_instances_open_every_breaker_at_the_fifth() {
    let mut team = Team::new(&[0, 0, 0]);
    for n in 1..=5 {
        let by = n % 3;
        team.registry(by).admit(&key(), T0).unwrap().finish(&status(500), T0);
        team.sync(T0);
        let want = match n {
            1 | 2 => BreakerState::Closed,
            3 | 4 => BreakerState::Degraded,
            _ => BreakerState::Open,
        };
        for i in 0..3 {
            assert_eq!(team.state(i, T0), want, "instance {i} after failure {n}");
        }
    }
    let snapshot = team.registry(0).snapshot(T0);
    assert_eq!(snapshot.breakers[0].failures, 5);
    assert_eq!(snapshot.breakers[0].recorded_by.as_ref().map(InstanceId::as_str), Some("c"));
}

#[test]
fn a_success_on_a_healthy_breaker_sends_nothing_to_the_team() {
    let mut team = Team::new(&[0]);
    for _ in 0..100 {
        team.registry(0).admit(&key(), T0).unwrap().finish(&status(200), T0);
    }
    assert_eq!(team.sync(T0), 0);
}

#[test]
fn what_comes_from_the_team_is_not_sent_back() {
    let mut team = Team::new(&[0, 0]);
    team.registry(0).admit(&key(), T0).unwrap().finish(&status(500), T0);
    assert_eq!(team.sync(T0), 1, "the failure itself");
    assert_eq!(team.sync(T0), 0, "its delivery to both instances echoes nothing");
    assert_eq!(team.registry(1).snapshot(T0).breakers[0].failures, 1);
}

#[test]
fn a_rate_limit_seen_by_one_instance_benches_the_key_on_the_others() {
    let mut team = Team::new(&[0, 0, 0]);
    team.registry(0).admit(&key(), T0).unwrap().finish(&rate_limited(30), T0);
    team.sync(T0);
    for i in 1..3 {
        assert_eq!(
            team.registry(i).eligible(&key(), T0),
            Err(SkipReason::CredentialCooling { retry_in_ms: 30_000 }),
            "instance {i}"
        );
        let view = &team.registry(i).snapshot(T0).credentials[0];
        assert_eq!(view.recorded_by.as_ref().map(InstanceId::as_str), Some("a"));
    }
}

#[test]
fn an_instance_five_minutes_off_benches_for_the_length_the_upstream_asked() {
    let five_minutes = 300_000;
    // b's clock is five minutes behind the database, c's five minutes ahead.
    let mut team = Team::new(&[0, five_minutes, -five_minutes]);
    let c_now = team.members[2].local(T0);
    team.registry(2).admit(&key(), c_now).unwrap().finish(&rate_limited(30), c_now);
    team.sync(T0);
    for i in 0..3 {
        let local_now = team.members[i].local(T0);
        assert_eq!(
            team.registry(i).eligible(&key(), local_now),
            Err(SkipReason::CredentialCooling { retry_in_ms: 30_000 }),
            "instance {i}, by its own clock"
        );
        let later = team.members[i].local(T0.plus(30 * SEC));
        assert_eq!(team.registry(i).eligible(&key(), later), Ok(()), "instance {i}");
    }
}

/// Opens the shared breaker from instance a and moves every clock to its half-open moment.
fn half_open_team() -> (Team, UnixMillis) {
    let mut team = Team::new(&[0, 0, 0]);
    for _ in 0..5 {
        team.registry(0).admit(&key(), T0).unwrap().finish(&status(500), T0);
    }
    team.sync(T0);
    let half_open = T0.plus(10 * SEC);
    for i in 0..3 {
        assert_eq!(team.state(i, half_open), BreakerState::HalfOpen);
    }
    (team, half_open)
}

#[test]
fn a_remote_lease_takes_the_probe_slot_until_its_deadline() {
    let (mut team, at) = half_open_team();
    // a holds the lease: what the database says after granting it.
    let provider: ProviderId = "openai".into();
    let shared = team.db.breakers.get(&provider).unwrap().clone();
    let leased = BreakerLease::grant(&shared, "a", at, 5 * SEC);
    team.db.breakers.insert(provider.clone(), leased);
    team.db.changed_by.insert("openai".into(), InstanceId::new("a"));
    team.deliver_breaker(&provider, at);

    let b = team.registry(1);
    assert_eq!(b.eligible(&key(), at), Err(SkipReason::BreakerProbing { retry_in_ms: 5_000 }));
    assert!(b.snapshot(at).breakers[0].probing_elsewhere);
    let deadline = at.plus(5 * SEC);
    assert_eq!(b.eligible(&key(), deadline), Ok(()), "the slot is free at the lease's deadline");
    assert!(team.registry(0).admit(&key(), at).unwrap().is_probe(), "a's own slot is its own");
}

#[test]
fn the_lease_holders_probe_closes_every_breaker_and_a_stranger_s_result_does_not() {
    let (mut team, at) = half_open_team();
    let provider: ProviderId = "openai".into();
    let shared = team.db.breakers.get(&provider).unwrap().clone();
    team.db.breakers.insert(provider.clone(), BreakerLease::grant(&shared, "b", at, 5 * SEC));
    // c was never granted the lease: its probe result (a team that was unreachable when it
    // probed) moves only itself.
    let probe = team.registry(2).admit(&key(), at).unwrap();
    assert!(probe.is_probe());
    let mut leased = team.registry(1).admit(&key(), at).unwrap();
    // What a granted lease looks like to the attempt: the sync task answered "granted".
    tokio_lease(&mut leased, &mut team.members[1].inbox, at);
    probe.finish(&status(200), at);
    assert_eq!(team.sync(at), 0, "c had no lease: nothing goes to the team");
    assert_eq!(team.state(0, at), BreakerState::HalfOpen, "a still waits for the holder");
    leased.finish(&status(200), at);
    team.sync(at);
    for i in 0..3 {
        assert_eq!(team.state(i, at), BreakerState::Closed, "instance {i}");
    }
}

/// Grants `holder` the lease on `shared` as the database would.
struct BreakerLease;

impl BreakerLease {
    fn grant(
        shared: &SharedBreaker,
        holder: &str,
        at: UnixMillis,
        wait: Duration,
    ) -> SharedBreaker {
        let policy = BreakerSettings {
            probe_timeout_ms: switchyard_core::clock::millis(wait),
            reset_timeout_ms: 10_000,
            ..Default::default()
        }
        .validate()
        .unwrap();
        switchyard_core::resilience::team::BreakerChange::Lease
            .apply(Some(shared), &InstanceId::new(holder), at, &policy)
            .expect("granted")
    }
}

/// Runs `attempt.lease` against a sync task that grants it.
fn tokio_lease(
    attempt: &mut switchyard_core::resilience::Attempt,
    inbox: &mut TeamInbox,
    at: UnixMillis,
) {
    inbox.control().set_online(true);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    runtime.block_on(async {
        let granted = async {
            let Some(switchyard_core::resilience::team::LeaseMessage::Ask(request)) =
                inbox.leases.recv().await
            else {
                panic!("a lease is asked for")
            };
            request.answer.send(switchyard_core::resilience::team::LeaseAnswer::Granted).unwrap();
        };
        let (leased, ()) = tokio::join!(attempt.lease(at), granted);
        assert_eq!(leased, Ok(()));
    });
}

#[test]
fn an_older_team_entry_does_not_replace_a_newer_local_state() {
    let mut team = Team::new(&[0]);
    let a = Arc::clone(team.registry(0));
    let provider = ProviderId::new("openai");
    // The team's entry as it stood before a's failures reached it: degraded.
    let policy = a.breaker_policy(&provider);
    let mut older = None;
    for _ in 0..3 {
        let fail = switchyard_core::resilience::team::BreakerChange::Failure(
            switchyard_core::outcome::BreakerFault::Transient,
        );
        older = fail.apply(older.as_ref(), &InstanceId::new("b"), T0, &policy).or(older);
    }
    let older = older.unwrap();
    assert_eq!(older.record.state, BreakerState::Degraded);
    // a opens the breaker alone; its changes are queued, not yet in the database.
    for _ in 0..5 {
        a.admit(&key(), T0).unwrap().finish(&status(500), T0);
    }
    assert_eq!(a.breaker_state(&provider, T0), BreakerState::Open);
    let queued = std::iter::from_fn(|| team.members[0].inbox.ops.try_recv().ok()).count();
    assert_eq!(queued, 5);
    // An announcement of the older entry (it includes none of a's changes) arrives first.
    let b = InstanceId::new("b");
    a.apply_shared_breaker(std::slice::from_ref(&provider), &older, &b, 0, T0);
    assert_eq!(a.breaker_state(&provider, T0), BreakerState::Open, "not taken back to degraded");
    // One that includes a's last change is taken; a resync replaces whatever is here.
    a.apply_shared_breaker(std::slice::from_ref(&provider), &older, &b, 5, T0);
    assert_eq!(a.breaker_state(&provider, T0), BreakerState::Degraded);
}
