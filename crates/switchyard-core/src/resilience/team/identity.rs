//! What a shared entry is called across the team.
//!
//! Two teammates may give the same key different local names (`openai/work`, `oai/main`) or
//! give the same name to different keys (`openai/personal`). So shared state is never keyed by
//! config-local names: a provider is its base URL, normalised; a credential is that plus a keyed
//! hash of its secret (HMAC-SHA256 under a salt kept in the team's database, computed where
//! secrets live, so the database never holds anything a key could be recovered from).
//!
//! Invariants:
//! - One local name maps to at most one shared name; one shared name may stand for several
//!   local ones (two local providers on one base URL share a breaker in the team).
//! - Only providers and credentials the map names take part; everything else stays local (a
//!   keyless local model server is this machine's own business).

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::ids::{CandidateKey, CredentialKey, ModelId, ProviderId};

/// A provider as the team knows it: `scheme://host[:port]/path` of its base URL, lower-case
/// scheme and host, without a default port, a trailing `/`, a query or a fragment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TeamProvider(Arc<str>);

impl TeamProvider {
    /// The shared name of the provider at `base_url`. Not a URL parser: the URL was validated
    /// with the config; this only removes the spellings of one address that differ.
    pub fn from_base_url(base_url: &str) -> Self {
        let url = base_url.trim();
        let url = url.split(['?', '#']).next().unwrap_or(url);
        let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
        let scheme = scheme.to_ascii_lowercase();
        let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        // Credentials in the URL are not part of the address (and must not be stored).
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host_port = host_port.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "https" => Some(":443"),
            "http" => Some(":80"),
            _ => None,
        };
        let host_port = match default_port {
            Some(port) => host_port.strip_suffix(port).unwrap_or(&host_port),
            None => &host_port,
        };
        let path = path.trim_end_matches('/');
        Self(format!("{scheme}://{host_port}{path}").into())
    }

    /// A name as stored (read back from the database).
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A credential as the team knows it: its provider and the keyed hash of its secret (hex).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TeamCredential {
    pub provider: TeamProvider,
    pub key_hash: Arc<str>,
}

/// A model on a credential, as the team knows it: the scope of a shared lockout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TeamModel {
    pub credential: TeamCredential,
    pub model: ModelId,
}

/// The two-way map between this instance's names and the team's.
#[derive(Clone, Debug, Default)]
pub struct TeamIdentities {
    providers: FxHashMap<ProviderId, TeamProvider>,
    local_providers: FxHashMap<TeamProvider, Vec<ProviderId>>,
    credentials: FxHashMap<CredentialKey, TeamCredential>,
    local_credentials: FxHashMap<TeamCredential, Vec<CredentialKey>>,
}

impl TeamIdentities {
    /// `providers`: the shared providers and their shared names; `credentials`: each shared
    /// credential's local key and the keyed hash of its secret. A credential of a provider that
    /// is not shared is left out.
    pub fn new(
        providers: impl IntoIterator<Item = (ProviderId, TeamProvider)>,
        credentials: impl IntoIterator<Item = (CredentialKey, Arc<str>)>,
    ) -> Self {
        let mut map = Self::default();
        for (local, team) in providers {
            map.local_providers.entry(team.clone()).or_default().push(local.clone());
            map.providers.insert(local, team);
        }
        for (local, key_hash) in credentials {
            let Some(provider) = map.providers.get(&local.provider).cloned() else { continue };
            let team = TeamCredential { provider, key_hash };
            map.local_credentials.entry(team.clone()).or_default().push(local.clone());
            map.credentials.insert(local, team);
        }
        map
    }

    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    pub fn provider(&self, local: &ProviderId) -> Option<&TeamProvider> {
        self.providers.get(local)
    }

    pub fn credential(&self, local: &CredentialKey) -> Option<&TeamCredential> {
        self.credentials.get(local)
    }

    pub fn model(&self, local: &CandidateKey) -> Option<TeamModel> {
        let credential = self.credentials.get(&local.credential_key())?.clone();
        Some(TeamModel { credential, model: local.model.clone() })
    }

