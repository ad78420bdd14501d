//! The OS keychain through `keyring` 3.6: Secret Service on Linux and the BSDs, Keychain on
//! macOS, Credential Manager on Windows. Entries are filed under a service ([`SERVICE`] unless
//! a test picks another) with the [`SecretId`] as the account.
//!
//! Invariants:
//! - Every keyring call runs on a thread of its own, one call at a time. keyring's Secret
//!   Service backend drives D-Bus through zbus's private current-thread tokio runtime, which
//!   panics ("Cannot start a runtime from within a runtime") on a thread that runs tokio tasks,
//!   as keyring's docs warn; and keyring's docs also warn that concurrent calls can make the
//!   D-Bus RPC fail. A thread spawn is nothing next to a D-Bus round trip, and the app calls
//!   this at config load and on credential edits only.
//! - keyring's errors are translated here, once. The raw bytes of an undecodable entry are
//!   dropped, and backend text is scrubbed of the secret being stored.
//! - Targets without a backend get none: keyring would silently use its in-memory mock there,
//!   so this module does not even link keyring and reports the store unavailable.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use crate::id::is_name;
use crate::{SERVICE, Secret, SecretError, SecretId, SecretStore};

/// The platform's keychain. Constructing one touches nothing; the first call connects.
pub struct KeychainStore {
    service: String,
    /// Held for the whole of each call: see the module's first invariant.
    turn: Mutex<()>,
}

impl KeychainStore {
    /// The store the app uses: service [`SERVICE`].
    pub fn new() -> Self {
        Self { service: SERVICE.to_owned(), turn: Mutex::new(()) }
    }

    /// Files entries under another service name, so tests never touch the user's real entries.
    pub fn with_service(service: &str) -> Result<Self, SecretError> {
        if !is_name(service) {
            return Err(SecretError::InvalidId(
                "a keychain service name must be 1 to 64 ASCII letters, digits, '-', '_' or '.'",
            ));
        }
        Ok(Self { service: service.to_owned(), turn: Mutex::new(()) })
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// Runs `op` on a fresh thread, one at a time. A panic in `op` resurfaces here; it cannot
    /// leave shared state behind (the lock guards no data), so a poisoned lock is fine to reuse.
    fn run<T: Send>(&self, op: impl FnOnce(&str) -> T + Send) -> T {
        let _turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let service = self.service.as_str();
        std::thread::scope(|scope| match scope.spawn(move || op(service)).join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    }
}

impl Default for KeychainStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for KeychainStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeychainStore")
            .field("backend", &os::BACKEND)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

impl SecretStore for KeychainStore {
    fn backend(&self) -> &'static str {
        os::BACKEND
    }

    fn check_available(&self) -> Result<(), SecretError> {
        self.run(os::probe)
    }

    fn get(&self, id: &SecretId) -> Result<Option<Secret>, SecretError> {
        self.run(|service| os::get(service, id))
    }

    fn set(&self, id: &SecretId, secret: &Secret) -> Result<(), SecretError> {
        if secret.is_blank() {
            return Err(SecretError::EmptySecret);
        }
        self.run(|service| os::set(service, id, secret))
    }

    fn delete(&self, id: &SecretId) -> Result<bool, SecretError> {
        self.run(|service| os::delete(service, id))
    }
}

#[cfg(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "macos",
    target_os = "windows"
))]
mod os {
    use keyring::{Entry, Error};

    use crate::{Secret, SecretError, SecretId};

    #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd"))]
    mod platform {
        pub(crate) const BACKEND: &str = "Secret Service";
        pub(crate) const UNREACHABLE: &str = "no Secret Service on the D-Bus session bus";
        pub(crate) const REACH_IT: &str = "run gnome-keyring or KeePassXC (with its Secret Service integration on) in this session, or use env: or file: references";
        pub(crate) const UNLOCK_IT: &str = "the keyring is locked or has no default collection: unlock or create it (e.g. in Seahorse) and retry, or use env: or file: references";

        /// Nothing answers for `org.freedesktop.secrets`, or there is no session bus at all.
        /// secret-service already recognises a missing bus (`Unavailable`); a bus without a
        /// provider shows up as a D-Bus error whose name is part of the protocol.
        pub(crate) fn is_unreachable(err: &(dyn std::error::Error + 'static)) -> bool {
            if matches!(err.downcast_ref(), Some(secret_service::Error::Unavailable)) {
                return true;
            }
            let text = err.to_string();
            [
                "org.freedesktop.DBus.Error.ServiceUnknown",
                "org.freedesktop.DBus.Error.NameHasNoOwner",
                "org.freedesktop.DBus.Error.Spawn.",
            ]
            .iter()
            .any(|name| text.contains(name))
        }
    }

