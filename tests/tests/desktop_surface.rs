//! The desktop app's attack surface, as a reviewed snapshot: the webview's content security
//! policy, what each capability lets the window call, and the app's own commands. Any widening
//! changes `src-tauri/security-surface.txt`, so it shows up in review; a few things are refused
//! outright whatever the snapshot says.
//!
//! Reads the files only (no Tauri build), so it runs with every `cargo test`. After an intended
//! change: `SWITCHYARD_UPDATE_SNAPSHOTS=1 cargo test -p switchyard-e2e --test desktop_surface`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn shell() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../src-tauri")
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config() -> Value {
    json(&shell().join("tauri.conf.json"))
}

/// The CSP's directives, each with its sources, in order.
fn csp(config: &Value) -> Vec<(String, Vec<String>)> {
    let csp = config["app"]["security"]["csp"].as_str().expect("app.security.csp is set");
    csp.split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|directive| {
            let mut words = directive.split_whitespace().map(str::to_owned);
            let name = words.next().expect("a directive has a name");
            (name, words.collect())
        })
        .collect()
}

/// Every capability file, sorted by name.
fn capabilities() -> Vec<(String, Value)> {
    let dir = shell().join("capabilities");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), json(&p)))
        .collect()
}

/// The commands the window can invoke: the names in `generate_handler![...]`.
fn commands() -> Vec<String> {
    let lib = std::fs::read_to_string(shell().join("src/lib.rs")).unwrap();
    let start = lib.find("generate_handler![").expect("the shell registers its commands") + 18;
    let end = start + lib[start..].find(']').unwrap();
    let mut names: Vec<String> = lib[start..end]
        .split(',')
        .map(|c| c.trim().rsplit("::").next().unwrap().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    names.sort();
    names
}

/// The commands `build.rs` declares in the app manifest (each gets an `allow-` permission).
fn manifest_commands() -> Vec<String> {
    let build = std::fs::read_to_string(shell().join("build.rs")).unwrap();
    let start = build.find(".commands(&[").expect("build.rs declares an app manifest") + 12;
    let end = start + build[start..].find(']').unwrap();
    let mut names: Vec<String> = build[start..end]
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    names.sort();
    names
}

/// The plugins the shell installs: the crate of each `.plugin(...)` call in `lib.rs`.
fn plugins() -> Vec<String> {
    let lib = std::fs::read_to_string(shell().join("src/lib.rs")).unwrap();
    let mut names: Vec<String> = lib
        .split(".plugin(")
        .skip(1)
        .map(|call| call.split("::").next().unwrap_or_default().trim().to_owned())
        .collect();
    names.sort();
    names
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map_or_else(Vec::new, |a| {
        a.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect()
    })
}

fn surface() -> String {
    let config = config();
    let security = &config["app"]["security"];
    let mut out = String::new();
    let _ = writeln!(out, "# csp");
    for (name, sources) in csp(&config) {
        let _ = writeln!(out, "{name} {}", sources.join(" "));
    }
    let _ = writeln!(out, "\n# security");
    for key in ["freezePrototype", "dangerousDisableAssetCspModification", "assetProtocol"] {
        let _ = writeln!(out, "{key} = {}", security.get(key).unwrap_or(&Value::Null));
    }
    let _ = writeln!(out, "capabilities = {}", security["capabilities"]);
    let _ = writeln!(out, "withGlobalTauri = {}", config["app"]["withGlobalTauri"]);
    for (file, capability) in capabilities() {
        let _ = writeln!(out, "\n# capability {file}");
        let _ = writeln!(out, "identifier = {}", capability["identifier"]);
        let _ = writeln!(out, "windows = {}", strings(&capability["windows"]).join(" "));
        let _ = writeln!(out, "remote = {}", capability.get("remote").unwrap_or(&Value::Null));
        let _ =
            writeln!(out, "platforms = {}", capability.get("platforms").unwrap_or(&Value::Null));
        for permission in strings(&capability["permissions"]) {
            let _ = writeln!(out, "permission {permission}");
        }
    }
    let _ = writeln!(out, "\n# commands");
    for command in commands() {
        let _ = writeln!(out, "{command}");
    }
    let _ = writeln!(out, "\n# app manifest (build.rs)");
    for command in manifest_commands() {
        let _ = writeln!(out, "{command}");
    }
    let _ = writeln!(out, "\n# plugins");
    for plugin in plugins() {
        let _ = writeln!(out, "{plugin}");
    }
    let _ = writeln!(out, "\n# build");
    let _ = writeln!(out, "devUrl = {}", config["build"].get("devUrl").unwrap_or(&Value::Null));
    for window in config["app"]["windows"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "window {} create = {}",
            window["label"],
            window.get("create").unwrap_or(&Value::Bool(true))
        );
    }
    out
}

