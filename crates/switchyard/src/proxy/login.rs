//! A client's own login, passed through (RESILIENCE.md §11): a subscriber's Claude
//! Code or Codex keeps its sign-in in `Authorization` and sends the local key beside it in
//! `x-switchyard-key`. A `client` credential then means "the caller's own": its requests go out
//! with the caller's headers exactly as sent, to that provider's confirmed destination alone.
//!
//! Invariants:
//! - A login exists only when the local key came in `x-switchyard-key` (the front door checked
//!   it, and refused a local key where the login should be): without it, `Authorization` *is*
//!   the local key and is never passed on.
//! - It is the login of the API the caller speaks: it goes only to a provider of that dialect
//!   (Claude Code's token to Anthropic, Codex's to the Responses backend), never to a target of
//!   another dialect, and never to a credential that is not `client`.
//! - Only the header the login came in goes upstream (with Codex's `chatgpt-account-id`, which
//!   the backend needs beside the token): a second credential header the client also sent
//!   stays here.
//! - Its health is kept by what the token proves, never by what the caller claims: the scope is
//!   a keyed digest of the token (the key kept in the data directory, so a bench outlives a
//!   restart). An account id in the request is a claim anyone with a local key can make; keyed
//!   by it, one caller's bogus token could bench another's subscription.
//! - Nothing of it is stored or logged: the headers are marked sensitive, the token is kept as a
//!   [`Secret`] (redacted in `Debug`) only to scrub an upstream's echo of it, and the scope is
//!   named by the digest.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_providers::dialect::Dialect;
use switchyard_secrets::Secret;

use crate::keys::SIDE_KEY_HEADER;

/// Headers that carry a client's login, in the order they are looked for: the first present
/// is the login, and the only one of them that goes upstream.
const LOGIN_HEADERS: [&str; 2] = ["authorization", "x-api-key"];

/// Codex's `ChatGPT` account, sent beside its token: the backend needs both.
const ACCOUNT_HEADER: &str = "chatgpt-account-id";

/// How many hex digits of the token's digest name its scope (after a `t`).
const SCOPE_DIGITS: usize = 11;

/// The caller's own login, as it came.
pub(crate) struct ClientLogin {
    /// The headers that carry it, as sent, marked sensitive.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The token itself, to scrub from what an upstream says.
    token: Secret,
    /// The dialect the caller speaks: the API the login is for.
    dialect: Dialect,
    /// The scope its health is kept under: `t` and a keyed digest of the token.
    scope: String,
}

impl std::fmt::Debug for ClientLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientLogin").field("scope", &self.scope).finish_non_exhaustive()
    }
}

impl ClientLogin {
    /// The login `headers` carry, when the local key came in `x-switchyard-key`; `salt` keys
    /// the digest that scopes its health (see the module docs).
    pub(crate) fn of(headers: &HeaderMap, dialect: Dialect, salt: &Secret) -> Option<Arc<Self>> {
        headers.get(SIDE_KEY_HEADER)?;
        let (header, value) =
            LOGIN_HEADERS.into_iter().find_map(|name| Some((name, headers.get(name)?)))?;
        let text = value.to_str().ok()?.trim();
        let bare = text.strip_prefix("Bearer ").or(text.strip_prefix("bearer ")).unwrap_or(text);
        let token = Secret::new(bare.trim());
        if token.expose().is_empty() {
            return None;
        }
        let mut carried = vec![(HeaderName::from_static(header), sensitive(value))];
        if let Some(account) = headers.get(ACCOUNT_HEADER) {
            carried.push((HeaderName::from_static(ACCOUNT_HEADER), sensitive(account)));
        }
        let mut digest = token.keyed_hash(salt.expose().as_bytes());
        digest.truncate(SCOPE_DIGITS);
        let scope = format!("t{digest}");
        Some(Arc::new(Self { headers: carried, token, dialect, scope }))
    }

    /// Whether this login may go to a target speaking `dialect`: only to the API it is for.
    pub(crate) fn fits(&self, dialect: Dialect) -> bool {
        self.dialect == dialect
    }

