//! The leader's records on their way into the Raft log: the store's
//! [`Replicate`] sink ([`Proposals`]) and the task that proposes them
//! ([`run`]) and acknowledges each pass once its entry is committed.
//!
//! The store hands over a pass's records with its lock held, so the sink only
//! queues them; the task takes what is queued, stamps it with the replicated
//! clock and submits it with `client_write_ff`, which keeps the log order (one
//! task submits, in queue order) without waiting for the commit; a commit's
//! answer, once this node's own log is durable up to the entry (openraft may
//! count a leader's entry committed before its own fsync: `logstore/mod.rs`),
//! raises the pipe's acknowledged position, which releases the replies.
//!
//! A commit also renews the leader's lease ([`Lease`]): a majority accepted the
//! entry after it was proposed, and each of them refuses to vote for another
//! candidate for openraft's leader lease (the election timeout's maximum) after
//! that, so until the proposal time plus most of that lease no other leader
//! can exist and reads need no round of their own. This leader is one of that
//! majority, and openraft lets a leader that has led for longer than the lease
//! grant a higher term's vote: so a vote request that could unseat it suspends
//! the lease while Raft answers it, and a granted one ends the lease for the
//! term ([`LeaseFence`]).
//!
//! At most [`IN_FLIGHT_MAX`] entries are submitted and not yet answered. Every
//! entry costs each node an fsync: submitting each pass at once made one entry,
//! and one fsync, per pass. Held back while the entries in flight commit, the
//! passes queue here and the next entry takes all of them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replicate::Replicate;
use bytes::Bytes;
use tokio::sync::{mpsc, Notify, Semaphore};

use crate::logstore::{wait_durable, Durable};
use crate::net::VoteFence;
use crate::types::{Batch, Raft};

/// At most this many bytes of queued passes go into one entry.
const ENTRY_BYTES_MAX: usize = 4 << 20;
/// At most this many entries submitted and not yet committed (or failed).
const IN_FLIGHT_MAX: usize = 1;

/// One pass's records and the log position after them.
type Pass = (Vec<u8>, u64);

/// Until when this leader knows no other can have been elected.
#[derive(Debug)]
pub struct Lease {
    epoch: Instant,
    /// How long a commit vouches for, from its proposal.
    length: Duration,
    /// Nanoseconds after `epoch` the lease runs to (0: none yet).
    until: AtomicU64,
    /// Set once this node granted a vote in the term: no lease any more.
    revoked: AtomicBool,
    /// The node's fence: no lease while a vote request is being answered.
    fence: Arc<LeaseFence>,
}

