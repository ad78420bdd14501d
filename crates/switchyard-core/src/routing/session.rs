//! Sessions (RESILIENCE.md §11): an agent's conversation keeps to the (target, credential)
//! that served it, so the provider's prompt cache for its prefix stays warm.
//!
//! A session is what the client says it is (Claude Code's session id, Codex's `session-id`,
//! a `prompt_cache_key`), else a digest of (local key, system prompt, first user message):
//! [`SessionKey`]. Its [`Pin`] is the candidate that last served it.
//!
//! Rules, in the order [`Sessions::steer`] applies them to a request's plan:
//! - A session without a pin is new: the combo's strategy and the provider's credential
//!   selection choose for it (the caller plans it as `fresh`), and the candidate that serves
//!   binds it.
//! - A retry never lands where it just broke. A request of the session whose stream broke
//!   after content on a candidate (a cut, a stall, an error event) marks the session "broke
//!   there" before the client reads the end of that stream ([`Sessions::broke`]); its next
//!   request, first turn or not, starts on another provider, else another credential of the
//!   same target, and only then where it broke (a combo of one goes where it can).
//! - A session that moved off a *target* remembers it as `home` and returns once home has
//!   healed, never merely because it is eligible again: left after a break, home must have
//!   served a whole streamed answer since (any session's; a one-token recovery probe restores
//!   a breaker, not a home); left for a bench or a failure before content, any whole answer or
//!   a probe's success will do. A degraded provider has not healed. One that moved between
//!   *credentials* of a target stays where it went: a move back would pay for its prompt a
//!   second time.
//! - In a combo whose strategy is an order, a session pinned below a healthy target (pinned
//!   there by another combo, or while the better one failed) returns to the better one: the
//!   user's order wins over a pin the session never chose. Healthy: its latest outcome was a
//!   success, and its provider is not degraded.
//! - A pinned session otherwise goes to its pin while that candidate is in the plan (eligible).
//!   When it is not (benched), the session moves: to another credential of the same target if
//!   one is eligible, else wherever the plan goes; whatever serves re-pins it, and the trace
//!   says so. Never blocked.
//! - Only the candidate that served pins: a hedge loser or a probe never does. A continuation
//!   that finished an answer pins its session where it finished (that cache holds the prefix).
//!
//! What each target has shown lately (a whole answer, a whole streamed answer, a failure) is
//! kept beside the pins as marks on the table's own counter, so "since the session left" is
//! an order of events, not of clock readings that may tie.
//!
//! The table is bounded by count (the least recently seen session leaves first) and by idle
//! time, both settings; everything here is pure and takes `now` from the caller's clock.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::planner::Plan;
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialKey, ModelId, ProviderId};
use crate::outcome::OutcomeKind;

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

/// A target, as a session's home names it.
pub type Target = (ProviderId, ModelId);

/// A point in the table's order of events: a counter, not a clock, so two events in one
/// millisecond are still ordered. 0 is "never".
type Tick = u64;

/// Why a session left a target, which decides what brings it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// A request of the session broke there after content: back only once the target served
    /// a whole streamed answer since.
    Broke,
    /// The target was benched, or failed before the answer began: back once no failure of
    /// the target is known since its latest success (a whole answer, a recovery probe's). A
    /// bench that was no failure of the target (a rate limit, a spent window: the upstream
    /// said until when) leaves nothing to heal, so the session returns when the bench ends;
    /// so does a home read back at start, whose breaker and benches were read back with it.
    Benched,
}

impl Left {
    pub fn code(self) -> &'static str {
        match self {
            Self::Broke => "broke",
            Self::Benched => "benched",
        }
    }
}

/// The target a session moved off, to return to once it has healed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    pub target: Target,
    pub left: Left,
    /// When it left; what the target showed before does not count.
    since: Tick,
}

impl Home {
    /// A home read back at start: what the target showed before the restart is not known, so
    /// anything it serves from now on counts.
    pub fn restored(target: Target) -> Self {
        Self { target, left: Left::Benched, since: 0 }
    }
}

/// Where a session is pinned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub key: CandidateKey,
    /// The target it moved off, to return to once it has healed.
    pub home: Option<Home>,
    /// Candidates a request of the session broke on after content since it was last served:
    /// its next request starts anywhere else. At most `MAX_BROKE`.
    pub broke: Vec<CandidateKey>,
}

