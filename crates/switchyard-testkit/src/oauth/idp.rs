//! The mock identity provider's model: registered client, outstanding authorization codes,
//! issued tokens, scripted faults and the request journal. No I/O: the HTTP side hands it a
//! parsed request and sends back what it decides.
//!
//! Invariants:
//! - An authorization code is single-use and bound to the redirect URI and PKCE challenge of
//!   its authorization request; the token request must match both, and the verifier is
//!   checked with an S256 implementation of its own (not Switchyard's), so a bug in
//!   Switchyard's PKCE cannot be mirrored here and pass.
//! - Every token request is recorded, and its count published, before it is answered; a
//!   scripted fault is consumed by exactly one token request.
//! - Token values are derived from a counter (`mock-access-N`, `mock-refresh-N`), never from the
//!   system clock or a random source, so failures are reproducible.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use switchyard_core::{Clock, UnixMillis};
use tokio::sync::watch;
use url::Url;

use super::{AuthorizeRequest, TokenFault, TokenRequest};

/// What the token endpoint does with one request.
#[derive(Debug)]
pub(super) enum TokenAnswer {
    Json {
        status: u16,
        body: Value,
    },
    /// Close the connection without answering.
    Drop,
    /// Never answer.
    Hang,
}

/// What the authorization endpoint does with one request.
#[derive(Debug)]
pub(super) enum AuthorizeAnswer {
    /// 302 to this location.
    Redirect(String),
    /// An error page: the redirect URI or client cannot be trusted, so no redirect (RFC 6749
    /// §4.1.2.1).
    Page { status: u16, text: String },
}

#[derive(Debug)]
struct PendingCode {
    redirect_uri: String,
    challenge: String,
    scope: Option<String>,
}

#[derive(Debug)]
struct AccessToken {
    issued_at: Option<UnixMillis>,
    lifetime: Duration,
    revoked: bool,
}

#[derive(Debug)]
pub(super) struct Settings {
    pub(super) client_id: String,
    pub(super) lifetime: Duration,
    pub(super) rotate: bool,
    pub(super) deny: bool,
}

#[derive(Debug)]
struct State {
    settings: Settings,
    codes: HashMap<String, PendingCode>,
    access: HashMap<String, AccessToken>,
    /// Refresh token → still usable.
    refresh: HashMap<String, bool>,
    faults: VecDeque<TokenFault>,
    default_fault: Option<TokenFault>,
    counter: u64,
    token_log: Vec<TokenRequest>,
    authorize_log: Vec<AuthorizeRequest>,
}

/// The identity provider behind the mock's HTTP endpoints.
#[derive(Debug)]
pub(super) struct Idp {
    state: Mutex<State>,
    token_count: watch::Sender<usize>,
    clock: Option<Arc<dyn Clock>>,
}

type Params = BTreeMap<String, String>;

fn error(status: u16, code: &str, description: &str) -> TokenAnswer {
    TokenAnswer::Json { status, body: json!({ "error": code, "error_description": description }) }
}

impl Idp {
    pub(super) fn new(settings: Settings, clock: Option<Arc<dyn Clock>>) -> Self {
        Self {
            state: Mutex::new(State {
                settings,
                codes: HashMap::new(),
                access: HashMap::new(),
                refresh: HashMap::new(),
                faults: VecDeque::new(),
                default_fault: None,
                counter: 0,
                token_log: Vec::new(),
                authorize_log: Vec::new(),
            }),
            token_count: watch::Sender::new(0),
            clock,
        }
    }

    pub(super) fn client_id(&self) -> String {
        self.state.lock().settings.client_id.clone()
    }

    pub(super) fn configure(&self, change: impl FnOnce(&mut Settings)) {
        change(&mut self.state.lock().settings);
    }

    pub(super) fn enqueue_fault(&self, fault: TokenFault) {
        self.state.lock().faults.push_back(fault);
    }

    pub(super) fn set_default_fault(&self, fault: Option<TokenFault>) {
        let mut st = self.state.lock();
        st.default_fault = fault;
        if fault.is_none() {
            st.faults.clear();
        }
    }

    pub(super) fn revoke_refresh_tokens(&self) {
        self.state.lock().refresh.values_mut().for_each(|live| *live = false);
    }

    pub(super) fn revoke_access_tokens(&self) {
        self.state.lock().access.values_mut().for_each(|t| t.revoked = true);
    }

