//! Settings sections: each a serde *form* (what config files and the UI edit) and a validated
//! *policy* (what the code runs on).
//!
//! Validation happens once, on the way in, and names the field, the value and what is allowed.
//! Unknown fields are rejected so a typo never silently means "default". Durations are whole
//! milliseconds in forms (`*_ms`) because JSON and TOML have no duration type.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::clock::millis;
use crate::outcome::{BreakerFault, ClassifyPolicy, MAX_RETRY_AFTER, StatusSet};
use crate::routing::auto::Weights;

/// A settings value that breaks a rule, with the field path and what would be accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct SettingsError {
    /// Dotted path of the field, e.g. `model_lockouts.max_cooldown_ms`.
    pub field: String,
    pub problem: String,
}

fn check_range<T>(section: &str, field: &str, value: T, min: T, max: T) -> Result<T, SettingsError>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if value < min || value > max {
        return Err(SettingsError {
            field: format!("{section}.{field}"),
            problem: format!("{value} is out of range; allowed {min}..={max}"),
        });
    }
    Ok(value)
}

const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

// ---------------------------------------------------------------------------------------------
// Model lockouts (RESILIENCE.md §5)

/// Status codes that can mean "this model on this key is unhappy", and so may be listed in
/// `model_lockouts.error_codes`.
pub const LOCKABLE_STATUS_CODES: [u16; 9] = [404, 408, 410, 429, 500, 502, 503, 504, 529];

/// The Settings → Model Lockouts form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct LockoutSettings {
    pub enabled: bool,
    pub error_codes: Vec<u16>,
    pub failure_threshold: u32,
    #[ts(type = "number")]
    pub base_cooldown_ms: u64,
    #[ts(type = "number")]
    pub max_cooldown_ms: u64,
    pub exponential_backoff: bool,
    pub max_backoff_steps: u32,
}

impl Default for LockoutSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            error_codes: vec![404, 429, 503],
            failure_threshold: 1,
            base_cooldown_ms: 10 * SECOND,
            // A lock that lapses costs a one-token recovery probe, not a user's request (when
            // another target serves meanwhile), so the lock need not grow long to spare users:
            // 1 min at most brings a healed model back within a minute. See
            // docs/resilience.md, "Lock lengths", for the figures.
            max_cooldown_ms: MINUTE,
            exponential_backoff: true,
            max_backoff_steps: 5,
        }
    }
}

/// Validated model-lockout settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockoutPolicy {
    pub enabled: bool,
    pub error_codes: StatusSet,
    pub failure_threshold: u32,
    pub base_cooldown: Duration,
    pub max_cooldown: Duration,
    pub exponential_backoff: bool,
    pub max_backoff_steps: u32,
}

impl LockoutSettings {
    pub fn validate(&self) -> Result<LockoutPolicy, SettingsError> {
        const S: &str = "model_lockouts";
        let mut codes = StatusSet::default();
        for (i, &code) in self.error_codes.iter().enumerate() {
            if !LOCKABLE_STATUS_CODES.contains(&code) {
                return Err(SettingsError {
                    field: format!("{S}.error_codes[{i}]"),
                    problem: format!(
                        "{code} is not a status that can lock a model; allowed {LOCKABLE_STATUS_CODES:?}"
                    ),
                });
            }
            if codes.contains(code) {
                return Err(SettingsError {
                    field: format!("{S}.error_codes[{i}]"),
                    problem: format!("{code} is listed twice"),
                });
            }
            codes.insert(code);
        }
        let failure_threshold =
            check_range(S, "failure_threshold", self.failure_threshold, 1, 100)?;
        let base = check_range(S, "base_cooldown_ms", self.base_cooldown_ms, 100, HOUR)?;
        let max = check_range(S, "max_cooldown_ms", self.max_cooldown_ms, SECOND, DAY)?;
        if max < base {
            return Err(SettingsError {
                field: format!("{S}.max_cooldown_ms"),
                problem: format!(
                    "{max} is below base_cooldown_ms ({base}); it must be at least that"
                ),
            });
        }
        let max_backoff_steps = check_range(S, "max_backoff_steps", self.max_backoff_steps, 0, 20)?;
        Ok(LockoutPolicy {
            enabled: self.enabled,
            error_codes: codes,
            failure_threshold,
            base_cooldown: Duration::from_millis(base),
            max_cooldown: Duration::from_millis(max),
            exponential_backoff: self.exponential_backoff,
            max_backoff_steps,
        })
    }
}

