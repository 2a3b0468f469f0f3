//! Bytes of memory per job beyond its body: RSS (`VmRSS` in /proc/self/status)
//! before and after putting ready 100-byte jobs into a `Store`, as the memory
//! scenario of `bench/compare.py` measures it through the server.
//!
//! `cargo run --release -p beanpole-engine --example job_memory [JOBS] [churn]`:
//! JOBS defaults to 1,000,000; with `churn`, the same number of jobs is then put
//! and deleted again (one live job kept from the start) and the RSS growth that
//! churn causes is reported too. With `speed`, it times put, reserve and delete
//! instead (nanoseconds per job, store only).

use std::sync::Arc;

use beanpole_engine::store::{Store, Wakeup};
use bytes::Bytes;

const BODY: usize = 100;

#[derive(Debug)]
struct NoWake;

impl Wakeup for NoWake {
    fn wake(&self) {}
}

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn body(n: u64) -> Bytes {
    let mut b = vec![b'x'; BODY + 2];
    b[..8].copy_from_slice(&n.to_le_bytes());
    b[BODY..].copy_from_slice(b"\r\n");
    Bytes::from(b)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let jobs: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mode = args.next().unwrap_or_default();
    if mode == "speed" {
        speed(jobs);
        return;
    }
    let churn = mode == "churn";
    let mut store = Store::new(65535);
    let conn = store.connect(Arc::new(NoWake));
    let before = rss();
    let mut first = None;
    for n in 0..jobs {
        let id = store.begin_put(conn);
        first.get_or_insert(id);
        // Copied as the server copies a small body out of its read buffer.
        let b = Bytes::copy_from_slice(&body(n));
        if store.put(conn, id, 1024, 0, 60, b, 0).is_err() {
            eprintln!("put refused");
            std::process::exit(1);
        }
    }
    let after = rss();
    let per_job = (after.saturating_sub(before)) as f64 / jobs as f64;
    println!(
        "jobs {jobs}  rss before {:.1} MB  after {:.1} MB  per job {:.1} B  beyond the body {:.1} B",
        before as f64 / 1e6,
        after as f64 / 1e6,
        per_job,
        per_job - BODY as f64
    );
    if churn {
        // Delete all but the first job, then put and delete as many again.
        for id in first.unwrap_or(1) + 1..first.unwrap_or(1) + jobs {
            store.delete(conn, id);
        }
        let low = rss();
        for n in 0..jobs {
            let id = store.begin_put(conn);
            let b = Bytes::copy_from_slice(&body(n));
            if store.put(conn, id, 1024, 0, 60, b, 0).is_err() {
                std::process::exit(1);
            }
            store.delete(conn, id);
        }
        let churned = rss();
        println!(
            "churn: rss with one live job {:.1} MB, after {jobs} more put+delete {:.1} MB",
            low as f64 / 1e6,
            churned as f64 / 1e6
        );
    }
}

/// Put `jobs` jobs, then reserve and delete them all, and report the time per job.
fn speed(jobs: u64) {
    use beanpole_engine::store::{Delivery, ReserveOutcome};
    let mut store = Store::new(65535);
    let conn = store.connect(Arc::new(NoWake));
    let bodies: Vec<Bytes> = (0..jobs)
        .map(|n| Bytes::copy_from_slice(&body(n)))
        .collect();
    let t = std::time::Instant::now();
    for b in bodies {
        let id = store.begin_put(conn);
        let _ = store.put(conn, id, 1024, 0, 60, b, 0);
    }
    let put = t.elapsed();
    let t = std::time::Instant::now();
    for _ in 0..jobs {
        match store.reserve(conn, Some(0), 0) {
            ReserveOutcome::Now(Delivery::Reserved { id, body }) => {
                std::hint::black_box(&body);
                store.delete(conn, id);
            }
            _ => std::process::exit(1),
        }
    }
    let rd = t.elapsed();
    // Interleaved: one put, one reserve, one delete (the rt pattern).
    let t = std::time::Instant::now();
    for n in 0..jobs {
        let id = store.begin_put(conn);
        let _ = store.put(conn, id, 1024, 0, 60, Bytes::copy_from_slice(&body(n)), 0);
        if let ReserveOutcome::Now(Delivery::Reserved { id, body }) =
            store.reserve(conn, Some(0), 0)
        {
            std::hint::black_box(&body);
            store.delete(conn, id);
        }
    }
    let cycle = t.elapsed();
    let per = |d: std::time::Duration| d.as_nanos() as f64 / jobs as f64;
    println!(
        "ns per job: put {:.0}, reserve+delete {:.0}, put+reserve+delete {:.0}",
        per(put),
        per(rd),
        per(cycle)
    );
}
