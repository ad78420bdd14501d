//! Which agent session a request belongs to, and the table of where each session is pinned
//! (RESILIENCE.md §11; the rules are `switchyard_core::routing::session`'s).
//!
//! The session is what the client already sends, in this order: Claude Code's
//! `X-Claude-Code-Session-Id` header, the `session_id` inside its `metadata.user_id` (a JSON
//! string), Codex's `session-id` header, a `prompt_cache_key` (Codex and OpenAI clients; not
//! `user`, which names an end user); else, for clients that send none (aider, opencode, SDK
//! scripts), a digest of the local key, the system prompt and the first user message, which
//! stay the same for every turn of one conversation. Read from the parsed request's vendor
//! fields: no second pass over the body.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName};
use parking_lot::Mutex;
use serde::Deserialize;
use switchyard_core::UnixMillis;
use switchyard_core::ids::{CandidateKey, ProviderId};
use switchyard_core::routing::Plan;
use switchyard_core::routing::session::{
    Left, Pin, Repin, SessionKey, SessionLimits, Sessions, Shown, Steer, Target,
};
use switchyard_providers::chat::{ChatRequest, Part, Role};

use super::continuation::Notes;
use super::exhausted::{TraceEntry, TraceEvent};
use super::parsed::Parsed;

/// A request's session, and whether the request continues it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Session {
    pub key: SessionKey,
    /// `false` for the first turn of a session derived from the conversation (no answer in
    /// it yet): whatever it is pinned to, it is new, so it is planned as new and binds. A
    /// client's own session id always continues.
    pub continuing: bool,
}

/// The session of `request`, made through the local key `caller` (none for the UI's "try
/// it"); `None` when nothing names or shapes one (no user message at all).
pub(crate) fn session_of(
    headers: &HeaderMap,
    request: &Parsed<'_>,
    caller: Option<&str>,
) -> Option<Session> {
    let caller = caller.unwrap_or("");
    if let Some(id) = named(headers, request.settings()) {
        return Some(Session { key: SessionKey::named(caller, &id), continuing: true });
    }
    // Only a session derived from the conversation reads it whole.
    let request = request.whole().ok()?;
    let key = derived(request, caller)?;
    let continuing = request.messages.iter().any(|m| m.role == Role::Assistant);
    Some(Session { key, continuing })
}

/// Claude Code's session header, and the generic one: names made once, so no request parses
/// them to look them up.
const CLAUDE_CODE_SESSION: HeaderName = HeaderName::from_static("x-claude-code-session-id");
const SESSION_ID: HeaderName = HeaderName::from_static("session-id");

/// The session the client named, in a header or a top-level field.
fn named(headers: &HeaderMap, settings: &ChatRequest<'_>) -> Option<String> {
    let header = |name: &HeaderName| {
        headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
    };
    header(&CLAUDE_CODE_SESSION)
        .map(str::to_owned)
        .or_else(|| vendor_field(settings, "metadata").and_then(|m| claude_code_session(&m)))
        .or_else(|| header(&SESSION_ID).map(str::to_owned))
        .or_else(|| vendor_field(settings, "prompt_cache_key").and_then(|k| string(&k)))
}

/// The session of a client that names none, from its system prompt and first user message.
fn derived(request: &ChatRequest<'_>, caller: &str) -> Option<SessionKey> {
    let first_user = request.messages.iter().find(|m| m.role == Role::User)?;
    let mut system = String::new();
    for text in &request.system {
        system.push_str(&text.text);
        system.push('\n');
    }
    let mut said = String::new();
    for part in &first_user.content {
        if let Part::Text(text) = part {
            said.push_str(&text.text);
        }
    }
    Some(SessionKey::derived(caller, &system, &said))
}

/// A vendor field the parser kept as it was written, by name.
pub(crate) fn vendor_field(request: &ChatRequest<'_>, name: &str) -> Option<String> {
    request.vendor.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.get().to_owned())
}

fn string(json: &str) -> Option<String> {
    serde_json::from_str::<String>(json).ok().filter(|s| !s.is_empty())
}

