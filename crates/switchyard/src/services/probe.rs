//! Talking to a provider on request: the connection test and model discovery. Both make one
//! cheap authenticated call (the model list) with the provider's real settings and report
//! what happened, success or not; neither changes health state or the config.

use std::time::Duration;

use serde::Serialize;
use switchyard_core::clock::millis;
use switchyard_providers::executor::{self, SendFailure};
use ts_rs::TS;

use super::Services;
use crate::config::{EditError, Problem, ProviderConfig};
use crate::proxy::upstream::{self, Presented};

/// How long a probe may take, end to end.
const PROBE_DEADLINE: Duration = Duration::from_secs(15);

/// The answer to "does this provider work with this key?".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ConnectionReport {
    pub ok: bool,
    /// The credential the call used.
    pub credential: String,
    #[ts(type = "number")]
    pub latency_ms: u64,
    /// The upstream's HTTP status, when it answered.
    pub status: Option<u16>,
    /// How many models the provider listed, when it did.
    pub models: Option<usize>,
    /// What went wrong, in the upstream's words where it gave any.
    pub error: Option<String>,
}

/// The models a provider lists for a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct DiscoveredModels {
    pub credential: String,
    pub models: Vec<String>,
}

impl Services {
    /// Calls the provider's model list with `credential` (or its first routable one).
    pub async fn test_provider(
        &self,
        provider: &str,
        credential: Option<&str>,
    ) -> Result<ConnectionReport, EditError> {
        let config = self.proxy.config();
        let p = find_provider(&config.providers, provider)?;
        let used = pick_credential(p, credential)?;
        let started = tokio::time::Instant::now();
        let outcome = self.list_models(p, used).await;
        let latency_ms = millis(started.elapsed());
        let credential = used.to_owned();
        Ok(match outcome {
            Ok(models) => ConnectionReport {
                ok: true,
                credential,
                latency_ms,
                status: Some(200),
                models: Some(models.len()),
                error: None,
            },
            Err(Failure { status, message }) => ConnectionReport {
                ok: false,
                credential,
                latency_ms,
                status,
                models: None,
                error: Some(message),
            },
        })
    }

    /// The provider's model list, for filling its `models`.
    pub async fn discover_models(
        &self,
        provider: &str,
        credential: Option<&str>,
    ) -> Result<DiscoveredModels, EditError> {
        let config = self.proxy.config();
        let p = find_provider(&config.providers, provider)?;
        let used = pick_credential(p, credential)?;
        match self.list_models(p, used).await {
            Ok(models) => Ok(DiscoveredModels { credential: used.to_owned(), models }),
            Err(failure) => Err(EditError::Upstream(Problem::new(
                "provider",
                format!("{provider} did not list its models: {}", failure.message),
            ))),
        }
    }

    async fn list_models(
        &self,
        provider: &ProviderConfig,
        credential: &str,
    ) -> Result<Vec<String>, Failure> {
        let routes = self.proxy.routes();
        let secret = self
            .proxy
            .secret_for(&routes, &provider.id, &credential.into(), None)
            .await
            .map_err(|e| Failure { status: None, message: e.to_string() })?;
        let (url, headers) = upstream::models_request(provider, secret.as_ref())
            .map_err(|e| Failure { status: None, message: e.to_string() })?;
        let response = routes
            .executor()
            .get(&url, headers, PROBE_DEADLINE)
            .await
            .map_err(|e| Failure { status: None, message: describe(e) })?;
        let status = response.status.as_u16();
        let body = response
            .into_bytes(PROBE_DEADLINE, executor::MAX_MODEL_LIST)
            .await
            .map_err(|e| Failure { status: Some(status), message: describe(e) })?;
        let dialect = provider.dialect();
        if !(200..300).contains(&status) {
            let report = dialect.error_report(&body);
            // Shown in the UI: an upstream may echo the key it was sent.
            let message = provider.scrub(secret.as_ref().map(Presented::secret), &report.message);
            return Err(Failure {
                status: Some(status),
                message: format!("HTTP {status}: {message}"),
            });
        }
        dialect
            .decode_model_list(&body)
            .map_err(|e| Failure { status: Some(status), message: e.to_string() })
    }
}

struct Failure {
    status: Option<u16>,
    message: String,
}

fn describe(failure: SendFailure) -> String {
    match failure {
        SendFailure::Transport(fault) => format!("cannot reach the provider ({fault:?})"),
        SendFailure::Timeout(phase) => {
            format!("no answer within {} s ({phase:?})", PROBE_DEADLINE.as_secs())
        }
        SendFailure::TooLarge(cap) => {
            format!("the model list is larger than {}; not read", executor::size(cap))
        }
    }
}

fn find_provider<'c>(
    providers: &'c [ProviderConfig],
    id: &str,
) -> Result<&'c ProviderConfig, EditError> {
    providers.iter().find(|p| p.id.as_str() == id).ok_or_else(|| {
        EditError::NotFound(Problem::new("provider", format!("no provider \"{id}\"")))
    })
}

/// The named credential, or the first one that may route.
fn pick_credential<'p>(
    provider: &'p ProviderConfig,
    wanted: Option<&str>,
) -> Result<&'p str, EditError> {
    match wanted {
        Some(id) => provider
            .credentials
            .iter()
            .find(|c| c.id.as_str() == id)
            .map(|c| c.id.as_str())
            .ok_or_else(|| {
                EditError::NotFound(Problem::new(
                    "credential",
                    format!("provider \"{}\" has no credential \"{id}\"", provider.id),
                ))
            }),
        None => provider
            .routable_credentials()
            .first()
            .copied()
            .or(provider.credentials.first())
            .map(|c| c.id.as_str())
            .ok_or_else(|| Problem::new("credential", "the provider has no credential").into()),
    }
}