impl Default for LockoutPolicy {
    fn default() -> Self {
        LockoutSettings::default().validate().expect("defaults are valid")
    }
}

impl LockoutPolicy {
    /// The form these settings came from (for showing and editing them).
    pub fn to_settings(&self) -> LockoutSettings {
        LockoutSettings {
            enabled: self.enabled,
            error_codes: self.error_codes.iter().collect(),
            failure_threshold: self.failure_threshold,
            base_cooldown_ms: millis(self.base_cooldown),
            max_cooldown_ms: millis(self.max_cooldown),
            exponential_backoff: self.exponential_backoff,
            max_backoff_steps: self.max_backoff_steps,
        }
    }

    /// The classifier's view of these settings.
    pub fn classify_policy(&self) -> ClassifyPolicy {
        ClassifyPolicy {
            lockout_enabled: self.enabled,
            lockout_codes: self.error_codes,
            policy_fallback: false,
        }
    }

    /// No lock lasts longer than this, hint or formula.
    pub fn longest(&self) -> Duration {
        self.max_cooldown.max(MAX_RETRY_AFTER)
    }
}

// ---------------------------------------------------------------------------------------------
// Credential cooldown (RESILIENCE.md §4)

/// Credential cooldown settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct CooldownSettings {
    /// First cooldown of an API key.
    #[ts(type = "number")]
    pub api_key_base_ms: u64,
    /// First cooldown of an OAuth credential.
    #[ts(type = "number")]
    pub oauth_base_ms: u64,
    /// The formula's cap: `base × 2^level` never exceeds this.
    #[ts(type = "number")]
    pub max_cooldown_ms: u64,
    /// How long a credential whose account ran out of credit sits out, unless told otherwise.
    #[ts(type = "number")]
    pub quota_cooldown_ms: u64,
    /// The backoff level stops growing here.
    pub max_backoff_level: u32,
}

impl Default for CooldownSettings {
    fn default() -> Self {
        Self {
            api_key_base_ms: 3 * SECOND,
            oauth_base_ms: 5 * SECOND,
            max_cooldown_ms: 5 * MINUTE,
            quota_cooldown_ms: HOUR,
            max_backoff_level: 10,
        }
    }
}

/// Validated credential cooldown settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CooldownPolicy {
    pub api_key_base: Duration,
    pub oauth_base: Duration,
    pub max_cooldown: Duration,
    pub quota_cooldown: Duration,
    pub max_backoff_level: u32,
}

impl CooldownSettings {
    pub fn validate(&self) -> Result<CooldownPolicy, SettingsError> {
        const S: &str = "credential_cooldown";
        let api = check_range(S, "api_key_base_ms", self.api_key_base_ms, 100, HOUR)?;
        let oauth = check_range(S, "oauth_base_ms", self.oauth_base_ms, 100, HOUR)?;
        let max = check_range(S, "max_cooldown_ms", self.max_cooldown_ms, SECOND, DAY)?;
        if max < api.max(oauth) {
            return Err(SettingsError {
                field: format!("{S}.max_cooldown_ms"),
                problem: format!(
                    "{max} is below a base cooldown ({}); it must be at least that",
                    api.max(oauth)
                ),
            });
        }
        let quota = check_range(S, "quota_cooldown_ms", self.quota_cooldown_ms, SECOND, DAY)?;
        let level = check_range(S, "max_backoff_level", self.max_backoff_level, 0, 20)?;
        Ok(CooldownPolicy {
            api_key_base: Duration::from_millis(api),
            oauth_base: Duration::from_millis(oauth),
            max_cooldown: Duration::from_millis(max),
            quota_cooldown: Duration::from_millis(quota),
            max_backoff_level: level,
        })
    }
}

impl Default for CooldownPolicy {
    fn default() -> Self {
        CooldownSettings::default().validate().expect("defaults are valid")
    }
}

impl CooldownPolicy {
    /// No timed credential status lasts longer than this.
    pub fn longest(&self) -> Duration {
        self.max_cooldown.max(self.quota_cooldown).max(MAX_RETRY_AFTER)
    }
}

// ---------------------------------------------------------------------------------------------
// Provider circuit breaker (RESILIENCE.md §3)

