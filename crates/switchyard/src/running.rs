//! The server running on a data directory, as the CLI finds it: `serve` leaves a
//! small file there ([`RUNNING_FILE`]: its port, its process id, the `--config` file it runs
//! on, if any) and removes it when it stops; `switchyard providers` and `switchyard status`
//! read it and, while that server answers, send it their calls through the management API
//! (one request per call, HTTP/1 on loopback, the data directory's management token), so a
//! running server applies a CLI edit exactly as it applies an edit from the UI.
//!
//! The file says where to look, never who answers: a file left by a server that was killed
//! names a port someone else may hold now. So the file names the process too, and a process
//! that is gone (where the platform says: Linux's `/proc`) is not asked at all; nothing in the
//! file is a secret.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_secrets::Secret;

use crate::server::ipc::{ApiCall, ApiReply};

/// The file in the data directory that names the running server.
pub const RUNNING_FILE: &str = "serve.json";

/// How long the CLI waits for the running server to answer one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What the running server leaves in its data directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Running {
    pub port: u16,
    pub pid: u32,
    /// The `--config` file it runs on; `None`: the config kept in the data directory.
    pub config: Option<PathBuf>,
}

/// Removes the [`RUNNING_FILE`] when dropped, if it is still this process's.
#[derive(Debug)]
pub struct RunningFile {
    path: PathBuf,
}

impl Drop for RunningFile {
    fn drop(&mut self) {
        if read_file(&self.path).is_some_and(|r| r.pid == std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Running {
    /// This process, serving on `port`.
    pub fn this_process(port: u16, config: Option<&Path>) -> Self {
        let config = config.map(|file| std::path::absolute(file).unwrap_or_else(|_| file.into()));
        Self { port, pid: std::process::id(), config }
    }

    /// Writes the file (replacing one a killed server left); it goes when the guard does.
    pub fn write(&self, data_dir: &Path) -> std::io::Result<RunningFile> {
        let path = data_dir.join(RUNNING_FILE);
        let text = serde_json::to_string(self).expect("plain fields serialize");
        let mut temporary = tempfile::NamedTempFile::new_in(data_dir)?;
        std::io::Write::write_all(&mut temporary, text.as_bytes())?;
        temporary.persist(&path).map_err(|e| e.error)?;
        Ok(RunningFile { path })
    }

    /// The server the data directory's file names, unless its process is known to be gone.
    pub fn find(data_dir: &Path) -> Option<Self> {
        read_file(&data_dir.join(RUNNING_FILE)).filter(|r| process_alive(r.pid))
    }

    /// One management API call to this server, with `token`. `Err`: it did not answer (it
    /// stopped, or never was); the message says why.
    pub async fn call(&self, token: &Secret, call: &ApiCall) -> Result<ApiReply, String> {
        tokio::time::timeout(CALL_TIMEOUT, self.send(token, call))
            .await
            .map_err(|_| format!("no answer within {} s", CALL_TIMEOUT.as_secs()))?
    }

    async fn send(&self, token: &Secret, call: &ApiCall) -> Result<ApiReply, String> {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| format!("cannot connect to 127.0.0.1:{}: {e}", self.port))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        let driver = tokio::spawn(connection);
        let mut request = Request::builder()
            .method(call.method.as_str())
            .uri(&call.path)
            .header(http::header::HOST, format!("127.0.0.1:{}", self.port));
        let mut authorization = http::HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| "the management token is not a valid header value".to_owned())?;
        authorization.set_sensitive(true);
        request = request.header(http::header::AUTHORIZATION, authorization);
        let body = match &call.body {
            Some(Value::String(text)) => {
                request = request.header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8");
                bytes::Bytes::from(text.clone())
            }
            Some(json) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                bytes::Bytes::from(json.to_string())
            }
            None => bytes::Bytes::new(),
        };
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let json = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        driver.abort();
        let body = if bytes.is_empty() {
            Value::Null
        } else if json {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        } else {
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        };
        Ok(ApiReply { status, body })
    }
}

fn read_file(path: &Path) -> Option<Running> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether process `pid` still runs, where the platform says cheaply (Linux); elsewhere the
/// answer is yes, and the call itself finds out.
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") { Path::new(&format!("/proc/{pid}")).exists() } else { true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_this_process_and_goes_with_its_guard() {
        let dir = tempfile::tempdir().unwrap();
        let running = Running::this_process(4141, None);
        let guard = running.write(dir.path()).unwrap();
        assert_eq!(Running::find(dir.path()), Some(running));
        drop(guard);
        assert!(!dir.path().join(RUNNING_FILE).exists());
        assert_eq!(Running::find(dir.path()), None);
    }

    #[test]
    fn a_file_left_by_a_process_that_is_gone_names_no_server() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // Beyond Linux's largest pid (2^22).
        let gone = Running { port: 4141, pid: 4_194_305, config: None };
        std::fs::write(dir.path().join(RUNNING_FILE), serde_json::to_string(&gone).unwrap())
            .unwrap();
        assert_eq!(Running::find(dir.path()), None);
    }

    #[test]
    fn a_guard_leaves_a_file_another_server_wrote_since() {
        let dir = tempfile::tempdir().unwrap();
        let guard = Running::this_process(4141, None).write(dir.path()).unwrap();
        let other = Running { port: 4142, pid: 1, config: None };
        let _other = other.write(dir.path()).unwrap();
        drop(guard);
        assert!(dir.path().join(RUNNING_FILE).exists(), "not this process's file any more");
    }
}