    #[cfg(target_os = "macos")]
    mod platform {
        pub(crate) const BACKEND: &str = "macOS Keychain";
        pub(crate) const UNREACHABLE: &str = "the login keychain cannot be used";
        pub(crate) const REACH_IT: &str =
            "check it in Keychain Access, or use env: or file: references";
        pub(crate) const UNLOCK_IT: &str = "unlock the login keychain and allow Switchyard to use it, or use env: or file: references";

        /// The Keychain is part of the OS; its failures are reported as they come.
        pub(crate) fn is_unreachable(_: &(dyn std::error::Error + 'static)) -> bool {
            false
        }
    }

    #[cfg(target_os = "windows")]
    mod platform {
        pub(crate) const BACKEND: &str = "Windows Credential Manager";
        pub(crate) const UNREACHABLE: &str = "Credential Manager cannot be used";
        pub(crate) const REACH_IT: &str =
            "check the Credential Manager service, or use env: or file: references";
        pub(crate) const UNLOCK_IT: &str =
            "sign in interactively and retry, or use env: or file: references";

        /// Credential Manager is part of the OS; its failures are reported as they come.
        pub(crate) fn is_unreachable(_: &(dyn std::error::Error + 'static)) -> bool {
            false
        }
    }

    pub(super) use platform::BACKEND;

    /// An account that is never a valid [`SecretId`] (no '/'), so probing cannot collide with a
    /// real entry.
    const PROBE_ACCOUNT: &str = "availability-probe";

    /// Looks up an entry that does not exist: answers "no entry" when the store works, and
    /// needs no unlocking, so it never prompts.
    pub(super) fn probe(service: &str) -> Result<(), SecretError> {
        let entry = Entry::new(service, PROBE_ACCOUNT).map_err(|e| detached(e, None))?;
        match entry.get_password() {
            Ok(_) | Err(Error::NoEntry | Error::BadEncoding(_) | Error::Ambiguous(_)) => Ok(()),
            Err(err) => Err(detached(err, None)),
        }
    }

    pub(super) fn get(service: &str, id: &SecretId) -> Result<Option<Secret>, SecretError> {
        match entry(service, id)?.get_password() {
            Ok(text) => Ok(Some(Secret::new(text))),
            Err(Error::NoEntry) => Ok(None),
            Err(err) => Err(translate(err, id, None)),
        }
    }

    pub(super) fn set(service: &str, id: &SecretId, secret: &Secret) -> Result<(), SecretError> {
        entry(service, id)?
            .set_password(secret.expose())
            .map_err(|e| translate(e, id, Some(secret)))
    }

    pub(super) fn delete(service: &str, id: &SecretId) -> Result<bool, SecretError> {
        match entry(service, id)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(Error::NoEntry) => Ok(false),
            Err(err) => Err(translate(err, id, None)),
        }
    }

    fn entry(service: &str, id: &SecretId) -> Result<Entry, SecretError> {
        Entry::new(service, id.account()).map_err(|e| translate(e, id, None))
    }

    /// The one translation of keyring's errors. `secret` is the value being stored, if any:
    /// backend text is scrubbed of it in case a platform ever echoes its input.
    pub(super) fn translate(err: Error, id: &SecretId, secret: Option<&Secret>) -> SecretError {
        match err {
            Error::BadEncoding(_) => SecretError::NotText(id.clone()),
            Error::Ambiguous(_) => SecretError::Ambiguous(id.clone()),
            other => detached(other, secret),
        }
    }

    /// Translation for errors that need no entry name.
    fn detached(err: Error, secret: Option<&Secret>) -> SecretError {
        let scrub = |text: String| match secret {
            Some(s) if !s.expose().is_empty() => text.replace(s.expose(), "***"),
            _ => text,
        };
        match err {
            Error::PlatformFailure(e) if platform::is_unreachable(e.as_ref()) => {
                SecretError::Unavailable(format!(
                    "{} ({}); {}",
                    platform::UNREACHABLE,
                    scrub(e.to_string()),
                    platform::REACH_IT
                ))
            }
            Error::NoStorageAccess(e) => {
                SecretError::Denied(format!("{}; {}", scrub(e.to_string()), platform::UNLOCK_IT))
            }
            Error::PlatformFailure(e) => SecretError::Keychain(scrub(e.to_string())),
            Error::BadEncoding(_) => {
                SecretError::Keychain("an entry holds data that is not UTF-8 text".to_owned())
            }
            Error::Ambiguous(items) => {
                SecretError::Keychain(format!("{} entries match one name", items.len()))
            }
            // TooLong, Invalid (attribute names and limits, never values), NoEntry, and
            // whatever a later 3.x adds.
            other => SecretError::Keychain(scrub(other.to_string())),
        }
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "macos",
    target_os = "windows"
)))]
mod os {
    use crate::{Secret, SecretError, SecretId};

    pub(super) const BACKEND: &str = "none";

