//! OAuth credentials: the manager that signs a credential in (authorization code +
//! PKCE through a loopback redirect, RFC 8252), keeps its tokens in the keychain, hands the
//! proxy a current access token, and refreshes it ahead of expiry or after an upstream 401.
//!
//! How the proxy uses it: before an attempt on an OAuth credential, [`OAuth::access_token`];
//! after a 401 from the upstream, [`OAuth::refresh_after_unauthorized`] with the rejected
//! token, then retry once with the token it returns. The app calls [`OAuth::retry_expired`]
//! now and then (e.g. every 10 s) so a credential benched while its identity provider was down
//! comes back once the refresh breaker lets a refresh through.
//!
//! Invariants:
//! - One refresh per credential at a time (single flight, a per-credential `tokio` mutex that
//!   no `std`/`parking_lot` lock is ever held across); callers that find a refresh in flight
//!   while the current token is still unexpired use that token instead of queueing.
//! - A refresh ahead of expiry that fails costs nothing while the current token is unexpired:
//!   the caller gets the current token, the failure is kept for the status view, and the
//!   credential stays usable. Only an expired token, or one an upstream just refused, turns a
//!   failed refresh into an error and benches the credential in the [`HealthRegistry`].
//! - Each provider's token endpoint sits behind its own refresh breaker (core [`Breaker`]
//!   machine, [`RefreshPolicy::breaker`]); when it is open, a refresh is refused without a
//!   network call and the error says the identity provider is failing and when the next
//!   attempt may go. `invalid_grant` and other refusals do not charge it.
//! - The manager changes a credential's status in the registry only when it has something to
//!   say (refreshing a token that is unusable, expired, invalid) and hands it back (`active`)
//!   only if it was the one that benched it, so a refresh never cancels a 429 cooldown.
//! - Tokens appear in no `Debug`, error or status output: they live in
//!   [`Secret`](switchyard_secrets::Secret)s from the wire to the keychain.
//!
//! [`Breaker`]: switchyard_core::resilience::Breaker

mod breaker;
mod client;
mod login;
mod stored;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use switchyard_core::oauth::RefreshPolicy;
use switchyard_core::resilience::{CredentialStatus, HealthRegistry};
use switchyard_core::{Clock, CredentialId, CredentialKey, ProviderId, UnixMillis};
use switchyard_providers::executor::Executor;
use switchyard_providers::oauth::{
    OAuthError as TokenError, Pkce, Registration, TokenClient, authorization_url, random_state,
};
use switchyard_secrets::{Secret, SecretError, SecretId, SecretStore};

pub use self::breaker::{RefreshBreakerView, RefreshFailure};
pub use self::client::OAuthClient;
pub use self::login::{LoginId, LoginStarted, LoginStatus};
pub(crate) use self::stored::blocking;
use self::stored::{LoadError, Tokens};

/// What the manager runs on.
#[derive(Clone, Debug)]
pub struct OAuthOptions {
    pub refresh: RefreshPolicy,
    /// A login that has not come back from the browser by then fails and its listener closes.
    pub login_timeout: Duration,
    /// Bounds each token-endpoint call, response body included.
    pub token_deadline: Duration,
}

impl Default for OAuthOptions {
    fn default() -> Self {
        Self {
            refresh: RefreshPolicy::default(),
            login_timeout: Duration::from_secs(5 * 60),
            token_deadline: Duration::from_secs(30),
        }
    }
}

/// Why no usable access token (or login) could be had. No variant carries a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// An [`OAuthClient`] field breaks a rule.
    #[error("{field}: {problem}")]
    Config { field: String, problem: String },
    /// The provider or credential name cannot name a keychain entry.
    #[error("{0}")]
    Name(SecretError),
    #[error("provider {provider} has no OAuth client configured")]
    NoClient { provider: ProviderId },
    #[error("{provider}/{credential} is not signed in")]
    NotSignedIn { provider: ProviderId, credential: CredentialId },
    /// The refresh token is gone (revoked, expired, never issued): only a new login helps.
    #[error("{provider}/{credential} must sign in again: {reason}")]
    SignInRequired { provider: ProviderId, credential: CredentialId, reason: String },
    /// The provider's refresh breaker is open: no request was sent.
    #[error(
        "the identity provider of {provider} keeps failing{}; the next refresh attempt is allowed in {} s",
        last_failure.as_ref().map(|f| format!(" (last error: {})", f.message)).unwrap_or_default(),
        retry_in_ms.div_ceil(1000)
    )]
    IdpFailing { provider: ProviderId, retry_in_ms: u64, last_failure: Option<RefreshFailure> },
    /// The token request was sent and failed.
    #[error("refreshing {provider}/{credential} failed: {error}")]
    Refresh { provider: ProviderId, credential: CredentialId, error: TokenError },
    /// The sign-in could not start or its code exchange failed.
    #[error("sign-in failed: {0}")]
    Login(TokenError),
    #[error("{0}")]
    Secrets(SecretError),
    #[error("the keychain entry {0} does not hold Switchyard OAuth tokens; sign in again")]
    Unreadable(SecretId),
    #[error("cannot listen for the sign-in redirect on 127.0.0.1: {0}")]
    Listen(String),
}

