//! Clearing state by hand.

use serde::{Deserialize, Serialize};

use super::HealthRegistry;
use crate::clock::UnixMillis;
use crate::ids::{CandidateKey, CredentialId, ModelId, ProviderId};
use crate::resilience::team::{BreakerChange, CredentialChange, LockoutChange, TeamTarget};

/// Which entries a manual reset clears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum ResetScope {
    All,
    /// The provider's breaker, its credentials' cooldowns and its lockouts.
    Provider {
        provider: ProviderId,
    },
    /// One credential's cooldown and its lockouts.
    Credential {
        provider: ProviderId,
        credential: CredentialId,
    },
    /// One model's lockouts on every credential of the provider.
    Model {
        provider: ProviderId,
        model: ModelId,
    },
    /// One lockout.
    Lockout {
        key: CandidateKey,
    },
}

/// How many entries a reset removed, per layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct ResetCounts {
    pub breakers: usize,
    pub credentials: usize,
    pub lockouts: usize,
}

impl HealthRegistry {
    /// Clears state by hand. Publishes a removal for every entry cleared.
    pub fn reset(&self, scope: &ResetScope, now: UnixMillis) -> ResetCounts {
        let mut st = self.state.lock();
        let out = &self.events;
        let (of_provider, of_credential, of_model, of_lockout) = match scope {
            ResetScope::All => (None, None, None, None),
            ResetScope::Provider { provider } => (Some(provider), None, None, None),
            ResetScope::Credential { provider, credential } => {
                (Some(provider), Some(credential), None, None)
            }
            ResetScope::Model { provider, model } => (Some(provider), None, Some(model), None),
            ResetScope::Lockout { key } => (None, None, None, Some(key)),
        };
        let provider_ok = |p: &ProviderId| of_provider.is_none_or(|x| x == p);
        let credential_ok = |c: &CredentialId| of_credential.is_none_or(|x| x == c);
        let whole_layer = of_credential.is_none() && of_model.is_none() && of_lockout.is_none();
        let breakers = if whole_layer {
            st.breakers.remove_where(now, out, |p| provider_ok(p))
        } else {
            Vec::new()
        };
        let credentials = if of_model.is_none() && of_lockout.is_none() {
            st.credentials.remove_where(now, out, |k| {
                provider_ok(&k.provider) && credential_ok(&k.credential)
            })
        } else {
            Vec::new()
        };
        let lockouts = st.lockouts.remove_where(now, out, |k| {
            of_lockout.is_none_or(|x| x == k)
                && provider_ok(&k.provider)
                && credential_ok(&k.credential)
                && of_model.is_none_or(|m| *m == k.model)
        });
        drop(st);
        let counts = ResetCounts {
            breakers: breakers.len(),
            credentials: credentials.len(),
            lockouts: lockouts.len(),
        };
        // A reset here clears the team's entries too: whoever cleared a bench by hand meant it
        // for the key, not for this machine's view of it.
        if self.team.get().is_some() {
            let cleared = breakers
                .into_iter()
                .map(|provider| TeamTarget::Breaker { provider, change: BreakerChange::Clear })
                .chain(
                    credentials
                        .into_iter()
                        .map(|key| TeamTarget::Credential { key, change: CredentialChange::Clear }),
                )
                .chain(
                    lockouts
                        .into_iter()
                        .map(|key| TeamTarget::Lockout { key, change: LockoutChange::Clear }),
                );
            self.share(cleared.collect(), now);
        }
        counts
    }
}
