//! Keep your subscription (RESILIENCE.md §11): a subscriber's Claude Code or Codex
//! keeps its own login in `Authorization` and sends the local key in `x-switchyard-key`. A
//! provider credential of kind `client` passes that login through, to its own provider only;
//! when the subscription's window is spent, the same request falls back to an API key, and the
//! subscription serves again at its reset.

use std::time::Duration;

use reqwest::RequestBuilder;
use serde_json::{Value, json};
use switchyard_core::{Clock as _, ManualClock};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, Setup, T0, header, json_parts};
use switchyard_testkit::Status;

/// A Claude subscription (the preset, at the mock) in front of the standard `an` API key, and
/// a `ChatGPT` subscription in front of the standard `oa` one.
const PLANS: &str = r#"
[[providers]]
id = "claude-sub"
preset = "claude-subscription"
base_url = "{mock}"
models = ["claude-plan"]

[[providers]]
id = "chatgpt-sub"
preset = "chatgpt-subscription"
base_url = "{mock}/backend-api/codex"
models = ["gpt-plan"]

[[combos]]
name = "claude"
targets = [{ target = "claude-sub/claude-plan" }, { target = "an/claude-x" }]

[[combos]]
name = "codex"
targets = [{ target = "chatgpt-sub/gpt-plan" }, { target = "oa/gpt-4o" }]

[[combos]]
name = "plan-only"
targets = [{ target = "claude-sub/claude-plan" }]
"#;

const CLAUDE_TOKEN: &str = "sk-ant-oat01-a-subscribers-own-token-0123456789";
const CHATGPT_TOKEN: &str = "eyJhbGciOiJub25lIn0.a-chatgpt-access-token.sig";
const ACCOUNT: &str = "7f6e5d4c-0000-4000-8000-00000000c0de";

/// Claude Code's turn as a logged-in subscriber sends it: its own token, the local key beside.
fn claude_code(h: &Harness, model: &str) -> (RequestBuilder, String) {
    let body = format!(
        r#"{{"model":"{model}","max_tokens":100,"messages":[{{"role":"user","content":"hi"}}],"metadata":{{"user_id":"{{\"device_id\":\"d\",\"account_uuid\":\"{ACCOUNT}\",\"session_id\":\"s-1\"}}"}}}}"#
    );
    let request = h
        .http
        .post(h.url("/v1/messages?beta=true"))
        .bearer_auth(CLAUDE_TOKEN)
        .header("anthropic-beta", "claude-code-20250219,oauth-2025-04-20")
        .header("anthropic-version", "2023-06-01")
        .header("x-switchyard-key", LOCAL_KEY)
        .header("content-type", "application/json")
        .body(body.clone());
    (request, body)
}

/// Codex logged in with `ChatGPT`: its access token, its account and the local key beside.
fn codex(h: &Harness, model: &str) -> RequestBuilder {
    h.http
        .post(h.url("/v1/responses"))
        .bearer_auth(CHATGPT_TOKEN)
        .header("chatgpt-account-id", ACCOUNT)
        .header("x-switchyard-key", LOCAL_KEY)
        .json(&json!({"model": model, "input": "hi", "stream": false}))
}

async fn send(request: RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
    json_parts(request.send().await.unwrap()).await
}

/// Anthropic's answer when a Claude plan's window is spent, resetting `wait` after `now`.
fn claude_spent(now: u64, wait: Duration) -> Status {
    Status::new(429)
        .header("anthropic-ratelimit-unified-status", "rejected")
        .header("anthropic-ratelimit-unified-5h-utilization", "1.0")
        .header("anthropic-ratelimit-unified-reset", (now / 1000 + wait.as_secs()).to_string())
}

/// No attempt but the subscription's carried the client's login, anywhere.
fn assert_login_only_at(h: &Harness, model: &str, token: &str) {
    for attempt in h.mock.attempts() {
        let sent = format!("{:?} {}", attempt.headers, String::from_utf8_lossy(&attempt.raw_body));
        if attempt.model != model {
            assert!(!sent.contains(token), "the login reached {}: {sent}", attempt.model);
        }
    }
}

