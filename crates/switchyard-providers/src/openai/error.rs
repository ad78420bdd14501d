//! OpenAI error bodies: written for clients, read from upstreams.

use serde::Serialize;
use serde_json::Value;
use switchyard_core::outcome::BodyHint;

use crate::error::{ErrorKind, UpstreamError};

#[derive(Serialize)]
struct BodyOut<'r> {
    error: ErrorOut<'r>,
}

#[derive(Serialize)]
pub(super) struct ErrorOut<'r> {
    message: &'r str,
    #[serde(rename = "type")]
    kind: &'static str,
    param: Option<()>,
    code: Option<&'static str>,
}

impl<'r> ErrorOut<'r> {
    /// OpenAI's own `type` and `code` for each kind, so SDKs raise the matching exception.
    pub(super) fn new(kind: ErrorKind, message: &'r str) -> Self {
        let (kind, code) = match kind {
            ErrorKind::InvalidRequest => ("invalid_request_error", None),
            ErrorKind::ContextLengthExceeded => {
                ("invalid_request_error", Some("context_length_exceeded"))
            }
            ErrorKind::ContentPolicy => ("invalid_request_error", Some("content_policy_violation")),
            ErrorKind::Authentication => ("invalid_request_error", Some("invalid_api_key")),
            ErrorKind::PermissionDenied => ("invalid_request_error", Some("permission_denied")),
            ErrorKind::ModelNotFound => ("invalid_request_error", Some("model_not_found")),
            ErrorKind::RequestTooLarge => ("invalid_request_error", Some("request_too_large")),
            ErrorKind::RateLimited => ("rate_limit_error", Some("rate_limit_exceeded")),
            ErrorKind::QuotaExhausted => ("insufficient_quota", Some("insufficient_quota")),
            ErrorKind::Overloaded => ("server_error", Some("overloaded")),
            ErrorKind::Timeout => ("server_error", Some("timeout")),
            ErrorKind::Internal => ("server_error", None),
        };
        Self { message, kind, param: None, code }
    }
}

/// `{"error": {"message", "type", "param", "code"}}`.
pub fn error_body(kind: ErrorKind, message: &str) -> Vec<u8> {
    serde_json::to_vec(&BodyOut { error: ErrorOut::new(kind, message) })
        .expect("serialising to memory cannot fail")
}

/// Reads an OpenAI-style error body (`{"error": {"message", "type", "param", "code"}}`, and the
/// compatible servers' variants: OpenRouter's numeric `code` with `metadata`, `{"error": "text"}`,
/// `FastAPI`'s `{"detail": ...}`).
///
/// OpenAI's `code`/`type` decide when they are known, even when they say "nothing special": a
/// `rate_limit_exceeded` message mentions billing pages, and reading it as text would turn a
/// short rate limit into an hour-long quota cooldown. Without a known code only the phrases the
/// servers document count (see [`message_hint`]); no other word in a message does.
pub fn error_report(body: &[u8]) -> UpstreamError {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return UpstreamError::unparsed(&text);
    };
    let error = value.get("error").unwrap_or(&value);
    let message = error
        .get("message")
        .or_else(|| error.get("detail"))
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map_or_else(|| text.trim().to_owned(), str::to_owned);
    let code = error.get("code").and_then(Value::as_str);
    let kind = error.get("type").and_then(Value::as_str);
    let hint = code
        .and_then(known)
        .or_else(|| kind.and_then(known))
        .or_else(|| usage_limit(error))
        .or_else(|| moderated(error))
        .unwrap_or_else(|| message_hint(&message.to_ascii_lowercase()));
    // OpenRouter's `code` is the number of the HTTP status the error stands for; inside a 200
    // stream it is the only thing that says what went wrong (`stream::error_status` reads it).
    // A name (`code` or `type`) says more, so a number counts only without one.
    let number = || error.get("code").and_then(Value::as_u64).map(|n| n.to_string());
    UpstreamError { hint, code: code.or(kind).map(str::to_owned).or_else(number), message }
}

