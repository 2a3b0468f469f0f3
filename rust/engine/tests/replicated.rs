//! A store whose journal goes to a replicated log (`wal::replicate`), as a
//! cluster leader runs it, over loopback: each pass's records reach the sink
//! in order, a reply goes out only once its records are acknowledged (as
//! committed), a read that sees an unacknowledged change waits for it too, and
//! a store built from a replica's state serves its jobs.

mod wire_util;

use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beanpole_engine::server::{BoundAddr, ListenAddr, ServerConfig, ServerHandle};
use beanpole_engine::stats::StatValue;
use beanpole_engine::wal::format::{JobFields, JobRecord, Record, StoredState};
use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replica::Replica;
use beanpole_engine::wal::replicate::{self, Replicate};
use wire_util::Client;

/// Records proposed, as (bytes, end), sent to the test. A std channel: the
/// test thread blocks on it.
/// The lease is the test's to set (held unless cleared).
struct Sink {
    tx: Mutex<mpsc::Sender<(Vec<u8>, u64)>>,
    lease: Arc<AtomicBool>,
    commit_timeout: Option<Duration>,
}

impl Replicate for Sink {
    fn propose(&self, records: Vec<u8>, end: u64) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let _ = tx.send((records, end));
    }

    fn lease_valid(&self) -> bool {
        self.lease.load(Ordering::SeqCst)
    }

    fn commit_timeout(&self) -> Option<Duration> {
        self.commit_timeout
    }
}

/// What the sink saw: each pass's records and the position after them.
type Proposed = mpsc::Receiver<(Vec<u8>, u64)>;

fn start(replica: &Replica, clock: i64) -> (ServerHandle, Client, Proposed, Arc<LogPipe>) {
    start_leased(replica, clock, Arc::new(AtomicBool::new(true)))
}

fn start_leased(
    replica: &Replica,
    clock: i64,
    lease: Arc<AtomicBool>,
) -> (ServerHandle, Client, Proposed, Arc<LogPipe>) {
    start_with(replica, clock, lease, None)
}

fn start_with(
    replica: &Replica,
    clock: i64,
    lease: Arc<AtomicBool>,
    commit_timeout: Option<Duration>,
) -> (ServerHandle, Client, Proposed, Arc<LogPipe>) {
    let (tx, rx) = mpsc::channel();
    let sink = Arc::new(Sink {
        tx: Mutex::new(tx),
        lease,
        commit_timeout,
    });
    let opened = replicate::opened(
        replica.to_recovered(),
        sink,
        clock,
        "test-instance".into(),
        "replicated test".into(),
    );
    let pipe = Arc::clone(&opened.pipe);
    let config = ServerConfig {
        listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 0).into())],
        threads: 1,
        ..ServerConfig::default()
    };
    let handle = ServerHandle::start_with_log(config, opened).expect("server starts");
    let addr = match handle.local_addr() {
        BoundAddr::Tcp(a) => *a,
        BoundAddr::Unix(_) => panic!("expected TCP"),
    };
    let client = Client::connect(addr);
    (handle, client, rx, pipe)
}

/// Whether the connection has nothing to read now (no reply has been sent).
fn nothing_to_read(client: &mut Client) -> bool {
    let s = client.reader.get_mut();
    s.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    let empty = matches!(s.read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).expect("blocking");
    empty && client.reader.buffer().is_empty()
}

fn stat(handle: &ServerHandle, name: &str) -> u64 {
    handle
        .stats()
        .into_iter()
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| match v {
            StatValue::Int(n) => n,
            _ => 0,
        })
}

/// Wait (at most 10 s) until the server has run `n` commands counted as `name`.
fn ran(handle: &ServerHandle, name: &str, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stat(handle, name) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never reached {n}"
        );
        std::thread::yield_now();
    }
}

fn addr(handle: &ServerHandle) -> std::net::SocketAddr {
    match handle.local_addr() {
        BoundAddr::Tcp(a) => *a,
        BoundAddr::Unix(_) => panic!("expected TCP"),
    }
}

