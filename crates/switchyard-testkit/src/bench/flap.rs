//! Request latency while another provider's breaker flaps: persistence must stay off the request
//! path. Provider `flap` serves the model [`FLAP`], whose mock script is a long queue of two 503s
//! then four replies, over and over; with `failure_threshold = 2` and `reset_timeout_ms = 100`,
//! its breaker opens, turns half-open, lets a probe through (a reply) and closes, about every
//! tenth of a second. Each of those transitions is an event the write-behind task commits to
//! `SQLite`. A background driver keeps that going at a fixed pace while the usual paired
//! measurement runs against provider `oa`, which never changes state.
//!
//! Two controls run before it: the same pairs quiet, and the same pairs while the driver, at the
//! same pace, sends to a provider whose every attempt fails but whose breaker is off (no state
//! changes, nothing to persist). The flapping run against that second control isolates what the
//! state changes and their persistence cost the requests of others.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;

use super::client::{Endpoint, call_any};
use super::stats::Summary;

/// The flapping model (on provider `flap`, via the proxy).
pub(crate) const FLAP: &str = "bench-flap";
/// One period of the flapping model's queue: failures, then replies.
const FAILURES: usize = 2;
const SUCCESSES: usize = 4;
/// Periods in the queue: enough attempts for minutes of driving (a reply once it runs out).
const PERIODS: usize = 3000;
/// The driver's pace: one request this often.
pub(crate) const DRIVER_EVERY: Duration = Duration::from_millis(5);

/// The model's entry in the mock script.
pub(crate) fn mock_script() -> String {
    let period: Vec<&str> = std::iter::repeat_n("{ status = { code = 503 } }", FAILURES)
        .chain(std::iter::repeat_n("{ reply = {} }", SUCCESSES))
        .collect();
    let period = period.join(", ");
    let queue = vec![period.as_str(); PERIODS].join(", ");
    format!("\"{FLAP}\" = {{ queue = [{queue}], default = {{ reply = {{}} }} }}\n")
}

/// The provider's entry in the proxy config.
pub(crate) fn proxy_config(mock_url: &str, key_env: &str) -> String {
    format!(
        r#"
[[providers]]
id = "flap"
kind = "openai"
base_url = "{mock_url}/v1"
credentials = [{{ id = "k1", secret = "env:{key_env}" }}]
breaker = {{ failure_threshold = 2, degraded_threshold = 1, reset_timeout_ms = 100, max_backoff_multiplier = 1 }}
"#
    )
}

/// The paired figures with and without the flapping, and what the driver saw.
#[derive(Clone, Debug)]
pub(crate) struct BreakerFlap {
    pub(crate) quiet: Summary,
    /// The driver at the same pace on a failing provider without a breaker.
    pub(crate) steady: Summary,
    pub(crate) steady_answers: BTreeMap<String, usize>,
    pub(crate) flapping: Summary,
    /// Driver answers by `status what` (`200` for a success; see `client::call_any`).
    pub(crate) answers: BTreeMap<String, usize>,
    /// Successes right after a refusal or failure: breaker recoveries the driver saw.
    pub(crate) recoveries: usize,
    pub(crate) lasted: Duration,
}

/// What a driver run saw.
#[derive(Debug)]
pub(crate) struct Driven {
    pub(crate) answers: BTreeMap<String, usize>,
    pub(crate) recoveries: usize,
    pub(crate) lasted: Duration,
}

/// Starts a driver sending `target` (`provider/model`) through the proxy every
/// [`DRIVER_EVERY`], runs `measure` while it drives, stops it and returns both results.
pub(crate) async fn while_driving<T>(
    http: &reqwest::Client,
    proxied: &Endpoint,
    (provider, model): (&str, &str),
    measure: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(T, Driven)> {
    let stop = Arc::new(AtomicBool::new(false));
    let driver = {
        let endpoint = Endpoint { model_prefix: format!("{provider}/"), ..proxied.clone() };
        let (http, stop, model) = (http.clone(), Arc::clone(&stop), model.to_owned());
        tokio::spawn(async move {
            let (mut answers, mut recoveries) = (BTreeMap::<String, usize>::new(), 0);
            let mut every = tokio::time::interval(DRIVER_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            while !stop.load(Ordering::Relaxed) {
                every.tick().await;
                let (_, status, kind) = call_any(&http, &endpoint, &model).await?;
                if status == 200 {
                    recoveries += usize::from(failing);
                }
                failing = status != 200;
                let key =
                    if kind.is_empty() { status.to_string() } else { format!("{status} {kind}") };
                *answers.entry(key).or_default() += 1;
            }
            anyhow::Ok((answers, recoveries))
        })
    };
    // Let the breaker go round a few times before measuring.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = super::client::now();
    let measured = measure.await;
    let lasted = started.elapsed() + Duration::from_millis(500);
    stop.store(true, Ordering::Relaxed);
    let (answers, recoveries) = driver.await.context("the driver panicked")??;
    Ok((measured?, Driven { answers, recoveries, lasted }))
}
