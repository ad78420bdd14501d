//! Proof Key for Code Exchange (RFC 7636) and the random values a login needs.
//!
//! Invariants:
//! - Every verifier and `state` comes from the operating system's CSPRNG; a login never starts
//!   with a predictable value (when no randomness is available it does not start at all).
//! - Only the S256 method is offered: `plain` would put the verifier itself in the browser's
//!   address bar, where the whole point is that it never is.
//! - The verifier travels in a [`Secret`]; the challenge is public by design.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};
use switchyard_secrets::Secret;

use super::OAuthError;

/// The only `code_challenge_method` Switchyard sends.
pub const CHALLENGE_METHOD: &str = "S256";

/// Bytes of randomness behind a verifier: 32, which base64url turns into the 43 characters
/// RFC 7636 §4.1 recommends (256 bits of entropy).
const VERIFIER_BYTES: usize = 32;

/// Bytes of randomness behind a `state` value: 128 bits, unguessable for a cross-site forger.
const STATE_BYTES: usize = 16;

/// A code verifier and its S256 challenge.
#[derive(Clone)]
pub struct Pkce {
    verifier: Secret,
    challenge: String,
}

/// Why a verifier was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PkceError {
    #[error("a PKCE code verifier must be 43 to 128 characters long")]
    Length,
    #[error("a PKCE code verifier may contain only A-Z, a-z, 0-9, '-', '.', '_' and '~'")]
    Charset,
}

impl Pkce {
    /// A fresh verifier from the CSPRNG.
    pub fn generate() -> Result<Self, OAuthError> {
        let mut bytes = [0u8; VERIFIER_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| OAuthError::Random(e.to_string()))?;
        Ok(Self::from_random_bytes(&bytes))
    }

    /// The verifier made of `bytes` (base64url, no padding), as RFC 7636 Appendix B does it.
    pub fn from_random_bytes(bytes: &[u8; VERIFIER_BYTES]) -> Self {
        let verifier = URL_SAFE_NO_PAD.encode(bytes);
        let challenge = s256_challenge(&verifier);
        Self { verifier: Secret::new(verifier), challenge }
    }

    /// Checks a verifier made elsewhere (RFC 7636 §4.1: 43–128 unreserved characters).
    pub fn from_verifier(verifier: Secret) -> Result<Self, PkceError> {
        let text = verifier.expose();
        if !(43..=128).contains(&text.len()) {
            return Err(PkceError::Length);
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
        {
            return Err(PkceError::Charset);
        }
        let challenge = s256_challenge(text);
        Ok(Self { verifier, challenge })
    }

    /// Sent once, to the token endpoint, with the authorization code.
    pub fn verifier(&self) -> &Secret {
        &self.verifier
    }

    /// Sent in the authorization URL.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }
}

impl fmt::Debug for Pkce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkce")
            .field("verifier", &self.verifier)
            .field("challenge", &self.challenge)
            .finish()
    }
}

/// `BASE64URL(SHA256(ASCII(verifier)))`, without padding (RFC 7636 §4.2).
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A fresh `state` value for one login (RFC 6749 §10.12): base64url of 128 random bits.
pub fn random_state() -> Result<String, OAuthError> {
    let mut bytes = [0u8; STATE_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| OAuthError::Random(e.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636 Appendix B.
    const RFC_BYTES: [u8; 32] = [
        116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37,
        77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
    ];
    const RFC_VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const RFC_CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn rfc_7636_appendix_b_verifier_and_challenge_are_reproduced() {
        let pkce = Pkce::from_random_bytes(&RFC_BYTES);
        assert_eq!(pkce.verifier().expose(), RFC_VERIFIER);
        assert_eq!(pkce.challenge(), RFC_CHALLENGE);
        assert_eq!(s256_challenge(RFC_VERIFIER), RFC_CHALLENGE);
    }

    #[test]
    fn generated_verifiers_are_43_unreserved_characters_and_differ() {
        let a = Pkce::generate().unwrap();
        let b = Pkce::generate().unwrap();
        assert_ne!(a.verifier(), b.verifier());
        for p in [&a, &b] {
            assert_eq!(p.verifier().expose().len(), 43);
            let again = Pkce::from_verifier(p.verifier().clone()).unwrap();
            assert_eq!(again.challenge(), p.challenge());
            assert_eq!(p.challenge().len(), 43, "SHA-256 is 32 bytes: 43 base64url characters");
        }
    }

    #[test]
    fn verifiers_outside_the_rfc_rules_are_refused() {
        let err = |s: &str| Pkce::from_verifier(Secret::new(s)).unwrap_err();
        assert_eq!(err(&"a".repeat(42)), PkceError::Length);
        assert_eq!(err(&"a".repeat(129)), PkceError::Length);
        assert_eq!(err(&format!("{}+", "a".repeat(42))), PkceError::Charset);
        assert_eq!(err(&format!("{}=", "a".repeat(42))), PkceError::Charset);
        assert!(Pkce::from_verifier(Secret::new("a-._~".repeat(25) + "abc")).is_ok());
    }

    #[test]
    fn debug_shows_the_challenge_but_never_the_verifier() {
        let pkce = Pkce::from_random_bytes(&RFC_BYTES);
        let shown = format!("{pkce:?}");
        assert!(!shown.contains(RFC_VERIFIER), "{shown}");
        assert!(shown.contains(RFC_CHALLENGE), "{shown}");
    }

    #[test]
    fn states_are_fresh_base64url_values() {
        let a = random_state().unwrap();
        assert_ne!(a, random_state().unwrap());
        assert_eq!(a.len(), 22);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    }
}
