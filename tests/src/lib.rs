//! Black-box end-to-end tests: real processes, real `SQLite` files.
//!
//! The library holds only what a test and the processes it drives must agree on; the tests
//! live in `tests/`, the processes in `src/bin/`.

use switchyard_core::CandidateKey;

/// The model lockout `health-churn` takes in round `round` of the run named `run`. It is
/// locked for an hour, so it is still locked whenever a test looks.
pub fn lockout_key(run: &str, round: u64) -> CandidateKey {
    CandidateKey::new("locks", "key", format!("{run}-m{round}"))
}

pub mod harness;
pub mod streaming;
