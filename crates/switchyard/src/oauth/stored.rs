//! How one credential's tokens sit in the [`SecretStore`]: a single JSON secret under the
//! credential's [`SecretId`] (`provider/credential`), so access token, refresh token and expiry
//! are always written together and can never be half-updated.
//!
//! Invariants:
//! - The JSON is only ever inside a [`Secret`]; decoding errors are fixed sentences, never
//!   serde's messages (which quote the offending value, and that value may be a token).
//! - The store is synchronous and may block (D-Bus, an unlock prompt): every call goes through
//!   `spawn_blocking`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchyard_core::UnixMillis;
use switchyard_core::oauth::TokenLifetime;
use switchyard_providers::oauth::TokenResponse;
use switchyard_secrets::{Secret, SecretError, SecretId, SecretStore};

/// Marks the JSON as ours, so an API key stored under the same id is not taken for tokens.
const KIND: &str = "switchyard_oauth_tokens";
const VERSION: u32 = 1;

/// One credential's tokens, in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub(crate) access: Secret,
    /// `None` when the identity provider never issued one: the credential cannot refresh and
    /// must sign in again when the access token runs out.
    pub(crate) refresh: Option<Secret>,
    pub(crate) lifetime: TokenLifetime,
}

impl Tokens {
    /// The tokens after `response`, obtained at `now`. A response without a refresh token
    /// keeps `previous` (RFC 6749 §6: the identity provider may keep the old one valid).
    pub(crate) fn from_response(
        response: TokenResponse,
        now: UnixMillis,
        previous: Option<&Secret>,
    ) -> Self {
        Self {
            access: response.access_token,
            refresh: response.refresh_token.or_else(|| previous.cloned()),
            lifetime: TokenLifetime::from_expires_in(now, response.expires_in),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Form {
    kind: String,
    version: u32,
    access_token: String,
    refresh_token: Option<String>,
    obtained_at: UnixMillis,
    expires_at: Option<UnixMillis>,
}

/// Why stored tokens could not be used.
#[derive(Debug)]
pub(crate) enum LoadError {
    Store(SecretError),
    /// The entry holds something that is not our token JSON.
    Unreadable,
}

fn encode(tokens: &Tokens) -> Secret {
    let form = Form {
        kind: KIND.to_owned(),
        version: VERSION,
        access_token: tokens.access.expose().to_owned(),
        refresh_token: tokens.refresh.as_ref().map(|s| s.expose().to_owned()),
        obtained_at: tokens.lifetime.obtained_at,
        expires_at: tokens.lifetime.expires_at,
    };
    Secret::new(serde_json::to_string(&form).expect("a struct of strings and numbers serializes"))
}

fn decode(secret: &Secret) -> Option<Tokens> {
    let form: Form = serde_json::from_str(secret.expose()).ok()?;
    if form.kind != KIND || form.version != VERSION || form.access_token.trim().is_empty() {
        return None;
    }
    Some(Tokens {
        access: Secret::new(form.access_token),
        refresh: form.refresh_token.map(Secret::new),
        lifetime: TokenLifetime { obtained_at: form.obtained_at, expires_at: form.expires_at },
    })
}

pub(crate) async fn load(
    store: &Arc<dyn SecretStore>,
    id: &SecretId,
) -> Result<Option<Tokens>, LoadError> {
    let (store, id) = (Arc::clone(store), id.clone());
    let found = blocking(move || store.get(&id)).await.map_err(LoadError::Store)?;
    match found {
        None => Ok(None),
        Some(secret) => decode(&secret).map(Some).ok_or(LoadError::Unreadable),
    }
}

pub(crate) async fn save(
    store: &Arc<dyn SecretStore>,
    id: &SecretId,
    tokens: &Tokens,
) -> Result<(), SecretError> {
    let (store, id, secret) = (Arc::clone(store), id.clone(), encode(tokens));
    blocking(move || store.set(&id, &secret)).await
}

pub(crate) async fn delete(
    store: &Arc<dyn SecretStore>,
    id: &SecretId,
) -> Result<bool, SecretError> {
    let (store, id) = (Arc::clone(store), id.clone());
    blocking(move || store.delete(&id)).await
}

/// Runs a secret-store call on a blocking thread: the OS keychain answers over IPC, and the
/// runtime's threads must not wait for it (with `--threads 1` there is only one).
pub(crate) async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, SecretError> + Send + 'static,
) -> Result<T, SecretError> {
    tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|_| Err(SecretError::Keychain("the keychain call panicked".to_owned())))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use switchyard_secrets::MemoryStore;

    use super::*;

    fn tokens() -> Tokens {
        Tokens {
            access: Secret::new("at-canary"),
            refresh: Some(Secret::new("rt-canary")),
            lifetime: TokenLifetime::from_expires_in(
                UnixMillis(1_000),
                Some(Duration::from_secs(60)),
            ),
        }
    }

    #[tokio::test]
    async fn tokens_round_trip_through_one_secret() {
        let store: Arc<dyn SecretStore> = Arc::new(MemoryStore::new());
        let id = SecretId::new("acme", "work").unwrap();
        assert!(load(&store, &id).await.unwrap().is_none());
        save(&store, &id, &tokens()).await.unwrap();
        assert_eq!(load(&store, &id).await.unwrap(), Some(tokens()));
        assert!(delete(&store, &id).await.unwrap());
        assert!(load(&store, &id).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_api_key_under_the_same_id_is_unreadable_not_a_token() {
        let store: Arc<dyn SecretStore> = Arc::new(MemoryStore::new());
        let id = SecretId::new("acme", "work").unwrap();
        store.set(&id, &Secret::new("sk-canary")).unwrap();
        let err = load(&store, &id).await.unwrap_err();
        assert!(matches!(err, LoadError::Unreadable));
        assert!(!format!("{err:?}").contains("canary"));
    }

    #[test]
    fn a_refresh_without_a_new_refresh_token_keeps_the_old_one() {
        let response = TokenResponse {
            access_token: Secret::new("at-2"),
            refresh_token: None,
            expires_in: None,
            scope: None,
        };
        let old = Secret::new("rt-1");
        let t = Tokens::from_response(response, UnixMillis(5), Some(&old));
        assert_eq!(t.refresh, Some(old));
        assert_eq!(t.lifetime.expires_at, None);
    }
}