#[test]
fn the_desktop_security_surface_matches_the_reviewed_snapshot() {
    let snapshot = shell().join("security-surface.txt");
    let now = surface();
    if std::env::var_os("SWITCHYARD_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&snapshot, &now).unwrap();
        return;
    }
    let reviewed = std::fs::read_to_string(&snapshot).unwrap_or_default();
    assert!(
        reviewed == now,
        "the desktop's CSP, capabilities or commands changed; review, then run \
         `SWITCHYARD_UPDATE_SNAPSHOTS=1 cargo test -p switchyard-e2e --test desktop_surface` \
         and commit src-tauri/security-surface.txt.\n--- reviewed\n{reviewed}\n--- now\n{now}"
    );
}

#[test]
fn the_csp_allows_no_inline_code_eval_or_remote_origin() {
    let config = config();
    let directives = csp(&config);
    let get = |name: &str| directives.iter().find(|(n, _)| n == name).map(|(_, s)| s.clone());
    assert_eq!(get("default-src"), Some(vec!["'self'".to_owned()]));
    assert_eq!(get("object-src"), Some(vec!["'none'".to_owned()]));
    assert_eq!(get("frame-ancestors"), Some(vec!["'none'".to_owned()]));
    for (name, sources) in &directives {
        for source in sources {
            assert!(
                !matches!(
                    source.as_str(),
                    "'unsafe-inline'" | "'unsafe-eval'" | "*" | "http:" | "https:"
                ),
                "{name} allows {source}"
            );
            // The one non-'self' origin is Tauri's own IPC endpoint.
            if source.contains("://") {
                assert_eq!(
                    (name.as_str(), source.as_str()),
                    ("connect-src", "http://ipc.localhost")
                );
            }
        }
    }
    assert_eq!(config["app"]["security"]["freezePrototype"], true);
    assert_ne!(
        config["app"]["withGlobalTauri"], true,
        "no global Tauri object for injected scripts"
    );
}

#[test]
fn no_capability_reaches_the_file_system_a_shell_the_network_or_a_remote_page() {
    for (file, capability) in capabilities() {
        assert!(capability.get("remote").is_none(), "{file}: remote pages get no capability");
        for permission in strings(&capability["permissions"]) {
            for refused in ["fs:", "shell:", "http:", "opener:", "process:", "updater:"] {
                assert!(!permission.starts_with(refused), "{file}: {permission}");
            }
            // The app's own commands, one by one (see the manifest test), and events.
            let own = !permission.contains(':') && permission.starts_with("allow-");
            assert!(
                own || permission.starts_with("core:event:"),
                "{file}: {permission} needs a review"
            );
        }
    }
}

#[test]
fn every_command_is_declared_in_the_manifest_and_granted_by_name() {
    // With an app manifest, a command is reachable only through its `allow-` permission: the
    // window's capability grants each one by name, never a wildcard or a default set.
    assert_eq!(manifest_commands(), commands(), "build.rs's AppManifest and generate_handler!");
    let granted: Vec<String> = capabilities()
        .iter()
        .flat_map(|(_, c)| strings(&c["permissions"]))
        .filter(|p| !p.contains(':'))
        .collect();
    let wanted: Vec<String> =
        commands().iter().map(|c| format!("allow-{}", c.replace('_', "-"))).collect();
    assert_eq!(granted, wanted);
}

#[test]
fn the_window_is_created_in_code_behind_the_navigation_guard() {
    // `create: false`: lib.rs builds it with `on_navigation` and `on_new_window`; a window the
    // config created by itself would have neither.
    let config = config();
    for window in config["app"]["windows"].as_array().expect("windows") {
        assert_eq!(window["create"], Value::Bool(false), "{window}");
    }
    let lib = std::fs::read_to_string(shell().join("src/lib.rs")).unwrap();
    assert!(lib.contains(".on_navigation(") && lib.contains(".on_new_window("));
}
