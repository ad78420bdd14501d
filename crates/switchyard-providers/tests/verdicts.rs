//! Real providers' documented error shapes, through each adapter's `error_report` and then the
//! one classifier: what the routing layers get to see (RESILIENCE.md §2). The adapters' own unit
//! tests check the hints; these check that the hints land on the right row of the table.
//!
//! Sources: Anthropic <https://docs.anthropic.com/en/api/errors>, OpenAI
//! <https://platform.openai.com/docs/guides/error-codes>, Gemini
//! <https://ai.google.dev/gemini-api/docs/troubleshooting>, OpenRouter
//! <https://openrouter.ai/docs/api-reference/errors>.

use std::time::Duration;

use http::HeaderMap;
use switchyard_core::UnixMillis;
use switchyard_core::outcome::{
    ClassifyPolicy, Fallback, Outcome, OutcomeKind, Upstream, Verdict, classify,
};
use switchyard_providers::dialect::Dialect;

const NOW: UnixMillis = UnixMillis(1_795_976_400_000);

fn verdict(dialect: Dialect, status: u16, body: &str) -> Verdict {
    let headers = HeaderMap::new();
    let report = dialect.error_report(body.as_bytes());
    let upstream = Upstream::Response { status, headers: &headers, body: report.hint };
    classify(&Outcome::new(upstream), &ClassifyPolicy::default(), NOW)
}

fn kind(dialect: Dialect, status: u16, body: &str) -> OutcomeKind {
    verdict(dialect, status, body).kind
}

#[test]
fn each_providers_context_length_error_is_request_too_large() {
    let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210345 tokens > 200000 maximum"}}"#;
    let gemini = r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#;
    for (dialect, body) in
        [(Dialect::OpenAi, openai), (Dialect::Anthropic, anthropic), (Dialect::Gemini, gemini)]
    {
        let v = verdict(dialect, 400, body);
        assert_eq!(v.kind, OutcomeKind::RequestTooLarge, "{dialect}");
        assert_eq!(v.fallback, Fallback::LargerContextOnly, "{dialect}");
        assert!(v.charges.provider.is_none() && v.charges.credential.is_none(), "{dialect}");
        assert!(!v.charges.model, "{dialect}");
    }
}

#[test]
fn each_providers_documented_quota_shape_is_quota_exhausted() {
    let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#;
    assert_eq!(kind(Dialect::Anthropic, 400, anthropic), OutcomeKind::QuotaExhausted);
    let openai = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    assert_eq!(kind(Dialect::OpenAi, 429, openai), OutcomeKind::QuotaExhausted);
    let gemini = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}"#;
    assert_eq!(kind(Dialect::Gemini, 429, gemini), OutcomeKind::QuotaExhausted);
    let openrouter = r#"{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits"}}"#;
    assert_eq!(kind(Dialect::OpenAi, 402, openrouter), OutcomeKind::QuotaExhausted);
}

#[test]
fn a_400_naming_billing_id_is_a_client_error_not_a_quota_problem() {
    let body = r#"{"error":{"message":"Unrecognized request argument supplied: billing_id","type":"invalid_request_error","param":null,"code":null}}"#;
    let v = verdict(Dialect::OpenAi, 400, body);
    assert_eq!(v.kind, OutcomeKind::ClientError);
    assert!(v.charges.credential.is_none());
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"metadata.billing_id: Extra inputs are not permitted"}}"#;
    assert_eq!(verdict(Dialect::Anthropic, 400, body), {
        let mut expected = verdict(Dialect::Anthropic, 400, "{}");
        expected.kind = OutcomeKind::ClientError;
        expected
    });
}

#[test]
fn a_beta_the_client_sent_benches_nothing_and_goes_to_another_provider_only() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Unexpected value(s) `foo-2025-01-01` for the `anthropic-beta` header. Please consult our documentation at docs.anthropic.com or try again without the header."}}"#;
    let v = verdict(Dialect::Anthropic, 400, body);
    assert_eq!(v.kind, OutcomeKind::ClientError);
    assert_eq!(v.fallback, Fallback::OtherProviderOnly);
    assert_eq!(v.charges, switchyard_core::outcome::Charges::NOTHING);
}

#[test]
fn a_plain_403_forbids_the_model_and_a_moderation_403_is_a_policy_refusal() {
    let anthropic = r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}"#;
    let v = verdict(Dialect::Anthropic, 403, anthropic);
    assert_eq!(v.kind, OutcomeKind::ModelForbidden);
    assert!(v.charges.model && v.charges.credential.is_none());
    let openrouter = r#"{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["violence"],"flagged_input":"...","provider_name":"OpenAI","model_slug":"openai/gpt-4o"}}}"#;
    let v = verdict(Dialect::OpenAi, 403, openrouter);
    assert_eq!(v.kind, OutcomeKind::Policy);
    assert_eq!(v.charges, switchyard_core::outcome::Charges::NOTHING);
    let leaked = r#"{"error":{"code":403,"message":"Your API key was reported as leaked. Please use another API key.","status":"PERMISSION_DENIED"}}"#;
    assert_eq!(kind(Dialect::Gemini, 403, leaked), OutcomeKind::Auth);
}

#[test]
fn geminis_retry_delay_is_honoured_like_retry_after() {
    let body = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#;
    let v = verdict(Dialect::Gemini, 429, body);
    assert_eq!(v.kind, OutcomeKind::RateLimit);
    assert_eq!(v.retry_after, Some(Duration::from_secs(37)));
}