#[tokio::test]
async fn a_subscribers_login_goes_to_its_subscription_byte_for_byte_and_falls_back_until_the_reset()
{
    let clock = ManualClock::new(T0);
    let h = Harness::start_with_clock(PLANS, &clock).await;

    // Served by the subscription, with the client's own token and body (but for `model`).
    let (request, body) = claude_code(&h, "claude");
    let (status, headers, answer) = send(request).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "claude-sub/claude-plan");
    let seen = h.mock.attempts_for("claude-plan");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("authorization"), Some(&*format!("Bearer {CLAUDE_TOKEN}")));
    assert_eq!(seen[0].header("x-api-key"), None, "no key of Switchyard's beside it");
    assert_eq!(seen[0].header("x-switchyard-key"), None, "the local key stays here");
    assert!(seen[0].header("anthropic-beta").unwrap().contains("oauth-2025-04-20"));
    assert_eq!(
        String::from_utf8_lossy(&seen[0].raw_body),
        body.replace("\"model\":\"claude\"", "\"model\":\"claude-plan\""),
        "the client's bytes but for the model"
    );

    // Its window is spent: the same request is answered by the API key, which sees its own key.
    let five_hours = Duration::from_secs(5 * 3600);
    h.mock.enqueue("claude-plan", claude_spent(clock.now().0, five_hours));
    let (status, headers, answer) = send(claude_code(&h, "claude").0).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-x");
    assert!(
        headers.get("anthropic-ratelimit-unified-status").is_none(),
        "a plan passed over is in the trace, not the headers"
    );
    let fallback = h.mock.attempts_for("claude-x");
    assert_eq!(fallback.last().unwrap().api_key(), Some("an-1"));
    assert_login_only_at(&h, "claude-plan", CLAUDE_TOKEN);
    let benched: Vec<_> = h.app.snapshot().credentials;
    let scoped = benched.iter().find(|c| c.key.provider.as_str() == "claude-sub").expect("benched");
    assert!(
        scoped.key.credential.as_str().starts_with("login~"),
        "benched per account: {scoped:?}"
    );
    assert_eq!(scoped.retry_in_ms, Some(u64::try_from(five_hours.as_millis()).unwrap()));

    // A second before the reset it is still passed over; at the reset it serves again.
    clock.advance(five_hours.saturating_sub(Duration::from_secs(1)));
    let before = h.mock.attempts_for("claude-plan").len();
    assert_eq!(send(claude_code(&h, "claude").0).await.0, 200);
    assert_eq!(h.mock.attempts_for("claude-plan").len(), before, "still benched");
    clock.advance(Duration::from_secs(1));
    let (status, headers, _) = send(claude_code(&h, "claude").0).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "claude-sub/claude-plan"));
}

