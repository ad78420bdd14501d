//! Upstream provider dialects: the canonical chat model, translation between the client
//! dialects (OpenAI Chat, Anthropic, OpenAI Responses) and the upstream dialects
//! (OpenAI-compatible, Anthropic, Gemini, OpenAI Responses), SSE framing, and each dialect's reading of error bodies into the
//! [`BodyHint`](switchyard_core::outcome::BodyHint) the classifier takes.
//!
//! Everything here is pure (bytes in, bytes out) except [`executor`]: the one pooled HTTP
//! client, which sends what the dialects encode and reports failures as the classifier's
//! transport faults and timeouts. [`oauth`]'s token-endpoint calls go through it too.

pub mod anthropic;
pub mod chat;
pub mod continuation;
pub mod dialect;
pub mod embeddings;
pub mod error;
pub mod executor;
pub mod gemini;
mod json;
pub mod models;
pub mod oauth;
pub mod openai;
pub mod passthrough;
pub mod responses;
mod skim;
pub mod sse;
pub mod stream;
