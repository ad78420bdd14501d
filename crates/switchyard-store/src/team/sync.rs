//! The sync task: one per instance, between the registry and the team's database.
//!
//! - Out: the registry's changes ([`TeamOp`]) are applied to the shared entries as the database
//!   holds them, each with a condition on the version it read, again on a newer version when
//!   another instance wrote first. The entry that results (or the one that made the change moot)
//!   is taken into the registry at once.
//! - Leases: a half-open probe's request is answered from the same kind of conditional write;
//!   a grant nobody waits for any more is released at once.
//! - In: every change is announced on `LISTEN`/`NOTIFY` and taken into the registry without
//!   becoming a change of this instance's (no echo). A periodic catch-up reads what changed since
//!   two catch-ups ago, for announcements lost in transit; every (re)connection reads all.
//! - Heartbeat: says this instance is alive, measures the clock offset, lists the team.
//!
//! Invariants:
//! - Nothing here is ever waited for by a request, except a lease (and that at most 50 ms,
//!   see `switchyard_core::resilience::team::link`).
//! - While the database cannot be reached, the instance runs on its own registry and state
//!   file; its changes are kept (up to a bound) and sent, by the same conditional writes, once
//!   the database answers again, then everything is read back. The status says which it is.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use switchyard_core::resilience::HealthRegistry;
use switchyard_core::resilience::team::link::{LeaseAnswer, LeaseRequest, TeamTarget};
use switchyard_core::resilience::team::shared::InLocalTime;
use switchyard_core::resilience::team::{
    BreakerChange, ClockOffset, Stamp, TeamCredential, TeamIdentities, TeamInbox, TeamLink,
    TeamModel, TeamOp, TeamProvider,
};
use switchyard_core::{Clock, InstanceId, UnixMillis};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::database::{Member, TeamDatabase, TeamUrl};
use super::tables::{Announced, Breakers, Credentials, Entry, Lockouts, Table};
use crate::StoreError;

/// How the sync task paces itself.
#[derive(Clone, Debug)]
pub struct TeamOptions {
    /// This instance's name in the team; unique among the running instances.
    pub instance: InstanceId,
    /// What the team page shows as this instance's version.
    pub version: String,
    /// How often the instance says it is alive, measures its clock against the database's
    /// and reads who else is.
    pub heartbeat: Duration,
    /// How often changes whose announcement was lost are caught up with.
    pub catch_up: Duration,
    /// Changes kept while the database cannot be reached; past this the oldest are dropped.
    pub backlog: usize,
}

impl TeamOptions {
    pub fn new(instance: InstanceId, version: impl Into<String>) -> Self {
        Self {
            instance,
            version: version.into(),
            heartbeat: Duration::from_secs(5),
            catch_up: Duration::from_secs(5),
            backlog: 10_000,
        }
    }
}

/// Instances seen within this long are the team the health page shows.
pub const MEMBERS_WITHIN: Duration = Duration::from_secs(60);

/// Computes the map between this instance's names and the team's from the team's salt. Called
/// again on every heartbeat, so credentials added to the config join the team.
pub type Identities = Arc<dyn Fn(&[u8]) -> TeamIdentities + Send + Sync>;

/// What the health page and the tray show of the team.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamStatus {
    pub instance: InstanceId,
    /// The database answers: state is shared.
    pub connected: bool,
    /// Why it is not connected.
    pub reason: Option<String>,
    /// When `connected` last changed, on this instance's clock.
    pub since: UnixMillis,
    /// Instances seen in the last minute, as of the last heartbeat.
    pub members: Vec<Member>,
    /// Database minus local clock.
    pub clock_offset_ms: i64,
    /// Changes waiting for the database.
    pub backlog: usize,
    /// Changes dropped: the queue or the backlog was full.
    pub dropped: u64,
}

