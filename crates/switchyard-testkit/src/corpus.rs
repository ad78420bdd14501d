//! A corpus of real providers' failure shapes: each [`Shape`] is one documented way
//! an upstream fails (its status, headers and body, or a 200 stream with events and then an
//! error, keep-alives only, or a cut), as the provider's API reference or official SDK shows
//! it, and the mock [`Behavior`] that reproduces it byte for byte.
//!
//! The corpus states what upstreams *do*; what Switchyard must make of each shape (the verdict,
//! the layer charged, what the client sees) is stated by the end-to-end test that replays it
//! (`tests/tests/corpus.rs`) and by the table in `docs/resilience.md`.
//!
//! Invariants: every shape names its source (a URL of the provider's reference, or an SDK or
//! server source file), shape names are unique, and a shape reads no clock: the few headers
//! that carry an instant (`anthropic-ratelimit-*-reset`) take it from the caller.

pub mod anthropic;
pub mod gemini;
pub mod local;
pub mod openai;
pub mod openrouter;

use serde_json::Value;
use switchyard_core::UnixMillis;

use crate::behavior::{Behavior, Status};
use crate::dialect::Dialect;

/// Who sends a shape. OpenRouter, Ollama and vLLM speak the OpenAI dialect with their own
/// bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    Anthropic,
    OpenAi,
    Gemini,
    OpenRouter,
    /// Ollama's OpenAI-compatible `/v1` endpoints.
    Ollama,
    /// vLLM's OpenAI-compatible server.
    Vllm,
}

impl Provider {
    /// The wire format the provider's shapes are written in.
    pub fn dialect(self) -> Dialect {
        match self {
            Self::Anthropic => Dialect::Anthropic,
            Self::Gemini => Dialect::Gemini,
            Self::OpenAi | Self::OpenRouter | Self::Ollama | Self::Vllm => Dialect::OpenAi,
        }
    }
}

/// One documented failure shape.
#[derive(Clone, Debug)]
pub struct Shape {
    /// `provider/what`, unique in the corpus: what a failing test names.
    pub name: &'static str,
    pub provider: Provider,
    /// Where the shape is documented: the API reference page or the SDK / server source file.
    pub source: &'static str,
    /// The shape happens inside a 200 stream, so it is only seen by a streamed request.
    pub streamed: bool,
    /// What the mock does for one attempt.
    pub behavior: Behavior,
}

/// Every shape of the corpus. `now` dates the headers that carry an instant.
pub fn all(now: UnixMillis) -> Vec<Shape> {
    let mut shapes = Vec::new();
    shapes.extend(anthropic::all(now));
    shapes.extend(openai::all());
    shapes.extend(gemini::all());
    shapes.extend(openrouter::all());
    shapes.extend(local::all());
    shapes
}

/// An error answer: this status, these headers, exactly this JSON body.
fn answer(code: u16, headers: &[(&str, &str)], body: Value) -> Behavior {
    headers
        .iter()
        .fold(Status::new(code), |status, (name, value)| status.header(*name, *value))
        .body_json(body)
        .into()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_shape_has_a_unique_name_of_its_provider_and_a_source() {
        let shapes = all(UnixMillis(1_800_000_000_000));
        let mut names = HashSet::new();
        for shape in &shapes {
            assert!(names.insert(shape.name), "{} appears twice", shape.name);
            let prefix = match shape.provider {
                Provider::Anthropic => "anthropic/",
                Provider::OpenAi => "openai/",
                Provider::Gemini => "gemini/",
                Provider::OpenRouter => "openrouter/",
                Provider::Ollama => "ollama/",
                Provider::Vllm => "vllm/",
            };
            assert!(shape.name.starts_with(prefix), "{}", shape.name);
            assert!(shape.source.starts_with("https://"), "{}: {}", shape.name, shape.source);
        }
    }

    #[test]
    fn a_shape_inside_a_stream_is_a_reply_and_an_error_answer_is_a_status() {
        for shape in all(UnixMillis(1_800_000_000_000)) {
            let is_reply = matches!(shape.behavior, Behavior::Reply(_));
            assert_eq!(is_reply, shape.streamed, "{}", shape.name);
        }
    }
}
