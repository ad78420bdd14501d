//! OpenRouter failures: `{"error": {code, message, metadata?}}` with a *numeric* `code` equal to
//! the HTTP status (<https://openrouter.ai/docs/api-reference/errors>); errors after the model
//! started come inside the 200 stream as a data event, and the stream is kept open with SSE
//! comments (<https://openrouter.ai/docs/api-reference/streaming>).

use std::time::Duration;

use serde_json::json;

use super::{Provider, Shape, answer};
use crate::behavior::{Fault, Reply};

const ERRORS: &str = "https://openrouter.ai/docs/api-reference/errors";
const STREAMING: &str = "https://openrouter.ai/docs/api-reference/streaming";

/// OpenRouter's keep-alive comment, byte for byte.
pub const PROCESSING: &str = ": OPENROUTER PROCESSING\n\n";

pub fn all() -> Vec<Shape> {
    vec![
        error_chunk_in_stream(),
        rate_limit_chunk_in_stream(),
        processing_comments_only(),
        insufficient_credits(),
        moderation(),
    ]
}

/// After the role chunk, the documented mid-stream error: the error beside a choice whose
/// `finish_reason` is `"error"`, then the end of the body ("Handling errors during
/// streaming").
pub fn error_chunk_in_stream() -> Shape {
    Shape {
        name: "openrouter/stream-error-chunk",
        provider: Provider::OpenRouter,
        source: STREAMING,
        streamed: true,
        behavior: Reply::default()
            .fault(Fault::ErrorAfter(1))
            .error_event(
                "data: {\"id\":\"cmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"openai/gpt-4o\",\"provider\":\"openai\",\"error\":{\"code\":\"server_error\",\"message\":\"Provider disconnected unexpectedly\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n",
            )
            .into(),
    }
}

/// The same chunk carrying the error as the error reference shapes it: `code` is the number
/// of the HTTP status it stands for, here 429 (the upstream provider rate-limited the
/// request), with `metadata.provider_name`.
pub fn rate_limit_chunk_in_stream() -> Shape {
    Shape {
        name: "openrouter/stream-error-chunk-429",
        provider: Provider::OpenRouter,
        source: ERRORS,
        streamed: true,
        behavior: Reply::default()
            .fault(Fault::ErrorAfter(1))
            .error_event(
                "data: {\"id\":\"gen-1700000000-abc\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"google/gemini-2.5-pro\",\"provider\":\"Google\",\"error\":{\"code\":429,\"message\":\"Provider returned error\",\"metadata\":{\"raw\":\"google/gemini-2.5-pro is temporarily rate-limited upstream. Please retry shortly.\",\"provider_name\":\"Google\"}},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n",
            )
            .into(),
    }
}

/// Headers, then `: OPENROUTER PROCESSING` comments while the model warms up, and no content
/// for 30 s: comments "can be safely ignored per the SSE specs".
pub fn processing_comments_only() -> Shape {
    Shape {
        name: "openrouter/stream-processing-comments-only",
        provider: Provider::OpenRouter,
        source: STREAMING,
        streamed: true,
        behavior: Reply::default()
            .first_event_after(Duration::from_secs(30))
            .keep_alive_every(Duration::from_millis(100))
            .keep_alive_event(PROCESSING)
            .into(),
    }
}

/// 402: "Your account or API key has insufficient credits. Add more credits and retry the
/// request."
pub fn insufficient_credits() -> Shape {
    Shape {
        name: "openrouter/402-insufficient-credits",
        provider: Provider::OpenRouter,
        source: ERRORS,
        streamed: false,
        behavior: answer(
            402,
            &[],
            json!({ "error": {
                "code": 402,
                "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits",
            }}),
        ),
    }
}

/// 403: "Your chosen model requires moderation and your input was flagged", with the
/// moderation metadata (`reasons`, `flagged_input`, `provider_name`, `model_slug`).
pub fn moderation() -> Shape {
    Shape {
        name: "openrouter/403-moderation",
        provider: Provider::OpenRouter,
        source: ERRORS,
        streamed: false,
        behavior: answer(
            403,
            &[],
            json!({ "error": {
                "code": 403,
                "message": "openai/gpt-4o requires moderation on OpenAI. Your input was flagged for \"harassment\". No credits were charged.",
                "metadata": {
                    "reasons": ["harassment"],
                    "flagged_input": "…",
                    "provider_name": "OpenAI",
                    "model_slug": "openai/gpt-4o",
                },
            }}),
        ),
    }
}
