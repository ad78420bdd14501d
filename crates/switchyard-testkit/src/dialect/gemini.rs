//! Gemini `generateContent`: `candidates[0].content.parts` with `text` and `functionCall`
//! parts, `finishReason` and `usageMetadata`, and Google RPC errors
//! (`{"error": {code, message, status, details}}`).
//!
//! Stream shape (`:streamGenerateContent?alt=sse`): each chunk is a complete
//! `GenerateContentResponse` in a `data:` line ended by CRLF pairs, as the real API sends it.
//! Text pieces come one per chunk, a function call arrives whole in its own chunk, and the last
//! chunk carries the finish reason and usage. There is no terminator: the finish reason is the
//! only sign of a complete stream. The RPC `status` string follows the HTTP code.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Failure, Turn, Wire, last_role, last_with_role, pieces, sse};
use crate::behavior::{ErrorKind, Finish};

#[derive(Debug)]
pub(super) struct Gemini;

impl Wire for Gemini {
    fn document(&self, turn: &Turn<'_>) -> Value {
        let reply = turn.reply;
        let mut parts = Vec::new();
        if !reply.text.is_empty() {
            parts.push(json!({ "text": reply.text }));
        }
        if let Some(call) = &reply.tool_call {
            parts.push(function_call(&call.name, &call.object_arguments()));
        }
        let mut candidate = json!({ "content": { "parts": parts, "role": "model" }, "index": 0 });
        if let Some(finish) = turn.finish {
            candidate["finishReason"] = finish_reason(finish).into();
        }
        response(turn, &candidate, Some(usage(turn)))
    }

    fn events(&self, turn: &Turn<'_>) -> Vec<Bytes> {
        let reply = turn.reply;
        let chunk = |parts: Value, finish: Option<Finish>| {
            let mut candidate =
                json!({ "content": { "parts": parts, "role": "model" }, "index": 0 });
            if let Some(finish) = finish {
                candidate["finishReason"] = finish_reason(finish).into();
            }
            sse::data_crlf(&response(turn, &candidate, finish.map(|_| usage(turn))))
        };
        let mut events: Vec<Bytes> = pieces(&reply.text, reply.chunks)
            .into_iter()
            .map(|piece| chunk(json!([{ "text": piece }]), None))
            .collect();
        if let Some(call) = &reply.tool_call {
            events.push(chunk(json!([function_call(&call.name, &call.object_arguments())]), None));
        }
        if let Some(finish) = turn.finish {
            events.push(chunk(json!([{ "text": "" }]), Some(finish)));
        }
        events
    }

    fn terminator(&self) -> Option<Bytes> {
        None
    }

    fn keep_alive(&self) -> Bytes {
        sse::comment("keep-alive")
    }

    fn malformed(&self) -> Bytes {
        Bytes::from_static(
            b"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\r\n\r\n",
        )
    }

    /// Gemini reports an overload inside a stream as a bare error object.
    fn stream_error(&self) -> Bytes {
        Bytes::from_static(
            b"data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded. Please try again later.\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n",
        )
    }

    fn ends_with_assistant(&self, request: &Value) -> bool {
        last_role(request.get("contents"), "role") == Some("model")
    }

