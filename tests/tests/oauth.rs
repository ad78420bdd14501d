//! OAuth credentials end to end: the real server, the mock upstream and the mock identity
//! provider, one manual clock for both sides. Sign in through the management API and a
//! "browser" that shows redirects; requests then carry the access token; a token near its
//! expiry is refreshed ahead of it; a 401 refreshes once and the same target is tried again;
//! an identity provider that is down opens its refresh breaker, nothing more is sent to it,
//! and the credential says why until it recovers.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, Setup, T0, ask, header};
use switchyard_testkit::{Behavior, ErrorKind, ManualClock, MockOAuth, TokenFault};

/// Tokens live this long; refreshes happen a minute before the end.
const LIFETIME: Duration = Duration::from_secs(600);

struct Rig {
    h: Harness,
    idp: MockOAuth,
    clock: ManualClock,
}

const LOGIN: &str = "/api/providers/oo/credentials/me/login";
const STATUS: &str = "/api/providers/oo/credentials/me/oauth";
const RETRY: &str = "/api/providers/oo/credentials/me/oauth/refresh";

impl Rig {
    async fn start() -> Self {
        let clock = ManualClock::new(T0);
        let idp = MockOAuth::builder()
            .token_lifetime(LIFETIME)
            .clock(Arc::new(clock.clone()))
            .start()
            .await
            .unwrap();
        let extra = format!(
            r#"
[[providers]]
id = "oo"
kind = "openai"
base_url = "{{mock}}/v1"
profile = "oauth"
credentials = [{{ id = "me", kind = "oauth" }}]
oauth = {{ authorize_url = "{}", token_url = "{}", client_id = "{}", scopes = ["models"] }}
"#,
            idp.authorize_url(),
            idp.token_url(),
            idp.client_id()
        );
        let h = Harness::start_with(Setup::new(&extra).clock(&clock)).await;
        Self { h, idp, clock }
    }

    /// The whole sign-in, as the UI and the user's browser do it.
    async fn sign_in(&self) {
        let (status, started) = self.h.api(Method::POST, LOGIN, &Value::Null).await;
        assert_eq!(status, 201, "{started}");
        let browser =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let url = started["authorization_url"].as_str().unwrap();
        let redirect = browser.get(url).send().await.unwrap();
        assert_eq!(redirect.status(), 302);
        let location = redirect.headers()["location"].to_str().unwrap().to_owned();
        assert!(location.starts_with(started["redirect_uri"].as_str().unwrap()), "{location}");
        let page = browser.get(&location).send().await.unwrap();
        assert_eq!(page.status(), 200, "{:?}", page.text().await);
        let (status, login) = self.h.api_get(&format!("/api/oauth/logins/{}", started["id"])).await;
        assert_eq!((status, login), (200, json!({ "status": "succeeded" })));
    }

    /// The access token the last upstream attempt carried.
    fn last_token(&self) -> String {
        self.h.mock.attempts().last().unwrap().api_key().unwrap().to_owned()
    }
}

#[tokio::test]
async fn a_credential_signed_in_through_the_api_serves_with_its_access_token() {
    let rig = Rig::start().await;
    let (status, _, body) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 503, "not signed in yet: {body}");
    assert_eq!(body["error"]["switchyard"]["candidates"][0]["reason"], "oauth_not_signed_in");

    rig.sign_in().await;
    let (status, _, body) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 200, "{body}");
    assert!(rig.idp.is_access_token_valid(&rig.last_token()), "a token the IdP issued");
    let (status, view) = rig.h.api_get(STATUS).await;
    assert_eq!(status, 200);
    assert_eq!(view["state"], "valid", "{view}");
    assert!(!view.to_string().contains(&rig.last_token()), "the status never shows the token");

    let (status, body) =
        rig.h.api(Method::POST, "/api/providers/oa/credentials/oa-1/login", &Value::Null).await;
    assert_eq!((status, &body["error"]["switchyard"]["field"]), (422, &json!("kind")), "{body}");
}

