//! Sessions through a change of leader: a store journals into a replicated log,
//! a replica applies what it proposed, and a second store built from the
//! replica (the next leader) gives a session back its jobs and answers its
//! resent commands from their first run.

use std::sync::Mutex;

use super::*;
use crate::store::session::{AttachError, Replay};
use crate::wal::decode::RecordRef;
use crate::wal::replica::Replica;
use crate::wal::replicate::{self, Replicate};
use crate::wal::session::Kept;

/// Collects what the store proposes.
#[derive(Default)]
struct Collect(Mutex<Vec<u8>>);

impl Replicate for Collect {
    fn propose(&self, records: Vec<u8>, _end: u64) {
        self.0.lock().unwrap().extend_from_slice(&records);
    }
}

/// A millisecond of the store's clock.
const MS: u64 = S / 1000;

/// A leader's store on `replica`'s state, with sessions on (the default grace
/// time, 5 s); its proposals go to the returned sink.
fn leader(replica: &Replica, now: u64) -> (Store, Arc<Collect>) {
    leader_with(replica, now, 5 * S)
}

/// A replicated log on `replica`'s state whose proposals go to `sink`.
fn replicated_log(replica: &Replica, now: u64, sink: &Arc<Collect>) -> crate::wal::OpenedLog {
    replicate::opened(
        replica.to_recovered(),
        Arc::clone(sink) as Arc<dyn Replicate>,
        // A replicated clock ahead of the wall clock, moving with the test's
        // time: the stores' wall times then follow `now` as a real clock would.
        4_000_000_000_000_000_000 + now as i64,
        "test".into(),
        "test".into(),
    )
}

/// [`leader`] whose detached sessions end after `grace` ns.
fn leader_with(replica: &Replica, now: u64, grace: u64) -> (Store, Arc<Collect>) {
    let sink = Arc::new(Collect::default());
    let mut opened = replicated_log(replica, now, &sink);
    let mut st = store();
    st.enable_sessions(grace);
    st.attach_log(&mut opened, now);
    ok(&st);
    (st, sink)
}

/// Hand the store's journal to the replica (as a commit would).
fn commit(st: &mut Store, sink: &Collect, replica: &mut Replica) {
    st.flush_log();
    let bytes = std::mem::take(&mut *sink.0.lock().unwrap());
    if !bytes.is_empty() {
        replica.apply_run(&bytes).unwrap();
    }
}

fn attach(st: &mut Store, owner: u64, acked: u64) -> Result<(ConnId, u64), AttachError> {
    let r = st.attach_session(
        Arc::new(Counter::default()),
        owner,
        acked,
        b"default",
        &[b"default"],
    );
    ok(st);
    r
}

/// Put a job with body `x` and time to run `ttr` s on `conn`, at 1 s; its id.
fn put_x(st: &mut Store, conn: ConnId, ttr: u32) -> u64 {
    let id = st.begin_put(conn);
    st.put(conn, id, 1, 0, ttr, &b"x\r\n"[..], S).unwrap();
    id
}

/// One command of a session: `run` applies it, its reply is noted.
fn noted(st: &mut Store, conn: ConnId, reply: &[u8]) {
    st.note_reply(conn, Kept::new(reply));
}

