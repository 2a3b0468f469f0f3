//! Listening sockets (TCP over IPv4 or IPv6, or a Unix socket) and the accept loop.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Notify;

use super::{conn, Shared};

/// Connections waiting to be accepted, as beanstalkd asks for.
pub(super) const BACKLOG: u32 = 1024;

/// Whether an accepted TCP socket inherits TCP_NODELAY from the listening socket (so
/// setting it once on the listener spares a system call per connection). Linux copies
/// the option to accepted sockets; elsewhere it is set on each one.
const NODELAY_INHERITED: bool = cfg!(target_os = "linux");

/// Where to listen, as given by `-l`/`-p`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
    /// TCP with TLS (`tls:` before a TCP address).
    Tls(SocketAddr),
}

impl ListenAddr {
    /// Parse one `-l` value: `127.0.0.1`, `::1`, `[::1]`, `0.0.0.0`, `localhost`,
    /// any of these with a port (`127.0.0.1:11301`, `[::1]:11301`, `localhost:11301`;
    /// an IPv6 address takes its port only inside brackets), or `unix:/path`; any TCP
    /// form after `tls:` is served with TLS (`tls:0.0.0.0:11443`, `tls:[::1]`).
    /// `port` (`-p`) is the port of an address given without one.
    pub fn parse(listen: &str, port: u16) -> Result<ListenAddr, String> {
        if let Some(rest) = listen.strip_prefix("tls:") {
            return match ListenAddr::parse(rest, port) {
                Ok(ListenAddr::Tcp(addr)) => Ok(ListenAddr::Tls(addr)),
                Ok(_) => Err(format!(
                    "{listen:?}: tls: takes a TCP address (tls:0.0.0.0:11443, tls:[::1]:11443)"
                )),
                Err(e) => Err(e),
            };
        }
        if let Some(path) = listen.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a socket path, e.g. unix:/run/beanpole.sock".into());
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        let bad = || {
            format!(
                "{listen:?} is not an IPv4 or IPv6 address (with an optional port: \
                 127.0.0.1:11300, [::1]:11300) or unix:/path (host names other than \
                 localhost are not resolved)"
            )
        };
        let (host, port) = if let Some(rest) = listen.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
            let port = match after {
                "" => port,
                _ => parse_port(after.strip_prefix(':').ok_or_else(bad)?)?,
            };
            (inside, port)
        } else if listen.parse::<IpAddr>().is_ok() {
            (listen, port)
        } else {
            match listen.split_once(':') {
                Some((host, after)) if !after.contains(':') => (host, parse_port(after)?),
                _ => (listen, port),
            }
        };
        let ip = if host == "localhost" {
            IpAddr::from([127, 0, 0, 1])
        } else {
            host.parse::<IpAddr>().map_err(|_| bad())?
        };
        Ok(ListenAddr::Tcp(SocketAddr::new(ip, port)))
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            ListenAddr::Tls(a) => write!(f, "tls:{a}"),
        }
    }
}

/// The port after `HOST:` in `-l`: decimal digits, 0 to 65535.
fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(port) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(format!("{text:?} is not a port number (0 to 65535)")),
    }
}

/// The address actually bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for BoundAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoundAddr::Tcp(a) => write!(f, "{a}"),
            BoundAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A bound, listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
    /// TCP whose connections start with a TLS handshake.
    Tls(TcpListener),
}

impl Listener {
    pub fn local_addr(&self) -> io::Result<BoundAddr> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => Ok(BoundAddr::Tcp(l.local_addr()?)),
            Listener::Unix(_, path) => Ok(BoundAddr::Unix(path.clone())),
        }
    }
}

/// A socket file left by a server that is gone would make bind fail; remove it,
/// but never remove anything that is not a socket.
pub(super) fn remove_stale_socket(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running server", path.display()),
                ));
            }
            std::fs::remove_file(path)
        }
        _ => Ok(()),
    }
}

/// Counts the connection tasks still running, so that shutdown can wait for them
/// without keeping a handle per task (a `JoinSet` costs an allocation per
/// connection and a wakeup of the accept loop whenever one ends).
#[derive(Debug, Default)]
pub struct Live {
    count: AtomicUsize,
    /// Signalled when the count drops to zero. A `Notify` because the waiter checks
    /// the count after registering, so a last exit cannot be missed.
    none_left: Notify,
}

impl Live {
    /// Wait until no connection task is left.
    pub async fn wait_for_none(&self) {
        loop {
            let none_left = self.none_left.notified();
            tokio::pin!(none_left);
            none_left.as_mut().enable();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            none_left.await;
        }
    }
}

/// Holds a connection task's place in [`Live`]; the count drops when the task ends,
/// however it ends (also when a stopped runtime drops it).
struct LiveGuard(Arc<Shared>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let live = &self.0.live;
        if live.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            live.none_left.notify_waiters();
        }
    }
}

fn spawn_conn<S: conn::Socket>(sock: S, shared: &Arc<Shared>) {
    shared.live.count.fetch_add(1, Ordering::AcqRel);
    let guard = LiveGuard(Arc::clone(shared));
    shared.spawn(async move {
        conn::serve(sock, &guard.0).await;
        drop(guard);
    });
}

