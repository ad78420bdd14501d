//! `health-churn STATE_FILE RUN`: drives a persisted health registry through endless rounds of
//! transitions and prints `committed {round}` once each round is durable.
//!
//! The crash-recovery test kills it with SIGKILL somewhere in the middle of a round and checks
//! that the file is intact and holds every round it was told about. Each round locks a model of
//! its own ([`switchyard_e2e::lockout_key`]) and churns breakers and a credential cooldown, so
//! a kill lands between transitions of every layer.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use http::header::{HeaderValue, RETRY_AFTER};
use switchyard_core::outcome::{BodyHint, ClassifyPolicy, StatusSet, TransportFault};
use switchyard_core::resilience::HealthRegistry;
use switchyard_core::{
    CandidateKey, Clock, ManualClock, Outcome, SystemClock, UnixMillis, Upstream, Verdict, classify,
};
use switchyard_e2e::lockout_key;
use switchyard_store::{Persistence, PersistenceStatus};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, run] = args.as_slice() else {
        let _ = writeln!(std::io::stderr(), "usage: health-churn STATE_FILE RUN");
        return ExitCode::from(2);
    };
    // Real time once, so restored deadlines are in the future of whoever reads the file next;
    // from then on the rounds move the clock themselves.
    let clock = ManualClock::new(SystemClock.now());
    let registry = Arc::new(HealthRegistry::default());
    let persistence = Persistence::start(path, &registry, clock.now()).await;
    let mut stdout = std::io::stdout().lock();
    for round in 0_u64.. {
        churn(&registry, run, round, clock.now());
        persistence.flush().await;
        if let PersistenceStatus::MemoryOnly { reason } = persistence.status() {
            let _ = writeln!(std::io::stderr(), "health-churn: {reason}");
            return ExitCode::FAILURE;
        }
        if writeln!(stdout, "committed {round}").and_then(|()| stdout.flush()).is_err() {
            // Nobody is listening any more.
            return ExitCode::SUCCESS;
        }
        clock.advance(Duration::from_secs(1));
    }
    unreachable!("the rounds never end")
}

/// One round: a new hour-long lockout, breakers failing and recovering at different rates, and
/// a credential rate-limited again as soon as its last cooldown ends.
fn churn(registry: &Arc<HealthRegistry>, run: &str, round: u64, now: UnixMillis) {
    try_once(registry, &lockout_key(run, round), &response(404, Some("3600"), now), now);
    for (i, provider) in (0..).zip(["p0", "p1", "p2"]) {
        let verdict = if (round + i).is_multiple_of(3) {
            response(200, None, now)
        } else {
            connect_refused(now)
        };
        try_once(registry, &CandidateKey::new(provider, "key", "m"), &verdict, now);
    }
    let cooling = CandidateKey::new("cool", format!("key{}", round % 4), "m");
    try_once(registry, &cooling, &response(429, Some("2"), now), now);
}

/// An attempt, if the registry admits one.
fn try_once(
    registry: &Arc<HealthRegistry>,
    key: &CandidateKey,
    verdict: &Verdict,
    now: UnixMillis,
) {
    if let Ok(attempt) = registry.admit(key, now) {
        attempt.finish(verdict, now);
    }
}

/// 404 locks the model, 429 cools the credential.
fn policy() -> ClassifyPolicy {
    ClassifyPolicy { lockout_codes: StatusSet::from_iter([404]), ..ClassifyPolicy::default() }
}

fn response(status: u16, retry_after: Option<&'static str>, now: UnixMillis) -> Verdict {
    let mut headers = HeaderMap::new();
    if let Some(seconds) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    let upstream = Upstream::Response { status, headers: &headers, body: BodyHint::None };
    classify(&Outcome::new(upstream), &policy(), now)
}

fn connect_refused(now: UnixMillis) -> Verdict {
    let upstream = Upstream::Transport(TransportFault::ConnectRefused);
    classify(&Outcome::new(upstream), &policy(), now)
}
