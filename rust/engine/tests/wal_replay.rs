//! Replay of logs shaped by churn: many tubes, most jobs deleted, old jobs moved
//! forward by compaction past newer ones (so snapshots come out of id order), and
//! tubes whose jobs are all gone. A restart must bring back exactly what was there.

mod wal_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use beanpole_engine::wal::format::{Header, Record, HEADER_LEN};
use beanpole_engine::wal::FsyncPolicy;
use wal_util::*;

const EVERY_50MS: FsyncPolicy = FsyncPolicy::Every(Duration::from_millis(50));

/// stats-job fields a restart keeps (`file` may change, and ages grow).
const KEPT: [&str; 11] = [
    "id", "tube", "state", "pri", "delay", "ttr", "reserves", "timeouts", "releases", "buries",
    "kicks",
];

/// Job snapshot ids in the order replay meets them (segment order).
fn snapshot_order(dir: &Path) -> Vec<u64> {
    let mut ids = Vec::new();
    for (seq, _) in segment_files(dir) {
        let path = dir.join(beanpole_engine::wal::fs::segment_name(seq));
        let bytes = std::fs::read(path).expect("read");
        if Header::decode(&bytes).is_err() {
            continue;
        }
        let mut at = HEADER_LEN;
        while let Ok(Some((record, n))) = Record::decode(&bytes[at..]) {
            if let Record::Job(j) = record {
                ids.push(j.fields.id);
            }
            at += n;
        }
    }
    ids
}

/// `list-tubes`, in its order (tubes come back in the order of their lowest job id).
fn list_tubes(c: &mut Client) -> Vec<String> {
    let line = c.cmd("list-tubes");
    let len: usize = line
        .strip_prefix("OK ")
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("list-tubes: {line:?}"));
    let body = String::from_utf8(c.body(len)).expect("utf8");
    body.lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(str::to_owned)
        .collect()
}

/// Everything a restart must keep: each job's stats and body, and the tubes.
type Snapshot = (
    BTreeMap<u64, (BTreeMap<String, String>, Vec<u8>)>,
    Vec<String>,
);

fn snapshot(c: &mut Client, ids: &[u64]) -> Snapshot {
    let mut jobs = BTreeMap::new();
    for &id in ids {
        let Some(stats) = c.stats_job(id) else {
            continue;
        };
        let kept = KEPT
            .iter()
            .map(|&k| (k.to_owned(), stats[k].clone()))
            .collect();
        let body = c.peek(&format!("peek {id}")).expect("body").1;
        jobs.insert(id, (kept, body));
    }
    (jobs, list_tubes(c))
}

#[test]
fn a_churned_log_with_moved_jobs_and_gone_tubes_comes_back_exactly() {
    let tmp = TempDir::new("wal-replay");
    let config = log_config(tmp.path(), 8192, EVERY_50MS);
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    let mut ids = Vec::new();
    // An old job in each of two tubes, then churn: most jobs are deleted again, so
    // compaction moves the old ones forward past the newer jobs.
    c.use_tube("old");
    let old = c.put(3, 0, 30, b"the oldest job");
    ids.push(old);
    c.use_tube("gone");
    let gone = c.put(4, 0, 30, b"deleted later");
    ids.push(gone);
    let tubes = ["alpha", "beta", "gamma"];
    let mut bury_order: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for i in 0..3000u32 {
        let tube = tubes[(i % 3) as usize];
        c.use_tube(tube);
        let body = format!("{i:0>40}");
        let id = c.put(i % 50, 0, 10 + i % 7, body.as_bytes());
        ids.push(id);
        if i % 7 != 0 {
            assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
        } else if i % 35 == 0 {
            c.watch(tube);
            let (got, _) = c.reserve().expect("a job to reserve");
            assert_eq!(c.cmd(&format!("bury {got} {}", i % 11)), "BURIED\r\n");
            assert_eq!(c.cmd(&format!("ignore {tube}")), "WATCHING 1\r\n");
            bury_order.entry(tube).or_default().push(got);
        }
    }
    assert_eq!(c.cmd(&format!("delete {gone}")), "DELETED\r\n");
    drop(c);
    let mut c = Client::connect(addr);
    let before = snapshot(&mut c, &ids);
    drop(c);
    stop(server);

    // The log really is shaped as meant: the old job's latest snapshot comes after
    // newer jobs' snapshots, and its first one is gone with its segment.
    let order = snapshot_order(tmp.path());
    let first_old = order
        .iter()
        .position(|&id| id == old)
        .expect("old job in log");
    assert!(
        order[..first_old].iter().any(|&id| id > old),
        "compaction never moved the oldest job forward"
    );
    assert!(before.0.contains_key(&old));
    assert!(!before.0.contains_key(&gone));
    assert_eq!(bury_order.len(), 3, "buried jobs in every tube");
    // (Removing "gone" moved the last tube into its place, as beanstalkd does.)
    assert_eq!(before.1, ["default", "old", "gamma", "alpha", "beta"]);

    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    let after = snapshot(&mut c, &ids);
    // The same tubes, made again in the order of their lowest job id, although
    // replay meets the old job (moved forward by compaction) after the others.
    assert_eq!(after.1, ["default", "old", "alpha", "beta", "gamma"]);
    assert_eq!(
        after.0.keys().collect::<Vec<_>>(),
        before.0.keys().collect::<Vec<_>>()
    );
    for (id, (stats, body)) in &before.0 {
        assert_eq!(&after.0[id].0, stats, "job {id}");
        assert_eq!(&after.0[id].1, body, "job {id}");
    }
    // The buried jobs kick out in the order they were buried.
    for (tube, order) in &bury_order {
        c.use_tube(tube);
        let mut kicked = Vec::new();
        while let Some((id, _)) = c.peek("peek-buried") {
            assert_eq!(c.cmd("kick 1"), "KICKED 1\r\n");
            kicked.push(id);
        }
        assert_eq!(&kicked, order, "tube {tube}");
    }
    drop(c);
    stop(server);
}
