//! Listening sockets (TCP over IPv4 or IPv6, or a Unix socket) and the accept loop.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, UnixListener};
use tokio::sync::Notify;

use super::{conn, Shared};

/// Connections waiting to be accepted, as beanstalkd asks for.
const BACKLOG: u32 = 1024;

/// Whether an accepted TCP socket inherits TCP_NODELAY from the listening socket (so
/// setting it once on the listener spares a system call per connection). Linux copies
/// the option to accepted sockets; elsewhere it is set on each one.
const NODELAY_INHERITED: bool = cfg!(target_os = "linux");

/// Where to listen, as given by `-l`/`-p`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl ListenAddr {
    /// Parse `-l` (`127.0.0.1`, `::1`, `[::1]`, `0.0.0.0`, `localhost` or
    /// `unix:/path`) with `-p`.
    pub fn parse(listen: &str, port: u16) -> Result<ListenAddr, String> {
        if let Some(path) = listen.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a socket path, e.g. unix:/run/beanpole.sock".into());
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        let host = listen.trim_start_matches('[').trim_end_matches(']');
        if host == "localhost" {
            return Ok(ListenAddr::Tcp(SocketAddr::new(
                IpAddr::from([127, 0, 0, 1]),
                port,
            )));
        }
        match host.parse::<IpAddr>() {
            Ok(ip) => Ok(ListenAddr::Tcp(SocketAddr::new(ip, port))),
            Err(_) => Err(format!(
                "{listen:?} is not an IPv4 or IPv6 address or unix:/path (host names other \
                 than localhost are not resolved)"
            )),
        }
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
}

impl Listener {
    /// Bind and listen. Must be called inside a tokio runtime.
    pub fn bind(addr: &ListenAddr) -> io::Result<Listener> {
        match addr {
            ListenAddr::Tcp(sa) => {
                let socket = if sa.is_ipv4() {
                    TcpSocket::new_v4()?
                } else {
                    TcpSocket::new_v6()?
                };
                socket.set_reuseaddr(true)?;
                // Replies are written whole, one write per batch: never delay them.
                socket.set_nodelay(true)?;
                socket.bind(*sa)?;
                Ok(Listener::Tcp(socket.listen(BACKLOG)?))
            }
            ListenAddr::Unix(path) => {
                remove_stale_socket(path)?;
                Ok(Listener::Unix(UnixListener::bind(path)?, path.clone()))
            }
        }
    }

    pub fn local_addr(&self) -> io::Result<BoundAddr> {
        match self {
            Listener::Tcp(l) => Ok(BoundAddr::Tcp(l.local_addr()?)),
            Listener::Unix(_, path) => Ok(BoundAddr::Unix(path.clone())),
        }
    }
}

/// A socket file left by a server that is gone would make bind fail; remove it,
/// but never remove anything that is not a socket.
fn remove_stale_socket(path: &std::path::Path) -> io::Result<()> {
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
    tokio::spawn(async move {
        conn::serve(sock, &guard.0).await;
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
                .refuse(shared.live.count.load(Ordering::Acquire))
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
            Err(e) => {
                // Out of file descriptors or a transient network error: say so and
                // back off briefly instead of spinning on the same error.
                eprintln!("beanpole: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> io::Result<Accepted> {
    match listener {
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| Accepted::Tcp(s)),
        Listener::Unix(l, _) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
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
}
