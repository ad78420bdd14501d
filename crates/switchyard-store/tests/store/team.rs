//! The team's database against a real `PostgreSQL`: conditional writes, the salt,
//! announcements, catching up, and two registries kept in step by their sync tasks.
//!
//! Ignored by default: `scripts/team-test` starts a throwaway cluster and runs them with
//! `SWITCHYARD_TEST_PG` set to its URL (without a database; each test creates its own).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sqlx::Connection as _;
use switchyard_core::resilience::team::{
    BreakerChange, SharedBreaker, TeamIdentities, TeamProvider,
};
use switchyard_core::resilience::{BreakerState, CredentialStatus, HealthRegistry};
use switchyard_core::settings::BreakerPolicy;
use switchyard_core::{Clock, CredentialKey, InstanceId, ManualClock, ProviderId, SystemClock};
use switchyard_store::StoreError;
use switchyard_store::team::{
    Breakers, CHANNEL, Identities, Team, TeamDatabase, TeamOptions, TeamUrl,
};

use crate::fixture::{T0, attempt, connect_refused, key, response};

/// Bounds every wait for the team to converge; a watchdog, not a synchronisation.
const CONVERGE: Duration = Duration::from_secs(10);

/// A database of its own on the test cluster.
async fn fresh_database() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::env::var("SWITCHYARD_TEST_PG")
        .expect("SWITCHYARD_TEST_PG: run the PostgreSQL tests with scripts/team-test");
    let name = format!("store_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let mut admin = sqlx::PgConnection::connect(&format!("{base}/postgres")).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    format!("{base}/{name}")
}

async fn database(url: &str) -> TeamDatabase {
    TeamDatabase::connect(&TeamUrl::parse(url).unwrap()).await.unwrap()
}

fn me(name: &str) -> InstanceId {
    InstanceId::new(name)
}

fn provider() -> TeamProvider {
    TeamProvider::from_base_url("https://api.example/v1")
}

