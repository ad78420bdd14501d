//! Team mode, the app's part (issue 20): what of this instance's config joins the team and under
//! which names, what this instance is called, and starting the sync task.
//!
//! What is shared: a provider's breaker when the provider has a credential (a key or an OAuth
//! token), named by its base URL; an API key's cooldown and its models' lockouts, named by the
//! key's HMAC under the team's salt. What is not: a keyless provider (a local model server is
//! this machine's own), OAuth tokens' cooldowns (each teammate signs in for themselves), the
//! secrets (each machine keeps its own in its keychain or environment) and the config itself.

use std::sync::Arc;

use switchyard_core::resilience::team::{TeamIdentities, TeamProvider};
use switchyard_core::resilience::{CredentialKind, HealthRegistry};
use switchyard_core::{Clock, CredentialKey, InstanceId};
use switchyard_store::StoreError;
use switchyard_store::team::{Identities, Team, TeamOptions};

use crate::config::{Config, TeamConfig};

/// The names under which `config`'s providers and credentials are shared, for the team whose
/// salt is `salt`.
pub fn identities(config: &Config, salt: &[u8]) -> TeamIdentities {
    let shared = |p: &crate::config::ProviderConfig| {
        p.credentials.iter().any(|c| c.kind == CredentialKind::Oauth || c.secret.is_some())
    };
    let providers = config
        .providers
        .iter()
        .filter(|p| shared(p))
        .map(|p| (p.id.clone(), TeamProvider::from_base_url(&p.base_url)));
    let credentials = config.providers.iter().flat_map(|p| {
        p.credentials.iter().filter(|c| c.kind == CredentialKind::ApiKey).filter_map(|c| {
            let secret = c.secret.as_ref()?;
            let key = CredentialKey { provider: p.id.clone(), credential: c.id.clone() };
            Some((key, Arc::from(secret.keyed_hash(salt))))
        })
    });
    TeamIdentities::new(providers, credentials)
}

/// This instance's name: the configured one, else the host's name and a random suffix (new at
/// every start, so a restarted instance never mistakes its predecessor's lease for its own).
pub fn instance_name(configured: Option<&InstanceId>) -> InstanceId {
    if let Some(name) = configured {
        return name.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect())
        .filter(|h: &String| !h.is_empty())
        .unwrap_or_else(|| "switchyard".to_owned());
    let mut suffix = [0u8; 3];
    // Without randomness the process id still tells two starts apart.
    let suffix = match getrandom::fill(&mut suffix) {
        Ok(()) => format!("{:02x}{:02x}{:02x}", suffix[0], suffix[1], suffix[2]),
        Err(_) => format!("{:06x}", std::process::id() & 0xff_ffff),
    };
    let host: String = host.chars().take(48).collect();
    InstanceId::new(format!("{host}-{suffix}"))
}

/// Joins `registry` to the team of `team` and starts syncing. The names are computed from the
/// config requests run on at the time (`config`), so credentials added later join the team.
pub fn start(
    team: &TeamConfig,
    registry: &Arc<HealthRegistry>,
    config: impl Fn() -> Arc<Config> + Send + Sync + 'static,
    clock: Arc<dyn Clock>,
) -> Result<Team, StoreError> {
    let instance = instance_name(team.instance.as_ref());
    let options = TeamOptions::new(instance.clone(), env!("CARGO_PKG_VERSION"));
    let names: Identities = Arc::new(move |salt: &[u8]| identities(&config(), salt));
    let started = Team::start(team.url.clone(), options, Arc::clone(registry), names, clock);
    if started.is_ok() {
        tracing::info!(%instance, "team mode: health state is shared through the team database");
    }
    started
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Sources;

    const CONFIG: &str = r#"
[[providers]]
id = "openai"
kind = "openai"
base_url = "https://API.openai.com/v1/"
credentials = [
  { id = "work", secret = "env:KEY_A" },
  { id = "personal", secret = "env:KEY_B" },
]

[[providers]]
id = "oai"
kind = "openai"
base_url = "https://api.openai.com/v1"
credentials = [{ id = "main", secret = "env:KEY_A" }]

[[providers]]
id = "ollama"
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
"#;

    fn config() -> Config {
        let env = |var: &str| match var {
            "KEY_A" => Some("sk-the-same-key-0000".to_owned()),
            "KEY_B" => Some("sk-another-key-1111".to_owned()),
            _ => None,
        };
        let form = crate::config::ConfigForm::from_toml(CONFIG).unwrap();
        form.validate(&Sources { env: &env, secrets: None }).unwrap()
    }

    fn key(provider: &str, credential: &str) -> CredentialKey {
        CredentialKey { provider: provider.into(), credential: credential.into() }
    }

    #[test]
    fn the_same_key_under_two_names_is_one_shared_credential_and_a_keyless_provider_stays_home() {
        let ids = identities(&config(), b"team salt");
        let work = ids.credential(&key("openai", "work")).unwrap();
        assert_eq!(Some(work), ids.credential(&key("oai", "main")));
        assert_ne!(Some(work), ids.credential(&key("openai", "personal")));
        assert_eq!(ids.provider(&"openai".into()), ids.provider(&"oai".into()));
        assert!(ids.provider(&"ollama".into()).is_none());
        assert!(!work.key_hash.contains("sk-"), "the name is a hash, never the key");
    }

    #[test]
    fn another_team_s_salt_names_the_same_key_differently() {
        let ours = identities(&config(), b"ours");
        let theirs = identities(&config(), b"theirs");
        assert_ne!(
            ours.credential(&key("openai", "work")).unwrap().key_hash,
            theirs.credential(&key("openai", "work")).unwrap().key_hash
        );
    }

    #[test]
    fn an_unnamed_instance_gets_a_new_name_at_every_start() {
        let (a, b) = (instance_name(None), instance_name(None));
        assert_ne!(a, b);
        assert!(a.as_str().len() <= 64);
        let named = InstanceId::new("alice-laptop");
        assert_eq!(instance_name(Some(&named)), named);
    }
}