#[tokio::test]
async fn the_subscriptions_own_quota_headers_go_back_to_the_client_when_it_served() {
    let h = Harness::start(PLANS).await;
    h.mock.report_quota(CLAUDE_TOKEN, 4, 10, "60s");
    h.mock.report_quota("an-1", 9, 10, "60s");
    let (status, headers, answer) = send(claude_code(&h, "claude").0).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "claude-sub/claude-plan");
    assert_eq!(header(&headers, "x-ratelimit-remaining-requests"), "4");
    // The API key's own, when it serves.
    let (status, headers, answer) =
        json_parts(h.anthropic("an/claude-x", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-ratelimit-remaining-requests"), "9");
}

#[tokio::test]
async fn codexs_chatgpt_login_and_account_go_to_the_chatgpt_backend_only() {
    let h = Harness::start(PLANS).await;
    let (status, headers, answer) = send(codex(&h, "codex")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "chatgpt-sub/gpt-plan");
    let seen = h.mock.attempts_for("gpt-plan");
    assert_eq!(seen[0].path, "/backend-api/codex/responses");
    assert_eq!(seen[0].header("authorization"), Some(&*format!("Bearer {CHATGPT_TOKEN}")));
    assert_eq!(seen[0].header("chatgpt-account-id"), Some(ACCOUNT));

    // Codex's spent window: the OpenAI API key answers, and never sees the ChatGPT token.
    h.mock.enqueue(
        "gpt-plan",
        Status::new(429).body_json(json!({"error": {
            "type": "usage_limit_reached", "message": "The usage limit has been reached",
            "plan_type": "plus", "resets_in_seconds": 3600 * 24 * 7,
        }})),
    );
    let (status, headers, answer) = send(codex(&h, "codex")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
    assert_eq!(h.mock.attempts_for("gpt-4o").last().unwrap().api_key(), Some("oa-1"));
    assert_login_only_at(&h, "gpt-plan", CHATGPT_TOKEN);
    assert_login_only_at(&h, "gpt-plan", ACCOUNT);
}

#[tokio::test]
async fn without_a_login_the_subscription_is_skipped_and_alone_it_is_a_401_that_names_what_is_missing()
 {
    let h = Harness::start(PLANS).await;
    // The local key as usual, in Authorization: nothing of the client's to pass through.
    let (status, headers, answer) =
        json_parts(h.anthropic("claude", false).send().await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-x");
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    let trace = log[0]["trace"].to_string();
    assert!(trace.contains("no_client_credential"), "{trace}");

    // A side key with no login beside it, on a combo of the subscription alone.
    let alone = h
        .http
        .post(h.url("/v1/messages"))
        .header("x-switchyard-key", LOCAL_KEY)
        .json(&json!({"model": "plan-only", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}));
    let (status, _, answer) = send(alone).await;
    assert_eq!(status, 401, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("x-switchyard-key") && message.contains("Authorization"), "{message}");
    assert!(h.mock.attempts_for("claude-plan").is_empty(), "nothing was sent upstream");

    // No local key at all: the front door's 401, as ever.
    let none = h.http.post(h.url("/v1/messages")).bearer_auth(CLAUDE_TOKEN);
    let none = none.json(&json!({"model": "plan-only", "max_tokens": 10, "messages": []}));
    assert_eq!(none.send().await.unwrap().status(), 401);
    assert!(h.mock.attempts().iter().all(|a| a.model != "claude-plan"));
}

#[tokio::test]
async fn a_claude_login_never_goes_to_a_chatgpt_subscription() {
    let h = Harness::start(PLANS).await;
    // Claude Code asking for the Codex combo: its token is for Anthropic, not ChatGPT.
    let (status, headers, answer) = send(claude_code(&h, "codex").0).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
    assert_login_only_at(&h, "no model may see it", CLAUDE_TOKEN);
}

#[tokio::test]
async fn a_spent_window_outlives_a_restart_until_its_reset_and_the_plans_use_is_shown_not_priced() {
    let clock = ManualClock::new(T0);
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let setup = || Setup::new(PLANS).clock(&clock);
    let h = Harness::start_in_with(mock, data.path(), setup()).await;
    h.mock.report_quota(CLAUDE_TOKEN, 3, 10, "5h0m0s");
    assert_eq!(send(claude_code(&h, "claude").0).await.0, 200);
    // The plan's window is on the health page, by its account, marked as a subscription.
    let health = h.api_get("/api/monitoring/health").await.1;
    let views = health["headroom"].as_array().cloned().unwrap_or_default();
    let plan = views.iter().find(|v| v["provider"] == "claude-sub").expect("the plan's window");
    assert!(plan["credential"].as_str().unwrap().starts_with("login~"), "{plan}");
    assert_eq!(plan["subscription"], true, "{plan}");
    // Its tokens are counted, at no price: covered by the plan, not API spend.
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    assert_eq!(log[0]["served_by"], "claude-sub/claude-plan", "{log}");
    assert!(log[0]["usage"].is_object(), "{log}");
    assert_eq!(log[0]["cost"], "0", "{log}");

    let week = Duration::from_secs(7 * 24 * 3600);
    h.mock.enqueue("claude-plan", claude_spent(clock.now().0, week));
    assert_eq!(send(claude_code(&h, "claude").0).await.0, 200);
    let mock = h.stop().await;

    // A week-long bench survives the restart (no one-hour cap on restore) and ends at the reset.
    let h = Harness::start_in_with(mock, data.path(), setup().reuse_config()).await;
    clock.advance(week.saturating_sub(Duration::from_secs(60)));
    let before = h.mock.attempts_for("claude-plan").len();
    let (status, headers, _) = send(claude_code(&h, "claude").0).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "an/claude-x"));
    assert_eq!(h.mock.attempts_for("claude-plan").len(), before, "still benched after the restart");
    clock.advance(Duration::from_secs(60));
    let (status, headers, _) = send(claude_code(&h, "claude").0).await;
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    let health = h.api_get("/api/monitoring/health").await.1;
    assert_eq!(
        (status, header(&headers, "x-switchyard-target")),
        (200, "claude-sub/claude-plan"),
        "{log} {health}"
    );
}

#[tokio::test]
async fn one_subscribers_spent_window_benches_that_account_only() {
    let h = Harness::start(PLANS).await;
    let as_account = |account: &str| {
        h.http
            .post(h.url("/v1/responses"))
            .bearer_auth(format!("{CHATGPT_TOKEN}-{account}"))
            .header("chatgpt-account-id", account)
            .header("x-switchyard-key", LOCAL_KEY)
            .json(&json!({"model": "codex", "input": "hi", "stream": false}))
    };
    h.mock.enqueue(
        "gpt-plan",
        Status::new(429).body_json(json!({"error": {
            "type": "usage_limit_reached", "message": "The usage limit has been reached",
            "resets_in_seconds": 3600,
        }})),
    );
    let (status, headers, _) = send(as_account("alice")).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "oa/gpt-4o"));
    // Another subscriber through the same Switchyard keeps their plan; Alice stays benched.
    let (status, headers, _) = send(as_account("bob")).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "chatgpt-sub/gpt-plan"));
    let (status, headers, _) = send(as_account("alice")).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "oa/gpt-4o"));
    let benched = h.app.snapshot().credentials;
    assert_eq!(benched.len(), 1, "one account benched: {benched:?}");
}

