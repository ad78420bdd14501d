//! One layer's entries: looked up with their lazy transitions applied, changed, and
//! forgotten, every transition published on the registry's event stream.

use std::hash::Hash;
use std::time::Duration;

use indexmap::Equivalent;
use tokio::sync::broadcast;

use super::FxIndexMap;
use super::layer::Layer;
use crate::clock::UnixMillis;
use crate::ids::InstanceId;
use crate::resilience::{Changed, HealthEvent};

/// Publishes events; sending never blocks and works with no subscriber.
#[derive(Debug)]
pub(super) struct Publisher(pub(super) broadcast::Sender<HealthEvent>);

impl Publisher {
    pub(super) fn send(&self, event: HealthEvent) {
        // An error only means nobody is listening right now, which is fine.
        let _ = self.0.send(event);
    }
}

pub(super) struct Table<L: Layer> {
    pub(super) map: FxIndexMap<L::Key, L::Entry>,
    /// Where the next sweep starts.
    cursor: usize,
    /// A healthy entry unchanged this long is forgotten, on the next look or sweep.
    idle: Duration,
    /// In a team: which instance recorded an entry that came from the team. An
    /// entry changed here since has none until the team's answer names the recorder again.
    pub(super) origins: FxIndexMap<L::Key, InstanceId>,
    /// In a team: the sequence number of the last change of each entry sent to the
    /// team and not yet seen in a team entry. A team entry that does not include it is older
    /// than this instance's state, and does not replace it. Kept when the entry itself goes (a
    /// reset's clear is such a change).
    pub(super) sent: FxIndexMap<L::Key, u64>,
}

impl<L: Layer> Table<L> {
    pub(super) fn new(idle: Duration) -> Self {
        Self {
            map: FxIndexMap::default(),
            cursor: 0,
            idle,
            origins: FxIndexMap::default(),
            sent: FxIndexMap::default(),
        }
    }

    /// Removes the entry at `index`, and what is known of its origin.
    fn take(&mut self, index: usize) -> (L::Key, L::Entry) {
        let (k, e) = self.map.swap_remove_index(index).expect("index is live");
        self.origins.swap_remove(&k);
        (k, e)
    }

    fn publish(&self, index: usize, policy: &L::Policy, now: UnixMillis, out: &Publisher) {
        let (k, e) = self.map.get_index(index).expect("index is live");
        out.send(L::event(k, Some(L::record(e, policy)), now));
    }

    /// Publishes a transition of the entry at `index`, dropping it if it became pristine (an
    /// entry that got there by counter ticks alone is dropped silently: it was never published
    /// in that state, and a row left behind in the store is forgotten as idle after a restart).
    /// Returns whether the entry is still there.
    fn settle(
        &mut self,
        index: usize,
        changed: bool,
        policy: &L::Policy,
        now: UnixMillis,
        out: &Publisher,
    ) -> bool {
        let (_, entry) = self.map.get_index(index).expect("index is live");
        if L::is_pristine(entry) {
            let (k, _) = self.take(index);
            if changed {
                out.send(L::event(&k, None, now));
            }
            return false;
        }
        if changed {
            self.publish(index, policy, now, out);
        }
        true
    }

    /// The entry for `key` at `now` (after its lazy transitions, which are published).
    pub(super) fn get<Q>(
        &mut self,
        key: &Q,
        now: UnixMillis,
        policy: &L::Policy,
        out: &Publisher,
    ) -> Option<&mut L::Entry>
    where
        Q: ?Sized + Hash + Equivalent<L::Key>,
    {
        let (index, _, entry) = self.map.get_full_mut(key)?;
        let changed = L::refresh(entry, now, policy).is_yes();
        // Forgetting is lazy too: an entry that has been healthy and quiet for `idle` is as
        // good as new. Without this a degraded provider that the planner ranks last (so it
        // sees no successes to leak its failures away) would stay demoted for ever.
        if L::is_healthy(entry, now, policy) && now.since(L::changed_at(entry)) >= self.idle {
            let (k, _) = self.take(index);
            out.send(L::event(&k, None, now));
            return None;
        }
        if !self.settle(index, changed, policy, now, out) {
            return None;
        }
        self.map.get_index_mut(index).map(|(_, e)| e)
    }

