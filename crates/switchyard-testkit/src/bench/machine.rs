//! What the figures were measured on: CPUs, toolchain, commit and how busy the machine was.
//!
//! Read once, before the harness pins itself to a core (after that, the process sees one CPU).

use std::process::Command;

/// The machine and source a run describes.
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) cpu_model: String,
    pub(crate) rustc: String,
    /// Short hash, plus a note when tracked files differ from it.
    pub(crate) commit: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute figures when the run started.
    pub(crate) load: String,
}

impl Machine {
    pub(crate) fn describe() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split_once(':'))
                    .map(|(_, model)| model.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let rustc = output("rustc", &["--version"]).unwrap_or_else(|| "unknown rustc".to_owned());
        let hash =
            output("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
        let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
            .is_some_and(|status| !status.is_empty());
        let commit = if dirty {
            format!("`{hash}` plus uncommitted changes to tracked files")
        } else {
            format!("`{hash}`")
        };
        Self { cpus, cpu_model, rustc, commit, load: load_average() }
    }
}

/// `/proc/loadavg`'s 1, 5 and 15 minute figures now.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").ok().map_or_else(
        || "unknown".to_owned(),
        |text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// A command's trimmed stdout, or `None` when it cannot run or fails.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
