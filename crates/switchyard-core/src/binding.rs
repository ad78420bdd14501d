//! Where requests and secrets may go (issue 19, point 1; issue 26, point 1): a provider's
//! requests go only to destinations the user confirmed, and a secret reference (`env:VAR`,
//! `keychain:provider/credential`) is sent only to the destinations the user confirmed it for.
//!
//! A config is data anyone can hand over (an import, an API edit); the secret a reference
//! names is not, and neither are the prompts, the files an agent read and the tool calls it
//! will run. Without the first rule a shared config could point a keyless provider at its own
//! host, route every model to it, and receive every prompt (and answer with shell commands);
//! without the second it could name `env:OPENAI_API_KEY` there and receive the key. So each
//! credential's requests are checked against what the user confirmed: the [`Binding`]s it
//! needs are a *destination binding* (no reference: requests may go there) for each
//! destination its requests reach, and a *secret binding* (reference, destination) for each
//! secret it sends there. A credential missing any of them is benched until the user confirms.
//!
//! Invariants: a [`Binding`] never holds a secret value, only the reference text; a confirmed
//! secret binding confirms its destination too (a secret the user agreed to send to a host
//! implies requests to that host), never the other way round; a destination is
//! `scheme://host:port` with the host lower-cased and the default port written out, so
//! `https://API.example.com/v1` and `https://api.example.com:443/other` are one destination.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::CredentialKey;
use crate::resilience::SkipReason;

/// One confirmed (or to-be-confirmed) binding: requests may be sent to this destination, with
/// this reference's secret when there is one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct Binding {
    /// `env:VAR` or `keychain:provider/credential`: where the secret is, never the secret.
    /// `null` for a destination binding: requests (prompts, and whatever they carry) go
    /// there, no secret of this binding's.
    pub reference: Option<String>,
    /// `scheme://host:port`, normalised by [`destination`].
    pub destination: String,
}

impl Binding {
    /// A secret binding: `reference`'s secret may be sent to `destination`.
    pub fn new(reference: impl Into<String>, destination: impl Into<String>) -> Self {
        Self { reference: Some(reference.into()), destination: destination.into() }
    }

    /// A destination binding: requests may be sent to `destination`.
    pub fn destination_only(destination: impl Into<String>) -> Self {
        Self { reference: None, destination: destination.into() }
    }

    /// Sends no secret: only says where requests go.
    pub fn is_destination_only(&self) -> bool {
        self.reference.is_none()
    }
}

/// `env:VAR to https://host:443`, or `requests to https://host:443` for a destination
/// binding: what the user is asked to confirm.
impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reference {
            Some(reference) => write!(f, "{reference} to {}", self.destination),
            None => write!(f, "requests to {}", self.destination),
        }
    }
}

/// Everything the user confirmed. A secret binding confirms its destination as well, so a
/// state file from before destination bindings existed confirms every host a confirmed
/// secret goes to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Confirmed {
    secrets: HashSet<Binding>,
    destinations: HashSet<String>,
}

impl Confirmed {
    pub fn contains(&self, binding: &Binding) -> bool {
        match binding.reference {
            None => self.destinations.contains(&binding.destination),
            Some(_) => self.secrets.contains(binding),
        }
    }

    pub fn insert(&mut self, binding: Binding) {
        self.destinations.insert(binding.destination.clone());
        if !binding.is_destination_only() {
            self.secrets.insert(binding);
        }
    }
}

impl Extend<Binding> for Confirmed {
    fn extend<I: IntoIterator<Item = Binding>>(&mut self, bindings: I) {
        for binding in bindings {
            self.insert(binding);
        }
    }
}

impl FromIterator<Binding> for Confirmed {
    fn from_iter<I: IntoIterator<Item = Binding>>(bindings: I) -> Self {
        let mut confirmed = Self::default();
        confirmed.extend(bindings);
        confirmed
    }
}

/// What one credential's requests send where: every binding it needs confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exposure {
    pub key: CredentialKey,
    pub bindings: Vec<Binding>,
}

/// A credential that may not be used yet, and the bindings the user has to confirm for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unconfirmed {
    pub key: CredentialKey,
    pub missing: Vec<Binding>,
}

impl Unconfirmed {
    /// Why the credential is benched: `credential_unconfirmed` when a secret of it would go
    /// where it was never confirmed for (the graver case, whether or not the host is new),
    /// `destination_unconfirmed` when only where its requests go was never confirmed.
    pub fn reason(&self) -> SkipReason {
        if self.missing.iter().all(Binding::is_destination_only) {
            SkipReason::DestinationUnconfirmed
        } else {
            SkipReason::CredentialUnconfirmed
        }
    }
}

/// The destination a request sent to `url` reaches: `scheme://host:port`, host lower-cased,
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

