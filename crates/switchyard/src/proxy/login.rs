//! A client's own login, passed through (issue 28, RESILIENCE.md §11): a subscriber's Claude
//! Code or Codex keeps its sign-in in `Authorization` and sends the local key beside it in
//! `x-switchyard-key`. A `client` credential then means "the caller's own": its requests go out
//! with the caller's headers exactly as sent, to that provider's confirmed destination alone.
//!
//! Invariants:
//! - A login exists only when the local key came in `x-switchyard-key` (the front door checked
//!   it): without it, `Authorization` *is* the local key and is never passed on.
//! - It is the login of the API the caller speaks: it goes only to a provider of that dialect
//!   (Claude Code's token to Anthropic, Codex's to the Responses backend), never to a target of
//!   another dialect, and never to a credential that is not `client`.
//! - Nothing of it is stored or logged: the headers are marked sensitive, the token is kept as a
//!   [`Secret`] (redacted in `Debug`) only to scrub an upstream's echo of it, and the account is
//!   named by a digest.

use std::sync::{Arc, LazyLock};

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_providers::dialect::Dialect;
use switchyard_secrets::Secret;

use crate::server::SIDE_KEY_HEADER;

/// Headers that carry a client's login, in the order they are looked for. Codex sends its
/// `ChatGPT` account beside the token; the backend needs both.
const LOGIN_HEADERS: [&str; 3] = ["authorization", "x-api-key", "chatgpt-account-id"];

/// Keys the digest of a token with no account, so a digest in a trace cannot be checked
/// against a guessed token. Per process: a token changes at every refresh anyway.
static TOKEN_SALT: LazyLock<[u8; 32]> = LazyLock::new(|| {
    let mut salt = [0; 32];
    getrandom::fill(&mut salt).expect("the OS gives random bytes");
    salt
});

/// Keys the digest of an account id: the same across restarts, so a subscription benched until
/// its weekly reset is still benched after one.
const ACCOUNT_SALT: &[u8] = b"switchyard client account v1";

/// How many hex digits of the digest name an account.
const ACCOUNT_DIGITS: usize = 12;

/// The caller's own login, as it came.
pub(crate) struct ClientLogin {
    /// The headers that carry it, as sent, marked sensitive.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The token itself, to scrub from what an upstream says.
    token: Secret,
    /// The dialect the caller speaks: the API the login is for.
    dialect: Dialect,
    /// Who it signs in, as a digest: the account the client names, else the token.
    account: String,
}

impl std::fmt::Debug for ClientLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientLogin").field("account", &self.account).finish_non_exhaustive()
    }
}