impl OAuthError {
    /// A stable name for routing traces and the UI.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Config { .. } | Self::NoClient { .. } => "oauth_not_configured",
            Self::Name(_) | Self::Secrets(_) | Self::Unreadable(_) => "oauth_token_unreadable",
            Self::NotSignedIn { .. } => "oauth_not_signed_in",
            Self::SignInRequired { .. } => "oauth_sign_in_required",
            Self::IdpFailing { .. } => "oauth_identity_provider_failing",
            Self::Refresh { .. } => "oauth_refresh_failed",
            Self::Login(_) | Self::Listen(_) => "oauth_sign_in_failed",
        }
    }

    /// The status the credential gets in the registry when this error leaves it unusable.
    fn benches_as(&self) -> CredentialStatus {
        match self {
            Self::NotSignedIn { .. } | Self::SignInRequired { .. } | Self::IdpFailing { .. } => {
                CredentialStatus::Expired
            }
            Self::Refresh { error, .. } if error.breaker_fault().is_some() => {
                CredentialStatus::Expired
            }
            _ => CredentialStatus::Invalid,
        }
    }
}

/// Where a credential's token stands, for the health API and the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum TokenState {
    /// No tokens stored: sign in.
    SignedOut,
    Valid,
    /// Valid, and the next use refreshes it.
    RefreshDue,
    /// A token request is in flight.
    Refreshing,
    /// Past its expiry and not refreshed yet (the reason says why when a refresh failed).
    Expired,
    /// The refresh token was refused: sign in again.
    NeedsSignIn,
    /// The identity provider refused the client (or none is configured): fix the config.
    Invalid,
}

/// One OAuth credential as the health API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
pub struct OAuthCredentialStatus {
    pub provider: ProviderId,
    pub credential: CredentialId,
    pub state: TokenState,
    /// Why the credential is not simply valid, in a sentence; `None` when it is.
    pub reason: Option<String>,
    pub expires_at: Option<UnixMillis>,
    /// When a refresh ahead of expiry becomes due.
    pub refresh_at: Option<UnixMillis>,
    pub last_refresh_at: Option<UnixMillis>,
    pub last_error: Option<RefreshFailure>,
    pub refresh_breaker: RefreshBreakerView,
}

/// The OAuth manager. Cheap to clone; all clones share one state.
#[derive(Clone, Debug)]
pub struct OAuth {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn SecretStore>,
    registry: Arc<HealthRegistry>,
    clock: Arc<dyn Clock>,
    tokens: TokenClient,
    policy: RwLock<RefreshPolicy>,
    login_timeout: Duration,
    clients: RwLock<HashMap<ProviderId, Registration>>,
    breakers: breaker::RefreshBreakers,
    slots: Mutex<HashMap<CredentialKey, Arc<Slot>>>,
    logins: login::Logins,
}

/// One credential's in-memory state.
#[derive(Debug)]
struct Slot {
    key: CredentialKey,
    id: SecretId,
    /// Held for a load, a refresh, a login's install or a sign-out: the single flight.
    flight: tokio::sync::Mutex<()>,
    state: Mutex<SlotState>,
}

#[derive(Debug, Default)]
struct SlotState {
    /// The keychain has been read (tokens may still be `None`: signed out).
    loaded: bool,
    tokens: Option<Tokens>,
    /// Set when refreshing cannot help until a person acts; cleared by a login, or (for a
    /// config block) by a new client.
    block: Option<Block>,
    refreshing: bool,
    last_error: Option<RefreshFailure>,
    last_refresh_at: Option<UnixMillis>,
    /// The manager set this credential's registry status and owes it an `active`.
    status_owned: bool,
}

