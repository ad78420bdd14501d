//! Picks the web UI that `switchyard serve` embeds: the built UI in `ui/dist` when it is there
//! (or the directory `SWITCHYARD_UI_DIST` names), else nothing, in which case `/` serves a short
//! page saying how to get it (`server/web_ui.rs`). The build never runs Node itself: building
//! the UI is `scripts/serve`'s job (or `npm --prefix ui run build`), so `cargo build`, `cargo
//! test` and clippy stay offline and never write into the source tree.
//!
//! `include_dir!` cannot see which files it read on stable Rust, so this script is what makes a
//! rebuilt UI rebuild the crate: it watches `ui/dist` when it exists and `ui/` when it does not
//! (a watched path that is missing would rerun this script, and rebuild the crate, every time).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SWITCHYARD_UI_DIST");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let ui = manifest.join("../../ui");
    let dist =
        std::env::var_os("SWITCHYARD_UI_DIST").map_or_else(|| ui.join("dist"), PathBuf::from);
    let embedded = if dist.join("index.html").is_file() {
        println!("cargo:rerun-if-changed={}", dist.display());
        dist.canonicalize().expect("an existing directory has a canonical path")
    } else {
        if ui.is_dir() {
            println!("cargo:rerun-if-changed={}", ui.display());
        }
        let none = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("no-ui");
        std::fs::create_dir_all(&none).expect("OUT_DIR is writable");
        none
    };
    println!("cargo:rustc-env=SWITCHYARD_UI_EMBEDDED={}", embedded.display());
}
