//! What the write-ahead log tests share: scratch directories, servers with a
//! log over loopback, a small blocking client, and a server assembled around any
//! `LogDir` (to count or withhold file operations).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use beanpole_engine::server::{
    run, BoundAddr, ListenAddr, Listener, ServerConfig, ServerError, ServerHandle, Shared,
};
use beanpole_engine::wal::fs::LogDir;
use beanpole_engine::wal::{self, FsyncPolicy, LogConfig, OpenedLog};

/// A directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "beanpole-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A fresh subdirectory path (not created).
    pub fn sub(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Small jobs: segments can be small (the segment size must fit a job of the
/// maximum size).
pub const MAX_JOB: u32 = 1024;

/// A log config for `dir` with small segments and the given fsync policy.
pub fn log_config(dir: &Path, segment_size: u64, fsync: FsyncPolicy) -> LogConfig {
    LogConfig {
        segment_size,
        fsync,
        ..LogConfig::new(dir)
    }
}

pub fn try_start(log: LogConfig) -> Result<(ServerHandle, SocketAddr), ServerError> {
    let config = ServerConfig {
        listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 0).into())],
        threads: 2,
        max_job_size: MAX_JOB,
        log: Some(log),
        ..ServerConfig::default()
    };
    let handle = ServerHandle::start(config)?;
    let addr = match handle.local_addr() {
        BoundAddr::Tcp(a) => *a,
        BoundAddr::Unix(_) => panic!("expected TCP"),
    };
    Ok((handle, addr))
}

pub fn start(log: LogConfig) -> (ServerHandle, SocketAddr) {
    match try_start(log) {
        Ok(s) => s,
        Err(e) => panic!("server did not start: {e}"),
    }
}

pub fn stop(mut handle: ServerHandle) {
    handle.stop(Duration::from_secs(5));
}

/// A blocking beanstalkd client.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        Client {
            reader: BufReader::new(s.try_clone().expect("clone")),
            writer: s,
        }
    }

    pub fn set_read_timeout(&self, t: Duration) {
        self.writer.set_read_timeout(Some(t)).expect("timeout");
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write");
    }

    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read");
        line
    }

    /// A line, or None if none arrives within the read timeout.
    pub fn try_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(_) => Some(line),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("read: {e}"),
        }
    }

    pub fn body(&mut self, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len + 2];
        self.reader.read_exact(&mut buf).expect("body");
        assert_eq!(&buf[len..], b"\r\n");
        buf.truncate(len);
        buf
    }

    pub fn cmd(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes());
        self.line()
    }

    pub fn put_raw(&mut self, pri: u32, delay: u32, ttr: u32, body: &[u8]) -> String {
        let mut bytes = format!("put {pri} {delay} {ttr} {}\r\n", body.len()).into_bytes();
        bytes.extend_from_slice(body);
        bytes.extend_from_slice(b"\r\n");
        self.send(&bytes);
        self.line()
    }

    /// Put and return the new id; panics on any other reply.
    pub fn put(&mut self, pri: u32, delay: u32, ttr: u32, body: &[u8]) -> u64 {
        let reply = self.put_raw(pri, delay, ttr, body);
        inserted(&reply).unwrap_or_else(|| panic!("put: {reply:?}"))
    }

    pub fn use_tube(&mut self, tube: &str) {
        assert_eq!(
            self.cmd(&format!("use {tube}")),
            format!("USING {tube}\r\n")
        );
    }

    pub fn watch(&mut self, tube: &str) {
        assert!(self.cmd(&format!("watch {tube}")).starts_with("WATCHING "));
    }

    /// `reserve-with-timeout 0`: the id reserved, or None.
    pub fn reserve(&mut self) -> Option<(u64, Vec<u8>)> {
        let line = self.cmd("reserve-with-timeout 0");
        if line == "TIMED_OUT\r\n" {
            return None;
        }
        let (id, len) = two_numbers(&line, "RESERVED");
        Some((id, self.body(len)))
    }

    /// A peek command: (id, body) or None for NOT_FOUND.
    pub fn peek(&mut self, what: &str) -> Option<(u64, Vec<u8>)> {
        let line = self.cmd(what);
        if line == "NOT_FOUND\r\n" {
            return None;
        }
        let (id, len) = two_numbers(&line, "FOUND");
        Some((id, self.body(len)))
    }

    fn yaml(&mut self, cmd: &str) -> Option<BTreeMap<String, String>> {
        let line = self.cmd(cmd);
        if line == "NOT_FOUND\r\n" {
            return None;
        }
        let len: usize = line
            .strip_prefix("OK ")
            .and_then(|n| n.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("{cmd}: {line:?}"));
        let body = String::from_utf8(self.body(len)).expect("utf8");
        Some(
            body.lines()
                .filter_map(|l| l.split_once(": "))
                .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
                .collect(),
        )
    }

    pub fn stats(&mut self) -> BTreeMap<String, String> {
        self.yaml("stats").expect("stats")
    }

    pub fn stats_job(&mut self, id: u64) -> Option<BTreeMap<String, String>> {
        self.yaml(&format!("stats-job {id}"))
    }
}

