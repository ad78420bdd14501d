//! A TCP proxy that adds latency, for tests of a service across a network: team mode's
//! `PostgreSQL` "tens of milliseconds away" on one machine.
//!
//! Each direction of each connection is a pipe that holds every chunk for the one-way delay
//! before writing it on, without holding the chunks behind it: the link keeps its bandwidth and
//! only gains latency, as a long cable would (a round trip costs twice the delay). Bytes are
//! never reordered, dropped or coalesced differently than the kernel does anyway.
//!
//! Invariant: the proxy never outlives its [`LatencyProxy`] handle; dropping it stops the
//! listener and every connection it carries.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A latency-adding TCP proxy on 127.0.0.1 and a free port, in front of one upstream address.
#[derive(Debug)]
pub struct LatencyProxy {
    addr: SocketAddr,
    delay_us: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl LatencyProxy {
    /// Listens on 127.0.0.1:0 and forwards every connection to `upstream`, holding each byte
    /// for `one_way` in each direction.
    pub async fn start(upstream: SocketAddr, one_way: Duration) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let delay_us = Arc::new(AtomicU64::new(micros(one_way)));
        let delay = Arc::clone(&delay_us);
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let delay = Arc::clone(&delay);
                        connections.spawn(async move {
                            if let Ok(server) = TcpStream::connect(upstream).await {
                                carry(client, server, delay).await;
                            }
                        });
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Ok(Self { addr, delay_us, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Changes the one-way delay for bytes read from now on.
    pub fn set_delay(&self, one_way: Duration) {
        self.delay_us.store(micros(one_way), Ordering::Relaxed);
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        // The connections live in the task's `JoinSet`, which aborts them as it is dropped.
        self.task.abort();
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Both directions of one connection; ends when either side closes.
async fn carry(client: TcpStream, server: TcpStream, delay: Arc<AtomicU64>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pipe(client_read, server_write, Arc::clone(&delay));
    let down = pipe(server_read, client_write, delay);
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// One direction: a reader that stamps each chunk with when it may leave, and a writer that
/// waits for that instant, so chunks in flight overlap like packets on a wire.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Arc<AtomicU64>) {
    let (chunks, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let due = Instant::now() + Duration::from_micros(delay.load(Ordering::Relaxed));
                    if chunks.send((due, buffer[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = queued.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    // The writer drains what the reader queued before the reader's end closes the channel.
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_round_trip_through_the_proxy_takes_twice_the_delay() {
        let echo = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = echo.accept().await.unwrap();
            let mut buffer = [0u8; 16];
            while let Ok(n) = socket.read(&mut buffer).await {
                if n == 0 || socket.write_all(&buffer[..n]).await.is_err() {
                    return;
                }
            }
        });
        let proxy = LatencyProxy::start(echo_addr, Duration::from_millis(20)).await.unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        for _ in 0..3 {
            let sent = Instant::now();
            client.write_all(b"ping").await.unwrap();
            let mut back = [0u8; 4];
            client.read_exact(&mut back).await.unwrap();
            let took = sent.elapsed();
            assert_eq!(&back, b"ping");
            assert!(took >= Duration::from_millis(40), "{took:?}");
            assert!(took < Duration::from_millis(400), "{took:?}");
        }
    }
}
