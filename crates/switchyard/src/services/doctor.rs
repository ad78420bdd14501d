//! The doctor: gathers what `switchyard_core::doctor` reads from the
//! registry, the config and usage, and applies one finding when asked, only with the digest
//! of the evidence the user was shown (a changed state answers 409 and changes nothing), or
//! says what applying it would change (a dry run).

use serde::{Deserialize, Serialize};
use switchyard_core::CredentialKey;
use switchyard_core::calendar::DAY_MS;
use switchyard_core::doctor::{
    self, Action, Change, ComboInput, Finding, Inputs, LatencyInput, ProviderInput,
};
use switchyard_core::usage::budget::BudgetState;
use switchyard_core::usage::report::{Bucket, Filter, GroupBy, ReportSpec};
use switchyard_core::{ProviderId, UnixMillis};
use ts_rs::TS;

use super::Services;
use crate::config::{EditError, Problem};

/// `POST /api/doctor/{id}/apply`'s body.
#[derive(Clone, Debug, Deserialize, TS)]
#[ts(export, rename = "DoctorApply")]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    /// The finding's digest as it was shown: the evidence the user agreed to act on.
    pub digest: String,
    /// Say what would change, change nothing.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub dry_run: bool,
}

/// What applying a finding did, or would do.
#[derive(Clone, Debug, Serialize, TS)]
#[ts(export, rename = "DoctorApplied")]
pub struct Applied {
    pub id: String,
    /// Nothing was changed: this is what would be.
    pub dry_run: bool,
    pub says: String,
    pub change: Change,
}

impl Services {
    /// Every finding now (`GET /api/doctor`).
    pub fn doctor(&self) -> Vec<Finding> {
        doctor::examine(&self.doctor_inputs())
    }

    /// Applies finding `id` (`POST /api/doctor/{id}/apply`), if its evidence is still the one
    /// `request.digest` names.
    pub async fn apply_finding(
        &self,
        id: &str,
        request: &ApplyRequest,
    ) -> Result<Applied, EditError> {
        let findings = self.doctor();
        let Some(finding) = findings.into_iter().find(|f| f.id == id) else {
            return Err(EditError::NotFound(Problem::new(
                "id",
                format!(
                    "no finding \"{id}\" now: it may be fixed already; GET /api/doctor lists what there is"
                ),
            )));
        };
        if finding.digest != request.digest {
            return Err(EditError::Conflict(Problem::new(
                "digest",
                format!(
                    "the evidence of \"{id}\" changed since it was shown (digest {} now, {} shown): nothing was applied; look again",
                    finding.digest, request.digest
                ),
            )));
        }
        let Action::Apply { says, change } = finding.action else {
            return Err(EditError::Invalid(Problem::new(
                "id",
                format!("\"{id}\" is advice, for a person to act on: nothing to apply"),
            )));
        };
        if !request.dry_run {
            self.apply_change(&change).await?;
            tracing::info!(finding = id, %says, "doctor applied");
        }
        Ok(Applied { id: finding.id, dry_run: request.dry_run, says, change })
    }

