//! A client's login is a secret to the host it goes to: a subscription moved to another host
//! than its preset's own is listed as "your Claude login" to that host, is never confirmed by
//! an import's `confirm=true` (nor by an edit's, which confirms destinations), and goes there
//! only once the user confirms it where it is named.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, Setup};

const LOGIN: &str = "sk-ant-oat01-moved-host-login-3c9a";

/// One subscription provider on the mock (not Anthropic's own host), and a combo on it.
fn moved(mock: &str) -> String {
    format!(
        "[[providers]]\nid = \"sub\"\npreset = \"claude-subscription\"\nbase_url = \"{mock}\"\n\
         models = [\"sub-plan\"]\n\n[[combos]]\nname = \"plan\"\ntargets = [{{ target = \"sub/sub-plan\" }}]\n"
    )
}

async fn ask(h: &Harness) -> u16 {
    let sent = h
        .http
        .post(h.url("/v1/messages"))
        .bearer_auth(LOGIN)
        .header("x-switchyard-key", LOCAL_KEY)
        .json(&json!({"model": "plan", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    sent.status().as_u16()
}

#[tokio::test]
async fn a_login_goes_to_a_moved_host_only_once_confirmed_where_it_is_named() {
    let h = Harness::start_with(Setup::new("")).await;
    let text = moved(&h.mock.base_url());

    let checked = h.import_config("?dry_run=true", &text).await;
    let login = checked["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["reference"] == "login:claude")
        .unwrap_or_else(|| panic!("no login pair: {checked}"));
    assert_eq!(login["state"], "new");
    assert_eq!(login["credentials"], json!(["sub/login"]));

    // Imported with every destination allowed: the login is not among them.
    h.import_config("?confirm=true", &text).await;
    assert_eq!(ask(&h).await, 503, "nothing could serve: the login waits for its confirmation");
    assert!(h.mock.attempts_for("sub-plan").is_empty(), "the login went nowhere");
    let (_, provider) = h.api_get("/api/providers/sub").await;
    assert_eq!(provider["unconfirmed"][0]["reference"], "login:claude", "{provider}");
    // Nor does an edit of the provider with `confirm=true` (which confirms destinations).
    let (status, view) = h
        .api(
            reqwest::Method::PATCH,
            "/api/providers/sub?confirm=true",
            &json!({"models": ["sub-plan"]}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["unconfirmed"][0]["reference"], "login:claude", "{view}");
    assert_eq!(ask(&h).await, 503);

    // The provider's Confirm, which lists it ("Send your Claude login to http://…?"), sends it.
    let (status, view) =
        h.api(reqwest::Method::POST, "/api/providers/sub/confirm", &Value::Null).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(ask(&h).await, 200);
    let attempts = h.mock.attempts_for("sub-plan");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].api_key(), Some(LOGIN));
    h.stop().await;
}

#[tokio::test]
async fn a_subscription_on_its_own_host_needs_no_login_confirmation() {
    let h = Harness::start_with(Setup::new("")).await;
    let text = "[[providers]]\nid = \"sub\"\npreset = \"claude-subscription\"\n";
    let checked = h.import_config("?dry_run=true", text).await;
    let pairs = checked["pairs"].as_array().unwrap();
    assert!(pairs.iter().all(|p| p["reference"].is_null()), "only where requests go: {checked}");
    h.stop().await;
}