/// OpenAI's documented error codes and types
/// (<https://platform.openai.com/docs/guides/error-codes>), and those of compatible servers
/// that name them the same way.
fn known(name: &str) -> Option<BodyHint> {
    Some(match name {
        "insufficient_quota" | "billing_hard_limit_reached" | "billing_not_active" => {
            BodyHint::InsufficientQuota
        }
        // llama.cpp's server answers an overlong prompt with type `exceed_context_size_error`.
        "context_length_exceeded" | "string_above_max_length" | "exceed_context_size_error" => {
            BodyHint::ContextLengthExceeded
        }
        "content_filter" | "content_policy_violation" => BodyHint::ContentPolicy,
        "model_not_found" => BodyHint::ModelNotFound,
        // A parameter or value the client sent that this model or server does not take
        // ("Unsupported parameter: 'max_tokens' is not supported with this model. Use
        // 'max_completion_tokens' instead.").
        "unsupported_parameter" | "unsupported_value" | "unknown_parameter" => {
            BodyHint::UnsupportedFeature
        }
        "unsupported_country_region_territory" => BodyHint::NotPermitted,
        "invalid_api_key" | "account_deactivated" => BodyHint::InvalidCredential,
        // Reasoning or compacted history encrypted for another organisation (a session that
        // moved between accounts): "The encrypted content gAAA… could not be verified."
        "invalid_encrypted_content" => BodyHint::StaleReasoning,
        "rate_limit_exceeded" => BodyHint::None,
        _ => return None,
    })
}

/// Codex's backend (a `ChatGPT` plan) answers a spent five-hour or weekly window with a 429 of
/// type `usage_limit_reached`, saying when it refills as `resets_in_seconds` or, in later
/// versions, `resets_at` (Unix seconds): a subscription's limit, not a rate limit.
fn usage_limit(error: &Value) -> Option<BodyHint> {
    let named =
        |field: &str| error.get(field).and_then(Value::as_str) == Some("usage_limit_reached");
    if !(named("type") || named("code")) {
        return None;
    }
    let seconds = |field: &str| error.get(field).and_then(Value::as_u64);
    Some(BodyHint::SubscriptionLimit {
        resets_in: seconds("resets_in_seconds").map(std::time::Duration::from_secs),
        resets_at: seconds("resets_at")
            .map(|at| switchyard_core::UnixMillis(at.saturating_mul(1000))),
    })
}

/// OpenRouter refuses input its moderation flagged with a 403 whose `error.metadata` names the
/// `reasons` and the `flagged_input` (<https://openrouter.ai/docs/api-reference/errors>): a
/// policy refusal, not a forbidden model.
fn moderated(error: &Value) -> Option<BodyHint> {
    let metadata = error.get("metadata")?;
    (metadata.get("flagged_input").is_some() || metadata.get("reasons").is_some())
        .then_some(BodyHint::ContentPolicy)
}

