//! The write-ahead log under injected faults (real files in a real directory, with
//! `FaultyDir` failing writes, fsyncs or segment creation), and group commit.

mod wal_util;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, PoisonError};
use std::time::Duration;

use beanpole_engine::wal::fs::{Faults, FsDir, LogDir, SegmentFile};
use beanpole_engine::wal::{FsyncPolicy, LogConfig};
use wal_util::*;

fn faulty(dir: &Path, segment_size: u64, fsync: FsyncPolicy, faults: &Arc<Faults>) -> LogConfig {
    LogConfig {
        faults: Some(Arc::clone(faults)),
        ..log_config(dir, segment_size, fsync)
    }
}

/// Start a server without faults on `dir` and check it holds exactly `want`
/// (id -> body), all ready.
fn check_after_restart(dir: &Path, want: &BTreeMap<u64, Vec<u8>>) {
    let (server, addr) = start(log_config(dir, 8192, FsyncPolicy::Never));
    let mut c = Client::connect(addr);
    let stats = c.stats();
    assert_eq!(
        num(&stats, "current-jobs-ready"),
        want.len() as u64,
        "{stats:?}"
    );
    for (&id, body) in want {
        let got = c.peek(&format!("peek {id}"));
        assert_eq!(got.as_ref().map(|g| &g.1), Some(body), "job {id}");
    }
    drop(c);
    stop(server);
}

/// Puts each worker makes.
const PUTS: u32 = 150;

/// The burst of failed or short writes injected at `step` (a multiple of 10):
/// 1-3 of one kind, 16 failed and 14 short ones in all.
fn inject(faults: &Faults, step: u32) {
    let n = (step / 10) % 3 + 1;
    if step % 20 == 0 {
        faults.fail_writes.fetch_add(n, Ordering::SeqCst);
    } else {
        faults.short_writes.fetch_add(n, Ordering::SeqCst);
    }
}

/// Faults injected and not hit yet: (failed writes, short writes).
fn pending(faults: &Faults) -> (u32, u32) {
    (
        faults.fail_writes.load(Ordering::SeqCst),
        faults.short_writes.load(Ordering::SeqCst),
    )
}

/// Worker `w`'s puts on a connection of its own, deleting its oldest acknowledged
/// job every seventh step; worker 0 injects a burst of faults every tenth step.
/// A put refused while the log fails is sent again (every 10 ms) until it is
/// accepted, as a client waiting out the failure would. Returns the jobs
/// acknowledged and not deleted.
///
/// Refusals come back at once: a worker that went on after one would race
/// through its steps while the log fails, and worker 0 would pile its bursts up
/// into one long run of failed writes (up to 30 in a row, each retried after the
/// writer's backoff of up to 1 s), which kept the log failing for 25 s. Waiting
/// for its put after a burst also shows the burst was hit: that put was written
/// after the injection, and a write succeeds only when no injected fault is left.
fn put_and_delete(w: u32, addr: SocketAddr, faults: &Faults) -> BTreeMap<u64, Vec<u8>> {
    let mut c = Client::connect(addr);
    let mut acked = BTreeMap::new();
    for i in 0..PUTS {
        if w == 0 && i % 10 == 0 {
            assert_eq!(pending(faults), (0, 0), "step {i}: earlier faults not hit");
            inject(faults, i);
        }
        let body = format!("worker {w} job {i} {:0>200}", i).into_bytes();
        let mut id = None;
        let accepted = eventually(Duration::from_secs(20), || {
            let reply = c.put_raw(1, 0, 60, &body);
            id = inserted(&reply);
            // Refused while the log was failing: not acknowledged.
            assert!(id.is_some() || reply == "OUT_OF_MEMORY\r\n", "{reply:?}");
            id.is_some()
        });
        assert!(
            accepted,
            "worker {w} step {i}: puts still refused with faults {:?} left",
            pending(faults)
        );
        acked.insert(id.expect("accepted"), body);
        if i % 7 == 0 {
            if let Some(&id) = acked.keys().next() {
                assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
                acked.remove(&id);
            }
        }
    }
    acked
}