/// The subscription's destination is a binding like any other: confirmed with the config that
/// named it first, and not trusted once the file moves it (the rule for a moved file).
#[tokio::test]
async fn a_login_never_goes_to_a_destination_moved_after_the_first_start_until_confirmed() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(PLANS)).await;
    let mock = h.stop().await;

    let thief = switchyard_testkit::MockUpstream::start().await;
    let file = data.path().join(switchyard_e2e::harness::CONFIG_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    let from = format!(
        "id = \"claude-sub\"\npreset = \"claude-subscription\"\nbase_url = \"{}\"",
        mock.base_url()
    );
    let to = format!(
        "id = \"claude-sub\"\npreset = \"claude-subscription\"\nbase_url = \"{}\"",
        thief.base_url()
    );
    assert!(text.contains(&from), "{text}");
    std::fs::write(&file, text.replacen(&from, &to, 1)).unwrap();
    let h = Harness::start_in_with(mock, data.path(), Setup::new(PLANS).reuse_config()).await;

    let (status, headers, answer) = send(claude_code(&h, "claude").0).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "an/claude-x"), "{answer}");
    assert!(thief.attempts().is_empty(), "the moved destination got the login unconfirmed");
    let (_, log) = h.api_get("/api/requests?limit=1").await;
    // The login is a secret to the host it goes to: its pair waits for a confirmation.
    assert!(log[0]["trace"].to_string().contains("credential_unconfirmed"), "{log}");
    let (_, provider) = h.api_get("/api/providers/claude-sub").await;
    let waiting = provider["unconfirmed"].as_array().unwrap();
    assert!(waiting.iter().any(|b| b["reference"] == "login:claude"), "{provider}");

    let (status, body) =
        h.api(reqwest::Method::POST, "/api/providers/claude-sub/confirm", &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, _) = send(claude_code(&h, "claude").0).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "claude-sub/claude-plan"));
    let seen = thief.attempts();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("authorization"), Some(&*format!("Bearer {CLAUDE_TOKEN}")));
}

/// Claude Code's turn as a subscriber, with `token`, the account it claims and the local key
/// `key` beside it.
fn claude_code_as(h: &Harness, token: &str, account: &str, key: &str) -> RequestBuilder {
    let body = format!(
        r#"{{"model":"claude","max_tokens":100,"messages":[{{"role":"user","content":"hi"}}],"metadata":{{"user_id":"{{\"device_id\":\"d\",\"account_uuid\":\"{account}\",\"session_id\":\"s-{token}\"}}"}}}}"#
    );
    h.http
        .post(h.url("/v1/messages?beta=true"))
        .bearer_auth(token)
        .header("anthropic-beta", "claude-code-20250219,oauth-2025-04-20")
        .header("anthropic-version", "2023-06-01")
        .header("x-switchyard-key", key)
        .header("content-type", "application/json")
        .body(body)
}

