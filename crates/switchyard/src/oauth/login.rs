//! Logins: the loopback redirect listener of one authorization-code + PKCE sign-in
//! (RFC 8252 §7.3), and the registry of logins the UI follows.
//!
//! Invariants:
//! - Each login has its own listener on 127.0.0.1 and a free port, serving only
//!   `GET /callback`, and it closes when the login ends: success, failure, cancellation, or
//!   the timeout (tokio time, so tests can pause it). Nothing listens once a login is over.
//! - The code is exchanged only for an answer whose `state` matches this login's (compared in
//!   constant time); a mismatch is refused without touching anything, and the login keeps
//!   waiting for the real answer. At most one code is exchanged per login.
//! - A login's status leaves `pending` exactly once; whoever gets there first (the browser,
//!   the timeout, a cancel) decides the result.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::IntoFuture as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use axum::routing::get;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use switchyard_providers::oauth::{Pkce, Registration};
use switchyard_secrets::Secret;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot, watch};

use super::stored::Tokens;
use super::{Inner, Slot};

/// Finished logins remembered for [`super::OAuth::login_status`]; older ones are forgotten.
const REMEMBERED: usize = 32;

/// How long a closing listener waits for the browser to take its last page.
const GOODBYE: Duration = Duration::from_secs(5);

/// Names one login for as long as the manager remembers it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS,
)]
#[serde(transparent)]
#[ts(export)]
#[ts(type = "number")]
pub struct LoginId(pub u64);

impl fmt::Display for LoginId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "login-{}", self.0)
    }
}

/// Where a login stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(tag = "status", rename_all = "snake_case")]
#[ts(export)]
pub enum LoginStatus {
    /// Waiting for the browser to come back.
    Pending,
    /// Tokens are stored; the credential is usable.
    Succeeded,
    Failed {
        reason: String,
    },
}

/// A started login: open `authorization_url` in the user's browser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
pub struct LoginStarted {
    pub id: LoginId,
    pub authorization_url: String,
    /// The loopback listener's callback, as registered in the URL.
    pub redirect_uri: String,
}

/// What one login needs to finish.
pub(super) struct Flow {
    registration: Registration,
    pkce: Pkce,
    state: String,
    redirect_uri: String,
}

impl Flow {
    pub(super) fn new(
        registration: Registration,
        pkce: Pkce,
        state: String,
        redirect_uri: String,
    ) -> Self {
        Self { registration, pkce, state, redirect_uri }
    }
}

impl fmt::Debug for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flow")
            .field("registration", &self.registration)
            .field("pkce", &self.pkce)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Entry {
    status: watch::Sender<LoginStatus>,
    cancel: Arc<Notify>,
}

/// Every login this manager remembers.
#[derive(Debug, Default)]
pub(super) struct Logins {
    next: AtomicU64,
    map: Mutex<BTreeMap<LoginId, Entry>>,
}

impl Logins {
    fn register(&self) -> (LoginId, watch::Sender<LoginStatus>, Arc<Notify>) {
        let id = LoginId(self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let status = watch::Sender::new(LoginStatus::Pending);
        let cancel = Arc::new(Notify::new());
        let mut map = self.map.lock();
        let finished: Vec<LoginId> = map
            .iter()
            .filter(|(_, e)| *e.status.borrow() != LoginStatus::Pending)
            .map(|(id, _)| *id)
            .collect();
        for old in finished.iter().take(finished.len().saturating_sub(REMEMBERED - 1)) {
            map.remove(old);
        }
        map.insert(id, Entry { status: status.clone(), cancel: Arc::clone(&cancel) });
        (id, status, cancel)
    }

    pub(super) fn status(&self, id: LoginId) -> Option<LoginStatus> {
        self.map.lock().get(&id).map(|e| e.status.borrow().clone())
    }

    pub(super) async fn wait(&self, id: LoginId) -> Option<LoginStatus> {
        let mut status = self.map.lock().get(&id)?.status.subscribe();
        let result = status.wait_for(|s| *s != LoginStatus::Pending).await.map(|s| s.clone());
        // The sender lives in the map and in the login task; it is gone only when both are,
        // and then the last value is final.
        Some(result.unwrap_or_else(|_| status.borrow().clone()))
    }

    pub(super) fn cancel(&self, id: LoginId) -> bool {
        let map = self.map.lock();
        match map.get(&id) {
            Some(e) if *e.status.borrow() == LoginStatus::Pending => {
                e.cancel.notify_one();
                true
            }
            _ => false,
        }
    }
}

/// The login's state as its callback handler sees it.
struct Callback {
    inner: Arc<Inner>,
    slot: Arc<Slot>,
    flow: Flow,
    status: watch::Sender<LoginStatus>,
    exchanging: AtomicBool,
}

impl Callback {
    /// Leaves `pending`, unless something else already did.
    fn finish(&self, result: LoginStatus) {
        self.status.send_if_modified(|s| {
            let pending = *s == LoginStatus::Pending;
            if pending {
                *s = result;
            }
            pending
        });
    }

