//! The `switchyard config` commands on a real data directory: import checks the file whole
//! and stores it, export prints it back, and a file that does not validate changes nothing.

#[path = "cli/connect.rs"]
mod connect;
#[path = "cli/detect.rs"]
mod detect;
#[path = "cli/doctor.rs"]
mod doctor;
#[path = "cli/providers.rs"]
mod providers;

use std::path::Path;
use std::process::{Command, Output};

const GOOD: &str = r#"
[[providers]]
id = "openai"
kind = "openai"
models = ["gpt-4o"]
credentials = [{ id = "main", secret = "env:SWITCHYARD_CLI_TEST_KEY" }]

[[combos]]
name = "smart"
targets = [{ target = "openai/gpt-4o" }]
"#;

/// The CLI on the data directory `data`, quiet but for warnings.
fn command(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.arg("--data-dir").arg(data).env("SWITCHYARD_LOG", "warn");
    command
}

fn switchyard(data: &Path, args: &[&str]) -> Output {
    command(data)
        .args(args)
        .env("SWITCHYARD_CLI_TEST_KEY", "sk-cli-test-0000000000")
        // Validated, never connected to: no CLI command here starts a team.
        .env("SWITCHYARD_CLI_TEST_TEAM_DB", "postgres://team@127.0.0.1:9/switchyard")
        .output()
        .expect("run switchyard")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn config_import_stores_the_file_and_export_prints_it_back_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.toml");
    std::fs::write(&file, GOOD).unwrap();
    let data = dir.path().join("data");

    let empty = switchyard(&data, &["config", "export"]);
    assert!(empty.status.success(), "{}", text(&empty.stderr));

    let checked = switchyard(&data, &["config", "import", "--dry-run", file.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", text(&checked.stderr));
    assert!(text(&checked.stdout).starts_with("checked"), "{}", text(&checked.stdout));
    let still_empty = switchyard(&data, &["config", "export"]);
    assert_eq!(text(&still_empty.stdout), text(&empty.stdout), "a dry run stores nothing");

    let imported = switchyard(&data, &["config", "import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    assert!(text(&imported.stdout).contains("1 providers, 1 combos"), "{}", text(&imported.stdout));

    let exported = text(&switchyard(&data, &["config", "export"]).stdout);
    assert!(exported.contains("name = \"smart\""), "{exported}");
    assert!(exported.contains("env:SWITCHYARD_CLI_TEST_KEY"), "{exported}");
    assert!(!exported.contains("sk-cli-test"), "{exported}");
}

#[test]
fn a_config_that_does_not_validate_is_refused_with_the_field_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let good = dir.path().join("good.toml");
    std::fs::write(&good, GOOD).unwrap();
    assert!(switchyard(&data, &["config", "import", good.to_str().unwrap()]).status.success());
    let before = text(&switchyard(&data, &["config", "export"]).stdout);

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, GOOD.replace("openai/gpt-4o", "openai/gpt-5")).unwrap();
    let refused = switchyard(&data, &["config", "import", bad.to_str().unwrap()]);
    assert!(!refused.status.success());
    let message = text(&refused.stderr);
    assert!(message.contains("bad.toml: combos[0].targets[0].target"), "{message}");
    assert_eq!(text(&switchyard(&data, &["config", "export"]).stdout), before);
}

#[cfg(unix)]
#[test]
fn rotate_management_token_prints_a_new_token_and_writes_it_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let data = tempfile::tempdir().unwrap();
    let first = switchyard(data.path(), &["keys", "rotate-management-token"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let second = switchyard(data.path(), &["keys", "rotate-management-token"]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    let (first, second) = (text(&first.stdout), text(&second.stdout));
    assert!(second.trim().starts_with("sy-") && second.trim() != first.trim(), "{second}");
    let file = data.path().join("management-token");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), second.trim());
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[cfg(unix)]
#[test]
fn two_keys_cannot_share_a_name_so_revoking_by_name_revokes_exactly_one() {
    let data = tempfile::tempdir().unwrap();
    let created = switchyard(data.path(), &["keys", "create", "--name", "editor"]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let again = switchyard(data.path(), &["keys", "create", "--name", "editor"]);
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("already"), "{}", text(&again.stderr));
    let revoked = switchyard(data.path(), &["keys", "revoke", "editor"]);
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    let list = text(&switchyard(data.path(), &["keys", "list"]).stdout);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("revoked"), "{list}");
}

#[cfg(unix)]
#[test]
fn serve_refuses_a_management_token_file_other_users_may_read_naming_the_file_and_the_fix() {
    use std::os::unix::fs::PermissionsExt as _;
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("management-token");
    std::fs::write(&file, "sy-seen-by-others").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let served = switchyard(data.path(), &["serve", "--port", "0"]);
    assert!(!served.status.success(), "serve must not start");
    let said = text(&served.stderr);
    assert!(said.contains(&format!("chmod 600 {}", file.display())), "{said}");
    assert!(!said.contains("sy-seen-by-others"), "the token is never printed: {said}");
}

#[test]
fn import_lists_each_secret_destination_as_new_or_known_and_confirm_yes_confirms_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.toml");
    std::fs::write(&file, GOOD).unwrap();
    let data = dir.path().join("data");
    let pair = "env:SWITCHYARD_CLI_TEST_KEY -> https://api.openai.com:443";
    let requests = "requests -> https://api.openai.com:443";

    let checked =
        text(&switchyard(&data, &["config", "import", "--dry-run", file.to_str().unwrap()]).stdout);
    assert!(checked.lines().any(|l| l.starts_with("new ") && l.contains(pair)), "{checked}");
    assert!(checked.lines().any(|l| l.starts_with("new ") && l.contains(requests)), "{checked}");

    let imported = text(&switchyard(&data, &["config", "import", file.to_str().unwrap()]).stdout);
    assert!(imported.contains("2 new destinations or pairs"), "{imported}");
    assert!(imported.contains("switchyard config confirm"), "{imported}");

    let confirmed = switchyard(&data, &["config", "confirm", "--yes"]);
    assert!(confirmed.status.success(), "{}", text(&confirmed.stderr));
    let out = text(&confirmed.stdout);
    assert!(out.contains("credential openai/main would send:") && out.contains(pair), "{out}");
    assert!(out.contains(requests), "{out}");
    assert!(out.contains("confirmed 2 destinations and pairs"), "{out}");

    let again =
        text(&switchyard(&data, &["config", "import", "--dry-run", file.to_str().unwrap()]).stdout);
    assert!(again.lines().any(|l| l.starts_with("known ") && l.contains(pair)), "{again}");
    let nothing = text(&switchyard(&data, &["config", "confirm", "--yes"]).stdout);
    assert!(nothing.contains("nothing to confirm"), "{nothing}");
}

#[test]
fn config_confirm_without_yes_confirms_nothing_unless_the_user_says_y() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.toml");
    std::fs::write(&file, GOOD).unwrap();
    let data = dir.path().join("data");
    assert!(switchyard(&data, &["config", "import", file.to_str().unwrap()]).status.success());

    // stdin is empty: no answer is "no".
    let refused = text(&switchyard(&data, &["config", "confirm"]).stdout);
    assert!(refused.contains("[y/N]") && refused.contains("nothing confirmed"), "{refused}");
    let still =
        text(&switchyard(&data, &["config", "confirm", "--yes", "--provider", "other"]).stdout);
    assert!(
        still.contains("nothing to confirm"),
        "another provider's pairs are left alone: {still}"
    );
    let dry =
        text(&switchyard(&data, &["config", "import", "--dry-run", file.to_str().unwrap()]).stdout);
    assert!(dry.lines().any(|l| l.starts_with("new ")), "{dry}");
}