#[test]
fn a_url_that_is_not_postgres_is_refused_without_being_repeated() {
    for url in ["mysql://root:hunter2@db/x", "hunter2", "sk-proj-abcdefgh", "postgres://a:b@[::1"] {
        let error = TeamUrl::parse(url).unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, StoreError::Team(_)), "{text}");
        assert!(!text.contains("hunter2") && !text.contains("sk-proj"), "{text}");
        assert!(text.contains("postgres://user:password@host"), "says what to write: {text}");
    }
    let parsed = TeamUrl::parse("postgresql://u:hunter2@db.example:5432/team?sslmode=require");
    assert!(!format!("{parsed:?}").contains("hunter2"));
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/team-test"]
async fn a_write_succeeds_only_on_the_version_it_read() {
    let db = database(&fresh_database().await).await;
    let policy = BreakerPolicy::default();
    let (now, none) = db.read::<Breakers>(&provider()).await.unwrap();
    assert!(none.is_none());
    let failed = BreakerChange::Failure(switchyard_core::outcome::BreakerFault::Transient)
        .apply(None, &me("a"), now, &policy)
        .unwrap();
    let first = db.write::<Breakers>(&provider(), &failed, &me("a"), None).await.unwrap();
    let first = first.expect("a new entry is written");
    assert_eq!(
        db.write::<Breakers>(&provider(), &failed, &me("b"), None).await.unwrap(),
        None,
        "b thought it did not exist yet: refused"
    );
    let second = db.write::<Breakers>(&provider(), &failed, &me("b"), Some(first)).await.unwrap();
    assert!(second.is_some_and(|v| v > first), "{second:?} after {first}");
    assert_eq!(
        db.write::<Breakers>(&provider(), &failed, &me("c"), Some(first)).await.unwrap(),
        None
    );
    let (_, stored) = db.read::<Breakers>(&provider()).await.unwrap();
    let stored = stored.unwrap();
    assert_eq!(stored.value, failed);
    assert_eq!((stored.stamp.version, stored.stamp.recorded_by.as_str()), (second.unwrap(), "b"));
    db.close().await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/team-test"]
async fn the_salt_is_created_once_for_every_instance() {
    let url = fresh_database().await;
    let (a, b) = (database(&url).await, database(&url).await);
    let (salt_a, salt_b) = tokio::join!(a.salt(), b.salt());
    let salt = salt_a.unwrap();
    assert_eq!(salt.len(), 32);
    assert_eq!(salt, salt_b.unwrap());
    assert_eq!(database(&url).await.salt().await.unwrap(), salt);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/team-test"]
async fn every_write_is_announced_with_its_row_and_found_by_a_catch_up() {
    let url = fresh_database().await;
    let db = database(&url).await;
    let mut listener = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    listener.listen(CHANNEL).await.unwrap();
    let (now, _) = db.read::<Breakers>(&provider()).await.unwrap();
    let shared = SharedBreaker {
        record: switchyard_core::resilience::Breaker::new(now).record(&BreakerPolicy::default()),
        lease: None,
    };
    let version =
        db.write::<Breakers>(&provider(), &shared, &me("a"), None).await.unwrap().unwrap();
    // A lost race is not announced.
    assert_eq!(db.write::<Breakers>(&provider(), &shared, &me("b"), None).await.unwrap(), None);
    let note = tokio::time::timeout(CONVERGE, listener.recv()).await.unwrap().unwrap();
    let payload: serde_json::Value = serde_json::from_str(note.payload()).unwrap();
    assert_eq!(payload["table"], "team_breakers");
    assert_eq!(payload["row"]["version"], version);
    assert_eq!(payload["row"]["recorded_by"], "a");
    let quiet = tokio::time::timeout(Duration::from_millis(200), listener.recv()).await;
    assert!(quiet.is_err(), "one write, one announcement: {quiet:?}");
    let caught = db.since::<Breakers>(version - 1).await.unwrap();
    assert_eq!(caught.len(), 1);
    assert!(db.since::<Breakers>(version).await.unwrap().is_empty());
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/team-test"]
async fn members_are_the_instances_seen_lately() {
    let db = database(&fresh_database().await).await;
    db.heartbeat(&me("a"), "0.1.0").await.unwrap();
    db.heartbeat(&me("b"), "0.2.0").await.unwrap();
    let members = db.members(Duration::from_secs(60)).await.unwrap();
    let seen: Vec<(&str, &str)> =
        members.iter().map(|m| (m.id.as_str(), m.version.as_str())).collect();
    assert_eq!(seen, [("a", "0.1.0"), ("b", "0.2.0")]);
    assert!(members.iter().all(|m| m.seen_ago < Duration::from_secs(5)));
    assert!(db.members(Duration::ZERO).await.unwrap().is_empty());
}

/// One instance: a registry on `clock` in a team at `url`. Every instance names the provider
/// `openai` (base URL `https://api.example/v1`) and its one key `main`, with the same secret.
fn instance(url: &str, name: &str, clock: Arc<dyn Clock>) -> (Arc<HealthRegistry>, Team) {
    let registry = Arc::new(HealthRegistry::default());
    let identities: Identities = Arc::new(|salt: &[u8]| {
        // The real keyed hash lives with the secrets (switchyard-secrets); any function of the
        // salt that every instance shares stands in for it here.
        let hash: Arc<str> = format!("hash-{}", salt.len()).into();
        TeamIdentities::new(
            [(ProviderId::new("openai"), provider())],
            [(CredentialKey { provider: "openai".into(), credential: "main".into() }, hash)],
        )
    });
    let mut options = TeamOptions::new(me(name), "test");
    options.heartbeat = Duration::from_millis(200);
    options.catch_up = Duration::from_millis(300);
    let team = Team::start(
        TeamUrl::parse(url).unwrap(),
        options,
        Arc::clone(&registry),
        identities,
        clock,
    )
    .unwrap();
    (registry, team)
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "not within {CONVERGE:?}: {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn connected(team: &Team) {
    let mut status = team.watch_status();
    tokio::time::timeout(CONVERGE, status.wait_for(|s| s.connected)).await.unwrap().unwrap();
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/team-test"]
async fn a_rate_limit_recorded_by_one_instance_cools_the_key_on_the_other() {
    let url = fresh_database().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (a, team_a) = instance(&url, "a", Arc::clone(&clock));
    let (b, team_b) = instance(&url, "b", Arc::clone(&clock));
    connected(&team_a).await;
    connected(&team_b).await;
    let k = key("openai", "main", "gpt-4o");
    attempt(&a, &k, &response(429, Some("30"), clock.now()), clock.now());
    until("b sees the key cooling", || {
        b.snapshot(clock.now())
            .credentials
            .iter()
            .any(|c| c.status == CredentialStatus::Cooling && c.recorded_by == Some(me("a")))
    })
    .await;
    until("b's heartbeat lists both instances", || {
        let members = team_b.status().members;
        members.iter().map(|m| m.id.as_str()).collect::<Vec<_>>() == ["a", "b"]
    })
    .await;
    team_a.shutdown().await;
    team_b.shutdown().await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/team-test"]
async fn failures_of_two_instances_open_the_breaker_at_the_shared_threshold() {
    let url = fresh_database().await;
    // Manual clocks that never move: nothing decays between failures.
    let clock = ManualClock::new(T0);
    let (a, team_a) = instance(&url, "a", Arc::new(clock.clone()));
    let (b, team_b) = instance(&url, "b", Arc::new(clock.clone()));
    connected(&team_a).await;
    connected(&team_b).await;
    let k = key("openai", "main", "gpt-4o");
    let openai = ProviderId::new("openai");
    for n in 1..=5u32 {
        let by = if n % 2 == 1 { &a } else { &b };
        attempt(by, &k, &connect_refused(T0), T0);
        until(&format!("both count {n} failures"), || {
            [&a, &b].iter().all(|r| {
                r.snapshot(T0).breakers.iter().any(|v| v.provider == openai && v.failures == n)
            })
        })
        .await;
        let want = if n < 5 { BreakerState::Degraded } else { BreakerState::Open };
        if n >= 3 {
            assert_eq!(a.breaker_state(&openai, T0), want, "a after failure {n}");
            assert_eq!(b.breaker_state(&openai, T0), want, "b after failure {n}");
        }
    }
    team_a.shutdown().await;
    team_b.shutdown().await;
}