/// Breaks a session remembers at once; an older one is forgotten first.
const MAX_BROKE: usize = 4;

impl Pin {
    pub fn new(key: CandidateKey, home: Option<Home>) -> Self {
        Self { key, home, broke: Vec::new() }
    }

    /// Whether a request of the session is steered by this pin: one that continues the
    /// conversation is; a first turn (sent again as a client retries it, or a new conversation
    /// that starts the same way) is planned as new, unless the session broke and has not
    /// healed since: then it goes where the session went.
    pub fn holds(&self, continuing: bool) -> bool {
        continuing
            || !self.broke.is_empty()
            || self.home.as_ref().is_some_and(|home| home.left == Left::Broke)
    }

    fn broke_on(&self, (provider, model): (&ProviderId, &ModelId)) -> bool {
        self.broke.iter().any(|b| b.provider == *provider && b.model == *model)
    }
}

/// What a target showed since a session left it, that brings the session back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Healed {
    /// It served a whole streamed answer (the session left it after a break).
    WholeStream,
    /// It served a whole answer or a recovery probe (the session left it for a bench).
    Served,
    /// It stands above the pin in the combo's order and its latest outcome was a success.
    Order,
}

impl Healed {
    pub fn code(self) -> &'static str {
        match self {
            Self::WholeStream => "served_whole_stream",
            Self::Served => "served",
            Self::Order => "higher_in_order",
        }
    }
}

/// What [`Sessions::steer`] did to a request's plan, for the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Steer {
    /// No pin: the plan is the strategy's.
    New,
    /// The pinned candidate goes first.
    Kept,
    /// A better target has healed: its candidates go first.
    Returned { to: Target, healed: Healed },
    /// The session leaves its pin: it broke there (every candidate it broke on goes last,
    /// another provider's first), or the pin is not in the plan (benched: another credential
    /// of its target first).
    Moved { from: CandidateKey, left: Left },
}

impl Steer {
    /// The trace's word for it.
    pub fn code(&self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Kept => "kept",
            Self::Returned { .. } => "returned",
            Self::Moved { .. } => "moved",
        }
    }
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

fn target_of(key: &CandidateKey) -> (&ProviderId, &ModelId) {
    (&key.provider, &key.model)
}

fn in_target(key: &CandidateKey, (provider, model): &Target) -> bool {
    key.provider == *provider && key.model == *model
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
    /// Another target: the old one (or the home it already had) is home now, left as `left`.
    Target {
        from: CandidateKey,
        left: Left,
    },
    /// Back on its home target, or on a better one the steer returned it to.
    Home,
}

/// What a target showed, as [`Sessions::shown`] is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// A whole answer (non-streamed), or a recovery probe's success.
    Whole,
    /// A whole streamed answer, to its finish.
    WholeStream,
    /// A failure that charged it (before content, or a break after).
    Failure,
}

impl Shown {
    /// What an attempt that ended as `kind` showed of its target: a success, a failure of the
    /// target itself (it could not answer), or nothing (a rate limit, a spent quota, a refused
    /// key, a request the client got wrong: the target is not what failed).
    pub fn of(kind: OutcomeKind) -> Option<Self> {
        match kind {
            OutcomeKind::Success => Some(Self::Whole),
            OutcomeKind::Transport
            | OutcomeKind::Timeout
            | OutcomeKind::Transient
            | OutcomeKind::ModelUnavailable
            | OutcomeKind::StreamBroken => Some(Self::Failure),
            OutcomeKind::RateLimit
            | OutcomeKind::Auth
            | OutcomeKind::QuotaExhausted
            | OutcomeKind::RequestTooLarge
            | OutcomeKind::Policy
            | OutcomeKind::ClientError
            | OutcomeKind::ModelForbidden
            | OutcomeKind::Aborted => None,
        }
    }
}

/// What a target showed lately, in ticks.
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    served: Tick,
    streamed: Tick,
    failed: Tick,
}

impl Marks {
    /// It served, and has not failed since.
    fn healthy(self) -> bool {
        self.served > self.failed
    }

    /// It failed, and has not served since.
    fn failing(self) -> bool {
        self.failed > self.served
    }

