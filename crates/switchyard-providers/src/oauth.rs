//! OAuth 2.0 for upstreams that take bearer tokens from an identity provider: the client
//! registration, the authorization URL of a PKCE login (RFC 6749 §4.1, RFC 7636) and the two
//! token-endpoint calls, authorization-code exchange (§4.1.3) and refresh (§6).
//!
//! This module holds no state: which token is current, when to refresh, the refresh breaker
//! and the loopback redirect listener belong to the app's OAuth manager.
//!
//! Invariants:
//! - No token, code or verifier ever appears in `Debug`, `Display` or an error: they travel in
//!   [`Secret`](switchyard_secrets::Secret), and text quoted from the identity provider's error
//!   bodies is scrubbed of every secret the request carried.
//! - [`OAuthError`] tells the identity provider failing (unreachable, timing out, 5xx, 429,
//!   garbage on 200: [`OAuthError::breaker_fault`] is `Some`, and the refresh breaker counts it)
//!   apart from the identity provider refusing us (`invalid_grant`: sign in again; any other
//!   4xx: the client registration is wrong). A refusal proves the identity provider is up.

mod pkce;
mod token;

use std::fmt;

use url::Url;

pub use self::pkce::{CHALLENGE_METHOD, Pkce, PkceError, random_state, s256_challenge};
pub use self::token::{TokenClient, TokenResponse, read_token_response};
use crate::executor::SendFailure;
use switchyard_core::outcome::{BreakerFault, TimeoutPhase, TransportFault};

/// One OAuth client at one identity provider: where to send the user and the token requests,
/// and who we are. Validated on construction; cheap to clone.
#[derive(Clone, PartialEq, Eq)]
pub struct Registration {
    authorize_url: Url,
    token_url: Url,
    client_id: String,
    scopes: Vec<String>,
}

/// A registration value that breaks a rule; `field` names it (`token_url`, `scopes[1]`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct RegistrationError {
    pub field: String,
    pub problem: String,
}

impl Registration {
    /// Validates every part: both URLs absolute `http`/`https` with a host, no user
    /// information (a password in a URL ends up in logs) and no fragment (RFC 6749 §3.1);
    /// a non-empty client id; scopes that are RFC 6749 §3.3 scope tokens.
    pub fn new(
        authorize_url: &str,
        token_url: &str,
        client_id: &str,
        scopes: &[String],
    ) -> Result<Self, RegistrationError> {
        let authorize_url = endpoint("authorize_url", authorize_url)?;
        let token_url = endpoint("token_url", token_url)?;
        if client_id.trim().is_empty() {
            return Err(problem("client_id", "must not be empty"));
        }
        if client_id.chars().any(char::is_control) {
            return Err(problem("client_id", "must not contain control characters"));
        }
        for (i, scope) in scopes.iter().enumerate() {
            let token_char = |c: char| c == '!' || matches!(c, '#'..='[' | ']'..='~');
            if scope.is_empty() || !scope.chars().all(token_char) {
                return Err(RegistrationError {
                    field: format!("scopes[{i}]"),
                    problem:
                        "a scope must be non-empty printable ASCII without spaces, '\"' or '\\'"
                            .to_owned(),
                });
            }
        }
        Ok(Self {
            authorize_url,
            token_url,
            client_id: client_id.to_owned(),
            scopes: scopes.to_vec(),
        })
    }

    pub fn authorize_url(&self) -> &str {
        self.authorize_url.as_str()
    }

    pub fn token_url(&self) -> &str {
        self.token_url.as_str()
    }

    /// The token endpoint, parsed once.
    pub fn token_endpoint(&self) -> &Url {
        &self.token_url
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("authorize_url", &self.authorize_url.as_str())
            .field("token_url", &self.token_url.as_str())
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .finish()
    }
}

fn problem(field: &str, problem: &str) -> RegistrationError {
    RegistrationError { field: field.to_owned(), problem: problem.to_owned() }
}

