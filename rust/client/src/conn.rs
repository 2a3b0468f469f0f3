//! One blocking connection over TCP (plain or TLS) or a Unix socket: write commands,
//! read replies.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::command::{self, Command};
use crate::error::ClientError;
use crate::reply::{self, Parsed, Reply};
use crate::tls::{self, TlsSettings, TlsStream};

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// `host:port`, `[v6]:port`, or anything `ToSocketAddrs` resolves.
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl Address {
    /// `"unix:/path"` or `"host:port"`.
    pub fn parse(text: &str) -> Result<Address, ClientError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ClientError::Invalid("unix: needs a socket path".to_owned()));
            }
            return Ok(Address::Unix(PathBuf::from(path)));
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Address::Tcp(text.to_owned()))
            }
            _ => Err(ClientError::Invalid(format!(
                "address {text:?} is not host:port or unix:/path"
            ))),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(s) => f.write_str(s),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Boxed: the session is large, and the plain variants should not pay for it.
    Tls(Box<TlsStream>),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tls(s) => s.sock.set_write_timeout(t),
        }
    }

    /// Another handle on the same socket (for TLS, the TCP socket under the session:
    /// enough to shut it down).
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(s) => Stream::Tcp(s.sock.try_clone()?),
        })
    }

    fn shutdown(&mut self) {
        // Shutting down a socket the peer already closed fails harmlessly.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => {
                tls::goodbye(s);
                s.sock.shutdown(Shutdown::Both)
            }
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    /// Plain sockets have nothing buffered. A TLS session may still hold records a
    /// write could not send at once (the write hides that error until the next call):
    /// send them now, so a command is never left waiting while we wait for its reply.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(_) | Stream::Unix(_) => Ok(()),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// Shuts a connection down from another thread, waking a call blocked on it.
#[derive(Debug)]
pub struct Closer(Stream);

impl Closer {
    pub fn close(&self) {
        // The clone is always a plain socket, so this sends nothing and needs no `mut`.
        let _ = match &self.0 {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => s.sock.shutdown(Shutdown::Both),
        };
    }
}

/// Bytes read per system call at least.
const READ_CHUNK: usize = 64 * 1024;

/// One connection. Not shared between threads: callers wrap it in a lock.
#[derive(Debug)]
pub struct Connection {
    stream: Option<Stream>,
    addr: String,
    /// Received bytes; `rbuf[start..end]` is not parsed yet.
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    /// Encoded commands waiting to be written.
    pub(crate) wbuf: Vec<u8>,
    /// Longest wait for the network (reserve waits add their own timeout).
    timeout: Option<Duration>,
    /// The read timeout currently set on the socket, to skip needless system calls.
    read_timeout: Option<Duration>,
}

impl Connection {
    /// Connect, with `timeout` bounding the connect and every later wait.
    pub fn connect(addr: &Address, timeout: Option<Duration>) -> Result<Connection, ClientError> {
        Connection::open(addr, timeout, None)
    }