#[derive(Clone, Debug)]
enum Block {
    /// The refresh token is gone; the reason is shown to the user.
    SignIn(String),
    /// The identity provider refused the client, or there is none: the error as first met.
    Refused(OAuthError),
}

impl Slot {
    /// The current token when no refresh is needed (or none can help before it expires).
    fn ready(&self, now: UnixMillis, policy: &RefreshPolicy) -> Option<Secret> {
        let st = self.state.lock();
        let tokens = st.tokens.as_ref().filter(|_| st.loaded)?;
        let blocked = st.block.is_some() && !tokens.lifetime.is_expired(now);
        (blocked || !tokens.lifetime.refresh_due(now, policy)).then(|| tokens.access.clone())
    }

    /// The current token if it has not expired.
    fn unexpired(&self, now: UnixMillis) -> Option<Secret> {
        let st = self.state.lock();
        let tokens = st.tokens.as_ref().filter(|_| st.loaded)?;
        (!tokens.lifetime.is_expired(now)).then(|| tokens.access.clone())
    }
}

impl OAuth {
    pub fn new(
        store: Arc<dyn SecretStore>,
        registry: Arc<HealthRegistry>,
        clock: Arc<dyn Clock>,
        executor: Executor,
        options: OAuthOptions,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                registry,
                clock,
                tokens: TokenClient::new(executor, options.token_deadline),
                policy: RwLock::new(options.refresh),
                login_timeout: options.login_timeout,
                clients: RwLock::default(),
                breakers: breaker::RefreshBreakers::default(),
                slots: Mutex::default(),
                logins: login::Logins::default(),
            }),
        }
    }

    /// Sets (or replaces) the OAuth client of `provider`. Credentials blocked on the old
    /// client's configuration may refresh again.
    pub fn set_client(
        &self,
        provider: &ProviderId,
        client: &OAuthClient,
    ) -> Result<(), OAuthError> {
        let registration = client.validate()?;
        self.inner.set_registration(provider, registration);
        Ok(())
    }

    /// Applies new refresh settings live.
    pub fn set_refresh_policy(&self, policy: RefreshPolicy) {
        *self.inner.policy.write() = policy;
    }

    /// The access token to send now, refreshed first when due. See the module docs for what a
    /// failing refresh does.
    pub async fn access_token(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        now: UnixMillis,
    ) -> Result<Secret, OAuthError> {
        self.inner.access_token(provider, credential, now).await
    }

    /// After the upstream answered 401 to `rejected`: refreshes once (unless a concurrent
    /// caller already replaced `rejected`, whose replacement is returned) and returns the token
    /// to retry with. Retry once; a second 401 is the credential's fault.
    pub async fn refresh_after_unauthorized(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        rejected: &Secret,
        now: UnixMillis,
    ) -> Result<Secret, OAuthError> {
        self.inner.refresh_after_unauthorized(provider, credential, rejected, now).await
    }

    /// Tries once more to refresh every credential this manager benched because its
    /// identity provider was failing, where the provider's refresh breaker now allows it.
    /// Returns how many came back. Cheap when there is nothing to do.
    pub async fn retry_expired(&self, now: UnixMillis) -> usize {
        self.inner.retry_expired(now).await
    }

    /// How `credential` stands, reading the keychain once if needed.
    pub async fn status(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        now: UnixMillis,
    ) -> Result<OAuthCredentialStatus, OAuthError> {
        self.inner.status(provider, credential, now).await
    }

    /// The refresh breaker of `provider`.
    pub fn refresh_breaker(&self, provider: &ProviderId, now: UnixMillis) -> RefreshBreakerView {
        let policy = self.inner.policy.read().breaker.clone();
        self.inner.breakers.view(provider, now, &policy)
    }

    /// Forgets the credential's tokens (keychain included). Returns whether there were any.
    pub async fn sign_out(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
    ) -> Result<bool, OAuthError> {
        self.inner.sign_out(provider, credential).await
    }

    /// Starts a login: binds a loopback listener on 127.0.0.1 and a free port (RFC 8252 §7.3)
    /// and returns the authorization URL for the UI to open in the browser. The login
    /// completes in the background when the browser comes back; follow it with
    /// [`Self::login_status`] or [`Self::wait_for_login`]. `client` becomes the provider's
    /// client, as with [`Self::set_client`].
    pub async fn start_login(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        client: &OAuthClient,
    ) -> Result<LoginStarted, OAuthError> {
        let registration = client.validate()?;
        let slot = self.inner.slot(provider, credential)?;
        self.inner.set_registration(provider, registration.clone());
        let pkce = Pkce::generate().map_err(OAuthError::Login)?;
        let state = random_state().map_err(OAuthError::Login)?;
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| OAuthError::Listen(e.to_string()))?;
        let port = listener.local_addr().map_err(|e| OAuthError::Listen(e.to_string()))?.port();
        let redirect_uri = format!("http://127.0.0.1:{port}/callback");
        let url = authorization_url(&registration, &redirect_uri, &state, pkce.challenge());
        let id = login::spawn(
            &self.inner,
            slot,
            login::Flow::new(registration, pkce, state, redirect_uri.clone()),
            listener,
        );
        Ok(LoginStarted { id, authorization_url: url, redirect_uri })
    }

    /// Where a login stands; `None` for an id this manager never issued (or long forgot).
    pub fn login_status(&self, id: LoginId) -> Option<LoginStatus> {
        self.inner.logins.status(id)
    }

    /// Resolves when the login is no longer pending.
    pub async fn wait_for_login(&self, id: LoginId) -> Option<LoginStatus> {
        self.inner.logins.wait(id).await
    }

    /// Abandons a pending login: its listener closes and it fails as cancelled.
    pub fn cancel_login(&self, id: LoginId) -> bool {
        self.inner.logins.cancel(id)
    }
}