fn endpoint(field: &str, text: &str) -> Result<Url, RegistrationError> {
    let url = Url::parse(text.trim())
        .map_err(|e| problem(field, &format!("is not an absolute URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(problem(field, "must be an http:// or https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(problem(field, "must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(problem(field, "must not carry a user name or password"));
    }
    if url.fragment().is_some() {
        return Err(problem(field, "must not have a #fragment (RFC 6749 §3.1)"));
    }
    Ok(url)
}

/// Where to send the user's browser to sign in (RFC 6749 §4.1.1 with RFC 7636 §4.3). Any
/// query the registration's authorize URL already has is kept.
pub fn authorization_url(
    registration: &Registration,
    redirect_uri: &str,
    state: &str,
    challenge: &str,
) -> String {
    let mut url = registration.authorize_url.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &registration.client_id)
            .append_pair("redirect_uri", redirect_uri);
        if !registration.scopes.is_empty() {
            query.append_pair("scope", &registration.scopes.join(" "));
        }
        query
            .append_pair("state", state)
            .append_pair("code_challenge", challenge)
            .append_pair("code_challenge_method", CHALLENGE_METHOD);
    }
    url.into()
}

/// Why a token request failed. No variant carries a token, code or verifier.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// No connection, a reset, or no answer within the deadline.
    #[error("the identity provider is unreachable ({})", unreachable_reason(*.0))]
    Unreachable(SendFailure),
    /// 5xx, or 429: the identity provider is down or asks us to back off.
    #[error("the identity provider is failing (HTTP {status})")]
    IdpFailing { status: u16 },
    /// A 2xx whose body is not a token response.
    #[error("the identity provider answered with an invalid token response: {0}")]
    InvalidResponse(&'static str),
    /// The refresh token (or authorization code) is revoked, expired or already used: the
    /// credential must sign in again.
    #[error("the identity provider refused the grant (invalid_grant{}); sign in again", with_description(.description.as_deref()))]
    InvalidGrant { description: Option<String> },
    /// Any other refusal (`invalid_client`, `invalid_scope`, ...): the client registration or
    /// the request is wrong, and retrying will not help.
    #[error("the identity provider refused the request (HTTP {status}{}{})", .error.as_deref().map(|e| format!(", {e}")).unwrap_or_default(), with_description(.description.as_deref()))]
    Rejected { status: u16, error: Option<String>, description: Option<String> },
    /// The operating system gave no randomness for a verifier or state.
    #[error("the operating system gave no randomness: {0}")]
    Random(String),
}

fn with_description(description: Option<&str>) -> String {
    description.map(|d| format!(": {d}")).unwrap_or_default()
}

fn unreachable_reason(failure: SendFailure) -> &'static str {
    match failure {
        SendFailure::Transport(TransportFault::ConnectRefused) => "connection refused",
        SendFailure::Transport(TransportFault::Dns) => "name not resolved",
        SendFailure::Transport(TransportFault::Tls) => "TLS handshake failed",
        SendFailure::Transport(TransportFault::ResetBeforeHeaders) => "connection reset",
        SendFailure::Transport(TransportFault::OutOfDescriptors) => {
            "this process is out of file descriptors"
        }
        SendFailure::Timeout(TimeoutPhase::Connect) => "connect timed out",
        SendFailure::Timeout(TimeoutPhase::Headers | TimeoutPhase::FirstEvent) => {
            "no answer within the deadline"
        }
        SendFailure::TooLarge(_) => "its answer is larger than a token response can be",
    }
}

impl OAuthError {
    /// What the refresh breaker charges: `Some` exactly when the identity provider itself is
    /// failing, `None` when it answered (even with a refusal) or the fault is ours.
    pub fn breaker_fault(&self) -> Option<BreakerFault> {
        match self {
            Self::Unreachable(SendFailure::Transport(fault)) => match fault {
                TransportFault::ConnectRefused | TransportFault::Dns => Some(BreakerFault::Connect),
                TransportFault::Tls => Some(BreakerFault::Tls),
                TransportFault::ResetBeforeHeaders => Some(BreakerFault::Reset),
                // Ours: the identity provider was never reached.
                TransportFault::OutOfDescriptors => None,
            },
            Self::Unreachable(SendFailure::Timeout(_)) => Some(BreakerFault::Timeout),
            // A token response too large to read is a broken identity provider.
            Self::Unreachable(SendFailure::TooLarge(_))
            | Self::IdpFailing { .. }
            | Self::InvalidResponse(_) => Some(BreakerFault::Transient),
            Self::InvalidGrant { .. } | Self::Rejected { .. } | Self::Random(_) => None,
        }
    }

