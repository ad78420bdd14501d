//! `file:PATH` secrets: the content of a file someone else put there (systemd's credentials
//! directory, a Docker or Kubernetes secret mounted as a file).
//!
//! Invariants:
//! - Switchyard only reads the file: never writes, copies or creates it.
//! - On unix, a file anyone but its owner may write is refused (whoever can write it can
//!   redirect the key), and so is a file owned by another user than us or root; a file others
//!   may read is used with a warning (Docker and Kubernetes mount secrets 0444 or 0644, owned by
//!   root). Each check follows symlinks, as reading does (Kubernetes mounts through them).
//! - The secret is the content with its trailing line break taken off; nothing else is
//!   trimmed.

use std::io::Read as _;
use std::path::Path;
use std::time::SystemTime;

use crate::{Secret, SecretError};

/// No secret is this long: a bigger file is the wrong file.
const MAX_LEN: u64 = 64 * 1024;

/// What tells a file changed without reading it: its size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
}

impl FileStamp {
    /// The file's stamp now.
    pub fn of(path: &Path) -> Result<Self, SecretError> {
        let meta = std::fs::metadata(path).map_err(|e| io_error(path, &e))?;
        Ok(Self { len: meta.len(), modified: meta.modified().ok() })
    }
}

/// Reads the secret in `path` after checking who may write it; also returns whether others
/// may read it (worth a warning) and its stamp.
pub fn read(path: &Path) -> Result<(Secret, FileStamp, bool), SecretError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, &e))?;
    if !meta.is_file() {
        return Err(SecretError::File(path.display().to_string(), "is not a file".to_owned()));
    }
    let world_readable = check_owner_and_mode(path, &meta)?;
    if meta.len() > MAX_LEN {
        return Err(SecretError::File(
            path.display().to_string(),
            format!("is {} bytes; a secret file holds the key alone", meta.len()),
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_LEN + 1).read_to_string(&mut text))
        .map_err(|e| io_error(path, &e))?;
    let secret =
        text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    if secret.trim().is_empty() {
        return Err(SecretError::File(path.display().to_string(), "is empty".to_owned()));
    }
    let stamp = FileStamp { len: meta.len(), modified: meta.modified().ok() };
    Ok((Secret::new(secret), stamp, world_readable))
}

#[cfg(unix)]
fn check_owner_and_mode(path: &Path, meta: &std::fs::Metadata) -> Result<bool, SecretError> {
    use std::os::unix::fs::MetadataExt as _;
    let refuse = |why: String| Err(SecretError::File(path.display().to_string(), why));
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return refuse(format!(
            "is writable by {} (mode {mode:o}), so anyone who can write it could swap the key; \
             run `chmod go-w {}`",
            if mode & 0o002 != 0 { "everyone" } else { "its group" },
            path.display()
        ));
    }
    let ours = rustix::process::geteuid().as_raw();
    if meta.uid() != ours && meta.uid() != 0 {
        return refuse(format!(
            "is owned by user {} (not this process's user {ours}, nor root); give it to one of \
             them with `chown`",
            meta.uid()
        ));
    }
    Ok(mode & 0o004 != 0)
}

/// Windows has no mode bits: the file's ACL is the user's to set.
#[cfg(not(unix))]
fn check_owner_and_mode(_: &Path, _: &std::fs::Metadata) -> Result<bool, SecretError> {
    Ok(false)
}

fn io_error(path: &Path, error: &std::io::Error) -> SecretError {
    let why = match error.kind() {
        std::io::ErrorKind::NotFound => "does not exist (yet)".to_owned(),
        std::io::ErrorKind::PermissionDenied => "cannot be read by this process's user".to_owned(),
        std::io::ErrorKind::InvalidData => "is not UTF-8 text".to_owned(),
        _ => format!("cannot be read: {error}"),
    };
    SecretError::File(path.display().to_string(), why)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn file(dir: &Path, text: &str, mode: u32) -> std::path::PathBuf {
        let path = dir.join("key");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn the_content_is_the_secret_without_its_trailing_line_break() {
        let dir = tempfile::tempdir().unwrap();
        for (text, secret) in
            [("sk-1\n", "sk-1"), ("sk-1\r\n", "sk-1"), (" sk-1 ", " sk-1 "), ("sk-1\n\n", "sk-1\n")]
        {
            let (read, _, others) = read(&file(dir.path(), text, 0o600)).unwrap();
            assert_eq!(read.expose(), secret);
            assert!(!others);
        }
    }

    #[test]
    fn a_file_others_may_write_is_refused_saying_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let error = read(&file(dir.path(), "sk-1", 0o666)).unwrap_err().to_string();
        assert!(error.contains("writable by everyone (mode 666)"), "{error}");
        assert!(error.contains("chmod go-w"), "{error}");
        assert!(!error.contains("sk-1"));
        let error = read(&file(dir.path(), "sk-1", 0o620)).unwrap_err().to_string();
        assert!(error.contains("writable by its group"), "{error}");
    }

    #[test]
    fn a_file_others_may_read_is_used_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let (secret, _, others) = read(&file(dir.path(), "sk-1\n", 0o644)).unwrap();
        assert_eq!(secret.expose(), "sk-1");
        assert!(others);
    }

    #[test]
    fn a_missing_or_empty_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let error = read(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(error.ends_with("does not exist (yet)"), "{error}");
        let error = read(&file(dir.path(), "\n", 0o600)).unwrap_err().to_string();
        assert!(error.ends_with("is empty"), "{error}");
    }
}