    fn healed(self, home: &Home) -> Option<Healed> {
        match home.left {
            Left::Broke => {
                (self.healthy() && self.streamed > home.since).then_some(Healed::WholeStream)
            }
            Left::Benched => (!self.failing()).then_some(Healed::Served),
        }
    }
}

/// Targets whose marks are kept at most; past it the least recently marked half is forgotten
/// (a target a client names itself counts, so the set is not only the config's).
const MAX_MARKED: usize = 4096;

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

/// Every session's pin, bounded, and what each target showed lately (see the module docs).
#[derive(Debug)]
pub struct Sessions {
    limits: SessionLimits,
    entries: HashMap<SessionKey, Entry>,
    /// Sessions by when they were last seen, oldest first.
    by_age: BTreeMap<u64, SessionKey>,
    next_tick: u64,
    marks: HashMap<Target, Marks>,
    /// The order of marks and moves.
    events: Tick,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self {
            limits,
            entries: HashMap::new(),
            by_age: BTreeMap::new(),
            next_tick: 0,
            marks: HashMap::new(),
            events: 0,
        }
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

    /// Puts the candidates `pin` asks for first in `plan` (see the module docs); `pin` is
    /// one that [`Pin::holds`] the request. `ordered`: the combo's strategy is an order, so a
    /// healthy target above the pin takes the session back. `degraded` says whether a
    /// provider's breaker is degraded (it has not healed).
    pub fn steer(
        &self,
        plan: &mut Plan,
        pin: Option<&Pin>,
        ordered: bool,
        degraded: impl Fn(&ProviderId) -> bool,
    ) -> Steer {
        let Some(pin) = pin else { return Steer::New };
        if let Some(home) = &pin.home
            && !pin.broke_on((&home.target.0, &home.target.1))
            && !degraded(&home.target.0)
            && let Some(healed) = self.marks_of(&home.target).healed(home)
            && bring_forward(plan, |c| in_target(c, &home.target))
        {
            return Steer::Returned { to: home.target.clone(), healed };
        }
        if ordered && let Some(better) = self.better_in_order(plan, pin, &degraded) {
            bring_forward(plan, |c| in_target(c, &better));
            return Steer::Returned { to: better, healed: Healed::Order };
        }
        if let Some(moved) = away_from_breaks(plan, pin) {
            return moved;
        }
        if bring_forward(plan, |c| *c == pin.key) {
            return Steer::Kept;
        }
        bring_forward(plan, |c| target_of(c) == target_of(&pin.key));
        Steer::Moved { from: pin.key.clone(), left: Left::Benched }
    }

    /// The first target of `plan` above `pin`'s in the combo's order that is healthy, where
    /// the session did not break, and that is not its home (the home's own rule says when it
    /// has healed): `None` when the pin's target is not in the plan (then the plan's own
    /// order, the user's, decides anyway).
    fn better_in_order(
        &self,
        plan: &Plan,
        pin: &Pin,
        degraded: &impl Fn(&ProviderId) -> bool,
    ) -> Option<Target> {
        let (provider, model) = target_of(&pin.key);
        let pinned = plan
            .candidates
            .iter()
            .find(|c| c.key.provider == *provider && c.key.model == *model)?
            .target;
        plan.candidates
            .iter()
            .filter(|c| c.target < pinned)
            .filter(|c| !pin.broke_on(target_of(&c.key)) && !degraded(&c.key.provider))
            .filter(|c| !pin.home.as_ref().is_some_and(|home| in_target(&c.key, &home.target)))
            .map(|c| (c.key.provider.clone(), c.key.model.clone()))
            .find(|target| self.marks_of(target).healthy())
    }

    fn marks_of(&self, target: &Target) -> Marks {
        self.marks.get(target).copied().unwrap_or_default()
    }

    fn event(&mut self) -> Tick {
        self.events += 1;
        self.events
    }

    /// `key`'s target showed `shown`: a whole answer (any session's, or a probe's), a whole
    /// streamed answer, or a failure.
    pub fn shown(&mut self, key: &CandidateKey, shown: Shown) {
        let tick = self.event();
        let target = (key.provider.clone(), key.model.clone());
        if self.marks.len() >= MAX_MARKED && !self.marks.contains_key(&target) {
            self.forget_oldest_marks();
        }
        let marks = self.marks.entry(target).or_default();
        match shown {
            Shown::Whole => marks.served = tick,
            Shown::WholeStream => {
                marks.served = tick;
                marks.streamed = tick;
            }
            Shown::Failure => marks.failed = tick,
        }
    }