/// The phrases OpenAI-compatible servers document for errors that carry no known code.
fn message_hint(lower: &str) -> BodyHint {
    let says = |phrases: &[&str]| phrases.iter().any(|p| lower.contains(p));
    // OpenAI's older shape, vLLM, DeepSeek and OpenRouter: "This model's maximum context length
    // is 4096 tokens. However, you requested 5000 tokens ...".
    if says(&["maximum context length"]) {
        BodyHint::ContextLengthExceeded
    // Ollama: `model "llama9" not found, try pulling it first`.
    } else if lower.contains("model") && lower.contains("not found") {
        BodyHint::ModelNotFound
    // OpenAI's older shape for a parameter it does not know: "Unrecognized request argument
    // supplied: billing_id". The client's doing; another provider may accept it.
    } else if says(&["unrecognized request argument", "unknown parameter"]) {
        BodyHint::UnsupportedFeature
    // `invalid_encrypted_content` as some gateways relay it, `code: null`: "The encrypted
    // content for item rs_… could not be verified. Reason: Encrypted content could not be
    // decrypted or parsed."
    } else if lower.contains("encrypted content")
        && says(&["could not be verified", "could not be decrypted"])
    {
        BodyHint::StaleReasoning
    } else {
        BodyHint::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(body: &str) -> BodyHint {
        error_report(body.as_bytes()).hint
    }

    #[test]
    fn encrypted_content_another_organisation_wrote_is_stale_reasoning() {
        let stale = r#"{"error":{"message":"The encrypted content gAAA...DQ== could not be verified.","type":"invalid_request_error","param":null,"code":"invalid_encrypted_content"}}"#;
        assert_eq!(hint(stale), BodyHint::StaleReasoning);
        let unnamed = r#"{"error":{"message":"The encrypted content for item rs_0a18 could not be verified. Reason: Encrypted content could not be decrypted or parsed.","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(hint(unnamed), BodyHint::StaleReasoning, "the message alone says it");
    }

    #[test]
    fn codexs_usage_limit_is_a_subscriptions_limit_with_its_reset() {
        let limit = r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_in_seconds":18000}}"#;
        let in_five_hours = Some(std::time::Duration::from_secs(18_000));
        assert_eq!(
            hint(limit),
            BodyHint::SubscriptionLimit { resets_in: in_five_hours, resets_at: None }
        );
        let at = r#"{"error":{"type":"usage_limit_reached","message":"m","resets_at":1800000000}}"#;
        let resets_at = Some(switchyard_core::UnixMillis(1_800_000_000_000));
        assert_eq!(hint(at), BodyHint::SubscriptionLimit { resets_in: None, resets_at });
        let plain = r#"{"error":{"type":"rate_limit_exceeded","message":"slow down","resets_in_seconds":5}}"#;
        assert_eq!(hint(plain), BodyHint::None, "only the named limit is a subscription's");
    }

    #[test]
    fn openai_error_codes_decide_the_hint() {
        let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        assert_eq!(hint(quota), BodyHint::InsufficientQuota);
        let context = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(hint(context), BodyHint::ContextLengthExceeded);
        let policy = r#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}"#;
        assert_eq!(hint(policy), BodyHint::ContentPolicy);
        let model = r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert_eq!(hint(model), BodyHint::ModelNotFound);
    }

    #[test]
    fn a_rate_limit_that_mentions_billing_is_not_a_quota_problem() {
        let body = r#"{"error":{"message":"Rate limit reached for gpt-4o. Visit https://platform.openai.com/account/rate-limits; see billing settings to raise it.","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert_eq!(hint(body), BodyHint::None);
    }

    #[test]
    fn unknown_shapes_are_read_only_for_documented_phrases() {
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","type":"BadRequestError","code":400}"#;
        assert_eq!(hint(vllm), BodyHint::ContextLengthExceeded);
        let llama_cpp = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(hint(llama_cpp), BodyHint::ContextLengthExceeded);
        assert_eq!(
            hint(r#"{"error":"model 'llama9' not found, try pulling it first"}"#),
            BodyHint::ModelNotFound
        );
        // A word is not a shape: plain text and unknown messages decide nothing.
        assert_eq!(hint("upstream says: insufficient quota"), BodyHint::None);
        assert_eq!(hint(r#"{"detail":"billing service unavailable"}"#), BodyHint::None);
        let report = error_report(br#"{"error":{"message":"boom","code":500}}"#);
        assert_eq!(
            (report.hint, report.code.as_deref(), report.message.as_str()),
            (BodyHint::None, Some("500"), "boom")
        );
    }

    #[test]
    fn a_billing_id_parameter_is_the_clients_doing_not_a_billing_problem() {
        let legacy = r#"{"error":{"message":"Unrecognized request argument supplied: billing_id","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(hint(legacy), BodyHint::UnsupportedFeature);
        let invalid = r#"{"error":{"message":"Invalid type for 'billing_id': expected a string, but got an integer instead.","type":"invalid_request_error","param":"billing_id","code":"invalid_type"}}"#;
        assert_eq!(hint(invalid), BodyHint::None);
    }

    #[test]
    fn a_parameter_the_model_does_not_support_is_an_unsupported_feature() {
        let body = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        assert_eq!(hint(body), BodyHint::UnsupportedFeature);
    }

    #[test]
    fn openrouter_moderation_is_a_policy_refusal_and_its_402_needs_no_hint() {
        let flagged = r#"{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["harassment"],"flagged_input":"...","provider_name":"OpenAI","model_slug":"openai/gpt-4o"}}}"#;
        assert_eq!(hint(flagged), BodyHint::ContentPolicy);
        let credits = r#"{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits"}}"#;
        assert_eq!(hint(credits), BodyHint::None, "the 402 status says it");
    }

    /// OpenRouter's errors carry the HTTP status they stand for as a *number* in `code`
    /// (<https://openrouter.ai/docs/api-reference/errors>), also when they arrive as a chunk
    /// inside a 200 stream: a 429 there is a rate limit, not an unknown error read as a 503
    /// (which charged the breaker and locked the model as if the provider were down).
    #[test]
    fn a_numeric_code_names_the_status_an_in_stream_error_stands_for() {
        let chunk = r#"{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"Google"}}}"#;
        let report = error_report(chunk.as_bytes());
        assert_eq!(report.code.as_deref(), Some("429"));
        assert_eq!(crate::stream::error_status(&report), 429);
        // A name, when there is one, still wins: vLLM's `type` beside its numeric `code`.
        let vllm = r#"{"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}"#;
        assert_eq!(error_report(vllm.as_bytes()).code.as_deref(), Some("InternalServerError"));
    }

    #[test]
    fn billing_codes_are_quota() {
        let body = r#"{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}"#;
        assert_eq!(hint(body), BodyHint::InsufficientQuota);
    }

    #[test]
    fn the_error_body_has_openais_shape() {
        let body: Value =
            serde_json::from_slice(&error_body(ErrorKind::RateLimited, "slow down")).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {"message": "slow down", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})
        );
    }
}
