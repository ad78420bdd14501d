//! The crate's one error type.
//!
//! Invariant: no message carries a secret or text that might be one. Names (variables, secret
//! ids, reference kinds) are shown because they are what the user has to fix; values are not.
//! Backend details are kept as text so no foreign type reaches the public API.

use crate::SecretId;

/// Why a secret could not be read, stored or referred to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The config text is neither `env:` nor `keychain:`; it is not repeated because people
    /// paste keys where references belong.
    #[error(
        "the value is not a secret reference (it is not repeated here in case it is a key); write \"env:VARIABLE\", \"file:/path/to/key\" or \"keychain:provider/credential\" (inline secrets are not allowed in files)"
    )]
    NotAReference,
    /// `kind:…` with an unknown kind; only the kind (letters only) is shown.
    #[error(
        "\"{0}:\" is not a kind of secret reference; write \"env:VARIABLE\", \"file:/path/to/key\" or \"keychain:provider/credential\""
    )]
    UnknownKind(String),
    #[error(
        "an env: reference needs a variable name of ASCII letters, digits and '_', like env:OPENAI_API_KEY"
    )]
    InvalidVariable,
    /// A malformed [`SecretId`]; the reason says which part, the text itself is not shown.
    #[error("invalid secret name: {0}")]
    InvalidId(&'static str),
    #[error("environment variable {0} is not set (or not valid UTF-8)")]
    MissingEnv(String),
    #[error("environment variable {0} is empty")]
    EmptyEnv(String),
    /// A `keychain:` reference met code that was given no [`SecretStore`](crate::SecretStore).
    #[error("keychain:{0} refers to the OS keychain, but no secret store was given to read it")]
    NoStore(SecretId),
    #[error(
        "no secret is stored for keychain:{0}; store it again (the reference outlived its secret)"
    )]
    MissingEntry(SecretId),
    #[error("a secret must not be empty or only whitespace")]
    EmptySecret,
    /// The store cannot be reached at all (a headless machine, no Secret Service on the bus).
    /// The text says what to run instead; `env:` references keep working.
    #[error("the OS keychain is not reachable: {0}")]
    Unavailable(String),
    /// The store is there but refused: locked, or an unlock prompt was dismissed.
    #[error("the OS keychain refused access: {0}")]
    Denied(String),
    #[error(
        "the keychain entry for {0} holds data that is not UTF-8 text; delete it and store the secret again"
    )]
    NotText(SecretId),
    #[error(
        "several keychain entries match {0}; delete the duplicates (e.g. with Seahorse or Keychain Access) and store the secret again"
    )]
    Ambiguous(SecretId),
    /// A `file:` secret that cannot be used: the path and why (never its content).
    #[error("file:{0} {1}")]
    File(String, String),
    #[error(
        "a file: reference needs an absolute path, like file:/run/secrets/openai_key (systemd: file:/run/credentials/UNIT/NAME)"
    )]
    InvalidFilePath,
    /// Any other backend failure, as the platform described it.
    #[error("the OS keychain failed: {0}")]
    Keychain(String),
}
