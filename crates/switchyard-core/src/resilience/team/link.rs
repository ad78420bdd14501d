//! The registry's end of the team's sync task: changes go out without waiting, and a half-open
//! probe asks for its lease with a deadline.
//!
//! Invariants:
//! - Sending a change never blocks and never fails the request: the queue is bounded, and a
//!   change that finds it full is counted and dropped (the team then learns that entry's state
//!   from this instance's next change of it; the local registry has it anyway).
//! - A lease is waited for at most [`LEASE_WAIT`]. No answer by then is a refusal: the request
//!   moves on to its next candidate. While the sync task says the database is unreachable no
//!   one waits at all: the instance decides alone, as it would without a team.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::shared::{BreakerChange, CredentialChange, LockoutChange};
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, InstanceId, ProviderId};

/// The longest a request waits for a half-open probe's lease.
pub const LEASE_WAIT: Duration = Duration::from_millis(50);

/// What a change is about, in this instance's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeamTarget {
    Breaker { provider: ProviderId, change: BreakerChange },
    Credential { key: CredentialKey, change: CredentialChange },
    Lockout { key: CandidateKey, change: LockoutChange },
}

/// One change, as the registry sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamOp {
    pub target: TeamTarget,
    /// When it happened, on this instance's clock.
    pub at: UnixMillis,
}

impl TeamOp {
    /// The database instant the change happened at: the database's `now` less the time the
    /// change waited here (measured on one clock, so skew does not enter). A change that waited
    /// out an outage is applied as of when it happened, so its deadlines are not stretched.
    pub fn db_instant(&self, db_now: UnixMillis, local_now: UnixMillis) -> UnixMillis {
        db_now.minus(local_now.since(self.at))
    }
}

/// The answer to a lease request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseAnswer {
    /// This instance holds the probe slot until the probe's deadline.
    Granted,
    /// Another instance holds it, the breaker is not half-open in the team's eyes, or no answer
    /// came in time: try the next candidate.
    Refused,
    /// The database cannot be reached: decide alone.
    Unavailable,
}

/// A lease request, as the sync task receives it.
#[derive(Debug)]
pub struct LeaseRequest {
    pub provider: ProviderId,
    pub at: UnixMillis,
    /// Closed when the requester stopped waiting: a lease granted after that must be released.
    pub answer: oneshot::Sender<LeaseAnswer>,
}

#[derive(Debug)]
struct LinkState {
    me: InstanceId,
    online: AtomicBool,
    dropped: AtomicU64,
}

/// The registry's end: cheap to clone.
#[derive(Clone, Debug)]
pub struct TeamLink {
    ops: mpsc::Sender<TeamOp>,
    leases: mpsc::Sender<LeaseRequest>,
    state: Arc<LinkState>,
}

/// The sync task's end.
#[derive(Debug)]
pub struct TeamInbox {
    pub ops: mpsc::Receiver<TeamOp>,
    pub leases: mpsc::Receiver<LeaseRequest>,
    state: Arc<LinkState>,
}

impl TeamLink {
    /// A link for instance `me` whose queue holds `capacity` changes; offline until the sync
    /// task says otherwise.
    pub fn new(me: InstanceId, capacity: usize) -> (Self, TeamInbox) {
        let (ops, op_queue) = mpsc::channel(capacity.max(1));
        let (leases, lease_queue) = mpsc::channel(64);
        let state =
            Arc::new(LinkState { me, online: AtomicBool::new(false), dropped: AtomicU64::new(0) });
        let inbox = TeamInbox { ops: op_queue, leases: lease_queue, state: Arc::clone(&state) };
        (Self { ops, leases, state }, inbox)
    }

    /// This instance's name in the team.
    pub fn me(&self) -> &InstanceId {
        &self.state.me
    }

    /// Queues a change for the database; never waits.
    pub fn send(&self, op: TeamOp) {
        if self.ops.try_send(op).is_err() {
            self.state.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Changes dropped because the queue was full (or the sync task gone).
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }

    /// Whether the sync task reaches the database right now.
    pub fn is_online(&self) -> bool {
        self.state.online.load(Ordering::Relaxed)
    }

    /// Asks the team for `provider`'s half-open probe slot; waits at most [`LEASE_WAIT`].
    pub async fn lease(&self, provider: &ProviderId, at: UnixMillis) -> LeaseAnswer {
        if !self.is_online() {
            return LeaseAnswer::Unavailable;
        }
        let (answer, answered) = oneshot::channel();
        let request = LeaseRequest { provider: provider.clone(), at, answer };
        match self.leases.try_send(request) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return LeaseAnswer::Refused,
            Err(mpsc::error::TrySendError::Closed(_)) => return LeaseAnswer::Unavailable,
        }
        match tokio::time::timeout(LEASE_WAIT, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => LeaseAnswer::Unavailable,
            Err(_) => LeaseAnswer::Refused,
        }
    }
}

impl TeamInbox {
    /// Says whether the database is reachable; leases are only asked for while it is.
    pub fn set_online(&self, online: bool) {
        self.state.online.store(online, Ordering::Relaxed);
    }

    pub fn me(&self) -> &InstanceId {
        &self.state.me
    }

    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(at: u64) -> TeamOp {
        TeamOp {
            target: TeamTarget::Breaker { provider: "p".into(), change: BreakerChange::Success },
            at: UnixMillis(at),
        }
    }

    #[test]
    fn a_change_that_waited_is_applied_as_of_when_it_happened_in_database_time() {
        // Happened at local 1_000; sent when the local clock reads 31_000 and the database's
        // (five minutes ahead) reads 331_000: it happened at database time 301_000.
        assert_eq!(
            op(1_000).db_instant(UnixMillis(331_000), UnixMillis(31_000)),
            UnixMillis(301_000)
        );
        // A local clock that stepped back since counts no wait.
        assert_eq!(op(5_000).db_instant(UnixMillis(9_000), UnixMillis(1_000)), UnixMillis(9_000));
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (link, mut inbox) = TeamLink::new(InstanceId::new("a"), 2);
        for at in 0..5 {
            link.send(op(at));
        }
        assert_eq!(link.dropped(), 3);
        assert_eq!(inbox.ops.try_recv().unwrap(), op(0));
    }

    #[tokio::test]
    async fn no_lease_is_waited_for_while_the_database_is_unreachable() {
        let (link, _inbox) = TeamLink::new(InstanceId::new("a"), 8);
        assert_eq!(link.lease(&"p".into(), UnixMillis(0)).await, LeaseAnswer::Unavailable);
    }

    /// A link whose sync task says the database answers, and a request for `p`'s lease on it.
    fn asking() -> (tokio::task::JoinHandle<LeaseAnswer>, TeamInbox) {
        let (link, inbox) = TeamLink::new(InstanceId::new("a"), 8);
        inbox.set_online(true);
        let asked = tokio::spawn(async move { link.lease(&"p".into(), UnixMillis(0)).await });
        (asked, inbox)
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_lease_is_refused_after_the_wait() {
        let (asked, mut inbox) = asking();
        let request = inbox.leases.recv().await.unwrap();
        assert_eq!(asked.await.unwrap(), LeaseAnswer::Refused);
        assert!(request.answer.is_closed(), "the sync task can tell nobody waits any more");
    }

    #[tokio::test]
    async fn a_granted_lease_reaches_the_requester() {
        let (asked, mut inbox) = asking();
        let request = inbox.leases.recv().await.unwrap();
        assert_eq!(request.provider.as_str(), "p");
        request.answer.send(LeaseAnswer::Granted).unwrap();
        assert_eq!(asked.await.unwrap(), LeaseAnswer::Granted);
    }
}
