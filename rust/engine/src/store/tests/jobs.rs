//! kick, kick-job, reserve-job, delete and bury.

use super::*;

// ----- kick ---------------------------------------------------------------------

#[test]
fn kick_takes_buried_jobs_first_in_bury_order_then_delayed_by_deadline() {
    let mut st = store();
    let c = conn(&mut st);
    st.use_tube(c, b"t");
    st.watch(c, b"t");
    let j1 = put(&mut st, c, 0, 0, 60, 0);
    let j2 = put(&mut st, c, 0, 0, 60, 0);
    let j3 = put(&mut st, c, 0, 0, 60, 0);
    for id in [j1, j2, j3] {
        assert_eq!(reserve_now(&mut st, c, 0), id);
    }
    for id in [j2, j1, j3] {
        assert!(st.bury(c, id, 0));
        ok(&st);
    }
    let d_late = put(&mut st, c, 0, 10, 60, 0);
    let d_early = put(&mut st, c, 0, 5, 60, 0);
    let d_early2 = put(&mut st, c, 0, 5, 60, 0);
    assert_eq!(st.peek_buried(c).map(|(i, _)| i), Some(j2));
    assert_eq!(st.peek_delayed(c).map(|(i, _)| i), Some(d_early));

    // Another tube's kick touches nothing here.
    let other = conn(&mut st);
    assert_eq!(st.kick(other, 10, 0), 0);

    assert_eq!(st.kick(c, 2, 0), 2);
    ok(&st);
    assert_eq!(
        [j2, j1, j3].map(|id| state(&st, id, 0)),
        ["ready", "ready", "buried"]
    );
    assert_eq!(job(&st, j2, 0).kicks, 1);
    assert_eq!(st.peek_buried(c).map(|(i, _)| i), Some(j3));
    // Buried jobs remain: delayed ones are not touched.
    assert_eq!(st.kick(c, 10, 0), 1);
    assert_eq!(state(&st, j3, 0), "ready");
    assert_eq!(state(&st, d_early, 0), "delayed");
    // Then delayed jobs, earliest deadline first.
    assert_eq!(st.kick(c, 1, 0), 1);
    assert_eq!(
        [d_early, d_early2, d_late].map(|id| state(&st, id, 0)),
        ["ready", "delayed", "delayed"]
    );
    // A bound larger than what is there kicks what is there.
    assert_eq!(st.kick(c, 100, 0), 2);
    assert_eq!(st.kick(c, 100, 0), 0);
    assert_eq!(st.stats().ready, 6);
    ok(&st);
    // The kicked delayed jobs' timers are stale.
    tick(&mut st, 20 * S);
    assert_eq!(st.stats().ready, 6);
    assert_eq!(job(&st, d_late, 20 * S).kicks, 1);
}

#[test]
fn kicked_job_goes_to_a_waiting_reserve() {
    let mut st = store();
    let c = conn(&mut st);
    let (w, wake) = connect(&mut st);
    let id = put(&mut st, c, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    assert!(st.bury(c, id, 0));
    reserve_waits(&mut st, w, None, 0);
    assert_eq!(st.kick(c, 5, 0), 1);
    assert_eq!(mailbox_job(&mut st, w), id);
    wake_all(&mut st);
    assert_eq!(wake.count(), 1);
}

#[test]
fn kick_job_only_kicks_buried_and_delayed_jobs() {
    let mut st = store();
    let c = conn(&mut st);
    let ready = put(&mut st, c, 0, 0, 60, 0);
    let reserved = put(&mut st, c, 0, 0, 60, 0);
    let buried = put(&mut st, c, 0, 0, 60, 0);
    let delayed = put(&mut st, c, 0, 30, 60, 0);
    assert_eq!(
        st.reserve_job(c, reserved, 0).map(|(i, _)| i),
        Some(reserved)
    );
    assert_eq!(st.reserve_job(c, buried, 0).map(|(i, _)| i), Some(buried));
    assert!(st.bury(c, buried, 7));
    assert!(!st.kick_job(ready, 0));
    assert!(!st.kick_job(reserved, 0));
    assert!(!st.kick_job(999, 0));
    assert!(st.kick_job(buried, 0));
    ok(&st);
    assert!(st.kick_job(delayed, 0));
    ok(&st);
    assert_eq!(state(&st, buried, 0), "ready");
    assert_eq!(state(&st, delayed, 0), "ready");
    assert_eq!(job(&st, buried, 0).pri, 7);
    assert_eq!(job(&st, delayed, 0).kicks, 1);
    assert!(!st.kick_job(delayed, 0));
}

// ----- reserve-job, delete, bury ------------------------------------------------

#[test]
fn reserve_job_takes_a_job_from_any_state_but_reserved() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let ready = put(&mut st, c1, 0, 0, 60, 0);
    let delayed = put(&mut st, c1, 0, 5, 10, 0);
    let buried = put(&mut st, c1, 0, 0, 60, 0);
    assert_eq!(st.reserve_job(c1, buried, 0).map(|(i, _)| i), Some(buried));
    assert!(st.bury(c1, buried, 0));

    for id in [ready, delayed, buried] {
        assert_eq!(st.reserve_job(c2, id, S), Some((id, body_of(id))));
        ok(&st);
        assert_eq!(state(&st, id, S), "reserved");
    }
    assert_eq!(st.stats().reserved, 3);
    assert_eq!(st.stats().current_workers, 2);
    // Reserved, by another connection or by itself: no.
    assert_eq!(st.reserve_job(c1, ready, S), None);
    assert_eq!(st.reserve_job(c2, ready, S), None);
    assert_eq!(st.reserve_job(c2, 999, S), None);
    assert_eq!(job(&st, delayed, S).time_left, 10);
    // The delayed job's old delay timer (5 s) does not make it ready.
    tick(&mut st, 5 * S);
    assert_eq!(state(&st, delayed, 5 * S), "reserved");
    tick(&mut st, 11 * S);
    assert_eq!(state(&st, delayed, 11 * S), "ready");
    assert_eq!(job(&st, delayed, 11 * S).timeouts, 1);
    assert!(st.delete(c2, ready));
    assert!(st.delete(c2, buried));
}

