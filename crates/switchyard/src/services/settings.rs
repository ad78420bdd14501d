//! Settings pages: one section each, read whole and changed with a JSON merge patch, applied
//! live (the next request runs on them) and saved with the config.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use super::Services;
use super::catalog::{from_json, merge_patch};
use crate::config::{ConfigForm, EditError, Problem, ServerForm, SettingsForm, TeamForm};

/// A settings section, as named in the URL and in the config file's `[settings.*]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    ModelLockouts,
    CredentialCooldown,
    BreakerProfiles,
    Timeouts,
    Routing,
    Notifications,
    /// `[server]`: the port takes effect at the next start.
    Server,
    /// `[settings.usage]`: tracking on or off, and how long the aggregates are kept.
    Usage,
    /// `[settings.budgets]`: spend limits overall and per local key.
    Budgets,
    /// `[team]`: takes effect at the next start.
    Team,
}

impl Section {
    pub const ALL: [Self; 10] = [
        Self::ModelLockouts,
        Self::CredentialCooldown,
        Self::BreakerProfiles,
        Self::Timeouts,
        Self::Routing,
        Self::Notifications,
        Self::Server,
        Self::Usage,
        Self::Budgets,
        Self::Team,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ModelLockouts => "model_lockouts",
            Self::CredentialCooldown => "credential_cooldown",
            Self::BreakerProfiles => "breaker_profiles",
            Self::Timeouts => "timeouts",
            Self::Routing => "routing",
            Self::Notifications => "notifications",
            Self::Server => "server",
            Self::Usage => "usage",
            Self::Budgets => "budgets",
            Self::Team => "team",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Where the section lives in a config form, as a field path prefix.
    fn path(self) -> String {
        match self {
            Self::Server => "server".to_owned(),
            Self::Team => "team".to_owned(),
            other => format!("settings.{}", other.name()),
        }
    }

    fn read(self, form: &ConfigForm) -> Value {
        let s = &form.settings;
        let value = match self {
            Self::ModelLockouts => serde_json::to_value(&s.model_lockouts),
            Self::CredentialCooldown => serde_json::to_value(&s.credential_cooldown),
            Self::BreakerProfiles => serde_json::to_value(&s.breaker_profiles),
            Self::Timeouts => serde_json::to_value(&s.timeouts),
            Self::Routing => serde_json::to_value(&s.routing),
            Self::Notifications => serde_json::to_value(&s.notifications),
            Self::Server => serde_json::to_value(&form.server),
            Self::Usage => serde_json::to_value(&s.usage),
            Self::Budgets => serde_json::to_value(&s.budgets),
            Self::Team => serde_json::to_value(&form.team),
        };
        value.expect("settings forms serialize")
    }

    /// Replaces the section with `value`; errors name fields from the form's root.
    fn write(self, form: &mut ConfigForm, value: Value) -> Result<(), Problem> {
        self.write_section(form, value).map_err(|p| {
            let field = if p.field == "(body)" {
                self.path()
            } else {
                format!("{}.{}", self.path(), p.field)
            };
            Problem { field, problem: p.problem }
        })
    }

    fn write_section(self, form: &mut ConfigForm, value: Value) -> Result<(), Problem> {
        let s = &mut form.settings;
        match self {
            Self::ModelLockouts => s.model_lockouts = from_json(value)?,
            Self::CredentialCooldown => s.credential_cooldown = from_json(value)?,
            Self::BreakerProfiles => s.breaker_profiles = from_json(value)?,
            Self::Timeouts => s.timeouts = from_json(value)?,
            Self::Routing => s.routing = from_json(value)?,
            Self::Notifications => s.notifications = from_json(value)?,
            Self::Server => form.server = from_json(value)?,
            Self::Usage => s.usage = from_json(value)?,
            Self::Budgets => s.budgets = from_json(value)?,
            Self::Team => form.team = from_json(value)?,
        }
        Ok(())
    }
}

/// Every settings section at once.
#[derive(Clone, Debug, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct SettingsView {
    pub server: ServerForm,
    pub team: TeamForm,
    #[serde(flatten)]
    pub settings: SettingsForm,
}

impl Services {
    pub fn settings(&self) -> SettingsView {
        let form = &self.proxy.config().form;
        SettingsView {
            server: form.server.clone(),
            team: form.team.clone(),
            settings: form.settings.clone(),
        }
    }

    /// Which events the desktop app announces.
    pub fn notifications(&self) -> crate::config::NotificationSettings {
        self.proxy.config().form.settings.notifications.clone()
    }

    pub fn section(&self, section: Section) -> Value {
        section.read(&self.proxy.config().form)
    }

    /// Applies `patch` (RFC 7396) to one section. Field paths in errors start with the
    /// section's name (`model_lockouts.max_cooldown_ms`).
    pub async fn patch_section(&self, section: Section, patch: &Value) -> Result<Value, EditError> {
        if !patch.is_object() {
            return Err(Problem::new(section.name(), "expected a JSON object of fields").into());
        }
        let path = section.path();
        let in_section = |p: Problem| {
            let field = match p.field.strip_prefix(&path) {
                Some(rest) => format!("{}{rest}", section.name()),
                None => p.field,
            };
            Problem { field, problem: p.problem }
        };
        let (value, _) = self
            .edit(|form| {
                let mut merged = section.read(form);
                merge_patch(&mut merged, patch);
                section.write(form, merged)?;
                Ok(section.read(form))
            })
            .await
            .map_err(|e| match e {
                EditError::Invalid(p) => EditError::Invalid(in_section(p)),
                other => other,
            })?;
        Ok(value)
    }
}