    fn forget_oldest_marks(&mut self) {
        let latest = |m: &Marks| m.served.max(m.failed);
        let mut ticks: Vec<Tick> = self.marks.values().map(latest).collect();
        let (_, median, _) = ticks.select_nth_unstable(self.marks.len() / 2);
        let median = *median;
        self.marks.retain(|_, m| latest(m) > median);
    }

    /// A request of `session` broke after content on `key` at `now` (a cut, a stall, an error
    /// event): its next request starts elsewhere. Told before the client reads the end of the
    /// broken stream, so a retry sent the moment it does is already routed away.
    pub fn broke(&mut self, session: SessionKey, key: &CandidateKey, now: UnixMillis) {
        self.shown(key, Shown::Failure);
        let pin = match self.pin(session, now) {
            Some(mut pin) => {
                if !pin.broke.contains(key) {
                    if pin.broke.len() == MAX_BROKE {
                        pin.broke.remove(0);
                    }
                    pin.broke.push(key.clone());
                }
                pin
            }
            None => Pin { key: key.clone(), home: None, broke: vec![key.clone()] },
        };
        self.insert(session, pin, now);
    }

    /// `served` answered a request of `session` at `now`, which `steered` sent there: binds,
    /// keeps or moves its pin.
    pub fn served(
        &mut self,
        session: SessionKey,
        served: &CandidateKey,
        now: UnixMillis,
        steered: &Steer,
    ) -> Repin {
        let old = self.pin(session, now);
        let target = |k: &CandidateKey| (k.provider.clone(), k.model.clone());
        let (pin, repin) = match old {
            None => (Pin::new(served.clone(), None), Repin::Bound),
            Some(pin) if pin.key == *served => (Pin::new(pin.key, pin.home), Repin::Kept),
            Some(pin) => {
                let returned = match steered {
                    Steer::Returned { to, .. } => *to == target(served),
                    _ => false,
                };
                if returned || pin.home.as_ref().is_some_and(|h| h.target == target(served)) {
                    (Pin::new(served.clone(), None), Repin::Home)
                } else if target_of(&pin.key) == target_of(served) {
                    let from = pin.key.clone();
                    (Pin::new(served.clone(), pin.home), Repin::Credential { from })
                } else {
                    let left =
                        if pin.broke_on(target_of(&pin.key)) { Left::Broke } else { Left::Benched };
                    let since = self.event();
                    let home =
                        pin.home.or_else(|| Some(Home { target: target(&pin.key), left, since }));
                    (Pin::new(served.clone(), home), Repin::Target { from: pin.key, left })
                }
            }
        };
        self.insert(session, pin, now);
        repin
    }

    /// [`Self::served`] for a session whose plan put `first` first: one not pinned before,
    /// bound elsewhere because `first` was benched or failed, takes `first`'s target as its
    /// home, to return to once that has healed, as a session moved off it does (the plan's
    /// order says it is better). A session started while its subscription's window was spent
    /// goes back to the subscription after the reset, not on paying for an API key.
    pub fn served_after(
        &mut self,
        session: SessionKey,
        served: &CandidateKey,
        now: UnixMillis,
        first: &CandidateKey,
        steered: &Steer,
    ) -> Repin {
        let repin = self.served(session, served, now, steered);
        let elsewhere = target_of(first) != target_of(served);
        if repin == Repin::Bound && elsewhere {
            let since = self.event();
            if let Some(entry) = self.entries.get_mut(&session) {
                let target = (first.provider.clone(), first.model.clone());
                entry.pin.home = Some(Home { target, left: Left::Benched, since });
            }
        }
        repin
    }

