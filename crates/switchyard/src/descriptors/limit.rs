//! The one system call behind [`open_files`](super::open_files): raise the soft limit on open
//! files to the hard limit.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// macOS refuses a soft limit above `OPEN_MAX` (and reports an unlimited hard limit).
#[cfg(target_os = "macos")]
const OPEN_MAX: u64 = 10_240;

/// Raises the soft limit as far as the hard limit allows and returns it, or the limit as it
/// was when raising fails (the cap is then sized from that, and the start log says so).
pub(super) fn raise() -> Option<u64> {
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    let current = current?;
    #[cfg(target_os = "macos")]
    let target = Some(maximum.map_or(OPEN_MAX, |hard| hard.min(OPEN_MAX)));
    // An unlimited hard limit is refused as a soft one on Linux (it must stay under
    // `fs.nr_open`): keep the soft limit then.
    #[cfg(not(target_os = "macos"))]
    let target = maximum;
    let Some(target) = target.filter(|&target| target > current) else {
        return Some(current);
    };
    match setrlimit(Resource::Nofile, Rlimit { current: Some(target), maximum }) {
        Ok(()) => {
            tracing::debug!(from = current, to = target, "raised the soft limit on open files");
            Some(target)
        }
        Err(error) => {
            tracing::warn!(%error, soft = current, hard = target, "cannot raise the soft limit on open files");
            Some(current)
        }
    }
}
