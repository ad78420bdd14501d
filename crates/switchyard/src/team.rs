//! Team mode, the app's part: what of this instance's config joins the team and under
//! which names, what this instance is called, and starting the sync task.
//!
//! What is shared: a provider's breaker when the provider has a credential (a key or an OAuth
//! token) and its base URL names the same server on every machine (never a loopback
//! address; a private one only with `share = true`), named by its base URL; an API key's cooldown and its models' lockouts, named by the
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
        let reach = match reach(&p.base_url) {
            Reach::Public => true,
            Reach::Private => p.share,
            Reach::Loopback => false,
        };
        reach && p.credentials.iter().any(|c| c.kind == CredentialKind::Oauth || c.secret.is_some())
    };
    let providers = config
        .providers
        .iter()
        .filter(|p| shared(p))
        .map(|p| (p.id.clone(), TeamProvider::from_base_url(&p.base_url)));
    let credentials = config.providers.iter().flat_map(|p| {
        p.credentials.iter().filter(|c| c.kind == CredentialKind::ApiKey).filter_map(|c| {
            // A credential whose secret cannot be read yet has no name in the team yet.
            let secret = c.secret.as_ref()?.current().ok()?;
            let key = CredentialKey { provider: p.id.clone(), credential: c.id.clone() };
            Some((key, Arc::from(secret.keyed_hash(salt))))
        })
    });
    TeamIdentities::new(providers, credentials)
}

/// Where a base URL's server is, as far as the team is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// This machine (`localhost`, `127.0.0.0/8`, `::1`, `0.0.0.0`): another server on every
    /// teammate's machine, even at the same URL. Never shared.
    Loopback,
    /// A private or otherwise non-public address (RFC 1918, link-local, CGNAT, unique local,
    /// documentation and benchmarking ranges) or a name that only a local network resolves
    /// (one label, `.local`, `.internal`, `.lan`, `.home.arpa`): the same server for a team on
    /// one network, another for a teammate at home. Shared only with `share = true`.
    Private,
    /// Anything else: one server for everyone.
    Public,
}

/// Where the server of `base_url` is (see [`Reach`]). Decided from the URL alone, never by
/// resolving a name: a name that resolves to a private address is the user's to mark.
pub fn reach(base_url: &str) -> Reach {
    let Ok(url) = url::Url::parse(base_url) else { return Reach::Loopback };
    match url.host() {
        None => Reach::Loopback,
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if name == "localhost" || name.ends_with(".localhost") {
                Reach::Loopback
            } else if !name.contains('.')
                || [".local", ".internal", ".lan", ".home.arpa", ".intranet", ".corp"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
            {
                Reach::Private
            } else {
                Reach::Public
            }
        }
        Some(url::Host::Ipv4(ip)) => reach_v4(ip),
        Some(url::Host::Ipv6(ip)) => {
            if let Some(v4) = ip.to_ipv4_mapped() {
                return reach_v4(v4);
            }
            let first = ip.segments()[0];
            if ip.is_loopback() || ip.is_unspecified() {
                Reach::Loopback
            } else if (first & 0xfe00) == 0xfc00      // unique local, fc00::/7
                || (first & 0xffc0) == 0xfe80         // link-local, fe80::/10
                || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
                || ip.is_multicast()
            {
                Reach::Private
            } else {
                Reach::Public
            }
        }
    }
}

fn reach_v4(ip: std::net::Ipv4Addr) -> Reach {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() || ip.is_unspecified() {
        Reach::Loopback
    } else if ip.is_private()
        || ip.is_link_local()
        || ip.is_documentation()
        || ip.is_broadcast()
        || ip.is_multicast()
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240
        || a == 0
    {
        Reach::Private
    } else {
        Reach::Public
    }
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
        form.validate(&Sources { env: &env, secrets: None, defer_keychain: false }).unwrap()
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
    fn a_local_model_server_never_joins_the_team_even_with_a_key() {
        let toml = r#"
[[providers]]
id = "ollama"
kind = "openai"
base_url = "http://localhost:11434/v1"
credentials = [{ id = "dummy", secret = "env:KEY_A" }]
share = true

[[providers]]
id = "lmstudio"
kind = "openai"
base_url = "http://127.0.0.1:1234/v1"
credentials = [{ id = "dummy", secret = "env:KEY_A" }]

[[providers]]
id = "v6"
kind = "openai"
base_url = "http://[::1]:8000/v1"
credentials = [{ id = "dummy", secret = "env:KEY_A" }]

[[providers]]
id = "gateway"
kind = "openai"
base_url = "http://10.1.2.3:8080/v1"
credentials = [{ id = "k", secret = "env:KEY_A" }]

[[providers]]
id = "shared-gateway"
kind = "openai"
base_url = "http://10.1.2.3:8080/openai"
credentials = [{ id = "k", secret = "env:KEY_A" }]
share = true

[[providers]]
id = "public"
kind = "openai"
base_url = "https://api.openai.com/v1"
credentials = [{ id = "k", secret = "env:KEY_A" }]
"#;
        let env = |var: &str| (var == "KEY_A").then(|| "sk-the-same-key-0000".to_owned());
        let form = crate::config::ConfigForm::from_toml(toml).unwrap();
        let config =
            form.validate(&Sources { env: &env, secrets: None, defer_keychain: false }).unwrap();
        let ids = identities(&config, b"salt");
        for home in ["ollama", "lmstudio", "v6", "gateway"] {
            assert!(ids.provider(&home.into()).is_none(), "{home} was shared");
            assert!(
                ids.credential(&key(home, "dummy")).is_none()
                    && ids.credential(&key(home, "k")).is_none()
            );
        }
        assert!(
            ids.provider(&"shared-gateway".into()).is_some(),
            "share = true on a private address"
        );
        assert!(ids.credential(&key("shared-gateway", "k")).is_some());
        assert!(ids.provider(&"public".into()).is_some());
    }

    #[test]
    fn addresses_are_told_apart_without_resolving_a_name() {
        let cases = [
            ("http://localhost:11434/v1", Reach::Loopback),
            ("http://ollama.localhost/v1", Reach::Loopback),
            ("http://127.8.9.10/v1", Reach::Loopback),
            ("http://0.0.0.0:8000", Reach::Loopback),
            ("http://[::1]:8000", Reach::Loopback),
            ("http://[::ffff:127.0.0.1]:8000", Reach::Loopback),
            ("http://192.168.1.20:8000", Reach::Private),
            ("http://172.20.0.5", Reach::Private),
            ("http://100.100.1.1", Reach::Private),
            ("http://169.254.1.1", Reach::Private),
            ("http://192.0.2.2:4000", Reach::Private),
            ("http://[fd00::2]:4000", Reach::Private),
            ("http://[fe80::1]:4000", Reach::Private),
            ("http://gateway:4000", Reach::Private),
            ("http://llm.corp.internal", Reach::Private),
            ("http://box.local:4000", Reach::Private),
            ("https://api.anthropic.com/v1", Reach::Public),
            ("https://8.8.8.8/v1", Reach::Public),
            ("https://[2606:4700::1111]/v1", Reach::Public),
        ];
        for (url, want) in cases {
            assert_eq!(reach(url), want, "{url}");
        }
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