    fn is_pending(&self) -> bool {
        *self.status.borrow() == LoginStatus::Pending
    }
}

/// Starts serving the login's callback in the background.
pub(super) fn spawn(
    inner: &Arc<Inner>,
    slot: Arc<Slot>,
    flow: Flow,
    listener: TcpListener,
) -> LoginId {
    let (id, status, cancel) = inner.logins.register();
    let callback = Arc::new(Callback {
        inner: Arc::clone(inner),
        slot,
        flow,
        status,
        exchanging: AtomicBool::new(false),
    });
    tokio::spawn(run(callback, listener, inner.login_timeout, cancel));
    id
}

async fn run(
    callback: Arc<Callback>,
    listener: TcpListener,
    timeout: Duration,
    cancel: Arc<Notify>,
) {
    let router = Router::new().route("/callback", get(answer)).with_state(Arc::clone(&callback));
    let (stop, stopped) = oneshot::channel::<()>();
    let mut server = tokio::spawn(
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let mut done = callback.status.subscribe();
    let ended = tokio::select! {
        _ = done.wait_for(|s| *s != LoginStatus::Pending) => None,
        () = tokio::time::sleep(timeout) => Some(format!(
            "the browser did not come back within {} s; start the sign-in again",
            timeout.as_secs()
        )),
        () = cancel.notified() => Some("the sign-in was cancelled".to_owned()),
    };
    let _ = stop.send(());
    // Graceful, so the browser gets the page it is waiting for; bounded, so a connection it
    // keeps alive cannot hold the port open.
    if tokio::time::timeout(GOODBYE, &mut server).await.is_err() {
        server.abort();
        let _ = server.await;
    }
    // Only now, with the port closed: whoever sees a timed-out or cancelled login sees
    // nothing listening any more.
    if let Some(reason) = ended {
        callback.finish(LoginStatus::Failed { reason });
    }
}

/// `GET /callback?code=…&state=…` (or `?error=…&state=…`).
async fn answer(
    State(callback): State<Arc<Callback>>,
    Query(query): Query<HashMap<String, String>>,
) -> (StatusCode, Html<String>) {
    if !callback.is_pending() {
        return page(StatusCode::GONE, "Sign-in already finished", "You can close this tab.");
    }
    let state_matches = query.get("state").is_some_and(|s| same(s, &callback.flow.state));
    if !state_matches {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in not accepted",
            "This answer does not belong to the sign-in Switchyard started (the state does not \
             match), so nothing was changed. Start the sign-in again from Switchyard if needed.",
        );
    }
    if let Some(error) = query.get("error") {
        let description = query.get("error_description").map(|d| format!(" ({})", printable(d)));
        let reason = format!(
            "the identity provider refused the sign-in: {}{}",
            printable(error),
            description.unwrap_or_default()
        );
        callback.finish(LoginStatus::Failed { reason: reason.clone() });
        return page(StatusCode::OK, "Sign-in failed", &reason);
    }
    let Some(code) = query.get("code").filter(|c| !c.is_empty()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in not accepted",
            "The answer carries no code.",
        );
    };
    if callback.exchanging.swap(true, Ordering::SeqCst) {
        return page(
            StatusCode::CONFLICT,
            "Sign-in in progress",
            "This sign-in is already being completed.",
        );
    }
    let inner = &callback.inner;
    let flow = &callback.flow;
    let exchanged = inner
        .tokens
        .exchange_code(
            &flow.registration,
            &Secret::new(code.as_str()),
            &flow.redirect_uri,
            flow.pkce.verifier(),
        )
        .await;
    let tokens = match exchanged {
        Ok(response) => Tokens::from_response(response, inner.clock.now(), None),
        Err(error) => {
            let reason = error.to_string();
            callback.finish(LoginStatus::Failed { reason: reason.clone() });
            return page(StatusCode::BAD_GATEWAY, "Sign-in failed", &reason);
        }
    };
    if !callback.is_pending() {
        return page(StatusCode::GONE, "Sign-in already finished", "You can close this tab.");
    }
    match inner.install(&callback.slot, tokens).await {
        Ok(()) => {
            callback.finish(LoginStatus::Succeeded);
            let key = &callback.slot.key;
            let message = format!(
                "Switchyard is signed in to {} ({}). You can close this tab.",
                key.provider, key.credential
            );
            page(StatusCode::OK, "Signed in", &message)
        }
        Err(error) => {
            let reason = format!("the tokens could not be stored: {error}");
            callback.finish(LoginStatus::Failed { reason: reason.clone() });
            page(StatusCode::INTERNAL_SERVER_ERROR, "Sign-in failed", &reason)
        }
    }
}

/// Equal strings, compared without an early exit, so the state cannot be guessed byte by byte
/// from timing.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Text from the query, cut to printable ASCII and 200 characters.
fn printable(text: &str) -> String {
    text.chars().filter(|c| (' '..='~').contains(c)).take(200).collect()
}

fn page(status: StatusCode, title: &str, message: &str) -> (StatusCode, Html<String>) {
    let (title, message) = (escape(title), escape(message));
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title} - Switchyard</title>\
         </head><body style=\"font-family:sans-serif;margin:3em\"><h1>{title}</h1><p>{message}</p>\
         </body></html>"
    );
    (status, Html(html))
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_comparison_needs_every_byte() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert!(!same("", "a"));
    }

    #[test]
    fn pages_escape_what_the_identity_provider_said() {
        let (_, Html(html)) = page(StatusCode::OK, "t", "<script>alert('x')</script> & co");
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"),
            "{html}"
        );
    }

    #[test]
    fn only_the_newest_finished_logins_are_remembered() {
        let logins = Logins::default();
        let mut ids = Vec::new();
        for _ in 0..(REMEMBERED + 5) {
            let (id, status, _) = logins.register();
            status.send_replace(LoginStatus::Succeeded);
            ids.push(id);
        }
        let (pending, _, _) = logins.register();
        assert_eq!(logins.status(ids[0]), None);
        assert_eq!(logins.status(*ids.last().unwrap()), Some(LoginStatus::Succeeded));
        assert_eq!(logins.status(pending), Some(LoginStatus::Pending));
        assert!(logins.map.lock().len() <= REMEMBERED + 1);
    }
}
