//! The token endpoint: authorization-code exchange (RFC 6749 §4.1.3, with the PKCE verifier of
//! RFC 7636 §4.5) and refresh (§6), form-encoded, over the executor's pooled client.
//!
//! Invariants:
//! - The whole exchange (headers and body) is bounded by one deadline: a token endpoint that
//!   accepts the connection and never answers cannot hold a request forever.
//! - The body of a 2xx is read field by field from a JSON value, never through a typed serde
//!   error: serde quotes the offending value in its messages, and that value may be a token.
//! - Text quoted from an error body is cut to printable ASCII, has every secret the request
//!   carried replaced by `***`, and is bounded in length.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue};
use serde_json::Value;
use switchyard_core::outcome::TimeoutPhase;
use switchyard_secrets::Secret;
use url::form_urlencoded;

use super::{OAuthError, Registration};
use crate::executor::{Executor, MAX_TOKEN_RESPONSE, SendFailure, UpstreamRequest};

/// Longest `error_description` quoted in an error.
const MAX_DESCRIPTION: usize = 300;

/// Longest `error` code quoted; RFC 6749 codes are short.
const MAX_ERROR_CODE: usize = 64;

/// A 2xx token response (RFC 6749 §5.1).
#[derive(Clone, PartialEq, Eq)]
pub struct TokenResponse {
    pub access_token: Secret,
    /// Absent when the identity provider keeps the current refresh token (common on refresh):
    /// the caller keeps the one it has.
    pub refresh_token: Option<Secret>,
    /// `None` when the response says nothing about expiry.
    pub expires_in: Option<Duration>,
    pub scope: Option<String>,
}

impl fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenResponse")
            .field("access_token", &self.access_token)
            .field("refresh_token", &self.refresh_token)
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish()
    }
}

/// Calls token endpoints. Cheap to clone (the executor's client is shared).
#[derive(Clone, Debug)]
pub struct TokenClient {
    executor: Executor,
    deadline: Duration,
}

impl TokenClient {
    /// `deadline` bounds each call as a whole, response body included.
    pub fn new(executor: Executor, deadline: Duration) -> Self {
        Self { executor, deadline }
    }

    /// Trades an authorization code for tokens (RFC 6749 §4.1.3, RFC 7636 §4.5).
    /// `redirect_uri` must be the one the authorization request carried.
    pub async fn exchange_code(
        &self,
        registration: &Registration,
        code: &Secret,
        redirect_uri: &str,
        verifier: &Secret,
    ) -> Result<TokenResponse, OAuthError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code.expose())
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("client_id", registration.client_id())
            .append_pair("code_verifier", verifier.expose())
            .finish();
        self.post(registration, body, &[code, verifier]).await
    }

    /// Trades a refresh token for a new access token (RFC 6749 §6). The scope is left out, so
    /// the identity provider grants the scope of the original login.
    pub async fn refresh(
        &self,
        registration: &Registration,
        refresh_token: &Secret,
    ) -> Result<TokenResponse, OAuthError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "refresh_token")
            .append_pair("refresh_token", refresh_token.expose())
            .append_pair("client_id", registration.client_id())
            .finish();
        self.post(registration, body, &[refresh_token]).await
    }

    async fn post(
        &self,
        registration: &Registration,
        body: String,
        sent: &[&Secret],
    ) -> Result<TokenResponse, OAuthError> {
        let request = UpstreamRequest {
            url: registration.token_endpoint().clone(),
            headers: vec![
                (CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded")),
                (ACCEPT, HeaderValue::from_static("application/json")),
                (HeaderName::from_static("cache-control"), HeaderValue::from_static("no-store")),
            ],
            body: Bytes::from(body),
        };
        let exchange = async {
            let response = self.executor.send(request, self.deadline).await?;
            let status = response.status.as_u16();
            let body = response.into_bytes(self.deadline, MAX_TOKEN_RESPONSE).await?;
            Ok((status, body))
        };
        let (status, body) = match tokio::time::timeout(self.deadline, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(failure)) => return Err(OAuthError::Unreachable(failure)),
            Err(_) => {
                return Err(OAuthError::Unreachable(SendFailure::Timeout(TimeoutPhase::Headers)));
            }
        };
        read_token_response(status, &body, sent)
    }
}

