//! Secrets bound to destinations (issue 19, point 1): a secret reference (`env:VAR`,
//! `keychain:provider/credential`) may be sent only to the hosts the user confirmed it for.
//!
//! A config is data anyone can hand over (an import, an API edit); the secret a reference
//! names is not. Without this rule a shared config could point a provider at its own host and
//! name `env:OPENAI_API_KEY`, and the first request would deliver the key. So each (reference,
//! destination) pair a credential would send is checked against the pairs the user confirmed;
//! a credential with any unconfirmed pair is benched until the user confirms it.
//!
//! Invariants: a [`Binding`] never holds a secret value, only the reference text; a destination
//! is `scheme://host:port` with the host lower-cased and the default port written out, so
//! `https://API.example.com/v1` and `https://api.example.com:443/other` are one destination.

use std::collections::HashSet;
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::CredentialKey;

/// One confirmed (or to-be-confirmed) pair: this reference may be sent to this destination.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct Binding {
    /// `env:VAR` or `keychain:provider/credential`: where the secret is, never the secret.
    pub reference: String,
    /// `scheme://host:port`, normalised by [`destination`].
    pub destination: String,
}

impl Binding {
    pub fn new(reference: impl Into<String>, destination: impl Into<String>) -> Self {
        Self { reference: reference.into(), destination: destination.into() }
    }
}

/// What one credential's requests send where: every pair it needs confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exposure {
    pub key: CredentialKey,
    pub bindings: Vec<Binding>,
}

/// A credential that may not be used yet, and the pairs the user has to confirm for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unconfirmed {
    pub key: CredentialKey,
    pub missing: Vec<Binding>,
}

/// The destination a secret sent to `url` reaches: `scheme://host:port`, host lower-cased,
/// default port explicit. `None` when `url` has no scheme or host (config validation refuses
/// such URLs first, so the rule never sees one).
pub fn destination(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.to_ascii_lowercase();
    let port = match (uri.port_u16(), scheme.as_str()) {
        (Some(port), _) => port,
        (None, "https") => 443,
        (None, "http") => 80,
        (None, _) => return None,
    };
    Some(format!("{scheme}://{host}:{port}"))
}

/// The pure rule: which credentials of `exposures` send a pair that is not in `confirmed`, in
/// the order given, each with its missing pairs (deduplicated, in the order they appear).
pub fn unconfirmed<S: BuildHasher>(
    exposures: &[Exposure],
    confirmed: &HashSet<Binding, S>,
) -> Vec<Unconfirmed> {
    exposures
        .iter()
        .filter_map(|exposure| {
            let mut missing: Vec<Binding> = Vec::new();
            for binding in &exposure.bindings {
                if !confirmed.contains(binding) && !missing.contains(binding) {
                    missing.push(binding.clone());
                }
            }
            (!missing.is_empty()).then(|| Unconfirmed { key: exposure.key.clone(), missing })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(provider: &str, credential: &str) -> CredentialKey {
        CredentialKey { provider: provider.into(), credential: credential.into() }
    }

    fn exposure(provider: &str, credential: &str, pairs: &[(&str, &str)]) -> Exposure {
        Exposure {
            key: key(provider, credential),
            bindings: pairs.iter().map(|(r, d)| Binding::new(*r, *d)).collect(),
        }
    }

    const OPENAI: &str = "https://api.openai.com:443";
    const EVIL: &str = "https://collector.example:443";

    #[test]
    fn destinations_are_scheme_host_and_explicit_port_lower_cased() {
        assert_eq!(destination("https://API.OpenAI.com/v1").as_deref(), Some(OPENAI));
        assert_eq!(destination("https://api.openai.com:443/v1/x?y=1").as_deref(), Some(OPENAI));
        assert_eq!(
            destination("http://127.0.0.1:8080/v1").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(destination("http://localhost/v1").as_deref(), Some("http://localhost:80"));
        assert_eq!(destination("http://[::1]:9/v1").as_deref(), Some("http://[::1]:9"));
        assert_eq!(destination("not a url"), None);
    }

    #[test]
    fn a_port_is_part_of_the_destination() {
        assert_ne!(destination("http://127.0.0.1:8080"), destination("http://127.0.0.1:8081"));
        assert_ne!(destination("http://example.com"), destination("https://example.com"));
    }

    #[test]
    fn a_credential_whose_pairs_are_all_confirmed_is_usable() {
        let confirmed = HashSet::from([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let exposures = [exposure("openai", "main", &[("env:OPENAI_API_KEY", OPENAI)])];
        assert_eq!(unconfirmed(&exposures, &confirmed), vec![]);
    }

    #[test]
    fn a_known_reference_sent_to_a_new_host_is_unconfirmed() {
        let confirmed = HashSet::from([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let exposures = [
            exposure("openai", "main", &[("env:OPENAI_API_KEY", OPENAI)]),
            exposure("shared", "k", &[("env:OPENAI_API_KEY", EVIL)]),
        ];
        assert_eq!(
            unconfirmed(&exposures, &confirmed),
            vec![Unconfirmed {
                key: key("shared", "k"),
                missing: vec![Binding::new("env:OPENAI_API_KEY", EVIL)],
            }]
        );
    }

    #[test]
    fn a_new_reference_to_a_known_host_is_unconfirmed_too() {
        let confirmed = HashSet::from([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let exposures = [exposure("openai", "main", &[("env:OTHER_KEY", OPENAI)])];
        assert_eq!(unconfirmed(&exposures, &confirmed).len(), 1);
    }

    #[test]
    fn an_oauth_credential_needs_its_token_host_confirmed_as_well() {
        let token = "https://auth.example:443";
        let confirmed = HashSet::from([Binding::new("keychain:p/c", OPENAI)]);
        let exposures = [exposure("p", "c", &[("keychain:p/c", OPENAI), ("keychain:p/c", token)])];
        let found = unconfirmed(&exposures, &confirmed);
        assert_eq!(found[0].missing, vec![Binding::new("keychain:p/c", token)]);
    }

    #[test]
    fn a_pair_missing_twice_is_listed_once() {
        let exposures = [exposure("p", "c", &[("env:A", EVIL), ("env:A", EVIL)])];
        assert_eq!(unconfirmed(&exposures, &HashSet::new())[0].missing.len(), 1);
    }
}