#[test]
fn failed_and_short_writes_are_retried_and_nothing_acknowledged_is_lost() {
    let tmp = TempDir::new("wal-writes");
    let faults = Arc::new(Faults::default());
    let (server, addr) = start(faulty(tmp.path(), 8192, FsyncPolicy::Always, &faults));
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let faults = Arc::clone(&faults);
            std::thread::spawn(move || put_and_delete(w, addr, &faults))
        })
        .collect();
    let mut want = BTreeMap::new();
    for w in workers {
        want.extend(w.join().expect("worker"));
    }
    // Every injected fault was hit.
    assert_eq!(pending(&faults), (0, 0));
    // Every put was accepted in the end; one job in seven was deleted.
    assert_eq!(want.len(), 3 * (PUTS - PUTS.div_ceil(7)) as usize);
    stop(server);
    check_after_restart(tmp.path(), &want);
}

/// A fault while a new segment's header is written (or synced) must not wedge the
/// log: the segment file already exists when the header fails.
#[test]
fn a_fault_while_a_new_segment_is_set_up_is_retried() {
    for (writes, syncs) in [(1, 0), (0, 1), (3, 2)] {
        let tmp = TempDir::new("wal-header-fault");
        let faults = Arc::new(Faults::default());
        faults.fail_writes.store(writes, Ordering::SeqCst);
        faults.fail_syncs.store(syncs, Ordering::SeqCst);
        let (server, addr) = start(faulty(tmp.path(), 8192, FsyncPolicy::Always, &faults));
        let mut c = Client::connect(addr);
        let mut want = BTreeMap::new();
        assert!(
            eventually(Duration::from_secs(10), || {
                inserted(&c.put_raw(1, 0, 60, b"first")).is_some_and(|id| {
                    want.insert(id, b"first".to_vec());
                    true
                })
            }),
            "the log never recovered from {writes} failed writes, {syncs} failed syncs"
        );
        // Into new segments too.
        for i in 0..60 {
            let body = format!("{i:0>300}").into_bytes();
            want.insert(c.put(1, 0, 60, &body), body);
        }
        drop(c);
        stop(server);
        check_after_restart(tmp.path(), &want);
    }
}

#[test]
fn a_failed_fsync_with_f0_delays_the_reply_but_loses_nothing() {
    let tmp = TempDir::new("wal-fsync");
    let faults = Arc::new(Faults::default());
    let (server, addr) = start(faulty(tmp.path(), 8192, FsyncPolicy::Always, &faults));
    let mut c = Client::connect(addr);
    let mut want = BTreeMap::new();
    want.insert(c.put(1, 0, 60, b"before"), b"before".to_vec());

    // The writer may still be making the spare segment when the fault is set:
    // its sync takes the fault, the log fails at once and the put is refused
    // (nothing acknowledged). Then the log recovers and the fault is set again;
    // the spare is made by then.
    let mut delayed = false;
    for _ in 0..5 {
        faults.fail_syncs.store(u32::MAX, Ordering::SeqCst);
        c.send(b"put 1 0 60 6\r\nduring\r\n");
        c.set_read_timeout(Duration::from_millis(500));
        match c.try_line() {
            None => {
                delayed = true;
                break;
            }
            Some(line) => assert_eq!(line, "OUT_OF_MEMORY\r\n", "replied before the sync"),
        }
        faults.fail_syncs.store(0, Ordering::SeqCst);
        assert!(eventually(Duration::from_secs(5), || {
            inserted(&c.put_raw(1, 0, 60, b"again")).is_some_and(|id| {
                want.insert(id, b"again".to_vec());
                true
            })
        }));
    }
    assert!(delayed, "replied before the record was synced");
    // Meanwhile the log is failing: other puts are refused at once.
    let mut other = Client::connect(addr);
    assert_eq!(other.put_raw(1, 0, 60, b"refused"), "OUT_OF_MEMORY\r\n");

    faults.fail_syncs.store(0, Ordering::SeqCst);
    c.set_read_timeout(Duration::from_secs(20));
    let id = inserted(&c.line()).expect("inserted once the fsync succeeds");
    want.insert(id, b"during".to_vec());
    assert!(eventually(Duration::from_secs(5), || {
        inserted(&other.put_raw(1, 0, 60, b"after")).is_some_and(|id| {
            want.insert(id, b"after".to_vec());
            true
        })
    }));
    drop((c, other));
    stop(server);
    check_after_restart(tmp.path(), &want);
}