#[test]
fn import_lists_a_keyless_destination_and_the_team_section_and_confirm_confirms_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.toml");
    let keyless = r#"
[[providers]]
id = "collector"
kind = "openai"
base_url = "https://collector.example/v1"

[team]
database_url = "env:SWITCHYARD_CLI_TEST_TEAM_DB"
"#;
    std::fs::write(&file, keyless).unwrap();
    let data = dir.path().join("data");
    let requests = "requests -> https://collector.example:443/v1  (collector/default)";

    let dry = switchyard(&data, &["config", "import", "--dry-run", file.to_str().unwrap()]);
    let checked = text(&dry.stdout);
    assert!(checked.lines().any(|l| l.starts_with("new ") && l.contains(requests)), "{checked}");
    assert!(
        checked.lines().any(|l| l.starts_with("new ")
            && l.contains("team database env:SWITCHYARD_CLI_TEST_TEAM_DB")),
        "{checked}"
    );
    assert!(!checked.contains("postgres://"), "the reference, never the URL: {checked}");

    assert!(switchyard(&data, &["config", "import", file.to_str().unwrap()]).status.success());
    let out = text(&switchyard(&data, &["config", "confirm", "--yes"]).stdout);
    assert!(out.contains("provider collector would send:"), "{out}");
    assert!(out.contains("requests -> https://collector.example:443"), "{out}");
    let again = switchyard(&data, &["config", "import", "--dry-run", file.to_str().unwrap()]);
    let again = text(&again.stdout);
    assert!(again.lines().any(|l| l.starts_with("known ") && l.contains(requests)), "{again}");
}
