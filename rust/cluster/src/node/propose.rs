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
//! passes queue here and the next entry takes all of them, and those that come
//! back soon after the answer (`linger.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replicate::Replicate;
use bytes::Bytes;
use tokio::sync::{mpsc, Notify, Semaphore};

use super::linger::{Linger, LINGER_MAX};
use crate::logstore::{wait_durable, Durable};
use crate::net::VoteFence;
use crate::sm::StateView;
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
    /// The state machine, whose committed entries are applied while an entry
    /// is in flight rather than as its commit releases the replies.
    pub state: StateView,
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
    let mut linger = Linger::default();
    loop {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let Some(Gathered { records, end }) = gather(&mut rx, &finish, &mut linger).await else {
            drop(permit);
            // The store is gone: wait for the answers of the entries in flight.
            let all = u32::try_from(IN_FLIGHT_MAX).unwrap_or(u32::MAX);
            let _ = in_flight.acquire_many(all).await;
            return;
        };
        clock = clock.max(wall_now());
        let batch = Batch {
            at: clock,
            records: Bytes::from(records),
        };
        let proposed = Instant::now();
        let Ok(committed) = raft.client_write_ff(batch).await else {
            return;
        };
        // The entries committed before this one, handed to the state machine
        // and kept (`sm/mod.rs`), are applied now, while this one is in flight
        // and the thread has little else to do: once openraft's core has
        // appended it and its replication has sent it (the tasks that run
        // before this one's turn comes twice), and not when its commit comes,
        // as the replies it releases wait on the same thread.
        let state = to.state.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            state.settle();
        });
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

/// The passes of one entry, joined, and the log position after the last.
#[derive(Debug)]
struct Gathered {
    records: Vec<u8>,
    end: u64,
}

/// Passes being taken for an entry. The first is kept as it is; the others
/// are joined to it once all are in, in one buffer of their size (grown pass
/// by pass, it had been copied and given fresh pages again and again).
#[derive(Default)]
struct Taking {
    first: Option<Pass>,
    more: Vec<Vec<u8>>,
    size: usize,
}

impl Taking {
    fn take(&mut self, (records, end): Pass) {
        self.size += records.len();
        match &mut self.first {
            None => self.first = Some((records, end)),
            Some((_, last)) => {
                *last = end;
                self.more.push(records);
            }
        }
    }

    /// Take what is queued now, up to an entry's bytes.
    fn take_queued(&mut self, rx: &mut mpsc::UnboundedReceiver<Pass>) {
        while self.size < ENTRY_BYTES_MAX {
            match rx.try_recv() {
                Ok(pass) => self.take(pass),
                Err(_) => break,
            }
        }
    }

    fn done(self) -> Option<Gathered> {
        let (mut records, end) = self.first?;
        if !self.more.is_empty() {
            let mut all = Vec::with_capacity(self.size);
            all.extend_from_slice(&records);
            for pass in self.more {
                all.extend_from_slice(&pass);
            }
            records = all;
        }
        Some(Gathered { records, end })
    }
}