    /// Connect as [`Connection::connect`], then, with `tls`, do a TLS handshake bounded
    /// by `timeout` (or [`tls::HANDSHAKE_TIMEOUT`] without one). TLS needs a TCP address.
    pub fn open(
        addr: &Address,
        timeout: Option<Duration>,
        tls: Option<&TlsSettings>,
    ) -> Result<Connection, ClientError> {
        let name = addr.to_string();
        let fail = |source: io::Error| ClientError::Connect {
            addr: name.clone(),
            source,
        };
        let stream = match addr {
            Address::Unix(_) if tls.is_some() => {
                return Err(ClientError::Invalid(format!(
                    "TLS needs a host:port address, not {name}"
                )))
            }
            Address::Unix(path) => Stream::Unix(UnixStream::connect(path).map_err(fail)?),
            Address::Tcp(hostport) => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address found");
                let mut found = None;
                for sa in hostport.to_socket_addrs().map_err(fail)? {
                    let attempt = match timeout {
                        Some(t) => TcpStream::connect_timeout(&sa, t),
                        None => TcpStream::connect(sa),
                    };
                    match attempt {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                let s = found.ok_or_else(|| fail(last))?;
                s.set_nodelay(true).map_err(fail)?;
                match tls {
                    None => Stream::Tcp(s),
                    Some(settings) => {
                        let limit = timeout.unwrap_or(tls::HANDSHAKE_TIMEOUT);
                        s.set_read_timeout(Some(limit)).map_err(fail)?;
                        s.set_write_timeout(Some(limit)).map_err(fail)?;
                        let host = tls::host_of(hostport);
                        Stream::Tls(Box::new(settings.handshake(s, host, &name, limit)?))
                    }
                }
            }
        };
        Connection::over(stream, name, timeout)
    }

    /// A connection over a Unix stream socket that is already connected to something
    /// speaking the protocol: `beanpole.Client` hands its end of a socket pair here
    /// when a thread of its own relays the bytes through a Python TLS session. `name`
    /// is what messages call the other end (the server's address).
    pub fn adopt(
        stream: UnixStream,
        name: String,
        timeout: Option<Duration>,
    ) -> Result<Connection, ClientError> {
        Connection::over(Stream::Unix(stream), name, timeout)
    }

    fn over(
        stream: Stream,
        name: String,
        timeout: Option<Duration>,
    ) -> Result<Connection, ClientError> {
        let fail = |source: io::Error| ClientError::Connect {
            addr: name.clone(),
            source,
        };
        stream.set_read_timeout(timeout).map_err(fail)?;
        stream.set_write_timeout(timeout).map_err(fail)?;
        Ok(Connection {
            stream: Some(stream),
            addr: name,
            rbuf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            wbuf: Vec::with_capacity(READ_CHUNK),
            timeout,
            read_timeout: timeout,
        })
    }

    /// The address as given, for messages.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    /// A handle that can shut this connection down from another thread.
    pub fn closer(&self) -> Option<Closer> {
        self.stream.as_ref()?.try_clone().ok().map(Closer)
    }

    /// Close the connection; later calls fail with [`ClientError::NotConnected`].
    pub fn close(&mut self) {
        if let Some(mut s) = self.stream.take() {
            s.shutdown();
        }
        self.wbuf.clear();
        self.start = 0;
        self.end = 0;
    }

    /// Run one command to its reply, checked against what the command expects.
    pub fn call(&mut self, cmd: Command<'_>) -> Result<Reply, ClientError> {
        self.wbuf.clear();
        cmd.encode(&mut self.wbuf)?;
        self.send_queued()?;
        let reply = self.read_reply(command::server_wait(&cmd))?;
        command::expect(&cmd, reply).map_err(|e| self.name_error(e))
    }

    /// Queue a command to be written by the next [`Connection::send_queued`].
    pub fn queue(&mut self, cmd: Command<'_>) -> Result<(), ClientError> {
        Ok(cmd.encode(&mut self.wbuf)?)
    }

    /// Write every queued command.
    pub fn send_queued(&mut self) -> Result<(), ClientError> {
        let result = match self.stream.as_mut() {
            None => return Err(self.not_connected()),
            Some(s) => s.write_all(&self.wbuf).and_then(|()| s.flush()),
        };
        self.wbuf.clear();
        result.map_err(|e| self.io_failed(e))
    }

    /// Read the next reply. `wait` is the command's [`command::server_wait`].
    ///
    /// A buffered INSERTED <id> (what a batch of puts reads once per job) is read
    /// here, inlined into the caller, without the general parser's result being
    /// moved through the stack.
    #[inline]
    pub fn read_reply(&mut self, wait: Option<Option<u32>>) -> Result<Reply, ClientError> {
        if let Some((id, used)) = reply::inserted(&self.rbuf[self.start..self.end]) {
            self.consumed(used);
            return Ok(Reply::Inserted(id));
        }
        self.read_reply_slow(wait)
    }

    /// [`Connection::read_reply`] for a reply not yet buffered, or not INSERTED.
    fn read_reply_slow(&mut self, wait: Option<Option<u32>>) -> Result<Reply, ClientError> {
        let want = match wait {
            None => self.timeout,
            Some(None) => None,
            Some(Some(secs)) => self
                .timeout
                .map(|t| t + Duration::from_secs(u64::from(secs))),
        };
        if want != self.read_timeout {
            let stream = self.stream.as_ref().ok_or_else(|| self.not_connected())?;
            stream.set_read_timeout(want).map_err(|e| ClientError::Io {
                addr: self.addr.clone(),
                source: e,
            })?;
            self.read_timeout = want;
        }
        loop {
            match reply::parse(&self.rbuf[self.start..self.end]) {
                Parsed::Done(reply, used) => {
                    self.consumed(used);
                    return Ok(reply);
                }
                Parsed::Bad(line) => {
                    self.close();
                    return Err(ClientError::Unexpected {
                        addr: self.addr.clone(),
                        line,
                    });
                }
                Parsed::Need(n) => self.fill(n)?,
            }
        }
    }

    /// `used` bytes of the buffered input were parsed.
    fn consumed(&mut self, used: usize) {
        self.start += used;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Read until at least `need` unparsed bytes are buffered.
    fn fill(&mut self, need: usize) -> Result<(), ClientError> {
        if self.start + need.max(READ_CHUNK) > self.rbuf.len() {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if need.max(READ_CHUNK) > self.rbuf.len() {
                self.rbuf.resize(need.max(READ_CHUNK), 0);
            }
        }
        while self.end - self.start < need {
            let Some(stream) = self.stream.as_mut() else {
                return Err(self.not_connected());
            };
            match stream.read(&mut self.rbuf[self.end..]) {
                Ok(0) => {
                    self.close();
                    return Err(ClientError::Closed {
                        addr: self.addr.clone(),
                    });
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_failed(e)),
            }
        }
        Ok(())
    }

    fn not_connected(&self) -> ClientError {
        ClientError::NotConnected {
            addr: self.addr.clone(),
        }
    }

    /// Close after an I/O error and describe it.
    fn io_failed(&mut self, e: io::Error) -> ClientError {
        self.close();
        let addr = self.addr.clone();
        if let Some(problem) = tls::session_problem(&e) {
            return ClientError::Tls { addr, problem };
        }
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::TimedOut { addr },
            _ => ClientError::Io { addr, source: e },
        }
    }

    /// Fill in the address of an `Unexpected` error made without one, and close:
    /// after a reply that does not fit the command the stream cannot be trusted.
    pub(crate) fn name_error(&mut self, e: ClientError) -> ClientError {
        match e {
            ClientError::Unexpected { line, .. } => {
                self.close();
                ClientError::Unexpected {
                    addr: self.addr.clone(),
                    line,
                }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            Address::parse("127.0.0.1:11300").ok(),
            Some(Address::Tcp("127.0.0.1:11300".into()))
        );
        assert_eq!(
            Address::parse("[::1]:1").ok(),
            Some(Address::Tcp("[::1]:1".into()))
        );
        assert_eq!(
            Address::parse("unix:/tmp/s").ok(),
            Some(Address::Unix("/tmp/s".into()))
        );
        for bad in ["", "host", "host:", ":1", "h:99999", "unix:"] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Address::Unix("/x".into()).to_string(), "unix:/x");
    }

    #[test]
    fn an_adopted_socket_carries_commands_and_its_closing() {
        let (ours, mut theirs) = UnixStream::pair().expect("socket pair");
        let mut conn = Connection::adopt(ours, "relayed:1".into(), Some(Duration::from_secs(5)))
            .expect("adopt");
        let peer = std::thread::spawn(move || {
            let mut line = [0u8; 64];
            let n = theirs.read(&mut line).expect("read the command");
            assert_eq!(&line[..n], b"kick 3\r\n");
            theirs.write_all(b"KICKED 2\r\n").expect("reply");
            // The other end goes away: the next call sees the connection closed.
        });
        assert_eq!(
            conn.call(Command::Kick(3)).ok(),
            Some(Reply::Kicked(Some(2)))
        );
        peer.join().expect("peer");
        let err = conn.call(Command::Kick(1)).expect_err("closed");
        assert!(err.to_string().contains("relayed:1"), "{err}");
        assert!(!conn.is_open());
    }

    #[test]
    fn refused_connection_names_the_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let err = Connection::connect(&Address::Tcp(addr.to_string()), None)
            .expect_err("nothing listens");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
        assert!(err.is_connection());
    }
}