/// Per-fault refinements of a breaker profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct FaultOverride {
    /// Open when the failure count reaches this on a failure of this kind.
    pub threshold: Option<u32>,
    /// Base cooldown when this kind of failure opened the breaker.
    #[ts(type = "number | null")]
    pub cooldown_ms: Option<u64>,
    /// Open on the first failure of this kind.
    pub immediate_open: bool,
}

/// One breaker profile: the form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerSettings {
    /// `false` opts the provider out of the breaker: it is always admitted.
    pub enabled: bool,
    pub failure_threshold: u32,
    /// Defaults to `ceil(0.6 × failure_threshold)`.
    pub degraded_threshold: Option<u32>,
    #[ts(type = "number")]
    pub reset_timeout_ms: u64,
    pub max_backoff_multiplier: u32,
    pub half_open_probes: u32,
    /// A probe that has not reported back after this long is abandoned and its slot freed.
    #[ts(type = "number")]
    pub probe_timeout_ms: u64,
    pub overrides: BTreeMap<BreakerFault, FaultOverride>,
}

/// Which defaults a provider starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum BreakerProfile {
    /// Hosted APIs authenticated with API keys.
    ApiKey,
    /// Hosted APIs behind OAuth; their outages tend to be longer.
    Oauth,
    /// Ollama, LM Studio, vLLM on this machine: fail fast, come back fast.
    Local,
}

impl BreakerSettings {
    pub fn profile(profile: BreakerProfile) -> Self {
        let tls_opens = FaultOverride { immediate_open: true, ..FaultOverride::default() };
        let base = Self {
            enabled: true,
            failure_threshold: 5,
            degraded_threshold: None,
            reset_timeout_ms: 30 * SECOND,
            max_backoff_multiplier: 16,
            half_open_probes: 1,
            probe_timeout_ms: 2 * MINUTE,
            overrides: BTreeMap::from([(BreakerFault::Tls, tls_opens)]),
        };
        match profile {
            BreakerProfile::ApiKey => base,
            BreakerProfile::Oauth => Self { reset_timeout_ms: MINUTE, ..base },
            BreakerProfile::Local => Self {
                failure_threshold: 3,
                reset_timeout_ms: 5 * SECOND,
                max_backoff_multiplier: 4,
                ..base
            },
        }
    }

    pub fn validate(&self) -> Result<BreakerPolicy, SettingsError> {
        const S: &str = "breaker";
        let failure_threshold =
            check_range(S, "failure_threshold", self.failure_threshold, 1, 1000)?;
        let degraded_threshold = match self.degraded_threshold {
            Some(d) => check_range(S, "degraded_threshold", d, 1, failure_threshold)?,
            None => (failure_threshold * 3).div_ceil(5),
        };
        let reset = check_range(S, "reset_timeout_ms", self.reset_timeout_ms, 100, HOUR)?;
        let mult = check_range(S, "max_backoff_multiplier", self.max_backoff_multiplier, 1, 1024)?;
        let probes = check_range(S, "half_open_probes", self.half_open_probes, 1, 64)?;
        let probe_timeout =
            check_range(S, "probe_timeout_ms", self.probe_timeout_ms, SECOND, HOUR)?;
        let mut overrides = [ResolvedOverride::default(); BreakerFault::ALL.len()];
        for (fault, o) in &self.overrides {
            let name = fault.as_str();
            let slot = &mut overrides[*fault as usize];
            if let Some(t) = o.threshold {
                slot.threshold =
                    Some(check_range(S, &format!("overrides.{name}.threshold"), t, 1, 1000)?);
            }
            if let Some(c) = o.cooldown_ms {
                let c = check_range(S, &format!("overrides.{name}.cooldown_ms"), c, 100, HOUR)?;
                slot.cooldown = Some(Duration::from_millis(c));
            }
            slot.immediate_open = o.immediate_open;
        }
        Ok(BreakerPolicy {
            enabled: self.enabled,
            failure_threshold,
            degraded_threshold,
            reset_timeout: Duration::from_millis(reset),
            max_backoff_multiplier: mult,
            half_open_probes: probes,
            probe_timeout: Duration::from_millis(probe_timeout),
            overrides,
        })
    }
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self::profile(BreakerProfile::ApiKey)
    }
}

/// A fault override after validation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolvedOverride {
    pub threshold: Option<u32>,
    pub cooldown: Option<Duration>,
    pub immediate_open: bool,
}

