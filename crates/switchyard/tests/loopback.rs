//! The server answers on every loopback address a client may resolve `localhost` to, and
//! `Host: [::1]` is taken only when `[::1]` is ours: where another program holds `[::1]:PORT`,
//! a request naming it is refused rather than served as if it came to us.

use std::net::{Ipv6Addr, SocketAddr};

use switchyard::{App, Launch};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The status code the server answers a `GET /v1/models` with `host` (no key: 401 means the
/// front door took the `Host`, 403 that it refused it).
async fn status(to: SocketAddr, host: &str) -> u16 {
    let mut tcp = TcpStream::connect(to).await.expect("connect");
    let head = format!("GET /v1/models HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"))
}

/// Whether this machine has an IPv6 loopback at all.
fn has_ipv6_loopback() -> bool {
    std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok()
}

#[tokio::test]
async fn ipv6_loopback_is_served_and_named_when_the_machine_has_it() {
    if !has_ipv6_loopback() {
        #[expect(clippy::print_stderr, reason = "a check that could not run says so")]
        {
            eprintln!("no IPv6 loopback on this machine: nothing to check");
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(Launch::new(dir.path())).await.unwrap();
    let listening = app.listen(0).await.unwrap();
    let port = listening.port();
    assert!(listening.listener.has_ipv6());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server =
        tokio::spawn(switchyard::server::serve(listening.listener, listening.state, async {
            let _ = stopped.await;
        }));

    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    let v4 = SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(status(v6, &format!("[::1]:{port}")).await, 401, "served on [::1]");
    assert_eq!(status(v6, &format!("localhost:{port}")).await, 401);
    assert_eq!(status(v4, &format!("[::1]:{port}")).await, 401);
    assert_eq!(status(v4, &format!("127.0.0.1:{port}")).await, 401);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
    app.shutdown().await;
}

#[tokio::test]
async fn a_squatted_ipv6_port_is_never_named_in_host() {
    if !has_ipv6_loopback() {
        #[expect(clippy::print_stderr, reason = "a check that could not run says so")]
        {
            eprintln!("no IPv6 loopback on this machine: nothing to check");
        }
        return;
    }
    // Another program holds [::1]:PORT before we start.
    let squatter = std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).unwrap();
    let port = squatter.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(Launch::new(dir.path())).await.unwrap();
    let listening = app.listen(port).await.unwrap();
    assert!(!listening.listener.has_ipv6(), "[::1]:{port} is the squatter's");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server =
        tokio::spawn(switchyard::server::serve(listening.listener, listening.state, async {
            let _ = stopped.await;
        }));

    let v4 = SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(status(v4, &format!("[::1]:{port}")).await, 403, "Host names the squatter's socket");
    assert_eq!(status(v4, &format!("127.0.0.1:{port}")).await, 401);
    assert_eq!(status(v4, &format!("localhost:{port}")).await, 401);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
    app.shutdown().await;
    drop(squatter);
}
