//! The write-ahead log: beanpole's own segment format ([`format`]) and its
//! in-place decoding ([`decode`]), the file layer with fault injection ([`fs`])
//! and read-only mapped segments ([`mapped`]), group commit ([`pipe`], with the
//! slow work on the [`writer`] thread), recovery ([`recover`], with the live-job
//! set in `live`), a cluster's replica of the committed state ([`replica`]),
//! the hand-over of a cluster leader's records ([`replicate`]), offline tools
//! ([`tools`]) and the reader of beanstalkd's binlog
//! directories ([`import`]).
//!
//! [`open`] locks a directory, refuses a beanstalkd binlog directory (pointing at
//! `beanpole binlog import`), replays what is there and starts the writer thread.
//! The store then journals every change that matters after a restart and queues
//! its records batch by batch; see `store/log.rs` and `pipe.rs`.

pub mod buffers;
pub mod columns;
pub mod decode;
pub mod format;
pub mod fs;
pub mod fsync;
pub mod import;
pub mod instance;
mod live;
pub mod mapped;
pub mod pipe;
pub mod recover;
pub mod replica;
pub mod replicate;
pub mod session;
pub mod table;
pub mod tools;
pub mod writer;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;

use self::fs::{DirLock, FsDir, LogDir};
pub use self::fsync::FsyncPolicy;
use self::pipe::LogPipe;
use self::recover::{RecoverError, Recovered};
use self::writer::Writer;

/// beanstalkd's default segment size, 10 MiB.
pub const DEFAULT_SEGMENT_SIZE: u64 = 10 * 1024 * 1024;
/// beanstalkd's default `-f`: fsync at most every 50 ms.
pub const DEFAULT_FSYNC: FsyncPolicy = FsyncPolicy::Every(Duration::from_millis(50));

/// How the log is set up (`-b`, `-f`/`-F`, `-s`).
#[derive(Debug, Clone)]
pub struct LogConfig {
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// Bytes per segment; rounded up to a multiple of 4096, and raised when needed
    /// so that a job of the maximum size fits in one segment.
    pub segment_size: u64,
    /// Skip corrupt records in the middle of a segment instead of refusing to start.
    pub skip_corrupt: bool,
    /// Inject these faults into the log's file operations (tests only; the files
    /// are still real).
    pub faults: Option<Arc<fs::Faults>>,
}

impl LogConfig {
    pub fn new(dir: impl Into<PathBuf>) -> LogConfig {
        LogConfig {
            dir: dir.into(),
            fsync: DEFAULT_FSYNC,
            segment_size: DEFAULT_SEGMENT_SIZE,
            skip_corrupt: false,
            faults: None,
        }
    }

    /// The segment size actually used for jobs of at most `max_job_size` bytes.
    pub fn effective_segment_size(&self, max_job_size: u32) -> u64 {
        let needed = format::job_record_len(crate::protocol::MAX_TUBE_NAME, max_job_size as usize)
            as u64
            + format::HEADER_LEN as u64
            + 4096;
        self.segment_size.max(needed).div_ceil(4096) * 4096
    }
}

/// Why a log could not be opened.
#[derive(Debug, Error)]
pub enum LogError {
    #[error("cannot use log directory {dir}: {source}")]
    Io { dir: String, source: std::io::Error },
    #[error(
        "{dir} holds beanstalkd binlog files, which beanpole does not read in place; \
         convert them with `beanpole binlog import {dir} NEW_DIR` and start with -b NEW_DIR"
    )]
    BeanstalkdDir { dir: String },
    #[error(transparent)]
    Recover(#[from] RecoverError),
}

/// An opened log: what was recovered, and the running writer.
#[derive(Debug)]
pub struct OpenedLog {
    pub recovered: Recovered,
    pub pipe: Arc<LogPipe>,
    /// The segment new records go to (a fresh one after every start).
    pub first_seq: u64,
    pub segment_size: u64,
    /// The next job id, kept current by the store, written into new segment headers.
    pub next_id_hint: Arc<AtomicU64>,
    pub writer: Option<JoinHandle<()>>,
    /// The identity of the directory's job-id space (see [`instance`]).
    pub instance: String,
    /// Wall ns the store's times may not start before (a cluster's replicated
    /// clock; 0 for a log directory).
    pub clock_floor: i64,
    /// The directory's lock (none for a replicated store, whose node holds it).
    _lock: Option<DirLock>,
}

/// Open (creating if needed) the log directory and start its writer thread.
pub fn open(config: &LogConfig, max_job_size: u32) -> Result<OpenedLog, LogError> {
    let dir: Arc<dyn LogDir> = match &config.faults {
        Some(faults) => Arc::new(fs::FaultyDir::new(&config.dir, Arc::clone(faults))),
        None => Arc::new(FsDir::new(&config.dir)),
    };
    open_in(config, max_job_size, dir)
}

/// [`open`] on a given directory implementation (tests pass a faulty one).
pub fn open_in(
    config: &LogConfig,
    max_job_size: u32,
    dir: Arc<dyn LogDir>,
) -> Result<OpenedLog, LogError> {
    let name = config.dir.display().to_string();
    let io = |source| LogError::Io {
        dir: name.clone(),
        source,
    };
    std::fs::create_dir_all(&config.dir).map_err(io)?;
    if import::is_beanstalkd_dir(&config.dir) {
        return Err(LogError::BeanstalkdDir { dir: name });
    }
    let lock = DirLock::acquire(&config.dir).map_err(io)?;
    let recovered = recover::recover(dir.as_ref(), config.skip_corrupt)?;
    let instance =
        instance::load_or_create(&config.dir, recovered.segments.is_empty()).map_err(io)?;
    for w in &recovered.warnings {
        eprintln!("beanpole: log {name}: {w}");
    }
    let first_seq = recovered.segments.last().map_or(1, |&(seq, _)| seq + 1);
    let segment_size = config.effective_segment_size(max_job_size);
    let pipe = Arc::new(LogPipe::new(config.fsync, name.clone()));
    pipe.created
        .store(first_seq - 1, std::sync::atomic::Ordering::Relaxed);
    pipe.current
        .store(first_seq, std::sync::atomic::Ordering::Relaxed);
    let next_id_hint = Arc::new(AtomicU64::new(recovered.next_id));
    let writer = Writer::new(
        dir,
        Arc::clone(&pipe),
        segment_size,
        Arc::clone(&next_id_hint),
    );
    let handle = std::thread::Builder::new()
        .name("beanpole-log".into())
        .spawn(move || writer.run())
        .map_err(io)?;
    Ok(OpenedLog {
        recovered,
        pipe,
        first_seq,
        segment_size,
        next_id_hint,
        writer: Some(handle),
        instance,
        clock_floor: 0,
        _lock: Some(lock),
    })
}
