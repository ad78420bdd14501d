//! `switchyard connect TOOL` on a real data directory: the lines carry the stored config's
//! combo and a key, `--create-key` makes a key of the tool's own, `--write` edits only Codex's
//! documented file (keeping what was there), and Cursor is told why it cannot connect.

use std::path::Path;
use std::process::Output;

use super::{command, text};

/// The CLI with `home` as `$HOME` (where tools keep their config files), its data inside.
fn switchyard(home: &Path, args: &[&str]) -> Output {
    command(&home.join("data"))
        .args(args)
        .env("HOME", home)
        .env_remove("SWITCHYARD_KEY")
        .output()
        .expect("run switchyard")
}

#[test]
fn connect_fills_in_the_stored_combo_and_a_key_created_for_the_tool() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("in.toml");
    std::fs::write(
        &config,
        "[server]\nport = 4343\n\n[[providers]]\nid = \"ds\"\npreset = \"deepseek\"\n\n[[combos]]\nname = \"cheap\"\ntargets = [{ target = \"ds/deepseek-chat\" }]\n",
    )
    .unwrap();
    let imported = switchyard(home.path(), &["config", "import", config.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", text(&imported.stderr));

    let out = switchyard(home.path(), &["connect", "claude-code", "--create-key"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = text(&out.stdout);
    assert!(lines.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:4343\n"), "{lines}");
    assert!(lines.contains("ANTHROPIC_MODEL=cheap"), "{lines}");
    let key = lines.split("ANTHROPIC_AUTH_TOKEN=").nth(1).unwrap().lines().next().unwrap();
    assert!(key.starts_with("sy-"), "a real local key: {lines}");
    let listed = text(&switchyard(home.path(), &["keys", "list"]).stdout);
    assert!(listed.contains("claude-code"), "the key is named after the tool: {listed}");
}

#[test]
fn write_edits_the_codex_file_keeping_its_settings_and_a_backup_and_nothing_else() {
    let home = tempfile::tempdir().unwrap();
    let codex = home.path().join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(codex.join("config.toml"), "approval_policy = \"never\"\n").unwrap();
    let args =
        ["connect", "codex", "--key", "sy-k", "--model", "smart", "--port", "4444", "--write"];
    let out = switchyard(home.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(codex.join("config.toml")).unwrap();
    assert!(written.contains("approval_policy = \"never\""), "{written}");
    assert!(written.contains("base_url = \"http://127.0.0.1:4444/v1\""), "{written}");
    assert!(!written.contains("sy-k"), "the key stays in the environment: {written}");
    let backup = std::fs::read_to_string(codex.join("config.toml.bak")).unwrap();
    assert_eq!(backup, "approval_policy = \"never\"\n");

    let refused = switchyard(home.path(), &["connect", "zed", "--write"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("no config file this command edits"),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn cursor_is_told_it_cannot_reach_a_loopback_endpoint() {
    let home = tempfile::tempdir().unwrap();
    let out = switchyard(home.path(), &["connect", "cursor"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = text(&out.stdout);
    assert!(lines.contains("cannot reach http://127.0.0.1:4141"), "{lines}");
    assert!(!lines.contains("export "), "no lines that cannot work: {lines}");
}
