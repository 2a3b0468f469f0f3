//! Unit tests of the pipe on real segment files.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::wal::fs::{FsDir, LogDir};

fn write(seq: u64, offset: u64, bytes: &[u8], end: u64) -> Task {
    Task::Write {
        seq,
        offset,
        bytes: bytes.to_vec(),
        end,
    }
}

/// A pipe with `policy` whose segment 1 (of `size` bytes) is made in `dir`.
fn pipe_on(dir: &dyn LogDir, policy: FsyncPolicy, size: u64) -> LogPipe {
    let pipe = LogPipe::new(policy, "test".into());
    let file = dir.create(1, size).expect("segment");
    pipe.lock_core().files.insert(1, Arc::from(file));
    pipe
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("beanpole-pipe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn queued_writes_are_written_by_the_caller() {
    let path = temp_dir("merge");
    let dir = FsDir::new(&path);
    let pipe = pipe_on(&dir, FsyncPolicy::Every(Duration::from_secs(60)), 8192);
    pipe.submit([write(1, 100, b"abc", 3)]);
    pipe.submit([write(1, 103, b"def", 6)]);
    // Not contiguous: a separate write; segment 2 does not exist yet.
    pipe.submit([write(1, 200, b"xyz", 9), write(2, 64, b"later", 14)]);
    assert_eq!(lock(&pipe.queue).len(), 4);
    assert_eq!(pipe.acked(), 0);
    assert!(pipe.write_through(9), "written from this thread");
    assert_eq!(pipe.acked(), 9);
    assert!(!pipe.write_through(14), "segment 2 is the writer thread's");
    let left = pipe.take_queue();
    assert!(matches!(left.as_slice(), [Task::Write { seq: 2, .. }]));
    let bytes = dir.read(1).expect("read");
    assert_eq!(&bytes[100..106], b"abcdef");
    assert_eq!(&bytes[200..203], b"xyz");
    let core = pipe.lock_core();
    assert_eq!(core.written, 9);
    assert_eq!(core.unsynced.len(), 3, "kept until the periodic fsync");
    drop(core);
    let _ = std::fs::remove_dir_all(&path);
}

#[test]
fn with_f0_the_caller_syncs_unless_an_fsync_is_running() {
    let path = temp_dir("f0");
    let dir = FsDir::new(&path);
    let pipe = pipe_on(&dir, FsyncPolicy::Always, 8192);
    pipe.submit([write(1, 64, b"job", 3)]);
    // Another fsync is running: its owner or the writer thread acknowledges.
    let turn = lock(&pipe.sync_turn);
    assert!(!pipe.write_through(3));
    assert_eq!((pipe.written(), pipe.acked()), (3, 0));
    drop(turn);
    assert!(pipe.write_through(3), "synced on this thread");
    assert_eq!(pipe.acked(), 3);
    assert!(pipe.lock_core().unsynced.is_empty());
    let _ = std::fs::remove_dir_all(&path);
}

#[test]
fn buffers_come_back_to_the_pool_once_their_records_are_synced() {
    let path = temp_dir("recycle");
    let dir = FsDir::new(&path);
    let pipe = pipe_on(&dir, FsyncPolicy::Always, 1 << 16);
    let mut bytes = pipe.buffers.take(8192);
    bytes.extend_from_slice(&[7; 5000]);
    let capacity = bytes.capacity();
    pipe.submit([Task::Write {
        seq: 1,
        offset: 64,
        bytes,
        end: 5000,
    }]);
    assert_eq!(pipe.buffers.kept_bytes(), 0);
    assert!(pipe.write_through(5000), "written and synced here");
    assert_eq!(pipe.buffers.kept_bytes(), capacity, "back once synced");
    let again = pipe.buffers.take(4096);
    assert!(again.is_empty() && again.capacity() == capacity);
    let _ = std::fs::remove_dir_all(&path);
}

#[test]
fn with_f0_a_failed_fsync_is_left_to_the_writer_with_its_data() {
    use crate::wal::fs::{Faults, FaultyDir};
    let path = temp_dir("f0-fail");
    let faults = Arc::new(Faults::default());
    let dir = FaultyDir::new(&path, Arc::clone(&faults));
    let pipe = pipe_on(&dir, FsyncPolicy::Always, 8192);
    faults.fail_syncs.store(1, Ordering::SeqCst);
    pipe.submit([write(1, 64, b"job", 3)]);
    assert!(!pipe.write_through(3));
    assert_eq!(pipe.acked(), 0, "nothing acknowledged without a good fsync");
    assert!(pipe.failing());
    assert!(pipe.rewrite.load(Ordering::SeqCst));
    assert_eq!(
        pipe.take_failed().len(),
        1,
        "the data is kept to write again"
    );
    let _ = std::fs::remove_dir_all(&path);
}

#[test]
fn a_failure_is_cleared_only_by_its_own_cause_working_again() {
    let pipe = LogPipe::new(FsyncPolicy::Never, "test".into());
    let hub = Arc::new(crate::events::EventHub::new(0));
    let stream = hub.subscribe(16);
    hub.set_kinds(&[
        crate::events::EventKind::LogError,
        crate::events::EventKind::LogRecovered,
    ]);
    pipe.set_events(Arc::clone(&hub));
    pipe.report(Failure::Space, "no room");
    pipe.report(Failure::Sync, "fsync failed");
    pipe.clear_failure(&[Failure::Write, Failure::Sync]);
    assert!(
        pipe.failing(),
        "a good fsync does not make room on the disk"
    );
    pipe.clear_failure(&[Failure::Space]);
    assert!(!pipe.failing());
    hub.close();
    let crate::events::Batch::Events(events) = stream.next_batch(16, Some(Duration::ZERO)) else {
        panic!("expected events");
    };
    let kinds: Vec<_> = events.iter().map(|e| e.kind.name()).collect();
    assert_eq!(
        kinds,
        ["log-error", "log-recovered"],
        "one of each, no flapping"
    );
    assert_eq!(events[0].detail.as_deref(), Some("no room"));
}