    fn last_user_text(&self, request: &Value) -> String {
        last_with_role(request.get("contents"), "role", "user")
            .and_then(|content| content["parts"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `functionResponse` parts of the last content, each `response` as compact JSON.
    fn last_tool_results(&self, request: &Value) -> Vec<String> {
        let last = request.get("contents").and_then(Value::as_array).and_then(|c| c.last());
        last.and_then(|content| content["parts"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|part| part.get("functionResponse"))
            .map(|call| call.get("response").unwrap_or(&Value::Null).to_string())
            .collect()
    }

    fn code_for(&self, kind: ErrorKind) -> u16 {
        match kind {
            ErrorKind::BadRequest
            | ErrorKind::Unauthorized
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::ContentPolicy
            | ErrorKind::PrefillRejected => 400,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::ModelNotFound => 404,
            ErrorKind::RateLimited | ErrorKind::InsufficientQuota => 429,
            ErrorKind::ServerError => 500,
            ErrorKind::Overloaded => 503,
        }
    }

    fn error(&self, failure: &Failure<'_>) -> Value {
        let model = failure.model;
        let mut details = Vec::new();
        let message = match failure.kind {
            ErrorKind::BadRequest => "Request contains an invalid argument.".to_owned(),
            ErrorKind::Unauthorized => {
                details.push(json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": { "service": "generativelanguage.googleapis.com" },
                }));
                "API key not valid. Please pass a valid API key.".to_owned()
            }
            ErrorKind::PermissionDenied => {
                "Permission denied: Consumer 'api_key:mock' has been suspended.".to_owned()
            }
            ErrorKind::ModelNotFound => format!(
                "models/{model} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."
            ),
            ErrorKind::RateLimited => {
                details.push(json!({
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        "quotaDimensions": { "model": model, "location": "global" },
                        "quotaValue": "10",
                    }],
                }));
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.".to_owned()
            }
            ErrorKind::InsufficientQuota => "You exceeded your current quota, please check your plan and billing details. Your prepayment credits are depleted.".to_owned(),
            ErrorKind::ContextLengthExceeded => "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).".to_owned(),
            ErrorKind::ContentPolicy => "The request was blocked because it violates the content policy (SAFETY).".to_owned(),
            ErrorKind::PrefillRejected => "Please ensure that multiturn requests end with a user role or a function response.".to_owned(),
            ErrorKind::ServerError => "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting".to_owned(),
            ErrorKind::Overloaded => "The model is overloaded. Please try again later.".to_owned(),
        };
        let mut error = json!({
            "code": failure.code,
            "message": failure.message.map_or(message, str::to_owned),
            "status": rpc_status(failure.code),
        });
        if !details.is_empty() {
            error["details"] = details.into();
        }
        json!({ "error": error })
    }

    /// An embedding model is listed as Gemini lists `gemini-embedding-001`: its own methods and
    /// token limits.
    fn models(&self, names: &[String], embedding: &dyn Fn(&str) -> bool) -> Value {
        let models: Vec<Value> = names
            .iter()
            .map(|name| {
                let (input, output, methods) = if embedding(name) {
                    (2048, 1, json!(["embedContent", "batchEmbedContents"]))
                } else {
                    (
                        1_048_576,
                        65_536,
                        json!(["generateContent", "streamGenerateContent", "countTokens"]),
                    )
                };
                json!({
                    "name": format!("models/{name}"),
                    "version": "001",
                    "displayName": name,
                    "inputTokenLimit": input,
                    "outputTokenLimit": output,
                    "supportedGenerationMethods": methods,
                })
            })
            .collect();
        json!({ "models": models })
    }
}

fn response(turn: &Turn<'_>, candidate: &Value, usage: Option<Value>) -> Value {
    let mut response = json!({
        "candidates": [candidate],
        "modelVersion": turn.model,
        "responseId": format!("mock-{}", turn.seq),
    });
    if let Some(usage) = usage {
        response["usageMetadata"] = usage;
    }
    response
}

fn function_call(name: &str, arguments: &Value) -> Value {
    json!({ "functionCall": { "name": name, "args": arguments } })
}

fn finish_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop | Finish::ToolUse => "STOP",
        Finish::Length => "MAX_TOKENS",
        Finish::ContentFilter => "SAFETY",
    }
}

fn usage(turn: &Turn<'_>) -> Value {
    let usage = turn.usage;
    let mut metadata = json!({
        "promptTokenCount": usage.prompt(),
        "candidatesTokenCount": usage.output.saturating_sub(usage.reasoning),
        "totalTokenCount": usage.total(),
    });
    // Gemini leaves out the counts that are zero.
    if usage.cache_read > 0 {
        metadata["cachedContentTokenCount"] = usage.cache_read.into();
    }
    if usage.reasoning > 0 {
        metadata["thoughtsTokenCount"] = usage.reasoning.into();
    }
    metadata
}

/// The `google.rpc.Code` name Google's HTTP mapping gives each status.
fn rpc_status(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ if code < 500 => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    }
}
