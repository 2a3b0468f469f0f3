//! The leader's records on their way into the Raft log: the store's
//! [`Replicate`] sink ([`Proposals`]) and the task that proposes them
//! ([`run`]) and acknowledges each pass once its entry is committed.
//!
//! The store hands over a pass's records with its lock held, so the sink only
//! queues them; the task takes what is queued, stamps it with the replicated
//! clock and submits it with `client_write_ff`, which keeps the log order (one
//! task submits, in queue order) without waiting for the commit; a commit's
//! answer raises the pipe's acknowledged position, which releases the replies.

use std::sync::Arc;

use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replicate::Replicate;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::types::{Batch, Raft};

/// At most this many bytes of queued passes go into one entry.
const ENTRY_BYTES_MAX: usize = 4 << 20;

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
    while let Some((mut records, mut end)) = rx.recv().await {
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
            // An entry that is not committed (this node lost the lead) is never
            // acknowledged: its replies are not sent, and the connections close
            // when this leader's store stops.
            if let Ok(Ok(_)) = committed.await {
                pipe.acknowledge(end);
            }
        });
    }
}
