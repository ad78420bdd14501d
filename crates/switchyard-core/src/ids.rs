//! Names of the things the resilience layers track.
//!
//! Ids are cheap to clone (`Arc<str>`) because the registry keys its maps by them and events
//! carry them to the store and the UI. A credential id is unique within its provider only, so
//! every credential-scoped key carries the provider as well.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ts_rs::TS)]
        #[ts(export)]
        #[serde(transparent)]
        #[ts(type = "string")]
        pub struct $name(Arc<str>);

        impl $name {
            pub fn new(s: impl Into<Arc<str>>) -> Self {
                Self(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::new(s)
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

id!(
    /// A configured upstream provider, e.g. `openai` or `groq-personal`.
    ProviderId
);
id!(
    /// One API key or OAuth token of a provider; unique within that provider.
    CredentialId
);
id!(
    /// A model name as the provider spells it, e.g. `gpt-4o-mini`.
    ModelId
);
id!(
    /// One running Switchyard of a team, e.g. `alice-laptop` or `build-7f3a2c`:
    /// names who recorded a shared lock or cooldown and who holds a half-open probe's lease.
    InstanceId
);

/// Between a configured credential's id and the account it serves: a `client` credential (the
/// caller's own login) is benched per account, as `login~3f2a…`. Never in a
/// configured name, so a scoped id cannot clash with one.
pub const ACCOUNT_SEPARATOR: char = '~';

impl CredentialId {
    /// This credential as it serves one account (see [`ACCOUNT_SEPARATOR`]).
    #[must_use]
    pub fn for_account(&self, account: &str) -> Self {
        Self::new(format!("{}{ACCOUNT_SEPARATOR}{account}", self.configured()))
    }

    /// The id as configured: without the account a `client` credential serves.
    pub fn configured(&self) -> &str {
        self.0.split_once(ACCOUNT_SEPARATOR).map_or(&self.0, |(configured, _)| configured)
    }

    /// The account this id is scoped to, if it is.
    pub fn account(&self) -> Option<&str> {
        self.0.split_once(ACCOUNT_SEPARATOR).map(|(_, account)| account)
    }
}

/// One credential of one provider: the scope of a credential cooldown.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct CredentialKey {
    pub provider: ProviderId,
    pub credential: CredentialId,
}

/// One model on one credential of one provider: the scope of a model lockout, and the unit the
/// planner asks about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub struct CandidateKey {
    pub provider: ProviderId,
    pub credential: CredentialId,
    pub model: ModelId,
}

impl CandidateKey {
    pub fn new(
        provider: impl Into<ProviderId>,
        credential: impl Into<CredentialId>,
        model: impl Into<ModelId>,
    ) -> Self {
        Self { provider: provider.into(), credential: credential.into(), model: model.into() }
    }

    pub fn credential_key(&self) -> CredentialKey {
        CredentialKey { provider: self.provider.clone(), credential: self.credential.clone() }
    }

    /// `provider/model`, without the credential.
    pub fn target_label(&self) -> String {
        target_label(&self.provider, &self.model)
    }
}

/// `provider/model`, as routing headers, traces and the request log name a target. Joined
/// directly: `format!` costs several times as much, and every request names its target more
/// than once.
pub fn target_label(provider: &ProviderId, model: &ModelId) -> String {
    let (provider, model) = (provider.as_str(), model.as_str());
    let mut label = String::with_capacity(provider.len() + 1 + model.len());
    label.push_str(provider);
    label.push('/');
    label.push_str(model);
    label
}

impl fmt::Display for CandidateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.provider, self.model, self.credential)
    }
}
