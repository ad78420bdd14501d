//! The front door of the localhost server, end to end: forged `Host` names (DNS rebinding),
//! browser `Origin`s, CORS preflights and missing or wrong local keys are refused on every
//! client route, in the route's dialect, before anything reaches an upstream.

use reqwest::Method;
use serde_json::json;
use switchyard_e2e::harness::{Harness, LOCAL_KEY, MANAGEMENT_TOKEN, Setup, header, json_parts};

/// Every client route, with a valid body for it.
fn routes(h: &Harness) -> [(reqwest::RequestBuilder, bool); 2] {
    [(h.openai("oa/gpt-4o", false), false), (h.anthropic("oa/gpt-4o", false), true)]
}

/// A refusal with `status`, in the route's error shape.
async fn assert_refused(request: reqwest::RequestBuilder, anthropic: bool, status: u16, why: &str) {
    let response = request.send().await.unwrap();
    assert!(
        response.headers().get("access-control-allow-origin").is_none(),
        "{why}: no CORS is ever served"
    );
    let (got, _, body) = json_parts(response).await;
    assert_eq!(got, status, "{why}: {body}");
    if anthropic {
        assert_eq!(body["type"], "error", "{why}: Anthropic shape on /v1/messages: {body}");
        assert!(body["error"]["message"].is_string(), "{why}: {body}");
    } else {
        assert!(body["error"]["message"].is_string(), "{why}: OpenAI shape: {body}");
    }
}

#[tokio::test]
async fn forged_host_names_are_refused_before_any_upstream_attempt() {
    let h = Harness::start("").await;
    let port = h.port;
    let forged = [
        "evil.example".to_owned(),
        format!("evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        format!("127.0.0.2:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1".to_owned(),
    ];
    for host in &forged {
        for (request, anthropic) in routes(&h) {
            assert_refused(request.header("host", host), anthropic, 403, host).await;
        }
    }
    assert_eq!(h.mock.total_attempts(), 0);
    // The same request with an honest Host goes through: the refusals were about the Host.
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let response = h.openai("oa/gpt-4o", false).header("host", &host).send().await.unwrap();
        assert_eq!(response.status(), 200, "{host}");
    }
    assert_eq!(h.mock.total_attempts(), 2);
}