    async fn apply_change(&self, change: &Change) -> Result<(), EditError> {
        match change {
            Change::Clear { scope } => {
                self.reset(scope);
            }
            // Exactly what the finding showed (its digest covers the list): a binding that came
            // up since is not confirmed with it.
            Change::Confirm { provider, bindings } => {
                let shown = |key: &CredentialKey, binding: &switchyard_core::binding::Binding| {
                    key.provider == *provider && bindings.contains(binding)
                };
                let confirmed = self.confirm(&shown).await?;
                tracing::info!(%provider, bindings = confirmed.len(), "destinations confirmed");
            }
            Change::MoveDown { combo, target } => {
                self.edit(|form| {
                    let combo =
                        form.combos.iter_mut().find(|c| &c.name == combo).ok_or_else(|| {
                            Problem::new("combo", format!("no combo \"{combo}\""))
                        })?;
                    let at = combo.targets.iter().position(|t| &t.target == target).ok_or_else(
                        || Problem::new("target", format!("\"{target}\" is not in the combo")),
                    )?;
                    let moved = combo.targets.remove(at);
                    combo.targets.push(moved);
                    Ok(())
                })
                .await?;
            }
            Change::Retire { provider, model, combos } => {
                let target = format!("{provider}/{model}");
                self.edit(|form| {
                    for combo in form.combos.iter_mut().filter(|c| combos.contains(&c.name)) {
                        if combo.targets.iter().all(|t| t.target == target) {
                            return Err(EditError::Conflict(Problem::new(
                                "combos",
                                format!(
                                    "combo \"{}\" would have no target left: give it another first",
                                    combo.name
                                ),
                            )));
                        }
                        combo.targets.retain(|t| t.target != target);
                    }
                    if let Some(p) = form.providers.iter_mut().find(|p| p.id == provider.as_str()) {
                        p.models.retain(|m| m.id != model.as_str());
                    }
                    Ok(())
                })
                .await?;
                self.reset(&switchyard_core::resilience::registry::ResetScope::Model {
                    provider: provider.clone(),
                    model: model.clone(),
                });
            }
        }
        Ok(())
    }

    fn doctor_inputs(&self) -> Inputs {
        let now = self.clock.now();
        let snapshot = self.registry.snapshot(now);
        let routes = self.proxy.routes();
        let config = routes.config();
        let health = routes.combo_health(&self.registry, now);
        let combos = config
            .combos
            .iter()
            .map(|c| ComboInput {
                name: c.name.clone(),
                targets: c.targets.iter().map(|t| (t.provider.clone(), t.model.clone())).collect(),
                eligible: health.iter().find(|h| h.name == c.name).map_or(0, |h| h.eligible),
            })
            .collect();
        let providers = config
            .providers
            .iter()
            .map(|p| ProviderInput {
                id: p.id.clone(),
                credentials: p.credentials.iter().map(|c| c.id.clone()).collect(),
                models: p.models.iter().map(|m| m.id.clone()).collect(),
                unconfirmed: routes.unconfirmed_of(&p.id),
                secrets_unavailable: p
                    .credentials
                    .iter()
                    .filter_map(|c| Some((c.id.clone(), c.secret.as_ref()?.unavailable()?)))
                    .collect(),
            })
            .collect();
        let budgets_spent = self
            .proxy
            .request_log()
            .usage()
            .budgets()
            .into_iter()
            .filter(|b| b.enforce && b.state == BudgetState::Reached)
            .map(|b| b.name())
            .collect();
        let under_reserve = self
            .proxy
            .headroom()
            .into_iter()
            .filter(|v| v.below_reserve)
            .map(|v| CredentialKey { provider: v.provider, credential: v.credential })
            .collect();
        Inputs {
            breakers: snapshot.breakers,
            credentials: snapshot.credentials,
            lockouts: snapshot.lockouts,
            combos,
            providers,
            budgets_spent,
            under_reserve,
            lockout_policy: self.registry.lockout_policy(),
            latencies: self.latencies(now),
        }
    }

    /// Each provider's time to first token: recent from the hedge's first-event sketches,
    /// usual from the last 7 days of usage.
    fn latencies(&self, now: UnixMillis) -> Vec<LatencyInput> {
        let usual = self.proxy.request_log().usage().report(&ReportSpec {
            from: UnixMillis(now.0.saturating_sub(7 * DAY_MS)),
            to: UnixMillis(now.0 + 1),
            bucket: Bucket::Day,
            group_by: Some(GroupBy::Provider),
            filter: Filter::default(),
        });
        usual
            .series
            .iter()
            .filter_map(|series| {
                let provider = ProviderId::from(series.key.as_deref()?);
                let usual_p50_ms = series.total.ttft_p50_ms?;
                let recent = self.registry.first_events_of(&provider, now)?;
                let recent_p50_ms = u64::try_from(recent.percentile(50, now)?.as_millis()).ok()?;
                Some(LatencyInput {
                    provider,
                    recent_p50_ms,
                    recent_samples: u64::from(recent.samples(now)),
                    usual_p50_ms,
                    usual_samples: series.total.ttft_samples,
                })
            })
            .collect()
    }
}