#[test]
fn reserve_job_ignores_the_margin() {
    let mut st = store();
    let c = conn(&mut st);
    let held = put(&mut st, c, 0, 0, 1, 0);
    let other = put(&mut st, c, 0, 5, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), held);
    assert_eq!(
        st.reserve(c, None, 0),
        ReserveOutcome::Now(Delivery::DeadlineSoon)
    );
    assert_eq!(st.reserve_job(c, other, 0).map(|(i, _)| i), Some(other));
}

#[test]
fn delete_rules() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let ready = put(&mut st, c1, 0, 0, 60, 0);
    let delayed = put(&mut st, c1, 0, 9, 60, 0);
    let mine = put(&mut st, c1, 5, 0, 60, 0);
    let buried = put(&mut st, c1, 6, 0, 60, 0);
    let theirs = put(&mut st, c1, 7, 0, 60, 0);
    assert_eq!(st.reserve_job(c1, mine, 0).map(|(i, _)| i), Some(mine));
    assert_eq!(st.reserve_job(c1, buried, 0).map(|(i, _)| i), Some(buried));
    assert!(st.bury(c1, buried, 6));
    assert_eq!(st.reserve_job(c2, theirs, 0).map(|(i, _)| i), Some(theirs));

    assert!(!st.delete(c1, theirs));
    assert_eq!(state(&st, theirs, 0), "reserved");
    for id in [ready, delayed, buried] {
        assert!(st.delete(c2, id), "job {id}");
        ok(&st);
        assert_eq!(state(&st, id, 0), "gone");
        assert_eq!(st.peek(id), None);
    }
    assert!(st.delete(c1, mine));
    assert!(st.delete(c2, theirs));
    assert!(!st.delete(c2, theirs));
    assert!(!st.delete(c1, 12345));
    ok(&st);
    let s = st.stats();
    assert_eq!(
        (s.ready, s.reserved, s.delayed, s.buried, s.urgent),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(tube(&st, "default", 0).cmd_delete, 5);
    // The delayed job's timer is stale.
    tick(&mut st, 10 * S);
    assert_eq!(st.stats().ready, 0);
}

#[test]
fn bury_order_and_counters() {
    let mut st = store();
    let c = conn(&mut st);
    let other = conn(&mut st);
    let ids: Vec<u64> = (0..3).map(|_| put(&mut st, c, 100, 0, 60, 0)).collect();
    for &id in &ids {
        assert_eq!(reserve_now(&mut st, c, 0), id);
    }
    assert!(!st.bury(other, ids[0], 0));
    assert!(!st.bury(c, 999, 0));
    assert!(st.bury(c, ids[2], 2000));
    assert!(st.bury(c, ids[0], 1));
    ok(&st);
    assert_eq!(st.stats().buried, 2);
    assert_eq!(st.stats().reserved, 1);
    assert_eq!(tube(&st, "default", 0).buried, 2);
    assert_eq!(st.peek_buried(c).map(|(i, _)| i), Some(ids[2]));
    let j = job(&st, ids[2], 0);
    assert_eq!(
        (j.state, j.pri, j.buries, j.time_left),
        ("buried", 2000, 1, 0)
    );
    // A buried job is not reserved again, and cannot be buried again.
    assert_eq!(
        st.reserve(c, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    assert!(!st.bury(c, ids[2], 0));
    assert!(!st.release(c, ids[2], 0, 0, 0));
    assert!(!st.touch(c, ids[2], 0));
    // Kick, reserve, bury again: counted twice, now last in bury order.
    assert!(st.kick_job(ids[2], 0));
    assert_eq!(reserve_now(&mut st, c, 0), ids[2]);
    assert!(st.bury(c, ids[2], 2000));
    assert_eq!(job(&st, ids[2], 0).buries, 2);
    assert_eq!(st.peek_buried(c).map(|(i, _)| i), Some(ids[0]));
    assert_eq!(st.kick(c, 1, 0), 1);
    assert_eq!(st.peek_buried(c).map(|(i, _)| i), Some(ids[2]));
}

// ----- max memory ---------------------------------------------------------------

#[test]
fn max_memory_refuses_puts_until_a_delete_makes_room() {
    use crate::store::job::JOB_OVERHEAD;
    let mut st = store();
    let c = conn(&mut st);
    // body_of(id) is "job N\r\n": 7 bytes for ids below 10.
    let cost = 7 + JOB_OVERHEAD;
    st.set_max_memory(3 * cost);
    let ids: Vec<u64> = (0..3).map(|_| put(&mut st, c, 0, 0, 60, 0)).collect();
    assert_eq!(st.job_bytes(), 3 * cost);
    let refused = st.begin_put(c);
    assert_eq!(
        st.put(c, refused, 0, 0, 60, body_of(refused), 0),
        Err(PutRefused::NoSpace)
    );
    ok(&st);
    assert!(st.delete(c, ids[0]));
    assert_eq!(st.job_bytes(), 2 * cost);
    let again = st.begin_put(c);
    assert_eq!(st.put(c, again, 0, 0, 60, body_of(again), 0), Ok(again));
    ok(&st);
    // No limit: anything goes.
    st.set_max_memory(0);
    put(&mut st, c, 0, 0, 60, 0);
    assert_eq!(st.job_bytes(), 4 * cost);
}
