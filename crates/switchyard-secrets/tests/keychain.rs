//! Real round trips through the OS keychain (Secret Service on Linux).
//!
//! These tests touch the keychain only when `SWITCHYARD_KEYCHAIN_TESTS=1`: a plain `cargo test`
//! must pass on machines without one, and must not raise unlock prompts on a developer's
//! desktop. Without it they print why they did not run and pass; with it, an unreachable
//! keychain fails them with the store's own explanation. `scripts/keychain-test` provides a
//! throwaway session bus and an unlocked gnome-keyring and sets the variable.
//!
//! Entries go under a service of their own (`switchyard-test-<pid>`), never `switchyard`, and
//! every test deletes what it stored.
//!
//! The "unreachable" tests need no keychain: they run this binary again with a session bus
//! that does not exist (always, on Linux) or one with no Secret Service on it (with the opt-in,
//! because that needs `dbus-run-session`), and check what the store says.

use std::sync::{Mutex, MutexGuard, PoisonError};

use switchyard_secrets::{KeychainStore, Secret, SecretError, SecretId, SecretRef, SecretStore};

const OPT_IN: &str = "SWITCHYARD_KEYCHAIN_TESTS";
const CANARY: &str = "sk-switchyard-canary-4b8e1d7f0a93";

/// One test at a time talks to the keychain: Secret Service daemons mishandle concurrent
/// clients, and the tests run on parallel threads.
static KEYCHAIN: Mutex<()> = Mutex::new(());

fn opted_in() -> bool {
    std::env::var(OPT_IN).as_deref() == Ok("1")
}

fn test_service() -> String {
    format!("switchyard-test-{}", std::process::id())
}

/// The store under test and the turn to use it, or `None` (after saying so) when not opted in.
#[expect(clippy::print_stderr, reason = "a skipped test says why, where cargo test shows it")]
fn keychain(test: &str) -> Option<(MutexGuard<'static, ()>, KeychainStore)> {
    if !opted_in() {
        eprintln!(
            "{test}: not run (needs the OS keychain): set {OPT_IN}=1 where one is reachable, \
             or run scripts/keychain-test, which starts one"
        );
        return None;
    }
    let turn = KEYCHAIN.lock().unwrap_or_else(PoisonError::into_inner);
    let store = KeychainStore::with_service(&test_service()).unwrap();
    if let Err(err) = store.check_available() {
        panic!(
            "{OPT_IN}=1 but the OS keychain is not usable.\n  {err}\n\
             On Linux, scripts/keychain-test runs these tests under a private D-Bus session \
             with an unlocked gnome-keyring."
        );
    }
    Some((turn, store))
}

fn id(text: &str) -> SecretId {
    SecretId::parse(text).unwrap()
}

fn value(store: &dyn SecretStore, id: &SecretId) -> Option<String> {
    store.get(id).unwrap().map(|s| s.expose().to_owned())
}

#[test]
fn round_trip_through_the_os_keychain() {
    let Some((_turn, store)) = keychain("round_trip_through_the_os_keychain") else { return };
    let key = id("roundtrip/default");
    store.delete(&key).unwrap();

    assert_eq!(value(&store, &key), None, "a fresh id has no entry");
    store.set(&key, &Secret::from("sk-first-1111")).unwrap();
    assert_eq!(value(&store, &key).as_deref(), Some("sk-first-1111"));

    // A second store object sees it too: it is in the keychain, not in this process.
    let other = KeychainStore::with_service(&test_service()).unwrap();
    assert_eq!(value(&other, &key).as_deref(), Some("sk-first-1111"));

    store.set(&key, &Secret::from("sk-second-2222")).unwrap();
    assert_eq!(value(&store, &key).as_deref(), Some("sk-second-2222"), "set overwrites");
    assert_eq!(value(&other, &key).as_deref(), Some("sk-second-2222"));

    assert_eq!(store.delete(&key), Ok(true));
    assert_eq!(value(&store, &key), None, "deleted entries read back as None");
    assert_eq!(store.delete(&key), Ok(false), "deleting twice reports nothing to delete");
}