#[test]
fn a_session_keeps_its_job_and_its_replies_through_a_change_of_leader() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, last) = attach(&mut a, 77, 0).unwrap();
    assert_eq!(last, 0);
    // Command 1: put. Command 2: reserve. Command 3: peek (a read, recorded
    // with the pass that changed something). Command 4: put.
    let id = a.begin_put(conn);
    a.put(conn, id, 1, 0, 30, &b"one\r\n"[..], S).unwrap();
    noted(&mut a, conn, format!("INSERTED {id}\r\n").as_bytes());
    let ReserveOutcome::Now(Delivery::Reserved { id: got, .. }) = a.reserve(conn, None, S) else {
        panic!("no job")
    };
    assert_eq!(got, id);
    noted(&mut a, conn, format!("RESERVED {id} 3\r\n").as_bytes());
    noted(&mut a, conn, b"NOT_FOUND\r\n");
    let id2 = a.begin_put(conn);
    a.put(conn, id2, 1, 0, 30, &b"two\r\n"[..], S).unwrap();
    noted(&mut a, conn, format!("INSERTED {id2}\r\n").as_bytes());
    a.record_replies(conn);
    ok(&a);
    commit(&mut a, &sink, &mut replica);

    // The next leader, 2 s later: the job is still the session's, detached.
    let (mut b, _sink) = leader(&replica, 3 * S);
    let st = b.stats();
    assert_eq!((st.reserved, st.ready), (1, 1));
    // The follower had the replies of command 1 only.
    let (conn, last) = attach(&mut b, 77, 1).unwrap();
    assert_eq!(last, 4);
    assert_eq!(
        b.replay(conn, 1),
        Some(Replay::Reply(format!("INSERTED {id}\r\n").into_bytes()))
    );
    assert_eq!(
        b.replay(conn, 2),
        Some(Replay::Reserved {
            id,
            body: Bytes::from_static(b"one\r\n")
        })
    );
    assert_eq!(
        b.replay(conn, 3),
        Some(Replay::Reply(b"NOT_FOUND\r\n".to_vec()))
    );
    assert_eq!(
        b.replay(conn, 4),
        Some(Replay::Reply(format!("INSERTED {id2}\r\n").into_bytes()))
    );
    assert_eq!(b.replay(conn, 5), None);
    // It still holds the job: only it may delete it; its TTR runs from when it
    // was reserved on the first leader.
    assert!(b.delete(conn, id));
    ok(&b);
}

/// The kinds of the records in `bytes`, with a put's session and command.
fn kinds(bytes: &[u8]) -> Vec<(u8, Option<(u64, u64)>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(Some((record, n))) = RecordRef::decode(&bytes[at..]) {
        let by = match record {
            RecordRef::Job(j) => j.put_by,
            _ => None,
        };
        out.push((bytes[at + crate::wal::format::FRAME_LEN], by));
        at += n;
    }
    assert_eq!(at, bytes.len());
    out
}

#[test]
fn a_put_is_recorded_by_its_job_record_after_the_replies_before_it() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = attach(&mut a, 12, 0).unwrap();
    // Command 1: use (changes nothing: noted, not recorded yet). Commands 2
    // and 3: puts, in one pass.
    a.use_tube(conn, b"mail");
    noted(&mut a, conn, b"USING mail\r\n");
    let id = put_x(&mut a, conn, 10);
    noted(&mut a, conn, format!("INSERTED {id}\r\n").as_bytes());
    let id2 = put_x(&mut a, conn, 10);
    noted(&mut a, conn, format!("INSERTED {id2}\r\n").as_bytes());
    a.record_replies(conn);
    a.flush_log();
    let bytes = std::mem::take(&mut *sink.0.lock().unwrap());
    // The use's outcome, then two put records; no outcome for either put.
    let outcome = 11;
    assert_eq!(
        kinds(&bytes),
        [(outcome, None), (14, Some((12, 2))), (14, Some((12, 3)))]
    );
    replica.apply_run(&bytes).unwrap();

    let (mut b, _) = leader(&replica, 2 * S);
    let (conn, last) = attach(&mut b, 12, 0).unwrap();
    assert_eq!(last, 3);
    let replies: Vec<_> = (1..=4).map(|seq| b.replay(conn, seq)).collect();
    assert_eq!(
        replies,
        [
            Some(Replay::Reply(b"USING mail\r\n".to_vec())),
            Some(Replay::Reply(format!("INSERTED {id}\r\n").into_bytes())),
            Some(Replay::Reply(format!("INSERTED {id2}\r\n").into_bytes())),
            None,
        ]
    );
    // A connection that is not a session's puts plain job records.
    let (other, _) = connect(&mut a);
    put_x(&mut a, other, 10);
    a.flush_log();
    let bytes = std::mem::take(&mut *sink.0.lock().unwrap());
    assert_eq!(kinds(&bytes), [(1, None)]);
}

