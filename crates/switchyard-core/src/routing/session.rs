//! Sessions (RESILIENCE.md §11): an agent's conversation keeps to the (target, credential)
//! that served it, so the provider's prompt cache for its prefix stays warm.
//!
//! A session is what the client says it is (Claude Code's session id, Codex's `session-id`,
//! a `prompt_cache_key`), else a digest of (local key, system prompt, first user message):
//! [`SessionKey`]. Its [`Pin`] is the candidate that last served it.
//!
//! Rules, in the order [`steer`] applies them to a request's plan:
//! - A session without a pin is new: the combo's strategy and the provider's credential
//!   selection choose for it (the caller plans it as `fresh`), and the candidate that serves
//!   binds it.
//! - A pinned session goes to its pin while that candidate is in the plan (eligible). When it
//!   is not (benched), the session moves: to another credential of the same target if one is
//!   eligible, else wherever the plan goes; whatever serves re-pins it, and the trace says so.
//!   Never blocked.
//! - A session that moved off a benched *target* remembers it as `home` and returns when home
//!   is eligible again (the user's order put it there; RESILIENCE.md §3 decides when a healed
//!   target is trusted). One that moved between *credentials* of a target stays where it went:
//!   a move back would pay for its prompt a second time.
//! - Only the candidate that served pins: a hedge loser or a probe never does.
//!
//! The table is bounded by count (the least recently seen session leaves first) and by idle
//! time, both settings; everything here is pure and takes `now` from the caller's clock.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;

use super::planner::Plan;
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, ModelId, ProviderId};

/// A session's identity: 128 bits of digest, namespaced by the local key that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey(u128);

impl SessionKey {
    /// The session a client named (in a header or a body field: one client says it the same
    /// way every turn).
    pub fn named(local_key: &str, id: &str) -> Self {
        Self(Fnv128::new().write(b"named").write(local_key).write(id).finish())
    }

    /// The session of a client that names none: its key, its system prompt and its first user
    /// message, which stay the same for every turn of one conversation.
    pub fn derived(local_key: &str, system: &str, first_user: &str) -> Self {
        Self(
            Fnv128::new()
                .write(b"derived")
                .write(local_key)
                .write(system)
                .write(first_user)
                .finish(),
        )
    }

    /// The key as it is written (request log, trace, persistence): 32 hex digits.
    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    pub fn parse_hex(text: &str) -> Option<Self> {
        (text.len() == 32).then(|| u128::from_str_radix(text, 16).ok().map(Self)).flatten()
    }
}

impl fmt::Display for SessionKey {
    /// The first 12 hex digits: enough to tell sessions apart on a page.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The top 48 bits are the first 12 of `to_hex`'s 32 digits.
        write!(f, "{:012x}", self.0 >> 80)
    }
}

/// FNV-1a, 128 bits: stable across processes and versions (the key is persisted), fast on the
/// few kilobytes a system prompt holds, no dependency. Each part is length-prefixed, so
/// ("ab", "c") and ("a", "bc") differ.
struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    fn new() -> Self {
        Self(Self::OFFSET)
    }

    fn write(mut self, part: impl AsRef<[u8]>) -> Self {
        let part = part.as_ref();
        for byte in (part.len() as u64).to_le_bytes().iter().chain(part) {
            self.0 ^= u128::from(*byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
        self
    }

    fn finish(self) -> u128 {
        self.0
    }
}

/// Where a session is pinned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pin {
    pub key: CandidateKey,
    /// The target it moved off while that was benched, to return to once it is eligible.
    pub home: Option<(ProviderId, ModelId)>,
}

/// What [`steer`] did to a request's plan, for the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Steer {
    /// No pin: the plan is the strategy's.
    New,
    /// The pinned candidate goes first.
    Kept,
    /// Home is eligible again: its candidates go first.
    Returned,
    /// The pin is not in the plan (benched): the session goes elsewhere, another credential
    /// of its target first.
    Moved { from: CandidateKey },
}

impl Steer {
    /// The trace's word for it.
    pub fn code(&self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Kept => "kept",
            Self::Returned => "returned",
            Self::Moved { .. } => "moved",
        }
    }
}