/// Validated breaker settings for one provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakerPolicy {
    pub enabled: bool,
    pub failure_threshold: u32,
    pub degraded_threshold: u32,
    pub reset_timeout: Duration,
    pub max_backoff_multiplier: u32,
    pub half_open_probes: u32,
    pub probe_timeout: Duration,
    /// Indexed by `BreakerFault as usize`.
    pub overrides: [ResolvedOverride; BreakerFault::ALL.len()],
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerSettings::default().validate().expect("defaults are valid")
    }
}

impl BreakerPolicy {
    pub fn for_fault(&self, fault: BreakerFault) -> ResolvedOverride {
        self.overrides[fault as usize]
    }

    /// The longest an open breaker can stay open under this policy.
    pub fn longest(&self) -> Duration {
        let base = self
            .overrides
            .iter()
            .filter_map(|o| o.cooldown)
            .fold(self.reset_timeout, Duration::max);
        base.saturating_mul(self.max_backoff_multiplier)
    }
}

// ---------------------------------------------------------------------------------------------
// Deadlines and limits of the attempt loop (RESILIENCE.md §7, §8)

/// Upstream deadlines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutSettings {
    /// TCP + TLS connect.
    #[ts(type = "number")]
    pub connect_ms: u64,
    /// Until the first real event when another candidate could take over.
    #[ts(type = "number")]
    pub first_event_ms: u64,
    /// Until the first real event when no other candidate is left.
    #[ts(type = "number")]
    pub first_byte_ms: u64,
    /// A non-streamed answer, head and body: it arrives whole, only when generation ends.
    #[ts(type = "number")]
    pub non_stream_ms: u64,
    /// Between two events of a stream.
    #[ts(type = "number")]
    pub idle_ms: u64,
    /// The whole request, all attempts included.
    #[ts(type = "number")]
    pub total_ms: u64,
}

impl Default for TimeoutSettings {
    fn default() -> Self {
        Self {
            connect_ms: 10 * SECOND,
            first_event_ms: 15 * SECOND,
            first_byte_ms: MINUTE,
            non_stream_ms: 10 * MINUTE,
            idle_ms: 30 * SECOND,
            total_ms: 10 * MINUTE,
        }
    }
}

/// Validated deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_event: Duration,
    pub first_byte: Duration,
    pub non_stream: Duration,
    pub idle: Duration,
    pub total: Duration,
}

impl TimeoutSettings {
    pub fn validate(&self) -> Result<Timeouts, SettingsError> {
        const S: &str = "timeouts";
        let connect = check_range(S, "connect_ms", self.connect_ms, 100, MINUTE)?;
        let first_event = check_range(S, "first_event_ms", self.first_event_ms, 100, 10 * MINUTE)?;
        let first_byte = check_range(S, "first_byte_ms", self.first_byte_ms, 100, 30 * MINUTE)?;
        if first_byte < first_event {
            return Err(SettingsError {
                field: format!("{S}.first_byte_ms"),
                problem: format!(
                    "{first_byte} is below first_event_ms ({first_event}); it must be at least that"
                ),
            });
        }
        let non_stream = check_range(S, "non_stream_ms", self.non_stream_ms, SECOND, 2 * HOUR)?;
        let idle = check_range(S, "idle_ms", self.idle_ms, 100, 30 * MINUTE)?;
        let total = check_range(S, "total_ms", self.total_ms, SECOND, 2 * HOUR)?;
        Ok(Timeouts {
            connect: Duration::from_millis(connect),
            first_event: Duration::from_millis(first_event),
            first_byte: Duration::from_millis(first_byte),
            non_stream: Duration::from_millis(non_stream),
            idle: Duration::from_millis(idle),
            total: Duration::from_millis(total),
        })
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        TimeoutSettings::default().validate().expect("defaults are valid")
    }
}

/// Attempt cap and retry budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingSettings {
    /// Upstream attempts per client request, fallbacks and retries included.
    pub max_attempts: u32,
    /// Same-target retries may add this share of recent requests...
    pub retry_budget_percent: u32,
    /// ...but at least this many per second.
    pub retry_budget_min_per_second: u32,
    /// Whether a content-policy refusal may be tried on another target (default: no, the
    /// provider's reason goes back to the client).
    pub fallback_on_policy: bool,
    /// Keep each agent session on the (target, credential) that served it, so its prompt
    /// cache stays warm (RESILIENCE.md §11) [default true].
    pub sessions: bool,
    /// Sessions remembered at most; the least recently seen is forgotten first [default
    /// 10000].
    pub session_limit: u32,
    /// A session not seen for this long is forgotten, in minutes [default 720: a day's work].
    pub session_idle_minutes: u32,
    /// How long a request over a `max_in_flight` cap waits for a slot before it goes to the
    /// next candidate, in milliseconds, within its own deadline [default 2000].
    pub queue_ms: u32,
    /// A credential with less than this share of a quota window left (from its answers'
    /// rate-limit headers) takes no new session while another has more, in percent [default
    /// 5].
    pub reserve_percent: u32,
    /// Which translated requests to an upstream that caches only what is marked (Anthropic)
    /// get breakpoints: a cache write costs 1.25× input, a read a tenth [default `sessions`].
    pub cache_breakpoints: CacheBreakpoints,
}