#[tokio::test]
async fn requests_from_web_pages_are_refused_whatever_their_origin() {
    let h = Harness::start("").await;
    let own = format!("http://127.0.0.1:{}", h.port);
    for origin in ["https://evil.example", "null", own.as_str(), "http://localhost"] {
        for (request, anthropic) in routes(&h) {
            assert_refused(request.header("origin", origin), anthropic, 403, origin).await;
        }
    }
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn a_cors_preflight_is_refused_and_grants_nothing() {
    let h = Harness::start("").await;
    for path in ["/v1/chat/completions", "/v1/messages", "/v1/models"] {
        let response = h
            .http
            .request(Method::OPTIONS, h.url(path))
            .header("origin", "https://evil.example")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization, content-type")
            .send()
            .await
            .unwrap();
        // The front door runs before routing, so even a method no route has is refused there.
        assert_eq!(response.status(), 403, "{path}");
        let granted: Vec<_> = response
            .headers()
            .keys()
            .filter(|name| name.as_str().starts_with("access-control-"))
            .collect();
        assert_eq!(granted, Vec::<&reqwest::header::HeaderName>::new(), "{path}");
    }
    assert_eq!(h.mock.total_attempts(), 0);
}

#[tokio::test]
async fn a_missing_or_wrong_local_key_is_refused_in_the_routes_dialect() {
    let h = Harness::start("").await;
    let body = json!({"model": "oa/gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    for (path, anthropic) in [("/v1/chat/completions", false), ("/v1/messages", true)] {
        let url = h.url(path);
        let missing = h.http.post(&url).json(&body);
        assert_refused(missing, anthropic, 401, "no key").await;
        let wrong_bearer = h.http.post(&url).bearer_auth("sy-wrong").json(&body);
        assert_refused(wrong_bearer, anthropic, 401, "wrong bearer").await;
        let wrong_header = h.http.post(&url).header("x-api-key", "sy-wrong").json(&body);
        assert_refused(wrong_header, anthropic, 401, "wrong x-api-key").await;
        let basic = h.http.post(&url).basic_auth(LOCAL_KEY, None::<&str>).json(&body);
        assert_refused(basic, anthropic, 401, "the key in another scheme").await;
    }
    let models = h.http.get(h.url("/v1/models")).send().await.unwrap();
    assert_eq!(models.status(), 401, "listing models needs the key too");
    assert_eq!(h.mock.total_attempts(), 0);
}

/// Issue 28 point 1: a client whose `Authorization` / `x-api-key` is its own upstream login
/// (a subscriber's Claude Code or Codex) sends the local key in `x-switchyard-key`; then that
/// header alone is the local key, and neither it nor the client's login goes upstream.
#[tokio::test]
async fn the_local_key_may_come_beside_the_clients_own_login_and_then_that_alone_counts() {
    let h = Harness::start("").await;
    let body = json!({"model": "oa/gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let login = "sk-ant-oat01-a-subscribers-own-token";
    for (path, anthropic) in [("/v1/chat/completions", false), ("/v1/messages", true)] {
        let url = h.url(path);
        let served = h.http.post(&url).bearer_auth(login).header("x-switchyard-key", LOCAL_KEY);
        let (status, _, answer) = json_parts(served.json(&body).send().await.unwrap()).await;
        assert_eq!(status, 200, "{path}: {answer}");
        let by_api_key = h.http.post(&url).header("x-api-key", login);
        let by_api_key = by_api_key.header("x-switchyard-key", LOCAL_KEY).json(&body);
        assert_eq!(by_api_key.send().await.unwrap().status(), 200, "{path}: beside x-api-key");
        // The side header decides: a wrong one is refused even beside a valid local key.
        let wrong = h.http.post(&url).bearer_auth(LOCAL_KEY).header("x-switchyard-key", "sy-wrong");
        assert_refused(wrong.json(&body), anthropic, 401, "a wrong side key").await;
        let empty = h.http.post(&url).bearer_auth(LOCAL_KEY).header("x-switchyard-key", "");
        assert_refused(empty.json(&body), anthropic, 401, "an empty side key").await;
    }
    let attempts = h.mock.attempts();
    assert_eq!(attempts.len(), 4, "only the four admitted requests went upstream");
    for attempt in attempts {
        assert_eq!(attempt.api_key(), Some("oa-1"), "the provider's own key went upstream");
        assert_eq!(attempt.header("x-switchyard-key"), None, "the local key stays here");
        let sent = attempt.to_json().to_string();
        assert!(!sent.contains(login), "the client's login went nowhere: {sent}");
    }
}

/// A stand-in for `ui/dist`.
fn built_ui() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<!doctype html><title>Switchyard</title>")
        .unwrap();
    dir
}

#[tokio::test]
async fn the_web_ui_is_served_with_a_csp_no_framing_no_sniffing_and_no_referrer() {
    let ui = built_ui();
    let h = Harness::start_with(Setup::new("").ui(ui.path())).await;
    let page = h.http.get(h.url("/")).send().await.unwrap();
    let api = h.http.get(h.url("/api/monitoring/health")).bearer_auth(MANAGEMENT_TOKEN);
    let api = api.send().await.unwrap();
    let refused = h.http.get(h.url("/api/monitoring/health")).send().await.unwrap();
    // A client's `POST` to `/v1` is answered by the connection without the router:
    // the same front door, the same headers, answered or refused.
    let chat = json!({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]});
    let url = h.url("/v1/chat/completions");
    let client = h.http.post(&url).bearer_auth(LOCAL_KEY).json(&chat).send().await.unwrap();
    assert_eq!(client.status(), 404, "an unknown model, answered by the proxy");
    let keyless = h.http.post(&url).json(&chat).send().await.unwrap();
    assert_eq!(keyless.status(), 401);
    for (what, response) in [
        ("the page", &page),
        ("an API answer", &api),
        ("a refusal", &refused),
        ("a /v1 answer", &client),
        ("a /v1 refusal", &keyless),
    ] {
        let headers = response.headers();
        let csp = header(headers, "content-security-policy");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{what}: {directive} missing from {csp:?}");
        }
        assert_eq!(header(headers, "x-content-type-options"), "nosniff", "{what}");
        assert_eq!(header(headers, "referrer-policy"), "no-referrer", "{what}");
        assert_eq!(header(headers, "x-frame-options"), "DENY", "{what}");
    }
}

#[tokio::test]
async fn the_api_takes_only_requests_a_browser_marks_as_same_origin_or_typed_by_the_user() {
    let ui = built_ui();
    let h = Harness::start_with(Setup::new("").ui(ui.path())).await;
    let call = |site: Option<&str>| {
        let request = h.http.get(h.url("/api/monitoring/health")).bearer_auth(MANAGEMENT_TOKEN);
        match site {
            Some(site) => request.header("sec-fetch-site", site),
            None => request,
        }
    };
    for allowed in [None, Some("none"), Some("same-origin")] {
        assert_eq!(call(allowed).send().await.unwrap().status(), 200, "{allowed:?}");
    }
    // `same-site` is what a page on another localhost port sends: another origin.
    for refused in ["same-site", "cross-site", "SAME-SITE", "something-new"] {
        let (status, _, body) = json_parts(call(Some(refused)).send().await.unwrap()).await;
        assert_eq!(status, 403, "{refused}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Sec-Fetch-Site"), "{refused}: {message}");
    }
}
