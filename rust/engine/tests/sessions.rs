//! Sessions over real sockets: a leader's server serves a connection a
//! follower attached as a session, journaling its replies with its changes; a
//! second server built from a replica of what the first proposed (the next
//! leader) takes the session back, answers the commands sent again from their
//! first run, and leaves the session its reserved job.

mod wire_util;

use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use beanpole_engine::server::{ServerConfig, ServerHandle, SessionAttach, SessionRefused};
use beanpole_engine::store::session::AttachError;
use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replica::Replica;
use beanpole_engine::wal::replicate::{self, Replicate};
use wire_util::Client;

/// Commits every proposal at once (a cluster whose majority answers
/// instantly) and keeps the bytes for the next leader's replica.
#[derive(Default)]
struct Instant {
    pipe: OnceLock<Arc<LogPipe>>,
    log: Mutex<Vec<u8>>,
}

impl Replicate for Instant {
    fn propose(&self, records: Vec<u8>, end: u64) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(&records);
        if let Some(pipe) = self.pipe.get() {
            pipe.acknowledge(end);
        }
    }
}

/// A leader's server on `replica`'s state (its own listener stays unused:
/// sessions only).
fn leader(replica: &Replica) -> (ServerHandle, Arc<Instant>) {
    let sink = Arc::new(Instant::default());
    let opened = replicate::opened(
        replica.to_recovered(),
        Arc::clone(&sink) as Arc<dyn Replicate>,
        0,
        "test".into(),
        "test".into(),
    );
    let _ = sink.pipe.set(Arc::clone(&opened.pipe));
    let config = ServerConfig {
        listen: vec![beanpole_engine::server::ListenAddr::Tcp(
            ([127, 0, 0, 1], 0).into(),
        )],
        threads: 1,
        ..ServerConfig::default()
    };
    let handle = ServerHandle::start_with_log(config, opened).expect("server starts");
    (handle, sink)
}

/// Attach a new connection to `handle` as session `owner`; the client end.
fn attach(handle: &ServerHandle, owner: u64, acked: u64) -> Result<Client, SessionRefused> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let near = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (far, _) = listener.accept().expect("accept");
    far.set_nonblocking(true).expect("nonblocking");
    // A socket of the server's runtime, as a link's stream is.
    let far = {
        let runtime = handle.admin().runtime().expect("the server runs");
        let _entered = runtime.enter();
        tokio::net::TcpStream::from_std(far).expect("registered")
    };
    handle.admin().attach_session(
        far,
        &SessionAttach {
            owner,
            acked,
            use_tube: b"default".to_vec(),
            watch: vec![b"default".to_vec()],
        },
        b"hi\r\n".to_vec(),
    )?;
    near.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut client = Client {
        reader: BufReader::new(near.try_clone().expect("clone")),
        writer: near,
    };
    // The greeting comes first, before any reply.
    assert_eq!(client.line(), "hi\r\n");
    Ok(client)
}

fn replica_of(sink: &Instant) -> Replica {
    let mut replica = Replica::new();
    let log = sink.log.lock().unwrap_or_else(|e| e.into_inner());
    replica.apply_run(&log).expect("the proposals apply");
    replica
}

#[test]
fn a_session_resent_to_the_next_leader_is_answered_from_its_first_run() {
    let (mut a, sink) = leader(&Replica::new());
    let mut c = attach(&a, 42, 0).expect("attached");
    // 1 put, 2 reserve, 3 peek (a read, recorded with the later change), 4 put.
    c.send(b"put 1 0 60 5\r\nfirst\r\nreserve\r\npeek 9\r\nput 1 0 60 6\r\nsecond\r\n");
    assert_eq!(c.line(), "INSERTED 1\r\n");
    assert_eq!(c.line(), "RESERVED 1 5\r\n");
    assert_eq!(c.body(5), b"first");
    assert_eq!(c.line(), "NOT_FOUND\r\n");
    assert_eq!(c.line(), "INSERTED 2\r\n");
    // A second attach while this one is served is refused.
    assert!(matches!(
        attach(&a, 42, 0),
        Err(SessionRefused::Store(AttachError::Busy))
    ));
    a.stop(Duration::from_secs(5));

    // The next leader; the follower had only the first reply when the old
    // leader went, so it sends commands 2 to 4 again, then a new one.
    let (mut b, _sink_b) = leader(&replica_of(&sink));
    let mut c = attach(&b, 42, 1).expect("attached again");
    c.send(b"reserve\r\npeek 9\r\nput 1 0 60 6\r\nsecond\r\nstats-job 1\r\n");
    assert_eq!(c.line(), "RESERVED 1 5\r\n");
    assert_eq!(c.body(5), b"first");
    assert_eq!(c.line(), "NOT_FOUND\r\n");
    assert_eq!(c.line(), "INSERTED 2\r\n");
    let header = c.line();
    assert!(header.starts_with("OK "), "{header}");
    let len: usize = header[3..header.len() - 2].parse().expect("length");
    let yaml = String::from_utf8(c.body(len)).expect("utf-8");
    assert!(yaml.contains("state: reserved"), "{yaml}");
    assert!(yaml.contains("reserves: 1\n"), "{yaml}");
    // Nothing was applied twice: job 2 is the only other job.
    c.send(b"peek 3\r\ndelete 1\r\ndelete 2\r\n");
    assert_eq!(c.line(), "NOT_FOUND\r\n");
    assert_eq!(c.line(), "DELETED\r\n");
    assert_eq!(c.line(), "DELETED\r\n");
    b.stop(Duration::from_secs(5));
}

#[test]
fn a_client_that_quits_ends_its_session_and_its_jobs_come_back() {
    let (mut a, sink) = leader(&Replica::new());
    let mut c = attach(&a, 7, 0).expect("attached");
    c.send(b"put 1 0 60 1\r\nx\r\nreserve\r\n");
    assert_eq!(c.line(), "INSERTED 1\r\n");
    assert_eq!(c.line(), "RESERVED 1 1\r\n");
    assert_eq!(c.body(1), b"x");
    c.send(b"quit\r\n");
    // The quit is seen once the session's connection has closed.
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c.reader, &mut rest);
    assert!(rest.is_empty());
    a.stop(Duration::from_secs(5));
    let (mut b, _) = leader(&replica_of(&sink));
    let mut other = attach(&b, 8, 0).expect("attached");
    other.send(b"reserve-with-timeout 0\r\n");
    assert_eq!(other.line(), "RESERVED 1 1\r\n");
    assert_eq!(other.body(1), b"x");
    b.stop(Duration::from_secs(5));
}

#[test]
fn a_session_whose_link_breaks_keeps_its_job_on_the_same_leader() {
    let (mut a, _sink) = leader(&Replica::new());
    let mut c = attach(&a, 9, 0).expect("attached");
    c.send(b"put 1 0 60 1\r\nx\r\nreserve\r\n");
    assert_eq!(c.line(), "INSERTED 1\r\n");
    assert_eq!(c.line(), "RESERVED 1 1\r\n");
    assert_eq!(c.body(1), b"x");
    drop(c);
    // Attached again once the server has seen the old link go (it is busy
    // until then).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        match attach(&a, 9, 2) {
            Ok(c) => break c,
            Err(SessionRefused::Store(AttachError::Busy)) => {
                assert!(std::time::Instant::now() < deadline, "still busy");
                std::thread::yield_now();
            }
            Err(e) => panic!("{e}"),
        }
    };
    c.send(b"delete 1\r\n");
    assert_eq!(c.line(), "DELETED\r\n");
    a.stop(Duration::from_secs(5));
}
