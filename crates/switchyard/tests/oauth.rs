//! The OAuth manager against the testkit's mock identity provider: real HTTP on loopback
//! ports, an in-memory keychain and a manual clock. Nothing here sleeps: tests await the
//! mock's recorded token requests and the manager's login status.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use switchyard::oauth::{LoginStatus, OAuth, OAuthClient, OAuthError, OAuthOptions, TokenState};
use switchyard_core::resilience::{
    BreakerState, CredentialRecord, CredentialStatus, HealthRecords, HealthRegistry, SkipReason,
};
use switchyard_core::{Clock, CredentialId, CredentialKey, ManualClock, ProviderId, UnixMillis};
use switchyard_providers::executor::{Executor, SendFailure};
use switchyard_providers::oauth::OAuthError as TokenError;
use switchyard_secrets::{MemoryStore, Secret, SecretId, SecretStore};
use switchyard_testkit::{MockOAuth, TokenFault};

/// When every test starts.
const T0: UnixMillis = UnixMillis(1_700_000_000_000);
/// The mock's token lifetime.
const LIFETIME: Duration = Duration::from_secs(3600);
/// With the default 60 s skew, the refresh window opens here...
const WINDOW_OPENS: UnixMillis = UnixMillis(T0.0 + 3_600_000 - 60_000);
/// ...and the first token expires here.
const EXPIRY: UnixMillis = UnixMillis(T0.0 + 3_600_000);

/// Fails a test that would otherwise hang.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

struct Rig {
    idp: MockOAuth,
    oauth: OAuth,
    clock: ManualClock,
    registry: Arc<HealthRegistry>,
    store: Arc<MemoryStore>,
    provider: ProviderId,
    credential: CredentialId,
}

impl Rig {
    async fn new() -> Self {
        Self::with(MockOAuth::builder()).await
    }

    async fn with(idp: switchyard_testkit::MockOAuthBuilder) -> Self {
        let clock = ManualClock::new(T0);
        let idp =
            idp.token_lifetime(LIFETIME).clock(Arc::new(clock.clone())).start().await.unwrap();
        let store = Arc::new(MemoryStore::new());
        let registry = Arc::new(HealthRegistry::default());
        let oauth = manager(&store, &registry, &clock);
        Self {
            idp,
            oauth,
            clock,
            registry,
            store,
            provider: ProviderId::from("acme"),
            credential: CredentialId::from("work"),
        }
    }

    fn client(&self) -> OAuthClient {
        OAuthClient {
            authorize_url: self.idp.authorize_url(),
            token_url: self.idp.token_url(),
            client_id: self.idp.client_id(),
            scopes: vec!["openid".to_owned(), "models".to_owned()],
        }
    }

    fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    async fn access_token(&self) -> Result<Secret, OAuthError> {
        self.oauth.access_token(&self.provider, &self.credential, self.now()).await
    }

    /// The whole login: authorize URL, the mock's redirect, the loopback callback.
    async fn sign_in(&self) -> Secret {
        let started =
            self.oauth.start_login(&self.provider, &self.credential, &self.client()).await.unwrap();
        let location = authorize(&started.authorization_url).await;
        assert!(location.starts_with(&started.redirect_uri), "{location}");
        let page = browser().get(&location).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains("You can close this tab"));
        let status = within("the login", self.oauth.wait_for_login(started.id)).await;
        assert_eq!(status, Some(LoginStatus::Succeeded));
        self.access_token().await.unwrap()
    }

    fn registry_status(&self) -> CredentialStatus {
        let key =
            CredentialKey { provider: self.provider.clone(), credential: self.credential.clone() };
        self.registry
            .snapshot(self.now())
            .credentials
            .into_iter()
            .find(|c| c.key == key)
            .map_or(CredentialStatus::Active, |c| c.status)
    }
}

fn manager(store: &Arc<MemoryStore>, registry: &Arc<HealthRegistry>, clock: &ManualClock) -> OAuth {
    let store: Arc<dyn SecretStore> = Arc::clone(store) as Arc<dyn SecretStore>;
    OAuth::new(
        store,
        Arc::clone(registry),
        Arc::new(clock.clone()),
        Executor::new(Duration::from_secs(5)).unwrap(),
        OAuthOptions::default(),
    )
}