/// Which translated requests are marked for the upstream's prompt cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum CacheBreakpoints {
    /// A session's turns (an agent's; sessions on): what a later turn will read back.
    #[default]
    Sessions,
    /// Every translated request, a one-off script's too.
    Always,
    /// None: the upstream caches what the client marked itself, if anything.
    Off,
}

impl Default for RoutingSettings {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            retry_budget_percent: 20,
            retry_budget_min_per_second: 3,
            fallback_on_policy: false,
            sessions: true,
            session_limit: 10_000,
            session_idle_minutes: 720,
            queue_ms: 2_000,
            reserve_percent: 5,
            cache_breakpoints: CacheBreakpoints::Sessions,
        }
    }
}

impl RoutingSettings {
    pub fn validate(&self) -> Result<Self, SettingsError> {
        const S: &str = "routing";
        check_range(S, "max_attempts", self.max_attempts, 1, 20)?;
        check_range(S, "retry_budget_percent", self.retry_budget_percent, 0, 100)?;
        check_range(S, "retry_budget_min_per_second", self.retry_budget_min_per_second, 0, 1000)?;
        check_range(S, "session_limit", self.session_limit, 100, 1_000_000)?;
        check_range(S, "session_idle_minutes", self.session_idle_minutes, 1, 10_080)?;
        check_range(S, "queue_ms", self.queue_ms, 0, 600_000)?;
        check_range(S, "reserve_percent", self.reserve_percent, 0, 100)?;
        Ok(self.clone())
    }

    /// The session table's bounds.
    pub fn session_limits(&self) -> crate::routing::session::SessionLimits {
        crate::routing::session::SessionLimits {
            max: self.session_limit as usize,
            idle_ms: u64::from(self.session_idle_minutes) * 60_000,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `auto`

/// One preset's weights as written: a weight left out keeps the preset's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct AutoWeightsForm {
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<f64>,
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom: Option<f64>,
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<f64>,
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<f64>,
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<f64>,
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<f64>,
}

impl AutoWeightsForm {
    /// `preset` with what this form writes in place of its weights.
    fn over(self, preset: Weights) -> Weights {
        Weights {
            health: self.health.unwrap_or(preset.health),
            headroom: self.headroom.unwrap_or(preset.headroom),
            affinity: self.affinity.unwrap_or(preset.affinity),
            latency: self.latency.unwrap_or(preset.latency),
            price: self.price.unwrap_or(preset.price),
            fit: self.fit.unwrap_or(preset.fit),
            capability: self.capability.unwrap_or(preset.capability),
        }
    }
}

/// The named weight presets of `auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum AutoPreset {
    /// `auto`, and a combo with `strategy = "auto"`.
    #[default]
    Balanced,
    /// `auto:fast`.
    Fast,
    /// `auto:cheap`.
    Cheap,
    /// `auto:smart`.
    Smart,
}

impl AutoPreset {
    pub const ALL: [Self; 4] = [Self::Balanced, Self::Fast, Self::Cheap, Self::Smart];

    /// The model name a client asks for it by.
    pub fn model(self) -> &'static str {
        match self {
            Self::Balanced => "auto",
            Self::Fast => "auto:fast",
            Self::Cheap => "auto:cheap",
            Self::Smart => "auto:smart",
        }
    }

    /// The preset a requested model names, if it names one.
    pub fn of_model(model: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.model() == model)
    }

    fn defaults(self) -> Weights {
        match self {
            Self::Balanced => Weights::BALANCED,
            Self::Fast => Weights::FAST,
            Self::Cheap => Weights::CHEAP,
            Self::Smart => Weights::SMART,
        }
    }
}