/// `metadata.user_id` of Claude Code: a JSON string holding `device_id`, `account_uuid` and
/// `session_id` (see the real fixture in `switchyard-providers/tests/fixtures/real/`).
fn claude_code_session(metadata: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Metadata {
        user_id: Option<String>,
    }
    #[derive(Deserialize)]
    struct UserId {
        session_id: Option<String>,
    }
    let user_id = serde_json::from_str::<Metadata>(metadata).ok()?.user_id?;
    serde_json::from_str::<UserId>(&user_id).ok()?.session_id.filter(|s| !s.is_empty())
}

/// The pins of every session, shared by all requests. One short lock per request.
#[derive(Debug)]
pub(crate) struct SessionTable {
    inner: Mutex<Sessions>,
}

/// A served request, as the table is told of it.
#[derive(Clone, Copy)]
pub(crate) struct Serve<'a> {
    pub session: SessionKey,
    pub key: &'a CandidateKey,
    /// The candidate the request's plan put first (see `Sessions::served_after`).
    pub first: &'a CandidateKey,
    pub steered: &'a Steer,
}

impl SessionTable {
    pub(crate) fn new(limits: SessionLimits) -> Self {
        Self { inner: Mutex::new(Sessions::new(limits)) }
    }

    pub(crate) fn set_limits(&self, limits: SessionLimits) {
        self.inner.lock().set_limits(limits);
    }

    pub(crate) fn pin(&self, session: SessionKey, now: UnixMillis) -> Option<Pin> {
        self.inner.lock().pin(session, now)
    }

    /// See `Sessions::steer`.
    pub(crate) fn steer(
        &self,
        plan: &mut Plan,
        pin: Option<&Pin>,
        ordered: bool,
        degraded: impl Fn(&ProviderId) -> bool,
    ) -> Steer {
        if pin.is_none() {
            return Steer::New;
        }
        self.inner.lock().steer(plan, pin, ordered, degraded)
    }

    /// `key`'s target showed `shown` (see `Sessions::shown`).
    pub(crate) fn shown(&self, key: &CandidateKey, shown: Shown) {
        self.inner.lock().shown(key, shown);
    }

    /// Binds, keeps or moves the session's pin to the candidate that served: how, and the
    /// home it returns to; `whole` is what the answer showed of its target, when it is whole
    /// already (not a stream). `None` when the request's stream broke before this was told:
    /// its relay moved the session off that candidate, which stands.
    pub(crate) fn served(
        &self,
        serve: Serve<'_>,
        now: UnixMillis,
        whole: Option<Shown>,
        notes: Option<&Notes>,
    ) -> Option<(Repin, Option<Target>)> {
        let mut sessions = self.inner.lock();
        if let Some(whole) = whole {
            sessions.shown(serve.key, whole);
        }
        if notes.is_some_and(|notes| broke_noted(&notes.lock().expect("never poisoned"))) {
            return None;
        }
        let repin =
            sessions.served_after(serve.session, serve.key, now, serve.first, serve.steered);
        Some((repin, sessions.home(serve.session)))
    }

    /// Pins read back from the request log at start, oldest first.
    pub(crate) fn restore(
        &self,
        pins: impl IntoIterator<Item = (SessionKey, Pin, UnixMillis)>,
        now: UnixMillis,
    ) {
        let mut sessions = self.inner.lock();
        for (session, pin, seen) in pins {
            sessions.restore(session, pin, seen, now);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.lock().len()
    }
}

/// Whether a relay noted that the request's stream broke and moved its session.
fn broke_noted(notes: &[TraceEntry]) -> bool {
    notes.iter().any(|entry| {
        matches!(&entry.what, TraceEvent::Session { because: Some(because), .. }
            if because == Left::Broke.code())
    })
}

/// What a stream's relay tells the session table (RESILIENCE.md §11): a break after content
/// moves the session before the client reads the stream's end; a whole answer marks its
/// target, and pins the session where a continuation finished it.
pub(crate) struct Watch {
    table: Arc<SessionTable>,
    session: Option<SessionKey>,
    /// The request's notes, read by the request log (and by [`SessionTable::served`]).
    notes: Notes,
    /// The candidate the stream started on.
    started: CandidateKey,
}

impl Watch {
    pub(crate) fn new(
        table: &Arc<SessionTable>,
        session: Option<SessionKey>,
        notes: &Notes,
        started: &CandidateKey,
    ) -> Self {
        Self {
            table: Arc::clone(table),
            session,
            notes: Arc::clone(notes),
            started: started.clone(),
        }
    }

