//! Where requests and secrets may go: a provider's
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
//! implies requests to that host), never the other way round.
//!
//! A destination is `scheme://host:port/path`: the host lower-cased, the default port written
//! out, and the base URL's path normalised (percent-escapes decoded and written one way, `.`
//! and `..` resolved as a URL parser resolves them, empty segments and a trailing `/` left
//! out), so `https://API.example.com/v1/` and `https://api.example.com:443/v1` are one
//! destination. A confirmed destination covers itself and every path below it, segment by
//! segment: on a gateway that separates tenants by path
//! (`gateway.ai.cloudflare.com/v1/{account}/…`), confirming `…/v1/mine` confirms neither
//! `…/v1/other` nor `…/v1/mine-too`, while a destination with no path covers its whole host.

use std::collections::HashSet;
use std::fmt::{self, Write as _};

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
    /// `scheme://host:port/path`, normalised by [`destination`].
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

    /// Sends a client's own login (a `client` credential to a host other than its preset's):
    /// confirmed only by a person told exactly that, never along with destinations.
    pub fn is_login(&self) -> bool {
        self.reference.as_deref().is_some_and(|r| r.starts_with(LOGIN_PREFIX))
    }
}

/// How a client's login appears as a binding's reference: `login:claude`, `login:chatgpt`.
/// Switchyard keeps no such secret; it sends the one each request carries.
pub const LOGIN_PREFIX: &str = "login:";

/// The reference of the login a client of `anthropic` (else OpenAI's) API passes through.
pub fn login_reference(anthropic: bool) -> &'static str {
    if anthropic { "login:claude" } else { "login:chatgpt" }
}

/// What a login reference is, for people: `your Claude login`.
pub fn login_name(reference: &str) -> Option<&'static str> {
    match reference {
        "login:claude" => Some("your Claude login"),
        "login:chatgpt" => Some("your ChatGPT login"),
        other if other.starts_with(LOGIN_PREFIX) => Some("your login"),
        _ => None,
    }
}

/// `env:VAR to https://host:443`, or `requests to https://host:443` for a destination
/// binding: what the user is asked to confirm.
impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reference {
            Some(reference) => match login_name(reference) {
                Some(login) => write!(f, "{login} to {}", self.destination),
                None => write!(f, "{reference} to {}", self.destination),
            },
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
    /// Whether `binding` is confirmed: by a binding of the same reference (or, for a
    /// destination binding, any confirmed destination) at its destination or above it.
    pub fn contains(&self, binding: &Binding) -> bool {
        let mut above = prefixes(&binding.destination);
        match &binding.reference {
            None => above.any(|d| self.destinations.contains(d)),
            Some(reference) => above.any(|destination| {
                // One allocation per level; a destination has a handful.
                let at = Binding::new(reference.clone(), destination);
                self.secrets.contains(&at)
            }),
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

/// The destination a request sent to `url` reaches: `scheme://host:port/path`, host
/// lower-cased, default port explicit, path normalised (see the module's documentation); the
/// query and fragment are not part of it. `None` when `url` has no scheme or host (config
/// validation refuses such URLs first, so the rule never sees one).
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
    let mut destination = format!("{scheme}://{host}:{port}");
    for segment in segments(uri.path()) {
        destination.push('/');
        destination.push_str(&segment);
    }
    Some(destination)
}

/// A path's segments as a URL parser resolves them and a server reads them: each one's
/// percent-escapes decoded and written back the one way (only what a segment cannot hold
/// literally is escaped, in upper case), `.` dropped, `..` taking the segment before it away
/// (never above the root), empty ones dropped.
fn segments(path: &str) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    for raw in path.split('/') {
        let decoded = percent_decoded(raw);
        match decoded.as_slice() {
            b"" | b"." => {}
            b".." => {
                kept.pop();
            }
            bytes => kept.push(escaped(bytes)),
        }
    }
    kept
}

fn percent_decoded(segment: &str) -> Vec<u8> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(&h), Some(&l)) = (bytes.get(i + 1), bytes.get(i + 2))
            && let (Some(h), Some(l)) = (hex(h), hex(l))
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(u8::MAX));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// `bytes` as a path segment: RFC 3986's `pchar`s literally, everything else `%XX`.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Whether `destination` has a path: a binding without one covers its whole host.
pub fn has_path(destination: &str) -> bool {
    prefixes(destination).nth(1).is_some()
}

/// `destination` and each destination above it, the longest first and its origin
/// (`scheme://host:port`) last.
fn prefixes(destination: &str) -> impl Iterator<Item = &str> {
    let origin_end = destination
        .find("://")
        .map(|at| at + 3)
        .and_then(|start| destination[start..].find('/').map(|at| start + at))
        .unwrap_or(destination.len());
    let mut end = Some(destination.len());
    std::iter::from_fn(move || {
        let current = end?;
        end = (current > origin_end)
            .then(|| destination[origin_end..current].rfind('/').map(|at| origin_end + at))
            .flatten();
        Some(&destination[..current])
    })
}

/// Whether a binding confirmed at `confirmed` covers `destination`: the same place, or one
/// below it segment by segment.
pub fn covers(confirmed: &str, destination: &str) -> bool {
    prefixes(destination).any(|above| above == confirmed)
}