/// Puts the candidates `pin` asks for first in `plan` (see the module docs).
pub fn steer(plan: &mut Plan, pin: Option<&Pin>) -> Steer {
    let Some(pin) = pin else { return Steer::New };
    let same_target = |c: &CandidateKey, (provider, model): (&ProviderId, &ModelId)| {
        c.provider == *provider && c.model == *model
    };
    if let Some((provider, model)) = &pin.home
        && bring_forward(plan, |c| same_target(c, (provider, model)))
    {
        return Steer::Returned;
    }
    if bring_forward(plan, |c| *c == pin.key) {
        return Steer::Kept;
    }
    bring_forward(plan, |c| same_target(c, (&pin.key.provider, &pin.key.model)));
    Steer::Moved { from: pin.key.clone() }
}

/// Puts `credential`'s candidates first: a conversation the upstream behind it keeps (a
/// Responses `previous_response_id` answered by passthrough) goes there before anywhere else,
/// the same way a session goes to its pin.
pub fn prefer_credential(plan: &mut Plan, credential: &CredentialKey) {
    bring_forward(plan, |c| {
        c.provider == credential.provider && c.credential == credential.credential
    });
}

/// Moves the candidates `wanted` picks to the front, each group keeping its order; `false`
/// when there is none.
fn bring_forward(plan: &mut Plan, wanted: impl Fn(&CandidateKey) -> bool) -> bool {
    if !plan.candidates.iter().any(|c| wanted(&c.key)) {
        return false;
    }
    // Stable: `false` (wanted) sorts first.
    plan.candidates.sort_by_key(|c| !wanted(&c.key));
    true
}

/// How a served request changed its session's pin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Repin {
    Bound,
    Kept,
    /// Another credential of the same target: no home, it stays there.
    Credential {
        from: CandidateKey,
    },
    /// Another target: the old one (or the home it already had) is home now.
    Target {
        from: CandidateKey,
    },
    /// Back on its home target.
    Home,
}

/// Bounds of the session table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions kept at most; the least recently seen leaves first.
    pub max: usize,
    /// A session not seen for this long is forgotten.
    pub idle_ms: u64,
}

#[derive(Debug)]
struct Entry {
    pin: Pin,
    seen: UnixMillis,
    /// Its place in `by_age`.
    tick: u64,
}

/// Every session's pin, bounded (see the module docs).
#[derive(Debug)]
pub struct Sessions {
    limits: SessionLimits,
    entries: HashMap<SessionKey, Entry>,
    /// Sessions by when they were last seen, oldest first.
    by_age: BTreeMap<u64, SessionKey>,
    next_tick: u64,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self { limits, entries: HashMap::new(), by_age: BTreeMap::new(), next_tick: 0 }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Runs on `limits` from now on; sessions past the new count leave at once.
    pub fn set_limits(&mut self, limits: SessionLimits) {
        self.limits = limits;
        self.trim();
    }

    /// `session`'s pin at `now`, when it has one and has not been idle too long.
    pub fn pin(&mut self, session: SessionKey, now: UnixMillis) -> Option<Pin> {
        let entry = self.entries.get(&session)?;
        if now.since(entry.seen).as_millis() >= u128::from(self.limits.idle_ms) {
            self.remove(session);
            return None;
        }
        Some(entry.pin.clone())
    }

    /// `served` answered a request of `session` at `now`: binds, keeps or moves its pin.
    pub fn served(&mut self, session: SessionKey, served: &CandidateKey, now: UnixMillis) -> Repin {
        let old = self.pin(session, now);
        let (pin, repin) = match old {
            None => (Pin { key: served.clone(), home: None }, Repin::Bound),
            Some(pin) if pin.key == *served => (pin, Repin::Kept),
            Some(pin) => {
                let target = |k: &CandidateKey| (k.provider.clone(), k.model.clone());
                if pin.home.as_ref() == Some(&target(served)) {
                    (Pin { key: served.clone(), home: None }, Repin::Home)
                } else if target(&pin.key) == target(served) {
                    let from = pin.key.clone();
                    (Pin { key: served.clone(), home: pin.home }, Repin::Credential { from })
                } else {
                    let home = pin.home.or_else(|| Some(target(&pin.key)));
                    let from = pin.key;
                    (Pin { key: served.clone(), home }, Repin::Target { from })
                }
            }
        };
        self.insert(session, pin, now);
        repin
    }