/// A browser that shows us redirects instead of following them.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Opens the authorization URL; returns where the identity provider redirects to.
async fn authorize(url: &str) -> String {
    let response = browser().get(url).send().await.unwrap();
    assert_eq!(response.status(), 302, "{:?}", response.text().await);
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// `location` with its `state` replaced.
fn with_state(location: &str, state: &str) -> String {
    let (base, query) = location.split_once('?').unwrap();
    let query: Vec<String> =
        query
            .split('&')
            .map(|pair| {
                if pair.starts_with("state=") { format!("state={state}") } else { pair.to_owned() }
            })
            .collect();
    format!("{base}?{}", query.join("&"))
}

#[tokio::test]
async fn login_end_to_end_stores_the_tokens_in_the_keychain_and_serves_the_access_token() {
    let rig = Rig::new().await;
    let token = rig.sign_in().await;
    assert_eq!(rig.idp.valid_access_tokens(), [token.expose().to_owned()]);

    let exchange = &rig.idp.token_requests()[0];
    assert_eq!(exchange.grant_type, "authorization_code");
    assert_eq!(exchange.status, Some(200));
    let authorize = &rig.idp.authorize_requests()[0];
    assert_eq!(authorize.params["scope"], "openid models");
    assert_eq!(authorize.params["code_challenge_method"], "S256");

    let stored = rig.store.get(&SecretId::new("acme", "work").unwrap()).unwrap().unwrap();
    assert!(stored.expose().contains(token.expose()), "one JSON secret holds the tokens");

    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.state, TokenState::Valid);
    assert_eq!(status.expires_at, Some(EXPIRY));
    assert_eq!(status.refresh_at, Some(WINDOW_OPENS));
    assert_eq!(rig.registry_status(), CredentialStatus::Active);
    assert_eq!(rig.idp.token_request_count(), 1, "a fresh token is served without a refresh");
}

#[tokio::test]
async fn a_callback_with_the_wrong_state_is_refused_and_the_login_keeps_waiting() {
    let rig = Rig::new().await;
    let started =
        rig.oauth.start_login(&rig.provider, &rig.credential, &rig.client()).await.unwrap();
    let location = authorize(&started.authorization_url).await;

    let forged = browser().get(with_state(&location, "forged")).send().await.unwrap();
    assert_eq!(forged.status(), 400);
    assert!(forged.text().await.unwrap().contains("state does not match"));
    let missing = browser().get(location.split_once('?').unwrap().0).send().await.unwrap();
    assert_eq!(missing.status(), 400);
    assert_eq!(rig.oauth.login_status(started.id), Some(LoginStatus::Pending));
    assert_eq!(rig.idp.token_request_count(), 0, "no code was exchanged");

    assert_eq!(browser().get(&location).send().await.unwrap().status(), 200);
    let status = within("the login", rig.oauth.wait_for_login(started.id)).await;
    assert_eq!(status, Some(LoginStatus::Succeeded));
}

