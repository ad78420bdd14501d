fn main() {
    // The app's own commands get permissions (`allow-api`, ...) that the capability must
    // grant: a command added to `generate_handler!` but not listed here and granted there is
    // unreachable from the window, not silently open.
    let manifest = tauri_build::AppManifest::new().commands(&[
        "api",
        "autostart_get",
        "autostart_set",
        "headless_command",
    ]);
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest))
        .expect("the Tauri build step runs");
}