    /// The local providers a shared one stands for (none: not configured here).
    pub fn local_providers(&self, team: &TeamProvider) -> &[ProviderId] {
        self.local_providers.get(team).map_or(&[], Vec::as_slice)
    }

    pub fn local_credentials(&self, team: &TeamCredential) -> &[CredentialKey] {
        self.local_credentials.get(team).map_or(&[], Vec::as_slice)
    }

    pub fn local_models(&self, team: &TeamModel) -> Vec<CandidateKey> {
        self.local_credentials(&team.credential)
            .iter()
            .map(|c| CandidateKey {
                provider: c.provider.clone(),
                credential: c.credential.clone(),
                model: team.model.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_base_url_name_one_provider() {
        let same = [
            "https://api.openai.com/v1",
            "https://API.OpenAI.com/v1/",
            "HTTPS://api.openai.com:443/v1",
            "https://api.openai.com/v1?ignored=1",
            " https://api.openai.com/v1#frag ",
        ];
        for url in same {
            assert_eq!(TeamProvider::from_base_url(url).as_str(), "https://api.openai.com/v1");
        }
    }

    #[test]
    fn ports_paths_and_schemes_that_differ_name_different_providers() {
        let names: Vec<TeamProvider> = [
            "https://api.openai.com/v1",
            "http://api.openai.com/v1",
            "https://api.openai.com:8443/v1",
            "https://gateway.example/openai",
            "https://gateway.example/anthropic",
            "http://127.0.0.1:11434",
        ]
        .into_iter()
        .map(TeamProvider::from_base_url)
        .collect();
        let distinct: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert_eq!(names[5].as_str(), "http://127.0.0.1:11434");
    }

    #[test]
    fn user_and_password_in_a_base_url_are_not_part_of_its_name() {
        let name = TeamProvider::from_base_url("https://user:hunter2@proxy.example/v1");
        assert_eq!(name.as_str(), "https://proxy.example/v1");
    }

    fn key(provider: &str, credential: &str) -> CredentialKey {
        CredentialKey { provider: provider.into(), credential: credential.into() }
    }

    #[test]
    fn the_same_key_under_two_local_names_is_one_shared_credential_and_maps_back_to_both() {
        let openai = TeamProvider::from_base_url("https://api.openai.com/v1");
        let ids = TeamIdentities::new(
            [("openai".into(), openai.clone()), ("oai".into(), openai.clone())],
            [
                (key("openai", "work"), Arc::from("h1")),
                (key("oai", "main"), Arc::from("h1")),
                (key("openai", "personal"), Arc::from("h2")),
            ],
        );
        let work = ids.credential(&key("openai", "work")).unwrap().clone();
        assert_eq!(Some(&work), ids.credential(&key("oai", "main")));
        assert_ne!(Some(&work), ids.credential(&key("openai", "personal")));
        assert_eq!(ids.local_credentials(&work), [key("openai", "work"), key("oai", "main")]);
        assert_eq!(ids.local_providers(&openai).len(), 2);
        let model = ids.model(&CandidateKey::new("oai", "main", "gpt-4o")).unwrap();
        assert_eq!(
            ids.local_models(&model),
            [
                CandidateKey::new("openai", "work", "gpt-4o"),
                CandidateKey::new("oai", "main", "gpt-4o")
            ]
        );
    }

    #[test]
    fn what_the_map_does_not_name_stays_local() {
        let ids = TeamIdentities::new(
            [("openai".into(), TeamProvider::from_base_url("https://api.openai.com/v1"))],
            [(key("ollama", "default"), Arc::from("h"))],
        );
        assert!(ids.provider(&"ollama".into()).is_none());
        assert!(ids.credential(&key("ollama", "default")).is_none(), "its provider is not shared");
        assert!(ids.model(&CandidateKey::new("openai", "unknown", "m")).is_none());
        let stranger = TeamProvider::from_base_url("https://elsewhere.example");
        assert!(ids.local_providers(&stranger).is_empty());
    }
}