#[tokio::test]
async fn a_login_the_user_refuses_fails_with_the_identity_providers_reason() {
    let rig = Rig::new().await;
    rig.idp.set_deny_authorization(true);
    let started =
        rig.oauth.start_login(&rig.provider, &rig.credential, &rig.client()).await.unwrap();
    let location = authorize(&started.authorization_url).await;
    assert_eq!(browser().get(&location).send().await.unwrap().status(), 200);
    let Some(LoginStatus::Failed { reason }) =
        within("the login", rig.oauth.wait_for_login(started.id)).await
    else {
        panic!("the login should have failed");
    };
    assert!(reason.contains("access_denied"), "{reason}");
    assert_eq!(rig.idp.token_request_count(), 0);
    assert!(matches!(rig.access_token().await, Err(OAuthError::NotSignedIn { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_login_the_browser_never_completes_times_out_and_closes_its_listener() {
    let rig = Rig::new().await;
    let started =
        rig.oauth.start_login(&rig.provider, &rig.credential, &rig.client()).await.unwrap();
    let callback =
        started.redirect_uri.trim_start_matches("http://").trim_end_matches("/callback").to_owned();
    assert!(tokio::net::TcpStream::connect(&callback).await.is_ok(), "listening while pending");

    // Paused time jumps to the login's deadline as soon as everything is idle.
    let Some(LoginStatus::Failed { reason }) = rig.oauth.wait_for_login(started.id).await else {
        panic!("the login should have timed out");
    };
    assert!(reason.contains("did not come back within 300 s"), "{reason}");
    assert!(tokio::net::TcpStream::connect(&callback).await.is_err(), "nothing listens afterwards");
}

#[tokio::test]
async fn a_cancelled_login_fails_and_cannot_be_cancelled_twice() {
    let rig = Rig::new().await;
    let started =
        rig.oauth.start_login(&rig.provider, &rig.credential, &rig.client()).await.unwrap();
    assert!(rig.oauth.cancel_login(started.id));
    let status = within("the login", rig.oauth.wait_for_login(started.id)).await;
    assert_eq!(
        status,
        Some(LoginStatus::Failed { reason: "the sign-in was cancelled".to_owned() })
    );
    assert!(!rig.oauth.cancel_login(started.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_ahead_of_expiry_happens_exactly_once_for_ten_concurrent_callers() {
    let rig = Rig::new().await;
    let first = rig.sign_in().await;
    rig.clock.set(WINDOW_OPENS.minus(Duration::from_millis(1)));
    assert_eq!(rig.access_token().await.unwrap(), first, "not due yet");
    assert_eq!(rig.idp.token_request_count(), 1);

    rig.clock.set(WINDOW_OPENS);
    let tokens = join_all((0..10).map(|_| rig.access_token())).await;
    let refresh = within("the refresh", rig.idp.wait_for_token_requests(2)).await;
    assert_eq!(refresh.len(), 2, "exactly one refresh");
    assert_eq!(refresh[1].grant_type, "refresh_token");
    // Callers that found the refresh in flight used the still-valid token instead of waiting.
    for token in tokens {
        assert!(rig.idp.is_access_token_valid(token.unwrap().expose()));
    }
    let second = rig.access_token().await.unwrap();
    assert_ne!(second, first);
    assert_eq!(rig.idp.token_request_count(), 2);
    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.last_refresh_at, Some(WINDOW_OPENS));
    assert_eq!(status.expires_at, Some(WINDOW_OPENS.plus(LIFETIME)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_once_and_every_concurrent_caller_gets_the_new_one() {
    let rig = Rig::new().await;
    let first = rig.sign_in().await;
    rig.clock.set(EXPIRY);
    let tokens: Vec<Secret> = join_all((0..10).map(|_| rig.access_token()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rig.idp.token_request_count(), 2, "exactly one refresh");
    assert!(tokens.iter().all(|t| *t == tokens[0] && *t != first));
    assert!(rig.idp.is_access_token_valid(tokens[0].expose()));
    assert_eq!(rig.registry_status(), CredentialStatus::Active);
}

#[tokio::test]
async fn a_refresh_without_a_new_refresh_token_keeps_using_the_old_one() {
    let rig = Rig::with(MockOAuth::builder().rotate_refresh_tokens(false)).await;
    rig.sign_in().await;
    for round in 1..=2 {
        rig.clock.advance(LIFETIME);
        rig.access_token().await.unwrap();
        let requests = rig.idp.token_requests();
        assert_eq!(requests.len(), 1 + round);
        assert_eq!(requests[round].param("refresh_token"), requests[1].param("refresh_token"));
    }
}

#[tokio::test]
async fn a_forced_refresh_after_a_401_gives_a_new_token_and_concurrent_401s_share_it() {
    let rig = Rig::new().await;
    let refused = rig.sign_in().await;
    rig.idp.revoke_access_tokens();
    assert!(!rig.idp.is_access_token_valid(refused.expose()), "the upstream would answer 401");

    let fresh = rig
        .oauth
        .refresh_after_unauthorized(&rig.provider, &rig.credential, &refused, rig.now())
        .await
        .unwrap();
    assert_ne!(fresh, refused);
    assert!(rig.idp.is_access_token_valid(fresh.expose()));
    assert_eq!(rig.idp.token_request_count(), 2);

    // A second request that was refused with the old token gets the new one, no new refresh.
    let again = rig
        .oauth
        .refresh_after_unauthorized(&rig.provider, &rig.credential, &refused, rig.now())
        .await
        .unwrap();
    assert_eq!(again, fresh);
    assert_eq!(rig.idp.token_request_count(), 2);
    assert_eq!(rig.access_token().await.unwrap(), fresh);
    assert_eq!(rig.registry_status(), CredentialStatus::Active);
}

#[tokio::test]
async fn identity_provider_down_opens_the_refresh_breaker_and_the_status_says_why() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    rig.idp.set_token_fault(Some(TokenFault::Unavailable));
    rig.clock.set(EXPIRY);

    for attempt in 1..=3 {
        let err = rig.access_token().await.unwrap_err();
        let OAuthError::Refresh { error: TokenError::IdpFailing { status: 503 }, .. } = err else {
            panic!("attempt {attempt}: {err:?}");
        };
        assert_eq!(rig.idp.token_request_count(), 1 + attempt);
    }
    assert_eq!(rig.registry_status(), CredentialStatus::Expired);

    // Open: refused without a network call, and the error says when the next try may go.
    let err = rig.access_token().await.unwrap_err();
    let OAuthError::IdpFailing { retry_in_ms, last_failure, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*retry_in_ms, 30_000);
    assert_eq!(last_failure.as_ref().unwrap().code, "idp_failing");
    assert!(err.to_string().contains("HTTP 503"), "{err}");
    assert!(err.to_string().contains("next refresh attempt is allowed in 30 s"), "{err}");
    assert_eq!(rig.idp.token_request_count(), 4);

    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.state, TokenState::Expired);
    assert_eq!(status.refresh_breaker.state, BreakerState::Open);
    assert_eq!(status.refresh_breaker.retry_in_ms, 30_000);
    let reason = status.reason.unwrap();
    assert!(reason.contains("HTTP 503") && reason.contains("breaker is open"), "{reason}");

    // The identity provider recovers; the app's periodic sweep brings the credential back as
    // soon as the breaker lets one refresh through, and not before.
    rig.idp.set_token_fault(None);
    assert_eq!(rig.oauth.retry_expired(rig.now()).await, 0);
    assert_eq!(rig.idp.token_request_count(), 4);
    rig.clock.advance(Duration::from_secs(30));
    assert_eq!(rig.oauth.retry_expired(rig.now()).await, 1);
    assert_eq!(rig.registry_status(), CredentialStatus::Active);
    assert_eq!(rig.oauth.refresh_breaker(&rig.provider, rig.now()).state, BreakerState::Closed);
    assert!(rig.idp.is_access_token_valid(rig.access_token().await.unwrap().expose()));
}

#[tokio::test]
async fn a_refresh_ahead_of_expiry_leaves_a_rate_limited_credential_benched() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    let key = CredentialKey { provider: rig.provider.clone(), credential: rig.credential.clone() };
    rig.registry.set_credential_status(&key, CredentialStatus::QuotaExhausted, rig.now());
    rig.clock.set(WINDOW_OPENS);
    rig.access_token().await.unwrap();
    assert_eq!(rig.idp.token_request_count(), 2, "refreshed");
    assert_eq!(
        rig.registry_status(),
        CredentialStatus::QuotaExhausted,
        "not the manager's to clear"
    );
}

#[tokio::test]
async fn an_abandoned_refresh_hands_the_credential_back_instead_of_leaving_it_refreshing() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    rig.idp.enqueue_token_fault(TokenFault::Hang);
    rig.clock.set(EXPIRY);
    let (oauth, provider, credential, now) =
        (rig.oauth.clone(), rig.provider.clone(), rig.credential.clone(), rig.now());
    let caller = tokio::spawn(async move { oauth.access_token(&provider, &credential, now).await });
    within("the hanging refresh", rig.idp.wait_for_token_requests(2)).await;
    assert_eq!(rig.registry_status(), CredentialStatus::Refreshing);

    // The client went away: the request future is dropped mid-refresh.
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled());
    assert_eq!(rig.registry_status(), CredentialStatus::Active);
    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.state, TokenState::Expired);
    assert!(rig.idp.is_access_token_valid(rig.access_token().await.unwrap().expose()));
}

#[tokio::test]
async fn an_unreachable_identity_provider_trips_the_breaker_without_being_reached() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    rig.idp.set_unreachable(true).await;
    rig.clock.set(EXPIRY);
    for _ in 0..3 {
        let err = rig.access_token().await.unwrap_err();
        assert!(
            matches!(err, OAuthError::Refresh { error: TokenError::Unreachable(_), .. }),
            "{err:?}"
        );
    }
    assert!(matches!(rig.access_token().await, Err(OAuthError::IdpFailing { .. })));
    assert_eq!(rig.idp.token_request_count(), 1, "only the login's exchange ever arrived");
}

#[tokio::test]
async fn a_failed_refresh_ahead_of_expiry_keeps_serving_the_still_valid_token() {
    let rig = Rig::new().await;
    let token = rig.sign_in().await;
    rig.idp.set_token_fault(Some(TokenFault::Unavailable));
    rig.clock.set(WINDOW_OPENS);
    assert_eq!(rig.access_token().await.unwrap(), token);
    assert_eq!(rig.idp.token_request_count(), 2, "it did try");
    assert_eq!(rig.registry_status(), CredentialStatus::Active, "the credential stays usable");
    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.state, TokenState::RefreshDue);
    assert_eq!(status.last_error.unwrap().code, "idp_failing");
}

#[tokio::test]
async fn invalid_grant_marks_the_credential_expired_with_the_reason_until_a_new_login() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    rig.idp.revoke_refresh_tokens();
    rig.clock.set(EXPIRY);

    let err = rig.access_token().await.unwrap_err();
    let OAuthError::SignInRequired { reason, .. } = &err else { panic!("{err:?}") };
    assert!(reason.contains("invalid_grant"), "{reason}");
    assert_eq!(rig.registry_status(), CredentialStatus::Expired);
    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.state, TokenState::NeedsSignIn);
    assert!(status.reason.unwrap().contains("sign in again"));
    assert_eq!(status.refresh_breaker.state, BreakerState::Closed, "a refusal is not an outage");
    assert_eq!(status.refresh_breaker.failures, 0);

    // Known dead: asking again does not bother the identity provider.
    assert!(matches!(rig.access_token().await, Err(OAuthError::SignInRequired { .. })));
    assert_eq!(rig.idp.token_request_count(), 2);

    let token = rig.sign_in().await;
    assert!(rig.idp.is_access_token_valid(token.expose()));
    assert_eq!(rig.registry_status(), CredentialStatus::Active);
}

#[tokio::test]
async fn a_credential_never_signed_in_is_benched_as_expired() {
    let rig = Rig::new().await;
    rig.oauth.set_client(&rig.provider, &rig.client()).unwrap();
    let err = rig.access_token().await.unwrap_err();
    assert!(matches!(err, OAuthError::NotSignedIn { .. }), "{err:?}");
    assert_eq!(rig.registry_status(), CredentialStatus::Expired);
    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(status.state, TokenState::SignedOut);
}

#[tokio::test]
async fn tokens_outlive_the_manager_through_the_keychain() {
    let rig = Rig::new().await;
    let token = rig.sign_in().await;
    let restarted = manager(&rig.store, &rig.registry, &rig.clock);
    restarted.set_client(&rig.provider, &rig.client()).unwrap();
    let again = restarted.access_token(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert_eq!(again, token);
    rig.clock.set(EXPIRY);
    let refreshed =
        restarted.access_token(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert!(rig.idp.is_access_token_valid(refreshed.expose()));
}

#[tokio::test]
async fn signing_out_deletes_the_tokens() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    assert!(rig.oauth.sign_out(&rig.provider, &rig.credential).await.unwrap());
    assert!(rig.store.is_empty());
    assert!(matches!(rig.access_token().await, Err(OAuthError::NotSignedIn { .. })));
    assert_eq!(rig.registry_status(), CredentialStatus::Expired);
}

#[tokio::test]
async fn no_token_code_or_verifier_appears_in_debug_display_or_json_of_any_public_type() {
    let rig = Rig::new().await;
    let started =
        rig.oauth.start_login(&rig.provider, &rig.credential, &rig.client()).await.unwrap();
    let location = authorize(&started.authorization_url).await;
    browser().get(&location).send().await.unwrap();
    let login = within("the login", rig.oauth.wait_for_login(started.id)).await;
    let first = rig.access_token().await.unwrap();
    rig.clock.set(EXPIRY);
    let second = rig.access_token().await.unwrap();
    let refused = rig
        .oauth
        .refresh_after_unauthorized(&rig.provider, &rig.credential, &second, rig.now())
        .await
        .unwrap();
    rig.idp.set_token_fault(Some(TokenFault::Unavailable));
    let failed = rig
        .oauth
        .refresh_after_unauthorized(&rig.provider, &rig.credential, &refused, rig.now())
        .await
        .unwrap_err();
    rig.idp.set_token_fault(Some(TokenFault::InvalidGrant));
    let again = rig
        .oauth
        .refresh_after_unauthorized(&rig.provider, &rig.credential, &refused, rig.now())
        .await
        .unwrap_err();
    let status = rig.oauth.status(&rig.provider, &rig.credential, rig.now()).await.unwrap();

    let mut canaries: Vec<String> = rig
        .idp
        .token_requests()
        .iter()
        .flat_map(|r| {
            ["code", "code_verifier", "refresh_token"].map(|p| r.param(p).map(str::to_owned))
        })
        .flatten()
        .collect();
    canaries.extend([&first, &second, &refused].map(|t| t.expose().to_owned()));
    assert!(canaries.len() >= 7, "{} canaries", canaries.len());

    let shown = [
        format!("{:?}", rig.oauth),
        format!("{started:?} {login:?}"),
        format!("{status:?} {}", serde_json::to_string(&status).unwrap()),
        format!("{failed:?} {failed}"),
        format!("{again:?} {again}"),
        format!("{first:?} {first}"),
    ];
    for text in &shown {
        for canary in &canaries {
            assert!(!text.contains(canary.as_str()), "{canary} leaked into {text}");
        }
    }
    assert!(shown[0].contains("Secret(***)"), "the manager's Debug does show its (masked) cache");
}

/// The registry of a process restarted after a `kill -9` in the middle of a refresh: the state
/// file says the credential was refreshing, which restores as `expired`.
fn restored_expired(rig: &Rig) -> Arc<HealthRegistry> {
    let key = CredentialKey { provider: rig.provider.clone(), credential: rig.credential.clone() };
    let record = CredentialRecord {
        status: CredentialStatus::Refreshing,
        cooling_until: None,
        backoff_level: 0,
        last_error: None,
        changed_at: T0,
    };
    let registry = Arc::new(HealthRegistry::default());
    registry.restore(
        &HealthRecords { credentials: vec![(key, record)], ..HealthRecords::default() },
        rig.now(),
    );
    let candidate = switchyard_core::CandidateKey {
        provider: rig.provider.clone(),
        credential: rig.credential.clone(),
        model: "m".into(),
    };
    assert_eq!(registry.eligible(&candidate, rig.now()), Err(SkipReason::CredentialExpired));
    registry
}

#[tokio::test]
async fn a_credential_restored_as_expired_is_refreshed_by_the_manager_and_serves_again() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    rig.clock.set(EXPIRY);
    let registry = restored_expired(&rig);
    let restarted = manager(&rig.store, &registry, &rig.clock);
    restarted.set_client(&rig.provider, &rig.client()).unwrap();
    let requests = rig.idp.token_request_count();

    assert_eq!(restarted.retry_expired(rig.now()).await, 1);
    assert_eq!(rig.idp.token_request_count(), requests + 1, "one refresh, not a sign-in");
    let key = CredentialKey { provider: rig.provider.clone(), credential: rig.credential.clone() };
    assert!(registry.snapshot(rig.now()).credentials.iter().all(|c| c.key != key), "active");
    let token = restarted.access_token(&rig.provider, &rig.credential, rig.now()).await.unwrap();
    assert!(rig.idp.is_access_token_valid(token.expose()));
}

#[tokio::test]
async fn a_credential_restored_as_expired_whose_token_is_still_valid_serves_without_a_refresh() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    let registry = restored_expired(&rig);
    let restarted = manager(&rig.store, &registry, &rig.clock);
    restarted.set_client(&rig.provider, &rig.client()).unwrap();
    let requests = rig.idp.token_request_count();

    assert_eq!(restarted.retry_expired(rig.now()).await, 1);
    assert_eq!(rig.idp.token_request_count(), requests);
    assert!(registry.snapshot(rig.now()).credentials.is_empty(), "handed back as active");
}

#[tokio::test]
async fn a_token_response_larger_than_64_kib_is_refused_as_a_broken_identity_provider() {
    let rig = Rig::new().await;
    rig.sign_in().await;
    rig.idp.enqueue_token_fault(TokenFault::Oversized);
    rig.clock.set(EXPIRY);
    let err = rig.access_token().await.unwrap_err();
    let OAuthError::Refresh { error: TokenError::Unreachable(failure), .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*failure, SendFailure::TooLarge(64 * 1024));
    assert!(err.to_string().contains("larger than a token response"), "{err}");
}
