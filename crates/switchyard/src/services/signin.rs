//! OAuth credentials from the API's side: sign in (a PKCE login through a loopback redirect,
//! driven by the user's browser), watch the login, see how a credential's token stands and
//! why, sign out. The work is the OAuth manager's; this only checks the names against the
//! running config first.

use switchyard_core::{CredentialId, CredentialKey, ProviderId};

use super::Services;
use crate::config::{Config, EditError, Problem};
use crate::oauth::{LoginId, LoginStarted, LoginStatus, OAuthClient, OAuthCredentialStatus};
use crate::proxy::NoSecret;
use switchyard_core::resilience::CredentialKind;

impl Services {
    /// Starts signing `credential` of `provider` in: open the returned URL in a browser, then
    /// watch [`Services::login_status`].
    pub async fn start_login(
        &self,
        provider: &str,
        credential: &str,
    ) -> Result<LoginStarted, EditError> {
        let (p, c, client) = self.oauth_credential(provider, credential)?;
        self.refuse_unconfirmed(&p, &c)?;
        self.oauth
            .start_login(&p, &c, &client)
            .await
            .map_err(|e| EditError::Upstream(Problem::new("oauth", e)))
    }

    /// A sign-in sends the authorization code and its verifier to the token endpoint, a retry
    /// sends the refresh token there: neither goes to a destination the user never confirmed
    /// for this credential. The error says which and how to confirm.
    fn refuse_unconfirmed(&self, p: &ProviderId, c: &CredentialId) -> Result<(), EditError> {
        let key = CredentialKey { provider: p.clone(), credential: c.clone() };
        match self.proxy.routes().unconfirmed_for(&key) {
            Some(unconfirmed) => Err(EditError::Conflict(Problem::new(
                "credential",
                NoSecret::Unconfirmed(unconfirmed.clone()),
            ))),
            None => Ok(()),
        }
    }

    pub fn login_status(&self, id: u64) -> Result<LoginStatus, EditError> {
        self.oauth.login_status(LoginId(id)).ok_or_else(|| no_login(id))
    }

    pub fn cancel_login(&self, id: u64) -> Result<(), EditError> {
        if self.oauth.cancel_login(LoginId(id)) { Ok(()) } else { Err(no_login(id)) }
    }

    /// How the credential's token stands: valid, due, refreshing, expired or needing a new
    /// sign-in, with the reason and the state of the provider's refresh breaker.
    pub async fn oauth_status(
        &self,
        provider: &str,
        credential: &str,
    ) -> Result<OAuthCredentialStatus, EditError> {
        let (p, c, _) = self.oauth_credential(provider, credential)?;
        self.oauth
            .status(&p, &c, self.clock.now())
            .await
            .map_err(|e| EditError::Invalid(Problem::new("oauth", e)))
    }

    /// Tries now to get a usable token (refreshing it when due), as a "retry now" button does,
    /// then reports how it stands. A refresh breaker that is open refuses without calling the
    /// identity provider, and the status says until when.
    pub async fn oauth_retry(
        &self,
        provider: &str,
        credential: &str,
    ) -> Result<OAuthCredentialStatus, EditError> {
        let (p, c, _) = self.oauth_credential(provider, credential)?;
        self.refuse_unconfirmed(&p, &c)?;
        if let Err(error) = self.oauth.access_token(&p, &c, self.clock.now()).await {
            tracing::info!(provider, credential, %error, "OAuth retry did not give a token");
        }
        self.oauth_status(provider, credential).await
    }

    /// Forgets the credential's tokens (the keychain entry goes); `false` when there were none.
    pub async fn sign_out(&self, provider: &str, credential: &str) -> Result<bool, EditError> {
        let (p, c, _) = self.oauth_credential(provider, credential)?;
        self.oauth.sign_out(&p, &c).await.map_err(|e| EditError::Invalid(Problem::new("oauth", e)))
    }
}

impl Services {
    /// The names, and the provider's OAuth client, when `credential` is one of the running
    /// config's `oauth` credentials of `provider`.
    fn oauth_credential(
        &self,
        provider: &str,
        credential: &str,
    ) -> Result<(ProviderId, CredentialId, OAuthClient), EditError> {
        let client = oauth_client(&self.proxy.config(), provider, credential)?;
        Ok((ProviderId::from(provider), CredentialId::from(credential), client))
    }
}

/// The provider's OAuth client, when `credential` is one of its `oauth` credentials.
fn oauth_client(
    config: &Config,
    provider: &str,
    credential: &str,
) -> Result<OAuthClient, EditError> {
    let p = config.provider(&ProviderId::from(provider)).ok_or_else(|| {
        EditError::NotFound(Problem::new("provider", format!("no provider \"{provider}\"")))
    })?;
    let c = p.credential(&CredentialId::from(credential)).ok_or_else(|| {
        EditError::NotFound(Problem::new(
            "credential",
            format!("provider \"{provider}\" has no credential \"{credential}\""),
        ))
    })?;
    if c.kind != CredentialKind::Oauth {
        return Err(Problem::new(
            "kind",
            format!("credential \"{credential}\" is an API key; only oauth credentials sign in"),
        )
        .into());
    }
    p.oauth.clone().ok_or_else(|| Problem::new("oauth", "the provider has no oauth client").into())
}

fn no_login(id: u64) -> EditError {
    EditError::NotFound(Problem::new(
        "login",
        format!("no login {id} (finished logins are forgotten after a while)"),
    ))
}
