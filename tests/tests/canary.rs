//! A canary secret configured as a provider key never appears in logs (at TRACE level, every
//! crate), in the state file, in any management response, in error bodies or in `/metrics`:
//! only in the request to the upstream itself.

use std::io::Write;
use std::sync::{Arc, Mutex};

use switchyard_e2e::harness::{CANARY, Harness, MANAGEMENT_TOKEN};
use switchyard_testkit::{Behavior, ErrorKind, Status};

/// Everything every log line writes, from every crate.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_canary_key_appears_only_in_the_upstream_request() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .init();

    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let extra = r#"
[[providers]]
id = "canary"
kind = "openai"
base_url = "{mock}/v1"
credentials = [{ id = "c-1", secret = "env:CANARY" }]
"#;
    let h =
        Harness::start_in_with(mock, data.path(), switchyard_e2e::harness::Setup::new(extra)).await;
    let mut seen = Vec::new();
    // Success, each error kind, a broken stream and a timeout-free hang-up.
    for behavior in [
        Behavior::reply("fine"),
        Behavior::error(ErrorKind::Unauthorized),
        Behavior::error(ErrorKind::RateLimited),
        Behavior::error(ErrorKind::InsufficientQuota),
        Behavior::error(ErrorKind::ServerError),
        Behavior::error(ErrorKind::ContextLengthExceeded),
        Status::new(400).into(),
        Behavior::reset(),
    ] {
        h.mock.enqueue("gpt-4o", behavior);
        let r = h.openai("canary/gpt-4o", false).send().await.unwrap();
        seen.push(r.text().await.unwrap());
    }
    h.mock.enqueue("gpt-4o", Behavior::cut_after(2));
    seen.push(h.openai("canary/gpt-4o", true).send().await.unwrap().text().await.unwrap());
    for path in [
        "/api/monitoring/health",
        "/api/requests?limit=100",
        "/api/resilience/lockouts",
        "/api/keys",
        "/metrics",
    ] {
        let r = h.http.get(h.url(path)).bearer_auth(MANAGEMENT_TOKEN).send().await.unwrap();
        seen.push(r.text().await.unwrap());
    }
    assert!(
        h.mock.attempts().iter().any(|a| a.api_key() == Some(CANARY)),
        "the canary did reach the upstream, so the test exercises it"
    );
    let mock = h.stop().await;
    drop(mock);

    for (i, body) in seen.iter().enumerate() {
        assert!(!body.contains(CANARY), "response {i} carries the canary: {body}");
    }
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(!logs.is_empty(), "TRACE logging was captured");
    assert!(!logs.contains(CANARY), "the logs carry the canary");
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let found = bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes());
        assert!(!found, "{} carries the canary", path.display());
    }
}
