//! Reserves that wait: timeouts, FIFO service, abandoned waits, paused tubes.

use super::*;

// ----- waiting reserves ---------------------------------------------------------

#[test]
fn reserve_with_timeout_zero_answers_at_once() {
    let mut st = store();
    let c = conn(&mut st);
    assert_eq!(
        st.reserve(c, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    assert_eq!(st.stats().current_waiting, 0);
    assert_eq!(st.take_delivery(c), None);
    ok(&st);
    let id = put(&mut st, c, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
}

#[test]
fn waiting_reserve_times_out_at_its_timeout() {
    let mut st = store();
    let p = conn(&mut st);
    let (c, wake) = connect(&mut st);
    reserve_waits(&mut st, c, Some(3), S);
    assert_eq!(st.stats().current_waiting, 1);
    assert_eq!(st.next_deadline(), Some(4 * S));
    tick(&mut st, 4 * S - 1);
    assert_eq!(st.take_delivery(c), None);
    tick(&mut st, 4 * S);
    assert_eq!(st.take_delivery(c), Some(Delivery::TimedOut));
    assert_eq!(wake_all(&mut st), 1);
    assert_eq!(wake.count(), 1);
    assert_eq!(st.stats().current_waiting, 0);
    // No longer waiting: a new job stays ready.
    let id = put(&mut st, p, 0, 0, 60, 4 * S);
    assert_eq!(st.take_delivery(c), None);
    assert_eq!(state(&st, id, 4 * S), "ready");
}

#[test]
fn put_serves_waiting_reserves_in_fifo_order() {
    let mut st = store();
    let p = conn(&mut st);
    let (w1, k1) = connect(&mut st);
    let (w2, k2) = connect(&mut st);
    let (w3, k3) = connect(&mut st);
    let (other, k4) = connect(&mut st);
    st.watch(other, b"elsewhere");
    st.ignore(other, b"default").unwrap();
    reserve_waits(&mut st, other, None, 0);
    reserve_waits(&mut st, w1, None, 1);
    reserve_waits(&mut st, w2, Some(100), 2);
    reserve_waits(&mut st, w3, None, 3);
    assert_eq!(st.stats().current_waiting, 4);
    assert_eq!(tube(&st, "default", 3).waiting, 3);

    let j1 = put(&mut st, p, 0, 0, 60, S);
    assert_eq!(st.take_delivery(w2), None);
    assert_eq!(mailbox_job(&mut st, w1), j1);
    assert_eq!(wake_all(&mut st), 1);
    assert_eq!((k1.count(), k2.count(), k3.count()), (1, 0, 0));
    assert_eq!(st.stats().current_waiting, 3);
    assert_eq!(state(&st, j1, S), "reserved");

    // w1 waits again, behind w2 and w3.
    reserve_waits(&mut st, w1, None, S);
    let j2 = put(&mut st, p, 0, 0, 60, S);
    assert_eq!(mailbox_job(&mut st, w2), j2);
    let j3 = put(&mut st, p, 0, 0, 60, S);
    assert_eq!(mailbox_job(&mut st, w3), j3);
    let j4 = put(&mut st, p, 0, 0, 60, S);
    assert_eq!(mailbox_job(&mut st, w1), j4);
    assert_eq!(wake_all(&mut st), 3);
    assert_eq!(
        (k1.count(), k2.count(), k3.count(), k4.count()),
        (2, 1, 1, 0)
    );
    // Nobody left waiting on default: the next job stays ready.
    let j5 = put(&mut st, p, 0, 0, 60, S);
    assert_eq!(state(&st, j5, S), "ready");
    assert_eq!(st.take_delivery(other), None);
    assert_eq!(st.stats().current_waiting, 1);
    // w1 now holds j1 and j4.
    assert!(st.delete(w1, j1));
    assert!(st.delete(w1, j4));
}

#[test]
fn abandon_wait() {
    let mut st = store();
    let p = conn(&mut st);
    let w = conn(&mut st);
    // Not waiting: nothing to send.
    assert_eq!(st.abandon_wait(w), None);
    // Waiting: TIMED_OUT, and the wait is over.
    reserve_waits(&mut st, w, None, 0);
    assert_eq!(st.abandon_wait(w), Some(Delivery::TimedOut));
    ok(&st);
    assert_eq!(st.stats().current_waiting, 0);
    assert_eq!(tube(&st, "default", 0).waiting, 0);
    let id = put(&mut st, p, 0, 0, 60, 0);
    assert_eq!(st.take_delivery(w), None);
    assert_eq!(state(&st, id, 0), "ready");
    assert_eq!(st.abandon_wait(w), None);
    // Already handed a job: that job is what is sent.
    assert!(st.delete(p, id));
    reserve_waits(&mut st, w, None, 0);
    let id = put(&mut st, p, 0, 0, 60, 0);
    assert_eq!(
        st.abandon_wait(w),
        Some(Delivery::Reserved {
            id,
            body: body_of(id)
        })
    );
    assert_eq!(state(&st, id, 0), "reserved");
    assert_eq!(st.abandon_wait(w), None);
    st.disconnect(w, 0);
    ok(&st);
    assert_eq!(state(&st, id, 0), "ready");
}

#[test]
fn disconnect_while_waiting_ends_the_wait() {
    let mut st = store();
    let p = conn(&mut st);
    let w = conn(&mut st);
    st.watch(w, b"t");
    reserve_waits(&mut st, w, Some(5), 0);
    st.disconnect(w, S);
    ok(&st);
    assert_eq!(st.stats().current_waiting, 0);
    assert!(st.stats_tube(b"t", S).is_none());
    let id = put(&mut st, p, 0, 0, 60, S);
    assert_eq!(state(&st, id, S), "ready");
    // The stale timer does nothing.
    tick(&mut st, 10 * S);
    assert_eq!(wake_all(&mut st), 0);
}

// ----- pause-tube ---------------------------------------------------------------

#[test]
fn paused_tube_gives_out_nothing_until_the_pause_ends() {
    let mut st = store();
    let p = conn(&mut st);
    let j1 = put_in(&mut st, p, "t", 5, 0);
    let (w, wake) = connect(&mut st);
    st.watch(w, b"t");
    st.ignore(w, b"default").unwrap();
    assert!(st.pause_tube(b"t", 10, 0));
    ok(&st);
    let t = tube(&st, "t", 0);
    assert_eq!((t.pause, t.pause_time_left, t.cmd_pause_tube), (10, 10, 1));
    assert_eq!(
        st.reserve(w, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    reserve_waits(&mut st, w, None, S);
    let j2 = put_in(&mut st, p, "t", 5, 2 * S);
    assert_eq!(st.take_delivery(w), None);
    assert_eq!(tube(&st, "t", 2 * S).pause_time_left, 8);
    assert_eq!(tube(&st, "t", 2 * S).waiting, 1);
    // reserve-job still works on a paused tube.
    let x = put_in(&mut st, p, "t", 0, 2 * S);
    assert_eq!(st.reserve_job(p, x, 2 * S).map(|(i, _)| i), Some(x));
    assert!(st.delete(p, x));
    ok(&st);

    tick(&mut st, 10 * S - 1);
    assert_eq!(st.take_delivery(w), None);
    tick(&mut st, 10 * S);
    assert_eq!(mailbox_job(&mut st, w), j1);
    assert_eq!(wake_all(&mut st), 1);
    assert_eq!(wake.count(), 1);
    let t = tube(&st, "t", 10 * S);
    assert_eq!((t.pause, t.pause_time_left, t.waiting), (0, 0, 0));
    assert_eq!(reserve_now(&mut st, w, 10 * S), j2);
}

#[test]
fn several_waiters_are_served_when_a_pause_ends() {
    let mut st = store();
    let p = conn(&mut st);
    st.use_tube(p, b"t");
    let w1 = conn(&mut st);
    let w2 = conn(&mut st);
    st.watch(w1, b"t");
    st.watch(w2, b"t");
    assert!(st.pause_tube(b"t", 3, 0));
    reserve_waits(&mut st, w1, None, 0);
    reserve_waits(&mut st, w2, None, 0);
    let j1 = put(&mut st, p, 9, 0, 60, 0);
    let j2 = put(&mut st, p, 1, 0, 60, 0);
    let j3 = put(&mut st, p, 9, 0, 60, 0);
    tick(&mut st, 3 * S);
    assert_eq!(mailbox_job(&mut st, w1), j2);
    assert_eq!(mailbox_job(&mut st, w2), j1);
    assert_eq!(state(&st, j3, 3 * S), "ready");
    assert_eq!(wake_all(&mut st), 2);
}

#[test]
fn paused_tube_does_not_block_other_watched_tubes() {
    let mut st = store();
    let p = conn(&mut st);
    let _urgent = put_in(&mut st, p, "paused", 0, 0);
    let other = put_in(&mut st, p, "open", 100, 0);
    let w = conn(&mut st);
    st.watch(w, b"paused");
    st.watch(w, b"open");
    assert!(st.pause_tube(b"paused", 60, 0));
    assert_eq!(reserve_now(&mut st, w, 0), other);
    assert_eq!(
        st.reserve(w, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
}

#[test]
fn pause_zero_ends_the_pause_at_once() {
    // The waiter has the job before the next command (beanstalkd's 1 ns pause ends
    // at its next tick, which comes before it reads anything else).
    let mut st = store();
    let p = conn(&mut st);
    let id = put_in(&mut st, p, "t", 0, 0);
    let (w, wake) = connect(&mut st);
    st.watch(w, b"t");
    assert!(st.pause_tube(b"t", 100, 0));
    reserve_waits(&mut st, w, None, 0);
    assert!(st.pause_tube(b"t", 0, 5 * S));
    ok(&st);
    let t = tube(&st, "t", 5 * S);
    assert_eq!((t.cmd_pause_tube, t.pause, t.pause_time_left), (2, 0, 0));
    assert_eq!(state(&st, id, 5 * S), "reserved");
    assert_eq!(mailbox_job(&mut st, w), id);
    assert_eq!(wake_all(&mut st), 1);
    assert_eq!(wake.count(), 1);
    // The old pause's timer is stale and harmless.
    tick(&mut st, 100 * S);
    assert_eq!(tube(&st, "t", 100 * S).pause, 0);
    assert_eq!(st.take_delivery(w), None);
}

#[test]
fn pause_of_a_missing_tube_fails() {
    let mut st = store();
    assert!(!st.pause_tube(b"nope", 10, 0));
    assert!(st.pause_tube(b"default", 10, 0));
    assert_eq!(tubes(&st), vec!["default"]);
    ok(&st);
}

/// A connection watching many tubes waits in the wide list: it is served from any of
/// them, in wait order with connections watching few tubes, and counted per tube.
#[test]
fn wide_and_narrow_waiters_are_served_in_wait_order() {
    let mut st = store();
    let wide = conn(&mut st);
    for i in 0..20 {
        st.watch(wide, format!("w{i}").as_bytes());
        ok(&st);
    }
    assert_eq!(st.ignore(wide, b"w3"), Ok(20));
    ok(&st);
    let narrow = conn(&mut st);
    st.watch(narrow, b"w7");
    let producer = conn(&mut st);

    // The wide connection waits first, so it gets the first job in w7.
    reserve_waits(&mut st, wide, None, 0);
    reserve_waits(&mut st, narrow, None, 0);
    assert_eq!(st.stats().current_waiting, 2);
    assert_eq!(tube(&st, "w7", 0).waiting, 2);
    assert_eq!(tube(&st, "w9", 0).waiting, 1);
    assert!(st.stats_tube(b"w3", 0).is_none());
    let a = put_in(&mut st, producer, "w7", 0, 0);
    assert_eq!(mailbox_job(&mut st, wide), a);
    assert_eq!(st.take_delivery(narrow), None);
    let b = put_in(&mut st, producer, "w7", 0, 0);
    assert_eq!(mailbox_job(&mut st, narrow), b);
    assert_eq!(wake_all(&mut st), 2);

    // An ignored tube does not wake it; a watched one does.
    reserve_waits(&mut st, wide, Some(10), 0);
    let in_w3 = put_in(&mut st, producer, "w3", 0, 0);
    assert_eq!(st.take_delivery(wide), None);
    assert_eq!(tube(&st, "w3", 0).waiting, 0);
    let d = put_in(&mut st, producer, "w19", 0, 0);
    assert_eq!(mailbox_job(&mut st, wide), d);

    // Reserving with ready jobs in few of many watched tubes takes the best one.
    let e = put_in(&mut st, producer, "w12", 5, 0);
    let f = put_in(&mut st, producer, "w15", 1, 0);
    assert_eq!(reserve_now(&mut st, wide, 0), f);
    assert_eq!(reserve_now(&mut st, wide, 0), e);
    // w3 is not watched by either.
    assert_eq!(
        st.reserve(narrow, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    st.use_tube(producer, b"w3");
    assert_eq!(st.peek_ready(producer).map(|(id, _)| id), Some(in_w3));
}