#[test]
fn a_detached_session_ends_after_the_grace_time_and_gives_its_jobs_back() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = attach(&mut a, 5, 0).unwrap();
    put_x(&mut a, conn, 100);
    noted(&mut a, conn, b"INSERTED 1\r\n");
    a.reserve(conn, None, S);
    noted(&mut a, conn, b"RESERVED 1 1\r\n");
    a.record_replies(conn);
    commit(&mut a, &sink, &mut replica);

    let (mut b, sink_b) = leader(&replica, 2 * S);
    assert_eq!(b.stats().reserved, 1);
    b.tick(2 * S + 5 * S - 1);
    assert_eq!(b.stats().reserved, 1);
    b.tick(2 * S + 5 * S);
    ok(&b);
    let st = b.stats();
    assert_eq!((st.reserved, st.ready), (0, 1));
    // The return and the end are journaled: a third leader sees neither the
    // hold nor the session.
    commit(&mut b, &sink_b, &mut replica);
    let (mut c, _) = leader(&replica, 8 * S);
    assert_eq!(c.stats().ready, 1);
    assert_eq!(c.session_conn(5), None);
    // Attaching now makes a new, empty session.
    let (conn, last) = attach(&mut c, 5, 2).unwrap();
    assert_eq!(last, 0);
    assert_eq!(c.replay(conn, 1), None);
}

#[test]
fn a_session_whose_client_quits_gives_its_jobs_back_at_once_and_for_good() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = attach(&mut a, 9, 0).unwrap();
    put_x(&mut a, conn, 100);
    a.reserve(conn, None, S);
    a.disconnect(conn, S);
    ok(&a);
    assert_eq!(a.stats().ready, 1);
    commit(&mut a, &sink, &mut replica);
    let (b, _) = leader(&replica, 2 * S);
    assert_eq!((b.stats().ready, b.stats().reserved), (1, 0));
    assert_eq!(b.session_conn(9), None);
}

#[test]
fn an_attached_session_is_busy_and_old_replies_are_lost() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = attach(&mut a, 3, 0).unwrap();
    assert_eq!(attach(&mut a, 3, 0), Err(AttachError::Busy));
    let n = crate::wal::session::REPLIES_KEPT as u64 + 5;
    for _ in 0..n {
        let id = put_x(&mut a, conn, 100);
        noted(&mut a, conn, format!("INSERTED {id}\r\n").as_bytes());
        a.record_replies(conn);
    }
    commit(&mut a, &sink, &mut replica);
    let (mut b, _) = leader(&replica, 2 * S);
    assert_eq!(attach(&mut b, 3, 1), Err(AttachError::Lost { needed: 2 }));
    let (conn, last) = attach(&mut b, 3, n - 1).unwrap();
    assert_eq!(last, n);
    assert_eq!(
        b.replay(conn, n),
        Some(Replay::Reply(format!("INSERTED {n}\r\n").into_bytes()))
    );
}

#[test]
fn a_touch_moves_the_replicated_deadline() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = attach(&mut a, 4, 0).unwrap();
    let id = put_x(&mut a, conn, 10);
    a.reserve(conn, None, S);
    // Touched at 8 s: the TTR now ends at 18 s, not 11 s.
    assert!(a.touch(conn, id, 8 * S));
    commit(&mut a, &sink, &mut replica);
    let (mut b, _) = leader(&replica, 9 * S);
    let (conn, _) = attach(&mut b, 4, 3).unwrap();
    b.tick(17 * S);
    assert_eq!(b.stats().reserved, 1);
    b.tick(18 * S);
    assert_eq!(b.stats().reserved, 0);
    // Timed out, it is no longer the session's to release.
    assert_eq!(b.stats().ready, 1);
    assert!(!b.release(conn, id, 1, 0, 18 * S));
}

