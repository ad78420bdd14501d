//! A credential's secret as requests read it: read when the config is loaded and, when it
//! could not be, read again off the request path until it can; a `file:` secret is read again
//! when its file changes.
//!
//! Invariants:
//! - [`LiveSecret::current`] (the request path) only reads memory; every read of the source
//!   (the environment, the keychain, a file) happens in [`LiveSecret::read`] and
//!   [`LiveSecret::refresh`], which callers run off the request path.
//! - A source that failed is tried again no sooner than its wait: 5 s, doubling to 5 minutes,
//!   so a locked keychain (which answers a read with an unlock prompt) is not asked per
//!   request. A file is looked at (one `stat`) at most once a second, whether it is missing
//!   or in use, and read again only when its size or modification time changed.
//! - Time is the caller's (`now_ms`, unix milliseconds), so tests step it. A secret read
//!   where no time is at hand (loading a config) starts its wait at its first refresh.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

use crate::file::FileStamp;
use crate::{Secret, SecretRef, SecretStore};

/// The first wait after a failed read.
pub const FIRST_WAIT_MS: u64 = 5_000;
/// The longest wait between reads of a source that keeps failing.
pub const MAX_WAIT_MS: u64 = 5 * 60_000;
/// How often a file secret's file is looked at.
pub const FILE_LOOK_MS: u64 = 1_000;

/// A secret and where it comes from.
pub struct LiveSecret {
    reference: SecretRef,
    slot: RwLock<Slot>,
    /// A read is under way (perhaps held by an unlock prompt): no second one starts.
    reading: AtomicBool,
}

struct Slot {
    state: State,
    /// Never read yet: left for a read whose wait the caller bounds ([`LiveSecret::unread`]).
    unread: bool,
    /// When the source is to be read (or a file looked at) again; `u64::MAX`: never;
    /// `None`: the wait starts at the next refresh.
    next_ms: Option<u64>,
}

enum State {
    Ready { secret: Secret, stamp: Option<FileStamp> },
    Unavailable { reason: String, wait_ms: u64 },
}

/// What a [`LiveSecret::refresh`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refreshed {
    /// Not due, or nothing changed.
    Unchanged,
    /// Readable again.
    Available,
    /// A file secret whose file changed, read anew.
    Changed,
    /// It was readable and is not any more: why.
    Lost(String),
    /// Still not readable: why.
    StillUnavailable(String),
}

/// Where secrets are read from: the environment (`env:`) and the keychain (`keychain:`).
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub store: Option<&'a dyn SecretStore>,
}

impl fmt::Debug for Sources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources").field("store", &self.store).finish_non_exhaustive()
    }
}

impl LiveSecret {
    /// Reads the secret `reference` names now; a secret that cannot be read is kept as
    /// unavailable, with why, to be read again from the end of a wait that starts at the first
    /// refresh.
    pub fn read(reference: SecretRef, sources: Sources<'_>) -> Self {
        let state = match attempt(&reference, sources) {
            Ok((secret, stamp)) => State::Ready { secret, stamp },
            Err(reason) => State::Unavailable { reason, wait_ms: FIRST_WAIT_MS },
        };
        let next_ms = match (&state, &reference) {
            (State::Ready { .. }, SecretRef::Env(_) | SecretRef::Keychain(_)) => Some(u64::MAX),
            _ => None,
        };
        Self::with(reference, Slot { state, unread: false, next_ms })
    }

    /// A secret not read yet: unavailable until a [`Self::refresh`] reads it. For a keychain
    /// whose unlock prompt must not hold up the caller: it reads on a thread of its own and
    /// waits as long as it sees fit.
    pub fn unread(reference: SecretRef) -> Self {
        let reason = "not read from the OS keychain yet (it may be locked, with an unlock prompt \
                      waiting)"
            .to_owned();
        let state = State::Unavailable { reason, wait_ms: FIRST_WAIT_MS };
        Self::with(reference, Slot { state, unread: true, next_ms: None })
    }

    fn with(reference: SecretRef, slot: Slot) -> Self {
        Self { reference, slot: RwLock::new(slot), reading: AtomicBool::new(false) }
    }

    /// Not read yet ([`Self::unread`]).
    pub fn is_unread(&self) -> bool {
        self.slot.read().unwrap_or_else(PoisonError::into_inner).unread
    }

    pub fn reference(&self) -> &SecretRef {
        &self.reference
    }

    /// The secret to send, or why there is none.
    pub fn current(&self) -> Result<Secret, String> {
        match &self.slot.read().unwrap_or_else(PoisonError::into_inner).state {
            State::Ready { secret, .. } => Ok(secret.clone()),
            State::Unavailable { reason, .. } => Err(reason.clone()),
        }
    }

