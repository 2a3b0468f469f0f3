//! Every listening socket of one server: the `-l` addresses (Unix sockets with the
//! `--unix-mode` permissions) and the sockets a service manager handed over (systemd
//! socket activation).
//!
//! Binding is all or nothing: if one address fails, the sockets bound before it are
//! closed and the socket files made for them removed before the error is returned.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use socket2::{Domain, SockAddr, Socket, Type};
use tokio::net::{TcpListener, TcpSocket, UnixListener};

use super::error::ServerError;
use super::listener::{remove_stale_socket, BoundAddr, ListenAddr, Listener, BACKLOG};

/// The listening sockets of one server, in the order they were given: inherited
/// sockets first, then the `-l` addresses.
#[derive(Debug)]
pub struct Bound {
    pub listeners: Vec<Listener>,
    /// Where each listener listens (same order).
    pub addrs: Vec<BoundAddr>,
    /// The socket files made here, removed when the server stops.
    pub files: SocketFiles,
}

/// Socket files a server made by binding Unix sockets. They are removed by
/// [`SocketFiles::remove`] or when dropped; inherited sockets' files are not listed
/// (they belong to whoever made them).
#[derive(Debug, Default)]
pub struct SocketFiles(Vec<PathBuf>);

impl SocketFiles {
    /// Remove every file listed (once).
    pub fn remove(&mut self) {
        for path in self.0.drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for SocketFiles {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Adopt the inherited sockets `fds` and bind `addrs`. Must be called inside a
/// tokio runtime. The descriptors in `fds` stay the caller's: each is duplicated.
pub fn bind_all(
    addrs: &[ListenAddr],
    fds: &[RawFd],
    unix_mode: Option<u32>,
) -> Result<Bound, ServerError> {
    if addrs.is_empty() && fds.is_empty() {
        return Err(ServerError::Invalid("no address to listen on".into()));
    }
    if let Some(mode) = unix_mode.filter(|&m| m > 0o777) {
        return Err(ServerError::Invalid(format!(
            "unix socket mode {mode:o} is not an octal mode between 0 and 777"
        )));
    }
    let mut bound = Bound {
        listeners: Vec::with_capacity(addrs.len() + fds.len()),
        addrs: Vec::with_capacity(addrs.len() + fds.len()),
        files: SocketFiles::default(),
    };
    for &fd in fds {
        let listener = adopt(fd).map_err(|source| ServerError::Bind {
            addr: format!("the inherited socket (fd {fd})"),
            source,
        })?;
        bound.push(listener, &format!("fd {fd}"))?;
    }
    for addr in addrs {
        let listener = match addr {
            ListenAddr::Tcp(sa) => bind_tcp(*sa, takes_ipv6_only(sa, addrs)),
            ListenAddr::Tls(sa) => bind_tcp(*sa, takes_ipv6_only(sa, addrs)).map(into_tls),
            ListenAddr::Unix(path) => bind_unix(path, unix_mode),
        }
        .map_err(|source| ServerError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        if let ListenAddr::Unix(path) = addr {
            bound.files.0.push(path.clone());
        }
        bound.push(listener, &addr.to_string())?;
    }
    Ok(bound)
}

impl Bound {
    fn push(&mut self, listener: Listener, what: &str) -> Result<(), ServerError> {
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: what.to_owned(),
            source,
        })?;
        self.listeners.push(listener);
        self.addrs.push(addr);
        Ok(())
    }
}

/// Bind the TCP addresses `addrs` exactly as a server's start would, outside any
/// runtime, and hand the listening sockets back: for a program that listens first
/// and starts its server later, which then adopts them as inherited sockets
/// (`beanpole serve` listens before the rest of Python has loaded, so a client that
/// connects early waits in the backlog instead of being refused). Only TCP: a Unix
/// socket's file and a TLS listener stay with the server's own start.
pub fn bind_ahead(addrs: &[ListenAddr]) -> Result<Vec<OwnedFd>, ServerError> {
    if let Some(other) = addrs.iter().find(|a| !matches!(a, ListenAddr::Tcp(_))) {
        return Err(ServerError::Invalid(format!(
            "{other} is bound at the server's start, not ahead of it"
        )));
    }
    // The tokio listeners need a reactor while they exist; a small one does.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(ServerError::Runtime)?;
    let _entered = runtime.enter();
    let bound = bind_all(addrs, &[], None)?;
    bound
        .listeners
        .into_iter()
        .zip(&bound.addrs)
        .map(|(listener, addr)| match listener {
            Listener::Tcp(tcp) => {
                tcp.into_std()
                    .map(OwnedFd::from)
                    .map_err(|source| ServerError::Bind {
                        addr: addr.to_string(),
                        source,
                    })
            }
            _ => unreachable!("only TCP addresses were bound"),
        })
        .collect()
}

/// Whether the IPv6 address `sa` should take IPv6 connections only: when an IPv4
/// address is listed for the same port. Linux's IPv6 sockets take IPv4 as well by
/// default, so `-l 0.0.0.0 -l ::` would otherwise fail with the port in use; alone,
/// `-l ::` keeps taking both.
fn takes_ipv6_only(sa: &SocketAddr, addrs: &[ListenAddr]) -> bool {
    sa.is_ipv6()
        && sa.port() != 0
        && addrs
            .iter()
            .any(|a| matches!(a, ListenAddr::Tcp(v4) | ListenAddr::Tls(v4) if v4.is_ipv4() && v4.port() == sa.port()))
}

/// Bind and listen on a TCP address; `only_v6` for an IPv6 socket that must leave
/// IPv4 connections to an IPv4 one.
pub fn bind_tcp(sa: SocketAddr, only_v6: bool) -> io::Result<Listener> {
    let socket = if sa.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    // Replies are written whole, one write per batch: never delay them.
    socket.set_nodelay(true)?;
    if only_v6 {
        socket2::SockRef::from(&socket).set_only_v6(true)?;
    }
    socket.bind(sa)?;
    Ok(Listener::Tcp(socket.listen(BACKLOG)?))
}

/// A bound TCP listener whose connections start with a TLS handshake.
pub fn into_tls(listener: Listener) -> Listener {
    match listener {
        Listener::Tcp(l) => Listener::Tls(l),
        other => other,
    }
}

/// Bind a Unix socket at `path`; with `mode`, the socket file has exactly those
/// permissions and never looser ones, not even for a moment.
pub fn bind_unix(path: &Path, mode: Option<u32>) -> io::Result<Listener> {
    remove_stale_socket(path)?;
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    if let Some(mode) = mode {
        // Linux creates the socket file with the socket's own mode less the umask,
        // so setting it before bind means the file never exists with more
        // permissions than asked for (and the process-wide umask is left alone).
        // SAFETY: fchmod on a descriptor this function owns.
        if unsafe { libc::fchmod(socket.as_raw_fd(), mode as libc::mode_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    socket.bind(&SockAddr::unix(path)?)?;
    let listening = (|| {
        if let Some(mode) = mode {
            // The umask may have taken bits away: give them back, to the socket
            // file just made (not to whatever else might be there now).
            set_socket_mode(path, mode)?;
        }
        socket.listen(BACKLOG as i32)?;
        socket.set_nonblocking(true)?;
        UnixListener::from_std(socket.into())
    })();
    match listening {
        Ok(listener) => Ok(Listener::Unix(listener, path.to_owned())),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

fn set_socket_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_socket() {
        return Err(io::Error::other(format!(
            "{} was replaced by something else than the socket just bound",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o7777 != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// A listening stream socket inherited as descriptor `fd` (TCP over IPv4 or IPv6, or
/// Unix), duplicated and made into a tokio listener.
fn adopt(fd: RawFd) -> io::Result<Listener> {
    // SAFETY: F_DUPFD_CLOEXEC only reads `fd`; an fd that is not open gives EBADF.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `copy` was just returned by fcntl, so nothing else owns it.
    let socket = Socket::from(unsafe { OwnedFd::from_raw_fd(copy) });
    let not = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("not {what}"));
    if socket.r#type()? != Type::STREAM {
        return Err(not("a stream socket"));
    }
    if !socket.is_listener()? {
        return Err(not("a listening socket"));
    }
    socket.set_nonblocking(true)?;
    match socket.domain()? {
        Domain::IPV4 | Domain::IPV6 => {
            // Accepted sockets inherit it, as with the sockets bound here.
            socket.set_tcp_nodelay(true)?;
            Ok(Listener::Tcp(TcpListener::from_std(socket.into())?))
        }
        Domain::UNIX => {
            let std_listener: std::os::unix::net::UnixListener = socket.into();
            let path = unix_name(&std_listener.local_addr()?);
            Ok(Listener::Unix(UnixListener::from_std(std_listener)?, path))
        }
        _ => Err(not("a TCP or Unix socket")),
    }
}

/// A Unix socket's name as shown: its path, `@name` in the abstract namespace.
fn unix_name(addr: &std::os::unix::net::SocketAddr) -> PathBuf {
    use std::os::linux::net::SocketAddrExt;
    if let Some(path) = addr.as_pathname() {
        return path.to_owned();
    }
    match addr.as_abstract_name() {
        Some(name) => PathBuf::from(format!("@{}", String::from_utf8_lossy(name))),
        None => PathBuf::from("(unnamed)"),
    }
}

impl Listener {
    /// Bind and listen. Must be called inside a tokio runtime.
    pub fn bind(addr: &ListenAddr) -> io::Result<Listener> {
        match addr {
            ListenAddr::Tcp(sa) => bind_tcp(*sa, false),
            ListenAddr::Tls(sa) => bind_tcp(*sa, false).map(into_tls),
            ListenAddr::Unix(path) => bind_unix(path, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("beanpole-bind-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn unix_socket_gets_the_mode_asked_for() {
        let dir = scratch("mode");
        let rt = runtime();
        for mode in [0o600, 0o660, 0o666] {
            let path = dir.join(format!("{mode:o}.sock"));
            let listener = rt
                .block_on(async { bind_unix(&path, Some(mode)) })
                .expect("bind");
            let meta = std::fs::metadata(&path).expect("stat");
            assert_eq!(meta.permissions().mode() & 0o777, mode, "{path:?}");
            drop(listener);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_address_leaves_nothing_bound() {
        let dir = scratch("fail");
        let sock = dir.join("first.sock");
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let taken_addr = taken.local_addr().expect("addr");
        let addrs = [ListenAddr::Unix(sock.clone()), ListenAddr::Tcp(taken_addr)];
        let err = runtime()
            .block_on(async { bind_all(&addrs, &[], None) })
            .expect_err("the second address is taken");
        let ServerError::Bind { addr, .. } = &err else {
            panic!("expected a bind error, got {err}");
        };
        assert_eq!(addr, &taken_addr.to_string());
        assert!(!sock.exists(), "the first socket file was left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn inherited_sockets_are_duplicated_and_checked() {
        let rt = runtime();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let expected = tcp.local_addr().expect("addr");
        let bound = rt
            .block_on(async { bind_all(&[], &[tcp.as_raw_fd()], None) })
            .expect("adopt");
        assert_eq!(bound.addrs, vec![BoundAddr::Tcp(expected)]);
        // The caller's descriptor is still its own.
        assert!(tcp.local_addr().is_ok());

        let unbound = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        let err = rt
            .block_on(async { bind_all(&[], &[unbound.as_raw_fd()], None) })
            .expect_err("a datagram socket is refused");
        assert!(err.to_string().contains("not a stream socket"), "{err}");
        let err = rt
            .block_on(async { bind_all(&[], &[9999], None) })
            .expect_err("a closed descriptor is refused");
        assert!(err.to_string().contains("fd 9999"), "{err}");
    }

    #[test]
    fn ipv4_and_ipv6_wildcards_share_a_port() {
        if std::net::TcpListener::bind("[::1]:0").is_err() {
            return; // no IPv6 on this machine
        }
        let port = std::net::TcpListener::bind("0.0.0.0:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addrs = [
            ListenAddr::parse("0.0.0.0", port).expect("v4"),
            ListenAddr::parse("::", port).expect("v6"),
        ];
        let rt = runtime();
        let bound = rt
            .block_on(async { bind_all(&addrs, &[], None) })
            .expect("both bind");
        assert_eq!(bound.addrs.len(), 2);
        // Alone, the IPv6 wildcard keeps taking IPv4 connections too (the default).
        assert!(!takes_ipv6_only(
            &"[::]:11300".parse().expect("addr"),
            &addrs[1..]
        ));
    }

    #[test]
    fn nothing_to_listen_on_is_refused() {
        let err = runtime()
            .block_on(async { bind_all(&[], &[], None) })
            .expect_err("empty");
        assert!(matches!(err, ServerError::Invalid(_)), "{err}");
    }
}