#[test]
fn a_full_disk_refuses_puts_keeps_deletes_and_recovers_by_itself() {
    let tmp = TempDir::new("wal-full");
    let faults = Arc::new(Faults::default());
    let (server, addr) = start(faulty(tmp.path(), 16 * 1024, FsyncPolicy::Always, &faults));
    let _room_again = RoomAgain(Arc::clone(&faults));
    let mut c = Client::connect(addr);
    let body = vec![b'b'; 500];
    let mut live: Vec<u64> = (0..10).map(|_| c.put(1, 0, 60, &body)).collect();

    faults.disk_full.store(true, Ordering::SeqCst);
    let mut refused = None;
    for _ in 0..1000 {
        let reply = c.put_raw(1, 0, 60, &body);
        match inserted(&reply) {
            Some(id) => live.push(id),
            None => {
                refused = Some(reply);
                break;
            }
        }
    }
    assert_eq!(refused.as_deref(), Some("OUT_OF_MEMORY\r\n"));
    let last_id = *live.last().expect("jobs");

    // A refused put changes nothing but the command count (as in beanstalkd, whose
    // refused put also used up an id).
    let before = c.stats();
    for _ in 0..3 {
        assert_eq!(c.put_raw(1, 0, 60, &body), "OUT_OF_MEMORY\r\n");
    }
    let after = c.stats();
    for (key, value) in &before {
        let expected = match key.as_str() {
            "cmd-put" => (num(&before, key) + 3).to_string(),
            "cmd-stats" => (num(&before, key) + 1).to_string(),
            "uptime" | "rusage-utime" | "rusage-stime" => continue,
            _ => value.clone(),
        };
        assert_eq!(after[key], expected, "{key}");
    }

    // Deletes need no new space: it was reserved with each job.
    for id in live.drain(..) {
        assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
    }
    assert_eq!(num(&c.stats(), "current-jobs-ready"), 0);

    // Once the disk has room again, puts are accepted without a restart.
    faults.disk_full.store(false, Ordering::SeqCst);
    let mut first = None;
    assert!(eventually(Duration::from_secs(10), || {
        first = inserted(&c.put_raw(1, 0, 60, b"again"));
        first.is_some()
    }));
    let first = first.expect("put");
    // Ids used by refused puts are not handed out again.
    assert!(first > last_id + 4, "{first} after {last_id}");
    let mut want = BTreeMap::new();
    want.insert(first, b"again".to_vec());
    for i in 0..40 {
        let body = format!("{i:0>400}").into_bytes();
        want.insert(c.put(1, 0, 60, &body), body);
    }
    drop(c);
    stop(server);
    check_after_restart(tmp.path(), &want);
}

/// Counts the fsyncs of the segments it creates; each one takes a little while, as
/// on a real disk.
struct CountingDir {
    inner: FsDir,
    syncs: Arc<AtomicU64>,
}

struct CountingSegment {
    inner: Box<dyn SegmentFile>,
    syncs: Arc<AtomicU64>,
}

impl SegmentFile for CountingSegment {
    fn write_all_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.write_all_at(offset, data)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        self.inner.sync()
    }
}

