//! Compaction of the write-ahead log on real files: a long-lived job does not pin
//! old segments, buried order and counters survive migration, a segment is never
//! removed before the copies moved out of it are durable, and the `binlog-*` stats
//! and stats-job `file` agree with the files on disk.

mod wal_util;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beanpole_engine::wal::format::{Header, Record, HEADER_LEN};
use beanpole_engine::wal::fs::{segment_name, FsDir, LogDir, SegmentFile};
use beanpole_engine::wal::recover::recover;
use beanpole_engine::wal::FsyncPolicy;
use wal_util::*;

const SEGMENT: u64 = 8192;
const EVERY_50MS: FsyncPolicy = FsyncPolicy::Every(Duration::from_millis(50));
/// The stats-job fields that must survive migration and restart.
const KEPT: [&str; 11] = [
    "id", "tube", "state", "pri", "delay", "ttr", "reserves", "timeouts", "releases", "buries",
    "kicks",
];

/// Put and delete `n` jobs of `size` bytes.
fn churn(c: &mut Client, n: usize, size: usize) {
    let body = vec![b'c'; size];
    for _ in 0..n {
        let id = c.put(100, 0, 60, &body);
        assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
    }
}

/// Every record of every segment in `dir`, in log order: (segment, record).
fn all_records(dir: &Path) -> Vec<(u64, Record)> {
    let mut out = Vec::new();
    for (seq, _) in segment_files(dir) {
        let Ok(bytes) = std::fs::read(dir.join(segment_name(seq))) else {
            continue; // removed meanwhile
        };
        if Header::decode(&bytes).is_err() {
            continue;
        }
        let mut at = HEADER_LEN;
        while let Ok(Some((record, n))) = Record::decode(&bytes[at..]) {
            out.push((seq, record));
            at += n;
        }
    }
    out
}

