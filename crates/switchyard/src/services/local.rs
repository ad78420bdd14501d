//! Finding the model servers that run on this machine: one plain `GET` of each server's model
//! list on its loopback port, every port at once, each within [`PROBE_LIMIT`]. What an answer
//! means is decided in `switchyard_catalogue::local`; this file only asks.
//!
//! Invariants:
//! - Nothing leaves loopback: the address is `127.0.0.1` literally, never a name to resolve.
//! - No credential goes out: no `Authorization`, no cookie; a server that wants a key says so
//!   and is reported as such.
//! - A port costs at most [`PROBE_LIMIT`] from the connection attempt to the last byte of the
//!   answer, and the ports are probed concurrently, so a whole look costs about that much
//!   whatever listens (or hangs) there.

use std::net::Ipv4Addr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::rt::TokioIo;
use switchyard_catalogue::local::{
    LocalAnswer, LocalPorts, LocalProbe, LocalServer, LocalServers, reaches_loopback_port,
    recognise,
};
use switchyard_core::clock::millis;

use super::Services;

/// How long one port may take, connection and whole answer.
pub const PROBE_LIMIT: Duration = Duration::from_millis(300);

/// The largest model list read: a server with hundreds of models stays well under it.
const MAX_ANSWER: usize = 1 << 20;

impl Services {
    /// Probes `ports` (the app's, [`Services::local_ports`], when `None`) and names, beside each
    /// server found, the configured providers that already point at its port.
    pub async fn local_servers(&self, ports: Option<&LocalPorts>) -> LocalServers {
        let mut look = probe_all(ports.unwrap_or(&self.local_ports)).await;
        let config = self.proxy.config();
        for probe in &mut look.probes {
            if let LocalAnswer::Found(found) = &mut probe.answer {
                found.providers = config
                    .providers
                    .iter()
                    .filter(|p| reaches_loopback_port(&p.base_url, probe.port))
                    .map(|p| p.id.to_string())
                    .collect();
            }
        }
        look
    }

    /// Where [`Services::local_servers`] looks unless told otherwise.
    pub fn local_ports(&self) -> &LocalPorts {
        &self.local_ports
    }
}

/// Every port at once; the answer lists them in the order given.
pub async fn probe_all(ports: &LocalPorts) -> LocalServers {
    let started = tokio::time::Instant::now();
    let probes = futures_util::future::join_all(
        ports.pairs().iter().map(|&(server, port)| probe(server, port)),
    )
    .await;
    LocalServers { probes, elapsed_ms: millis(started.elapsed()) }
}

async fn probe(server: LocalServer, port: u16) -> LocalProbe {
    let started = tokio::time::Instant::now();
    let answer = match tokio::time::timeout(PROBE_LIMIT, ask(server.path(), port)).await {
        Err(_) => LocalAnswer::TimedOut,
        Ok(Err(Unanswered::Refused)) => LocalAnswer::Refused,
        Ok(Err(Unanswered::Failed(detail))) => LocalAnswer::Unrecognised { detail },
        Ok(Ok((status, body))) => match recognise(server, port, status, &body) {
            Ok(found) => LocalAnswer::Found(found),
            Err(detail) => LocalAnswer::Unrecognised { detail },
        },
    };
    LocalProbe { probed: server, port, elapsed_ms: millis(started.elapsed()), answer }
}

enum Unanswered {
    Refused,
    Failed(String),
}

/// `GET path` on `127.0.0.1:port` over HTTP/1.1: the status and the body (at most
/// [`MAX_ANSWER`]).
async fn ask(path: &str, port: u16) -> Result<(u16, Bytes), Unanswered> {
    let stream =
        tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                Unanswered::Refused
            } else {
                Unanswered::Failed(format!("cannot connect: {e}"))
            }
        })?;
    let _ = stream.set_nodelay(true);
    let failed = |e: hyper::Error| Unanswered::Failed(format!("no HTTP answer: {e}"));
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(failed)?;
    // The connection is driven beside the request; dropping the guard (a timeout drops this
    // whole future) stops it, so a server that never answers keeps nothing running here.
    let driver = AbortOnDrop(tokio::spawn(connection));
    let request = http::Request::get(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, concat!("switchyard/", env!("CARGO_PKG_VERSION")))
        .body(Empty::<Bytes>::new())
        .expect("a static request builds");
    let response = sender.send_request(request).await.map_err(failed)?;
    let status = response.status().as_u16();
    let body = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| Unanswered::Failed(format!("the answer was not read whole: {e}")))?
        .to_bytes();
    drop(driver);
    Ok((status, body))
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