#[test]
fn a_pause_outlives_the_leader_and_ends_when_it_would_have() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = connect(&mut a);
    a.use_tube(conn, b"mail");
    put_x(&mut a, conn, 10);
    // Paused for 30 s at 1 s; "other" is paused and unpaused again.
    assert!(a.pause_tube(b"mail", 30, S));
    let other = a.begin_put(conn);
    a.use_tube(conn, b"other");
    a.put(conn, other, 1, 0, 10, &b"y\r\n"[..], S).unwrap();
    assert!(a.pause_tube(b"other", 30, S));
    assert!(a.pause_tube(b"other", 0, 2 * S));
    commit(&mut a, &sink, &mut replica);

    // The next leader, at 5 s: "mail" stays paused until 31 s, "other" is not.
    let (mut b, _) = leader(&replica, 5 * S);
    let (w, _) = connect(&mut b);
    b.watch(w, b"mail");
    b.ignore(w, b"default").unwrap();
    assert_eq!(
        b.reserve(w, Some(0), 5 * S),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    let stats = b.stats_tube(b"mail", 5 * S).unwrap();
    assert_eq!(stats.pause, 30);
    assert_eq!(b.stats_tube(b"other", 5 * S).unwrap().pause_time_left, 0);
    b.tick(31 * S - 1);
    assert_eq!(
        b.reserve(w, Some(0), 31 * S - 1),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    b.tick(31 * S);
    assert!(matches!(
        b.reserve(w, Some(0), 31 * S),
        ReserveOutcome::Now(Delivery::Reserved { .. })
    ));
}

/// Session 6 puts a job and reserves it (at 1 s), on a leader whose grace time
/// is `grace`.
fn holding_one(replica: &Replica, grace: u64) -> (Store, Arc<Collect>, ConnId) {
    let (mut a, sink) = leader_with(replica, S, grace);
    let (conn, _) = attach(&mut a, 6, 0).unwrap();
    put_x(&mut a, conn, 100);
    noted(&mut a, conn, b"INSERTED 1\r\n");
    a.reserve(conn, None, S);
    noted(&mut a, conn, b"RESERVED 1 1\r\n");
    a.record_replies(conn);
    ok(&a);
    (a, sink, conn)
}

#[test]
fn a_session_detached_from_its_follower_ends_after_the_configured_grace_time() {
    let replica = Replica::new();
    let (mut a, _sink, conn) = holding_one(&replica, 300 * MS);
    // Its forwarding connection breaks at 2 s.
    a.detach_session(conn, 2 * S);
    ok(&a);
    a.tick(2 * S + 300 * MS - 1);
    assert_eq!(a.stats().reserved, 1);
    assert!(a.session_detached(conn));
    a.tick(2 * S + 300 * MS);
    ok(&a);
    let st = a.stats();
    assert_eq!((st.reserved, st.ready), (0, 1));
    assert_eq!(a.session_conn(6), None);
}

#[test]
fn a_session_a_new_leader_restores_ends_after_that_leaders_grace_time() {
    let mut replica = Replica::new();
    let (mut a, sink, _) = holding_one(&replica, 5 * S);
    commit(&mut a, &sink, &mut replica);
    // The next leader takes over at 3 s with a grace time of 300 ms: the
    // session it restores detached ends 300 ms later, not 5 s.
    let (mut b, _) = leader_with(&replica, 3 * S, 300 * MS);
    assert_eq!(b.stats().reserved, 1);
    b.tick(3 * S + 300 * MS - 1);
    assert_eq!(b.stats().reserved, 1);
    b.tick(3 * S + 300 * MS);
    ok(&b);
    let st = b.stats();
    assert_eq!((st.reserved, st.ready), (0, 1));
}

#[test]
fn a_server_takes_its_session_grace_time_from_its_setting() {
    let mut replica = Replica::new();
    let (mut a, sink, _) = holding_one(&replica, 5 * S);
    commit(&mut a, &sink, &mut replica);
    // A server's shared state made on the replicated log, as a term's server
    // starts (`ServerConfig::session_grace`): it takes over at 3 s of the
    // replicated clock, which its store's clock reads as `TIME_BASE`.
    let base = crate::server::TIME_BASE;
    let sink = Arc::new(Collect::default());
    let mut opened = replicated_log(&replica, 3 * S, &sink);
    let shared = crate::server::Shared::new(
        65535,
        0,
        Some(&mut opened),
        std::time::Duration::from_millis(300),
    );
    let mut b = shared.lock();
    assert_eq!(b.stats().reserved, 1);
    b.tick(base + 300 * MS - 1);
    assert_eq!(b.stats().reserved, 1);
    b.tick(base + 300 * MS);
    ok(&b);
    let st = b.stats();
    assert_eq!((st.reserved, st.ready), (0, 1));
}

#[test]
fn a_huge_grace_time_never_ends_a_session() {
    let replica = Replica::new();
    let (mut a, _sink, conn) = holding_one(&replica, u64::MAX);
    // Its end would be past the clock's range: it stays detached (until the
    // job's TTR, at 101 s, gives the job back).
    a.detach_session(conn, 2 * S);
    a.tick(100 * S);
    ok(&a);
    assert_eq!(a.stats().reserved, 1);
    assert!(a.session_detached(conn));
}

/// The chaos harness's seed 13006: a session's reserve waits; a delayed job's
/// delay ends and the job is handed to it by the timer's pass, which journals
/// the hold; the term ends before a pass of the session's own records its
/// replies. The next leader must answer the resent reserve with that job, not
/// reserve another while the first stays held by a session nobody knows of.
#[test]
fn a_reserve_answered_by_a_timer_is_replayed_with_its_job_after_a_change_of_leader() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let other = a.connect(Arc::new(Counter::default()));
    let (conn, _) = attach(&mut a, 42, 0).unwrap();
    // Commands 1-3: watch q, ignore default, a peek (none changes anything
    // journaled, so their replies wait to be recorded with a later change).
    a.use_tube(other, b"q");
    let delayed = a.begin_put(other);
    a.put(other, delayed, 1, 1, 30, &b"soon\r\n"[..], S)
        .unwrap();
    a.watch(conn, b"q");
    assert_eq!(a.ignore(conn, b"default"), Ok(1));
    noted(&mut a, conn, b"WATCHING 2\r\n");
    noted(&mut a, conn, b"WATCHING 1\r\n");
    noted(&mut a, conn, b"NOT_FOUND\r\n");
    // Command 4: reserve, nothing ready in `q`: it waits.
    assert_eq!(a.reserve(conn, None, S), ReserveOutcome::Waiting);
    commit(&mut a, &sink, &mut replica);
    // The delay ends: the timer's pass hands the job over and journals the hold.
    a.tick(2 * S + MS);
    ok(&a);
    commit(&mut a, &sink, &mut replica);
    // The term ends before the session's connection takes its delivery.

    let (mut b, _sink) = leader(&replica, 3 * S);
    let (conn, _last) = attach(&mut b, 42, 3).unwrap();
    assert_eq!(
        b.replay(conn, 4),
        Some(Replay::Reserved {
            id: delayed,
            body: Bytes::from_static(b"soon\r\n")
        }),
        "the resent reserve is answered with the job it got"
    );
}

