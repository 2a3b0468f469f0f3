//! A panic in one connection's task ends that connection only: the server keeps
//! serving the others and new ones, on every worker thread, and cleans up after the
//! panicked connection as after a hang-up (its reserved job is ready again at once).
//!
//! The panic is injected with the `fault-injection` feature, which this crate's
//! dev-dependency on itself turns on for its tests only: the command line
//! `FAULT_PANIC` panics inside the connection task with the store locked.

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

mod wire_util;

use beanpole_engine::server::{ServerHandle, FAULT_PANIC};
use wire_util::{start_with, Client};

const THREADS: usize = 2;

fn start() -> (ServerHandle, SocketAddr) {
    start_with(THREADS)
}

/// Send the fault line; the server must close this connection without a reply.
fn panic_and_expect_close(mut client: Client) {
    let mut line = FAULT_PANIC.to_vec();
    line.extend_from_slice(b"\r\n");
    client.send(&line);
    let mut rest = Vec::new();
    match client.reader.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "a reply after the panic: {rest:?}"),
        // A reset instead of an orderly close is a close as well.
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
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
    panic_and_expect_close(victim);

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
        panic_and_expect_close(Client::connect(addr));
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
    // The fresh ones above close as their loop turns end; wait for the server to see
    // those closes (bounded) before counting.
    let mut last = Client::connect(addr);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while last.field(b"stats\r\n", "current-connections") != "2"
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(last.field(b"stats\r\n", "current-connections"), "2");
    assert_eq!(last.field(b"stats\r\n", "current-jobs-reserved"), "0");
    drop((watcher, last));
    server.stop(Duration::from_secs(10));
}