#[test]
fn replies_wait_for_the_commit_of_what_their_pass_saw() {
    let (mut handle, mut client, proposed, pipe) = start(&Replica::new(), 0);

    client.send(b"put 5 0 60 5\r\nhello\r\n");
    let (records, end) = proposed.recv().expect("the put's records");
    // The proposal is exactly the put's job record, which a replica applies.
    let mut replica = Replica::new();
    assert_eq!(replica.apply_run(&records), Ok(1));
    let job = replica.jobs().next().expect("the job");
    assert_eq!(
        (job.fields.id, job.body, job.tube),
        (1, &b"hello"[..], &b"default"[..])
    );
    assert_eq!(end, records.len() as u64);
    // Proposed, not acknowledged: no reply (it is only written after the
    // acknowledgement, so looking now is no race).
    ran(&handle, "cmd-put", 1);
    assert!(nothing_to_read(&mut client));

    // Another connection's read sees the uncommitted job: its reply waits for
    // the same commit, so no client learns of a change that may yet be lost.
    let mut reader = Client::connect(addr(&handle));
    reader.send(b"peek-ready\r\n");
    ran(&handle, "cmd-peek-ready", 1);
    assert!(nothing_to_read(&mut reader));
    assert!(proposed.try_recv().is_err(), "a read proposed records");

    pipe.acknowledge(end);
    assert_eq!(client.line(), "INSERTED 1\r\n");
    assert_eq!(reader.line(), "FOUND 1 5\r\n");
    assert_eq!(reader.body(5), b"hello");

    // Later passes go on from the acknowledged position, in order.
    client.send(b"delete 1\r\n");
    let (records, second_end) = proposed.recv().expect("the delete's record");
    assert_eq!(second_end, end + records.len() as u64);
    assert_eq!(replica.apply_run(&records), Ok(1));
    assert!(replica.is_empty());
    pipe.acknowledge(second_end);
    assert_eq!(client.line(), "DELETED\r\n");
    handle.stop(std::time::Duration::from_secs(5));
}

#[test]
fn a_store_built_from_a_replica_serves_its_jobs_and_keeps_its_clock() {
    let mut replica = Replica::new();
    let mut records = Vec::new();
    let created = 1_700_000_000_000_000_000;
    Record::Job(JobRecord {
        fields: JobFields {
            id: 7,
            pri: 3,
            delay: 0,
            ttr: 30,
            state: StoredState::Ready,
            created,
            ready_at: 0,
            bury_seq: 0,
            reserves: 0,
            timeouts: 0,
            releases: 0,
            buries: 0,
            kicks: 0,
        },
        tube: b"t".to_vec(),
        body: b"seven".to_vec(),
    })
    .encode(&mut records);
    Record::Bury {
        id: 7,
        pri: 3,
        bury_seq: 4,
    }
    .encode(&mut records);
    assert_eq!(replica.apply_run(&records), Ok(2));
    // The replicated clock is an hour ahead of this machine's: the store's
    // times must not start before it.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as i64;
    let clock = wall + 3_600_000_000_000;
    let (mut handle, mut client, proposed, pipe) = start(&replica, clock);

    client.send(b"peek-buried\r\n");
    // Nothing proposed yet: the committed state needs no commit to be read.
    assert_eq!(client.line(), "NOT_FOUND\r\n");
    client.send(b"use t\r\npeek-buried\r\n");
    assert_eq!(client.line(), "USING t\r\n");
    assert_eq!(client.line(), "FOUND 7 5\r\n");
    assert_eq!(client.body(5), b"seven");

    client.send(b"put 1 0 60 3\r\nnew\r\n");
    let (records, end) = proposed.recv().expect("the put's record");
    let mut check = Replica::new();
    assert_eq!(check.apply_run(&records), Ok(1));
    let job = check.jobs().next().expect("the job");
    assert_eq!(job.fields.id, 8, "ids go on after the replica's");
    assert!(
        job.fields.created >= clock,
        "created {} is before the replicated clock {clock}",
        job.fields.created
    );
    pipe.acknowledge(end);
    assert_eq!(client.line(), "INSERTED 8\r\n");
    handle.stop(std::time::Duration::from_secs(5));
}