/// The segment holding the latest snapshot of each job.
fn homes(dir: &Path) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for (seq, record) in all_records(dir) {
        match record {
            Record::Job(j) => {
                out.insert(j.fields.id, seq);
            }
            Record::Delete { id } => {
                out.remove(&id);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn a_long_lived_job_does_not_pin_the_directory() {
    let tmp = TempDir::new("wal-pin");
    let config = log_config(tmp.path(), SEGMENT, EVERY_50MS);
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    c.use_tube("keep");
    let keep = c.put(3, 0, 60, b"the long-lived job");
    assert!(c
        .cmd(&format!("reserve-job {keep}"))
        .starts_with("RESERVED"));
    c.body(18);
    assert_eq!(c.cmd(&format!("release {keep} 4 0")), "RELEASED\r\n");
    assert!(c
        .cmd(&format!("reserve-job {keep}"))
        .starts_with("RESERVED"));
    c.body(18);
    assert_eq!(c.cmd(&format!("bury {keep} 5")), "BURIED\r\n");
    assert_eq!(c.cmd(&format!("kick-job {keep}")), "KICKED\r\n");
    let first_file = num(&c.stats_job(keep).expect("job"), "file");
    c.use_tube("churn");
    let mut most = 0;
    for _ in 0..40 {
        churn(&mut c, 50, 300);
        most = most.max(segment_files(tmp.path()).len());
    }
    // Compaction runs a bounded step per batch of commands; a few more let it finish.
    let mut stats = BTreeMap::new();
    assert!(
        eventually(Duration::from_secs(5), || {
            stats = c.stats();
            segment_files(tmp.path()).len() <= 2
        }),
        "{:?}",
        segment_files(tmp.path())
    );
    let files = segment_files(tmp.path());
    let bytes: u64 = files.iter().map(|f| f.1).sum();
    let live = (8 + 1 + 8 + 12 + 1 + 24 + 20 + 2 + 4 + 4 + 18) as u64;
    // At most twice the live data plus one segment, and one preallocated spare.
    assert!(bytes <= 2 * live + 2 * SEGMENT, "{files:?}");
    assert!(most <= 4, "{most} segments at once during the stream");
    assert!(num(&stats, "binlog-records-migrated") > 0, "{stats:?}");
    let job = c.stats_job(keep).expect("job");
    assert_ne!(num(&job, "file"), first_file, "the job was moved");
    assert!(files.iter().any(|f| f.0 == num(&job, "file")));
    drop(c);
    stop(server);

    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    let after = c.stats_job(keep).expect("the long-lived job survived");
    for key in KEPT {
        assert_eq!(after[key], job[key], "{key}");
    }
    assert_eq!(after["state"], "ready");
    assert_eq!(after["reserves"], "2");
    assert_eq!(
        c.peek(&format!("peek {keep}")).expect("body").1,
        b"the long-lived job"
    );
    drop(c);
    stop(server);
}

#[test]
fn buried_order_and_counters_survive_migration_and_restart() {
    let tmp = TempDir::new("wal-buried");
    let config = log_config(tmp.path(), SEGMENT, EVERY_50MS);
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    c.use_tube("graves");
    let ids: Vec<u64> = (0..5)
        .map(|i| c.put(10 + i, 0, 60, format!("buried {i}").as_bytes()))
        .collect();
    let order = [ids[3], ids[1], ids[4], ids[0], ids[2]];
    for (n, &id) in order.iter().enumerate() {
        assert!(c.cmd(&format!("reserve-job {id}")).starts_with("RESERVED"));
        c.body(8);
        if n % 2 == 0 {
            // Some with more history.
            assert_eq!(c.cmd(&format!("release {id} 20 0")), "RELEASED\r\n");
            assert!(c.cmd(&format!("reserve-job {id}")).starts_with("RESERVED"));
            c.body(8);
        }
        assert_eq!(c.cmd(&format!("bury {id} {}", 30 + n)), "BURIED\r\n");
    }
    let first: BTreeMap<u64, u64> = ids
        .iter()
        .map(|&id| (id, num(&c.stats_job(id).expect("job"), "file")))
        .collect();
    c.use_tube("churn");
    churn(&mut c, 600, 300);
    let mut before = BTreeMap::new();
    assert!(eventually(Duration::from_secs(5), || {
        c.stats();
        ids.iter()
            .all(|&id| num(&c.stats_job(id).expect("job"), "file") != first[&id])
    }));
    for &id in &ids {
        before.insert(id, c.stats_job(id).expect("job"));
    }
    assert!(num(&c.stats(), "binlog-records-migrated") >= ids.len() as u64);
    drop(c);
    stop(server);

    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    for (&id, old) in &before {
        let new = c.stats_job(id).expect("job");
        for key in KEPT {
            assert_eq!(new[key], old[key], "job {id}: {key}");
        }
        assert_eq!(new["state"], "buried");
    }
    c.use_tube("graves");
    for &id in &order {
        let (peeked, body) = c.peek("peek-buried").expect("buried");
        assert_eq!(peeked, id);
        assert_eq!(
            body,
            format!("buried {}", ids.iter().position(|&x| x == id).expect("id")).into_bytes()
        );
        assert_eq!(c.cmd("kick 1"), "KICKED 1\r\n");
    }
    assert_eq!(c.peek("peek-buried"), None);
    drop(c);
    stop(server);
}

/// Keeps every write in memory until its segment is synced, as a disk's cache
/// would across a power cut; so the files always hold exactly what a power cut
/// would leave. When a segment is removed while other segments still have
/// unsynced writes, it copies the directory: the state a power cut right after the
/// removal would leave.
struct PowerCutDir {
    inner: FsDir,
    unsynced: Arc<AtomicU64>,
    cuts: Arc<Mutex<Vec<PathBuf>>>,
    cut_root: PathBuf,
    removes: Arc<AtomicU64>,
}

struct PowerCutSegment {
    inner: Box<dyn SegmentFile>,
    /// Writes not yet synced. A mutex: writes and syncs may come from different
    /// threads at once.
    pending: Mutex<Vec<(u64, Vec<u8>)>>,
    unsynced: Arc<AtomicU64>,
}

impl SegmentFile for PowerCutSegment {
    fn write_all_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut pending = self.pending.lock().expect("pending");
        if pending.is_empty() {
            self.unsynced.fetch_add(1, Ordering::SeqCst);
        }
        pending.push((offset, data.to_vec()));
        Ok(())
    }

    fn sync(&self) -> std::io::Result<()> {
        let mut pending = self.pending.lock().expect("pending");
        if !pending.is_empty() {
            for (offset, data) in std::mem::take(&mut *pending) {
                self.inner.write_all_at(offset, &data)?;
            }
            self.unsynced.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.sync()
    }
}

impl Drop for PowerCutSegment {
    fn drop(&mut self) {
        if !self.pending.get_mut().expect("pending").is_empty() {
            self.unsynced.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl LogDir for PowerCutDir {
    fn segments(&self) -> std::io::Result<Vec<u64>> {
        self.inner.segments()
    }
    fn create(&self, seq: u64, size: u64) -> std::io::Result<Box<dyn SegmentFile>> {
        Ok(Box::new(PowerCutSegment {
            inner: self.inner.create(seq, size)?,
            pending: Mutex::new(Vec::new()),
            unsynced: Arc::clone(&self.unsynced),
        }))
    }
    fn read(&self, seq: u64) -> std::io::Result<Vec<u8>> {
        self.inner.read(seq)
    }
    fn truncate(&self, seq: u64, len: u64) -> std::io::Result<()> {
        self.inner.truncate(seq, len)
    }
    fn remove(&self, seq: u64) -> std::io::Result<()> {
        self.inner.remove(seq)?;
        self.removes.fetch_add(1, Ordering::SeqCst);
        if self.unsynced.load(Ordering::SeqCst) > 0 {
            let mut cuts = self.cuts.lock().expect("cuts");
            if cuts.len() < 3 {
                let to = self.cut_root.join(format!("cut{}", cuts.len()));
                copy_dir(self.inner.path(), &to);
                cuts.push(to);
            }
        }
        Ok(())
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// Compaction moves a long-lived job forward and then removes its old segment; a
/// power cut in between must not lose the job, with -f 0 or -f 50.
#[test]
fn a_segment_is_removed_only_once_what_was_moved_out_of_it_is_durable() {
    for policy in [FsyncPolicy::Always, EVERY_50MS] {
        let tmp = TempDir::new("wal-powercut");
        let dir_path = tmp.sub("log");
        std::fs::create_dir_all(&dir_path).expect("mkdir");
        let cuts = Arc::new(Mutex::new(Vec::new()));
        let removes = Arc::new(AtomicU64::new(0));
        let unsynced = Arc::new(AtomicU64::new(0));
        let dir = Arc::new(PowerCutDir {
            inner: FsDir::new(&dir_path),
            unsynced: Arc::clone(&unsynced),
            cuts: Arc::clone(&cuts),
            cut_root: tmp.path().to_owned(),
            removes: Arc::clone(&removes),
        });
        let config = log_config(&dir_path, SEGMENT, policy);
        let mut server = CustomServer::start(&config, dir);
        let mut c = Client::connect(server.addr);
        let keep = c.put(1, 0, 60, b"keep me");
        // Wait for the fsync that covers it (at once with -f 0, on the timer with -f 50).
        assert!(
            eventually(Duration::from_secs(5), || unsynced.load(Ordering::SeqCst)
                == 0),
            "{policy:?}: the first put was never synced"
        );
        // Several clients, so that batches queue up behind each other.
        let churners: Vec<_> = (0..4)
            .map(|_| {
                let addr = server.addr;
                std::thread::spawn(move || churn(&mut Client::connect(addr), 150, 300))
            })
            .collect();
        for t in churners {
            t.join().expect("churn");
        }
        c.stats();
        drop(c);
        server.stop();
        assert!(
            removes.load(Ordering::SeqCst) > 0,
            "{policy:?}: nothing was compacted"
        );
        for cut in cuts.lock().expect("cuts").iter() {
            let rec = recover(&FsDir::new(cut), false).expect("recover");
            assert!(
                rec.jobs.iter().any(|r| r.fields.id == keep),
                "{policy:?}: a power cut right after a segment was removed lost job {keep}"
            );
        }
        let rec = recover(&FsDir::new(&dir_path), false).expect("recover");
        assert!(rec.jobs.iter().any(|r| r.fields.id == keep));
    }
}

#[test]
fn binlog_stats_and_job_files_agree_with_the_files_on_disk() {
    let tmp = TempDir::new("wal-stats");
    let config = log_config(tmp.path(), SEGMENT, EVERY_50MS);
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    let ids: Vec<u64> = (0..80)
        .map(|i| c.put(1, 0, 60, format!("{i:0>250}").as_bytes()))
        .collect();

    let check = |c: &mut Client, expect_written: Option<u64>| {
        // Removals by compaction reach the disk shortly after the reply.
        let mut last = String::new();
        let ok = eventually(Duration::from_secs(5), || {
            let stats = c.stats();
            let files = segment_files(tmp.path());
            let seqs: BTreeSet<u64> = files.iter().map(|f| f.0).collect();
            let oldest = num(&stats, "binlog-oldest-index");
            let current = num(&stats, "binlog-current-index");
            let records = all_records(tmp.path());
            let newest_data = records.iter().map(|r| r.0).max().unwrap_or(0);
            let homes = homes(tmp.path());
            let mut problems = Vec::new();
            if seqs.first() != Some(&oldest) {
                problems.push(format!("oldest {oldest} but files {seqs:?}"));
            }
            if !(oldest..=current).all(|s| seqs.contains(&s)) || newest_data != current {
                problems.push(format!(
                    "current {current}, files {seqs:?}, data up to {newest_data}"
                ));
            }
            if files.iter().any(|f| f.1 != num(&stats, "binlog-max-size")) {
                problems.push(format!(
                    "max size {} but {files:?}",
                    stats["binlog-max-size"]
                ));
            }
            if seqs.iter().any(|&s| s > current + 1) {
                problems.push(format!("more than one spare: {seqs:?} after {current}"));
            }
            if let Some(n) = expect_written {
                if num(&stats, "binlog-records-written") != n {
                    problems.push(format!(
                        "{} records written, {n} on disk",
                        stats["binlog-records-written"]
                    ));
                }
            }
            for (&id, &home) in &homes {
                let file = c.stats_job(id).map(|j| num(&j, "file"));
                if file != Some(home) {
                    problems.push(format!(
                        "job {id}: file {file:?}, latest snapshot in {home}"
                    ));
                }
            }
            last = problems.join("; ");
            problems.is_empty()
        });
        assert!(ok, "{last}");
    };

    // A first run writes every record it counts.
    let written = all_records(tmp.path()).len() as u64;
    assert!(written >= 80);
    check(&mut c, Some(written));
    assert_eq!(num(&c.stats(), "binlog-records-migrated"), 0);
    assert!(num(&c.stats(), "binlog-current-index") >= 3);

    // Deleting most jobs makes compaction move the rest and drop old segments.
    for &id in &ids[..70] {
        assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
    }
    check(&mut c, None);
    let stats = c.stats();
    assert!(num(&stats, "binlog-records-migrated") > 0, "{stats:?}");
    assert!(num(&stats, "binlog-oldest-index") > 1, "{stats:?}");
    drop(c);
    stop(server);

    // After a restart the counts start again: records-written counts what this run
    // wrote (into the segments after the old ones with records; the last run's
    // unused spares are removed at the start), migrations included.
    let old_last = all_records(tmp.path())
        .iter()
        .map(|r| r.0)
        .max()
        .expect("records");
    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    c.put(1, 0, 60, b"one more");
    check(&mut c, None);
    let mut stats = BTreeMap::new();
    let mut this_run = 0;
    let agree = eventually(Duration::from_secs(5), || {
        stats = c.stats();
        this_run = all_records(tmp.path())
            .iter()
            .filter(|r| r.0 > old_last)
            .count() as u64;
        num(&stats, "binlog-records-written") == this_run
    });
    assert!(agree, "{this_run} records on disk, stats {stats:?}");
    assert!(num(&stats, "binlog-records-migrated") >= 10, "{stats:?}");
    drop(c);
    stop(server);
}