/// Team mode as the app runs it.
#[derive(Debug)]
pub struct Team {
    status: watch::Receiver<TeamStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// Changes the registry may queue before the sync task takes them.
const QUEUE: usize = 16_384;
/// Changes taken from the queue per round, so leases and announcements are not kept waiting.
const BATCH: usize = 256;
/// Conditional writes tried per change before giving up on it (each loss means another
/// instance changed the entry meanwhile).
const TRIES: usize = 16;
/// How long a stopping instance keeps sending what it still has.
const FLUSH_ON_STOP: Duration = Duration::from_secs(2);

impl Team {
    /// Joins `registry` to the team whose database is at `url` and starts the sync task. Never
    /// waits for the database: until it answers, the status says so and the registry decides
    /// alone. Fails only when the registry is in a team already.
    pub fn start(
        url: TeamUrl,
        options: TeamOptions,
        registry: Arc<HealthRegistry>,
        identities: Identities,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let (link, inbox) = TeamLink::new(options.instance.clone(), QUEUE);
        registry
            .join_team(link)
            .map_err(|_| StoreError::Team("this registry already belongs to a team".into()))?;
        let now = clock.now();
        let (status_tx, status) = watch::channel(TeamStatus {
            instance: options.instance.clone(),
            connected: false,
            reason: Some("connecting".into()),
            since: now,
            members: Vec::new(),
            clock_offset_ms: 0,
            backlog: 0,
            dropped: 0,
        });
        let (stop, stopped) = oneshot::channel();
        let task = Task {
            url,
            options,
            registry,
            identities_from: identities,
            identities: TeamIdentities::default(),
            salt: None,
            clock,
            inbox,
            status: status_tx,
            backlog: VecDeque::new(),
            dropped: 0,
            offset: ClockOffset::default(),
            applied: Applied::default(),
            caught_up: (0, 0),
            stopped,
        };
        Ok(Self { status, stop: Some(stop), task: tokio::spawn(task.run()) })
    }

    pub fn status(&self) -> TeamStatus {
        self.status.borrow().clone()
    }

    /// The status as it changes.
    pub fn watch_status(&self) -> watch::Receiver<TeamStatus> {
        self.status.clone()
    }

    /// Sends what is still queued (for a moment at most) and stops.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(error) = (&mut self.task).await {
            tracing::error!(%error, "the team sync task panicked");
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        if self.stop.is_some() {
            self.task.abort();
        }
    }
}

/// The versions taken into the registry, per entry: an announcement that arrives after a newer
/// write's answer must not undo it.
#[derive(Default)]
struct Applied {
    breakers: HashMap<TeamProvider, i64>,
    credentials: HashMap<TeamCredential, i64>,
    lockouts: HashMap<TeamModel, i64>,
}

/// How a table's entries reach the registry.
trait Deliver: Table {
    fn versions(applied: &mut Applied) -> &mut HashMap<Self::Name, i64>;
    fn hand_over(task: &Task, entry: &Entry<Self::Name, Self::Value>, now: UnixMillis);
}

impl Deliver for Breakers {
    fn versions(applied: &mut Applied) -> &mut HashMap<TeamProvider, i64> {
        &mut applied.breakers
    }
    fn hand_over(task: &Task, entry: &Entry<Self::Name, Self::Value>, now: UnixMillis) {
        let locals = task.identities.local_providers(&entry.name);
        if !locals.is_empty() {
            let local = entry.value.in_local_time(&task.offset);
            task.registry.apply_shared_breaker(locals, &local, &entry.stamp.recorded_by, now);
        }
    }
}

impl Deliver for Credentials {
    fn versions(applied: &mut Applied) -> &mut HashMap<Self::Name, i64> {
        &mut applied.credentials
    }
    fn hand_over(task: &Task, entry: &Entry<Self::Name, Self::Value>, now: UnixMillis) {
        let locals = task.identities.local_credentials(&entry.name);
        if !locals.is_empty() {
            let local = entry.value.in_local_time(&task.offset);
            task.registry.apply_shared_credential(locals, &local, &entry.stamp.recorded_by, now);
        }
    }
}