/// The pure rule: which credentials of `exposures` need a binding that is not in `confirmed`,
/// in the order given, each with its missing bindings (deduplicated, in the order they appear).
pub fn unconfirmed(exposures: &[Exposure], confirmed: &Confirmed) -> Vec<Unconfirmed> {
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

/// The destination bindings to trust on the first start that knows them (the upgrade that
/// added destination bindings): the destinations of every credential whose secrets are all
/// confirmed already, so a user's local Ollama (no secret) keeps working. A credential still
/// waiting for a secret confirmation (an import not yet confirmed) gets no destination this
/// way: its host stays as unconfirmed as its secret.
pub fn trusted_destinations(exposures: &[Exposure], confirmed: &Confirmed) -> Vec<Binding> {
    let mut trusted: Vec<Binding> = Vec::new();
    for exposure in exposures {
        let (destinations, secrets): (Vec<&Binding>, Vec<&Binding>) =
            exposure.bindings.iter().partition(|b| b.is_destination_only());
        if !secrets.iter().all(|b| confirmed.contains(b)) {
            continue;
        }
        for binding in destinations {
            if !confirmed.contains(binding) && !trusted.contains(binding) {
                trusted.push(binding.clone());
            }
        }
    }
    trusted
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
        let confirmed = Confirmed::from_iter([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let exposures = [exposure("openai", "main", &[("env:OPENAI_API_KEY", OPENAI)])];
        assert_eq!(unconfirmed(&exposures, &confirmed), vec![]);
    }

    #[test]
    fn a_known_reference_sent_to_a_new_host_is_unconfirmed() {
        let confirmed = Confirmed::from_iter([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
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
        let confirmed = Confirmed::from_iter([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let exposures = [exposure("openai", "main", &[("env:OTHER_KEY", OPENAI)])];
        assert_eq!(unconfirmed(&exposures, &confirmed).len(), 1);
    }

    #[test]
    fn an_oauth_credential_needs_its_token_host_confirmed_as_well() {
        let token = "https://auth.example:443";
        let confirmed = Confirmed::from_iter([Binding::new("keychain:p/c", OPENAI)]);
        let exposures = [exposure("p", "c", &[("keychain:p/c", OPENAI), ("keychain:p/c", token)])];
        let found = unconfirmed(&exposures, &confirmed);
        assert_eq!(found[0].missing, vec![Binding::new("keychain:p/c", token)]);
    }

    #[test]
    fn a_pair_missing_twice_is_listed_once() {
        let exposures = [exposure("p", "c", &[("env:A", EVIL), ("env:A", EVIL)])];
        assert_eq!(unconfirmed(&exposures, &Confirmed::default())[0].missing.len(), 1);
    }

    fn keyless(provider: &str, destination: &str) -> Exposure {
        Exposure {
            key: key(provider, "default"),
            bindings: vec![Binding::destination_only(destination)],
        }
    }

    #[test]
    fn a_keyless_provider_at_a_new_host_is_unconfirmed_for_its_destination() {
        let confirmed = Confirmed::from_iter([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let found = unconfirmed(&[keyless("collector", EVIL)], &confirmed);
        assert_eq!(found[0].missing, vec![Binding::destination_only(EVIL)]);
        assert_eq!(found[0].reason(), SkipReason::DestinationUnconfirmed);
    }

    #[test]
    fn a_confirmed_secret_binding_confirms_its_destination() {
        let confirmed = Confirmed::from_iter([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        assert!(confirmed.contains(&Binding::destination_only(OPENAI)));
        assert_eq!(unconfirmed(&[keyless("local", OPENAI)], &confirmed), vec![]);
    }

    #[test]
    fn a_confirmed_destination_confirms_no_secret_sent_there() {
        let confirmed = Confirmed::from_iter([Binding::destination_only(EVIL)]);
        assert!(!confirmed.contains(&Binding::new("env:OPENAI_API_KEY", EVIL)));
        let mut sends = exposure("shared", "k", &[("env:OPENAI_API_KEY", EVIL)]);
        sends.bindings.push(Binding::destination_only(EVIL));
        let found = unconfirmed(&[sends], &confirmed);
        assert_eq!(found[0].missing, vec![Binding::new("env:OPENAI_API_KEY", EVIL)]);
        assert_eq!(found[0].reason(), SkipReason::CredentialUnconfirmed);
    }

    #[test]
    fn a_secret_to_a_new_host_is_benched_as_a_credential_not_a_destination() {
        let mut sends = exposure("shared", "k", &[("env:K", EVIL)]);
        sends.bindings.push(Binding::destination_only(EVIL));
        let found = unconfirmed(&[sends], &Confirmed::default());
        assert_eq!(found[0].missing.len(), 2, "{found:?}");
        assert_eq!(found[0].reason(), SkipReason::CredentialUnconfirmed);
    }

    #[test]
    fn first_use_trusts_the_destinations_of_credentials_whose_secrets_are_confirmed() {
        let local = "http://127.0.0.1:11434";
        let confirmed = Confirmed::from_iter([Binding::new("env:OPENAI_API_KEY", OPENAI)]);
        let mut own = exposure("openai", "main", &[("env:OPENAI_API_KEY", OPENAI)]);
        own.bindings.push(Binding::destination_only(OPENAI));
        let mut waiting = exposure("shared", "k", &[("env:OPENAI_API_KEY", EVIL)]);
        waiting.bindings.push(Binding::destination_only(EVIL));
        let exposures = [own, keyless("ollama", local), keyless("again", local), waiting];
        assert_eq!(
            trusted_destinations(&exposures, &confirmed),
            vec![Binding::destination_only(local)],
            "the keyless one once; not the host a secret still waits for; not one confirmed"
        );
    }

    #[test]
    fn a_binding_says_what_it_sends_where() {
        assert_eq!(Binding::new("env:K", EVIL).to_string(), format!("env:K to {EVIL}"));
        assert_eq!(Binding::destination_only(EVIL).to_string(), format!("requests to {EVIL}"));
    }
}
