//! UI sessions: what the web UI holds instead of the management token.
//!
//! The management token (the data directory's `management-token`, or
//! `SWITCHYARD_MANAGEMENT_TOKEN`) is the same across restarts. A page that keeps it and sends it
//! on its own (the event stream reconnects) hands it to whichever local program holds the port
//! after a restart, and with it the whole management API. So the UI exchanges it once,
//! `POST /api/session`, for a session token, and forgets it. A session token:
//!
//! - is 128 random bits, known only to this process (as a digest, in memory) and to the page
//!   (in memory: a reload asks to sign in again). A restart ends every session, so a token
//!   that reaches whoever holds the port afterwards opens nothing there or anywhere;
//! - belongs to the management token it was exchanged for: when that token is rotated (or
//!   its file emptied) the session ends at its next use;
//! - ends after [`IDLE_TIMEOUT`] without a request, on `DELETE /api/session` (sign out), or
//!   when [`MAX_SESSIONS`] newer ones were opened since it was last used.
//!
//! A sign-in code is what `serve` prints instead of asking for the token to be
//! copied: `http://127.0.0.1:PORT/#code=CODE`, in the fragment, so it never reaches a server
//! log or a `Referer`. The page exchanges it once, `POST /api/session` with the code as the
//! bearer token, for a session. A code:
//!
//! - is 128 random bits under its own prefix, kept here as a digest only;
//! - opens one session, once: the first exchange spends it, whether or not it succeeds;
//! - expires [`CODE_LIFETIME`] after it was issued, and with the management token it was
//!   issued under (a rotated token ends it, as it ends sessions);
//! - so the terminal that printed it, and whatever recorded that terminal, soon holds nothing
//!   that still opens anything.
//!
//! The front door (`guard`) decides which routes take a session, a code or the management
//! token; this module only keeps the sets. Every decision takes `now`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use switchyard_core::UnixMillis;
use switchyard_core::clock::millis;
use ts_rs::TS;

use crate::keys::{self, KeyError};

/// How long a session lasts without a request: a working day and a night. An open event stream
/// is not a request (it was checked when it opened); the page's next call after this long is
/// refused, and the page asks to sign in again.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(12 * 60 * 60);

/// The most sessions alive at once. Every sign-in opens one and a page that is closed never
/// says so, so without a bound they would pile up for as long as the server runs; opening one
/// more ends the one used longest ago.
pub const MAX_SESSIONS: usize = 16;

/// How a session token starts: told apart at a glance (and by secret scanners) from the
/// management token and local API keys (`sy-` and 64 hex digits).
const TOKEN_PREFIX: &str = "sy-ui-";

/// How long a printed sign-in code may be exchanged: long enough to open the link, short
/// enough that a scrollback or a recorded terminal soon holds nothing that works.
pub const CODE_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// The most sign-in codes waiting at once (each `serve` start and each `switchyard link`
/// issues one); issuing one more ends the oldest.
pub const MAX_CODES: usize = 8;

/// How a sign-in code starts.
pub(crate) const CODE_PREFIX: &str = "sy-code-";

/// The live sessions of this process, and the sign-in codes not yet exchanged. Cheap to
/// clone; every clone is the same set.
#[derive(Clone, Debug, Default)]
pub struct UiSessions {
    live: Arc<Mutex<HashMap<SessionId, Session>>>,
    codes: Arc<Mutex<HashMap<Arc<str>, Code>>>,
}

/// A sign-in code waiting for its exchange, named by its digest.
#[derive(Debug)]
struct Code {
    /// The digest of the management token it was issued under.
    root: Arc<str>,
    issued: UnixMillis,
}

/// A sign-in code, as issued: shown once (printed in the link), never kept.
pub struct SignInCode(String);

impl SignInCode {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SignInCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SignInCode(***)")
    }
}

/// A session, named by its token's digest: the token itself is never kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SessionId(Arc<str>);

#[derive(Debug)]
struct Session {
    /// The digest of the management token it was opened with.
    root: Arc<str>,
    last_used: UnixMillis,
}

impl Session {
    fn idle(&self, now: UnixMillis) -> bool {
        now.since(self.last_used) > IDLE_TIMEOUT
    }
}