/// The stored bindings of a version whose destinations had no path, narrowed to the paths
/// the config sends them to (a one-time migration): each host-wide
/// binding in `stored` is replaced by the bindings of `exposures` it covers (the same
/// reference, or a destination binding for one, at a path on its host), so what the user
/// confirmed keeps working and no other tenant's path on that host inherits it. A host-wide
/// binding that no credential uses now is let go.
pub fn narrowed(stored: &[Binding], exposures: &[Exposure]) -> Narrowed {
    let mut narrowed = Narrowed::default();
    let needed = exposures.iter().flat_map(|e| &e.bindings);
    for old in stored.iter().filter(|b| !has_path(&b.destination)) {
        narrowed.removed.push(old.clone());
        for new in needed.clone() {
            let same = new.reference == old.reference
                || (new.reference.is_none() && old.reference.is_some());
            if same && covers(&old.destination, &new.destination) && !narrowed.added.contains(new) {
                narrowed.added.push(new.clone());
            }
        }
    }
    narrowed
}

/// What [`narrowed`] changes: bindings to let go, and the bindings to record in their place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Narrowed {
    pub removed: Vec<Binding>,
    pub added: Vec<Binding>,
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

    #[test]
    fn a_login_binding_is_named_for_people_and_is_no_destination() {
        let login = Binding::new(login_reference(true), "https://relay.example:443");
        assert!(login.is_login() && !login.is_destination_only());
        assert_eq!(login.to_string(), "your Claude login to https://relay.example:443");
        let key = Binding::new("env:OPENAI_API_KEY", "https://api.openai.com:443");
        assert!(!key.is_login());
        assert_eq!(login_name(login_reference(false)), Some("your ChatGPT login"));
    }

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
    fn destinations_are_scheme_host_explicit_port_and_the_normalised_path() {
        let openai = |path: &str| format!("{OPENAI}{path}");
        for (url, expected) in [
            ("https://API.OpenAI.com/v1", openai("/v1")),
            ("https://api.openai.com:443/v1/x?y=1#z", openai("/v1/x")),
            ("https://api.openai.com/v1/", openai("/v1")),
            ("https://api.openai.com//v1//x/", openai("/v1/x")),
            ("https://api.openai.com/v1/./a/../b", openai("/v1/b")),
            ("https://api.openai.com/v1/%2e%2E/b", openai("/b")),
            ("https://api.openai.com/v1/.%2e/.%2E/../x", openai("/x")),
            ("https://api.openai.com/v1/%61cct", openai("/v1/acct")),
            ("https://api.openai.com/v1/a%2fb", openai("/v1/a%2Fb")),
            ("https://api.openai.com/v1/a%20b", openai("/v1/a%20b")),
            ("https://api.openai.com/", openai("")),
            ("https://api.openai.com", openai("")),
        ] {
            assert_eq!(destination(url), Some(expected), "{url}");
        }
        assert_eq!(
            destination("http://127.0.0.1:8080/v1").as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!(destination("http://localhost/v1").as_deref(), Some("http://localhost:80/v1"));
        assert_eq!(destination("http://[::1]:9/v1").as_deref(), Some("http://[::1]:9/v1"));
        assert_eq!(destination("not a url"), None);
    }

    #[test]
    fn a_confirmed_path_covers_the_paths_below_it_segment_by_segment_and_nothing_else() {
        let mine = "https://gateway.ai.cloudflare.com:443/v1/mine";
        let below = |path: &str| format!("https://gateway.ai.cloudflare.com:443/v1/{path}");
        assert!(covers(mine, mine));
        assert!(covers(mine, &below("mine/openai")));
        for other in [below("mine-too"), below("other"), below(""), below("min")] {
            assert!(!covers(mine, other.trim_end_matches('/')), "{other}");
        }
        assert!(covers("https://gateway.ai.cloudflare.com:443", mine), "an origin covers its host");
        assert!(!covers("https://gateway.ai.cloudflare.com:4430", mine));
        let confirmed = Confirmed::from_iter([Binding::new("env:CF", mine)]);
        assert!(confirmed.contains(&Binding::new("env:CF", below("mine/openai"))));
        assert!(confirmed.contains(&Binding::destination_only(below("mine/openai"))));
        assert!(!confirmed.contains(&Binding::new("env:CF", below("other/openai"))));
        assert!(!confirmed.contains(&Binding::destination_only(below("other"))));
        // A path dressed up to look like another is normalised before it is compared.
        let dressed = destination("https://gateway.ai.cloudflare.com/v1/mine/../other").unwrap();
        assert!(!confirmed.contains(&Binding::new("env:CF", dressed)));
        let escaped = destination("https://gateway.ai.cloudflare.com/v1/%6Dine/openai").unwrap();
        assert!(confirmed.contains(&Binding::new("env:CF", escaped)));
        assert!(!has_path("https://a:443") && has_path(mine));
    }

    #[test]
    fn host_wide_bindings_of_an_older_version_narrow_to_the_paths_the_config_uses() {
        let host = "https://gateway.ai.cloudflare.com:443";
        let mine = format!("{host}/v1/mine/openai");
        let mut cf = exposure("cf", "k", &[("env:CF", mine.as_str())]);
        cf.bindings.push(Binding::destination_only(mine.clone()));
        let local = keyless("ollama", "http://127.0.0.1:11434/v1");
        let stored = vec![
            Binding::new("env:CF", host),
            Binding::destination_only("http://127.0.0.1:11434"),
            Binding::new("env:GONE", OPENAI),
            Binding::new("env:NEW", format!("{OPENAI}/v1")),
        ];
        let narrowed = narrowed(&stored, &[cf, local]);
        assert_eq!(narrowed.removed, stored[..3].to_vec(), "host-wide ones only");
        assert_eq!(
            narrowed.added,
            vec![
                Binding::new("env:CF", mine.clone()),
                Binding::destination_only(mine),
                Binding::destination_only("http://127.0.0.1:11434/v1"),
            ],
            "what the config sends there; nothing for a reference no one uses now"
        );
        assert_eq!(super::narrowed(&narrowed.added, &[]), Narrowed::default(), "runs once");
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