fn sign_in_required(key: &CredentialKey, reason: String) -> OAuthError {
    OAuthError::SignInRequired {
        provider: key.provider.clone(),
        credential: key.credential.clone(),
        reason,
    }
}

fn refresh_error(key: &CredentialKey, error: TokenError) -> OAuthError {
    OAuthError::Refresh {
        provider: key.provider.clone(),
        credential: key.credential.clone(),
        error,
    }
}

/// Marks a slot as refreshing, and puts things back if the refresh is abandoned (the caller's
/// future dropped mid-request).
struct Refreshing<'a> {
    inner: &'a Inner,
    slot: &'a Slot,
    armed: bool,
}

impl<'a> Refreshing<'a> {
    /// `visible`: tell the registry too (the token is unusable while this runs).
    fn start(inner: &'a Inner, slot: &'a Slot, visible: bool) -> Self {
        slot.state.lock().refreshing = true;
        if visible {
            inner.set_status(slot, CredentialStatus::Refreshing);
        }
        Self { inner, slot, armed: true }
    }

    fn finish(mut self) {
        self.armed = false;
        self.slot.state.lock().refreshing = false;
    }
}

impl Drop for Refreshing<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.slot.state.lock().refreshing = false;
            // Let the next caller try again rather than leave the credential "refreshing".
            self.inner.release_status(self.slot);
        }
    }
}

impl Inner {
    fn policy(&self) -> RefreshPolicy {
        self.policy.read().clone()
    }

    fn slot(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
    ) -> Result<Arc<Slot>, OAuthError> {
        let key = CredentialKey { provider: provider.clone(), credential: credential.clone() };
        if let Some(slot) = self.slots.lock().get(&key) {
            return Ok(Arc::clone(slot));
        }
        let id = SecretId::new(provider.as_str(), credential.as_str()).map_err(OAuthError::Name)?;
        let mut slots = self.slots.lock();
        let slot = slots.entry(key.clone()).or_insert_with(|| {
            Arc::new(Slot { key, id, flight: tokio::sync::Mutex::new(()), state: Mutex::default() })
        });
        Ok(Arc::clone(slot))
    }

    fn set_registration(&self, provider: &ProviderId, registration: Registration) {
        self.clients.write().insert(provider.clone(), registration);
        for slot in self.slots.lock().values().filter(|s| &s.key.provider == provider) {
            let mut st = slot.state.lock();
            if matches!(st.block, Some(Block::Refused(_))) {
                st.block = None;
            }
        }
    }