#[test]
fn entries_are_kept_apart_by_provider_credential_and_service() {
    let Some((_turn, store)) =
        keychain("entries_are_kept_apart_by_provider_credential_and_service")
    else {
        return;
    };
    let a = id("apart/one");
    let b = id("apart/two");
    let c = id("apart-other/one");
    let elsewhere = KeychainStore::with_service(&format!("{}-elsewhere", test_service())).unwrap();
    for (store, key, text) in
        [(&store, &a, "value-a"), (&store, &b, "value-b"), (&store, &c, "value-c")]
    {
        store.set(key, &Secret::from(text)).unwrap();
    }
    assert_eq!(value(&store, &a).as_deref(), Some("value-a"));
    assert_eq!(value(&store, &b).as_deref(), Some("value-b"));
    assert_eq!(value(&store, &c).as_deref(), Some("value-c"));
    assert_eq!(value(&elsewhere, &a), None, "another service is another namespace");
    for key in [&a, &b, &c] {
        assert_eq!(store.delete(key), Ok(true));
    }
}

#[test]
fn keychain_references_resolve_from_the_os_keychain() {
    let Some((_turn, store)) = keychain("keychain_references_resolve_from_the_os_keychain") else {
        return;
    };
    let key = id("resolve/default");
    store.set(&key, &Secret::from("sk-resolved-3333")).unwrap();
    let reference = SecretRef::parse("keychain:resolve/default").unwrap();
    let no_env = |_: &str| None;

    let secret = reference.resolve_using(&no_env, Some(&store)).unwrap();
    assert_eq!(secret.expose(), "sk-resolved-3333");

    store.delete(&key).unwrap();
    assert_eq!(
        reference.resolve_using(&no_env, Some(&store)),
        Err(SecretError::MissingEntry(key)),
        "a reference whose entry is gone says which entry"
    );
}

#[test]
fn the_canary_never_appears_in_debug_or_error_output() {
    let Some((_turn, store)) = keychain("the_canary_never_appears_in_debug_or_error_output") else {
        return;
    };
    let key = id("canary/default");
    let canary = Secret::from(CANARY);
    store.set(&key, &canary).unwrap();

    let read = store.get(&key);
    assert_eq!(read.as_ref().unwrap().as_ref().map(Secret::expose), Some(CANARY));
    let reference = SecretRef::parse("keychain:canary/default").unwrap();
    let resolved = reference.resolve_using(&|_| None, Some(&store));
    let mut shown = vec![
        format!("{store:?}"),
        format!("{read:?}"),
        format!("{resolved:?}"),
        format!("{reference:?} {reference}"),
        format!("{canary:?} {canary} {}", canary.hint()),
    ];
    let errors = [
        store.set(&key, &Secret::from("   ")).unwrap_err(),
        SecretRef::parse(CANARY).unwrap_err(),
        SecretRef::parse(&format!("keychain:{CANARY}")).unwrap_err(),
        SecretRef::parse(&format!("env:{CANARY}")).unwrap_err(),
        SecretRef::parse(&format!("keychain:canary/{CANARY}!")).unwrap_err(),
        SecretId::new("canary", &format!("{CANARY} ")).unwrap_err(),
    ];
    shown.extend(errors.iter().map(|e| format!("{e} {e:?}")));
    assert_eq!(store.delete(&key), Ok(true));
    let gone = reference.resolve_using(&|_| None, Some(&store)).unwrap_err();
    shown.push(format!("{gone} {gone:?}"));

    // The whole canary, and any long piece of it (a truncated echo is still a leak).
    let pieces: Vec<&str> = (0..=CANARY.len() - 12).map(|i| &CANARY[i..i + 12]).collect();
    for text in &shown {
        for piece in &pieces {
            assert!(!text.contains(piece), "canary piece {piece:?} leaked in: {text}");
        }
    }
}

/// The app is async; the store must work when called from inside a runtime, where keyring's
/// own runtime would otherwise refuse to start.
#[tokio::test]
async fn works_when_called_from_inside_a_tokio_runtime() {
    let Some((_turn, store)) = keychain("works_when_called_from_inside_a_tokio_runtime") else {
        return;
    };
    let key = id("in-runtime/default");
    store.set(&key, &Secret::from("sk-runtime-4444")).unwrap();
    assert_eq!(value(&store, &key).as_deref(), Some("sk-runtime-4444"));
    assert_eq!(store.delete(&key), Ok(true));
}