/// Reads a token endpoint's answer. `sent` are the secrets the request carried: they are
/// scrubbed from any text quoted from the body. Pure, so every status and body shape is tested
/// without a server.
pub fn read_token_response(
    status: u16,
    body: &[u8],
    sent: &[&Secret],
) -> Result<TokenResponse, OAuthError> {
    match status {
        200..=299 => read_success(body),
        429 | 500..=599 => Err(OAuthError::IdpFailing { status }),
        _ => {
            let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let field = |name: &str, max: usize| {
                json.get(name).and_then(Value::as_str).map(|text| scrub(text, sent, max))
            };
            let error = field("error", MAX_ERROR_CODE);
            let description = field("error_description", MAX_DESCRIPTION);
            if (400..=499).contains(&status) && error.as_deref() == Some("invalid_grant") {
                return Err(OAuthError::InvalidGrant { description });
            }
            Err(OAuthError::Rejected { status, error, description })
        }
    }
}

fn read_success(body: &[u8]) -> Result<TokenResponse, OAuthError> {
    let json: Value = serde_json::from_slice(body)
        .map_err(|_| OAuthError::InvalidResponse("the body is not JSON"))?;
    let text = |name: &str| json.get(name).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
    let access_token = text("access_token")
        .ok_or(OAuthError::InvalidResponse("no access_token string in the body"))?;
    // RFC 6749 §7.1: we only know how to send bearer tokens. Absent counts as bearer, as many
    // providers leave it out.
    if let Some(kind) = json.get("token_type")
        && !kind.as_str().is_some_and(|k| k.eq_ignore_ascii_case("bearer"))
    {
        return Err(OAuthError::InvalidResponse("token_type is not \"Bearer\""));
    }
    Ok(TokenResponse {
        access_token: Secret::new(access_token),
        refresh_token: text("refresh_token").map(Secret::new),
        expires_in: json.get("expires_in").and_then(seconds),
        scope: text("scope").map(|s| scrub(s, &[], MAX_DESCRIPTION)),
    })
}

/// `expires_in` as RFC 6749 writes it (a number of seconds), or as some providers do (a
/// numeric string, a float). Anything else counts as "not said".
fn seconds(value: &Value) -> Option<Duration> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(whole_seconds)),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
    .map(Duration::from_secs)
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "checked non-negative and finite; `as` saturates above u64::MAX"
)]
fn whole_seconds(f: f64) -> u64 {
    f as u64
}