    /// Tells the registry `status` and remembers that this manager owes it an `active`.
    fn set_status(&self, slot: &Slot, status: CredentialStatus) {
        slot.state.lock().status_owned = true;
        self.registry.set_credential_status(&slot.key, status, self.clock.now());
    }

    /// Hands the credential back (`active`) if this manager benched it.
    fn release_status(&self, slot: &Slot) {
        let owned = std::mem::take(&mut slot.state.lock().status_owned);
        if owned {
            self.registry.set_credential_status(
                &slot.key,
                CredentialStatus::Active,
                self.clock.now(),
            );
        }
    }

    /// Reads the keychain once per slot. Call with the flight lock held.
    async fn ensure_loaded(&self, slot: &Slot) -> Result<(), OAuthError> {
        if slot.state.lock().loaded {
            return Ok(());
        }
        let tokens = stored::load(&self.store, &slot.id).await.map_err(|e| match e {
            LoadError::Store(e) => OAuthError::Secrets(e),
            LoadError::Unreadable => OAuthError::Unreadable(slot.id.clone()),
        })?;
        let mut st = slot.state.lock();
        st.tokens = tokens;
        st.loaded = true;
        Ok(())
    }

    fn not_signed_in(slot: &Slot) -> OAuthError {
        OAuthError::NotSignedIn {
            provider: slot.key.provider.clone(),
            credential: slot.key.credential.clone(),
        }
    }

    /// Benches the credential for `error` and returns it.
    fn bench(&self, slot: &Slot, error: OAuthError) -> OAuthError {
        self.set_status(slot, error.benches_as());
        error
    }

    async fn access_token(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        now: UnixMillis,
    ) -> Result<Secret, OAuthError> {
        let slot = self.slot(provider, credential)?;
        let policy = self.policy();
        if let Some(token) = slot.ready(now, &policy) {
            return Ok(token);
        }
        let _flight = if let Ok(flight) = slot.flight.try_lock() {
            flight
        } else {
            // Someone is refreshing: an unexpired token beats waiting for the token endpoint.
            if let Some(token) = slot.unexpired(now) {
                return Ok(token);
            }
            slot.flight.lock().await
        };
        self.ensure_loaded(&slot).await?;
        let (tokens, block) = {
            let st = slot.state.lock();
            (st.tokens.clone(), st.block.clone())
        };
        let Some(tokens) = tokens else {
            return Err(self.bench(&slot, Self::not_signed_in(&slot)));
        };
        let expired = tokens.lifetime.is_expired(now);
        match block {
            Some(_) if !expired => return Ok(tokens.access),
            Some(Block::SignIn(reason)) => {
                return Err(self.bench(&slot, sign_in_required(&slot.key, reason)));
            }
            Some(Block::Refused(error)) => return Err(self.bench(&slot, error)),
            None if !tokens.lifetime.refresh_due(now, &policy) => return Ok(tokens.access),
            None => {}
        }
        match self.refresh_locked(&slot, &tokens, now, false).await {
            Ok(fresh) => Ok(fresh.access),
            Err(_) if !tokens.lifetime.is_expired(self.clock.now().max(now)) => Ok(tokens.access),
            Err(error) => Err(self.bench(&slot, error)),
        }
    }

    async fn refresh_after_unauthorized(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        rejected: &Secret,
        now: UnixMillis,
    ) -> Result<Secret, OAuthError> {
        let slot = self.slot(provider, credential)?;
        let _flight = slot.flight.lock().await;
        self.ensure_loaded(&slot).await?;
        let (tokens, block) = {
            let st = slot.state.lock();
            (st.tokens.clone(), st.block.clone())
        };
        let Some(tokens) = tokens else {
            return Err(self.bench(&slot, Self::not_signed_in(&slot)));
        };
        if &tokens.access != rejected && !tokens.lifetime.is_expired(now) {
            // A concurrent caller already replaced the refused token.
            return Ok(tokens.access);
        }
        match block {
            Some(Block::SignIn(reason)) => {
                return Err(self.bench(&slot, sign_in_required(&slot.key, reason)));
            }
            Some(Block::Refused(error)) => return Err(self.bench(&slot, error)),
            None => {}
        }
        match self.refresh_locked(&slot, &tokens, now, true).await {
            Ok(fresh) => Ok(fresh.access),
            Err(error) => Err(self.bench(&slot, error)),
        }
    }