impl Deliver for Lockouts {
    fn versions(applied: &mut Applied) -> &mut HashMap<Self::Name, i64> {
        &mut applied.lockouts
    }
    fn hand_over(task: &Task, entry: &Entry<Self::Name, Self::Value>, now: UnixMillis) {
        let locals = task.identities.local_models(&entry.name);
        if !locals.is_empty() {
            let local = entry.value.in_local_time(&task.offset);
            task.registry.apply_shared_lockout(&locals, &local, &entry.stamp.recorded_by, now);
        }
    }
}

/// Why a session with the database ended.
enum Ended {
    Stopped,
    Lost(StoreError),
}

impl From<StoreError> for Ended {
    fn from(error: StoreError) -> Self {
        Self::Lost(error)
    }
}

/// What the listening connection hands the task.
enum Heard {
    Announced(String),
    Lost(StoreError),
}

struct Task {
    url: TeamUrl,
    options: TeamOptions,
    registry: Arc<HealthRegistry>,
    identities_from: Identities,
    identities: TeamIdentities,
    salt: Option<Vec<u8>>,
    clock: Arc<dyn Clock>,
    inbox: TeamInbox,
    status: watch::Sender<TeamStatus>,
    /// Changes taken from the queue and not yet in the database.
    backlog: VecDeque<TeamOp>,
    dropped: u64,
    offset: ClockOffset,
    applied: Applied,
    /// The highest version seen by the last catch-up and by the one before.
    caught_up: (i64, i64),
    stopped: oneshot::Receiver<()>,
}

impl Task {
    async fn run(mut self) {
        let mut wait = Duration::from_millis(250);
        let mut logged_down = false;
        loop {
            let ended = match self.open().await {
                Ok((db, heard, listening)) => {
                    wait = Duration::from_millis(250);
                    logged_down = false;
                    let ended = self.serve(&db, heard).await;
                    listening.abort();
                    if matches!(ended, Ended::Stopped) {
                        self.flush(&db).await;
                    }
                    db.close().await;
                    ended
                }
                Err(error) => Ended::Lost(error),
            };
            let error = match ended {
                Ended::Stopped => return,
                Ended::Lost(error) => error,
            };
            self.set_connected(false, Some(error.to_string()));
            if logged_down {
                tracing::debug!(%error, "the team database is still unreachable");
            } else {
                tracing::warn!(
                    %error,
                    "the team database is unreachable: serving from this instance's memory and \
                     state file, keeping its changes to send when it is back"
                );
                logged_down = true;
            }
            if !self.idle(wait).await {
                return;
            }
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    /// Connects, reads the salt and the clock, says hello, starts listening, then sends what
    /// waited and reads everything back.
    async fn open(
        &mut self,
    ) -> Result<(TeamDatabase, mpsc::Receiver<Heard>, JoinHandle<()>), StoreError> {
        let db = TeamDatabase::connect(&self.url).await?;
        if self.salt.is_none() {
            self.salt = Some(db.salt().await?);
        }
        self.refresh_identities();
        self.beat(&db).await?;
        let mut listener = db.listen().await?;
        let (tell, heard) = mpsc::channel(1024);
        // Its own task: reading a notification must never be cut off halfway by a select.
        let listening = tokio::spawn(async move {
            loop {
                let heard = match listener.try_recv().await {
                    Ok(Some(note)) => Heard::Announced(note.payload().to_owned()),
                    Ok(None) => Heard::Lost(StoreError::Team("the connection was lost".into())),
                    Err(error) => Heard::Lost(StoreError::database(error)),
                };
                let lost = matches!(heard, Heard::Lost(_));
                if tell.send(heard).await.is_err() || lost {
                    return;
                }
            }
        });
        let sent = self.backlog.len();
        while let Some(op) = self.backlog.pop_front() {
            if let Err(error) = self.execute(&db, &op).await {
                self.backlog.push_front(op);
                listening.abort();
                return Err(error);
            }
        }
        let read = self.catch_up(&db, 0).await?;
        self.set_connected(true, None);
        tracing::info!(
            instance = %self.options.instance,
            members = self.status.borrow().members.len(),
            clock_offset_ms = self.offset.offset_ms(),
            sent,
            read,
            "team database connected: health state is shared"
        );
        Ok((db, heard, listening))
    }

    async fn serve(&mut self, db: &TeamDatabase, mut heard: mpsc::Receiver<Heard>) -> Ended {
        let mut catch_up = tokio::time::interval(self.options.catch_up);
        let mut heartbeat = tokio::time::interval(self.options.heartbeat);
        catch_up.reset();
        heartbeat.reset();
        loop {
            let result = tokio::select! {
                biased;
                _ = &mut self.stopped => return Ended::Stopped,
                Some(request) = self.inbox.leases.recv() => self.lease(db, request).await,
                Some(op) = self.inbox.ops.recv() => self.send(db, op).await,
                note = heard.recv() => match note {
                    Some(Heard::Announced(payload)) => {
                        self.announced(&payload);
                        Ok(())
                    }
                    Some(Heard::Lost(error)) => Err(error),
                    None => Err(StoreError::Team("the listening connection ended".into())),
                },
                _ = catch_up.tick() => {
                    let since = self.caught_up.1;
                    self.catch_up(db, since).await.map(drop)
                }
                _ = heartbeat.tick() => self.beat(db).await,
            };
            if let Err(error) = result {
                return Ended::Lost(error);
            }
        }
    }

    /// Waits `wait` before the next connection attempt, keeping the registry's changes for
    /// later and telling lease requests to decide alone. `false` when stopping.
    async fn idle(&mut self, wait: Duration) -> bool {
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return true,
                _ = &mut self.stopped => return false,
                Some(op) = self.inbox.ops.recv() => {
                    self.keep(op);
                    self.publish();
                }
                Some(request) = self.inbox.leases.recv() => {
                    let _ = request.answer.send(LeaseAnswer::Unavailable);
                }
            }
        }
    }