    /// Why the secret cannot be read, when it cannot.
    pub fn unavailable(&self) -> Option<String> {
        self.current().err()
    }

    /// Whether [`Self::refresh`] has something to do at `now_ms`.
    pub fn is_due(&self, now_ms: u64) -> bool {
        self.slot.read().unwrap_or_else(PoisonError::into_inner).next_ms.is_none_or(|n| now_ms >= n)
    }

    /// Reads the source again if it is due (or `now`: the user asked): an unavailable secret
    /// at the end of its wait, a file secret whose file changed. Blocking: keychain reads are
    /// IPC and file reads are I/O.
    pub fn refresh(&self, sources: Sources<'_>, now_ms: u64, now: bool) -> Refreshed {
        if !(now || self.is_due(now_ms)) {
            return Refreshed::Unchanged;
        }
        if self.reading.swap(true, Ordering::Acquire) {
            return Refreshed::Unchanged;
        }
        let _reading = Reading(&self.reading);
        self.refresh_alone(sources, now_ms, now)
    }

    /// [`Self::refresh`], no other read under way.
    fn refresh_alone(&self, sources: Sources<'_>, now_ms: u64, now: bool) -> Refreshed {
        let (was, scheduled) = {
            let slot = self.slot.read().unwrap_or_else(PoisonError::into_inner);
            let was = match &slot.state {
                State::Ready { stamp, .. } => Ok(*stamp),
                State::Unavailable { wait_ms, .. } => Err(*wait_ms),
            };
            (was, slot.next_ms.is_some())
        };
        if !(now || scheduled) {
            // Read when the config was loaded: the wait starts now.
            let next = match (&was, &self.reference) {
                (Err(wait_ms), SecretRef::Env(_) | SecretRef::Keychain(_)) => *wait_ms,
                _ => FILE_LOOK_MS,
            };
            self.set_next(now_ms.saturating_add(next));
            return Refreshed::Unchanged;
        }
        // A file in use is only looked at: read again when it changed.
        if let (Ok(Some(stamp)), SecretRef::File(path), false) = (was, &self.reference, now)
            && FileStamp::of(path).ok() == Some(stamp)
        {
            self.set_next(next_look(&self.reference, now_ms));
            return Refreshed::Unchanged;
        }
        let read = attempt(&self.reference, sources);
        let mut slot = self.slot.write().unwrap_or_else(PoisonError::into_inner);
        match (read, was) {
            (Ok((secret, stamp)), was) => {
                *slot = Slot {
                    state: State::Ready { secret, stamp },
                    unread: false,
                    next_ms: Some(next_look(&self.reference, now_ms)),
                };
                if was.is_ok() { Refreshed::Changed } else { Refreshed::Available }
            }
            (Err(reason), Ok(_)) => {
                let (state, next_ms) =
                    unavailable(&self.reference, reason.clone(), FIRST_WAIT_MS, now_ms);
                *slot = Slot { state, unread: false, next_ms: Some(next_ms) };
                Refreshed::Lost(reason)
            }
            (Err(reason), Err(wait_ms)) => {
                // Asked for now, the wait starts over; otherwise it doubles.
                let wait_ms = if now { FIRST_WAIT_MS } else { (wait_ms * 2).min(MAX_WAIT_MS) };
                let (state, next_ms) =
                    unavailable(&self.reference, reason.clone(), wait_ms, now_ms);
                *slot = Slot { state, unread: false, next_ms: Some(next_ms) };
                Refreshed::StillUnavailable(reason)
            }
        }
    }

    fn set_next(&self, next_ms: u64) {
        self.slot.write().unwrap_or_else(PoisonError::into_inner).next_ms = Some(next_ms);
    }
}

/// A read under way; ended when dropped, however the read ends (a panic included).
struct Reading<'a>(&'a AtomicBool);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// One read of the source: the secret and, for a file, its stamp; or why not.
fn attempt(
    reference: &SecretRef,
    sources: Sources<'_>,
) -> Result<(Secret, Option<FileStamp>), String> {
    match reference {
        SecretRef::File(path) => {
            let (secret, stamp, others_read) =
                crate::file::read(path).map_err(|e| e.to_string())?;
            if others_read {
                tracing::warn!(
                    file = %path.display(),
                    "a file: secret is readable by every user of this machine (fine for a \
                     container's mounted secret; elsewhere run `chmod o-r` on it)"
                );
            }
            Ok((secret, Some(stamp)))
        }
        other => other
            .resolve_using(sources.env, sources.store)
            .map(|s| (s, None))
            .map_err(|e| e.to_string()),
    }
}

