//! The leader's records on their way into the Raft log: the store's
//! [`Replicate`] sink ([`Proposals`]) and the task that proposes them
//! ([`run`]) and acknowledges each pass once its entry is committed.
//!
//! The store hands over a pass's records with its lock held, so the sink only
//! queues them; the task takes what is queued, stamps it with the replicated
//! clock and submits it with `client_write_ff`, which keeps the log order (one
//! task submits, in queue order) without waiting for the commit; a commit's
//! answer raises the pipe's acknowledged position, which releases the replies.
//!
//! At most [`IN_FLIGHT_MAX`] entries are submitted and not yet answered. openraft
//! 0.9 appends each submitted entry on its own and waits for its log flush
//! before the next (`RaftCore::append_to_log`), so every entry costs the leader
//! an fsync: submitting each pass at once made one entry, and one fsync, per
//! pass. Held back while the entries in flight commit, the passes queue here
//! and the next entry takes all of them. One in flight did best (100
//! connections, one put in flight each, three nodes on two cores: about 35-39k
//! puts/s against 28-32k with two, 22k with four, 8k with eight): a second
//! entry's fsync holds up openraft's core, so the first one's commit waits.

use std::sync::Arc;

use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replicate::Replicate;
use bytes::Bytes;
use tokio::sync::{mpsc, Semaphore};

use crate::types::{Batch, Raft};

/// At most this many bytes of queued passes go into one entry.
const ENTRY_BYTES_MAX: usize = 4 << 20;
/// At most this many entries submitted and not yet committed (or failed).
const IN_FLIGHT_MAX: usize = 1;

/// One pass's records and the log position after them.
type Pass = (Vec<u8>, u64);

/// The sink a leader's store journals into. An unbounded channel: the store
/// must never block with its lock held, and what is queued is bounded by the
/// clients' own passes, each of which waits for its commit.
pub struct Proposals {
    tx: mpsc::UnboundedSender<Pass>,
}

impl Proposals {
    /// A sink and the receiving end for [`run`].
    pub fn new() -> (Arc<Proposals>, mpsc::UnboundedReceiver<Pass>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Proposals { tx }), rx)
    }
}

impl Replicate for Proposals {
    fn propose(&self, records: Vec<u8>, end: u64) {
        // Closed only once this leader has stopped: nothing waits for the reply.
        let _ = self.tx.send((records, end));
    }
}

/// Wall-clock nanoseconds now.
pub fn wall_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Propose every pass queued on `rx` to `raft`, in order, and acknowledge on
/// `pipe` the position each committed entry ends at. `clock` is the replicated
/// clock the term starts from; entries are stamped no lower. Ends when the
/// store is gone (the channel closes) or Raft has stopped.
pub async fn run(
    raft: Raft,
    mut rx: mpsc::UnboundedReceiver<Pass>,
    pipe: Arc<LogPipe>,
    mut clock: i64,
) {
    // A semaphore: each entry in flight holds a permit until its answer, and the
    // loop waits for one before it takes the queued passes.
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    loop {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let Some((mut records, mut end)) = rx.recv().await else {
            return;
        };
        while records.len() < ENTRY_BYTES_MAX {
            match rx.try_recv() {
                Ok((more, e)) => {
                    records.extend_from_slice(&more);
                    end = e;
                }
                Err(_) => break,
            }
        }
        clock = clock.max(wall_now());
        let batch = Batch {
            at: clock,
            records: Bytes::from(records),
        };
        let Ok(committed) = raft.client_write_ff(batch).await else {
            return;
        };
        let pipe = Arc::clone(&pipe);
        tokio::spawn(async move {
            let _permit = permit;
            // An entry that is not committed (this node lost the lead) is never
            // acknowledged: its replies are not sent, and the connections close
            // when this leader's store stops.
            if let Ok(Ok(_)) = committed.await {
                pipe.acknowledge(end);
            }
        });
    }
}