impl LogDir for CountingDir {
    fn segments(&self) -> std::io::Result<Vec<u64>> {
        self.inner.segments()
    }
    fn create(&self, seq: u64, size: u64) -> std::io::Result<Box<dyn SegmentFile>> {
        Ok(Box::new(CountingSegment {
            inner: self.inner.create(seq, size)?,
            syncs: Arc::clone(&self.syncs),
        }))
    }
    fn read(&self, seq: u64) -> std::io::Result<Vec<u8>> {
        self.inner.read(seq)
    }
    fn truncate(&self, seq: u64, len: u64) -> std::io::Result<()> {
        self.inner.truncate(seq, len)
    }
    fn remove(&self, seq: u64) -> std::io::Result<()> {
        self.inner.remove(seq)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

#[test]
fn with_f0_concurrent_puts_share_fsyncs() {
    const CONNECTIONS: usize = 16;
    const PER: usize = 30;
    let tmp = TempDir::new("wal-group");
    let syncs = Arc::new(AtomicU64::new(0));
    let config = log_config(tmp.path(), 1 << 20, FsyncPolicy::Always);
    let dir = Arc::new(CountingDir {
        inner: FsDir::new(tmp.path()),
        syncs: Arc::clone(&syncs),
    });
    let mut server = CustomServer::start(&config, dir);
    let addr = server.addr;
    let mut want = BTreeMap::new();

    // One connection: every acknowledged put had an fsync of its own.
    let mut c = Client::connect(addr);
    want.insert(c.put(1, 0, 60, b"warm-up"), b"warm-up".to_vec());
    let at = syncs.load(Ordering::SeqCst);
    for i in 0..PER {
        let body = format!("alone {i}").into_bytes();
        want.insert(c.put(1, 0, 60, &body), body);
    }
    let alone = syncs.load(Ordering::SeqCst) - at;
    assert!(alone >= PER as u64, "{alone} fsyncs for {PER} puts");

    // Many connections: one fsync covers the puts queued meanwhile.
    let barrier = Arc::new(Barrier::new(CONNECTIONS));
    let at = syncs.load(Ordering::SeqCst);
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|t| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                barrier.wait();
                (0..PER)
                    .map(|i| {
                        let body = format!("conn {t} job {i}").into_bytes();
                        (c.put(1, 0, 60, &body), body)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for t in threads {
        want.extend(t.join().expect("putter"));
    }
    let shared = syncs.load(Ordering::SeqCst) - at;
    let puts = (CONNECTIONS * PER) as u64;
    assert!(
        shared * 4 <= puts,
        "{shared} fsyncs for {puts} puts from {CONNECTIONS} connections"
    );
    drop(c);
    server.stop();
    check_after_restart(tmp.path(), &want);
}

/// What [`GatedDir::create`] does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Wait for the test to choose.
    Closed,
    /// Fail as on a full disk.
    Full,
    /// Create the segment.
    Open,
}

/// A real directory whose segments are made only when the test lets them be.
struct GatedDir {
    inner: FsDir,
    /// A std mutex and condvar: `create` runs on the writer thread, which blocks
    /// on it until the test thread changes the gate.
    gate: Arc<(Mutex<Gate>, Condvar)>,
}

fn set_gate(gate: &(Mutex<Gate>, Condvar), to: Gate) {
    *gate.0.lock().unwrap_or_else(PoisonError::into_inner) = to;
    gate.1.notify_all();
}

impl LogDir for GatedDir {
    fn segments(&self) -> std::io::Result<Vec<u64>> {
        self.inner.segments()
    }
    fn create(&self, seq: u64, size: u64) -> std::io::Result<Box<dyn SegmentFile>> {
        let (lock, changed) = &*self.gate;
        let mut gate = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while *gate == Gate::Closed {
            gate = changed.wait(gate).unwrap_or_else(PoisonError::into_inner);
        }
        if *gate == Gate::Full {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.inner.create(seq, size)
    }
    fn read(&self, seq: u64) -> std::io::Result<Vec<u8>> {
        self.inner.read(seq)
    }
    fn truncate(&self, seq: u64, len: u64) -> std::io::Result<()> {
        self.inner.truncate(seq, len)
    }
    fn remove(&self, seq: u64) -> std::io::Result<()> {
        self.inner.remove(seq)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// Opens the gate when dropped, also on a failure: a writer thread blocked in
/// `create` could not be stopped.
struct OpenGate(Arc<(Mutex<Gate>, Condvar)>);

impl Drop for OpenGate {
    fn drop(&mut self) {
        set_gate(&self.0, Gate::Open);
    }
}

/// After a start the segment records go to is made by the writer thread. A put
/// that comes while it is still being made must not be let in on space that is
/// not there yet: on a full disk it is refused (not left waiting for a reply
/// until there is room), and puts are accepted once there is room.
#[test]
fn a_put_before_the_first_segment_is_made_is_refused_on_a_full_disk() {
    let tmp = TempDir::new("wal-first-segment");
    let gate = Arc::new((Mutex::new(Gate::Closed), Condvar::new()));
    let dir = Arc::new(GatedDir {
        inner: FsDir::new(tmp.path()),
        gate: Arc::clone(&gate),
    });
    let mut server = CustomServer::start(&log_config(tmp.path(), 8192, FsyncPolicy::Always), dir);
    let open_gate = OpenGate(Arc::clone(&gate));
    let mut c = Client::connect(server.addr);
    c.send(b"put 1 0 60 5\r\nfirst\r\n");
    // The put has been dealt with (let in, or refused) while the segment is
    // still being made; then the disk turns out to be full.
    let mut other = Client::connect(server.addr);
    assert!(eventually(Duration::from_secs(10), || {
        num(&other.stats(), "cmd-put") == 1
    }));
    set_gate(&gate, Gate::Full);
    c.set_read_timeout(Duration::from_secs(10));
    assert_eq!(
        c.try_line().as_deref(),
        Some("OUT_OF_MEMORY\r\n"),
        "a put taken in before its segment existed waits while the disk is full"
    );

    drop(open_gate);
    let mut want = BTreeMap::new();
    assert!(eventually(Duration::from_secs(10), || {
        inserted(&c.put_raw(1, 0, 60, b"again")).is_some_and(|id| {
            want.insert(id, b"again".to_vec());
            true
        })
    }));
    drop((c, other));
    server.stop();
    check_after_restart(tmp.path(), &want);
}

/// On a full disk, reserve/release cycles must not eat the space reserved for the
/// deletes of live jobs: releases are refused with OUT_OF_MEMORY once the log has no
/// room for them (reserve records are left out), no reply hangs, and every delete
/// still succeeds.
#[test]
fn on_a_full_disk_state_changes_do_not_use_up_the_space_of_deletes() {
    let tmp = TempDir::new("wal-full-churn");
    let faults = Arc::new(Faults::default());
    let (server, addr) = start(faulty(tmp.path(), 16 * 1024, FsyncPolicy::Always, &faults));
    // Dropped first, also on a failure: a stuck writer could not be stopped.
    let _room_again = RoomAgain(Arc::clone(&faults));
    let mut c = Client::connect(addr);
    let body = vec![b'b'; 500];
    let mut live: Vec<u64> = (0..10).map(|_| c.put(1, 0, 60, &body)).collect();
    faults.disk_full.store(true, Ordering::SeqCst);
    while let Some(id) = inserted(&c.put_raw(1, 0, 60, &body)) {
        live.push(id);
    }
    c.set_read_timeout(Duration::from_secs(3));
    let job = live[0];
    for i in 0..1000 {
        c.send(format!("reserve-job {job}\r\n").as_bytes());
        let Some(line) = c.try_line() else {
            panic!("no reply to reserve {i}")
        };
        if line == "OUT_OF_MEMORY\r\n" {
            break;
        }
        c.body(body.len());
        c.send(format!("release {job} 1 0\r\n").as_bytes());
        match c.try_line().as_deref() {
            Some("RELEASED\r\n") => {}
            Some("OUT_OF_MEMORY\r\n") => break,
            other => panic!("release {i}: {other:?}"),
        }
    }
    for id in live {
        c.send(format!("delete {id}\r\n").as_bytes());
        assert_eq!(c.try_line().as_deref(), Some("DELETED\r\n"), "delete {id}");
    }
    drop(c);
    drop(_room_again);
    stop(server);
}

/// Ends a simulated full disk when dropped.
struct RoomAgain(Arc<Faults>);

impl Drop for RoomAgain {
    fn drop(&mut self) {
        self.0.disk_full.store(false, Ordering::SeqCst);
    }
}
