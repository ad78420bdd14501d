//! Dev-only support for Switchyard's tests and benchmarks: the fault-injecting mock upstream and
//! the core's [`ManualClock`], re-exported so test code has one place to import test tools from.
//!
//! [`MockUpstream`] is a real HTTP server on 127.0.0.1 and a random port that speaks the OpenAI
//! (Chat Completions and Responses), Anthropic and Gemini dialects with their real wire formats,
//! and fails on command: per model, content [`Rule`]s answer the requests they match (a real
//! client's main turn, its tool results), then a queue of [`Behavior`]s is consumed one per attempt, then a default (a
//! normal reply). A single request can also carry its behaviour in the [`BEHAVIOR_HEADER`]
//! header. Every attempt is recorded ([`Attempt`], with the request's exact bytes) before it is
//! answered, and tests await attempts instead of sleeping; with a record directory, each
//! attempt is also written to a file, so tests outside the process can read them.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use switchyard_testkit::{Behavior, ErrorKind, MockUpstream, Status};
//!
//! let mock = MockUpstream::start().await;
//! mock.script("gpt-4o", [
//!     Status::new(429).retry_after(Duration::from_secs(1)).into(),
//!     Behavior::error(ErrorKind::InsufficientQuota),
//!     Behavior::cut_after(3),
//! ]);
//! // ... point the proxy at mock.base_url(), send requests ...
//! let attempts = mock.wait_for_attempts(3).await;
//! assert_eq!(attempts[0].api_key(), Some("sk-first"));
//! # }
//! ```
//!
//! It also serves embeddings, OpenAI's `POST /v1/embeddings` and Gemini's `:embedContent` and
//! `:batchEmbedContents`: each request is an attempt like a generation (recorded with
//! [`Endpoint::Embeddings`], consuming the model's queue, so `mock.enqueue(model,
//! Status::new(429))` answers the model's next embeddings request with a 429), and its vectors
//! are [`embedding`]`(model, text, dimensions)`, so a test can tell which model embedded a text.
//!
//! [`MockOAuth`] is the same kind of server playing an OAuth identity provider: PKCE logins
//! through a loopback redirect, token refreshes, scripted token-endpoint faults.
//!
//! Invariants: the mock never binds a fixed port in tests, never reads the system clock for
//! anything a test asserts on (ids and timestamps in answers are derived from the attempt's
//! sequence number or are constants; the one instant it computes, a status header's
//! `{epoch+N}`, reads the clock [`MockBuilder::clock`] gives it), and never outlives its
//! [`MockUpstream`] handle.

mod behavior;
pub mod corpus;
mod delivery;
mod dialect;
mod embedding;
pub mod latency;
pub mod model_server;
mod oauth;
mod record;
mod script;
mod server;

pub use switchyard_core::ManualClock;

pub use self::behavior::{
    AnthropicLimit, BEHAVIOR_HEADER, Behavior, ErrorKind, Fault, Finish, Flood, Reply, Status,
    Tokens, ToolCall,
};
pub use self::dialect::Dialect;
pub use self::embedding::{DEFAULT_DIMENSIONS, MAX_DIMENSIONS, embedding, embedding_base64};
pub use self::latency::LatencyProxy;
pub use self::model_server::{FakeModelServer, SilentPort};
pub use self::oauth::{
    AuthorizeRequest, MOCK_CLIENT_ID, MockOAuth, MockOAuthBuilder, TokenFault, TokenRequest,
};
pub use self::record::{Attempt, Endpoint};
pub use self::script::{ANY_MODEL, ModelScript, Rule, Script, ScriptError, When};
pub use self::server::{MockBuilder, MockUpstream};