    /// The target `session` moved off and returns to once it has healed, if any.
    pub fn home(&self, session: SessionKey) -> Option<Target> {
        Some(self.entries.get(&session)?.pin.home.as_ref()?.target.clone())
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

/// Orders `plan` away from where `pin`'s session broke: other providers first, then the
/// broken providers' other candidates, the broken candidates last (a combo of one still has
/// somewhere to go). `None` when the session broke nowhere.
fn away_from_breaks(plan: &mut Plan, pin: &Pin) -> Option<Steer> {
    let from = pin.broke.last()?;
    plan.candidates.sort_by_key(|c| {
        if pin.broke.contains(&c.key) {
            2
        } else {
            u8::from(pin.broke.iter().any(|b| b.provider == c.key.provider))
        }
    });
    Some(Steer::Moved { from: from.clone(), left: Left::Broke })
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

    impl Sessions {
        fn pin_of(&self, session: SessionKey) -> Pin {
            self.entries[&session].pin.clone()
        }
    }
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

    /// Steers with no provider degraded.
    fn steer(sessions: &Sessions, plan: &mut Plan, pin: &Pin, ordered: bool) -> Steer {
        sessions.steer(plan, Some(pin), ordered, |_| false)
    }

    fn target(provider: &str, model: &str) -> Target {
        (ProviderId::from(provider), ModelId::from(model))
    }

    #[test]
    fn a_pinned_session_goes_to_its_pin_and_moves_when_the_pin_is_benched() {
        let sessions = Sessions::new(LIMITS);
        let (a1, a2, b1) = (key("a", "1", "m"), key("a", "2", "m"), key("b", "1", "n"));
        let pin = Pin::new(a2.clone(), None);
        let mut p = plan(&[a1.clone(), a2.clone(), b1.clone()]);
        assert_eq!(steer(&sessions, &mut p, &pin, false), Steer::Kept);
        assert_eq!(order(&p), ["a/m@2", "a/m@1", "b/n@1"]);
        // a/2 benched: another credential of the same target first.
        let mut p = plan(&[b1.clone(), a1.clone()]);
        let moved = Steer::Moved { from: a2.clone(), left: Left::Benched };
        assert_eq!(steer(&sessions, &mut p, &pin, false), moved);
        assert_eq!(order(&p), ["a/m@1", "b/n@1"]);
        // The whole target benched: the plan's own order.
        let mut p = plan(std::slice::from_ref(&b1));
        assert_eq!(steer(&sessions, &mut p, &pin, false), moved);
        assert_eq!(order(&p), ["b/n@1"]);
        let mut p = plan(&[a1, b1]);
        assert_eq!(sessions.steer(&mut p, None, false, |_| false), Steer::New);
        assert_eq!(order(&p), ["a/m@1", "b/n@1"], "a new session: the strategy's plan");
        assert!(pin.holds(true));
        assert!(!pin.holds(false), "a first turn is planned as new");
    }

    #[test]
    fn a_retry_after_a_break_starts_on_another_provider_first_turn_or_not() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "retrying");
        let (a1, a2, a_other, b1) =
            (key("a", "1", "m"), key("a", "2", "m"), key("a", "1", "o"), key("b", "1", "n"));
        let all = [a1.clone(), a2.clone(), a_other.clone(), b1.clone()];
        // The first turn broke on a/m@1 before anything bound the session.
        sessions.broke(s, &a1, T0);
        let pin = sessions.pin(s, T0).unwrap();
        let broke = Steer::Moved { from: a1.clone(), left: Left::Broke };
        assert!(pin.holds(false), "a retried first turn is steered too");
        let mut p = plan(&all);
        assert_eq!(steer(&sessions, &mut p, &pin, true), broke);
        assert_eq!(
            order(&p),
            ["b/n@1", "a/m@2", "a/o@1", "a/m@1"],
            "another provider, then the same provider, where it broke last"
        );
        // A combo of one goes where it can.
        let mut p = plan(std::slice::from_ref(&a1));
        assert_eq!(steer(&sessions, &mut p, &pin, false), broke);
        assert_eq!(order(&p), ["a/m@1"]);

        // Served on b: moved, with a as its home, left after a break.
        assert_eq!(
            sessions.served(s, &b1, T0, &broke),
            Repin::Target { from: a1.clone(), left: Left::Broke }
        );
        let pin = sessions.pin(s, T0).unwrap();
        assert!(pin.broke.is_empty(), "served elsewhere: the break is behind it");
        assert!(pin.holds(false), "a first turn stays away until its home heals");
        assert_eq!(
            pin.home.as_ref().map(|h| (h.target.clone(), h.left)),
            Some((target("a", "m"), Left::Broke))
        );

        // A session that broke on its pin's other credential moves between credentials and stays.
        let t = SessionKey::named("k", "two keys");
        assert_eq!(sessions.served(t, &a1, T0, &Steer::New), Repin::Bound);
        sessions.broke(t, &a1, T0);
        let pin = sessions.pin(t, T0).unwrap();
        let mut p = plan(&[a1.clone(), a2.clone()]);
        steer(&sessions, &mut p, &pin, false);
        assert_eq!(order(&p), ["a/m@2", "a/m@1"]);
        assert_eq!(sessions.served(t, &a2, T0, &broke), Repin::Credential { from: a1 });
        assert_eq!(sessions.home(t), None);
    }