#[test]
fn a_read_after_the_lease_ran_out_waits_for_a_barrier_commit() {
    let lease = Arc::new(AtomicBool::new(true));
    let (mut handle, mut client, proposed, pipe) =
        start_leased(&Replica::new(), 0, Arc::clone(&lease));
    client.send(b"put 5 0 60 2\r\nhi\r\n");
    let (_, end) = proposed.recv().expect("the put's records");
    pipe.acknowledge(end);
    assert_eq!(client.line(), "INSERTED 1\r\n");

    // Within the lease a read proposes nothing and answers at once.
    client.send(b"peek 1\r\n");
    assert_eq!(client.line(), "FOUND 1 2\r\n");
    assert_eq!(client.body(2), b"hi");
    assert!(
        proposed.try_recv().is_err(),
        "a read within the lease proposed"
    );

    // Past it, the read's pass journals a no-op and waits for its commit.
    lease.store(false, Ordering::SeqCst);
    client.send(b"peek 1\r\n");
    let (records, barrier) = proposed.recv().expect("a barrier");
    assert!(barrier > end);
    let mut replica = Replica::new();
    assert_eq!(replica.apply_run(&records), Ok(1));
    assert!(replica.is_empty(), "the barrier changed the state");
    assert_eq!(
        replica.next_id(),
        2,
        "the barrier is the id floor as it was"
    );
    ran(&handle, "cmd-peek", 2);
    assert!(nothing_to_read(&mut client));
    pipe.acknowledge(barrier);
    assert_eq!(client.line(), "FOUND 1 2\r\n");
    assert_eq!(client.body(2), b"hi");
    handle.stop(std::time::Duration::from_secs(5));
}

#[test]
fn a_closed_pipe_ends_the_waits_unanswered() {
    let (mut handle, mut client, proposed, pipe) = start(&Replica::new(), 0);
    client.send(b"put 5 0 60 2\r\nhi\r\n");
    let (_, end) = proposed.recv().expect("the put's records");
    ran(&handle, "cmd-put", 1);
    // The term ends before the commit: the reply is never sent, the
    // connection closes at once (not when the server's stop gives up).
    pipe.close();
    let mut rest = Vec::new();
    let n = client
        .reader
        .read_to_end(&mut rest)
        .expect("read to the end");
    assert_eq!(n, 0, "a reply went out: {rest:?}");
    // A commit arriving later changes nothing for the closed connection.
    pipe.acknowledge(end);
    handle.stop(std::time::Duration::from_secs(5));
}

#[test]
fn a_commit_that_does_not_come_in_time_is_refused_per_proposal() {
    let limit = Duration::from_secs(1);
    let (mut handle, mut first, proposed, pipe) = start_with(
        &Replica::new(),
        0,
        Arc::new(AtomicBool::new(true)),
        Some(limit),
    );
    let t0 = Instant::now();
    first.send(b"put 5 0 60 2\r\nhi\r\n");
    let (_, end1) = proposed.recv().expect("the first put's records");
    // A second client's put, proposed well after the first.
    std::thread::sleep(limit / 2);
    let mut second = Client::connect(addr(&handle));
    let t1 = Instant::now();
    second.send(b"put 5 0 60 2\r\nho\r\n");
    let (_, end2) = proposed.recv().expect("the second put's records");
    assert!(end2 > end1);
    // Neither is ever committed. The first is refused once its own proposal
    // is a timeout old, and its connection closes.
    assert_eq!(first.line(), "INTERNAL_ERROR\r\n");
    let waited = t0.elapsed();
    assert!(
        waited >= limit,
        "refused after {waited:?}, before the timeout"
    );
    let mut rest = Vec::new();
    assert_eq!(first.reader.read_to_end(&mut rest).expect("read"), 0);
    // The second waits its own timeout, not the first's: still unanswered.
    assert!(
        t1.elapsed() < limit && nothing_to_read(&mut second),
        "the second put was answered with the first"
    );
    // It is committed in time: answered.
    pipe.acknowledge(end2);
    assert_eq!(second.line(), "INSERTED 2\r\n");
    // A later put, committed at once, is answered too.
    second.send(b"put 5 0 60 2\r\nhu\r\n");
    let (_, end3) = proposed.recv().expect("the third put's records");
    pipe.acknowledge(end3);
    assert_eq!(second.line(), "INSERTED 3\r\n");
    handle.stop(Duration::from_secs(5));
}