    fn unavailable() -> SecretError {
        SecretError::Unavailable(
            "this build has no OS keychain backend for this platform; use env: or file: references"
                .to_owned(),
        )
    }

    pub(super) fn probe(_: &str) -> Result<(), SecretError> {
        Err(unavailable())
    }

    pub(super) fn get(_: &str, _: &SecretId) -> Result<Option<Secret>, SecretError> {
        Err(unavailable())
    }

    pub(super) fn set(_: &str, _: &SecretId, _: &Secret) -> Result<(), SecretError> {
        Err(unavailable())
    }

    pub(super) fn delete(_: &str, _: &SecretId) -> Result<bool, SecretError> {
        Err(unavailable())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_are_validated_and_the_default_is_switchyard() {
        assert_eq!(KeychainStore::new().service(), "switchyard");
        assert_eq!(
            KeychainStore::with_service("switchyard-test.1").unwrap().service(),
            "switchyard-test.1"
        );
        for bad in ["", "has space", "a/b", &"x".repeat(65)] {
            assert!(KeychainStore::with_service(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn debug_shows_backend_and_service() {
        let shown = format!("{:?}", KeychainStore::new());
        assert!(shown.contains("switchyard") && shown.contains(os::BACKEND), "{shown}");
    }

    #[test]
    fn a_panicking_call_resurfaces_and_the_store_stays_usable() {
        let store = KeychainStore::new();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.run(|_| panic!("boom"));
        }));
        assert!(caught.is_err());
        assert_eq!(store.run(str::len), "switchyard".len());
    }

    #[cfg(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "macos",
        target_os = "windows"
    ))]
    mod translation {
        use keyring::Error;

        use super::super::os::translate;
        use crate::{Secret, SecretError, SecretId};

        const CANARY: &str = "sk-canary-translate-51c2e8";

        fn id() -> SecretId {
            SecretId::parse("openai/default").unwrap()
        }

        fn shown(err: &SecretError) -> String {
            format!("{err} {err:?}")
        }

        #[derive(Debug)]
        struct Echo(String);

        impl std::fmt::Display for Echo {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::error::Error for Echo {}

        #[test]
        fn undecodable_bytes_are_dropped_not_shown() {
            let err = translate(Error::BadEncoding(CANARY.as_bytes().to_vec()), &id(), None);
            assert_eq!(err, SecretError::NotText(id()));
            assert!(!shown(&err).contains(CANARY));
            let bytes = format!("{:?}", CANARY.as_bytes());
            assert!(!shown(&err).contains(&bytes[..20]));
        }

        #[test]
        fn backend_text_is_scrubbed_of_the_secret_being_stored() {
            let secret = Secret::from(CANARY);
            for err in [
                Error::PlatformFailure(Box::new(Echo(format!("bad value {CANARY}")))),
                Error::NoStorageAccess(Box::new(Echo(format!("locked for {CANARY}")))),
                Error::Invalid("password".into(), CANARY.into()),
            ] {
                let err = translate(err, &id(), Some(&secret));
                assert!(!shown(&err).contains(CANARY), "{}", shown(&err));
            }
        }

        #[test]
        fn a_refusal_says_how_to_unlock_or_use_env() {
            let err =
                translate(Error::NoStorageAccess(Box::new(Echo("locked".into()))), &id(), None);
            assert!(matches!(err, SecretError::Denied(_)), "{err:?}");
            assert!(err.to_string().contains("env: or file: references"), "{err}");
        }

        #[test]
        fn duplicates_name_the_entry() {
            let err = translate(Error::Ambiguous(Vec::new()), &id(), None);
            assert_eq!(err, SecretError::Ambiguous(id()));
        }

        #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd"))]
        #[test]
        fn no_secret_service_is_reported_as_unavailable_with_what_to_run() {
            let no_bus = translate(
                Error::PlatformFailure(Box::new(secret_service::Error::Unavailable)),
                &id(),
                None,
            );
            let no_provider = translate(
                Error::PlatformFailure(Box::new(Echo(
                    "zbus error: org.freedesktop.DBus.Error.ServiceUnknown: The name \
                     org.freedesktop.secrets was not provided by any .service files"
                        .into(),
                ))),
                &id(),
                None,
            );
            for err in [no_bus, no_provider] {
                let text = err.to_string();
                assert!(matches!(err, SecretError::Unavailable(_)), "{err:?}");
                assert!(text.contains("no Secret Service on the D-Bus session bus"), "{text}");
                assert!(text.contains("gnome-keyring or KeePassXC"), "{text}");
                assert!(text.contains("env: or file: references"), "{text}");
            }
        }

        #[test]
        fn other_platform_failures_are_not_mistaken_for_a_missing_keychain() {
            let err = translate(
                Error::PlatformFailure(Box::new(Echo("disk on fire".into()))),
                &id(),
                None,
            );
            assert_eq!(err, SecretError::Keychain("disk on fire".into()));
        }
    }
}
