//! How many connections this process can hold open: the limit on open files, raised to the
//! hard limit at start ([`open_files`]), and the connection cap that limit leaves
//! ([`ConnectionCap`]).
//!
//! Every client connection is a descriptor, and a request in flight holds an upstream socket
//! beside it; the process needs a few dozen more for itself (the state file and its WAL, the
//! listeners, the runtime, the log, the keychain's bus). A cap above what the limit leaves
//! lets a flood of idle connections take the last descriptor, and then the editor's next
//! connection cannot even be accepted. So the cap the accept loop enforces is the smaller of
//! `[server] max_connections` and `(limit - RESERVED) / 2`.
//!
//! This module is pure; the system calls live in `descriptors/limit.rs`.

use std::sync::OnceLock;

use serde::Serialize;
use ts_rs::TS;

#[cfg(unix)]
mod limit;

/// Descriptors kept for the process itself, outside the connections' share.
pub const RESERVED: u64 = 64;

/// The connection cap in effect, and what it was sized from (`GET /api/server`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ConnectionCap {
    /// `[server] max_connections`.
    pub max_connections: usize,
    /// The soft limit on open files once raised at start; `null` where there is none to read
    /// (Windows) or it is unlimited.
    #[ts(type = "number | null")]
    pub open_files: Option<u64>,
    /// How many connections may be open at once: the smaller of `max_connections` and what
    /// `open_files` leaves, counting an upstream socket beside each connection.
    pub effective: usize,
}

impl ConnectionCap {
    /// The cap for `max_connections` under a limit of `open_files` descriptors. Never zero: a
    /// limit too small for even one connection still lets the editor try.
    pub fn new(max_connections: usize, open_files: Option<u64>) -> Self {
        let effective = match open_files {
            Some(limit) => {
                let room = limit.saturating_sub(RESERVED) / 2;
                usize::try_from(room).unwrap_or(usize::MAX).min(max_connections).max(1)
            }
            None => max_connections,
        };
        Self { max_connections, open_files, effective }
    }

    /// Whether the limit on open files, not `max_connections`, sets the cap.
    pub fn limited_by_open_files(&self) -> bool {
        self.effective < self.max_connections
    }
}

/// The soft limit on open files, raised to the hard limit (on macOS to at most `OPEN_MAX`)
/// the first time it is asked for; `None` where there is none to read or it is unlimited.
/// Raising it is what every server does: the soft limit's default (1024 on a Linux desktop,
/// 256 on macOS) dates from `select`, which this process does not use.
pub fn open_files() -> Option<u64> {
    static RAISED: OnceLock<Option<u64>> = OnceLock::new();
    *RAISED.get_or_init(|| {
        #[cfg(unix)]
        {
            limit::raise()
        }
        #[cfg(not(unix))]
        {
            None
        }
    })
}

/// Whether `error` says this process (`EMFILE`) or the whole system (`ENFILE`) has no file
/// descriptor left.
pub fn exhausted(error: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        use rustix::io::Errno;
        let code = error.raw_os_error();
        code == Some(Errno::MFILE.raw_os_error()) || code == Some(Errno::NFILE.raw_os_error())
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_on_open_files_caps_connections_counting_an_upstream_socket_for_each() {
        // macOS's default soft limit, a Linux desktop's, and both raised.
        assert_eq!(ConnectionCap::new(1_100, Some(256)).effective, 96);
        assert_eq!(ConnectionCap::new(1_100, Some(1_024)).effective, 480);
        assert_eq!(ConnectionCap::new(1_100, Some(10_240)).effective, 1_100);
        assert_eq!(ConnectionCap::new(1_100, Some(1_048_576)).effective, 1_100);
    }

    #[test]
    fn max_connections_wins_when_it_is_the_smaller() {
        let cap = ConnectionCap::new(16, Some(256));
        assert_eq!(cap.effective, 16);
        assert!(!cap.limited_by_open_files());
        assert!(ConnectionCap::new(1_100, Some(256)).limited_by_open_files());
    }

    #[test]
    fn no_limit_to_read_leaves_max_connections() {
        assert_eq!(
            ConnectionCap::new(1_100, None),
            ConnectionCap { max_connections: 1_100, open_files: None, effective: 1_100 }
        );
    }

    #[cfg(unix)]
    #[test]
    fn only_emfile_and_enfile_are_running_out_of_descriptors() {
        use std::io::{Error, ErrorKind};
        assert!(exhausted(&Error::from_raw_os_error(24)));
        assert!(exhausted(&Error::from_raw_os_error(23)));
        assert!(!exhausted(&Error::from(ErrorKind::ConnectionAborted)));
        assert!(!exhausted(&Error::other("too many open files")));
    }

    #[test]
    fn a_limit_below_the_reserve_still_leaves_one_connection() {
        assert_eq!(ConnectionCap::new(1_100, Some(64)).effective, 1);
        assert_eq!(ConnectionCap::new(1_100, Some(10)).effective, 1);
        assert_eq!(ConnectionCap::new(1_100, Some(66)).effective, 1);
        assert_eq!(ConnectionCap::new(1_100, Some(68)).effective, 2);
    }
}