/// Who may open a session: the front door's word that the request showed the management
/// token, and the digest of that token (the session's root). A one-time sign-in code, when
/// there is one, is to carry the root of the token it was issued under.
#[derive(Clone, Debug)]
pub(crate) struct SignIn {
    pub(crate) root: Arc<str>,
}

/// `POST /api/session`: the session the page signs in with.
#[derive(Serialize, TS)]
#[ts(export)]
pub(crate) struct UiSession {
    /// `Authorization: Bearer TOKEN` on every management call of the page, `/api/events`
    /// included; never stored.
    pub token: String,
    /// How long the session lasts without a request.
    #[ts(type = "number")]
    pub idle_timeout_ms: u64,
}

impl fmt::Debug for UiSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UiSession")
            .field("token", &"***")
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .finish()
    }
}

impl UiSessions {
    /// Opens a session for `sign_in`, ending any that sat idle too long and, at
    /// [`MAX_SESSIONS`], the one used longest ago.
    pub(crate) fn open(&self, sign_in: &SignIn, now: UnixMillis) -> Result<UiSession, KeyError> {
        let token = keys::random_token::<16>(TOKEN_PREFIX)?;
        let id = SessionId(Arc::from(keys::sha256_hex(token.expose())));
        let mut live = self.live.lock();
        live.retain(|_, session| !session.idle(now));
        while live.len() >= MAX_SESSIONS {
            let Some(oldest) =
                live.iter().min_by_key(|(_, session)| session.last_used).map(|(id, _)| id.clone())
            else {
                break;
            };
            live.remove(&oldest);
        }
        live.insert(id, Session { root: Arc::clone(&sign_in.root), last_used: now });
        Ok(UiSession { token: token.expose().to_owned(), idle_timeout_ms: millis(IDLE_TIMEOUT) })
    }

    /// The live session `presented` is, its idle time started again at `now`; `None` when it
    /// is none. A session idle past [`IDLE_TIMEOUT`], or whose root is no longer the
    /// management token (`root`: the digest of the token accepted now), ends here.
    pub(crate) fn admit(
        &self,
        presented: &str,
        root: Option<&str>,
        now: UnixMillis,
    ) -> Option<SessionId> {
        if !presented.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let id = SessionId(Arc::from(keys::sha256_hex(presented)));
        let mut live = self.live.lock();
        let session = live.get_mut(&id)?;
        if session.idle(now) || root != Some(&*session.root) {
            live.remove(&id);
            return None;
        }
        session.last_used = now;
        Some(id)
    }

    /// Ends a session (sign out); `false` when it had ended already.
    pub(crate) fn close(&self, id: &SessionId) -> bool {
        self.live.lock().remove(id).is_some()
    }

    /// Issues a sign-in code under the management token whose digest is `root`, ending codes
    /// past [`CODE_LIFETIME`] and, at [`MAX_CODES`], the oldest.
    pub(crate) fn issue_code(&self, root: &str, now: UnixMillis) -> Result<SignInCode, KeyError> {
        let code = keys::random_token::<16>(CODE_PREFIX)?;
        let digest: Arc<str> = Arc::from(keys::sha256_hex(code.expose()));
        let mut codes = self.codes.lock();
        codes.retain(|_, c| now.since(c.issued) <= CODE_LIFETIME);
        while codes.len() >= MAX_CODES {
            let Some(oldest) =
                codes.iter().min_by_key(|(_, c)| c.issued).map(|(d, _)| Arc::clone(d))
            else {
                break;
            };
            codes.remove(&oldest);
        }
        codes.insert(digest, Code { root: Arc::from(root), issued: now });
        Ok(SignInCode(code.expose().to_owned()))
    }