/// A session a cluster follower forwards, registered in the store as `id`.
pub(super) fn spawn_session<S: conn::Socket>(
    stream: S,
    shared: Arc<Shared>,
    signal: Arc<super::signal::ConnSignal>,
    id: crate::store::ConnId,
    session: Box<conn::SessionConn>,
    greeting: Vec<u8>,
) {
    shared.live.count.fetch_add(1, Ordering::AcqRel);
    let guard = LiveGuard(Arc::clone(&shared));
    shared.spawn(async move {
        conn::serve_as(stream, &guard.0, signal, id, Some((session, greeting))).await;
        drop(guard);
    });
}

/// A TLS connection: its handshake runs in its own task (never in the accept loop),
/// and only a connection whose handshake succeeded is served and counted as live.
fn spawn_tls(stream: tokio::net::TcpStream, shared: &Arc<Shared>) {
    let Some(tls) = shared.tls.clone() else {
        // bind refuses a tls: listener without TLS settings; drop the connection.
        return;
    };
    let task_shared = Arc::clone(shared);
    shared.spawn(async move {
        let shared = task_shared;
        let Some(stream) = tls.handshake(stream, shared.verbose).await else {
            return;
        };
        shared.live.count.fetch_add(1, Ordering::AcqRel);
        let guard = LiveGuard(shared);
        conn::serve(stream, &guard.0).await;
        drop(guard);
    });
}

/// Accept until `shutdown` resolves, then close the listening socket.
pub async fn accept_loop(listener: Listener, shared: &Arc<Shared>, shutdown: impl Future) {
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = accept(&listener) => accepted,
        };
        if accepted.is_ok()
            && shared
                .limits
                .refuse(shared.live.count.load(Ordering::Acquire), &shared.events)
        {
            // Over --max-connections: the socket is closed as it is dropped.
            continue;
        }
        match accepted {
            Ok(Accepted::Tcp(stream)) => {
                if !NODELAY_INHERITED {
                    let _ = stream.set_nodelay(true);
                }
                spawn_conn(stream, shared);
            }
            Ok(Accepted::Unix(stream)) => spawn_conn(stream, shared),
            Ok(Accepted::Tls(stream)) => {
                if !NODELAY_INHERITED {
                    let _ = stream.set_nodelay(true);
                }
                spawn_tls(stream, shared);
            }
            Err(e) => {
                // Out of file descriptors or a transient network error: say so and
                // back off briefly instead of spinning on the same error.
                shared.events.log(crate::events::level::ERROR, || {
                    format!("accept failed: {e}")
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
    /// A TCP connection whose TLS handshake is still to be done.
    Tls(tokio::net::TcpStream),
}

async fn accept(listener: &Listener) -> io::Result<Accepted> {
    match listener {
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| Accepted::Tcp(s)),
        Listener::Unix(l, _) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
        Listener::Tls(l) => l.accept().await.map(|(s, _)| Accepted::Tls(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_tcp_sockets_do_not_delay_writes() {
        let listener = Listener::bind(&ListenAddr::Tcp(([127, 0, 0, 1], 0).into())).expect("bind");
        let Ok(BoundAddr::Tcp(addr)) = listener.local_addr() else {
            panic!("expected a TCP address");
        };
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let Ok(Accepted::Tcp(stream)) = accept(&listener).await else {
            panic!("expected a TCP connection");
        };
        // What accept_loop relies on when it skips set_nodelay.
        if NODELAY_INHERITED {
            assert!(stream.nodelay().expect("getsockopt"));
        }
    }

    fn tcp(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[test]
    fn listen_addresses_take_a_port_or_the_default_one() {
        let ok = [
            ("127.0.0.1", "127.0.0.1:11300"),
            ("0.0.0.0", "0.0.0.0:11300"),
            ("::1", "[::1]:11300"),
            ("::", "[::]:11300"),
            ("[::1]", "[::1]:11300"),
            ("localhost", "127.0.0.1:11300"),
            ("127.0.0.1:11301", "127.0.0.1:11301"),
            ("[::1]:0", "[::1]:0"),
            ("[fd00::2]:65535", "[fd00::2]:65535"),
            ("localhost:8", "127.0.0.1:8"),
        ];
        for (text, want) in ok {
            assert_eq!(
                ListenAddr::parse(text, 11300),
                Ok(ListenAddr::Tcp(tcp(want))),
                "{text}"
            );
        }
        assert_eq!(
            ListenAddr::parse("unix:/run/b.sock", 11300),
            Ok(ListenAddr::Unix("/run/b.sock".into()))
        );
        for (text, want) in [
            ("tls:0.0.0.0:11443", "0.0.0.0:11443"),
            ("tls:[::1]:11443", "[::1]:11443"),
            ("tls:127.0.0.1", "127.0.0.1:11300"),
            ("tls:localhost", "127.0.0.1:11300"),
        ] {
            assert_eq!(
                ListenAddr::parse(text, 11300),
                Ok(ListenAddr::Tls(tcp(want))),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_listen_addresses_are_refused() {
        for text in [
            "",
            "example.org",
            "example.org:80",
            "1.2.3.4.5",
            "127.0.0.1:",
            "127.0.0.1:65536",
            "127.0.0.1:+80",
            "127.0.0.1:8x",
            "[::1",
            "[::1]80",
            "[::1]:",
            "[::1]:-1",
            "[nope]:80",
            "unix:",
            "tls:",
            "tls:unix:/run/b.sock",
            "tls:tls:127.0.0.1",
            "tls:example.org",
        ] {
            assert!(
                ListenAddr::parse(text, 11300).is_err(),
                "{text:?} was accepted"
            );
        }
    }
}
