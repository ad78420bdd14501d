//! Error answers: each dialect's body shape, each provider's own status codes, and every form
//! of "retry later".

use std::time::Duration;

use serde_json::json;
use switchyard_core::UnixMillis;
use switchyard_core::outcome::retry_after;
use switchyard_testkit::{
    AnthropicLimit, Behavior, Dialect, ErrorKind, ManualClock, MockUpstream, Script, Status,
};

use crate::call::Call;

#[tokio::test]
async fn a_status_has_each_dialects_error_shape() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::status(429));
    let [openai, anthropic, gemini, responses] = Call::each("m");

    for call in [openai, responses] {
        let (status, body) = call.json(&mock).await;
        assert_eq!(status, 429, "{:?}", call.dialect);
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        assert!(body["error"]["message"].as_str().unwrap().contains("Rate limit reached for m"));
    }

    let (status, body) = anthropic.json(&mock).await;
    assert_eq!(status, 429);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");

    let (status, body) = gemini.json(&mock).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["code"], 429);
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
}

#[tokio::test]
async fn error_kinds_use_each_providers_own_status_code() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::error(ErrorKind::InsufficientQuota));
    let [openai, anthropic, gemini, responses] = Call::each("m");

    for call in [openai, responses] {
        let (status, body) = call.json(&mock).await;
        assert_eq!(status, 429, "{:?}", call.dialect);
        assert_eq!(body["error"]["type"], "insufficient_quota");
        assert_eq!(body["error"]["code"], "insufficient_quota");
    }

    let (status, body) = anthropic.json(&mock).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("credit balance is too low"));

    let (status, body) = gemini.json(&mock).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");

    mock.set_default("m", Behavior::error(ErrorKind::Unauthorized));
    let (status, body) = Call::new(Dialect::Gemini, "m").json(&mock).await;
    assert_eq!(status, 400, "Gemini answers a bad key with 400");
    assert_eq!(body["error"]["details"][0]["reason"], "API_KEY_INVALID");

    mock.set_default("m", Behavior::error(ErrorKind::Overloaded));
    let (status, body) = Call::new(Dialect::Anthropic, "m").json(&mock).await;
    assert_eq!(status, 529);
    assert_eq!(body["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn openai_errors_name_context_length_policy_and_missing_models() {
    let mock = MockUpstream::start().await;
    mock.script(
        "gpt-9",
        [
            Behavior::error(ErrorKind::ContextLengthExceeded),
            Behavior::error(ErrorKind::ContentPolicy),
            Behavior::error(ErrorKind::ModelNotFound),
        ],
    );
    let call = Call::new(Dialect::OpenAi, "gpt-9");

    let (status, body) = call.json(&mock).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("context_length_exceeded")));
    assert_eq!(body["error"]["param"], "messages");

    let (status, body) = call.json(&mock).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("content_policy_violation")));

    let (status, body) = call.json(&mock).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("model_not_found")));
    assert!(body["error"]["message"].as_str().unwrap().contains("`gpt-9`"));
}

#[tokio::test]
async fn retry_hints_arrive_in_every_form_and_parse_back_to_the_same_wait() {
    let now = UnixMillis(1_767_225_600_000); // 2026-01-01T00:00:00Z
    let wait = Duration::from_millis(2500);
    let cases = [
        (
            Status::new(429).retry_after(Duration::from_secs(2)),
            "retry-after",
            "2",
            Duration::from_secs(2),
        ),
        (Status::new(429).retry_after(wait), "retry-after", "2.5", wait),
        (
            Status::new(503).retry_after_date(now.plus(Duration::from_secs(30))),
            "retry-after",
            "Thu, 01 Jan 2026 00:00:30 GMT",
            Duration::from_secs(30),
        ),
        (Status::new(429).retry_after_ms(wait), "retry-after-ms", "2500", wait),
        (
            Status::new(429).ratelimit_reset_requests(wait),
            "x-ratelimit-reset-requests",
            "2.5s",
            wait,
        ),
        (
            Status::new(429).ratelimit_reset_tokens(Duration::from_secs(360)),
            "x-ratelimit-reset-tokens",
            "6m0s",
            Duration::from_secs(360),
        ),
        (
            Status::new(429).anthropic_reset(AnthropicLimit::InputTokens, now.plus(wait)),
            "anthropic-ratelimit-input-tokens-reset",
            "2026-01-01T00:00:02.500Z",
            wait,
        ),
    ];
    let mock = MockUpstream::start().await;
    for (status, header, text, expected) in cases {
        let response = Call::new(Dialect::OpenAi, "m").behavior(&status.into()).send(&mock).await;
        assert_eq!(response.headers()[header], text);
        assert_eq!(retry_after(response.headers(), now), Some(expected), "{header}: {text}");
    }
}

#[tokio::test]
async fn a_raw_body_or_message_replaces_the_realistic_one() {
    let mock = MockUpstream::start().await;
    mock.script(
        "m",
        [
            Status::new(502).body_text("<html>Bad Gateway</html>").into(),
            Status::new(400).body_json(json!({ "odd": true })).into(),
            Status::error(ErrorKind::ContentPolicy).message("flagged: violence").into(),
        ],
    );
    let call = Call::new(Dialect::Anthropic, "m");
    let response = call.send(&mock).await;
    assert_eq!(response.status(), 502);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert_eq!(response.text().await.unwrap(), "<html>Bad Gateway</html>");
    assert_eq!(call.json(&mock).await, (400, json!({ "odd": true })));
    let (_, body) = call.json(&mock).await;
    assert_eq!(body["error"]["message"], "flagged: violence");
}

#[tokio::test]
async fn a_header_that_is_not_http_is_a_loud_500() {
    let mock = MockUpstream::start().await;
    mock.enqueue("m", Status::new(429).header("retry after", "1"));
    let response = Call::new(Dialect::OpenAi, "m").send(&mock).await;
    assert_eq!(response.status(), 500);
    assert!(response.text().await.unwrap().contains("misscripted"));
}

#[tokio::test]
async fn a_scripted_subscription_limit_resets_seconds_after_the_answer_on_the_mocks_clock() {
    // A static script file says "the reset is 3 s after this answer"; the mock sends the
    // instant, by its clock, and records what it sent.
    let script = Script::from_toml(
        r#"
"sub" = [{ status = { code = 429, headers = { anthropic-ratelimit-unified-status = "rejected", anthropic-ratelimit-unified-reset = "{epoch+3}" } } }]
"#,
    )
    .unwrap();
    let clock = ManualClock::new(UnixMillis(1_767_225_600_000)); // 2026-01-01T00:00:00Z
    let mock = MockUpstream::builder().script(script).clock(clock.clone()).start().await.unwrap();
    clock.advance(Duration::from_millis(10_250));

    let response = Call::new(Dialect::Anthropic, "sub").send(&mock).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["anthropic-ratelimit-unified-status"], "rejected");
    assert_eq!(
        response.headers()["anthropic-ratelimit-unified-reset"],
        "1767225614",
        "10.25 s in, rounded up to 11, and 3 more"
    );
    let Behavior::Status(sent) = &mock.attempts()[0].behavior else {
        panic!("not a status: {:?}", mock.attempts()[0].behavior);
    };
    assert_eq!(sent.headers["anthropic-ratelimit-unified-reset"], "1767225614");
}