    pub(super) fn token_requests(&self) -> Vec<TokenRequest> {
        self.state.lock().token_log.clone()
    }

    pub(super) fn token_request_count(&self) -> usize {
        *self.token_count.borrow()
    }

    pub(super) async fn wait_for_token_requests(&self, n: usize) {
        let mut count = self.token_count.subscribe();
        count.wait_for(|&c| c >= n).await.expect("the idp owns the sender");
    }

    pub(super) fn authorize_requests(&self) -> Vec<AuthorizeRequest> {
        self.state.lock().authorize_log.clone()
    }

    pub(super) fn is_access_token_valid(&self, token: &str) -> bool {
        let now = self.clock.as_ref().map(|c| c.now());
        self.state.lock().access.get(token).is_some_and(|t| valid(t, now))
    }

    pub(super) fn valid_access_tokens(&self) -> Vec<String> {
        let now = self.clock.as_ref().map(|c| c.now());
        let mut tokens: Vec<String> = self
            .state
            .lock()
            .access
            .iter()
            .filter(|(_, t)| valid(t, now))
            .map(|(token, _)| token.clone())
            .collect();
        tokens.sort();
        tokens
    }

    pub(super) fn is_refresh_token_valid(&self, token: &str) -> bool {
        self.state.lock().refresh.get(token).copied().unwrap_or(false)
    }

    /// `GET /authorize`.
    pub(super) fn authorize(&self, params: Params) -> AuthorizeAnswer {
        let mut st = self.state.lock();
        let answer = st.authorize(&params);
        st.authorize_log.push(AuthorizeRequest {
            params,
            redirected_to: match &answer {
                AuthorizeAnswer::Redirect(location) => Some(location.clone()),
                AuthorizeAnswer::Page { .. } => None,
            },
        });
        answer
    }

    /// `POST /token`.
    pub(super) fn token(&self, params: Params) -> TokenAnswer {
        let now = self.clock.as_ref().map(|c| c.now());
        let mut st = self.state.lock();
        let fault = st.faults.pop_front().or(st.default_fault);
        let answer = match fault {
            Some(TokenFault::Unavailable) => error(503, "temporarily_unavailable", "scripted"),
            Some(TokenFault::Status(status)) => error(status, "server_error", "scripted"),
            Some(TokenFault::InvalidGrant) => error(400, "invalid_grant", "scripted revocation"),
            Some(TokenFault::Drop) => TokenAnswer::Drop,
            Some(TokenFault::Hang) => TokenAnswer::Hang,
            Some(TokenFault::Oversized) => match st.grant(&params, now) {
                TokenAnswer::Json { status, mut body } if (200..300).contains(&status) => {
                    body["padding"] = Value::String(" ".repeat(1024 * 1024));
                    TokenAnswer::Json { status, body }
                }
                other => other,
            },
            None => st.grant(&params, now),
        };
        let seq = st.token_log.len() as u64;
        st.token_log.push(TokenRequest {
            seq,
            grant_type: params.get("grant_type").cloned().unwrap_or_default(),
            params,
            fault,
            status: match &answer {
                TokenAnswer::Json { status, .. } => Some(*status),
                TokenAnswer::Drop | TokenAnswer::Hang => None,
            },
        });
        // Published under the lock, so the count never runs ahead of the journal.
        self.token_count.send_replace(st.token_log.len());
        answer
    }
}

fn valid(token: &AccessToken, now: Option<UnixMillis>) -> bool {
    let expired = match (token.issued_at, now) {
        (Some(at), Some(now)) => now >= at.plus(token.lifetime),
        _ => false,
    };
    !token.revoked && !expired
}

/// RFC 8252 §7.3: `http`, an IP loopback literal, an explicit port.
fn is_loopback_redirect(uri: &str) -> bool {
    Url::parse(uri).is_ok_and(|u| {
        u.scheme() == "http"
            && matches!(u.host_str(), Some("127.0.0.1" | "[::1]"))
            && u.port().is_some()
            && u.fragment().is_none()
    })
}

fn is_s256_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