impl Lease {
    /// A lease of `length` per commit, not yet held, under `fence`.
    pub fn new(length: Duration, fence: Arc<LeaseFence>) -> Lease {
        Lease {
            epoch: Instant::now(),
            length,
            until: AtomicU64::new(0),
            revoked: AtomicBool::new(false),
            fence,
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// An entry proposed at `proposed` is committed.
    fn renew(&self, proposed: Instant) {
        let until = self.nanos(proposed + self.length);
        self.until.fetch_max(until, Ordering::AcqRel);
    }

    fn valid(&self) -> bool {
        // Fence first: a vote request registered before this look is seen.
        self.fence.answering.load(Ordering::SeqCst) == 0
            && !self.revoked.load(Ordering::SeqCst)
            && self.nanos(Instant::now()) < self.until.load(Ordering::Acquire)
    }
}

/// A node's fence around vote requests that could unseat it (the peer
/// server's [`VoteFence`]): while one is being answered no lease holds, and
/// once one was granted the lease of the term being served is over. Its reads
/// then wait for a commit, which a leader that stepped down never gets.
#[derive(Debug, Default)]
pub struct LeaseFence {
    /// Vote requests being answered now.
    answering: AtomicU64,
    /// The lease of the term served now. A std mutex: held to set, clear or
    /// revoke it, never across an await.
    current: Mutex<Option<Arc<Lease>>>,
}

impl LeaseFence {
    /// The term served now has `lease` (None: no term is served).
    pub fn serve(&self, lease: Option<Arc<Lease>>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = lease;
    }
}

impl VoteFence for LeaseFence {
    fn before(&self) {
        self.answering.fetch_add(1, Ordering::SeqCst);
    }

    fn after(&self, granted: bool) {
        if granted {
            let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(lease) = current.as_ref() {
                lease.revoked.store(true, Ordering::SeqCst);
            }
        }
        self.answering.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The sink a leader's store journals into. An unbounded channel: the store
/// must never block with its lock held, and what is queued is bounded by the
/// clients' own passes, each of which waits for its commit.
pub struct Proposals {
    tx: mpsc::UnboundedSender<Pass>,
    lease: Arc<Lease>,
    commit_timeout: Duration,
}

impl Proposals {
    /// A sink and the receiving end for [`run`], renewing `lease`; a reply
    /// waits at most `commit_timeout` for its commit.
    pub fn new(
        lease: Arc<Lease>,
        commit_timeout: Duration,
    ) -> (Arc<Proposals>, mpsc::UnboundedReceiver<Pass>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let sink = Proposals {
            tx,
            lease,
            commit_timeout,
        };
        (Arc::new(sink), rx)
    }
}

impl Replicate for Proposals {
    fn propose(&self, records: Vec<u8>, end: u64) {
        // Closed only once this leader has stopped: nothing waits for the reply.
        let _ = self.tx.send((records, end));
    }

    fn lease_valid(&self) -> bool {
        self.lease.valid()
    }

    fn commit_timeout(&self) -> Option<Duration> {
        Some(self.commit_timeout)
    }
}

/// Wall-clock nanoseconds now.
pub fn wall_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Where a committed entry is acknowledged.
pub struct Acknowledge {
    /// The store's log pipe: its acknowledged position releases the replies.
    pub pipe: Arc<LogPipe>,
    /// Renewed by each commit.
    pub lease: Arc<Lease>,
    /// Raised to each committed entry's log index.
    pub committed_to: Arc<AtomicU64>,
    /// How far this node's log is on disk: a commit is taken once it covers it.
    pub durable: Durable,
}

/// Propose every pass queued on `rx` to `raft`, in order, and acknowledge
/// (`to`) the position each committed entry ends at. `clock` is the replicated
/// clock the term starts from; entries are stamped no lower. Ends when the
/// store is gone (the channel closes, or `finish` is notified: then once what
/// is queued is submitted) and the entries in flight are answered, or Raft has
/// stopped.
pub async fn run(
    raft: Raft,
    mut rx: mpsc::UnboundedReceiver<Pass>,
    to: Acknowledge,
    mut clock: i64,
    finish: Arc<Notify>,
) {
    let to = Arc::new(to);
    // A semaphore: each entry in flight holds a permit until its answer, and the
    // loop waits for one before it takes the queued passes.
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    // The passes an entry takes after its first, kept for their room.
    let mut more = Vec::new();
    loop {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        // What is queued goes first; `finish` only once nothing is.
        let next = tokio::select! {
            biased;
            pass = rx.recv() => pass,
            () = finish.notified() => None,
        };
        let Some((mut records, mut end)) = next else {
            drop(permit);
            // The store is gone: wait for the answers of the entries in flight.
            let all = u32::try_from(IN_FLIGHT_MAX).unwrap_or(u32::MAX);
            let _ = in_flight.acquire_many(all).await;
            return;
        };
        let mut size = records.len();
        while size < ENTRY_BYTES_MAX {
            match rx.try_recv() {
                Ok((pass, e)) => {
                    size += pass.len();
                    more.push(pass);
                    end = e;
                }
                Err(_) => break,
            }
        }
        if !more.is_empty() {
            // Joined in one buffer of their size (grown pass by pass, it had
            // been copied and given fresh pages again and again).
            let mut all = Vec::with_capacity(size);
            all.extend_from_slice(&records);
            for pass in more.drain(..) {
                all.extend_from_slice(&pass);
            }
            records = all;
        }
        clock = clock.max(wall_now());
        let batch = Batch {
            at: clock,
            records: Bytes::from(records),
        };
        let proposed = Instant::now();
        let Ok(committed) = raft.client_write_ff(batch).await else {
            return;
        };
        let to = Arc::clone(&to);
        tokio::spawn(async move {
            let _permit = permit;
            // An entry that is not committed (this node lost the lead) is never
            // acknowledged: its replies are not sent, and the connections close
            // when this leader's store stops. Nor one whose log write failed
            // (the writer stopped: so does Raft).
            let Ok(Ok(answer)) = committed.await else {
                return;
            };
            let index = answer.log_id.index;
            if wait_durable(&mut to.durable.clone(), index).await {
                to.lease.renew(proposed);
                to.committed_to.fetch_max(index, Ordering::SeqCst);
                to.pipe.acknowledge(end);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vote_request_suspends_the_lease_and_a_granted_one_ends_it() {
        let fence = Arc::new(LeaseFence::default());
        let lease = Arc::new(Lease::new(Duration::from_secs(60), Arc::clone(&fence)));
        assert!(!lease.valid(), "no commit yet");
        lease.renew(Instant::now());
        assert!(lease.valid());
        fence.serve(Some(Arc::clone(&lease)));
        fence.before();
        assert!(!lease.valid(), "while a vote is answered");
        fence.after(false);
        assert!(lease.valid(), "refused: the lease holds again");
        fence.before();
        fence.after(true);
        assert!(!lease.valid(), "granted");
        lease.renew(Instant::now());
        assert!(!lease.valid(), "and a later commit does not renew it");
        // A term served later has a lease of its own.
        let next = Arc::new(Lease::new(Duration::from_secs(60), Arc::clone(&fence)));
        fence.serve(Some(Arc::clone(&next)));
        next.renew(Instant::now());
        assert!(next.valid());
    }
}