/// The next entry's passes: those queued while the entry before was in
/// flight, or else the next to come; then those `linger` waits for
/// (`linger.rs`). None once the store is gone (the channel closes, or
/// `finish` is notified while nothing is queued).
async fn gather(
    rx: &mut mpsc::UnboundedReceiver<Pass>,
    finish: &Notify,
    linger: &mut Linger,
) -> Option<Gathered> {
    let mut taking = Taking::default();
    taking.take_queued(rx);
    let queued = taking.size;
    if taking.first.is_none() {
        // What is queued goes first; `finish` only once nothing is.
        let pass = tokio::select! {
            biased;
            pass = rx.recv() => pass,
            () = finish.notified() => None,
        }?;
        taking.take(pass);
        taking.take_queued(rx);
    }
    if let Some(target) = linger.target(queued) {
        let until = tokio::time::Instant::now() + LINGER_MAX;
        while taking.size < target && taking.size < ENTRY_BYTES_MAX {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(pass)) => {
                    taking.take(pass);
                    taking.take_queued(rx);
                }
                // The store is gone (the next call says so), or the time is up.
                Ok(None) | Err(_) => break,
            }
        }
        linger.ended(taking.size >= target);
    }
    linger.proposed(taking.size);
    taking.done()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::linger::FIRST_SKIP;

    /// A pass of `bytes` bytes ending at log position `end`.
    fn pass(bytes: usize, end: u64) -> Pass {
        (
            (0..bytes).map(|i| (i as u64 * 31 + end) as u8).collect(),
            end,
        )
    }

    /// Send passes `ends` of 100 bytes each, `gap` apart (the first after
    /// `gap`), moving the paused clock on exactly.
    async fn come_back(
        tx: &mpsc::UnboundedSender<Pass>,
        ends: std::ops::Range<u64>,
        gap: Duration,
    ) {
        for end in ends {
            tokio::time::advance(gap).await;
            tx.send(pass(100, end)).expect("the proposer's end is open");
        }
    }

    /// A proposer's side after an entry of four passes of 100 bytes (ends
    /// 0-3), with two more (4, 5) queued during its flight.
    struct Proposing {
        tx: mpsc::UnboundedSender<Pass>,
        rx: mpsc::UnboundedReceiver<Pass>,
        finish: Notify,
        linger: Linger,
    }

    impl Proposing {
        async fn after_an_entry_of_four() -> Proposing {
            let (tx, rx) = mpsc::unbounded_channel();
            let mut p = Proposing {
                tx,
                rx,
                finish: Notify::new(),
                linger: Linger::default(),
            };
            for end in 0..4 {
                p.send(end);
            }
            let first = p.next().await;
            assert_eq!((first.records.len(), first.end), (400, 3));
            p.send(4);
            p.send(5);
            p
        }

        fn send(&self, end: u64) {
            self.tx
                .send(pass(100, end))
                .expect("the proposer's end is open");
        }

        async fn next(&mut self) -> Gathered {
            gather(&mut self.rx, &self.finish, &mut self.linger)
                .await
                .expect("passes are queued")
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_waits_for_the_passes_the_answer_before_released() {
        let mut p = Proposing::after_an_entry_of_four().await;
        // Once the entry is answered, its four clients come back 100 µs apart.
        let started = tokio::time::Instant::now();
        let tx = p.tx.clone();
        let back = come_back(&tx, 6..10, Duration::from_micros(100));
        let (next, ()) = tokio::join!(p.next(), back);
        assert_eq!((next.records.len(), next.end), (600, 9));
        assert_eq!(started.elapsed(), Duration::from_micros(400));
        let mut expected = Vec::new();
        for end in 4..10 {
            expected.extend_from_slice(&pass(100, end).0);
        }
        assert_eq!(next.records, expected, "in order, whole");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_runs_out_is_not_made_again_for_a_while() {
        let mut p = Proposing::after_an_entry_of_four().await;
        // Nobody comes back (an open loop).
        let started = tokio::time::Instant::now();
        let next = p.next().await;
        assert_eq!(next.records.len(), 200);
        assert!(started.elapsed() >= LINGER_MAX);
        // The next entries go at once, whatever they carry.
        for end in 6..6 + u64::from(FIRST_SKIP) {
            p.send(end);
            let started = tokio::time::Instant::now();
            let next = p.next().await;
            assert_eq!((next.records.len(), next.end), (100, end));
            assert_eq!(started.elapsed(), Duration::ZERO);
        }
        // Then one waits again.
        p.send(100);
        let started = tokio::time::Instant::now();
        p.next().await;
        assert!(started.elapsed() >= LINGER_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_client_is_never_held_back() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let finish = Notify::new();
        let mut linger = Linger::default();
        for end in 0..5 {
            let started = tokio::time::Instant::now();
            let back = come_back(&tx, end..end + 1, Duration::from_micros(50));
            let (next, ()) = tokio::join!(gather(&mut rx, &finish, &mut linger), back);
            let next = next.expect("passes are queued");
            assert_eq!((next.records.len(), next.end), (100, end));
            assert_eq!(started.elapsed(), Duration::from_micros(50));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_store_gone_ends_the_gathering() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Pass>();
        let finish = Notify::new();
        let mut linger = Linger::default();
        finish.notify_one();
        assert!(gather(&mut rx, &finish, &mut linger).await.is_none());
        // Queued passes still go first.
        tx.send(pass(100, 1)).expect("the proposer's end is open");
        finish.notify_one();
        assert_eq!(
            gather(&mut rx, &finish, &mut linger)
                .await
                .expect("passes are queued")
                .end,
            1
        );
        assert!(gather(&mut rx, &finish, &mut linger).await.is_none());
        drop(tx);
        assert!(gather(&mut rx, &finish, &mut linger).await.is_none());
    }

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