    /// The stream broke after content on `key`: the session's next request starts elsewhere.
    pub(crate) fn broke(&self, key: &CandidateKey, now: UnixMillis) {
        let mut sessions = self.table.inner.lock();
        let Some(session) = self.session else {
            sessions.shown(key, Shown::Failure);
            return;
        };
        sessions.broke(session, key, now);
        // Noted under the table's lock, so a `served` told later sees it.
        let what = TraceEvent::Session {
            session: session.to_string(),
            pin: "moved".into(),
            from: Some(key.to_string()),
            because: Some(Left::Broke.code().into()),
        };
        let entry = TraceEntry::new(key, what);
        self.notes.lock().expect("never poisoned").push(entry);
    }

    /// The stream ended whole on `key` (the one it started on, or a continuation's).
    pub(crate) fn whole(&self, key: &CandidateKey, now: UnixMillis) {
        let mut sessions = self.table.inner.lock();
        sessions.shown(key, Shown::WholeStream);
        let Some(session) = self.session.filter(|_| *key != self.started) else { return };
        let repin = sessions.served(session, key, now, &Steer::Kept);
        let entry = TraceEntry::session(key, session, &repin, &Steer::Kept);
        self.notes.lock().expect("never poisoned").push(entry);
    }
}

#[cfg(test)]
mod tests {
    use switchyard_providers::dialect::ClientDialect as Dialect;

    use super::*;

    fn parsed(dialect: Dialect, body: &'static str) -> Parsed<'static> {
        Parsed::read(dialect, body.as_bytes(), None).unwrap()
    }

    #[test]
    fn the_session_is_what_the_client_sends_in_the_order_they_are_trusted() {
        let claude = include_str!(
            "../../../switchyard-providers/tests/fixtures/real/claude-code-2.1.197.request.json"
        );
        let request = parsed(Dialect::Anthropic, claude);
        let none = HeaderMap::new();
        let from_metadata = session_of(&none, &request, Some("k")).unwrap();
        let named = SessionKey::named("k", "00000000-0000-4000-8000-000000000000");
        assert_eq!(from_metadata, Session { key: named, continuing: true });
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-claude-code-session-id",
            "00000000-0000-4000-8000-000000000000".parse().unwrap(),
        );
        assert_eq!(session_of(&headers, &request, Some("k")), Some(from_metadata), "the same id");
        assert_ne!(session_of(&none, &request, Some("other key")), Some(from_metadata));

        let codex = include_str!(
            "../../../switchyard-providers/tests/fixtures/real/codex-0.171.0.request.json"
        );
        let request = parsed(Dialect::Responses, codex);
        let named = SessionKey::named("k", "00000000-0000-7000-8000-000000000000");
        assert_eq!(
            session_of(&none, &request, Some("k")),
            Some(Session { key: named, continuing: true }),
            "prompt_cache_key"
        );
    }

    #[test]
    fn a_client_that_names_no_session_gets_one_per_conversation() {
        let none = HeaderMap::new();
        let turn = |extra: &'static str| {
            let body = Box::leak(
                format!(r#"{{"model":"m","messages":[{{"role":"system","content":"be brief"}},{{"role":"user","content":"first"}}{extra}]}}"#)
                    .into_boxed_str(),
            );
            parsed(Dialect::OpenAi, body)
        };
        let one = session_of(&none, &turn(""), Some("k")).unwrap();
        assert!(!one.continuing, "a first turn is a new session");
        let later =
            turn(r#",{"role":"assistant","content":"a"},{"role":"user","content":"second"}"#);
        let next = session_of(&none, &later, Some("k")).unwrap();
        assert_eq!(next.key, one.key, "every turn of it");
        assert!(next.continuing);
        let other = parsed(
            Dialect::OpenAi,
            r#"{"model":"m","messages":[{"role":"user","content":"else"}]}"#,
        );
        assert_ne!(session_of(&none, &other, Some("k")).unwrap().key, one.key);
        let empty = parsed(Dialect::OpenAi, r#"{"model":"m","messages":[]}"#);
        assert_eq!(session_of(&none, &empty, Some("k")), None);
    }
}