    /// Spends the code `presented`: the sign-in it opens, or `None` when it is no live code,
    /// has expired, or was issued under another management token than `root` (the digest of
    /// the one accepted now). Spent either way: a code is tried once.
    pub(crate) fn redeem_code(
        &self,
        presented: &str,
        root: Option<&str>,
        now: UnixMillis,
    ) -> Option<SignIn> {
        if !presented.starts_with(CODE_PREFIX) {
            return None;
        }
        let digest = keys::sha256_hex(presented);
        let code = self.codes.lock().remove(digest.as_str())?;
        let fresh = now.since(code.issued) <= CODE_LIFETIME;
        (fresh && root == Some(&*code.root)).then_some(SignIn { root: code.root })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "digest-of-the-management-token";
    const AT: UnixMillis = UnixMillis(1_000_000);

    fn sign_in() -> SignIn {
        SignIn { root: Arc::from(ROOT) }
    }

    #[test]
    fn a_session_token_is_128_random_bits_under_its_own_prefix_and_only_its_digest_is_kept() {
        let sessions = UiSessions::default();
        let one = sessions.open(&sign_in(), AT).unwrap();
        let two = sessions.open(&sign_in(), AT).unwrap();
        assert_ne!(one.token, two.token);
        let hex = one.token.strip_prefix(TOKEN_PREFIX).unwrap();
        assert_eq!(hex.len(), 32);
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!format!("{sessions:?}").contains(hex), "the set keeps digests only");
        assert!(!format!("{one:?}").contains(hex), "Debug masks the token");
        assert_eq!(one.idle_timeout_ms, millis(IDLE_TIMEOUT));
    }

    #[test]
    fn a_session_is_admitted_until_it_is_closed() {
        let sessions = UiSessions::default();
        let session = sessions.open(&sign_in(), AT).unwrap();
        let id = sessions.admit(&session.token, Some(ROOT), AT).unwrap();
        assert_eq!(sessions.admit(&session.token, Some(ROOT), AT), Some(id.clone()));
        assert!(sessions.close(&id));
        assert_eq!(sessions.admit(&session.token, Some(ROOT), AT), None);
        assert!(!sessions.close(&id), "closed once");
    }

    #[test]
    fn another_set_knows_none_of_this_sets_sessions() {
        // What a restart is: a new process starts with an empty set.
        let first = UiSessions::default();
        let session = first.open(&sign_in(), AT).unwrap();
        let after_restart = UiSessions::default();
        assert_eq!(after_restart.admit(&session.token, Some(ROOT), AT), None);
        assert!(first.admit(&session.token, Some(ROOT), AT).is_some());
    }

    #[test]
    fn the_management_token_and_other_guesses_are_no_session() {
        let sessions = UiSessions::default();
        let session = sessions.open(&sign_in(), AT).unwrap();
        for guess in ["", "sy-ui-", ROOT, &session.token[..session.token.len() - 1], "sy-0123"] {
            assert_eq!(sessions.admit(guess, Some(ROOT), AT), None, "{guess:?}");
        }
    }

    #[test]
    fn a_session_ends_when_its_management_token_is_rotated_or_gone() {
        let sessions = UiSessions::default();
        let session = sessions.open(&sign_in(), AT).unwrap();
        assert_eq!(sessions.admit(&session.token, Some("digest-of-the-new-token"), AT), None);
        assert_eq!(sessions.admit(&session.token, Some(ROOT), AT), None, "ended, not paused");
        let session = sessions.open(&sign_in(), AT).unwrap();
        assert_eq!(sessions.admit(&session.token, None, AT), None, "an emptied token file");
    }

    #[test]
    fn a_session_ends_after_the_idle_timeout_and_each_request_starts_it_again() {
        let sessions = UiSessions::default();
        let session = sessions.open(&sign_in(), AT).unwrap();
        let just_in_time = AT.plus(IDLE_TIMEOUT);
        assert!(sessions.admit(&session.token, Some(ROOT), just_in_time).is_some());
        let again_in_time = just_in_time.plus(IDLE_TIMEOUT);
        assert!(sessions.admit(&session.token, Some(ROOT), again_in_time).is_some());
        let too_late = again_in_time.plus(IDLE_TIMEOUT).plus(Duration::from_millis(1));
        assert_eq!(sessions.admit(&session.token, Some(ROOT), too_late), None);
        assert_eq!(sessions.admit(&session.token, Some(ROOT), again_in_time), None, "ended");
    }

