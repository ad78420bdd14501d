//! Local OpenAI-compatible servers: Ollama's `/v1` endpoints and vLLM.
//!
//! Ollama's `/v1` wraps its native `{"error": "text"}` in OpenAI's envelope with only three
//! `type`s (`invalid_request_error` for 400, `not_found_error` for 404, `api_error` for the
//! rest) and a null `code` (`openai.NewError` in
//! <https://github.com/ollama/ollama/blob/main/openai/openai.go>, used by
//! `middleware/openai.go`); the status comes from `handleScheduleError` in
//! <https://github.com/ollama/ollama/blob/main/server/routes.go>.
//!
//! vLLM answers with `ErrorResponse` (`vllm/entrypoints/openai/engine/protocol.py`), built by
//! `OpenAIServing.create_error_response` (`engine/serving.py`): `{"error": {message, type,
//! param, code}}` with an exception-like name as `type` (`BadRequestError`, `NotFoundError`,
//! `InternalServerError`) and the status as a numeric `code`; releases before the envelope sent
//! the same fields flat, with `"object": "error"`.

use serde_json::{Value, json};

use super::{Provider, Shape, answer};

const OLLAMA_ROUTES: &str = "https://github.com/ollama/ollama/blob/main/server/routes.go";
const OLLAMA_SCHED: &str = "https://github.com/ollama/ollama/blob/main/server/sched.go";
const VLLM_PROTOCOL: &str =
    "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/engine/protocol.py";
const VLLM_SERVING: &str =
    "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/engine/serving.py";

pub fn all() -> Vec<Shape> {
    vec![
        ollama_model_not_found(),
        ollama_load_failed(),
        ollama_busy(),
        vllm_context_length(),
        vllm_context_length_flat(),
        vllm_bad_request(),
        vllm_model_not_found(),
        vllm_internal_error(),
    ]
}

fn ollama(message: &str, kind: &str) -> Value {
    json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
}

/// 404 for a model that is not pulled: `model "llama9" not found, try pulling it first`.
pub fn ollama_model_not_found() -> Shape {
    Shape {
        name: "ollama/404-model-not-found",
        provider: Provider::Ollama,
        source: OLLAMA_ROUTES,
        streamed: false,
        behavior: answer(
            404,
            &[],
            ollama("model \"llama9\" not found, try pulling it first", "not_found_error"),
        ),
    }
}

/// 500 while the model loads: the runner did not come up (`llm/llama_server.go`), passed on by
/// `handleScheduleError`'s default arm.
pub fn ollama_load_failed() -> Shape {
    Shape {
        name: "ollama/500-while-loading",
        provider: Provider::Ollama,
        source: OLLAMA_ROUTES,
        streamed: false,
        behavior: answer(
            500,
            &[],
            ollama(
                "timed out waiting for llama-server to start: context deadline exceeded",
                "api_error",
            ),
        ),
    }
}

/// 503 when the queue is full: `ErrMaxQueue` ("server busy, please try again.  maximum pending
/// requests exceeded", two spaces and all).
pub fn ollama_busy() -> Shape {
    Shape {
        name: "ollama/503-server-busy",
        provider: Provider::Ollama,
        source: OLLAMA_SCHED,
        streamed: false,
        behavior: answer(
            503,
            &[],
            ollama(
                "server busy, please try again.  maximum pending requests exceeded",
                "api_error",
            ),
        ),
    }
}

/// 400 for a prompt longer than `--max-model-len`, as `OpenAIServing._validate_input` raises it
/// (`VLLMValidationError`, `param: "input_tokens"`).
pub fn vllm_context_length() -> Shape {
    Shape {
        name: "vllm/400-context-length",
        provider: Provider::Vllm,
        source: VLLM_SERVING,
        streamed: false,
        behavior: answer(
            400,
            &[],
            json!({ "error": {
                "message": "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. Please reduce the length of the input messages.",
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }}),
        ),
    }
}

/// The same refusal in the flat shape of releases before the envelope:
/// `{"object": "error", "message", "type": "BadRequestError", "param", "code": 400}`.
pub fn vllm_context_length_flat() -> Shape {
    Shape {
        name: "vllm/400-context-length-flat",
        provider: Provider::Vllm,
        source: VLLM_PROTOCOL,
        streamed: false,
        behavior: answer(
            400,
            &[],
            json!({
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": null,
                "code": 400,
            }),
        ),
    }
}

/// 400 for an invalid sampling parameter: `create_error_response`'s default, a
/// `BadRequestError` naming the parameter.
pub fn vllm_bad_request() -> Shape {
    Shape {
        name: "vllm/400-bad-request",
        provider: Provider::Vllm,
        source: VLLM_SERVING,
        streamed: false,
        behavior: answer(
            400,
            &[],
            json!({ "error": {
                "message": "temperature must be non-negative, got -1.0.",
                "type": "BadRequestError",
                "param": "temperature",
                "code": 400,
            }}),
        ),
    }
}

/// 404 for a model the server does not serve (`_check_model`: `NotFoundError`, `param:
/// "model"`).
pub fn vllm_model_not_found() -> Shape {
    Shape {
        name: "vllm/404-model-not-found",
        provider: Provider::Vllm,
        source: VLLM_SERVING,
        streamed: false,
        behavior: answer(
            404,
            &[],
            json!({ "error": {
                "message": "The model `llama-3-8b` does not exist.",
                "type": "NotFoundError",
                "param": "model",
                "code": 404,
            }}),
        ),
    }
}

/// 500 when generation fails inside the engine (`GenerationError`: `InternalServerError`,
/// "Internal server error").
pub fn vllm_internal_error() -> Shape {
    Shape {
        name: "vllm/500-internal-server-error",
        provider: Provider::Vllm,
        source: VLLM_SERVING,
        streamed: false,
        behavior: answer(
            500,
            &[],
            json!({ "error": {
                "message": "Internal server error",
                "type": "InternalServerError",
                "param": null,
                "code": 500,
            }}),
        ),
    }
}
