//! The two processes under test, the mock upstream and the proxy, as children of the harness.
//!
//! Each is started (optionally under `taskset`), and the harness waits for its `listening on
//! URL` line instead of sleeping. The stdout pipe stays open for the child's whole life, so a
//! later write never meets a closed pipe; stderr goes to a log file in the work directory.
//! Children are killed when their handle drops, whatever happened.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long a child may take to print its `listening on` line.
const STARTUP: Duration = Duration::from_secs(60);

/// A running child and the URL it listens on.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) url: String,
    pub(crate) pid: u32,
    _child: Child,
    _stdout: Lines<BufReader<ChildStdout>>,
}

/// What to run, where, and with which environment.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) name: &'a str,
    pub(crate) program: &'a Path,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(&'a str, String)>,
    /// The CPU to pin the process to with `taskset`, if any.
    pub(crate) cpu: Option<usize>,
}

impl Launch<'_> {
    pub(crate) async fn start(self, work: &Path) -> anyhow::Result<Server> {
        let log = work.join(format!("{}.log", self.name));
        let stderr = std::fs::File::create(&log).context("create a child's log file")?;
        // `taskset -c N program` execs the program, so the pid is the program's own.
        let mut command = match self.cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(cpu.to_string()).arg(self.program);
                c
            }
            None => Command::new(self.program),
        };
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        let mut child =
            command.spawn().with_context(|| format!("start {}", self.program.display()))?;
        let pid = child.id().context("the child has a pid")?;
        let mut stdout = BufReader::new(child.stdout.take().context("piped stdout")?).lines();
        let line = tokio::time::timeout(STARTUP, stdout.next_line())
            .await
            .with_context(|| format!("{} said nothing for {STARTUP:?}", self.name))??;
        let Some(line) = line else {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("{} exited before listening:\n{log}", self.name);
        };
        let Some(url) = line.strip_prefix("listening on ") else {
            bail!("{} said {line:?} instead of `listening on URL`", self.name);
        };
        Ok(Server { url: url.to_owned(), pid, _child: child, _stdout: stdout })
    }
}

/// Resident and peak resident memory of a process, from `/proc/PID/status`, in bytes; the
/// resident part split into anonymous memory (heap, stacks) and file-backed pages (mostly the
/// binary's code).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Memory {
    pub(crate) rss: u64,
    pub(crate) peak: u64,
    pub(crate) anon: u64,
    pub(crate) file: u64,
}

impl Memory {
    pub(crate) fn of(pid: u32) -> anyhow::Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("read /proc/{pid}/status"))?;
        let field = |name: &str| -> anyhow::Result<u64> {
            let line = status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
            let kib: u64 = line.trim().trim_end_matches("kB").trim().parse()?;
            Ok(kib * 1024)
        };
        Ok(Self {
            rss: field("VmRSS:")?,
            peak: field("VmHWM:")?,
            anon: field("RssAnon:")?,
            file: field("RssFile:")?,
        })
    }
}

/// CPU time a process has used so far (user + system, all threads), from `/proc/PID/stat`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuTime {
    ticks: u64,
}

impl CpuTime {
    pub(crate) fn of(pid: u32) -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("read /proc/{pid}/stat"))?;
        // The command name (field 2) may hold spaces: count fields after its closing `)`.
        let rest = stat.rsplit_once(')').map(|(_, rest)| rest).context("a /proc stat line")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 (utime) and 15 (stime); `rest` starts at field 3.
        let field = |i: usize| -> anyhow::Result<u64> {
            Ok(fields.get(i - 3).context("a short /proc stat line")?.parse()?)
        };
        Ok(Self { ticks: field(14)? + field(15)? })
    }

    /// The share of one CPU used between `self` and `later` over `wall` (1.0 = one core busy).
    pub(crate) fn share(self, later: Self, wall: Duration) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "clock ticks of a benchmark step")]
        let seconds = later.ticks.saturating_sub(self.ticks) as f64 / clock_ticks_per_second();
        seconds / wall.as_secs_f64().max(1e-9)
    }
}

/// `getconf CLK_TCK` (the unit of `/proc/PID/stat` times), 100 when it cannot be asked.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Pins every thread of this process to `cpu` (before the runtime starts, so it has one thread).
pub(crate) fn pin_self(cpu: usize) -> anyhow::Result<()> {
    let status = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &cpu.to_string(), &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .context("run taskset")?;
    if !status.success() {
        bail!("taskset could not pin the harness: {status}");
    }
    Ok(())
}

/// Whether `taskset` can run here.
pub(crate) fn taskset_available() -> bool {
    std::process::Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
