//! The mock upstream, tested from outside over real sockets: every dialect, every behaviour,
//! the attempt log and the binary.
//!
//! Delays are tens of milliseconds and every wait is bounded by [`within`], so the whole suite
//! runs in a few seconds and a broken behaviour fails instead of hanging.

mod binary;
mod call;
mod corpus;
mod dialects;
mod embeddings;
mod errors;
mod faults;
mod recording;
mod responses;
mod rules;
mod transcript;

use std::future::Future;
use std::time::Duration;

/// Awaits `future`, failing the test if it takes longer than a generous bound.
async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), future).await.expect("the test's bound elapsed")
}
