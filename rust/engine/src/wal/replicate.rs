//! A store whose journal goes to a replicated log instead of segment files: the
//! leader of a cluster (the `beanpole-cluster` crate) runs its store this way.
//!
//! The store journals exactly as with a log directory; what changes is where a
//! pass's records go when [`LogPipe::submit`] gets them: to a [`Replicate`] sink,
//! which proposes them to the cluster and, once they are committed, raises the
//! pipe's acknowledged position ([`LogPipe::acknowledge`]). Replies wait for that
//! position as they wait for an fsync with `-f 0`. There are no segments, no
//! writer thread and no compaction: snapshots of the replicated state machine
//! take the place of compaction.
//!
//! [`opened`] makes the [`OpenedLog`] such a store is attached with, from the
//! committed state (a [`Recovered`] built from the cluster's replica).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::pipe::LogPipe;
pub use super::pipe::Replicate;
use super::recover::Recovered;
use super::OpenedLog;

/// The segment a replicated store's jobs are "in": stats-job's `file` is 0, as
/// on a server without a log (the Raft log is no beanstalkd binlog).
pub const REPLICATED_SEGMENT: u64 = 0;

/// A segment size no pass ever fills: a replicated store never moves on to a
/// next segment.
const UNBOUNDED: u64 = 1 << 62;

/// An opened log whose records go to `sink`, holding the committed state
/// `recovered` (its jobs' `home` is [`REPLICATED_SEGMENT`]). `clock` is the
/// replicated clock (wall ns): the store's times start no earlier. `instance`
/// names the job-id space (`stats`'s `id`).
pub fn opened(
    mut recovered: Recovered,
    sink: Arc<dyn Replicate>,
    clock: i64,
    instance: String,
    name: String,
) -> OpenedLog {
    for job in &mut recovered.jobs {
        job.home = REPLICATED_SEGMENT;
    }
    recovered.segments.clear();
    let pipe = Arc::new(LogPipe::replicated(sink, name));
    pipe.created.store(REPLICATED_SEGMENT, Ordering::Relaxed);
    pipe.current.store(REPLICATED_SEGMENT, Ordering::Relaxed);
    let next_id_hint = Arc::new(AtomicU64::new(recovered.next_id));
    OpenedLog {
        recovered,
        pipe,
        first_seq: REPLICATED_SEGMENT,
        segment_size: UNBOUNDED,
        next_id_hint,
        writer: None,
        instance,
        clock_floor: clock,
        _lock: None,
    }
}
