//! The sync task: one per instance, between the registry and the team's database.
//!
//! - Out: the registry's changes ([`TeamOp`]) are applied to the shared entries as the database
//!   holds them, each with a condition on the version it read, again on a newer version when
//!   another instance wrote first. The entry that results (or the one that made the change moot)
//!   is taken into the registry at once.
//! - Leases: served by a half of their own, concurrently with the writes, each by one
//!   conditional statement (one round trip); the round trips measured set how long requests
//!   wait. A grant that arrives after its asker gave up goes to this instance's next request
//!   for it if one waits, and is released at once otherwise.
//! - In: every change is announced on `LISTEN`/`NOTIFY`, and an announcement is a hint that
//!   names a row, never the row itself: the row is read from its table and taken into the
//!   registry without becoming a change of this instance's (no echo). A periodic catch-up reads
//!   what changed since two catch-ups ago, for announcements lost in transit; every
//!   (re)connection reads all.
//! - A team entry that does not include this instance's latest change of it yet is not taken
//!   (it is older than what the registry has); the answer to that change is.
//! - Overflow: an entry whose change did not fit in the queue or the outage backlog
//!   is read back from the database as absolute state and replaces this instance's, so the team
//!   agrees again instead of replaying increments in the wrong order.
//! - Heartbeat: says this instance is alive, measures the clock offset, lists the team.
//!
//! Invariants:
//! - Nothing here is ever waited for by a request, except a lease (and that for at most the
//!   wait derived from the measured round trips, see `switchyard_core::resilience::team::link`).
//! - While the database cannot be reached, the instance runs on its own registry and state
//!   file; its changes are kept (up to a bound) and sent, by the same conditional writes, once
//!   the database answers again, then everything is read back. The status says which it is.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_core::resilience::HealthRegistry;
use switchyard_core::resilience::recovery::ProbeScope;
use switchyard_core::resilience::team::link::{LeaseAnswer, LeaseRequest, TeamTarget};
use switchyard_core::resilience::team::shared::InLocalTime;
use switchyard_core::resilience::team::{
    ClockOffset, LeaseMessage, LeaseScope, LinkControl, Overflow, RoundTrips, SharedBreaker, Stamp,
    TeamCredential, TeamIdentities, TeamLink, TeamModel, TeamOp, TeamProvider,
};
use switchyard_core::{CandidateKey, Clock, CredentialKey, InstanceId, ProviderId, UnixMillis};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::database::{Member, TeamDatabase, TeamUrl};
use super::tables::{Breakers, Credentials, Entry, Hint, Lockouts, Table};
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
    /// Changes kept while the database cannot be reached; past this the oldest are dropped and
    /// their entries read back from the database once it answers.
    pub backlog: usize,
    /// Changes the registry may queue before the sync task takes them; past this they are
    /// dropped and their entries read back from the database.
    pub queue: usize,
}

impl TeamOptions {
    pub fn new(instance: InstanceId, version: impl Into<String>) -> Self {
        Self {
            instance,
            version: version.into(),
            heartbeat: Duration::from_secs(5),
            catch_up: Duration::from_secs(5),
            backlog: 10_000,
            queue: QUEUE,
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
    /// Entries read back from the database after such a drop.
    pub resynced: u64,
    /// How long a request waits for a lease now (from the measured round trips).
    pub lease_wait: Duration,
}

/// Team mode as the app runs it.
#[derive(Debug)]
pub struct Team {
    status: watch::Receiver<TeamStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    leases: JoinHandle<()>,
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
        let (link, inbox) = TeamLink::new(options.instance.clone(), options.queue);
        registry
            .join_team(link)
            .map_err(|_| StoreError::Team("this registry already belongs to a team".into()))?;
        let (ops, lease_requests, control) = inbox.into_parts();
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
            resynced: 0,
            lease_wait: RoundTrips::UNMEASURED,
        });
        let (stop, stopped) = oneshot::channel();
        let trips = Arc::new(Mutex::new(RoundTrips::default()));
        let (context, contexts) = watch::channel(None);
        let (granted, taken) = mpsc::unbounded_channel();
        let leases = LeaseHalf {
            me: options.instance.clone(),
            requests: lease_requests,
            queued: VecDeque::new(),
            control: control.clone(),
            context: contexts,
            registry: Arc::clone(&registry),
            trips: Arc::clone(&trips),
            taken: granted,
        };
        let task = Task {
            url,
            options,
            registry,
            identities_from: identities,
            identities: TeamIdentities::default(),
            salt: None,
            clock,
            ops,
            control,
            context,
            taken,
            trips,
            resync: HashSet::new(),
            resync_all: false,
            resynced: 0,
            status: status_tx,
            backlog: VecDeque::new(),
            dropped: 0,
            offset: ClockOffset::default(),
            applied: Applied::default(),
            caught_up: (0, 0),
            stopped,
        };
        Ok(Self {
            status,
            stop: Some(stop),
            task: tokio::spawn(task.run()),
            leases: tokio::spawn(leases.run()),
        })
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
        self.leases.abort();
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        if self.stop.is_some() {
            self.task.abort();
        }
        self.leases.abort();
    }
}