impl State {
    fn authorize(&mut self, params: &Params) -> AuthorizeAnswer {
        let get = |name: &str| params.get(name).map(String::as_str);
        if get("client_id") != Some(self.settings.client_id.as_str()) {
            return AuthorizeAnswer::Page { status: 400, text: "unknown client_id".to_owned() };
        }
        let Some(redirect_uri) = get("redirect_uri").filter(|r| is_loopback_redirect(r)) else {
            return AuthorizeAnswer::Page {
                status: 400,
                text: "redirect_uri must be http://127.0.0.1:PORT/... or http://[::1]:PORT/... \
                       (RFC 8252 §7.3)"
                    .to_owned(),
            };
        };
        let mut redirect = Url::parse(redirect_uri).expect("checked above");
        let refuse = |mut redirect: Url, code: &str, description: &str| {
            {
                let mut q = redirect.query_pairs_mut();
                q.append_pair("error", code).append_pair("error_description", description);
                if let Some(state) = get("state") {
                    q.append_pair("state", state);
                }
            }
            AuthorizeAnswer::Redirect(redirect.into())
        };
        if get("response_type") != Some("code") {
            return refuse(redirect, "unsupported_response_type", "response_type must be code");
        }
        let Some(state) = get("state").filter(|s| !s.is_empty()) else {
            return refuse(redirect, "invalid_request", "state is required");
        };
        if get("code_challenge_method") != Some("S256") {
            return refuse(redirect, "invalid_request", "code_challenge_method must be S256");
        }
        let Some(challenge) = get("code_challenge").filter(|c| is_s256_challenge(c)) else {
            return refuse(redirect, "invalid_request", "code_challenge must be an S256 challenge");
        };
        if self.settings.deny {
            return refuse(redirect, "access_denied", "the user said no");
        }
        self.counter += 1;
        let code = format!("mock-code-{}", self.counter);
        self.codes.insert(
            code.clone(),
            PendingCode {
                redirect_uri: redirect_uri.to_owned(),
                challenge: challenge.to_owned(),
                scope: get("scope").map(str::to_owned),
            },
        );
        redirect.query_pairs_mut().append_pair("code", &code).append_pair("state", state);
        AuthorizeAnswer::Redirect(redirect.into())
    }

    fn grant(&mut self, params: &Params, now: Option<UnixMillis>) -> TokenAnswer {
        let get = |name: &str| params.get(name).map(String::as_str);
        if get("client_id") != Some(self.settings.client_id.as_str()) {
            return error(401, "invalid_client", "unknown client_id");
        }
        match get("grant_type") {
            Some("authorization_code") => {
                let Some(code) = get("code").and_then(|c| self.codes.remove(c)) else {
                    return error(400, "invalid_grant", "unknown or already used code");
                };
                if get("redirect_uri") != Some(code.redirect_uri.as_str()) {
                    return error(
                        400,
                        "invalid_grant",
                        "redirect_uri differs from the authorization request",
                    );
                }
                let verifier = get("code_verifier").unwrap_or_default();
                let proof = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
                if !(43..=128).contains(&verifier.len()) || proof != code.challenge {
                    return error(400, "invalid_grant", "PKCE verification failed");
                }
                self.issue(now, true, code.scope)
            }
            Some("refresh_token") => {
                let token = get("refresh_token").unwrap_or_default();
                if !self.refresh.get(token).copied().unwrap_or(false) {
                    return error(400, "invalid_grant", "refresh token revoked or unknown");
                }
                let rotate = self.settings.rotate;
                if rotate {
                    self.refresh.insert(token.to_owned(), false);
                }
                self.issue(now, rotate, None)
            }
            Some(_) => {
                error(400, "unsupported_grant_type", "only authorization_code and refresh_token")
            }
            None => error(400, "invalid_request", "grant_type is required"),
        }
    }

    fn issue(
        &mut self,
        now: Option<UnixMillis>,
        with_refresh: bool,
        scope: Option<String>,
    ) -> TokenAnswer {
        self.counter += 1;
        let access = format!("mock-access-{}", self.counter);
        let lifetime = self.settings.lifetime;
        self.access
            .insert(access.clone(), AccessToken { issued_at: now, lifetime, revoked: false });
        let mut body = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": lifetime.as_secs(),
        });
        if with_refresh {
            let refresh = format!("mock-refresh-{}", self.counter);
            self.refresh.insert(refresh.clone(), true);
            body["refresh_token"] = Value::String(refresh);
        }
        if let Some(scope) = scope {
            body["scope"] = Value::String(scope);
        }
        TokenAnswer::Json { status: 200, body }
    }
}
