//! [`MockOAuth`]: a real HTTP identity provider on 127.0.0.1 and a random port, for testing
//! OAuth logins and refreshes end to end.
//!
//! - `GET /authorize` checks the client id, a loopback redirect URI (RFC 8252 §7.3), an S256
//!   code challenge and a state, then approves at once: `302` to
//!   `redirect_uri?code=…&state=…` (or, with [`MockOAuth::set_deny_authorization`], to
//!   `redirect_uri?error=access_denied&state=…`).
//! - `POST /token` serves the `authorization_code` grant (verifying the PKCE verifier against
//!   the challenge) and the `refresh_token` grant, issuing tokens with a configurable lifetime
//!   and, by default, rotating refresh tokens.
//! - Faults are scripted per token request ([`TokenFault`]: 503, any status, `invalid_grant`,
//!   connection dropped, hang), or the whole mock plays unreachable.
//! - Every token request is recorded before it is answered; tests await
//!   [`MockOAuth::wait_for_token_requests`] instead of sleeping.
//! - [`MockOAuth::is_access_token_valid`] tells a mock upstream which bearer tokens to accept.
//!
//! ```no_run
//! # async fn demo() {
//! use switchyard_testkit::{MockOAuth, TokenFault};
//!
//! let idp = MockOAuth::start().await;
//! idp.enqueue_token_fault(TokenFault::Unavailable);
//! // ... configure the client with idp.authorize_url(), idp.token_url(), idp.client_id() ...
//! let requests = idp.wait_for_token_requests(1).await;
//! assert_eq!(requests[0].status, Some(503));
//! # }
//! ```
//!
//! Invariants: never a fixed port in tests; no token derived from a clock or randomness;
//! nothing outlives the handle.

mod http;
mod idp;

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_core::Clock;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use self::http::Shared;
use self::idp::{Idp, Settings};

/// The client id a default mock accepts.
pub const MOCK_CLIENT_ID: &str = "switchyard-test";

/// What the token endpoint does instead of its job, for one request or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenFault {
    /// `503 {"error":"temporarily_unavailable"}`.
    Unavailable,
    /// This status with `{"error":"server_error"}`.
    Status(u16),
    /// `400 {"error":"invalid_grant"}`, whatever the grant.
    InvalidGrant,
    /// The connection is closed without an answer.
    Drop,
    /// No answer, ever (until the mock stops).
    Hang,
    /// `200` with a valid token response padded to 1 MiB: an identity provider that is broken
    /// (or hostile) and would fill the reader's memory.
    Oversized,
}

/// One request to `POST /token`, as received.
#[derive(Clone, Debug)]
pub struct TokenRequest {
    /// Order of arrival, from 0.
    pub seq: u64,
    pub grant_type: String,
    /// The whole form, secrets included: this is a test double.
    pub params: BTreeMap<String, String>,
    /// The scripted fault this request consumed.
    pub fault: Option<TokenFault>,
    /// The status answered; `None` when the connection was dropped or left hanging.
    pub status: Option<u16>,
}

impl TokenRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

/// One request to `GET /authorize`.
#[derive(Clone, Debug)]
pub struct AuthorizeRequest {
    pub params: BTreeMap<String, String>,
    /// Where the browser was sent; `None` when an error page was shown instead.
    pub redirected_to: Option<String>,
}

/// Options for [`MockOAuth::builder`].
#[derive(Debug)]
#[must_use]
pub struct MockOAuthBuilder {
    client_id: String,
    lifetime: Duration,
    rotate: bool,
    clock: Option<Arc<dyn Clock>>,
}

impl Default for MockOAuthBuilder {
    fn default() -> Self {
        Self {
            client_id: MOCK_CLIENT_ID.to_owned(),
            lifetime: Duration::from_secs(3600),
            rotate: true,
            clock: None,
        }
    }
}

impl MockOAuthBuilder {
    pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    /// `expires_in` of every access token issued (whole seconds).
    pub fn token_lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime;
        self
    }

    /// Whether a refresh issues a new refresh token and retires the old one (default), or
    /// answers without a `refresh_token` so the client keeps the one it has.
    pub fn rotate_refresh_tokens(mut self, rotate: bool) -> Self {
        self.rotate = rotate;
        self
    }

    /// With a clock, [`MockOAuth::is_access_token_valid`] also checks expiry against it;
    /// without one, a token stays valid until revoked.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Binds 127.0.0.1:0 and starts serving on the current tokio runtime.
    pub async fn start(self) -> io::Result<MockOAuth> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let settings = Settings {
            client_id: self.client_id,
            lifetime: self.lifetime,
            rotate: self.rotate,
            deny: false,
        };
        let shared = Arc::new(Shared {
            idp: Idp::new(settings, self.clock),
            unreachable: watch::Sender::new(false),
            open: watch::Sender::new(0),
        });
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(http::accept_loop(listener, Arc::clone(&shared), stopped));
        Ok(MockOAuth { addr, shared, stop: Some(stop), task: Some(task) })
    }
}