/// Per entry of one table: the version taken into the registry (an announcement that arrives
/// after a newer write's answer must not undo it), and the version this instance's last change
/// of it produced (or found moot), with that change's sequence number: an entry at that version
/// or later includes the change.
struct Versions<N> {
    taken: HashMap<N, i64>,
    mine: HashMap<N, (i64, u64)>,
}

impl<N> Default for Versions<N> {
    fn default() -> Self {
        Self { taken: HashMap::new(), mine: HashMap::new() }
    }
}

impl<N: Eq + std::hash::Hash> Versions<N> {
    /// This instance's last change that an entry at `version` of `name` includes.
    fn covers(&self, name: &N, version: i64) -> u64 {
        self.mine.get(name).map_or(0, |&(v, seq)| if version >= v { seq } else { 0 })
    }
}

#[derive(Default)]
struct Applied {
    breakers: Versions<TeamProvider>,
    credentials: Versions<TeamCredential>,
    lockouts: Versions<TeamModel>,
}

/// How a table's entries reach the registry.
trait Deliver: Table {
    fn versions(applied: &mut Applied) -> &mut Versions<Self::Name>;
    /// `covers`: see `HealthRegistry::apply_shared_breaker`.
    fn hand_over(task: &Task, entry: &Entry<Self::Name, Self::Value>, covers: u64, now: UnixMillis);
}

impl Deliver for Breakers {
    fn versions(applied: &mut Applied) -> &mut Versions<TeamProvider> {
        &mut applied.breakers
    }
    fn hand_over(
        task: &Task,
        entry: &Entry<Self::Name, Self::Value>,
        covers: u64,
        now: UnixMillis,
    ) {
        let locals = task.identities.local_providers(&entry.name);
        if !locals.is_empty() {
            let local = entry.value.in_local_time(&task.offset);
            let by = &entry.stamp.recorded_by;
            task.registry.apply_shared_breaker(locals, &local, by, covers, now);
        }
    }
}

impl Deliver for Credentials {
    fn versions(applied: &mut Applied) -> &mut Versions<Self::Name> {
        &mut applied.credentials
    }
    fn hand_over(
        task: &Task,
        entry: &Entry<Self::Name, Self::Value>,
        covers: u64,
        now: UnixMillis,
    ) {
        let locals = task.identities.local_credentials(&entry.name);
        if !locals.is_empty() {
            let local = entry.value.in_local_time(&task.offset);
            let by = &entry.stamp.recorded_by;
            task.registry.apply_shared_credential(locals, &local, by, covers, now);
        }
    }
}

impl Deliver for Lockouts {
    fn versions(applied: &mut Applied) -> &mut Versions<Self::Name> {
        &mut applied.lockouts
    }
    fn hand_over(
        task: &Task,
        entry: &Entry<Self::Name, Self::Value>,
        covers: u64,
        now: UnixMillis,
    ) {
        let locals = task.identities.local_models(&entry.name);
        if !locals.is_empty() {
            let local = entry.value.in_local_time(&task.offset);
            let by = &entry.stamp.recorded_by;
            task.registry.apply_shared_lockout(&locals, &local, by, covers, now);
        }
    }
}

