//! A server listening on several addresses at once: one store behind all of them,
//! every listener closed by the one stop, nothing left bound after a failed start.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use beanpole_engine::server::{BoundAddr, ListenAddr, ServerConfig, ServerError, ServerHandle};

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("beanpole-listeners-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// Send one command line, read one reply line.
fn ask<S: std::io::Read + Write>(stream: &mut BufReader<S>, line: &str) -> String {
    stream.get_mut().write_all(line.as_bytes()).expect("write");
    let mut reply = String::new();
    stream.read_line(&mut reply).expect("read");
    reply
}

fn tcp(addr: &BoundAddr) -> BufReader<TcpStream> {
    let BoundAddr::Tcp(sa) = addr else {
        panic!("expected TCP, got {addr}");
    };
    let s = TcpStream::connect(sa).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    BufReader::new(s)
}

#[test]
fn every_listener_serves_the_same_queue_until_stop() {
    let dir = scratch("serve");
    let sock = dir.join("b.sock");
    let config = ServerConfig {
        listen: vec![
            ListenAddr::parse("127.0.0.1", 0).expect("v4"),
            ListenAddr::parse("127.0.0.1:0", 11300).expect("v4 with port"),
            ListenAddr::parse(&format!("unix:{}", sock.display()), 0).expect("unix"),
        ],
        unix_mode: Some(0o660),
        threads: 1,
        ..ServerConfig::default()
    };
    let mut server = ServerHandle::start(config).expect("start");
    let addrs = server.local_addrs().to_vec();
    assert_eq!(addrs.len(), 3);
    assert_eq!(server.local_addr(), &addrs[0]);
    assert_eq!(addrs[2], BoundAddr::Unix(sock.clone()));
    let mode = std::fs::metadata(&sock).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o660);

    let mut first = tcp(&addrs[0]);
    let mut second = tcp(&addrs[1]);
    let unix = UnixStream::connect(&sock).expect("connect unix");
    unix.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut unix = BufReader::new(unix);
    assert_eq!(ask(&mut first, "put 0 0 60 1\r\na\r\n"), "INSERTED 1\r\n");
    assert_eq!(ask(&mut unix, "put 0 0 60 1\r\nb\r\n"), "INSERTED 2\r\n");
    assert_eq!(
        ask(&mut second, "reserve-with-timeout 0\r\n"),
        "RESERVED 1 1\r\n"
    );

    server.stop(Duration::from_secs(5));
    for addr in &addrs[..2] {
        let BoundAddr::Tcp(sa) = addr else {
            unreachable!()
        };
        assert!(TcpStream::connect(sa).is_err(), "{sa} still accepts");
    }
    assert!(!sock.exists(), "the socket file was left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_start_that_fails_on_one_address_names_it_and_keeps_nothing() {
    let dir = scratch("fail");
    let sock = dir.join("b.sock");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_addr = taken.local_addr().expect("addr");
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let free_addr = free.local_addr().expect("addr");
    drop(free);
    let config = ServerConfig {
        listen: vec![
            ListenAddr::Tcp(free_addr),
            ListenAddr::Unix(sock.clone()),
            ListenAddr::Tcp(taken_addr),
        ],
        threads: 1,
        ..ServerConfig::default()
    };
    match ServerHandle::start(config) {
        Err(ServerError::Bind { addr, .. }) => assert_eq!(addr, taken_addr.to_string()),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("started on a taken address"),
    }
    assert!(!sock.exists(), "the socket file was left behind");
    // The first address is free again.
    std::net::TcpListener::bind(free_addr).expect("the first address is still bound");
    let _ = std::fs::remove_dir_all(&dir);
}
