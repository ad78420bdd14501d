//! What every store test needs: a state file in a fresh directory, a registry, and verdicts
//! that reach each resilience layer.

use std::path::PathBuf;
use std::sync::Arc;

use http::HeaderMap;
use http::header::{HeaderValue, RETRY_AFTER};
use switchyard_core::outcome::{BodyHint, ClassifyPolicy, StatusSet, TransportFault};
use switchyard_core::resilience::HealthRegistry;
use switchyard_core::resilience::event::HealthRecords;
use switchyard_core::{CandidateKey, Outcome, UnixMillis, Upstream, Verdict, classify};
use tempfile::TempDir;

/// 2027-01-15T08:00:00Z: an arbitrary, fixed "now".
pub(crate) const T0: UnixMillis = UnixMillis(1_800_000_000_000);

/// A state file path in a directory that lives as long as the returned guard.
pub(crate) fn state_file() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("state.db");
    (dir, path)
}

pub(crate) fn registry() -> Arc<HealthRegistry> {
    Arc::new(HealthRegistry::default())
}

pub(crate) fn key(provider: &str, credential: &str, model: &str) -> CandidateKey {
    CandidateKey::new(provider, credential, model)
}

/// Classification with 429 charging the credential instead of locking the model, so one
/// policy reaches all three layers: 429 cools a credential, 404 locks a model.
fn policy() -> ClassifyPolicy {
    ClassifyPolicy { lockout_codes: StatusSet::from_iter([404, 503]), ..ClassifyPolicy::default() }
}

/// An upstream answer with `status`, and `Retry-After: {seconds}` when given.
pub(crate) fn response(status: u16, retry_after: Option<&'static str>, now: UnixMillis) -> Verdict {
    let mut headers = HeaderMap::new();
    if let Some(seconds) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    let upstream = Upstream::Response { status, headers: &headers, body: BodyHint::None };
    classify(&Outcome::new(upstream), &policy(), now)
}

pub(crate) fn connect_refused(now: UnixMillis) -> Verdict {
    let upstream = Upstream::Transport(TransportFault::ConnectRefused);
    classify(&Outcome::new(upstream), &policy(), now)
}

/// One attempt at `key` that ends with `verdict`; the key must be admitted.
pub(crate) fn attempt(
    registry: &Arc<HealthRegistry>,
    key: &CandidateKey,
    verdict: &Verdict,
    now: UnixMillis,
) {
    registry
        .admit(key, now)
        .unwrap_or_else(|skip| panic!("{key} was not admitted: {skip:?}"))
        .finish(verdict, now);
}

/// Records in a canonical order, for comparing a file with a registry.
pub(crate) fn sorted(mut records: HealthRecords) -> HealthRecords {
    records.breakers.sort_by(|a, b| a.0.cmp(&b.0));
    records.credentials.sort_by(|a, b| a.0.cmp(&b.0));
    records.lockouts.sort_by(|a, b| a.0.cmp(&b.0));
    records
}