    /// [`Self::served`] for a session that was not pinned before and whose plan put `first`
    /// first: bound elsewhere because `first` was benched or failed, it takes `first`'s target
    /// as its home, to return to once that is eligible, as a session moved off it does (the
    /// plan's order says it is better). A session started while its subscription's window was
    /// spent goes back to the subscription at the reset, not on paying for an API key (issue
    /// 28).
    pub fn served_after(
        &mut self,
        session: SessionKey,
        served: &CandidateKey,
        now: UnixMillis,
        first: &CandidateKey,
    ) -> Repin {
        let repin = self.served(session, served, now);
        let elsewhere = (&first.provider, &first.model) != (&served.provider, &served.model);
        if repin == Repin::Bound
            && elsewhere
            && let Some(entry) = self.entries.get_mut(&session)
        {
            entry.pin.home = Some((first.provider.clone(), first.model.clone()));
        }
        repin
    }

    /// The target `session` moved off and returns to once it is eligible, if any.
    pub fn home(&self, session: SessionKey) -> Option<(ProviderId, ModelId)> {
        self.entries.get(&session)?.pin.home.clone()
    }

    /// Restores a pin read back at start (the newest served request of a session, and the
    /// home it recorded).
    pub fn restore(&mut self, session: SessionKey, pin: Pin, seen: UnixMillis, now: UnixMillis) {
        if now.since(seen).as_millis() < u128::from(self.limits.idle_ms) {
            self.insert(session, pin, seen);
        }
    }

    fn insert(&mut self, session: SessionKey, pin: Pin, seen: UnixMillis) {
        self.remove(session);
        let tick = self.next_tick;
        self.next_tick += 1;
        self.by_age.insert(tick, session);
        self.entries.insert(session, Entry { pin, seen, tick });
        self.trim();
    }

    fn remove(&mut self, session: SessionKey) {
        if let Some(entry) = self.entries.remove(&session) {
            self.by_age.remove(&entry.tick);
        }
    }

