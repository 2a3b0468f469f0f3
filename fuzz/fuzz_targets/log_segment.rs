//! Recovery, dump and the record decoder on one arbitrary segment, as the
//! newest of a log (torn tails) or followed by a valid one (corruption).
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use beanpole_engine::wal::format::{Header, Record, HEADER_LEN};
use beanpole_engine::wal::fs::{segment_name, FsDir};
use beanpole_engine::wal::recover::recover;
use beanpole_engine::wal::tools;
use libfuzzer_sys::fuzz_target;

fn scratch() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "beanpole-fuzz-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fuzz_target!(|data: &[u8]| {
    let mut at = HEADER_LEN.min(data.len());
    while let Some(Ok(Some((_, n)))) = data.get(at..).map(Record::decode) {
        at += n;
    }
    let dir = scratch();
    let mut segment = Header { seq: 1, next_id: 1, created: 0 }.encode().to_vec();
    segment.extend_from_slice(data.get(HEADER_LEN..).unwrap_or(data));
    std::fs::write(dir.join(segment_name(1)), &segment).expect("write");
    if data.first().is_some_and(|b| b & 1 == 1) {
        let mut next = Header { seq: 2, next_id: 1, created: 0 }.encode().to_vec();
        Record::Delete { id: 1 }.encode(&mut next);
        std::fs::write(dir.join(segment_name(2)), &next).expect("write");
    }
    let _ = tools::dump(&dir);
    let _ = recover(&FsDir::new(&dir), true);
    let _ = recover(&FsDir::new(&dir), false);
    let _ = std::fs::remove_dir_all(&dir);
});