    /// One refresh of `current`. Call with the flight lock held. Records the outcome in the
    /// slot and the breaker; the caller decides what a failure means for the registry.
    /// `unusable`: the current token must not be sent any more (refused by an upstream).
    async fn refresh_locked(
        &self,
        slot: &Slot,
        current: &Tokens,
        now: UnixMillis,
        unusable: bool,
    ) -> Result<Tokens, OAuthError> {
        let key = &slot.key;
        let record = |failure: RefreshFailure, block: Option<Block>| {
            let mut st = slot.state.lock();
            st.last_error = Some(failure);
            if block.is_some() {
                st.block = block;
            }
        };
        let Some(registration) = self.clients.read().get(&key.provider).cloned() else {
            let error = OAuthError::NoClient { provider: key.provider.clone() };
            let failure = RefreshFailure {
                code: "no_client".to_owned(),
                message: error.to_string(),
                at: now,
            };
            record(failure, Some(Block::Refused(error.clone())));
            return Err(error);
        };
        let Some(refresh_token) = current.refresh.clone() else {
            let reason = "the identity provider issued no refresh token".to_owned();
            let failure = RefreshFailure {
                code: "no_refresh_token".to_owned(),
                message: reason.clone(),
                at: now,
            };
            record(failure, Some(Block::SignIn(reason.clone())));
            return Err(sign_in_required(key, reason));
        };
        let policy = self.policy();
        let permit =
            self.breakers.admit(&key.provider, now, &policy.breaker).map_err(|refused| {
                OAuthError::IdpFailing {
                    provider: key.provider.clone(),
                    retry_in_ms: refused.retry_in_ms,
                    last_failure: refused.last_failure,
                }
            })?;
        let refreshing =
            Refreshing::start(self, slot, unusable || current.lifetime.is_expired(now));
        let result = self.tokens.refresh(&registration, &refresh_token).await;
        let after = self.clock.now().max(now);
        match result {
            Ok(response) => {
                permit.success(after);
                let fresh = Tokens::from_response(response, after, Some(&refresh_token));
                let saved = stored::save(&self.store, &slot.id, &fresh).await;
                {
                    let mut st = slot.state.lock();
                    st.tokens = Some(fresh.clone());
                    st.last_refresh_at = Some(after);
                    st.block = None;
                    st.last_error = saved.err().map(|e| RefreshFailure {
                        code: "keychain_write_failed".to_owned(),
                        message: format!(
                            "the refreshed tokens are kept in memory only (a restart will need a new sign-in): {e}"
                        ),
                        at: after,
                    });
                }
                refreshing.finish();
                self.release_status(slot);
                Ok(fresh)
            }
            Err(error) => {
                let failure = RefreshFailure {
                    code: error.code().to_owned(),
                    message: error.to_string(),
                    at: after,
                };
                match error.breaker_fault() {
                    Some(fault) => permit.failure(after, &policy.breaker, fault, failure.clone()),
                    None => permit.success(after),
                }
                refreshing.finish();
                let (error, block) = match error {
                    TokenError::InvalidGrant { .. } => {
                        let reason = error.to_string();
                        (sign_in_required(key, reason.clone()), Some(Block::SignIn(reason)))
                    }
                    TokenError::Rejected { .. } => {
                        let error = refresh_error(key, error);
                        (error.clone(), Some(Block::Refused(error)))
                    }
                    error => (refresh_error(key, error), None),
                };
                record(failure, block);
                Err(error)
            }
        }
    }

    async fn retry_expired(&self, now: UnixMillis) -> usize {
        self.adopt_restored(now);
        let policy = self.policy();
        let waiting: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .values()
            .filter(|slot| {
                let st = slot.state.lock();
                // Not loaded yet: adopted from the state file, its tokens still to be read.
                let tokens_due =
                    !st.loaded || st.tokens.as_ref().is_some_and(|t| t.lifetime.is_expired(now));
                st.status_owned && st.block.is_none() && tokens_due
            })
            .cloned()
            .collect();
        let mut revived = 0;
        for slot in waiting {
            if !self.breakers.would_admit(&slot.key.provider, now, &policy.breaker) {
                continue;
            }
            if self.access_token(&slot.key.provider, &slot.key.credential, now).await.is_ok() {
                // A token that needed no refresh comes back without one; the status this
                // manager owns goes back to `active` either way.
                self.release_status(&slot);
                revived += 1;
            }
        }
        revived
    }

