//! The three resilience layers, finest last, and the registry that owns them
//! (RESILIENCE.md §3–§5).
//!
//! Each layer is a pure state machine over `now`: no timers, no background tasks. Recovery is
//! lazy (an open breaker becomes half-open when someone asks after its cooldown), so a state
//! restored from the database behaves exactly like one that never left memory.

pub mod breaker;
pub mod cooldown;
pub mod event;
pub mod first_event;
pub mod headroom;
pub mod lockout;
pub mod recovery;
pub mod registry;
pub mod selection;
pub mod team;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::breaker::{Breaker, BreakerRecord, BreakerState};
pub use self::cooldown::{CredentialCooldown, CredentialKind, CredentialRecord, CredentialStatus};
pub use self::event::{HealthEvent, HealthRecords};
pub use self::first_event::FirstEventSketch;
pub use self::lockout::{LockReason, LockoutRecord, ModelLockout};
pub use self::recovery::{Bench, ProbeRefused, ProbeResult, ProbeScope, ProbeView};
pub use self::registry::{
    Attempt, HealthRegistry, HealthSnapshot, Held, RecoveryProbe, RegistryLimits, ResetCounts,
    ResetScope,
};
pub use self::selection::{CredentialSelector, SelectionStrategy};

/// Why the planner may not use a candidate right now. Kept in each request's routing trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    BreakerOpen {
        #[ts(type = "number")]
        retry_in_ms: u64,
    },
    /// Half-open, and every probe slot is taken.
    BreakerProbing {
        #[ts(type = "number")]
        retry_in_ms: u64,
    },
    CredentialCooling {
        #[ts(type = "number")]
        retry_in_ms: u64,
    },
    CredentialQuotaExhausted {
        #[ts(type = "number")]
        retry_in_ms: u64,
    },
    CredentialInvalid,
    CredentialExpired,
    CredentialRefreshing,
    /// The credential would send its secret to a destination the user never confirmed for it
    /// (see `binding`). Not a health state: it lives with the config, never in the registry or
    /// the state file's health tables.
    CredentialUnconfirmed,
    /// The credential's requests would go to a destination the user never confirmed (a
    /// keyless provider an import or an API edit introduced: see `binding`). As
    /// [`Self::CredentialUnconfirmed`], it lives with the config, not in the registry.
    DestinationUnconfirmed,
    /// `rate_limited`: the lock came from a 429, which decides the status of the final error.
    ModelLocked {
        #[ts(type = "number")]
        retry_in_ms: u64,
        rate_limited: bool,
    },
}

impl SkipReason {
    /// The stable machine name, as used in traces and error bodies.
    pub fn code(self) -> &'static str {
        match self {
            Self::BreakerOpen { .. } => "breaker_open",
            Self::BreakerProbing { .. } => "breaker_probing",
            Self::CredentialCooling { .. } => "credential_cooling",
            Self::CredentialQuotaExhausted { .. } => "credential_quota_exhausted",
            Self::CredentialInvalid => "credential_invalid",
            Self::CredentialExpired => "credential_expired",
            Self::CredentialRefreshing => "credential_refreshing",
            Self::CredentialUnconfirmed => "credential_unconfirmed",
            Self::DestinationUnconfirmed => "destination_unconfirmed",
            Self::ModelLocked { .. } => "model_locked",
        }
    }

    /// Benched because the upstream said "too many requests" (as opposed to broken, refused or
    /// out of credit): when every candidate is, the client gets 429 instead of 503.
    pub fn is_rate_limit(self) -> bool {
        matches!(
            self,
            Self::CredentialCooling { .. } | Self::ModelLocked { rate_limited: true, .. }
        )
    }

    /// When the candidate becomes eligible again by itself; `None` when it needs a person
    /// (an invalid key) or another component (an OAuth refresh).
    pub fn retry_in(self) -> Option<Duration> {
        match self {
            Self::BreakerOpen { retry_in_ms }
            | Self::BreakerProbing { retry_in_ms }
            | Self::CredentialCooling { retry_in_ms }
            | Self::CredentialQuotaExhausted { retry_in_ms }
            | Self::ModelLocked { retry_in_ms, .. } => Some(Duration::from_millis(retry_in_ms)),
            Self::CredentialInvalid
            | Self::CredentialExpired
            | Self::CredentialRefreshing
            | Self::CredentialUnconfirmed
            | Self::DestinationUnconfirmed => None,
        }
    }
}

/// Whether a layer's entry changed and must be published (and so persisted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Changed {
    No,
    Yes,
}

impl Changed {
    fn from(changed: bool) -> Self {
        if changed { Self::Yes } else { Self::No }
    }

    pub fn is_yes(self) -> bool {
        self == Self::Yes
    }
}