    #[test]
    fn a_session_moved_by_a_break_returns_only_after_home_served_a_whole_stream() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "cut");
        let (a1, b1) = (key("a", "1", "m"), key("b", "1", "n"));
        sessions.served(s, &a1, T0, &Steer::New);
        sessions.broke(s, &a1, T0);
        let moved = Steer::Moved { from: a1.clone(), left: Left::Broke };
        sessions.served(s, &b1, T0, &moved);
        let both = [a1.clone(), b1.clone()];
        let stays = |sessions: &Sessions, why: &str| {
            let pin = sessions.pin_of(s);
            let mut p = plan(&both);
            assert_eq!(steer(sessions, &mut p, &pin, false), Steer::Kept, "{why}");
            assert_eq!(order(&p)[0], "b/n@1", "{why}");
        };
        stays(&sessions, "eligible again is not healed");
        sessions.shown(&a1, Shown::Whole);
        stays(&sessions, "a probe's one token restores a breaker, not a home");
        let mut p = plan(&both);
        let pin = sessions.pin_of(s);
        assert_eq!(steer(&sessions, &mut p, &pin, true), Steer::Kept, "nor does the order");
        sessions.shown(&a1, Shown::WholeStream);
        sessions.shown(&a1, Shown::Failure);
        stays(&sessions, "its latest outcome a failure");
        sessions.shown(&a1, Shown::WholeStream);
        let pin = sessions.pin_of(s);
        let mut p = plan(&both);
        assert_eq!(
            sessions.steer(&mut p, Some(&pin), false, |p| p.as_str() == "a"),
            Steer::Kept,
            "a degraded breaker has not healed"
        );
        let returned = Steer::Returned { to: target("a", "m"), healed: Healed::WholeStream };
        assert_eq!(steer(&sessions, &mut p, &pin, false), returned);
        assert_eq!(order(&p)[0], "a/m@1");
        assert_eq!(sessions.served(s, &a1, T0, &returned), Repin::Home);
        assert_eq!(sessions.home(s), None);
        assert!(!sessions.pin_of(s).holds(false), "home again: a first turn is new once more");
    }

    #[test]
    fn a_session_moved_by_a_bench_returns_after_a_success_never_on_eligibility() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "benched");
        let (a1, b1) = (key("a", "1", "m"), key("b", "1", "n"));
        sessions.shown(&a1, Shown::Whole);
        sessions.served(s, &a1, T0, &Steer::New);
        let moved = Steer::Moved { from: a1.clone(), left: Left::Benched };
        sessions.shown(&a1, Shown::Failure);
        assert_eq!(
            sessions.served(s, &b1, T0, &moved),
            Repin::Target { from: a1.clone(), left: Left::Benched }
        );
        let pin = sessions.pin_of(s);
        let mut p = plan(&[a1.clone(), b1.clone()]);
        assert_eq!(steer(&sessions, &mut p, &pin, false), Steer::Kept, "eligible, not healed");
        sessions.shown(&a1, Shown::Whole);
        let returned = Steer::Returned { to: target("a", "m"), healed: Healed::Served };
        assert_eq!(steer(&sessions, &mut p, &pin, false), returned, "a probe's success will do");

        // A rate limit is no failure of the target: back when its bench ends.
        let limited = SessionKey::named("k", "rate limited");
        sessions.served(limited, &a1, T0, &Steer::New);
        assert_eq!(Shown::of(OutcomeKind::RateLimit), None);
        sessions.served(limited, &b1, T0, &moved);
        let mut p = plan(&[a1.clone(), b1.clone()]);
        assert_eq!(steer(&sessions, &mut p, &sessions.pin_of(limited), false), returned);
        // A home read back at start: no failure of it is known since; a failure holds it.
        let restored = SessionKey::named("k", "restored");
        let (c1, target) = (key("c", "1", "m"), (ProviderId::from("c"), ModelId::from("m")));
        sessions.restore(restored, Pin::new(b1.clone(), Some(Home::restored(target))), T0, T0);
        let mut p = plan(&[c1.clone(), b1.clone()]);
        assert!(matches!(
            steer(&sessions, &mut p, &sessions.pin_of(restored), false),
            Steer::Returned { .. }
        ));
        sessions.shown(&c1, Shown::Failure);
        let mut p = plan(&[c1, b1.clone()]);
        assert_eq!(steer(&sessions, &mut p, &sessions.pin_of(restored), false), Steer::Kept);
    }

    #[test]
    fn in_an_ordered_combo_a_session_pinned_below_a_healthy_target_returns_to_it() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "pinned by another combo");
        let (primary, fallback) = (key("p", "1", "m"), key("f", "1", "n"));
        sessions.served(s, &fallback, T0, &Steer::New);
        let pin = sessions.pin_of(s);
        assert_eq!(pin.home, None, "the other combo put it first: no home");
        let in_order = || plan(&[primary.clone(), fallback.clone()]);
        let mut p = in_order();
        assert_eq!(
            steer(&sessions, &mut p, &pin, true),
            Steer::Kept,
            "nothing known of the primary"
        );
        sessions.shown(&primary, Shown::Failure);
        sessions.shown(&primary, Shown::Whole);
        let mut p = in_order();
        assert_eq!(steer(&sessions, &mut p, &pin, false), Steer::Kept, "not an order: the pin");
        let mut p = in_order();
        let back = Steer::Returned { to: target("p", "m"), healed: Healed::Order };
        assert_eq!(steer(&sessions, &mut p, &pin, true), back);
        assert_eq!(order(&p), ["p/m@1", "f/n@1"]);
        let mut p = in_order();
        assert_eq!(
            sessions.steer(&mut p, Some(&pin), true, |p| p.as_str() == "p"),
            Steer::Kept,
            "a degraded primary is not healthy"
        );
        // A session pinned *above* is not moved down.
        let up = SessionKey::named("k", "on the primary");
        sessions.served(up, &primary, T0, &Steer::New);
        sessions.shown(&fallback, Shown::Whole);
        let mut p = in_order();
        assert_eq!(steer(&sessions, &mut p, &sessions.pin_of(up), true), Steer::Kept);
        // Back on the primary: no home left to go back down to.
        assert_eq!(sessions.served(s, &primary, T0, &back), Repin::Home);
        assert_eq!(sessions.home(s), None);
    }

    #[test]
    fn a_continuation_that_finished_the_answer_pins_the_session_where_it_finished() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "continued");
        let (a1, b1) = (key("a", "1", "m"), key("b", "1", "n"));
        sessions.served(s, &a1, T0, &Steer::New);
        sessions.broke(s, &a1, T0);
        // The continuation on b finished it: the relay tells the table as a serve.
        assert_eq!(
            sessions.served(s, &b1, T0, &Steer::Kept),
            Repin::Target { from: a1, left: Left::Broke }
        );
        let pin = sessions.pin_of(s);
        assert_eq!(pin.key, b1);
        assert!(pin.broke.is_empty());
    }

    #[test]
    fn marks_stay_bounded_and_keep_the_newest() {
        let mut sessions = Sessions::new(LIMITS);
        for n in 0..MAX_MARKED + 10 {
            sessions.shown(&key("p", "1", &n.to_string()), Shown::Whole);
        }
        assert!(sessions.marks.len() <= MAX_MARKED, "{}", sessions.marks.len());
        let newest = (ProviderId::from("p"), ModelId::from((MAX_MARKED + 9).to_string().as_str()));
        assert!(sessions.marks_of(&newest).healthy());
    }

    #[test]
    fn a_session_moved_off_a_target_returns_home_and_one_moved_between_credentials_stays() {
        let mut sessions = Sessions::new(LIMITS);
        let s = SessionKey::named("k", "1");
        let (a1, a2, b1) = (key("a", "1", "m"), key("a", "2", "m"), key("b", "1", "n"));
        assert_eq!(sessions.served(s, &a1, T0, &Steer::New), Repin::Bound);
        assert_eq!(sessions.served(s, &a1, T0, &Steer::Kept), Repin::Kept);
        let benched =
            |from: &CandidateKey| Steer::Moved { from: from.clone(), left: Left::Benched };
        assert_eq!(
            sessions.served(s, &a2, T0, &benched(&a1)),
            Repin::Credential { from: a1.clone() }
        );
        let pin = sessions.pin_of(s);
        assert_eq!((pin.key.clone(), pin.home.clone()), (a2.clone(), None));
        // a/1 heals: the session stays on a/2.
        sessions.shown(&a1, Shown::WholeStream);
        let mut p = plan(&[a1.clone(), a2.clone(), b1.clone()]);
        assert_eq!(steer(&sessions, &mut p, &pin, false), Steer::Kept);
        assert_eq!(order(&p)[0], "a/m@2");
        // Target a fails and is benched: b serves, a is home.
        sessions.shown(&a2, Shown::Failure);
        let moved = sessions.served(s, &b1, T0, &benched(&a2));
        assert_eq!(moved, Repin::Target { from: a2.clone(), left: Left::Benched });
        let pin = sessions.pin_of(s);
        assert_eq!(sessions.home(s), Some(target("a", "m")));
        let mut p = plan(std::slice::from_ref(&b1));
        assert_eq!(steer(&sessions, &mut p, &pin, false), Steer::Kept, "home still benched");
        let mut p = plan(&[b1.clone(), a1.clone()]);
        assert_eq!(steer(&sessions, &mut p, &pin, false), Steer::Kept, "eligible, not yet healed");
        sessions.shown(&a1, Shown::Whole);
        let returned = steer(&sessions, &mut p, &pin, false);
        assert_eq!(returned, Steer::Returned { to: target("a", "m"), healed: Healed::Served });
        assert_eq!(order(&p), ["a/m@1", "b/n@1"]);
        assert_eq!(sessions.served(s, &a1, T0, &returned), Repin::Home);

        // A session bound away from its plan's first target returns to it as its home.
        let late = SessionKey::named("k", "born while a was benched");
        assert_eq!(sessions.served_after(late, &b1, T0, &a1, &Steer::New), Repin::Bound);
        assert_eq!(sessions.home(late), Some(target("a", "m")));
        let first_served = SessionKey::named("k", "a served at once");
        assert_eq!(sessions.served_after(first_served, &a2, T0, &a1, &Steer::New), Repin::Bound);
        assert_eq!(sessions.home(first_served), None, "another key of the first target is no move");
        assert_eq!(sessions.pin_of(s).home, None);
    }

    #[test]
    fn the_table_forgets_the_least_recently_seen_and_the_idle() {
        let mut sessions = Sessions::new(LIMITS);
        let target = key("a", "1", "m");
        let s = |n: u8| SessionKey::named("k", &n.to_string());
        for n in 0..3 {
            sessions.served(s(n), &target, T0, &Steer::New);
        }
        sessions.served(s(0), &target, UnixMillis(T0.0 + 1), &Steer::Kept);
        sessions.served(s(3), &target, UnixMillis(T0.0 + 2), &Steer::New);
        assert_eq!(sessions.len(), 3);
        assert!(sessions.pin(s(1), T0).is_none(), "the least recently seen left");
        assert!(sessions.pin(s(0), T0).is_some());
        let later = UnixMillis(T0.0 + LIMITS.idle_ms + 2);
        assert!(sessions.pin(s(3), later).is_none(), "idle too long");
        assert_eq!(sessions.len(), 2);
        let pin = |home: Option<Target>| Pin::new(target.clone(), home.map(Home::restored));
        sessions.restore(s(9), pin(None), T0, later);
        assert!(sessions.pin(s(9), later).is_none(), "a restored pin past its idle time");
        let first = Some((ProviderId::from("first"), ModelId::from("m")));
        sessions.restore(s(9), pin(first.clone()), later, later);
        assert_eq!(sessions.pin(s(9), later), Some(pin(first.clone())), "with its home");
        assert_eq!(sessions.home(s(9)), first);
    }
}