    /// Applies `change` to the entry for `key`, or to a fresh one from `create` when the key is
    /// untracked (and `create` is given); publishes the result. Returns whether `change` changed
    /// the entry at all (a counter included).
    pub(super) fn update<Q>(
        &mut self,
        key: &Q,
        now: UnixMillis,
        policy: &L::Policy,
        out: &Publisher,
        create: Option<impl FnOnce() -> (L::Key, L::Entry)>,
        change: impl FnOnce(&mut L::Entry) -> Changed,
    ) -> bool
    where
        Q: ?Sized + Hash + Equivalent<L::Key>,
    {
        let _ = self.get(key, now, policy, out);
        let index = match (self.map.get_index_of(key), create) {
            (Some(index), _) => index,
            (None, Some(create)) => {
                let (k, fresh) = create();
                self.map.insert_full(k, fresh).0
            }
            (None, None) => return false,
        };
        let (_, entry) = self.map.get_index_mut(index).expect("index is live");
        let before = L::phase(entry, policy);
        let changed = change(entry).is_yes();
        // A counter that moved without the phase moving is kept in memory, not published.
        let transition = changed && L::phase(entry, policy) != before;
        if transition {
            self.origins.swap_remove(key);
        }
        self.settle(index, transition, policy, now, out);
        changed
    }

    /// Applies `change` to the tracked entry for `key` and publishes the result as a transition
    /// whatever its phase: for a probe's verdict, which clears or extends a bench that a reader
    /// must see go (a lapsed lock forgotten, a degraded breaker back to closed). Returns whether
    /// it changed anything.
    pub(super) fn force<Q>(
        &mut self,
        key: &Q,
        now: UnixMillis,
        policy: &L::Policy,
        out: &Publisher,
        change: impl FnOnce(&mut L::Entry) -> Changed,
    ) -> bool
    where
        Q: ?Sized + Hash + Equivalent<L::Key>,
    {
        let _ = self.get(key, now, policy, out);
        let Some((index, _, entry)) = self.map.get_full_mut(key) else { return false };
        if !change(entry).is_yes() {
            return false;
        }
        self.origins.swap_remove(key);
        self.settle(index, true, policy, now, out);
        true
    }

    /// Replaces the entry for `key` with `entry`, which the team recorded (`origin`), publishing
    /// it if it differs from what was here. A pristine entry removes the key.
    pub(super) fn put(
        &mut self,
        key: &L::Key,
        entry: L::Entry,
        origin: &InstanceId,
        policy: &L::Policy,
        now: UnixMillis,
        out: &Publisher,
    ) where
        L::Record: PartialEq,
    {
        let record = L::record(&entry, policy);
        if L::is_pristine(&entry) {
            if let Some(index) = self.map.get_index_of(key) {
                let (k, _) = self.take(index);
                out.send(L::event(&k, None, now));
            }
            return;
        }
        let before = self.map.insert(key.clone(), entry);
        self.origins.insert(key.clone(), origin.clone());
        if before.is_none_or(|b| L::record(&b, policy) != record) {
            out.send(L::event(key, Some(record), now));
        }
    }

    /// Removes every entry `pick` selects, publishing each removal. Returns their keys.
    pub(super) fn remove_where(
        &mut self,
        now: UnixMillis,
        out: &Publisher,
        pick: impl Fn(&L::Key) -> bool,
    ) -> Vec<L::Key> {
        let mut removed = Vec::new();
        self.map.retain(|k, _| {
            let remove = pick(k);
            if remove {
                out.send(L::event(k, None, now));
                removed.push(k.clone());
            }
            !remove
        });
        for k in &removed {
            self.origins.swap_remove(k);
        }
        self.cursor = 0;
        removed
    }

    /// Visits up to `budget` entries from the cursor, forgetting healthy ones unchanged for at
    /// least `idle`. Returns how many it visited.
    pub(super) fn sweep<'p>(
        &mut self,
        now: UnixMillis,
        idle: Duration,
        budget: usize,
        policy: impl Fn(&L::Key) -> &'p L::Policy,
        out: &Publisher,
    ) -> usize
    where
        L::Policy: 'p,
    {
        // At most one lap: a large budget must not spin on a small table. A whole lap starts at
        // the front, where `swap_remove` only ever pulls unvisited entries into the cursor's
        // place, so every entry is visited exactly once.
        if budget >= self.map.len() {
            self.cursor = 0;
        }
        let budget = budget.min(self.map.len());
        let mut visited = 0;
        while visited < budget && !self.map.is_empty() {
            if self.cursor >= self.map.len() {
                self.cursor = 0;
            }
            visited += 1;
            let (key, entry) = self.map.get_index_mut(self.cursor).expect("cursor is in range");
            let p = policy(key);
            let refreshed = L::refresh(entry, now, p).is_yes();
            let forget = L::is_healthy(entry, now, p) && now.since(L::changed_at(entry)) >= idle;
            if forget || L::is_pristine(entry) {
                let (k, _) = self.take(self.cursor);
                out.send(L::event(&k, None, now));
            } else {
                if refreshed {
                    self.publish(self.cursor, p, now, out);
                }
                self.cursor += 1;
            }
        }
        visited
    }
}