/// An entry to read back from the database, in this instance's names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Resync {
    Breaker(ProviderId),
    Credential(CredentialKey),
    Lockout(CandidateKey),
}

impl From<&TeamTarget> for Resync {
    fn from(target: &TeamTarget) -> Self {
        match target {
            TeamTarget::Breaker { provider, .. } => Self::Breaker(provider.clone()),
            TeamTarget::Credential { key, .. } => Self::Credential(key.clone()),
            TeamTarget::Lockout { key, .. } => Self::Lockout(key.clone()),
        }
    }
}

/// Announcements taken per round before the rows they name are read.
const HINTS: usize = 256;
/// Past this many rows named at once, one catch-up reads them instead of one read each.
const HINTS_READ_ONE_BY_ONE: usize = 32;

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

/// What the lease half needs of a live session: the database and the names.
#[derive(Clone)]
struct LeaseContext {
    db: TeamDatabase,
    identities: Arc<TeamIdentities>,
}

struct Task {
    url: TeamUrl,
    options: TeamOptions,
    registry: Arc<HealthRegistry>,
    identities_from: Identities,
    identities: TeamIdentities,
    salt: Option<Vec<u8>>,
    clock: Arc<dyn Clock>,
    ops: mpsc::Receiver<TeamOp>,
    control: LinkControl,
    /// What the lease half works with; `None` while the database cannot be reached.
    context: watch::Sender<Option<LeaseContext>>,
    /// Entries the lease half's statements returned, to take in.
    taken: mpsc::UnboundedReceiver<Entry<TeamProvider, SharedBreaker>>,
    trips: Arc<Mutex<RoundTrips>>,
    /// Entries to read back from the database (their changes overflowed a queue).
    resync: HashSet<Resync>,
    resync_all: bool,
    resynced: u64,
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
                    self.context.send_replace(None);
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
    /// waited, reads back what overflowed, and reads everything.
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
        if let Err(error) = self.resync(&db).await {
            listening.abort();
            return Err(error);
        }
        self.set_connected(true, None);
        self.publish_context(&db);
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
                Some(entry) = self.taken.recv() => {
                    self.take_in::<Breakers>(&entry, false);
                    Ok(())
                }
                note = heard.recv() => match note {
                    Some(Heard::Announced(payload)) => self.announced(db, &payload, &mut heard).await,
                    Some(Heard::Lost(error)) => Err(error),
                    None => Err(StoreError::Team("the listening connection ended".into())),
                },
                Some(op) = self.ops.recv() => self.send(db, op).await,
                _ = catch_up.tick() => {
                    let since = self.caught_up.1;
                    self.catch_up(db, since).await.map(drop)
                }
                _ = heartbeat.tick() => self.beat(db).await,
            };
            let result = match result {
                Ok(()) => self.resync(db).await,
                Err(error) => Err(error),
            };
            if let Err(error) = result {
                return Ended::Lost(error);
            }
        }
    }

    /// Waits `wait` before the next connection attempt, keeping the registry's changes for
    /// later (the lease half meanwhile tells requests to decide alone). `false` when stopping.
    async fn idle(&mut self, wait: Duration) -> bool {
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return true,
                _ = &mut self.stopped => return false,
                Some(op) = self.ops.recv() => {
                    self.keep(op);
                    self.note_overflow();
                    self.publish();
                }
            }
        }
    }

    /// Keeps `op` for when the database is back; a full backlog drops its oldest change and
    /// marks that entry to be read back instead.
    fn keep(&mut self, op: TeamOp) {
        if self.backlog.len() >= self.options.backlog
            && let Some(oldest) = self.backlog.pop_front()
        {
            self.resync.insert(Resync::from(&oldest.target));
            self.dropped += 1;
        }
        self.backlog.push_back(op);
    }

    /// Takes the entries whose changes overflowed the registry's queue, to read them back.
    fn note_overflow(&mut self) {
        if let Some(Overflow { targets, all }) = self.control.take_overflow() {
            self.resync.extend(targets.iter().map(Resync::from));
            self.resync_all |= all;
        }
    }

    /// Reads back, as absolute state, every entry whose changes were dropped, and replaces this
    /// instance's with it (an entry the database does not have stays as it is here).
    async fn resync(&mut self, db: &TeamDatabase) -> Result<(), StoreError> {
        self.note_overflow();
        if self.resync_all {
            let breakers = db.since::<Breakers>(0).await?;
            let credentials = db.since::<Credentials>(0).await?;
            let lockouts = db.since::<Lockouts>(0).await?;
            self.resync.clear();
            self.resync_all = false;
            for entry in &breakers {
                self.force_in::<Breakers>(entry);
            }
            for entry in &credentials {
                self.force_in::<Credentials>(entry);
            }
            for entry in &lockouts {
                self.force_in::<Lockouts>(entry);
            }
            let read = breakers.len() + credentials.len() + lockouts.len();
            tracing::warn!(read, "changes overflowed a queue: read every team entry back");
            self.publish();
            return Ok(());
        }
        if self.resync.is_empty() {
            return Ok(());
        }
        let wanted: Vec<Resync> = self.resync.iter().cloned().collect();
        for key in &wanted {
            match key {
                Resync::Breaker(provider) => {
                    if let Some(name) = self.team_name(|ids| ids.provider(provider).cloned()) {
                        let (_, entry) = db.read::<Breakers>(&name).await?;
                        if let Some(entry) = entry {
                            self.force_in::<Breakers>(&entry);
                        }
                    }
                }
                Resync::Credential(local) => {
                    if let Some(name) = self.team_name(|ids| ids.credential(local).cloned()) {
                        let (_, entry) = db.read::<Credentials>(&name).await?;
                        if let Some(entry) = entry {
                            self.force_in::<Credentials>(&entry);
                        }
                    }
                }
                Resync::Lockout(local) => {
                    if let Some(name) = self.team_name(|ids| ids.model(local)) {
                        let (_, entry) = db.read::<Lockouts>(&name).await?;
                        if let Some(entry) = entry {
                            self.force_in::<Lockouts>(&entry);
                        }
                    }
                }
            }
            self.resync.remove(key);
            self.resynced += 1;
        }
        tracing::warn!(
            entries = wanted.len(),
            "changes overflowed a queue: their entries were read back from the team database"
        );
        self.publish();
        Ok(())
    }

    /// Sends `op` and whatever queued behind it (up to a batch).
    async fn send(&mut self, db: &TeamDatabase, op: TeamOp) -> Result<(), StoreError> {
        let mut batch = vec![op];
        while batch.len() < BATCH {
            match self.ops.try_recv() {
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
            while let Ok(op) = self.ops.try_recv() {
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
                self.change::<Breakers>(db, &name, op.seq, |current, db_now| {
                    change.apply(current, &me, op.db_instant(db_now, local_now), &policy)
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
                self.change::<Credentials>(db, &name, op.seq, |current, db_now| {
                    change.apply(current, op.db_instant(db_now, local_now), &policy, kind)
                })
                .await
                .map(drop)
            }
            TeamTarget::Lockout { key, change } => {
                let Some(name) = self.team_name(|ids| ids.model(key)) else { return Ok(()) };
                let policy = self.registry.lockout_policy();
                self.change::<Lockouts>(db, &name, op.seq, |current, db_now| {
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
    /// moot), which is taken into the registry. `seq`: the change's place among this
    /// instance's (see [`Versions::mine`]).
    async fn change<T: Deliver>(
        &mut self,
        db: &TeamDatabase,
        name: &T::Name,
        seq: u64,
        apply: impl Fn(Option<&T::Value>, UnixMillis) -> Option<T::Value>,
    ) -> Result<(UnixMillis, Option<Entry<T::Name, T::Value>>), StoreError> {
        let me = self.options.instance.clone();
        let mut version = None;
        for _ in 0..TRIES {
            let asked = Instant::now();
            let (db_now, current) = db.read::<T>(name).await?;
            self.observe(asked.elapsed());
            version = current.as_ref().map(|c| c.stamp.version);
            let Some(next) = apply(current.as_ref().map(|c| &c.value), db_now) else {
                if let Some(current) = &current {
                    self.mine::<T>(name, current.stamp.version, seq);
                    self.take_in::<T>(current, true);
                }
                return Ok((db_now, current));
            };
            if let Some(written) = db.write::<T>(name, &next, &me, version).await? {
                let stamp = Stamp { version: written, recorded_by: me };
                let written = Entry { name: name.clone(), value: next, stamp };
                self.mine::<T>(name, written.stamp.version, seq);
                self.take_in::<T>(&written, true);
                return Ok((db_now, Some(written)));
            }
        }
        // Given up: the registry must not wait for this change's answer for ever.
        if let Some(version) = version {
            self.mine::<T>(name, version, seq);
        }
        tracing::warn!(table = T::NAME, entry = ?name, "a change lost {TRIES} races in a row; dropped");
        Ok((UnixMillis::EPOCH, None))
    }

    /// Notes that the entry at `version` includes this instance's change `seq`.
    fn mine<T: Deliver>(&mut self, name: &T::Name, version: i64, seq: u64) {
        let mine = T::versions(&mut self.applied).mine.entry(name.clone()).or_insert((0, 0));
        if seq >= mine.1 {
            *mine = (version, seq);
        }
    }

    fn observe(&self, round_trip: Duration) {
        let mut trips = self.trips.lock().expect("the round trips' lock is never poisoned");
        trips.observe(round_trip);
        self.control.set_lease_wait(trips.lease_wait());
    }

    /// An announcement: a hint that the rows it names changed. Takes every announcement already
    /// queued too, then reads each row named (or, past a few dozen, catches up instead).
    async fn announced(
        &mut self,
        db: &TeamDatabase,
        first: &str,
        heard: &mut mpsc::Receiver<Heard>,
    ) -> Result<(), StoreError> {
        let mut hints = HashSet::new();
        let mut note = Some(first.to_owned());
        let mut taken = 0;
        while let Some(payload) = note.take() {
            taken += 1;
            match Hint::parse(&payload) {
                Ok(hint) => {
                    hints.insert(hint);
                }
                Err(error) => {
                    tracing::debug!(%error, "ignored a team announcement that names no row");
                }
            }
            if taken < HINTS {
                note = match heard.try_recv() {
                    Ok(Heard::Announced(payload)) => Some(payload),
                    Ok(Heard::Lost(error)) => return Err(error),
                    Err(_) => None,
                };
            }
        }
        if hints.len() > HINTS_READ_ONE_BY_ONE {
            let since = self.caught_up.1;
            return self.catch_up(db, since).await.map(drop);
        }
        for hint in hints {
            match hint {
                Hint::Breaker(name) => {
                    if let (_, Some(entry)) = db.read::<Breakers>(&name).await? {
                        self.take_in::<Breakers>(&entry, false);
                    }
                }
                Hint::Credential(name) => {
                    if let (_, Some(entry)) = db.read::<Credentials>(&name).await? {
                        self.take_in::<Credentials>(&entry, false);
                    }
                }
                Hint::Lockout(name) => {
                    if let (_, Some(entry)) = db.read::<Lockouts>(&name).await? {
                        self.take_in::<Lockouts>(&entry, false);
                    }
                }
            }
        }
        Ok(())
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
        let versions = T::versions(&mut self.applied);
        let covers = versions.covers(&entry.name, entry.stamp.version);
        let known = versions.taken.entry(entry.name.clone()).or_insert(i64::MIN);
        let fresh = entry.stamp.version > *known || (own && entry.stamp.version == *known);
        if !fresh {
            return;
        }
        *known = entry.stamp.version;
        T::hand_over(self, entry, covers, self.clock.now());
    }

    /// Takes `entry` in as absolute state: whatever this instance has of it is replaced.
    fn force_in<T: Deliver>(&mut self, entry: &Entry<T::Name, T::Value>) {
        let known =
            T::versions(&mut self.applied).taken.entry(entry.name.clone()).or_insert(i64::MIN);
        *known = (*known).max(entry.stamp.version);
        T::hand_over(self, entry, u64::MAX, self.clock.now());
    }

    /// Heartbeat: alive, clock, members, identities.
    async fn beat(&mut self, db: &TeamDatabase) -> Result<(), StoreError> {
        db.heartbeat(&self.options.instance, &self.options.version).await?;
        let sent = self.clock.now();
        let asked = Instant::now();
        let db_now = db.now().await?;
        self.observe(asked.elapsed());
        let received = self.clock.now();
        self.offset.observe(sent, db_now, received);
        let members = db.members(MEMBERS_WITHIN).await?;
        self.refresh_identities();
        self.publish_context(db);
        self.status.send_modify(|s| s.members = members);
        self.publish();
        Ok(())
    }

    fn refresh_identities(&mut self) {
        if let Some(salt) = &self.salt {
            self.identities = (self.identities_from)(salt);
        }
    }

    /// Gives the lease half the database and the current names, once connected.
    fn publish_context(&self, db: &TeamDatabase) {
        if !self.status.borrow().connected {
            return;
        }
        let identities = Arc::new(self.identities.clone());
        self.context.send_replace(Some(LeaseContext { db: db.clone(), identities }));
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
        self.control.set_online(connected);
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
        let dropped = self.dropped + self.control.dropped();
        let offset = self.offset.offset_ms();
        let resynced = self.resynced;
        let wait = self.trips.lock().expect("never poisoned").lease_wait();
        self.status.send_if_modified(|s| {
            let changed = (s.backlog, s.dropped, s.clock_offset_ms, s.resynced, s.lease_wait)
                != (backlog, dropped, offset, resynced, wait);
            s.backlog = backlog;
            s.dropped = dropped;
            s.clock_offset_ms = offset;
            s.resynced = resynced;
            s.lease_wait = wait;
            changed
        });
    }
}

/// The lease half of the sync task: answers lease requests and releases, one statement each,
/// concurrently with the writes of the other half (its own connection from the pool).
struct LeaseHalf {
    me: InstanceId,
    requests: mpsc::Receiver<LeaseMessage>,
    /// Taken from `requests` while looking for someone to hand a late grant to.
    queued: VecDeque<LeaseMessage>,
    control: LinkControl,
    context: watch::Receiver<Option<LeaseContext>>,
    registry: Arc<HealthRegistry>,
    trips: Arc<Mutex<RoundTrips>>,
    taken: mpsc::UnboundedSender<Entry<TeamProvider, SharedBreaker>>,
}

/// What a granted lease is, to hand it on or release it.
enum Held {
    HalfOpen(TeamProvider),
    Probe(String),
}

impl LeaseHalf {
    async fn run(mut self) {
        loop {
            let message = match self.queued.pop_front() {
                Some(message) => message,
                None => match self.requests.recv().await {
                    Some(message) => message,
                    None => return,
                },
            };
            let context = self.context.borrow().clone();
            match message {
                LeaseMessage::Ask(request) => self.ask(request, context).await,
                LeaseMessage::Release(scope) => {
                    let Some(context) = context else { continue };
                    let Some(name) = probe_scope(&context.identities, &scope) else { continue };
                    if let Err(error) = context.db.release_probe(&name, &self.me).await {
                        tracing::debug!(%error, "a probe's team slot is left to run out");
                    }
                }
            }
        }
    }

    fn observe(&self, round_trip: Duration) {
        let mut trips = self.trips.lock().expect("the round trips' lock is never poisoned");
        trips.observe(round_trip);
        self.control.set_lease_wait(trips.lease_wait());
    }

    async fn ask(&mut self, request: LeaseRequest, context: Option<LeaseContext>) {
        if request.answer.is_closed() {
            // Its asker gave up before the question was even asked.
            return;
        }
        let Some(context) = context else {
            let _ = request.answer.send(LeaseAnswer::Unavailable);
            return;
        };
        let asked = Instant::now();
        let (answer, held) = match &request.scope {
            LeaseScope::HalfOpen(provider) => {
                let Some(name) = context.identities.provider(provider).cloned() else {
                    let _ = request.answer.send(LeaseAnswer::Unavailable);
                    return;
                };
                let policy = self.registry.breaker_policy(provider);
                let times = (request.lasts, policy.probe_timeout, policy.longest());
                match context.db.lease_half_open(&name, &self.me, times).await {
                    Err(error) => {
                        tracing::debug!(%error, "no answer to a lease request");
                        (LeaseAnswer::Unavailable, None)
                    }
                    Ok(reply) => match (reply.granted, reply.current) {
                        (Some(granted), _) => {
                            let _ = self.taken.send(granted);
                            (LeaseAnswer::Granted, Some(Held::HalfOpen(name)))
                        }
                        // The team has never heard of this breaker: decide alone.
                        (None, None) => (LeaseAnswer::Unavailable, None),
                        (None, Some(current)) => {
                            let _ = self.taken.send(current);
                            (LeaseAnswer::Refused, None)
                        }
                    },
                }
            }
            LeaseScope::Probe(scope) => {
                let Some(name) = probe_scope(&context.identities, scope) else {
                    let _ = request.answer.send(LeaseAnswer::Unavailable);
                    return;
                };
                let policy = self.registry.breaker_policy(scope_provider(scope));
                let honoured = policy.probe_timeout.max(request.lasts);
                match context.db.lease_probe(&name, &self.me, (request.lasts, honoured)).await {
                    Err(error) => {
                        tracing::debug!(%error, "no answer to a lease request");
                        (LeaseAnswer::Unavailable, None)
                    }
                    Ok(true) => (LeaseAnswer::Granted, Some(Held::Probe(name))),
                    Ok(false) => (LeaseAnswer::Refused, None),
                }
            }
        };
        self.observe(asked.elapsed());
        if request.answer.send(answer).is_ok() {
            return;
        }
        let Some(held) = held else { return };
        // Granted after its asker gave up: the next request of this instance that waits for
        // the same slot gets it; none waits, it is released at once.
        while let Ok(message) = self.requests.try_recv() {
            self.queued.push_back(message);
        }
        let waiting = self.queued.iter().position(|m| {
            matches!(m, LeaseMessage::Ask(r) if r.scope == request.scope && !r.answer.is_closed())
        });
        if let Some(LeaseMessage::Ask(next)) = waiting.and_then(|i| self.queued.remove(i))
            && next.answer.send(LeaseAnswer::Granted).is_ok()
        {
            tracing::debug!(scope = ?request.scope, "a late lease went to the next request");
            return;
        }
        let released = match held {
            Held::HalfOpen(name) => match context.db.release_half_open(&name, &self.me).await {
                Ok(entry) => {
                    if let Some(entry) = entry {
                        let _ = self.taken.send(entry);
                    }
                    Ok(())
                }
                Err(error) => Err(error),
            },
            Held::Probe(name) => context.db.release_probe(&name, &self.me).await,
        };
        if let Err(error) = released {
            tracing::debug!(%error, "a late lease is left to run out");
        }
    }
}

/// The team's name of a recovery probe's scope, if the team shares it.
fn probe_scope(ids: &TeamIdentities, scope: &ProbeScope) -> Option<String> {
    Some(match scope {
        ProbeScope::Provider { provider } => {
            format!("provider {}", ids.provider(provider)?.as_str())
        }
        ProbeScope::Credential { key } => {
            let c = ids.credential(key)?;
            format!("credential {} {}", c.provider.as_str(), c.key_hash)
        }
        ProbeScope::Model { key } => {
            let m = ids.model(key)?;
            format!(
                "model {} {} {}",
                m.credential.provider.as_str(),
                m.credential.key_hash,
                m.model
            )
        }
    })
}

fn scope_provider(scope: &ProbeScope) -> &ProviderId {
    match scope {
        ProbeScope::Provider { provider } => provider,
        ProbeScope::Credential { key } => &key.provider,
        ProbeScope::Model { key } => &key.provider,
    }
}