/// `[settings.auto]`: how `model = "auto"` (and `auto:fast`, `auto:cheap`, `auto:smart`, and
/// a combo's `strategy = "auto"`) chooses (see `routing::auto`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct AutoSettings {
    /// `auto`'s weights [default: health 3, headroom 1, affinity 2, latency 1, price 1, fit 2,
    /// capability 1].
    pub balanced: AutoWeightsForm,
    /// `auto:fast`'s [default: latency 5, price 0.5, capability 0.5, the rest as `auto`].
    pub fast: AutoWeightsForm,
    /// `auto:cheap`'s [default: price 6, latency 0.5, capability 0.5, the rest as `auto`].
    pub cheap: AutoWeightsForm,
    /// `auto:smart`'s [default: capability 6, price 0.25, latency 0.5, the rest as `auto`].
    pub smart: AutoWeightsForm,
    /// Only these `provider/model`s (or every model of a provider: `provider/*`) are
    /// candidates of `auto`; empty: every configured one [default empty].
    pub allow: Vec<String>,
}

impl AutoSettings {
    pub fn validate(&self) -> Result<Self, SettingsError> {
        for preset in AutoPreset::ALL {
            if let Some(field) = self.weights(preset).problem() {
                let name = match preset {
                    AutoPreset::Balanced => "balanced",
                    AutoPreset::Fast => "fast",
                    AutoPreset::Cheap => "cheap",
                    AutoPreset::Smart => "smart",
                };
                let problem = if field == "all" {
                    "every weight is 0: give at least one factor a weight above 0".to_owned()
                } else {
                    "must be a number of 0 or more".to_owned()
                };
                let field =
                    if field == "all" { name.to_owned() } else { format!("{name}.{field}") };
                return Err(SettingsError { field: format!("auto.{field}"), problem });
            }
        }
        for (i, pattern) in self.allow.iter().enumerate() {
            let ok = pattern.split_once('/').is_some_and(|(p, m)| !p.is_empty() && !m.is_empty());
            if !ok {
                return Err(SettingsError {
                    field: format!("auto.allow[{i}]"),
                    problem: format!("\"{pattern}\" is not provider/model or provider/*"),
                });
            }
        }
        Ok(self.clone())
    }

    /// The weights `preset` ranks by.
    pub fn weights(&self, preset: AutoPreset) -> Weights {
        let form = match preset {
            AutoPreset::Balanced => self.balanced,
            AutoPreset::Fast => self.fast,
            AutoPreset::Cheap => self.cheap,
            AutoPreset::Smart => self.smart,
        };
        form.over(preset.defaults())
    }

    /// Whether `provider/model` may be a candidate of `auto`.
    pub fn allows(&self, provider: &str, model: &str) -> bool {
        self.allow.is_empty()
            || self.allow.iter().any(|pattern| match pattern.split_once('/') {
                Some((p, "*")) => p == provider,
                Some((p, m)) => p == provider && m == model,
                None => false,
            })
    }
}

// ---------------------------------------------------------------------------------------------
// Usage aggregates and budgets

/// `[settings.usage]`: the aggregates behind `GET /api/usage`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct UsageSettings {
    /// Keep usage aggregates, check budgets and label metrics by provider and model [default
    /// true]. Off, each request still carries its own usage and cost in the request log.
    pub tracking: bool,
    /// Days of aggregates kept; older hours are deleted [default 400].
    pub retention_days: u32,
}

impl Default for UsageSettings {
    fn default() -> Self {
        Self { tracking: true, retention_days: 400 }
    }
}

impl UsageSettings {
    pub fn validate(&self) -> Result<Self, SettingsError> {
        check_range("usage", "retention_days", self.retention_days, 1, 3660)?;
        Ok(self.clone())
    }
}

/// `[settings.budgets]`: optional spend limits over everything and per local key, each
/// daily (UTC day) or monthly (UTC month). Spend is what finished requests cost at the prices
/// configured; a request whose price is not known adds nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetSettings {
    /// Every request, whatever key made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub daily: Option<BudgetLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub monthly: Option<BudgetLimit>,
    /// Per local key, by the key's name (`preset` for the `SWITCHYARD_API_KEY` key): one per
    /// tool, and a key revoked and made again under the same name keeps its tool's budget.
    pub keys: BTreeMap<String, KeyBudgets>,
}

/// A local key's budgets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(default, deny_unknown_fields)]
pub struct KeyBudgets {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub daily: Option<BudgetLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub monthly: Option<BudgetLimit>,
}