/// A running mock identity provider on 127.0.0.1. Serves until dropped.
#[derive(Debug)]
pub struct MockOAuth {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl MockOAuth {
    /// A mock with client id [`MOCK_CLIENT_ID`], one-hour tokens and rotating refresh tokens.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start() -> Self {
        Self::builder().start().await.expect("bind the mock identity provider on 127.0.0.1:0")
    }

    pub fn builder() -> MockOAuthBuilder {
        MockOAuthBuilder::default()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn authorize_url(&self) -> String {
        format!("http://{}/authorize", self.addr)
    }

    pub fn token_url(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    pub fn client_id(&self) -> String {
        self.shared.idp.client_id()
    }

    /// Lifetime of tokens issued from now on.
    pub fn set_token_lifetime(&self, lifetime: Duration) {
        self.shared.idp.configure(|s| s.lifetime = lifetime);
    }

    pub fn set_rotate_refresh_tokens(&self, rotate: bool) {
        self.shared.idp.configure(|s| s.rotate = rotate);
    }

    /// The user refuses consent: `/authorize` redirects with `error=access_denied`.
    pub fn set_deny_authorization(&self, deny: bool) {
        self.shared.idp.configure(|s| s.deny = deny);
    }

    /// The next token request (after any already queued) meets `fault`.
    pub fn enqueue_token_fault(&self, fault: TokenFault) {
        self.shared.idp.enqueue_fault(fault);
    }

    /// Every token request meets `fault` once the queue is empty; `None` clears the queue and
    /// the default, so the endpoint works again.
    pub fn set_token_fault(&self, fault: Option<TokenFault>) {
        self.shared.idp.set_default_fault(fault);
    }

    /// While `true`, connections are dropped on arrival and open ones closed: the identity
    /// provider is unreachable and nothing is recorded. Resolves once every open connection is
    /// closed, so no request can slip through on a keep-alive connection afterwards.
    pub async fn set_unreachable(&self, unreachable: bool) {
        self.shared.unreachable.send_replace(unreachable);
        if unreachable {
            let mut open = self.shared.open.subscribe();
            open.wait_for(|&n| n == 0).await.expect("the mock owns the sender");
        }
    }

    /// Every refresh token issued so far stops working (the user revoked the app's access).
    pub fn revoke_refresh_tokens(&self) {
        self.shared.idp.revoke_refresh_tokens();
    }

    /// Every access token issued so far stops being valid (an upstream should answer 401).
    pub fn revoke_access_tokens(&self) {
        self.shared.idp.revoke_access_tokens();
    }

    /// Issued, not revoked and, when the mock has a clock, not expired.
    pub fn is_access_token_valid(&self, token: &str) -> bool {
        self.shared.idp.is_access_token_valid(token)
    }

    /// Every currently valid access token, sorted.
    pub fn valid_access_tokens(&self) -> Vec<String> {
        self.shared.idp.valid_access_tokens()
    }

    pub fn is_refresh_token_valid(&self, token: &str) -> bool {
        self.shared.idp.is_refresh_token_valid(token)
    }

    /// Every token request received, in order.
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.shared.idp.token_requests()
    }

    pub fn token_request_count(&self) -> usize {
        self.shared.idp.token_request_count()
    }

    /// Resolves once at least `n` token requests have been recorded, and returns all of them.
    /// Wrap it in `tokio::time::timeout` so a broken test fails instead of hanging.
    pub async fn wait_for_token_requests(&self, n: usize) -> Vec<TokenRequest> {
        self.shared.idp.wait_for_token_requests(n).await;
        self.token_requests()
    }

    /// Every authorization request received, in order.
    pub fn authorize_requests(&self) -> Vec<AuthorizeRequest> {
        self.shared.idp.authorize_requests()
    }

    /// Stops accepting, drops every connection and waits until they are closed.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for MockOAuth {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use switchyard_core::{ManualClock, UnixMillis};

    use super::*;

    /// RFC 7636 Appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    const REDIRECT: &str = "http://127.0.0.1:4999/callback";

    fn client() -> reqwest::Client {
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
    }

    fn query_of(location: &str) -> HashMap<String, String> {
        url::Url::parse(location).unwrap().query_pairs().into_owned().collect()
    }

    /// Runs `/authorize` with `overrides` on top of a valid request; returns the status and
    /// the redirect's query (empty when there was none).
    async fn authorize(
        idp: &MockOAuth,
        overrides: &[(&str, &str)],
    ) -> (u16, HashMap<String, String>) {
        let client_id = idp.client_id();
        let mut params: BTreeMap<&str, &str> = [
            ("response_type", "code"),
            ("client_id", client_id.as_str()),
            ("redirect_uri", REDIRECT),
            ("state", "xyz"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("scope", "openid"),
        ]
        .into();
        params.extend(overrides.iter().copied());
        let query =
            url::form_urlencoded::Serializer::new(String::new()).extend_pairs(params).finish();
        let url = format!("{}?{query}", idp.authorize_url());
        let response = client().get(url).send().await.unwrap();
        let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
        (response.status().as_u16(), location.as_deref().map(query_of).unwrap_or_default())
    }

    async fn token(idp: &MockOAuth, form: &[(&str, &str)]) -> (u16, serde_json::Value) {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let response = client()
            .post(idp.token_url())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, serde_json::from_slice(&response.bytes().await.unwrap()).unwrap())
    }

    async fn exchange(idp: &MockOAuth, code: &str, verifier: &str) -> (u16, serde_json::Value) {
        let client_id = idp.client_id();
        token(
            idp,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client_id),
                ("code_verifier", verifier),
            ],
        )
        .await
    }

    async fn refresh(idp: &MockOAuth, refresh_token: &str) -> (u16, serde_json::Value) {
        let client_id = idp.client_id();
        token(
            idp,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("client_id", &client_id),
            ],
        )
        .await
    }

    #[tokio::test]
    async fn authorization_code_with_the_right_verifier_yields_tokens_once() {
        let idp = MockOAuth::start().await;
        let (status, q) = authorize(&idp, &[]).await;
        assert_eq!(status, 302);
        assert_eq!(q["state"], "xyz");
        let (status, body) = exchange(&idp, &q["code"], VERIFIER).await;
        assert_eq!(status, 200, "{body}");
        let access = body["access_token"].as_str().unwrap();
        assert!(idp.is_access_token_valid(access));
        assert_eq!(body["expires_in"], 3600);
        assert_eq!(body["scope"], "openid");
        assert!(idp.is_refresh_token_valid(body["refresh_token"].as_str().unwrap()));
        let (status, again) = exchange(&idp, &q["code"], VERIFIER).await;
        assert_eq!((status, again["error"].as_str()), (400, Some("invalid_grant")));
    }

    #[tokio::test]
    async fn a_wrong_pkce_verifier_is_refused_with_invalid_grant() {
        let idp = MockOAuth::start().await;
        let (_, q) = authorize(&idp, &[]).await;
        let wrong = "a".repeat(43);
        let (status, body) = exchange(&idp, &q["code"], &wrong).await;
        assert_eq!((status, body["error"].as_str()), (400, Some("invalid_grant")));
        assert!(idp.valid_access_tokens().is_empty());
    }

    #[tokio::test]
    async fn authorize_refuses_non_loopback_redirects_without_redirecting() {
        let idp = MockOAuth::start().await;
        for redirect in ["https://evil.example/cb", "http://localhost:80/cb", "http://127.0.0.1/cb"]
        {
            let (status, q) = authorize(&idp, &[("redirect_uri", redirect)]).await;
            assert_eq!(status, 400, "{redirect}");
            assert!(q.is_empty());
        }
        let (status, _) = authorize(&idp, &[("client_id", "someone-else")]).await;
        assert_eq!(status, 400);
    }

    #[tokio::test]
    async fn authorize_redirects_protocol_errors_back_with_the_state() {
        let idp = MockOAuth::start().await;
        let (status, q) = authorize(&idp, &[("code_challenge_method", "plain")]).await;
        assert_eq!(
            (status, q["error"].as_str(), q["state"].as_str()),
            (302, "invalid_request", "xyz")
        );
        idp.set_deny_authorization(true);
        let (_, q) = authorize(&idp, &[]).await;
        assert_eq!(q["error"], "access_denied");
        assert!(!q.contains_key("code"));
    }

    #[tokio::test]
    async fn refresh_rotates_the_refresh_token_and_retires_the_old_one() {
        let idp = MockOAuth::start().await;
        let (_, q) = authorize(&idp, &[]).await;
        let (_, first) = exchange(&idp, &q["code"], VERIFIER).await;
        let old = first["refresh_token"].as_str().unwrap();
        let (status, second) = refresh(&idp, old).await;
        assert_eq!(status, 200);
        let new = second["refresh_token"].as_str().unwrap();
        assert_ne!(new, old);
        assert!(!idp.is_refresh_token_valid(old));
        let (status, body) = refresh(&idp, old).await;
        assert_eq!((status, body["error"].as_str()), (400, Some("invalid_grant")));
    }

    #[tokio::test]
    async fn without_rotation_a_refresh_answers_no_refresh_token_and_the_old_one_keeps_working() {
        let idp = MockOAuth::builder().rotate_refresh_tokens(false).start().await.unwrap();
        let (_, q) = authorize(&idp, &[]).await;
        let (_, first) = exchange(&idp, &q["code"], VERIFIER).await;
        let rt = first["refresh_token"].as_str().unwrap();
        for _ in 0..2 {
            let (status, body) = refresh(&idp, rt).await;
            assert_eq!(status, 200);
            assert!(body.get("refresh_token").is_none(), "{body}");
        }
    }

    #[tokio::test]
    async fn scripted_faults_are_consumed_one_per_request_and_recorded() {
        let idp = MockOAuth::start().await;
        idp.enqueue_token_fault(TokenFault::Unavailable);
        idp.enqueue_token_fault(TokenFault::InvalidGrant);
        assert_eq!(refresh(&idp, "x").await.0, 503);
        assert_eq!(refresh(&idp, "x").await.1["error"], "invalid_grant");
        // The queue is empty: the real check runs, and "x" was never issued.
        assert_eq!(
            refresh(&idp, "x").await.1["error_description"],
            "refresh token revoked or unknown"
        );
        let log = idp.wait_for_token_requests(3).await;
        let faults: Vec<_> = log.iter().map(|r| r.fault).collect();
        assert_eq!(faults, [Some(TokenFault::Unavailable), Some(TokenFault::InvalidGrant), None]);
        assert_eq!(log[0].grant_type, "refresh_token");
        assert_eq!(log[0].param("refresh_token"), Some("x"));
    }

    #[tokio::test]
    async fn a_dropped_token_request_is_recorded_and_the_client_sees_a_transport_error() {
        let idp = MockOAuth::start().await;
        idp.set_token_fault(Some(TokenFault::Drop));
        let err = client().post(idp.token_url()).body("grant_type=refresh_token").send().await;
        assert!(err.is_err());
        assert_eq!(idp.token_requests()[0].status, None);
        idp.set_token_fault(None);
        assert_eq!(refresh(&idp, "x").await.0, 400);
    }

    #[tokio::test]
    async fn while_unreachable_nothing_connects_and_nothing_is_recorded() {
        let idp = MockOAuth::start().await;
        let pooled = client();
        // A keep-alive connection made before the outage must not survive it either.
        // 401: the empty form names no client.
        assert_eq!(pooled.post(idp.token_url()).send().await.unwrap().status(), 401);
        idp.set_unreachable(true).await;
        assert!(pooled.post(idp.token_url()).send().await.is_err());
        assert!(client().post(idp.token_url()).send().await.is_err());
        assert_eq!(idp.token_request_count(), 1);
        idp.set_unreachable(false).await;
        assert_eq!(client().post(idp.token_url()).send().await.unwrap().status(), 401);
        assert_eq!(idp.token_request_count(), 2);
    }

    #[tokio::test]
    async fn with_a_clock_access_tokens_stop_being_valid_at_expiry_or_when_revoked() {
        let clock = ManualClock::new(UnixMillis(1_700_000_000_000));
        let idp = MockOAuth::builder()
            .token_lifetime(Duration::from_secs(60))
            .clock(Arc::new(clock.clone()))
            .start()
            .await
            .unwrap();
        let (_, q) = authorize(&idp, &[]).await;
        let (_, body) = exchange(&idp, &q["code"], VERIFIER).await;
        let access = body["access_token"].as_str().unwrap().to_owned();
        clock.advance(Duration::from_millis(59_999));
        assert_eq!(idp.valid_access_tokens(), std::slice::from_ref(&access));
        clock.advance(Duration::from_millis(1));
        assert!(!idp.is_access_token_valid(&access));

        let (_, again) = refresh(&idp, body["refresh_token"].as_str().unwrap()).await;
        let fresh = again["access_token"].as_str().unwrap();
        assert!(idp.is_access_token_valid(fresh));
        idp.revoke_access_tokens();
        assert!(!idp.is_access_token_valid(fresh));
    }
}