/// What an unreachable keychain says. Secret Service only: elsewhere the keychain is part of
/// the OS and there is no bus to take away.
#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd"))]
mod unreachable {
    use std::path::Path;
    use std::process::Command;

    use switchyard_secrets::{KeychainStore, Secret, SecretStore};

    use super::{CANARY, id, keychain};

    const CHILD: &str = "SWITCHYARD_KEYCHAIN_TEST_CHILD";
    const CHILD_TEST: &str = "unreachable::child_prints_what_the_store_says";

    /// Run in a child process by the tests below, with a session bus chosen for it. On its own
    /// (even with `--ignored`) it does nothing.
    #[test]
    #[ignore = "helper: the unreachable-keychain tests run it in a child process"]
    #[expect(clippy::print_stdout, reason = "the parent test reads the child's stdout")]
    fn child_prints_what_the_store_says() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let store = KeychainStore::with_service("switchyard-test-unreachable").unwrap();
        let key = id("unreachable/default");
        let outcomes = [
            format!("{:?}", store.check_available()),
            format!("{:?}", store.get(&key)),
            format!("{:?}", store.set(&key, &Secret::from(CANARY))),
            format!("{:?}", store.delete(&key)),
            match store.get(&key) {
                Err(err) => format!("Display: {err}"),
                Ok(found) => format!("Display: unexpectedly {found:?}"),
            },
        ];
        for outcome in outcomes {
            println!("STORE SAYS {outcome}");
        }
    }

    /// Runs [`child_prints_what_the_store_says`] through `launcher` and returns its store lines.
    fn what_the_store_says(mut launcher: Command) -> Vec<String> {
        let exe = std::env::current_exe().unwrap();
        let out = launcher
            .arg(exe)
            .args([CHILD_TEST, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<String> = stdout
            .lines()
            // libtest prints its own "test … " prefix on the first line.
            .filter_map(|l| l.split_once("STORE SAYS ").map(|(_, said)| said))
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), 5, "child output:\n{stdout}");
        lines
    }

    fn assert_unreachable_is_explained(lines: &[String]) {
        for line in &lines[..4] {
            assert!(
                line.starts_with("Err(Unavailable(\"no Secret Service on the D-Bus session bus"),
                "{line}"
            );
            assert!(!line.contains(&CANARY[..12]), "canary leaked: {line}");
        }
        let display = &lines[4];
        for needed in [
            "the OS keychain is not reachable: no Secret Service on the D-Bus session bus",
            "gnome-keyring or KeePassXC",
            "env: or file: references",
        ] {
            assert!(display.contains(needed), "{needed:?} missing from: {display}");
        }
    }

    #[test]
    fn without_a_session_bus_every_call_says_no_secret_service_and_offers_env() {
        let mut launcher = Command::new("env");
        launcher.arg("DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/switchyard-test/bus");
        assert_unreachable_is_explained(&what_the_store_says(launcher));
    }

    #[test]
    fn on_a_bus_without_a_secret_service_every_call_says_so_and_offers_env() {
        if keychain("on_a_bus_without_a_secret_service_every_call_says_so_and_offers_env").is_none()
        {
            return;
        }
        // A session bus that can start nothing: no service directories, so no D-Bus activation of
        // gnome-keyring behind our back.
        let dir = std::env::temp_dir().join(format!("switchyard-test-bus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("session.conf");
        std::fs::write(&config, bus_config(&dir)).unwrap();
        let mut launcher = Command::new("dbus-run-session");
        launcher.arg(format!("--config-file={}", config.display())).arg("--");
        let lines = what_the_store_says(launcher);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_unreachable_is_explained(&lines);
    }

    fn bus_config(dir: &Path) -> String {
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
    <busconfig>
      <type>session</type>
      <listen>unix:dir={}</listen>
      <auth>EXTERNAL</auth>
      <policy context="default">
        <allow send_destination="*" eavesdrop="true"/>
        <allow eavesdrop="true"/>
        <allow own="*"/>
      </policy>
    </busconfig>
    "#,
            dir.display()
        )
    }
}