    fn keep(&mut self, op: TeamOp) {
        if self.backlog.len() >= self.options.backlog {
            self.backlog.pop_front();
            self.dropped += 1;
        }
        self.backlog.push_back(op);
    }

    /// Sends `op` and whatever queued behind it (up to a batch).
    async fn send(&mut self, db: &TeamDatabase, op: TeamOp) -> Result<(), StoreError> {
        let mut batch = vec![op];
        while batch.len() < BATCH {
            match self.inbox.ops.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let mut batch = batch.into_iter();
        while let Some(op) = batch.next() {
            if let Err(error) = self.execute(db, &op).await {
                self.keep(op);
                for rest in batch {
                    self.keep(rest);
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// Writes the last changes still queued, for [`FLUSH_ON_STOP`] at most.
    async fn flush(&mut self, db: &TeamDatabase) {
        let flushed = tokio::time::timeout(FLUSH_ON_STOP, async {
            while let Ok(op) = self.inbox.ops.try_recv() {
                if self.execute(db, &op).await.is_err() {
                    return;
                }
            }
        })
        .await;
        if flushed.is_err() {
            tracing::warn!("stopped before every change reached the team database");
        }
    }

    /// Applies one change to its shared entry, by conditional write, and takes the result in.
    async fn execute(&mut self, db: &TeamDatabase, op: &TeamOp) -> Result<(), StoreError> {
        let me = self.options.instance.clone();
        let local_now = self.clock.now();
        match &op.target {
            TeamTarget::Breaker { provider, change } => {
                let Some(name) = self.team_name(|ids| ids.provider(provider).cloned()) else {
                    return Ok(());
                };
                let policy = self.registry.breaker_policy(provider);
                let lease_bound = !matches!(
                    change,
                    BreakerChange::Failure(_)
                        | BreakerChange::Success
                        | BreakerChange::Heal
                        | BreakerChange::Clear
                );
                self.change::<Breakers>(db, &name, |current, db_now| {
                    // A lease lives in the present: its changes are judged at the database's now.
                    let at = if lease_bound { db_now } else { op.db_instant(db_now, local_now) };
                    change.apply(current, &me, at, &policy)
                })
                .await
                .map(drop)
            }
            TeamTarget::Credential { key, change } => {
                let Some(name) = self.team_name(|ids| ids.credential(key).cloned()) else {
                    return Ok(());
                };
                let policy = self.registry.cooldown_policy();
                let kind = self.registry.credential_kind(key);
                self.change::<Credentials>(db, &name, |current, db_now| {
                    change.apply(current, op.db_instant(db_now, local_now), &policy, kind)
                })
                .await
                .map(drop)
            }
            TeamTarget::Lockout { key, change } => {
                let Some(name) = self.team_name(|ids| ids.model(key)) else { return Ok(()) };
                let policy = self.registry.lockout_policy();
                self.change::<Lockouts>(db, &name, |current, db_now| {
                    change.apply(current, op.db_instant(db_now, local_now), &policy)
                })
                .await
                .map(drop)
            }
        }
    }

    /// The conditional write loop: read the entry and the database's clock, apply the change,
    /// write if the entry is still the version read, else start over. Returns the database's
    /// clock and the entry as it stands after the change (written, or the one that made it
    /// moot), which is taken into the registry.
    async fn change<T: Deliver>(
        &mut self,
        db: &TeamDatabase,
        name: &T::Name,
        apply: impl Fn(Option<&T::Value>, UnixMillis) -> Option<T::Value>,
    ) -> Result<(UnixMillis, Option<Entry<T::Name, T::Value>>), StoreError> {
        let me = self.options.instance.clone();
        for _ in 0..TRIES {
            let (db_now, current) = db.read::<T>(name).await?;
            let Some(next) = apply(current.as_ref().map(|c| &c.value), db_now) else {
                if let Some(current) = &current {
                    self.take_in::<T>(current, true);
                }
                return Ok((db_now, current));
            };
            let expected = current.as_ref().map(|c| c.stamp.version);
            if let Some(version) = db.write::<T>(name, &next, &me, expected).await? {
                let stamp = Stamp { version, recorded_by: me };
                let written = Entry { name: name.clone(), value: next, stamp };
                self.take_in::<T>(&written, true);
                return Ok((db_now, Some(written)));
            }
        }
        tracing::warn!(table = T::NAME, entry = ?name, "a change lost {TRIES} races in a row; dropped");
        Ok((UnixMillis::EPOCH, None))
    }

    /// A half-open probe asks for its lease.
    async fn lease(&mut self, db: &TeamDatabase, request: LeaseRequest) -> Result<(), StoreError> {
        let LeaseRequest { provider, at, answer } = request;
        let Some(name) = self.team_name(|ids| ids.provider(&provider).cloned()) else {
            let _ = answer.send(LeaseAnswer::Unavailable);
            return Ok(());
        };
        let me = self.options.instance.clone();
        let policy = self.registry.breaker_policy(&provider);
        let (db_now, entry) = match self
            .change::<Breakers>(db, &name, |current, db_now| {
                BreakerChange::Lease.apply(current, &me, db_now, &policy)
            })
            .await
        {
            Ok(done) => done,
            Err(error) => {
                let _ = answer.send(LeaseAnswer::Unavailable);
                return Err(error);
            }
        };
        let granted = entry.is_some_and(|e| e.value.leased_to(&me, db_now));
        let verdict = if granted { LeaseAnswer::Granted } else { LeaseAnswer::Refused };
        if answer.send(verdict).is_err() && granted {
            // The probe gave up waiting and went elsewhere: the slot must not stay taken.
            let release = TeamTarget::Breaker { provider, change: BreakerChange::Release };
            self.execute(db, &TeamOp { target: release, at }).await?;
        }
        Ok(())
    }

    /// Takes an announced change in, unless a newer version of the entry is in already.
    fn announced(&mut self, payload: &str) {
        match Announced::parse(payload) {
            Ok(Announced::Breaker(entry)) => self.take_in::<Breakers>(&entry, false),
            Ok(Announced::Credential(entry)) => self.take_in::<Credentials>(&entry, false),
            Ok(Announced::Lockout(entry)) => self.take_in::<Lockouts>(&entry, false),
            Err(error) => tracing::warn!(%error, "skipped a team announcement that cannot be read"),
        }
    }

    /// Reads every entry changed after `since` (all of them from 0) into the registry.
    async fn catch_up(&mut self, db: &TeamDatabase, since: i64) -> Result<usize, StoreError> {
        let breakers = db.since::<Breakers>(since).await?;
        let credentials = db.since::<Credentials>(since).await?;
        let lockouts = db.since::<Lockouts>(since).await?;
        let mut newest = self.caught_up.0;
        let read = breakers.len() + credentials.len() + lockouts.len();
        for entry in &breakers {
            newest = newest.max(entry.stamp.version);
            self.take_in::<Breakers>(entry, false);
        }
        for entry in &credentials {
            newest = newest.max(entry.stamp.version);
            self.take_in::<Credentials>(entry, false);
        }
        for entry in &lockouts {
            newest = newest.max(entry.stamp.version);
            self.take_in::<Lockouts>(entry, false);
        }
        // The next catch-up reads from the one before this: a change whose version was drawn
        // before a newer one's but committed after it is read too.
        self.caught_up = (newest, self.caught_up.0.min(newest));
        Ok(read)
    }

    /// Takes `entry` into the registry if it is newer than what was taken of it (or, for the
    /// answer to this instance's own change, at least as new: the registry may have moved on
    /// alone since).
    fn take_in<T: Deliver>(&mut self, entry: &Entry<T::Name, T::Value>, own: bool) {
        let known = T::versions(&mut self.applied).entry(entry.name.clone()).or_insert(i64::MIN);
        let fresh = entry.stamp.version > *known || (own && entry.stamp.version == *known);
        if !fresh {
            return;
        }
        *known = entry.stamp.version;
        T::hand_over(self, entry, self.clock.now());
    }

    /// Heartbeat: alive, clock, members, identities.
    async fn beat(&mut self, db: &TeamDatabase) -> Result<(), StoreError> {
        db.heartbeat(&self.options.instance, &self.options.version).await?;
        let sent = self.clock.now();
        let db_now = db.now().await?;
        let received = self.clock.now();
        self.offset.observe(sent, db_now, received);
        let members = db.members(MEMBERS_WITHIN).await?;
        self.refresh_identities();
        self.status.send_modify(|s| s.members = members);
        self.publish();
        Ok(())
    }

    fn refresh_identities(&mut self) {
        if let Some(salt) = &self.salt {
            self.identities = (self.identities_from)(salt);
        }
    }

    /// The team's name for something local, recomputing the identities once when it is
    /// unknown (a credential added since the last heartbeat).
    fn team_name<N>(&mut self, lookup: impl Fn(&TeamIdentities) -> Option<N>) -> Option<N> {
        lookup(&self.identities).or_else(|| {
            self.refresh_identities();
            lookup(&self.identities)
        })
    }

    fn set_connected(&mut self, connected: bool, reason: Option<String>) {
        self.inbox.set_online(connected);
        let now = self.clock.now();
        self.status.send_modify(|s| {
            if s.connected != connected {
                s.since = now;
            }
            s.connected = connected;
            s.reason = reason;
        });
        self.publish();
    }

    /// Refreshes the counters in the status.
    fn publish(&self) {
        let backlog = self.backlog.len();
        let dropped = self.dropped + self.inbox.dropped();
        let offset = self.offset.offset_ms();
        self.status.send_if_modified(|s| {
            let changed = (s.backlog, s.dropped, s.clock_offset_ms) != (backlog, dropped, offset);
            s.backlog = backlog;
            s.dropped = dropped;
            s.clock_offset_ms = offset;
            changed
        });
    }
}
