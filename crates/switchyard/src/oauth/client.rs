//! The OAuth client a provider is configured with: the serde form that config files and the
//! UI edit, validated once into the providers crate's [`Registration`].
//!
//! Invariant: a form that validates names only http(s) endpoints with a host, a client id and
//! well-formed scopes; errors name the field (`oauth.token_url`) and never echo a URL, since
//! people paste URLs with credentials in them.

use serde::{Deserialize, Serialize};
use switchyard_providers::oauth::Registration;

use super::OAuthError;

/// How Switchyard signs in to a provider's identity provider: a public client using
/// authorization code + PKCE through a loopback redirect (RFC 8252), so no client secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(deny_unknown_fields)]
#[ts(export)]
pub struct OAuthClient {
    /// The authorization endpoint the browser is sent to.
    pub authorize_url: String,
    /// The token endpoint for code exchange and refresh.
    pub token_url: String,
    pub client_id: String,
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl OAuthClient {
    /// Checks every field; the error's field is `oauth.<name>`.
    pub fn validate(&self) -> Result<Registration, OAuthError> {
        Registration::new(&self.authorize_url, &self.token_url, &self.client_id, &self.scopes)
            .map_err(|e| OAuthError::Config {
                field: format!("oauth.{}", e.field),
                problem: e.problem,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OAuthClient {
        OAuthClient {
            authorize_url: "https://idp.example/authorize".to_owned(),
            token_url: "https://idp.example/token".to_owned(),
            client_id: "switchyard".to_owned(),
            scopes: vec!["openid".to_owned()],
        }
    }

    #[test]
    fn a_valid_client_becomes_a_registration() {
        let reg = client().validate().unwrap();
        assert_eq!(reg.token_url(), "https://idp.example/token");
        assert_eq!(reg.scopes(), ["openid"]);
    }

    #[test]
    fn errors_name_the_field_under_oauth() {
        let field = |c: OAuthClient| match c.validate().unwrap_err() {
            OAuthError::Config { field, .. } => field,
            other => panic!("not a config error: {other}"),
        };
        assert_eq!(
            field(OAuthClient { token_url: "file:///etc/passwd".into(), ..client() }),
            "oauth.token_url"
        );
        assert_eq!(
            field(OAuthClient { authorize_url: "nope".into(), ..client() }),
            "oauth.authorize_url"
        );
        assert_eq!(field(OAuthClient { client_id: String::new(), ..client() }), "oauth.client_id");
        assert_eq!(
            field(OAuthClient { scopes: vec!["a b".into()], ..client() }),
            "oauth.scopes[0]"
        );
    }

    #[test]
    fn a_url_with_a_password_is_refused_without_being_echoed() {
        let c =
            OAuthClient { token_url: "https://me:hunter2@idp.example/token".into(), ..client() };
        let shown = c.validate().unwrap_err().to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn unknown_fields_are_rejected_and_scopes_default_to_none() {
        let err = serde_json::from_str::<OAuthClient>(
            r#"{"authorize_url":"a","token_url":"b","client_id":"c","client_secret":"s"}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let ok: OAuthClient =
            serde_json::from_str(r#"{"authorize_url":"a","token_url":"b","client_id":"c"}"#)
                .unwrap();
        assert!(ok.scopes.is_empty());
    }
}