/// Reserve on `conn`, which must give job `id` at once.
fn reserve_x(st: &mut Store, conn: ConnId, id: u64) {
    let ReserveOutcome::Now(Delivery::Reserved { id: got, .. }) = st.reserve(conn, Some(0), S)
    else {
        panic!("no job")
    };
    assert_eq!(got, id);
    ok(st);
}

/// The chaos harness's seed 13006, second half: a session reserves a job,
/// releases it with a delay, and reserves it again; the second hold must carry
/// the second reserve's number, or its resent copy is not recognised after a
/// change of leader and reserves another job while this one stays held.
#[test]
fn a_job_reserved_again_by_the_same_session_is_replayed_by_the_later_command() {
    let mut replica = Replica::new();
    let (mut a, sink) = leader(&replica, S);
    let (conn, _) = attach(&mut a, 9, 0).unwrap();
    let id = put_x(&mut a, conn, 30);
    noted(&mut a, conn, format!("INSERTED {id}\r\n").as_bytes());
    // Command 2: reserve; 3: release; 4: reserve again.
    reserve_x(&mut a, conn, id);
    noted(&mut a, conn, format!("RESERVED {id} 1\r\n").as_bytes());
    assert!(a.release(conn, id, 1, 0, S));
    noted(&mut a, conn, b"RELEASED\r\n");
    a.record_replies(conn);
    ok(&a);
    reserve_x(&mut a, conn, id);
    // The term ends before this reserve's reply is recorded.
    commit(&mut a, &sink, &mut replica);

    let (mut b, _sink) = leader(&replica, 2 * S);
    let (conn, last) = attach(&mut b, 9, 3).unwrap();
    assert_eq!(last, 3);
    assert_eq!(
        b.replay(conn, 4),
        Some(Replay::Reserved {
            id,
            body: Bytes::from_static(b"x\r\n")
        })
    );
    assert_eq!(b.replay(conn, 2), None, "the first reservation is over");
}
