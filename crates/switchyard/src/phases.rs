//! How long each phase of a start took, as debug log lines (the cold start with a
//! large state file is measured as a whole by `scripts/bench`; these lines say where it goes).
//! `SWITCHYARD_LOG=switchyard=debug switchyard serve` prints them.
//!
//! Wall time on purpose: this measures the machine, and decides nothing.

use tokio::time::Instant;

/// The phases of one start, each logged as it ends.
#[derive(Debug)]
pub struct Phases {
    started: Instant,
    last: Instant,
}

impl Phases {
    #[must_use]
    pub fn start() -> Self {
        let now = Instant::now();
        Self { started: now, last: now }
    }

    /// Logs the phase that just ended, named `phase`, and starts the next one.
    pub fn done(&mut self, phase: &'static str) {
        let now = Instant::now();
        let micros = now.duration_since(self.last).as_micros();
        let total = now.duration_since(self.started).as_micros();
        tracing::debug!(phase, micros, total_micros = total, "start phase done");
        self.last = now;
    }
}