    /// The headers to send, as the client sent them.
    pub(crate) fn headers(&self) -> impl Iterator<Item = (HeaderName, HeaderValue)> + '_ {
        self.headers.iter().cloned()
    }

    /// The token, to scrub from errors.
    pub(crate) fn token(&self) -> &Secret {
        &self.token
    }

    /// The token's scope: what its health is kept under.
    pub(crate) fn scope(&self) -> &str {
        &self.scope
    }
}

fn sensitive(value: &HeaderValue) -> HeaderValue {
    let mut value = value.clone();
    value.set_sensitive(true);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn salt() -> Secret {
        Secret::new("a salt of the data directory's")
    }

    fn login(pairs: &[(&'static str, &str)], dialect: Dialect) -> Option<Arc<ClientLogin>> {
        ClientLogin::of(&headers(pairs), dialect, &salt())
    }

    #[test]
    fn a_login_exists_only_beside_a_side_key() {
        assert!(login(&[("authorization", "Bearer sy-local")], Dialect::Anthropic).is_none());
        let side = [("authorization", "Bearer sk-ant-oat01-x"), (SIDE_KEY_HEADER, "sy")];
        let found = login(&side, Dialect::Anthropic).unwrap();
        assert_eq!(found.token().expose(), "sk-ant-oat01-x");
        let sent: Vec<_> = found.headers().collect();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (sent[0].0.as_str(), sent[0].1.to_str().unwrap()),
            ("authorization", "Bearer sk-ant-oat01-x")
        );
        assert!(sent[0].1.is_sensitive());
        assert!(!format!("{found:?}").contains("oat01"), "{found:?}");
        // A side key with no login of the client's is no login.
        assert!(login(&[(SIDE_KEY_HEADER, "sy")], Dialect::Anthropic).is_none());
    }

    #[test]
    fn only_the_header_the_login_came_in_goes_upstream() {
        let both = [
            ("authorization", "Bearer sk-ant-oat01-x"),
            ("x-api-key", "sk-ant-api03-another"),
            (SIDE_KEY_HEADER, "sy"),
        ];
        let found = login(&both, Dialect::Anthropic).unwrap();
        let names: Vec<String> = found.headers().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names, ["authorization"], "the second credential header stays here");
        let codex = [
            ("authorization", "Bearer eyJ.t"),
            (ACCOUNT_HEADER, "acct-1"),
            (SIDE_KEY_HEADER, "sy"),
        ];
        let found = login(&codex, Dialect::Responses).unwrap();
        let names: Vec<String> = found.headers().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names, ["authorization", ACCOUNT_HEADER], "Codex's account goes with it");
    }

    #[test]
    fn the_scope_is_what_the_token_proves_never_the_account_the_caller_claims() {
        let with = |token: &str, account: &str| {
            let pairs =
                [("authorization", token), (ACCOUNT_HEADER, account), (SIDE_KEY_HEADER, "sy")];
            login(&pairs, Dialect::Responses).unwrap().scope().to_owned()
        };
        let victim = with("Bearer eyJ.victims", "acct-1");
        assert_eq!(victim, with("Bearer eyJ.victims", "acct-2"), "the claim changes nothing");
        assert_ne!(victim, with("Bearer eyJ.bogus", "acct-1"), "another token, another scope");
        assert_eq!(victim.len(), 1 + SCOPE_DIGITS);
        assert!(victim.starts_with('t') && !victim.contains("victims"));
        let other_salt = ClientLogin::of(
            &headers(&[("authorization", "Bearer eyJ.victims"), (SIDE_KEY_HEADER, "sy")]),
            Dialect::Responses,
            &Secret::new("another data directory"),
        )
        .unwrap();
        assert_ne!(other_salt.scope(), victim, "keyed: a digest cannot be checked elsewhere");
    }

    #[test]
    fn a_login_goes_only_to_the_api_its_client_speaks() {
        let found =
            login(&[("authorization", "Bearer t"), (SIDE_KEY_HEADER, "sy")], Dialect::Responses)
                .unwrap();
        assert!(found.fits(Dialect::Responses));
        assert!(!found.fits(Dialect::Anthropic) && !found.fits(Dialect::OpenAi));
    }
}