/// `text` made safe to show: printable ASCII only, every sent secret replaced, at most `max`
/// characters.
fn scrub(text: &str, sent: &[&Secret], max: usize) -> String {
    let mut out: String =
        text.chars().map(|c| if (' '..='~').contains(&c) { c } else { '?' }).collect();
    for secret in sent {
        let secret = secret.expose();
        if !secret.is_empty() {
            out = out.replace(secret, "***");
        }
    }
    out.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"access_token":"at-canary-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-canary-1","scope":"openid"}"#;

    #[test]
    fn success_reads_tokens_expiry_and_scope() {
        let t = read_token_response(200, OK.as_bytes(), &[]).unwrap();
        assert_eq!(t.access_token.expose(), "at-canary-1");
        assert_eq!(t.refresh_token.as_ref().map(Secret::expose), Some("rt-canary-1"));
        assert_eq!(t.expires_in, Some(Duration::from_secs(3600)));
        assert_eq!(t.scope.as_deref(), Some("openid"));
    }

    #[test]
    fn refresh_response_without_a_refresh_token_or_expiry_is_accepted() {
        let t = read_token_response(200, br#"{"access_token":"a","token_type":"bearer"}"#, &[])
            .unwrap();
        assert_eq!(t.refresh_token, None);
        assert_eq!(t.expires_in, None);
    }

    #[test]
    fn expires_in_is_read_from_numbers_floats_and_numeric_strings() {
        let read = |v: &str| {
            let body = format!(r#"{{"access_token":"a","expires_in":{v}}}"#);
            read_token_response(200, body.as_bytes(), &[]).unwrap().expires_in
        };
        assert_eq!(read("60"), Some(Duration::from_secs(60)));
        assert_eq!(read("59.9"), Some(Duration::from_secs(59)));
        assert_eq!(read(r#""120""#), Some(Duration::from_secs(120)));
        assert_eq!(read("-5"), None);
        assert_eq!(read("null"), None);
    }

    #[test]
    fn malformed_success_bodies_are_invalid_responses_that_quote_nothing() {
        for body in [
            "<html>captive portal</html>",
            r#"{"token_type":"Bearer"}"#,
            r#"{"access_token":42}"#,
            r#"{"access_token":"  "}"#,
            r#"{"access_token":"at-canary-9","token_type":"mac"}"#,
        ] {
            let err = read_token_response(200, body.as_bytes(), &[]).unwrap_err();
            assert!(matches!(err, OAuthError::InvalidResponse(_)), "{body}: {err:?}");
            assert!(!format!("{err} {err:?}").contains("canary"), "{err}");
        }
    }

    #[test]
    fn server_errors_and_429_mean_the_identity_provider_is_failing() {
        for status in [429, 500, 502, 503, 504] {
            let err = read_token_response(status, b"<html>oops</html>", &[]).unwrap_err();
            assert_eq!(err, OAuthError::IdpFailing { status });
        }
    }

    #[test]
    fn invalid_grant_is_told_apart_from_other_refusals() {
        let body = br#"{"error":"invalid_grant","error_description":"Token has been revoked."}"#;
        assert_eq!(
            read_token_response(400, body, &[]).unwrap_err(),
            OAuthError::InvalidGrant { description: Some("Token has been revoked.".to_owned()) }
        );
        let client = br#"{"error":"invalid_client"}"#;
        assert_eq!(
            read_token_response(401, client, &[]).unwrap_err(),
            OAuthError::Rejected {
                status: 401,
                error: Some("invalid_client".to_owned()),
                description: None
            }
        );
        let html = read_token_response(404, b"Not Found", &[]).unwrap_err();
        assert_eq!(html, OAuthError::Rejected { status: 404, error: None, description: None });
    }

    #[test]
    fn a_secret_echoed_in_an_error_description_is_scrubbed() {
        let sent = Secret::new("rt-canary-echo");
        let body =
            br#"{"error":"invalid_grant","error_description":"unknown token rt-canary-echo\n"}"#;
        let err = read_token_response(400, body, &[&sent]).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("rt-canary-echo"), "{shown}");
        assert!(shown.contains("unknown token ***?"), "{shown}");
    }

    #[test]
    fn long_descriptions_are_cut() {
        let body =
            format!(r#"{{"error":"invalid_scope","error_description":"{}"}}"#, "x".repeat(5000));
        let OAuthError::Rejected { description: Some(d), .. } =
            read_token_response(400, body.as_bytes(), &[]).unwrap_err()
        else {
            panic!("expected a rejection with a description");
        };
        assert_eq!(d.len(), MAX_DESCRIPTION);
    }

    #[test]
    fn debug_of_a_token_response_masks_both_tokens() {
        let t = read_token_response(200, OK.as_bytes(), &[]).unwrap();
        let shown = format!("{t:?}");
        assert!(!shown.contains("canary"), "{shown}");
        assert!(shown.contains("expires_in"), "{shown}");
    }
}