pub fn inserted(reply: &str) -> Option<u64> {
    reply.strip_prefix("INSERTED ")?.trim_end().parse().ok()
}

fn two_numbers(line: &str, word: &str) -> (u64, usize) {
    let parts: Vec<&str> = line.trim_end().split(' ').collect();
    assert_eq!(parts.len(), 3, "{line:?}");
    assert_eq!(parts[0], word, "{line:?}");
    (
        parts[1].parse().expect("id"),
        parts[2].parse().expect("len"),
    )
}

pub fn num(map: &BTreeMap<String, String>, key: &str) -> u64 {
    map.get(key)
        .unwrap_or_else(|| panic!("no {key} in {map:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number in {map:?}"))
}

/// Segment files in `dir`: (seq, size in bytes), ascending.
pub fn segment_files(dir: &Path) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".log") {
            if let Ok(seq) = stem.parse::<u64>() {
                out.push((seq, entry.metadata().expect("metadata").len()));
            }
        }
    }
    out.sort_unstable();
    out
}

/// Copy every regular file of `from` into a new directory `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// Poll `cond` every 10 ms for up to `limit`; true once it holds.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server assembled from the engine's parts around a given `LogDir`, for tests
/// that need to see or steer every file operation.
pub struct CustomServer {
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    shared: Arc<Shared>,
    log: Option<OpenedLog>,
    pub addr: SocketAddr,
}

impl CustomServer {
    pub fn start(config: &LogConfig, dir: Arc<dyn LogDir>) -> CustomServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let mut opened = wal::open_in(config, MAX_JOB, dir).expect("open log");
        let listener = runtime
            .block_on(async { Listener::bind(&ListenAddr::Tcp(([127, 0, 0, 1], 0).into())) })
            .expect("bind");
        let addr = match listener.local_addr().expect("addr") {
            BoundAddr::Tcp(a) => a,
            BoundAddr::Unix(_) => panic!("expected TCP"),
        };
        let shared = Arc::new(Shared::new(
            MAX_JOB,
            0,
            Some(&mut opened),
            Duration::from_secs(5),
        ));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task_shared = Arc::clone(&shared);
        runtime.spawn(async move {
            run(vec![listener], task_shared, async {
                let _ = rx.await;
            })
            .await;
        });
        CustomServer {
            runtime: Some(runtime),
            shutdown: Some(tx),
            shared,
            log: Some(opened),
            addr,
        }
    }

    /// Stop as `ServerHandle::stop` does: close connections, hand over what is
    /// journaled, let the writer finish, release the lock.
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        if let Some(mut log) = self.log.take() {
            let _ = self.shared.lock().flush_log();
            log.pipe.stop();
            if let Some(writer) = log.writer.take() {
                let _ = writer.join();
            }
        }
    }
}

impl Drop for CustomServer {
    fn drop(&mut self) {
        self.stop();
    }
}