    #[test]
    fn a_sign_in_code_opens_one_sign_in_once() {
        let sessions = UiSessions::default();
        let code = sessions.issue_code(ROOT, AT).unwrap();
        let hex = code.expose().strip_prefix(CODE_PREFIX).unwrap();
        assert_eq!(hex.len(), 32);
        assert!(!format!("{sessions:?} {code:?}").contains(hex), "digests only, Debug masked");
        let sign_in = sessions.redeem_code(code.expose(), Some(ROOT), AT).unwrap();
        assert_eq!(&*sign_in.root, ROOT);
        assert!(sessions.redeem_code(code.expose(), Some(ROOT), AT).is_none(), "spent");
    }

    #[test]
    fn a_sign_in_code_expires_and_ends_with_its_management_token() {
        let sessions = UiSessions::default();
        let code = sessions.issue_code(ROOT, AT).unwrap();
        let just_in_time = AT.plus(CODE_LIFETIME);
        assert!(sessions.redeem_code(code.expose(), Some(ROOT), just_in_time).is_some());
        let late = sessions.issue_code(ROOT, AT).unwrap();
        let too_late = just_in_time.plus(Duration::from_millis(1));
        assert!(sessions.redeem_code(late.expose(), Some(ROOT), too_late).is_none());
        let rotated = sessions.issue_code(ROOT, AT).unwrap();
        assert!(
            sessions.redeem_code(rotated.expose(), Some("digest-of-the-new-token"), AT).is_none()
        );
        assert!(sessions.redeem_code(rotated.expose(), Some(ROOT), AT).is_none(), "tried once");
        let emptied = sessions.issue_code(ROOT, AT).unwrap();
        assert!(sessions.redeem_code(emptied.expose(), None, AT).is_none());
    }

    #[test]
    fn a_wrong_code_spends_nothing_and_a_session_token_is_no_code() {
        let sessions = UiSessions::default();
        let code = sessions.issue_code(ROOT, AT).unwrap();
        let session = sessions.open(&sign_in(), AT).unwrap();
        // The code with its last character changed (to one it is not).
        let (head, last) = code.expose().split_at(code.expose().len() - 1);
        let wrong = format!("{head}{}", if last == "0" { '1' } else { '0' });
        assert_ne!(wrong, code.expose());
        for guess in ["", CODE_PREFIX, ROOT, &session.token, &wrong] {
            assert!(sessions.redeem_code(guess, Some(ROOT), AT).is_none(), "{guess:?}");
        }
        assert!(sessions.redeem_code(code.expose(), Some(ROOT), AT).is_some());
    }

    #[test]
    fn issuing_one_more_code_than_the_most_ends_the_oldest() {
        let sessions = UiSessions::default();
        let codes: Vec<SignInCode> = (0..=MAX_CODES as u64)
            .map(|i| sessions.issue_code(ROOT, AT.plus(Duration::from_secs(i))).unwrap())
            .collect();
        let later = AT.plus(Duration::from_secs(60));
        assert!(sessions.redeem_code(codes[0].expose(), Some(ROOT), later).is_none());
        for code in &codes[1..] {
            assert!(sessions.redeem_code(code.expose(), Some(ROOT), later).is_some());
        }
    }

    #[test]
    fn opening_one_more_than_the_most_ends_the_one_used_longest_ago() {
        let sessions = UiSessions::default();
        let tokens: Vec<String> = (0..MAX_SESSIONS)
            .zip(0u64..)
            .map(|(_, i)| sessions.open(&sign_in(), AT.plus(Duration::from_secs(i))).unwrap())
            .map(|session| session.token)
            .collect();
        let later = AT.plus(Duration::from_secs(100));
        // The first one opened is used again: the second is now the one used longest ago.
        assert!(sessions.admit(&tokens[0], Some(ROOT), later).is_some());
        let newest = sessions.open(&sign_in(), later).unwrap();
        assert_eq!(sessions.admit(&tokens[1], Some(ROOT), later), None);
        for token in tokens.iter().skip(2).chain([&tokens[0], &newest.token]) {
            assert!(sessions.admit(token, Some(ROOT), later).is_some());
        }
    }
}
