//! The command that runs this app's config headless: the `switchyard` CLI the installers put
//! beside the desktop binary (`/usr/bin/switchyard` from the .deb and .rpm, inside the .app on
//! macOS, next to the .exe on Windows), on the same data directory. Pure, so it is tested
//! without a window.

use std::path::{Path, PathBuf};

/// The CLI's file name on this platform.
const CLI: &str = if cfg!(windows) { "switchyard.exe" } else { "switchyard" };

/// Where the installers put the CLI: beside the desktop binary `exe`.
pub fn cli_beside(exe: &Path) -> PathBuf {
    exe.parent().unwrap_or_else(|| Path::new(".")).join(CLI)
}

/// `'<cli>' --data-dir '<data_dir>' serve`, quoted for this platform's shell, so it can be
/// pasted as is. `serve` without `--config` runs the config stored in the data directory: the
/// one the desktop app edits.
pub fn command(cli: &Path, data_dir: &Path) -> String {
    format!("{} --data-dir {} serve", quote(cli), quote(data_dir))
}

/// One shell word. POSIX shells: single quotes, an embedded `'` closed, escaped and reopened.
/// Windows (PowerShell and cmd both take double quotes; a path cannot contain `"`).
fn quote(path: &Path) -> String {
    let text = path.display().to_string();
    if cfg!(windows) { format!("\"{text}\"") } else { format!("'{}'", text.replace('\'', r"'\''")) }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_cli_sits_beside_the_desktop_binary() {
        assert_eq!(
            cli_beside(Path::new("/usr/bin/switchyard-desktop")),
            Path::new("/usr/bin/switchyard")
        );
        assert_eq!(
            cli_beside(Path::new("/Applications/Switchyard.app/Contents/MacOS/switchyard-desktop")),
            Path::new("/Applications/Switchyard.app/Contents/MacOS/switchyard")
        );
    }

    #[test]
    fn the_command_runs_the_stored_config_of_the_same_data_directory() {
        let line = command(
            Path::new("/usr/bin/switchyard"),
            Path::new("/home/ada/.local/share/dev.switchyard.desktop"),
        );
        assert_eq!(
            line,
            "'/usr/bin/switchyard' --data-dir '/home/ada/.local/share/dev.switchyard.desktop' serve"
        );
    }

    #[test]
    fn a_quote_in_a_path_stays_one_shell_word() {
        let line = command(Path::new("/opt/it's/switchyard"), Path::new("/d"));
        assert_eq!(line, r"'/opt/it'\''s/switchyard' --data-dir '/d' serve");
        // What a POSIX shell makes of it: the path, whole.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(Path::new("/opt/it's/switchyard"))))
            .output()
            .expect("sh runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/opt/it's/switchyard");
    }
}
