//! Where a restart's time goes, without Python or sockets: open a log directory as
//! the server does (lock, replay, writer thread) and rebuild a store from it.
//!
//! `cargo run --release -p beanpole-engine --example restart_time DIR [ROUNDS]`
//! prints the seconds of the replay and of the store rebuild for each round. The
//! directory is left as it was: no record is written (a torn tail would be cut,
//! as at any start), and the spare segment the writer creates is removed again.

use std::path::PathBuf;
use std::time::Instant;

use beanpole_engine::store::Store;
use beanpole_engine::wal::fs::{FsDir, LogDir};
use beanpole_engine::wal::{self, LogConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: restart_time DIR [ROUNDS]")?);
    let rounds: usize = args.next().map_or(Ok(1), |r| r.parse())?;
    let fs = FsDir::new(&dir);
    let before = fs.segments()?;
    for round in 1..=rounds {
        let t0 = Instant::now();
        let mut opened = wal::open(&LogConfig::new(&dir), 65535)?;
        let replayed = t0.elapsed();
        let jobs = opened.recovered.jobs.len();
        let t1 = Instant::now();
        let mut store = Store::new(65535);
        store.attach_log(&mut opened, 1 << 60);
        let attached = t1.elapsed();
        let t2 = Instant::now();
        drop(store);
        let dropped = t2.elapsed();
        println!(
            "round {round}: {} jobs, replay {:.3} s, attach {:.3} s, total {:.3} s (drop {:.3} s)",
            jobs,
            replayed.as_secs_f64(),
            attached.as_secs_f64(),
            (replayed + attached).as_secs_f64(),
            dropped.as_secs_f64(),
        );
        opened.pipe.stop();
        if let Some(w) = opened.writer.take() {
            w.join().map_err(|_| "the writer thread panicked")?;
        }
        for seq in fs.segments()? {
            if !before.contains(&seq) {
                fs.remove(seq)?;
            }
        }
    }
    Ok(())
}