    /// Takes ownership of credentials the registry holds as `expired` although no slot of
    /// this manager benched them: they were restored from the state file after a restart (a
    /// refresh cut short by a `kill -9` restores as `expired`). Nobody else would ever bring
    /// them back, and the planner skips them, so no request would trigger a refresh either.
    fn adopt_restored(&self, now: UnixMillis) {
        for key in self.registry.credentials_with_status(CredentialStatus::Expired, now) {
            let owned =
                self.slots.lock().get(&key).is_some_and(|slot| slot.state.lock().status_owned);
            if owned {
                continue;
            }
            match self.slot(&key.provider, &key.credential) {
                Ok(slot) => slot.state.lock().status_owned = true,
                Err(error) => {
                    tracing::warn!(
                        provider = %key.provider,
                        credential = %key.credential,
                        %error,
                        "cannot adopt a restored expired credential"
                    );
                }
            }
        }
    }

    async fn status(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
        now: UnixMillis,
    ) -> Result<OAuthCredentialStatus, OAuthError> {
        let slot = self.slot(provider, credential)?;
        if !slot.state.lock().loaded {
            let _flight = slot.flight.lock().await;
            self.ensure_loaded(&slot).await?;
        }
        let policy = self.policy();
        let breaker = self.breakers.view(provider, now, &policy.breaker);
        let st = slot.state.lock();
        let lifetime = st.tokens.as_ref().map(|t| t.lifetime);
        let failing = st.last_error.as_ref().map(|e| e.message.clone());
        let (state, reason) = match (&lifetime, &st.block) {
            (None, _) => (TokenState::SignedOut, Some("not signed in".to_owned())),
            (Some(_), Some(Block::SignIn(reason))) => {
                (TokenState::NeedsSignIn, Some(reason.clone()))
            }
            (Some(_), Some(Block::Refused(error))) => {
                (TokenState::Invalid, Some(error.to_string()))
            }
            (Some(_), None) if st.refreshing => (TokenState::Refreshing, None),
            (Some(l), None) if l.is_expired(now) => {
                let mut reason = failing.map_or_else(
                    || "the access token has expired; the next use refreshes it".to_owned(),
                    |e| format!("the access token has expired and could not be refreshed: {e}"),
                );
                if breaker.retry_in_ms > 0 {
                    let _ = write!(
                        reason,
                        "; the identity provider's refresh breaker is open, next attempt in {} s",
                        breaker.retry_in_ms.div_ceil(1000)
                    );
                }
                (TokenState::Expired, Some(reason))
            }
            (Some(l), None) if l.refresh_due(now, &policy) => (TokenState::RefreshDue, None),
            (Some(_), None) => (TokenState::Valid, None),
        };
        Ok(OAuthCredentialStatus {
            provider: provider.clone(),
            credential: credential.clone(),
            state,
            reason,
            expires_at: lifetime.and_then(|l| l.expires_at),
            refresh_at: lifetime.and_then(|l| l.refresh_at(&policy)),
            last_refresh_at: st.last_refresh_at,
            last_error: st.last_error.clone(),
            refresh_breaker: breaker,
        })
    }

    async fn sign_out(
        &self,
        provider: &ProviderId,
        credential: &CredentialId,
    ) -> Result<bool, OAuthError> {
        let slot = self.slot(provider, credential)?;
        let _flight = slot.flight.lock().await;
        let existed = stored::delete(&self.store, &slot.id).await.map_err(OAuthError::Secrets)?;
        {
            let mut st = slot.state.lock();
            *st = SlotState { loaded: true, status_owned: st.status_owned, ..SlotState::default() };
        }
        let _ = self.bench(&slot, Self::not_signed_in(&slot));
        Ok(existed)
    }

    /// Stores the tokens of a completed login and makes the credential usable.
    async fn install(&self, slot: &Slot, tokens: Tokens) -> Result<(), OAuthError> {
        let _flight = slot.flight.lock().await;
        stored::save(&self.store, &slot.id, &tokens).await.map_err(OAuthError::Secrets)?;
        {
            let mut st = slot.state.lock();
            st.loaded = true;
            st.tokens = Some(tokens);
            st.block = None;
            st.last_error = None;
        }
        self.release_status(slot);
        Ok(())
    }
}
