//! What the server tests over loopback share: a server on a free port and a small
//! blocking client that speaks the protocol line by line.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use beanpole_engine::server::{BoundAddr, ListenAddr, ServerConfig, ServerHandle};

/// A server with `threads` workers on 127.0.0.1 and a free port (1 runs on a
/// current-thread runtime).
pub fn start_with(threads: usize) -> (ServerHandle, SocketAddr) {
    start_config(ServerConfig { threads, ..local() })
}

/// A server on `runtime`, a runtime the caller keeps running (as a cluster
/// node's term servers run on the node's Raft runtime).
pub fn start_on(runtime: tokio::runtime::Handle) -> (ServerHandle, SocketAddr) {
    start_config(ServerConfig {
        runtime: Some(runtime),
        ..local()
    })
}

/// A runtime like a cluster node's Raft runtime: one worker thread.
pub fn node_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The settings of a server on 127.0.0.1 and a free port.
fn local() -> ServerConfig {
    ServerConfig {
        listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 0).into())],
        ..ServerConfig::default()
    }
}

fn start_config(config: ServerConfig) -> (ServerHandle, SocketAddr) {
    let handle = match ServerHandle::start(config) {
        Ok(h) => h,
        Err(e) => panic!("server did not start: {e}"),
    };
    let addr = match handle.local_addr() {
        BoundAddr::Tcp(a) => *a,
        BoundAddr::Unix(_) => panic!("expected TCP"),
    };
    (handle, addr)
}

/// One connection; every read waits at most 10 s.
pub struct Client {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            reader: BufReader::new(s.try_clone().expect("clone")),
            writer: s,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write");
    }

    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read");
        line
    }

    /// A body of `len` bytes and its CRLF; the body.
    pub fn body(&mut self, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len + 2];
        self.reader.read_exact(&mut buf).expect("body");
        buf.truncate(len);
        buf
    }

    pub fn cmd(&mut self, bytes: &[u8]) -> String {
        self.send(bytes);
        self.line()
    }

    /// A command answered `OK <len>` and a YAML body; the body.
    pub fn yaml(&mut self, bytes: &[u8]) -> String {
        let head = self.cmd(bytes);
        let len: usize = head
            .strip_prefix("OK ")
            .and_then(|n| n.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("expected OK <len>, got {head:?}"));
        String::from_utf8(self.body(len)).expect("utf-8")
    }

    /// The value of `key` in the YAML answer to `bytes`.
    pub fn field(&mut self, bytes: &[u8], key: &str) -> String {
        let body = self.yaml(bytes);
        let prefix = format!("{key}: ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {key} in {body}"))
            .to_owned()
    }
}
