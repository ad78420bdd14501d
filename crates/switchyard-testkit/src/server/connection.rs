//! One accepted TCP connection: HTTP/1.1 served by hyper, and a way for the code answering on it
//! to kill it.
//!
//! hyper owns the socket while it serves, so killing works by racing the connection future
//! against a [`ConnectionControl`] signal: when the signal wins, the connection future is
//! dropped, and with it the socket. A reset also sets `SO_LINGER` to zero just before the
//! socket closes, which makes the kernel send RST instead of FIN.
//!
//! Invariant: `SO_LINGER` is only ever zeroed on a socket that is being dropped on purpose; a
//! normal close stays a FIN, so a client's keep-alive pool never sees a spurious reset.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::{Shared, exchange};
use crate::record::InFlight;

/// The kill switch of one connection.
#[derive(Debug, Default)]
pub(crate) struct ConnectionControl {
    reset: AtomicBool,
    kill: Notify,
}

impl ConnectionControl {
    /// Drop the connection with a normal close (FIN): what a crashing upstream process or a
    /// proxy timing out looks like mid-body.
    pub(crate) fn close(&self) {
        self.kill.notify_one();
    }

    /// Drop the connection with a TCP reset (RST).
    pub(crate) fn reset(&self) {
        self.reset.store(true, Ordering::Release);
        self.kill.notify_one();
    }

    async fn killed(&self) {
        self.kill.notified().await;
    }
}

/// Serves one connection until the client closes it, the connection is killed, or the mock
/// stops (the task is aborted).
pub(super) async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    let _open = InFlight::enter(&shared.connections);
    // Events are small and must leave at once; see the module docs of `server`.
    let _ = stream.set_nodelay(true);
    let control = Arc::new(ConnectionControl::default());
    let io = TokioIo::new(Socket { stream, control: Arc::clone(&control) });
    let service = {
        let control = Arc::clone(&control);
        service_fn(move |request| {
            exchange::answer(Arc::clone(&shared), Arc::clone(&control), request)
        })
    };
    let connection = http1::Builder::new()
        // Hanging is a feature here; nothing about a slow client should time out on its own.
        .header_read_timeout(None)
        .serve_connection(io, service);
    tokio::select! {
        _ = connection => {}
        () = control.killed() => {}
    }
}

/// The accepted stream, with a last word on how it closes.
struct Socket {
    stream: TcpStream,
    control: Arc<ConnectionControl>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        if self.control.reset.load(Ordering::Acquire) {
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
