//! Switchyard's domain: ids, time, outcome classification and the three resilience layers
//! (provider breaker, credential cooldown, model lockout) behind one health registry, plus
//! the timing decisions of OAuth credentials (when to refresh, the refresh breaker's profile).
//!
//! No I/O lives here: time comes from an injected [`Clock`], persistence and networking belong to
//! the crates around this one. tokio is used for `sync` only (the event broadcast).

pub mod binding;
pub mod calendar;
pub mod clock;
pub mod continuation;
pub mod doctor;
pub mod ending;
pub mod ids;
pub mod oauth;
pub mod outcome;
pub mod random;
pub mod request;
pub mod resilience;
pub mod routing;
pub mod settings;
pub mod text;
pub mod usage;

pub use clock::{Clock, ManualClock, SystemClock, UnixMillis};
pub use ids::{CandidateKey, CredentialId, CredentialKey, InstanceId, ModelId, ProviderId};
pub use outcome::{Outcome, Upstream, Verdict, classify};
