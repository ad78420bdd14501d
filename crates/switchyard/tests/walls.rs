//! The walls inside the app crate that no crate boundary keeps (ARCHITECTURE.md, "The life of
//! a response"): a module on one side names nothing on the other, directly, through a
//! re-export or alias, or by climbing out with `super::super::…`. A breach fails here, with
//! the file, the line and the path.

#[path = "walls/modules.rs"]
mod modules;

use std::path::Path;

use modules::{Crate, absolute};

/// A module, and the modules it must not reach, and why.
struct Wall {
    module: &'static str,
    forbidden: &'static [&'static str],
    why: &'static str,
}

const WALLS: &[Wall] = &[
    Wall {
        module: "proxy",
        forbidden: &["server", "config::editor", "connect", "cli"],
        why: "the request path does not import the HTTP server, the config editor, `connect` \
              or the CLI: it returns its own errors and the server renders them; constants \
              both sides need live below both",
    },
    Wall {
        module: "config",
        forbidden: &["server"],
        why: "the server reads the config, so the config does not read the server: what \
              both need lives in the config or below",
    },
    Wall {
        module: "config::editor",
        forbidden: &["proxy"],
        why: "the editor validates, records and saves an edit and returns it; the services \
              apply it to the proxy",
    },
];

fn segments(path: &str) -> Vec<String> {
    path.split("::").map(str::to_owned).collect()
}

/// Every path in a wall's modules that stands for something the wall forbids, as
/// `file:line: path`.
fn breaches(krate: &Crate, walls: &[Wall]) -> Vec<String> {
    let mut found = Vec::new();
    for wall in walls {
        let inside = segments(wall.module);
        let forbidden: Vec<Vec<String>> = wall.forbidden.iter().map(|f| segments(f)).collect();
        for mention in krate.mentions.iter().filter(|m| m.module.starts_with(&inside)) {
            let Some(path) = absolute(&mention.module, &mention.written) else { continue };
            let meanings = krate.meanings(path);
            let reached =
                forbidden.iter().find(|f| meanings.iter().any(|m| m.starts_with(f.as_slice())));
            if let Some(reached) = reached {
                found.push(format!(
                    "src/{}:{}: `{}` reaches crate::{} from {}: {}",
                    mention.file,
                    mention.line,
                    mention.written.join("::"),
                    reached.join("::"),
                    wall.module,
                    wall.why,
                ));
            }
        }
    }
    found
}

fn read_crate(sources: &[(&str, &str)]) -> Crate {
    Crate::read("lib.rs", &|file: &Path| {
        let file = file.to_str()?;
        sources.iter().find(|(name, _)| *name == file).map(|(_, text)| (*text).to_owned())
    })
}

#[test]
fn the_request_path_and_the_config_keep_to_their_side_of_the_walls() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::read("lib.rs", &|file: &Path| std::fs::read_to_string(src.join(file)).ok());
    for wall in WALLS {
        let inside = segments(wall.module);
        assert!(
            krate.files.values().any(|m| *m == inside),
            "no module {} in the crate: move its wall with it",
            wall.module
        );
    }
    let found = breaches(&krate, WALLS);
    assert!(found.is_empty(), "{} breaches of the walls:\n{}", found.len(), found.join("\n"));
}

/// A crate with the modules the walls name, and `proxy.rs` as given.
fn with_proxy(proxy: &str) -> Vec<String> {
    let krate = read_crate(&[
        ("lib.rs", "pub mod config; pub mod proxy; pub mod server;"),
        ("config.rs", "pub mod editor;\npub use self::editor::{ConfigEditor, Turn};"),
        ("config/editor.rs", "pub struct ConfigEditor; pub struct Turn;"),
        ("server.rs", "pub mod guard; pub const LIMIT: usize = 1;"),
        ("server/guard.rs", "pub const HEADER: &str = \"x\";"),
        ("proxy.rs", proxy),
    ]);
    breaches(&krate, WALLS)
}

#[test]
fn a_direct_import_of_the_server_from_the_request_path_is_a_breach_named_by_file_and_line() {
    let found = with_proxy("use std::sync::Arc;\n\nuse crate::server::LIMIT;\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/proxy.rs:3: `crate::server::LIMIT` reaches crate::server"));
}

#[test]
fn grouped_imports_re_exports_and_aliases_are_followed() {
    for proxy in [
        "use crate::{config::{self, editor::Turn}, keys};",
        "fn f(_: crate::config::ConfigEditor) {}",
        "use crate::config::ConfigEditor as Editor;",
        "use crate::config;\nfn f() { let _ = config::editor::Turn; }",
        "use crate as root;\nfn f() { root::server::guard::HEADER; }",
        "use crate::*;\nfn f() { server::LIMIT; }",
        "fn f() { crate::server::guard::HEADER.len(); }",
    ] {
        assert_eq!(with_proxy(proxy).len(), 1, "not found in {proxy:?}");
    }
}

#[test]
fn climbing_out_of_the_request_path_with_super_is_a_breach() {
    let krate = read_crate(&[
        ("lib.rs", "pub mod proxy; pub mod server;"),
        ("server.rs", "pub const LIMIT: usize = 1;"),
        ("proxy.rs", "mod login;\n#[cfg(test)]\nmod tests {\n    use super::super::server;\n}"),
        ("proxy/login.rs", "use super::login as me;\nuse super::super::server::LIMIT;"),
    ]);
    let found = breaches(&krate, WALLS);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("src/proxy.rs:4: `super::super::server`"), "{found:?}");
    assert!(found[1].starts_with("src/proxy/login.rs:2: `super::super::server::LIMIT`"));
}

#[test]
fn comments_and_literals_that_name_the_server_are_no_breach() {
    let proxy = "//! Unlike crate::server, this returns errors.\n\
                 /* crate::server /* nested */ crate::config::editor */\n\
                 const QUOTE: char = '\"';\n\
                 const S: &str = \"crate::server::LIMIT \\\" crate::server\";\n\
                 const R: &str = r#\"crate::server \" crate::server\"#;\n\
                 fn f<'a>(x: &'a str) -> u8 { b'\"' }\n\
                 use crate::config::Config;\n";
    assert_eq!(with_proxy(proxy), Vec::<String>::new());
    // What follows the literals is still read.
    let found = with_proxy(&format!("{proxy}use crate::server::LIMIT;\n"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/proxy.rs:8:"), "{found:?}");
}

#[test]
fn the_config_does_not_reach_the_server_and_the_editor_does_not_reach_the_proxy() {
    let krate = read_crate(&[
        ("lib.rs", "pub mod config; pub mod proxy; pub mod server;"),
        ("config.rs", "pub mod editor;\nconst MOST: usize = crate::server::LIMIT;"),
        ("config/editor.rs", "use crate::proxy::Proxy;"),
        ("server.rs", "pub const LIMIT: usize = 1;"),
        ("proxy.rs", "pub struct Proxy;\nuse crate::config::editor as _;"),
    ]);
    let found = breaches(&krate, WALLS);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].starts_with("src/proxy.rs:2: `crate::config::editor`"), "{found:?}");
    assert!(found[1].starts_with("src/config.rs:2: `crate::server::LIMIT`"), "{found:?}");
    assert!(found[2].starts_with("src/config/editor.rs:1: `crate::proxy::Proxy`"), "{found:?}");
}
