//! A panic in one connection's task ends that connection only: the server keeps
//! serving the others and new ones, on every worker thread, and cleans up after the
//! panicked connection as after a hang-up (its reserved job is ready again at once).
//!
//! The panic is injected with the `fault-injection` feature, which this crate's
//! dev-dependency on itself turns on for its tests only: the command line
//! `FAULT_PANIC` panics inside the connection task with the store locked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use beanpole_engine::server::{BoundAddr, ListenAddr, ServerConfig, ServerHandle, FAULT_PANIC};

const THREADS: usize = 2;

fn start() -> (ServerHandle, SocketAddr) {
    let config = ServerConfig {
        listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 0).into())],
        threads: THREADS,
        ..ServerConfig::default()
    };
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

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            reader: BufReader::new(s.try_clone().expect("clone")),
            writer: s,
        }
    }

    fn cmd(&mut self, bytes: &[u8]) -> String {
        self.writer.write_all(bytes).expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read");
        line
    }

    /// A command answered `OK <len>` and a YAML body; the body.
    fn yaml(&mut self, bytes: &[u8]) -> String {
        let head = self.cmd(bytes);
        let len: usize = head
            .strip_prefix("OK ")
            .and_then(|n| n.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("expected OK <len>, got {head:?}"));
        let mut body = vec![0; len + 2];
        self.reader.read_exact(&mut body).expect("body");
        String::from_utf8(body).expect("utf-8")
    }

    /// The value of `key` in the YAML answer to `bytes`.
    fn field(&mut self, bytes: &[u8], key: &str) -> String {
        let body = self.yaml(bytes);
        let prefix = format!("{key}: ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {key} in {body}"))
            .to_owned()
    }

    /// Send the fault line; the server must close this connection without a reply.
    fn panic_and_expect_close(mut self) {
        let mut line = FAULT_PANIC.to_vec();
        line.extend_from_slice(b"\r\n");
        self.writer.write_all(&line).expect("write");
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "a reply after the panic: {rest:?}"),
            // A reset instead of an orderly close is a close as well.
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
}

#[test]
fn a_panicking_connection_releases_its_job_and_the_server_goes_on() {
    let (mut server, addr) = start();
    let mut watcher = Client::connect(addr);
    assert_eq!(watcher.cmd(b"put 0 0 100 2\r\nhi\r\n"), "INSERTED 1\r\n");

    let mut victim = Client::connect(addr);
    assert_eq!(victim.cmd(b"reserve\r\n"), "RESERVED 1 2\r\n");
    let mut rest = [0; 4];
    victim.reader.read_exact(&mut rest).expect("body");
    assert_eq!(
        watcher.field(b"stats-job 1\r\n", "state"),
        "reserved",
        "the job is held by the victim before the panic"
    );
    victim.panic_and_expect_close();

    // The job is ready again at once (its TTR is 100 s), as after a hang-up.
    assert_eq!(watcher.field(b"stats-job 1\r\n", "state"), "ready");
    // The connection that was open through the panic still works.
    assert_eq!(
        watcher.cmd(b"reserve-with-timeout 0\r\n"),
        "RESERVED 1 2\r\n"
    );
    let mut body = [0; 4];
    watcher.reader.read_exact(&mut body).expect("body");
    assert_eq!(watcher.cmd(b"delete 1\r\n"), "DELETED\r\n");

    // Panics on every worker thread, several times over: none of them is lost.
    for round in 0..THREADS * 3 {
        Client::connect(addr).panic_and_expect_close();
        let mut fresh = Client::connect(addr);
        let id = round + 2;
        assert_eq!(
            fresh.cmd(b"put 0 0 10 1\r\nx\r\n"),
            format!("INSERTED {id}\r\n")
        );
        assert_eq!(
            fresh.cmd(format!("delete {id}\r\n").as_bytes()),
            "DELETED\r\n"
        );
    }

    // Only the connections still open count: the panicked ones were closed properly.
    let mut last = Client::connect(addr);
    assert_eq!(last.field(b"stats\r\n", "current-connections"), "2");
    assert_eq!(last.field(b"stats\r\n", "current-jobs-reserved"), "0");
    drop((watcher, last));
    server.stop(Duration::from_secs(10));
}
