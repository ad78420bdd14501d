//! The registry's end of the team's sync task: changes go out without waiting, and a probe asks
//! for its lease with a deadline.
//!
//! Invariants:
//! - Sending a change never blocks and never fails the request: the queue is bounded, and a
//!   change that finds it full is counted and its entry marked for a resync: the sync
//!   task reads the entry back from the database, as absolute state, and this instance takes it
//!   over. A change is an increment, so it is never replayed from memory out of order; what the
//!   team did not hear of is lost to the team, and every instance agrees again on what it has.
//! - Every change carries a sequence number, so the registry can tell that a team entry does
//!   not include its latest change of an entry yet (a newer local state is never replaced by an
//!   older team entry).
//! - A lease is waited for at most the wait the sync task derives from the measured round trip
//!   to the database ([`super::round_trip::RoundTrips::lease_wait`]). No answer by then is a
//!   refusal: the request moves on to its next candidate, and a grant that arrives later is
//!   handed to this instance's next request for it or released at once. While the sync task
//!   says the database is unreachable no one waits at all: the instance decides alone, as it
//!   would without a team.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::round_trip::RoundTrips;
use super::shared::{BreakerChange, CredentialChange, LockoutChange};
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, InstanceId, ProviderId};
use crate::resilience::recovery::ProbeScope;

/// Entries marked for a resync before the sync task rereads everything instead.
const OVERFLOW_KEPT: usize = 1024;

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
    /// Its place among this instance's changes (from 1; set by [`TeamLink::send`]).
    pub seq: u64,
}

impl TeamOp {
    pub fn new(target: TeamTarget, at: UnixMillis) -> Self {
        Self { target, at, seq: 0 }
    }

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
    /// The database cannot be reached, or the team does not share this entry: decide alone.
    Unavailable,
}

/// What a lease is for: a half-open breaker's probe slot (the breaker's own entry holds it, and
/// only its holder's result moves the breaker), or a recovery probe of one scope (any bench:
/// degraded, lapsed lock, cooled credential, or a probe through a bench).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaseScope {
    HalfOpen(ProviderId),
    Probe(ProbeScope),
}

/// A lease request, as the sync task receives it.
#[derive(Debug)]
pub struct LeaseRequest {
    pub scope: LeaseScope,
    pub at: UnixMillis,
    /// How long the probe may take: the lease lasts that long (at most the breaker's
    /// `probe_timeout`, which is also how long any other instance honours it).
    pub lasts: Duration,
    /// Closed when the requester stopped waiting: a lease granted after that is handed on or
    /// released.
    pub answer: oneshot::Sender<LeaseAnswer>,
}

/// What the registry's probes tell the sync task's lease half.
#[derive(Debug)]
pub enum LeaseMessage {
    Ask(LeaseRequest),
    /// A recovery probe of this scope is over: the team's slot is free again.
    Release(ProbeScope),
}

/// Entries whose changes did not fit in the queue, for the sync task to resync.
#[derive(Debug, Default)]
pub struct Overflow {
    pub targets: Vec<TeamTarget>,
    /// More than could be kept: resync everything.
    pub all: bool,
}

#[derive(Debug)]
struct LinkState {
    me: InstanceId,
    online: AtomicBool,
    dropped: AtomicU64,
    seq: AtomicU64,
    lease_wait_us: AtomicU64,
    overflow: Mutex<Overflow>,
    overflowed: AtomicBool,
}

/// The registry's end: cheap to clone.
#[derive(Clone, Debug)]
pub struct TeamLink {
    ops: mpsc::Sender<TeamOp>,
    leases: mpsc::Sender<LeaseMessage>,
    state: Arc<LinkState>,
}