    /// A stable machine name for the UI and the health API.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unreachable(_) => "idp_unreachable",
            Self::IdpFailing { .. } => "idp_failing",
            Self::InvalidResponse(_) => "idp_invalid_response",
            Self::InvalidGrant { .. } => "invalid_grant",
            Self::Rejected { .. } => "idp_rejected",
            Self::Random(_) => "no_randomness",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn registration(authorize: &str) -> Registration {
        Registration::new(
            authorize,
            "https://idp.example/token",
            "switchyard desktop",
            &["openid".to_owned(), "model.request".to_owned()],
        )
        .unwrap()
    }

    fn query(url: &str) -> HashMap<String, String> {
        Url::parse(url).unwrap().query_pairs().into_owned().collect()
    }

    #[test]
    fn authorization_url_carries_every_pkce_login_parameter() {
        let url = authorization_url(
            &registration("https://idp.example/authorize"),
            "http://127.0.0.1:49152/callback",
            "st4te",
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        );
        assert!(url.starts_with("https://idp.example/authorize?"), "{url}");
        let q = query(&url);
        let want = [
            ("response_type", "code"),
            ("client_id", "switchyard desktop"),
            ("redirect_uri", "http://127.0.0.1:49152/callback"),
            ("scope", "openid model.request"),
            ("state", "st4te"),
            ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
            ("code_challenge_method", "S256"),
        ];
        for (k, v) in want {
            assert_eq!(q.get(k).map(String::as_str), Some(v), "{k} in {url}");
        }
        assert_eq!(q.len(), want.len());
        assert!(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A49152%2Fcallback"), "{url}");
    }

    #[test]
    fn authorization_url_keeps_the_registered_query_and_omits_an_empty_scope() {
        let reg = Registration::new(
            "https://idp.example/authorize?audience=api",
            "https://idp.example/token",
            "c",
            &[],
        )
        .unwrap();
        let q = query(&authorization_url(&reg, "http://127.0.0.1:1/cb", "s", "c"));
        assert_eq!(q.get("audience").map(String::as_str), Some("api"));
        assert!(!q.contains_key("scope"));
    }

    #[test]
    fn registration_errors_name_the_field() {
        let field = |a: &str, t: &str, c: &str, s: &[&str]| {
            let scopes: Vec<String> = s.iter().map(|s| (*s).to_owned()).collect();
            Registration::new(a, t, c, &scopes).unwrap_err().field
        };
        let ok = "https://idp.example/x";
        assert_eq!(field("idp.example/authorize", ok, "c", &[]), "authorize_url");
        assert_eq!(field("ftp://idp.example/a", ok, "c", &[]), "authorize_url");
        assert_eq!(field(ok, "https://user:pw@idp.example/token", "c", &[]), "token_url");
        assert_eq!(field(ok, "https://idp.example/token#x", "c", &[]), "token_url");
        assert_eq!(field(ok, ok, " ", &[]), "client_id");
        assert_eq!(field(ok, ok, "c", &["openid", "a b"]), "scopes[1]");
        assert_eq!(field(ok, ok, "c", &[""]), "scopes[0]");
        assert!(Registration::new("http://127.0.0.1:9/a", ok, "c", &[]).is_ok());
    }

    #[test]
    fn only_identity_provider_failures_charge_the_refresh_breaker() {
        use SendFailure as F;
        let fault = |e: OAuthError| e.breaker_fault();
        assert_eq!(
            fault(OAuthError::Unreachable(F::Transport(TransportFault::ConnectRefused))),
            Some(BreakerFault::Connect)
        );
        assert_eq!(
            fault(OAuthError::Unreachable(F::Timeout(TimeoutPhase::Headers))),
            Some(BreakerFault::Timeout)
        );
        assert_eq!(fault(OAuthError::IdpFailing { status: 503 }), Some(BreakerFault::Transient));
        assert_eq!(fault(OAuthError::InvalidResponse("x")), Some(BreakerFault::Transient));
        assert_eq!(fault(OAuthError::InvalidGrant { description: None }), None);
        let rejected = OAuthError::Rejected { status: 401, error: None, description: None };
        assert_eq!(fault(rejected), None);
    }
}