/// When a readable secret is looked at again: a file every second, anything else never.
fn next_look(reference: &SecretRef, now_ms: u64) -> u64 {
    match reference {
        SecretRef::File(_) => now_ms.saturating_add(FILE_LOOK_MS),
        _ => u64::MAX,
    }
}

/// An unavailable state that waits `wait_ms` (a file: a second) before the next read.
fn unavailable(reference: &SecretRef, reason: String, wait_ms: u64, now_ms: u64) -> (State, u64) {
    let next = match reference {
        SecretRef::File(_) => FILE_LOOK_MS,
        _ => wait_ms,
    };
    (State::Unavailable { reason, wait_ms }, now_ms.saturating_add(next))
}

/// The state by name only: the secret never.
#[expect(clippy::missing_fields_in_debug, reason = "the slot holds the secret")]
impl fmt::Debug for LiveSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slot = self.slot.read().unwrap_or_else(PoisonError::into_inner);
        let state = match &slot.state {
            State::Ready { .. } => "ready",
            State::Unavailable { .. } => "unavailable",
        };
        f.debug_struct("LiveSecret")
            .field("reference", &self.reference)
            .field("state", &state)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn sources(env: &Mutex<Option<String>>) -> impl Fn(&str) -> Option<String> + '_ {
        move |var| (var == "KEY").then(|| env.lock().unwrap().clone()).flatten()
    }

    #[test]
    fn an_unset_variable_is_unavailable_and_read_again_after_a_doubling_wait() {
        let env = Mutex::new(None);
        let env_fn = sources(&env);
        let s = Sources { env: &env_fn, store: None };
        let live = LiveSecret::read(SecretRef::Env("KEY".into()), s);
        assert_eq!(
            live.current().unwrap_err(),
            "environment variable KEY is not set (or not valid UTF-8)"
        );
        assert_eq!(live.refresh(s, 0, false), Refreshed::Unchanged, "the wait starts");
        assert!(!live.is_due(FIRST_WAIT_MS - 1));
        assert_eq!(live.refresh(s, FIRST_WAIT_MS - 1, false), Refreshed::Unchanged);
        assert!(matches!(live.refresh(s, FIRST_WAIT_MS, false), Refreshed::StillUnavailable(_)));
        // The wait doubled: 10 s from there.
        assert!(!live.is_due(FIRST_WAIT_MS + 2 * FIRST_WAIT_MS - 1));
        assert!(live.is_due(FIRST_WAIT_MS + 2 * FIRST_WAIT_MS));
        let mut now = FIRST_WAIT_MS;
        for _ in 0..20 {
            now += MAX_WAIT_MS;
            let _ = live.refresh(s, now, false);
        }
        assert!(!live.is_due(now + MAX_WAIT_MS - 1), "the wait stops growing at five minutes");
        assert!(live.is_due(now + MAX_WAIT_MS));

        *env.lock().unwrap() = Some("sk-1".into());
        assert_eq!(live.refresh(s, now + 1, true), Refreshed::Available, "asked for now");
        assert_eq!(live.current().unwrap().expose(), "sk-1");
        assert!(!live.is_due(u64::MAX - 1), "a readable variable is not read again");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_is_looked_at_each_second_and_read_again_when_it_changes() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let none = |_: &str| None;
        let s = Sources { env: &none, store: None };
        let live = LiveSecret::read(SecretRef::File(path.clone()), s);
        assert!(live.current().unwrap_err().ends_with("does not exist (yet)"));
        assert_eq!(live.refresh(s, 0, false), Refreshed::Unchanged, "the wait starts");
        assert!(!live.is_due(FILE_LOOK_MS - 1));
        assert!(live.is_due(FILE_LOOK_MS), "a missing file is looked for each second");

        std::fs::write(&path, "sk-1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(live.refresh(s, FILE_LOOK_MS, false), Refreshed::Available);
        assert_eq!(live.current().unwrap().expose(), "sk-1");
        assert_eq!(live.refresh(s, 2 * FILE_LOOK_MS, false), Refreshed::Unchanged);

        std::fs::write(&path, "sk-22\n").unwrap();
        assert_eq!(live.refresh(s, 3 * FILE_LOOK_MS, false), Refreshed::Changed);
        assert_eq!(live.current().unwrap().expose(), "sk-22");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::fs::write(&path, "sk-evil\n").unwrap();
        let lost = live.refresh(s, 4 * FILE_LOOK_MS, false);
        assert!(
            matches!(&lost, Refreshed::Lost(why) if why.contains("writable by everyone")),
            "{lost:?}"
        );
        assert!(live.current().is_err(), "never the key a stranger could have written");
    }
}