#[tokio::test]
async fn a_token_near_its_expiry_is_refreshed_before_the_request_goes_out() {
    let rig = Rig::start().await;
    rig.sign_in().await;
    let (_, _, _) = ask(&rig.h, "oo/gpt-4o").await;
    let first = rig.last_token();
    let before = rig.idp.token_request_count();

    rig.clock.advance(Duration::from_secs(570)); // half a minute before the token expires
    let (status, _, _) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 200);
    assert_eq!(rig.idp.token_request_count(), before + 1, "one refresh");
    let second = rig.last_token();
    assert_ne!(second, first);
    assert!(rig.idp.is_access_token_valid(&second));
    let (_, _, _) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(rig.idp.token_request_count(), before + 1, "no refresh while the new one is fresh");
}

#[tokio::test]
async fn a_401_refreshes_the_token_once_and_the_same_target_then_serves() {
    let rig = Rig::start().await;
    rig.sign_in().await;
    let before = rig.idp.token_request_count();
    rig.h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    let (status, headers, body) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-attempts"), "2");
    let tokens: Vec<String> =
        rig.h.mock.attempts_for("gpt-4o").iter().map(|a| a.api_key().unwrap().to_owned()).collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0], tokens[1], "the retry carried the refreshed token");
    assert!(rig.idp.is_access_token_valid(&tokens[1]));
    assert_eq!(rig.idp.token_request_count(), before + 1);
    assert!(rig.h.app.credential("oo", "me").is_none(), "the credential is active again");

    // A second 401 in a row is the credential's fault: no endless refresh loop.
    rig.h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    rig.h.mock.enqueue("gpt-4o", Behavior::error(ErrorKind::Unauthorized));
    let (status, _, body) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 503, "nothing else could serve: {body}");
    let outcomes: Vec<&str> = body["error"]["switchyard"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["auth", "auth"], "one refresh, one retry, then stop: {body}");
    assert_eq!(rig.idp.token_request_count(), before + 2);
}