/// One spend limit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimit {
    /// USD, more than 0 and at most 1,000,000.
    pub limit_usd: f64,
    /// Refuse requests (429) once it is reached [default false: warn only].
    #[serde(default)]
    pub enforce: bool,
}

/// Validated budgets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetPolicy {
    pub overall: Limits,
    /// By local key name.
    pub keys: BTreeMap<String, Limits>,
}

/// A daily and a monthly limit, each optional.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub daily: Option<Limit>,
    pub monthly: Option<Limit>,
}

/// A validated spend limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub amount: crate::usage::Nanodollars,
    pub enforce: bool,
}

impl BudgetPolicy {
    /// Whether no budget is set at all (the request path then checks nothing).
    pub fn is_empty(&self) -> bool {
        self.overall == Limits::default() && self.keys.is_empty()
    }
}

impl BudgetSettings {
    pub fn validate(&self) -> Result<BudgetPolicy, SettingsError> {
        let overall = limits("budgets", self.daily, self.monthly)?;
        let mut keys = BTreeMap::new();
        for (name, budgets) in &self.keys {
            let at = format!("budgets.keys.{name}");
            if name.is_empty() || name.chars().count() > 64 {
                return Err(SettingsError {
                    field: at,
                    problem: "a local key's name is 1 to 64 characters".to_owned(),
                });
            }
            let set = limits(&at, budgets.daily, budgets.monthly)?;
            if set != Limits::default() {
                keys.insert(name.clone(), set);
            }
        }
        Ok(BudgetPolicy { overall, keys })
    }
}

fn limits(
    at: &str,
    daily: Option<BudgetLimit>,
    monthly: Option<BudgetLimit>,
) -> Result<Limits, SettingsError> {
    let limit = |period: &str, form: Option<BudgetLimit>| {
        form.map(|f| {
            crate::usage::Nanodollars::from_usd(f.limit_usd)
                .filter(|n| n.0 > 0 && n.0 <= 1_000_000 * 1_000_000_000)
                .map(|amount| Limit { amount, enforce: f.enforce })
                .ok_or_else(|| SettingsError {
                    field: format!("{at}.{period}.limit_usd"),
                    problem: format!(
                        "{} is out of range; allowed more than 0 and at most 1000000 (USD)",
                        f.limit_usd
                    ),
                })
        })
        .transpose()
    };
    Ok(Limits { daily: limit("daily", daily)?, monthly: limit("monthly", monthly)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_limit_that_is_not_a_positive_amount_is_refused_naming_its_field() {
        let limit = |usd| Some(BudgetLimit { limit_usd: usd, enforce: true });
        for usd in [0.0, -1.0, f64::NAN, f64::INFINITY, 1_000_001.0] {
            let form = BudgetSettings { monthly: limit(usd), ..BudgetSettings::default() };
            let error = form.validate().unwrap_err();
            assert_eq!(error.field, "budgets.monthly.limit_usd", "{usd}");
            assert!(error.problem.contains("at most 1000000"), "{}", error.problem);
        }
        let keyed = BudgetSettings {
            keys: BTreeMap::from([(
                "editor".to_owned(),
                KeyBudgets { daily: limit(-2.0), monthly: None },
            )]),
            ..BudgetSettings::default()
        };
        assert_eq!(keyed.validate().unwrap_err().field, "budgets.keys.editor.daily.limit_usd");
    }

    #[test]
    fn budgets_validate_to_nanodollars_and_keys_without_limits_are_dropped() {
        let form = BudgetSettings {
            daily: Some(BudgetLimit { limit_usd: 2.5, enforce: false }),
            monthly: None,
            keys: BTreeMap::from([("idle".to_owned(), KeyBudgets::default())]),
        };
        let policy = form.validate().unwrap();
        let daily = policy.overall.daily.unwrap();
        assert_eq!((daily.amount.0, daily.enforce), (2_500_000_000, false));
        assert!(policy.keys.is_empty());
        assert!(BudgetSettings::default().validate().unwrap().is_empty());
    }

    #[test]
    fn usage_retention_is_a_day_to_ten_years() {
        for days in [0, 3661] {
            let form = UsageSettings { retention_days: days, ..UsageSettings::default() };
            assert_eq!(form.validate().unwrap_err().field, "usage.retention_days");
        }
        assert_eq!(UsageSettings::default().validate().unwrap().retention_days, 400);
    }
}