impl ClientLogin {
    /// The login `headers` carry, when the local key came in `x-switchyard-key`. `account` is
    /// the account the request names (Claude Code's `metadata.user_id`), if it names one.
    pub(crate) fn of(
        headers: &HeaderMap,
        dialect: Dialect,
        account: Option<&str>,
    ) -> Option<Arc<Self>> {
        headers.get(SIDE_KEY_HEADER)?;
        let mut carried = Vec::new();
        let mut token = None;
        for name in LOGIN_HEADERS {
            let Some(value) = headers.get(name) else { continue };
            let mut value = value.clone();
            value.set_sensitive(true);
            if token.is_none() && name != "chatgpt-account-id" {
                let text = value.to_str().ok()?.trim();
                let bare = text.strip_prefix("Bearer ").or(text.strip_prefix("bearer "));
                token = Some(Secret::new(bare.unwrap_or(text).trim()));
            }
            carried.push((HeaderName::from_static(name), value));
        }
        let token = token.filter(|t| !t.expose().is_empty())?;
        let named = headers
            .get("chatgpt-account-id")
            .and_then(|v| v.to_str().ok())
            .or(account)
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let account = match named {
            Some(account) => digest(&Secret::new(account), ACCOUNT_SALT),
            None => format!("t{}", &digest(&token, &*TOKEN_SALT)[..ACCOUNT_DIGITS - 1]),
        };
        Some(Arc::new(Self { headers: carried, token, dialect, account }))
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

    /// The account's digest: the scope its health is kept under.
    pub(crate) fn account(&self) -> &str {
        &self.account
    }
}

/// The first [`ACCOUNT_DIGITS`] hex digits of HMAC-SHA256(`salt`, `value`).
fn digest(value: &Secret, salt: &[u8]) -> String {
    let mut hex = value.keyed_hash(salt);
    hex.truncate(ACCOUNT_DIGITS);
    hex
}

/// The `account_uuid` inside Claude Code's `metadata.user_id` (a JSON string holding
/// `device_id`, `account_uuid` and `session_id`).
pub(crate) fn claude_code_account(metadata: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        user_id: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct UserId {
        account_uuid: Option<String>,
    }
    let user_id = serde_json::from_str::<Metadata>(metadata).ok()?.user_id?;
    serde_json::from_str::<UserId>(&user_id).ok()?.account_uuid.filter(|s| !s.is_empty())
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

    #[test]
    fn a_login_exists_only_beside_a_side_key() {
        let bare = headers(&[("authorization", "Bearer sy-local")]);
        assert!(ClientLogin::of(&bare, Dialect::Anthropic, None).is_none());
        let side = headers(&[("authorization", "Bearer sk-ant-oat01-x"), (SIDE_KEY_HEADER, "sy")]);
        let login = ClientLogin::of(&side, Dialect::Anthropic, None).unwrap();
        assert_eq!(login.token().expose(), "sk-ant-oat01-x");
        let sent: Vec<_> = login.headers().collect();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (sent[0].0.as_str(), sent[0].1.to_str().unwrap()),
            ("authorization", "Bearer sk-ant-oat01-x")
        );
        assert!(sent[0].1.is_sensitive());
        assert!(!format!("{login:?}").contains("oat01"), "{login:?}");
        // A side key with no login of the client's is no login.
        assert!(
            ClientLogin::of(&headers(&[(SIDE_KEY_HEADER, "sy")]), Dialect::Anthropic, None)
                .is_none()
        );
    }

    #[test]
    fn the_account_names_the_scope_and_survives_a_token_refresh() {
        let with = |token: &str, account: &str| {
            let h = headers(&[
                ("authorization", token),
                ("chatgpt-account-id", account),
                (SIDE_KEY_HEADER, "sy"),
            ]);
            ClientLogin::of(&h, Dialect::Responses, None).unwrap()
        };
        let before = with("Bearer eyJ.old", "acct-1");
        let after = with("Bearer eyJ.new", "acct-1");
        assert_eq!(before.account(), after.account());
        assert_ne!(before.account(), with("Bearer eyJ.old", "acct-2").account());
        assert_eq!(before.account().len(), ACCOUNT_DIGITS);
        assert_eq!(before.headers().count(), 2, "the account id goes with the token");
        // With no account named, the token's keyed digest.
        let h = headers(&[("x-api-key", "sk-ant-oat01-y"), (SIDE_KEY_HEADER, "sy")]);
        let anonymous = ClientLogin::of(&h, Dialect::Anthropic, None).unwrap();
        assert!(anonymous.account().starts_with('t'));
        assert!(!anonymous.account().contains("oat"));
        let named = ClientLogin::of(&h, Dialect::Anthropic, Some("uuid-1")).unwrap();
        assert_ne!(named.account(), anonymous.account());
    }

    #[test]
    fn a_login_goes_only_to_the_api_its_client_speaks() {
        let h = headers(&[("authorization", "Bearer t"), (SIDE_KEY_HEADER, "sy")]);
        let login = ClientLogin::of(&h, Dialect::Responses, None).unwrap();
        assert!(login.fits(Dialect::Responses));
        assert!(!login.fits(Dialect::Anthropic) && !login.fits(Dialect::OpenAi));
    }

    #[test]
    fn claude_codes_account_is_read_from_its_metadata() {
        let metadata =
            r#"{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"a-1\",\"session_id\":\"s\"}"}"#;
        assert_eq!(claude_code_account(metadata).as_deref(), Some("a-1"));
        assert_eq!(claude_code_account(r#"{"user_id":"user_abc"}"#), None);
    }
}