#[tokio::test]
async fn an_identity_provider_that_is_down_opens_its_refresh_breaker_and_the_credential_says_why() {
    let rig = Rig::start().await;
    rig.sign_in().await;
    let signed_in = rig.idp.token_request_count();
    rig.idp.set_token_fault(Some(TokenFault::Unavailable));
    rig.clock.advance(LIFETIME + Duration::from_secs(1));

    let (status, _, body) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 503, "{body}");
    let candidate = &body["error"]["switchyard"]["candidates"][0];
    assert_eq!(candidate["reason"], "oauth_refresh_failed", "{body}");
    assert_eq!(rig.idp.token_request_count(), signed_in + 1);
    let (status, _, _) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 503);
    assert_eq!(rig.idp.token_request_count(), signed_in + 1, "a benched credential is not tried");

    // "Retry now", twice more: the third failure opens the refresh breaker.
    for _ in 0..2 {
        let (status, view) = rig.h.api(Method::POST, RETRY, &Value::Null).await;
        assert_eq!(status, 200, "{view}");
    }
    assert_eq!(rig.idp.token_request_count(), signed_in + 3);
    let (status, view) = rig.h.api(Method::POST, RETRY, &Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(rig.idp.token_request_count(), signed_in + 3, "an open breaker sends nothing");
    assert_eq!(view["state"], "expired", "{view}");
    assert_eq!(view["refresh_breaker"]["state"], "open", "{view}");
    let reason = view["reason"].as_str().unwrap();
    assert!(reason.contains("503") && reason.contains("breaker is open"), "{reason}");
    let (_, health) = rig.h.api_get("/api/monitoring/health").await;
    assert_eq!(health["credentials"][0]["status"], "expired", "{health}");

    // The identity provider recovers; once the breaker lets a refresh through, it serves again.
    rig.idp.set_token_fault(None);
    rig.clock.advance(Duration::from_secs(30));
    let (_, view) = rig.h.api(Method::POST, RETRY, &Value::Null).await;
    assert_eq!(view["state"], "valid", "{view}");
    let (status, _, _) = ask(&rig.h, "oo/gpt-4o").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn sign_in_routes_refuse_what_is_not_an_oauth_credential_and_change_nothing() {
    let rig = Rig::start().await;
    let before = rig.h.api_get("/api/providers").await;
    for (method, path, status, field) in [
        (Method::POST, "/api/providers/oa/credentials/oa-1/login", 422, "kind"),
        (Method::GET, "/api/providers/oa/credentials/oa-1/oauth", 422, "kind"),
        (Method::POST, "/api/providers/nope/credentials/me/login", 404, "provider"),
        (Method::POST, "/api/providers/oo/credentials/nope/login", 404, "credential"),
        (Method::DELETE, "/api/providers/oo/credentials/nope/oauth", 404, "credential"),
        (Method::GET, "/api/oauth/logins/999", 404, "login"),
        (Method::DELETE, "/api/oauth/logins/999", 404, "login"),
    ] {
        let (got, body) = rig.h.api(method.clone(), path, &Value::Null).await;
        assert_eq!(got, status, "{method} {path}: {body}");
        assert_eq!(body["error"]["switchyard"]["field"], field, "{method} {path}: {body}");
    }
    assert_eq!(rig.h.api_get("/api/providers").await, before);
    assert_eq!(rig.idp.token_request_count(), 0);

    // A started login can be cancelled once; signing out forgets the tokens.
    let (_, started) = rig.h.api(Method::POST, LOGIN, &Value::Null).await;
    let path = format!("/api/oauth/logins/{}", started["id"]);
    assert_eq!(rig.h.api(Method::DELETE, &path, &Value::Null).await.0, 200);
    let (_, status) = rig.h.api_get(&path).await;
    assert_eq!(status["status"], "failed", "{status}");
    rig.sign_in().await;
    assert_eq!(rig.h.api(Method::DELETE, STATUS, &Value::Null).await.0, 200);
    let (_, view) = rig.h.api_get(STATUS).await;
    assert_eq!(view["state"], "signed_out", "{view}");
}

#[tokio::test]
async fn deleting_an_oauth_credential_deletes_its_tokens() {
    let rig = Rig::start().await;
    rig.sign_in().await;
    let (_, view) = rig.h.api_get(STATUS).await;
    assert_eq!(view["state"], "valid");
    let path = "/api/providers/oo/credentials/me";
    assert_eq!(rig.h.api(Method::DELETE, path, &Value::Null).await.0, 200);
    // The same name again starts signed out: nothing of the old tokens is left.
    let input = json!({ "id": "me", "kind": "oauth" });
    let (status, _) = rig.h.api(Method::POST, "/api/providers/oo/credentials", &input).await;
    assert_eq!(status, 201);
    let (_, view) = rig.h.api_get(STATUS).await;
    assert_eq!(view["state"], "signed_out", "{view}");
}

/// Issue 19: an edit that moves the token endpoint to another host benches the credential as
/// unconfirmed. No refresh, retry or new sign-in sends a token, a code or its verifier there
/// until the user confirms; after the confirmation the new endpoint is used.
#[tokio::test]
async fn a_token_endpoint_moved_by_an_edit_gets_nothing_until_the_user_confirms_it() {
    let rig = Rig::start().await;
    rig.sign_in().await;
    assert_eq!(rig.h.openai("oo/gpt-4o", false).send().await.unwrap().status(), 200);

    let other = MockOAuth::builder().client_id(rig.idp.client_id()).start().await.unwrap();
    let moved = json!({ "oauth": { "token_url": other.token_url() } });
    let (status, view) = rig.h.api(Method::PATCH, "/api/providers/oo", &moved).await;
    assert_eq!(status, 200, "{view}");
    let waiting = &view["credentials"][0]["unconfirmed"];
    assert_eq!(waiting[0]["reference"], "keychain:oo/me", "{view}");

    // Past the token's lifetime a request would refresh it: it is skipped instead.
    rig.clock.advance(LIFETIME + Duration::from_secs(1));
    assert_ne!(rig.h.openai("oo/gpt-4o", false).send().await.unwrap().status(), 200);
    let (status, retry) = rig.h.api(Method::POST, RETRY, &Value::Null).await;
    assert_eq!(status, 409, "{retry}");
    assert!(retry.to_string().contains("unconfirmed"), "{retry}");
    let (status, login) = rig.h.api(Method::POST, LOGIN, &Value::Null).await;
    assert_eq!(status, 409, "{login}");
    assert_eq!(other.token_request_count(), 0, "the moved token endpoint was sent a token");

    let (status, view) =
        rig.h.api(Method::POST, "/api/providers/oo/credentials/me/confirm", &Value::Null).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["credentials"][0]["unconfirmed"], json!([]), "{view}");
    rig.h.openai("oo/gpt-4o", false).send().await.unwrap();
    assert!(other.token_request_count() > 0, "after the confirmation the new endpoint is used");
}