/// The sync task's end.
#[derive(Debug)]
pub struct TeamInbox {
    pub ops: mpsc::Receiver<TeamOp>,
    pub leases: mpsc::Receiver<LeaseMessage>,
    control: LinkControl,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl TeamLink {
    /// A link for instance `me` whose queue holds `capacity` changes; offline until the sync
    /// task says otherwise.
    pub fn new(me: InstanceId, capacity: usize) -> (Self, TeamInbox) {
        let (ops, op_queue) = mpsc::channel(capacity.max(1));
        let (leases, lease_queue) = mpsc::channel(256);
        let state = Arc::new(LinkState {
            me,
            online: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            lease_wait_us: AtomicU64::new(micros(RoundTrips::UNMEASURED)),
            overflow: Mutex::new(Overflow::default()),
            overflowed: AtomicBool::new(false),
        });
        let control = LinkControl { state: Arc::clone(&state) };
        let inbox = TeamInbox { ops: op_queue, leases: lease_queue, control };
        (Self { ops, leases, state }, inbox)
    }

    /// This instance's name in the team.
    pub fn me(&self) -> &InstanceId {
        &self.state.me
    }

    /// Queues a change for the database; never waits. Returns its sequence number, or `None`
    /// when the queue was full: then the entry is marked for a resync instead.
    pub fn send(&self, mut op: TeamOp) -> Option<u64> {
        let seq = self.state.seq.fetch_add(1, Ordering::Relaxed) + 1;
        op.seq = seq;
        match self.ops.try_send(op) {
            Ok(()) => Some(seq),
            Err(error) => {
                self.state.dropped.fetch_add(1, Ordering::Relaxed);
                let op = match error {
                    mpsc::error::TrySendError::Full(op) | mpsc::error::TrySendError::Closed(op) => {
                        op
                    }
                };
                let mut overflow = self.state.overflow.lock();
                if overflow.targets.len() < OVERFLOW_KEPT {
                    if !overflow.targets.iter().any(|t| same_entry(t, &op.target)) {
                        overflow.targets.push(op.target);
                    }
                } else {
                    overflow.all = true;
                }
                self.state.overflowed.store(true, Ordering::Release);
                None
            }
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

    /// How long a lease is waited for now.
    pub fn lease_wait(&self) -> Duration {
        Duration::from_micros(self.state.lease_wait_us.load(Ordering::Relaxed))
    }

    /// Asks the team for the probe slot of `scope`, for `lasts`; waits at most
    /// [`Self::lease_wait`].
    pub async fn lease(&self, scope: LeaseScope, at: UnixMillis, lasts: Duration) -> LeaseAnswer {
        if !self.is_online() {
            return LeaseAnswer::Unavailable;
        }
        let (answer, answered) = oneshot::channel();
        let request = LeaseRequest { scope, at, lasts, answer };
        match self.leases.try_send(LeaseMessage::Ask(request)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return LeaseAnswer::Refused,
            Err(mpsc::error::TrySendError::Closed(_)) => return LeaseAnswer::Unavailable,
        }
        match tokio::time::timeout(self.lease_wait(), answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => LeaseAnswer::Unavailable,
            Err(_) => LeaseAnswer::Refused,
        }
    }

    /// Frees the team's slot of a recovery probe that is over; never waits (a release that
    /// does not fit lets the lease run out at its deadline).
    pub fn release(&self, scope: ProbeScope) {
        if self.is_online() {
            let _ = self.leases.try_send(LeaseMessage::Release(scope));
        }
    }
}

/// Whether two targets are about the same entry (whatever the change).
fn same_entry(a: &TeamTarget, b: &TeamTarget) -> bool {
    match (a, b) {
        (TeamTarget::Breaker { provider: x, .. }, TeamTarget::Breaker { provider: y, .. }) => {
            x == y
        }
        (TeamTarget::Credential { key: x, .. }, TeamTarget::Credential { key: y, .. }) => x == y,
        (TeamTarget::Lockout { key: x, .. }, TeamTarget::Lockout { key: y, .. }) => x == y,
        _ => false,
    }
}

/// The sync task's controls of the link, apart from its two queues (see
/// [`TeamInbox::into_parts`]): cheap to clone, for the task's lease half.
#[derive(Clone, Debug)]
pub struct LinkControl {
    state: Arc<LinkState>,
}

impl LinkControl {
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

    /// Sets how long requests wait for a lease (from the measured round trips).
    pub fn set_lease_wait(&self, wait: Duration) {
        self.state.lease_wait_us.store(micros(wait), Ordering::Relaxed);
    }

    /// The entries whose changes overflowed the queue since the last call, if any.
    pub fn take_overflow(&self) -> Option<Overflow> {
        if !self.state.overflowed.swap(false, Ordering::Acquire) {
            return None;
        }
        Some(std::mem::take(&mut *self.state.overflow.lock()))
    }
}

impl TeamInbox {
    /// The two queues and the controls, apart: the sync task serves leases concurrently with
    /// its writes, so a lease never waits behind a batch of changes.
    pub fn into_parts(self) -> (mpsc::Receiver<TeamOp>, mpsc::Receiver<LeaseMessage>, LinkControl) {
        (self.ops, self.leases, self.control)
    }

    /// The link's controls (online, lease wait, overflow), before the inbox is taken apart.
    pub fn control(&self) -> &LinkControl {
        &self.control
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(at: u64) -> TeamOp {
        let target = TeamTarget::Breaker { provider: "p".into(), change: BreakerChange::Success };
        TeamOp::new(target, UnixMillis(at))
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
    fn a_full_queue_counts_and_marks_the_entry_for_a_resync_instead_of_waiting() {
        let (link, mut inbox) = TeamLink::new(InstanceId::new("a"), 2);
        assert!(inbox.control().take_overflow().is_none());
        let seqs: Vec<Option<u64>> = (0..5).map(|at| link.send(op(at))).collect();
        assert_eq!(seqs, [Some(1), Some(2), None, None, None]);
        assert_eq!(link.dropped(), 3);
        assert_eq!(inbox.ops.try_recv().unwrap(), TeamOp { seq: 1, ..op(0) });
        let overflow = inbox.control().take_overflow().expect("the overflow is told");
        assert_eq!(overflow.targets, [op(2).target], "one entry, marked once");
        assert!(!overflow.all);
        assert!(inbox.control().take_overflow().is_none(), "told once");
    }

    #[tokio::test]
    async fn no_lease_is_waited_for_while_the_database_is_unreachable() {
        let (link, _inbox) = TeamLink::new(InstanceId::new("a"), 8);
        let asked = link.lease(half_open(), UnixMillis(0), Duration::from_secs(1)).await;
        assert_eq!(asked, LeaseAnswer::Unavailable);
    }

    fn half_open() -> LeaseScope {
        LeaseScope::HalfOpen("p".into())
    }

    /// A link whose sync task says the database answers, and a request for `p`'s lease on it.
    fn asking() -> (tokio::task::JoinHandle<LeaseAnswer>, TeamInbox) {
        let (link, inbox) = TeamLink::new(InstanceId::new("a"), 8);
        inbox.control().set_online(true);
        let asked = tokio::spawn(async move {
            link.lease(half_open(), UnixMillis(0), Duration::from_secs(1)).await
        });
        (asked, inbox)
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_lease_is_refused_after_the_wait() {
        let (asked, mut inbox) = asking();
        let Some(LeaseMessage::Ask(request)) = inbox.leases.recv().await else { panic!() };
        assert_eq!(asked.await.unwrap(), LeaseAnswer::Refused);
        assert!(request.answer.is_closed(), "the sync task can tell nobody waits any more");
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_is_the_one_the_sync_task_measured() {
        let (asked, mut inbox) = asking();
        inbox.control().set_lease_wait(Duration::from_millis(300));
        let Some(LeaseMessage::Ask(request)) = inbox.leases.recv().await else { panic!() };
        // Four round trips of a database 30 ms away: longer than the old fixed 50 ms.
        tokio::time::sleep(Duration::from_millis(240)).await;
        request.answer.send(LeaseAnswer::Granted).unwrap();
        assert_eq!(asked.await.unwrap(), LeaseAnswer::Granted);
    }

    #[tokio::test]
    async fn a_granted_lease_reaches_the_requester() {
        let (asked, mut inbox) = asking();
        let Some(LeaseMessage::Ask(request)) = inbox.leases.recv().await else { panic!() };
        assert_eq!(request.scope, half_open());
        request.answer.send(LeaseAnswer::Granted).unwrap();
        assert_eq!(asked.await.unwrap(), LeaseAnswer::Granted);
    }
}
