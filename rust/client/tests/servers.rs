//! The client against a real beanpole server and, when installed, Debian's beanstalkd.

use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use beanpole_client::batch::{pipeline, put_many, Cause};
use beanpole_client::{Address, ClientError, Command, Connection, ErrorReply, Reply};
use beanpole_engine::server::{BoundAddr, ListenAddr, ServerConfig, ServerHandle};

enum Server {
    Beanpole(Box<ServerHandle>),
    Beanstalkd(Child),
}

impl Drop for Server {
    fn drop(&mut self) {
        match self {
            Server::Beanpole(h) => h.stop(Duration::from_secs(5)),
            Server::Beanstalkd(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn beanpole(max_job_size: u32) -> (Server, Address) {
    let config = ServerConfig {
        listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 0).into())],
        max_job_size,
        ..ServerConfig::default()
    };
    let handle = ServerHandle::start(config).expect("server starts");
    let addr = match handle.local_addr() {
        BoundAddr::Tcp(a) => Address::Tcp(a.to_string()),
        BoundAddr::Unix(p) => Address::Unix(p.clone()),
    };
    (Server::Beanpole(Box::new(handle)), addr)
}

/// beanstalkd on an already-listening socket (socket activation), or None if absent.
fn beanstalkd(max_job_size: u32) -> Option<(Server, Address)> {
    let exe = std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("beanstalkd"))
        .find(|p| p.exists())?;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    // The listening socket goes in as standard input (so it is inherited); the shell
    // moves it to fd 3, where socket activation expects it.
    let script = "exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$@\"";
    let child = Process::new("sh")
        .args(["-c", script, "sh"])
        .arg(exe)
        .args(["-z", &max_job_size.to_string()])
        .stdin(Stdio::from(OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn beanstalkd");
    Some((Server::Beanstalkd(child), Address::Tcp(addr.to_string())))
}

fn servers(max_job_size: u32) -> Vec<(Server, Address)> {
    let mut all = vec![beanpole(max_job_size)];
    all.extend(beanstalkd(max_job_size));
    all
}

fn connect(addr: &Address) -> Connection {
    Connection::connect(addr, Some(Duration::from_secs(10))).expect("connect")
}

#[test]
fn one_job_round_trip() {
    for (_server, addr) in servers(1000) {
        let mut c = connect(&addr);
        let id = match c.call(Command::Put {
            pri: 5,
            delay: 0,
            ttr: 60,
            body: b"hi\r\n",
        }) {
            Ok(Reply::Inserted(id)) => id,
            other => panic!("{other:?}"),
        };
        let reply = c.call(Command::ReserveWithTimeout(0)).expect("reserve");
        assert_eq!(
            reply,
            Reply::Reserved {
                id,
                body: b"hi\r\n".to_vec()
            }
        );
        assert!(matches!(
            c.call(Command::ReserveWithTimeout(0)),
            Err(ClientError::Reply(ErrorReply::TimedOut))
        ));
        assert_eq!(c.call(Command::Delete(id)).ok(), Some(Reply::Deleted));
        assert!(matches!(
            c.call(Command::Delete(id)),
            Err(ClientError::Reply(ErrorReply::NotFound))
        ));
        assert_eq!(
            c.call(Command::Use(b"other")).ok(),
            Some(Reply::Using(b"other".to_vec()))
        );
        assert!(matches!(c.call(Command::Stats), Ok(Reply::Ok(_))));
    }
}

#[test]
fn put_many_reports_the_failing_item_and_keeps_the_rest() {
    for (_server, addr) in servers(100) {
        let mut c = connect(&addr);
        let small = [b'x'; 10];
        let big = [b'y'; 101];
        let bodies: Vec<&[u8]> = (0..50)
            .map(|i| if i == 20 { &big[..] } else { &small[..] })
            .collect();
        let failure = put_many(&mut c, bodies, 0, 0, 60, 8).expect_err("item 20 is too big");
        assert_eq!(failure.index, 20);
        assert!(matches!(
            failure.cause,
            Cause::Client(ClientError::Reply(ErrorReply::JobTooBig))
        ));
        assert_eq!(failure.done, (1..=20).collect::<Vec<u64>>());
        // Items already in flight after 20 were stored; none after the window.
        assert!(failure.after.iter().all(|&(i, _)| i > 20 && i < 20 + 8));
        // The connection is still in step.
        assert!(matches!(c.call(Command::Stats), Ok(Reply::Ok(_))));
        let ok = put_many(&mut c, vec![&small[..]; 3000], 0, 0, 60, 1000).expect("all fit");
        assert_eq!(ok.len(), 3000);
        assert!(ok.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn pipelined_reserves_stop_at_timed_out() {
    for (_server, addr) in servers(1000) {
        let mut c = connect(&addr);
        let bodies: Vec<Vec<u8>> = (0..30).map(|i| format!("job {i}").into_bytes()).collect();
        put_many(&mut c, bodies.iter().map(Vec::as_slice), 0, 0, 60, 4).expect("put");
        let mut got = Vec::new();
        let mut sent = 0;
        let stopped = pipeline(
            &mut c,
            16,
            Some(Some(0)),
            |q, room| {
                for _ in 0..room.min(100 - sent) {
                    q.push(Command::ReserveWithTimeout(0))?;
                    sent += 1;
                }
                Ok::<(), ClientError>(())
            },
            |_, reply| match reply {
                Reply::Reserved { body, .. } => {
                    got.push(body);
                    true
                }
                _ => false,
            },
        )
        .expect("no connection failure");
        assert!(stopped.is_none());
        assert_eq!(got, bodies);
        assert!(sent < 100);
    }
}

#[test]
fn a_server_that_goes_away_is_a_connection_error() {
    let (mut server, addr) = beanpole(1000);
    let mut c = connect(&addr);
    assert!(c.call(Command::Stats).is_ok());
    if let Server::Beanpole(h) = &mut server {
        h.stop(Duration::from_secs(5));
    }
    let err = c.call(Command::Stats).expect_err("server is gone");
    assert!(err.is_connection(), "{err}");
    assert!(matches!(
        c.call(Command::Stats),
        Err(ClientError::NotConnected { .. })
    ));
}

#[test]
fn unix_sockets_work() {
    let dir = std::env::temp_dir().join(format!("beanpole-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("sock");
    let config = ServerConfig {
        listen: vec![ListenAddr::Unix(path.clone())],
        ..ServerConfig::default()
    };
    let mut handle = ServerHandle::start(config).expect("server starts");
    let mut c = connect(&Address::Unix(path));
    assert!(matches!(
        c.call(Command::Put {
            pri: 0,
            delay: 0,
            ttr: 1,
            body: b"u"
        }),
        Ok(Reply::Inserted(1))
    ));
    handle.stop(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(dir);
}