    fn trim(&mut self) {
        while self.entries.len() > self.limits.max {
            let Some((_, oldest)) = self.by_age.pop_first() else { break };
            self.entries.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::planner::Candidate;

    fn key(provider: &str, credential: &str, model: &str) -> CandidateKey {
        CandidateKey::new(provider, credential, model)
    }

    fn plan(keys: &[CandidateKey]) -> Plan {
        Plan {
            candidates: keys
                .iter()
                .enumerate()
                .map(|(target, key)| Candidate { target, key: key.clone() })
                .collect(),
            ..Plan::default()
        }
    }

    fn order(plan: &Plan) -> Vec<String> {
        plan.candidates.iter().map(|c| c.key.to_string()).collect()
    }

    const LIMITS: SessionLimits = SessionLimits { max: 3, idle_ms: 60_000 };
    const T0: UnixMillis = UnixMillis(1_800_000_000_000);

    #[test]
    fn session_keys_are_stable_distinct_and_namespaced_by_local_key() {
        let a = SessionKey::named("key-a", "s1");
        assert_eq!(a, SessionKey::named("key-a", "s1"));
        assert_ne!(a, SessionKey::named("key-b", "s1"));
        assert_ne!(a, SessionKey::named("key-a", "s2"));
        assert_ne!(SessionKey::named("k", "s"), SessionKey::derived("k", "s", ""));
        assert_ne!(SessionKey::derived("k", "ab", "c"), SessionKey::derived("k", "a", "bc"));
        assert_eq!(SessionKey::parse_hex(&a.to_hex()), Some(a));
        assert_eq!(a.to_string(), a.to_hex()[..12], "the first 12 digits");
        // Fixed: the key is persisted, so a new version must derive the same one.
        assert_eq!(SessionKey::named("k", "v").to_hex(), "e1aecdc8f5ce5d1a217c15eacc9b2f46");
    }

    #[test]
    fn a_pinned_session_goes_to_its_pin_and_moves_when_the_pin_is_benched() {
        let (a1, a2, b1) = (key("a", "1", "m"), key("a", "2", "m"), key("b", "1", "n"));
        let pin = Pin { key: a2.clone(), home: None };
        let mut p = plan(&[a1.clone(), a2.clone(), b1.clone()]);
        assert_eq!(steer(&mut p, Some(&pin)), Steer::Kept);
        assert_eq!(order(&p), ["a/m@2", "a/m@1", "b/n@1"]);
        // a/2 benched: another credential of the same target first.
        let mut p = plan(&[b1.clone(), a1.clone()]);
        assert_eq!(steer(&mut p, Some(&pin)), Steer::Moved { from: a2.clone() });
        assert_eq!(order(&p), ["a/m@1", "b/n@1"]);
        // The whole target benched: the plan's own order.
        let mut p = plan(std::slice::from_ref(&b1));
        assert_eq!(steer(&mut p, Some(&pin)), Steer::Moved { from: a2 });
        assert_eq!(order(&p), ["b/n@1"]);
        let mut p = plan(&[a1, b1]);
        assert_eq!(steer(&mut p, None), Steer::New);
        assert_eq!(order(&p), ["a/m@1", "b/n@1"], "a new session: the strategy's plan");
    }

    #[test]
    fn a_session_moved_off_a_target_returns_home_and_one_moved_between_credentials_stays() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "1");
        let (a1, a2, b1) = (key("a", "1", "m"), key("a", "2", "m"), key("b", "1", "n"));
        assert_eq!(sessions.served(s, &a1, T0), Repin::Bound);
        assert_eq!(sessions.served(s, &a1, T0), Repin::Kept);
        assert_eq!(sessions.served(s, &a2, T0), Repin::Credential { from: a1.clone() });
        let pin = sessions.pin(s, T0).unwrap();
        assert_eq!((pin.key.clone(), pin.home.clone()), (a2.clone(), None));
        // a/1 heals: the session stays on a/2.
        let mut p = plan(&[a1.clone(), a2.clone(), b1.clone()]);
        assert_eq!(steer(&mut p, Some(&pin)), Steer::Kept);
        assert_eq!(order(&p)[0], "a/m@2");
        // Target a benched: b serves, a is home.
        assert_eq!(sessions.served(s, &b1, T0), Repin::Target { from: a2.clone() });
        let pin = sessions.pin(s, T0).unwrap();
        assert_eq!(pin.home, Some((ProviderId::from("a"), ModelId::from("m"))));
        let mut p = plan(std::slice::from_ref(&b1));
        assert_eq!(steer(&mut p, Some(&pin)), Steer::Kept, "home still benched");
        let mut p = plan(&[b1.clone(), a1.clone()]);
        assert_eq!(steer(&mut p, Some(&pin)), Steer::Returned);
        assert_eq!(order(&p), ["a/m@1", "b/n@1"]);
        assert_eq!(sessions.served(s, &a1, T0), Repin::Home);

        // A session bound away from its plan's first target returns to it as its home.
        let late = SessionKey::named("k", "born while a was benched");
        assert_eq!(sessions.served_after(late, &b1, T0, &a1), Repin::Bound);
        assert_eq!(sessions.home(late), Some(("a".into(), "m".into())));
        let first_served = SessionKey::named("k", "a served at once");
        assert_eq!(sessions.served_after(first_served, &a2, T0, &a1), Repin::Bound);
        assert_eq!(sessions.home(first_served), None, "another key of the first target is no move");
        assert_eq!(sessions.pin(s, T0).unwrap().home, None);
    }

    #[test]
    fn the_table_forgets_the_least_recently_seen_and_the_idle() {
        let mut sessions = Sessions::new(LIMITS);
        let target = key("a", "1", "m");
        let s = |n: u8| SessionKey::named("k", &n.to_string());
        for n in 0..3 {
            sessions.served(s(n), &target, T0);
        }
        sessions.served(s(0), &target, UnixMillis(T0.0 + 1));
        sessions.served(s(3), &target, UnixMillis(T0.0 + 2));
        assert_eq!(sessions.len(), 3);
        assert!(sessions.pin(s(1), T0).is_none(), "the least recently seen left");
        assert!(sessions.pin(s(0), T0).is_some());
        let later = UnixMillis(T0.0 + LIMITS.idle_ms + 2);
        assert!(sessions.pin(s(3), later).is_none(), "idle too long");
        assert_eq!(sessions.len(), 2);
        let pin = |home| Pin { key: target.clone(), home };
        sessions.restore(s(9), pin(None), T0, later);
        assert!(sessions.pin(s(9), later).is_none(), "a restored pin past its idle time");
        let home = Some((ProviderId::from("first"), ModelId::from("m")));
        sessions.restore(s(9), pin(home.clone()), later, later);
        assert_eq!(sessions.pin(s(9), later), Some(pin(home.clone())), "with its home");
        assert_eq!(sessions.home(s(9)), home);
    }
}
