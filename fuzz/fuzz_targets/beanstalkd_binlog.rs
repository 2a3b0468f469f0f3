//! The beanstalkd binlog reader on arbitrary bytes after a version word, as the
//! last file and as an earlier one.
#![no_main]

use std::path::Path;

use beanpole_engine::wal::import::replay_beanstalkd_files;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let version: i32 = if pick & 1 == 0 { 7 } else { 5 };
    let mut file = version.to_le_bytes().to_vec();
    file.extend_from_slice(rest);
    let spare = 7i32.to_le_bytes();
    let one = [(Path::new("binlog.1"), file.as_slice())];
    let _ = replay_beanstalkd_files(&one);
    let two = [(Path::new("binlog.1"), file.as_slice()), (Path::new("binlog.2"), &spare[..])];
    let _ = replay_beanstalkd_files(&two);
});
