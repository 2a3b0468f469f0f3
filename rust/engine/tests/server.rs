//! The server over real loopback sockets: concurrency, hang-ups, slow clients and
//! garbage input.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

mod wire_util;

use beanpole_engine::server::ServerHandle;
use tokio::runtime::Runtime;
use wire_util::{node_runtime, start_on, start_with, Client};

/// A server with two workers (a multi-thread runtime).
fn start() -> (ServerHandle, SocketAddr) {
    start_with(2)
}

#[test]
fn many_producers_and_consumers_exchange_every_job_once() {
    let (_server, addr) = start();
    const PER: usize = 200;
    const PRODUCERS: usize = 4;
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let mut got = vec![];
                loop {
                    let line = c.cmd(b"reserve-with-timeout 1\r\n");
                    if line == "TIMED_OUT\r\n" {
                        return got;
                    }
                    let parts: Vec<&str> = line.trim_end().split(' ').collect();
                    assert_eq!(parts[0], "RESERVED", "{line:?}");
                    let id: u64 = parts[1].parse().expect("id");
                    let body = c.body(parts[2].parse().expect("len"));
                    assert_eq!(c.cmd(format!("delete {id}\r\n").as_bytes()), "DELETED\r\n");
                    got.push(String::from_utf8(body).expect("utf8"));
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..PER {
                    let body = format!("job-{p}-{i}");
                    let cmd = format!("put 0 0 60 {}\r\n{body}\r\n", body.len());
                    assert!(c.cmd(cmd.as_bytes()).starts_with("INSERTED "));
                }
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer");
    }
    let mut all: Vec<String> = consumers
        .into_iter()
        .flat_map(|c| c.join().expect("consumer"))
        .collect();
    all.sort();
    let mut expected: Vec<String> = (0..PRODUCERS)
        .flat_map(|p| (0..PER).map(move |i| format!("job-{p}-{i}")))
        .collect();
    expected.sort();
    assert_eq!(all, expected);
}

#[test]
fn half_close_while_waiting_gets_timed_out_then_eof() {
    let (_server, addr) = start();
    let mut c = Client::connect(addr);
    c.send(b"reserve\r\n");
    // The reserve blocks; a second connection proves the server is otherwise live.
    let mut other = Client::connect(addr);
    assert_eq!(other.cmd(b"list-tube-used\r\n"), "USING default\r\n");
    c.writer.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(c.line(), "TIMED_OUT\r\n");
    assert_eq!(c.line(), "", "connection closed after the reply");
}

#[test]
fn a_client_that_never_reads_does_not_stall_others() {
    let (_server, addr) = start();
    // A greedy client asks for a big job over and over and never reads.
    let (_putter, _greedy) = greedy_client(addr);
    // Meanwhile everybody else is served.
    let mut other = Client::connect(addr);
    for _ in 0..100 {
        assert_eq!(other.cmd(b"list-tube-used\r\n"), "USING default\r\n");
    }
}

#[test]
fn garbage_never_kills_the_server() {
    let (_server, addr) = start();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let words: [&[u8]; 12] = [
        b"put ",
        b"reserve",
        b"delete ",
        b"\r\n",
        b" ",
        b"0",
        b"9999999999",
        b"kick ",
        b"stats",
        b"use ",
        b"-",
        b"\0",
    ];
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).expect("connect");
        let mut junk = vec![];
        for _ in 0..200 {
            if next() % 3 == 0 {
                junk.push((next() & 0xff) as u8);
            } else {
                junk.extend_from_slice(words[(next() % words.len() as u64) as usize]);
            }
        }
        let _ = s.write_all(&junk);
        let _ = s.shutdown(Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut sink = vec![];
        let _ = s.read_to_end(&mut sink);
    }
    let mut c = Client::connect(addr);
    assert!(c.cmd(b"put 0 0 1 2\r\nok\r\n").starts_with("INSERTED "));
}

/// A server of each kind a stop must end, named: on a current-thread runtime
/// of its own, on a pool of two workers, and on a runtime shared with others,
/// returned with it (the caller keeps it running past the stop).
fn every_kind() -> Vec<(&'static str, ServerHandle, SocketAddr, Option<Runtime>)> {
    let (one, one_addr) = start_with(1);
    let (two, two_addr) = start_with(2);
    let runtime = node_runtime();
    let (shared, shared_addr) = start_on(runtime.handle().clone());
    vec![
        ("one thread", one, one_addr, None),
        ("two threads", two, two_addr, None),
        ("shared runtime", shared, shared_addr, Some(runtime)),
    ]
}

#[test]
fn stop_closes_connections_and_wait_returns() {
    for (kind, mut server, addr, _runtime) in every_kind() {
        let mut blocked = Client::connect(addr);
        blocked.send(b"reserve\r\n");
        let mut idle = Client::connect(addr);
        assert_eq!(idle.cmd(b"use a\r\n"), "USING a\r\n");
        let mut partial = Client::connect(addr);
        partial.send(b"put 0 0 60 5\r\nab");
        // The partial put is read before the stop (a reply on the same connection
        // would come after it).
        let mut probe = Client::connect(addr);
        assert_eq!(probe.cmd(b"list-tube-used\r\n"), "USING default\r\n");
        assert!(!server.wait(Some(Duration::from_millis(10))));
        server.stop(Duration::from_secs(5));
        assert!(server.wait(Some(Duration::ZERO)), "{kind}");
        for c in [&mut blocked, &mut idle, &mut partial, &mut probe] {
            assert_eq!(c.line(), "", "{kind}: closed without a reply");
        }
    }
}

#[test]
fn stop_ends_a_connection_stuck_writing_to_a_client_that_never_reads() {
    for (kind, mut server, addr, runtime) in every_kind() {
        let (mut c, greedy) = greedy_client(addr);
        let mut greedy = &greedy;
        // That connection's task waits for the socket to take more output and never
        // looks at the stop signal: stop gives up on it after the timeout and the
        // runtime drops it, or, on a shared runtime that goes on running, the
        // task ends on being given up on.
        server.stop(Duration::from_millis(200));
        assert!(server.wait(Some(Duration::ZERO)), "{kind}");
        assert_eq!(c.line(), "", "{kind}");
        // Its socket is closed, with its commands unread (a reset): its task was
        // dropped, not left waiting.
        let more = greedy.write_all(b"peek 1\r\n");
        assert!(
            more.as_ref().is_err_and(|e| matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )),
            "{kind}: the stuck connection is still open: {more:?}"
        );
        drop(runtime);
    }
}

/// Put a 60 KB job, then open a connection that asks for it over and over and
/// never reads, until the server stops taking its commands (its output is full)
/// and they fill the socket.
/// Returns the connection that put the job and the greedy one.
fn greedy_client(addr: std::net::SocketAddr) -> (Client, TcpStream) {
    let mut c = Client::connect(addr);
    let body = vec![b'x'; 60_000];
    let mut put = format!("put 0 0 60 {}\r\n", body.len()).into_bytes();
    put.extend_from_slice(&body);
    put.extend_from_slice(b"\r\n");
    assert_eq!(c.cmd(&put), "INSERTED 1\r\n");
    let greedy = TcpStream::connect(addr).expect("connect");
    greedy
        .set_write_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    // Until a write blocks: then the server has stopped reading this connection
    // (its output is full) and has commands of it unread.
    let peeks = b"peek 1\r\n".repeat(1024);
    let mut w = &greedy;
    for _ in 0..8192 {
        if w.write_all(&peeks).is_err() {
            break;
        }
    }
    (c, greedy)
}