/// The mock refuses one token with a 401: anything else on the subscription answers.
fn refuse_token(h: &Harness, token: &str) {
    // Its request carries it in the session id too (see `claude_code_as`): what a rule reads.
    let refused = Status::new(401).body_json(json!({"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}));
    let when = switchyard_testkit::When::any().request_contains(token);
    h.mock.add_rule("claude-plan", switchyard_testkit::Rule::new(when, refused));
}

/// Issue 56: what a caller claims (an account id) is no scope. A second local key that sends a
/// bogus token with the first subscriber's account id gets its 401 and benches nothing of the
/// first's, before or after a restart; seventeen made-up tokens from that key change nothing
/// for the first key's login either.
#[tokio::test]
async fn another_local_keys_bogus_token_never_benches_a_subscribers_login() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(PLANS)).await;
    let (status, created) =
        h.api(reqwest::Method::POST, "/api/keys", &json!({"name": "mallory"})).await;
    assert_eq!(status, 201, "{created}");
    let mallory = created["key"].as_str().unwrap().to_owned();
    let served_to_victim = |h: &Harness| {
        let request = claude_code_as(h, CLAUDE_TOKEN, ACCOUNT, LOCAL_KEY);
        async move {
            let (status, headers, answer) = send(request).await;
            assert_eq!(status, 200, "{answer}");
            header(&headers, "x-switchyard-target").to_owned()
        }
    };
    assert_eq!(served_to_victim(&h).await, "claude-sub/claude-plan");

    refuse_token(&h, "bogus");
    let (status, headers, _) =
        send(claude_code_as(&h, "sk-ant-oat01-bogus", ACCOUNT, &mallory)).await;
    assert_eq!(status, 200, "the bogus login's request falls back, as any refused key's");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-x");
    for n in 0..17 {
        let token = format!("sk-ant-oat01-bogus-{n}");
        let _ = send(claude_code_as(&h, &token, &format!("made-up-{n}"), &mallory)).await;
    }
    assert_eq!(served_to_victim(&h).await, "claude-sub/claude-plan", "the victim still served");

    let mock = h.stop().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(PLANS).reuse_config()).await;
    assert_eq!(served_to_victim(&h).await, "claude-sub/claude-plan", "and after a restart");
    assert_login_only_at(&h, "claude-plan", CLAUDE_TOKEN);
}

/// Issue 56: a subscriber's token refused once (expired, revoked) benches that token for a
/// while, never the subscription: the next token the client signs in with is served at once,
/// with no reset by hand.
#[tokio::test]
async fn a_refused_token_benches_that_token_only_and_a_new_login_is_served_at_once() {
    let h = Harness::start(PLANS).await;
    let old = "sk-ant-oat01-expired-token";
    refuse_token(&h, "expired-token");
    let (status, headers, _) = send(claude_code_as(&h, old, ACCOUNT, LOCAL_KEY)).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "an/claude-x"));
    let before = h.mock.attempts_for("claude-plan").len();
    let (_, headers, _) = send(claude_code_as(&h, old, ACCOUNT, LOCAL_KEY)).await;
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-x");
    assert_eq!(h.mock.attempts_for("claude-plan").len(), before, "the dead token is not resent");
    let benched = h.app.snapshot().credentials;
    assert!(
        benched.iter().all(|c| c.status != switchyard_core::resilience::CredentialStatus::Invalid),
        "benched for a while, never invalid for ever: {benched:?}"
    );

    // Signed in anew: another token of the same account.
    let (status, headers, _) = send(claude_code_as(&h, CLAUDE_TOKEN, ACCOUNT, LOCAL_KEY)).await;
    assert_eq!((status, header(&headers, "x-switchyard-target")), (200, "claude-sub/claude-plan"));
}

/// Issue 56: only the header the login came in goes upstream, and a local key where the login
/// should be never leaves: the client is told what to fix.
#[tokio::test]
async fn only_the_logins_own_header_goes_upstream_and_a_local_key_in_its_place_never_leaves() {
    let h = Harness::start(PLANS).await;
    let second = "sk-ant-api03-a-second-credential-header";
    let (status, _, answer) =
        send(claude_code(&h, "plan-only").0.header("x-api-key", second)).await;
    assert_eq!(status, 200, "{answer}");
    let seen = h.mock.attempts_for("claude-plan");
    assert_eq!(seen.last().unwrap().header("x-api-key"), None, "the second header stays here");
    assert_eq!(
        seen.last().unwrap().header("authorization"),
        Some(&*format!("Bearer {CLAUDE_TOKEN}"))
    );

    let before = h.mock.total_attempts();
    let (status, _, answer) = send(claude_code_as(&h, LOCAL_KEY, ACCOUNT, LOCAL_KEY)).await;
    assert_eq!(status, 401, "{answer}");
    let message = answer.to_string();
    assert!(message.contains("carries a Switchyard local key beside"), "{message}");
    assert!(!message.contains(LOCAL_KEY), "{message}");
    assert_eq!(h.mock.total_attempts(), before, "nothing went upstream");
}
