//! Reserve order, delays, TTR and the DEADLINE_SOON margin.

use super::*;

// ----- order --------------------------------------------------------------------

#[test]
fn reserve_order_is_priority_then_id() {
    let mut st = store();
    let c = conn(&mut st);
    let a = put(&mut st, c, 5, 0, 60, 0);
    let b = put(&mut st, c, 1, 0, 60, 0);
    let d = put(&mut st, c, 5, 0, 60, 0);
    let e = put(&mut st, c, 0, 0, 60, 0);
    let got: Vec<u64> = (0..4).map(|_| reserve_now(&mut st, c, 0)).collect();
    assert_eq!(got, vec![e, b, a, d]);
    assert_eq!(
        st.reserve(c, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
}

#[test]
fn reserve_order_spans_watched_tubes_only() {
    let mut st = store();
    let p = conn(&mut st);
    let a1 = put_in(&mut st, p, "a", 5, 0);
    let b1 = put_in(&mut st, p, "b", 5, 0);
    let b2 = put_in(&mut st, p, "b", 1, 0);
    let a2 = put_in(&mut st, p, "a", 5, 0);
    let _x = put_in(&mut st, p, "x", 0, 0);
    let _d = put_in(&mut st, p, "default", 0, 0);

    let w = conn(&mut st);
    assert_eq!(st.watch(w, b"a"), 2);
    assert_eq!(st.watch(w, b"b"), 3);
    assert_eq!(st.ignore(w, b"default"), Ok(2));
    let got: Vec<u64> = (0..4).map(|_| reserve_now(&mut st, w, 0)).collect();
    assert_eq!(got, vec![b2, a1, b1, a2]);
    // Jobs of unwatched tubes (even urgent ones) are never given.
    assert_eq!(
        st.reserve(w, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    assert_eq!(st.stats().ready, 2);
}

#[test]
fn released_job_goes_ahead_of_newer_equal_priority_jobs() {
    let mut st = store();
    let c = conn(&mut st);
    let first = put(&mut st, c, 10, 0, 60, 0);
    let second = put(&mut st, c, 10, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), first);
    let third = put(&mut st, c, 10, 0, 60, 0);
    assert!(st.release(c, first, 10, 0, S));
    ok(&st);
    assert_eq!(reserve_now(&mut st, c, S), first);
    assert_eq!(reserve_now(&mut st, c, S), second);
    // Released with a worse priority it goes behind.
    assert!(st.release(c, first, 11, 0, S));
    assert_eq!(reserve_now(&mut st, c, S), third);
    assert_eq!(reserve_now(&mut st, c, S), first);
    assert_eq!(job(&st, first, S).releases, 2);
    assert_eq!(job(&st, first, S).reserves, 3);
}

// ----- delays -------------------------------------------------------------------

#[test]
fn delayed_job_is_not_reservable_until_tick() {
    let mut st = store();
    let c = conn(&mut st);
    let id = put(&mut st, c, 0, 5, 60, 0);
    assert_eq!(state(&st, id, 0), "delayed");
    assert_eq!(job(&st, id, 0).time_left, 5);
    assert_eq!(job(&st, id, 0).delay, 5);
    assert_eq!(st.stats().delayed, 1);
    assert_eq!(st.peek_delayed(c).map(|(i, _)| i), Some(id));
    assert_eq!(st.peek_ready(c), None);
    assert_eq!(
        st.reserve(c, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    assert_eq!(st.next_deadline(), Some(5 * S));

    tick(&mut st, 5 * S - 1);
    assert_eq!(state(&st, id, 5 * S - 1), "delayed");
    assert_eq!(job(&st, id, 5 * S - 1).time_left, 0);
    assert_eq!(
        st.reserve(c, Some(0), 5 * S - 1),
        ReserveOutcome::Now(Delivery::TimedOut)
    );

    tick(&mut st, 5 * S);
    assert_eq!(state(&st, id, 5 * S), "ready");
    assert_eq!(job(&st, id, 5 * S).time_left, 0);
    assert_eq!(st.stats().delayed, 0);
    assert_eq!(st.peek_ready(c).map(|(i, _)| i), Some(id));
    assert_eq!(reserve_now(&mut st, c, 5 * S), id);
}

#[test]
fn delayed_job_is_served_to_a_waiting_reserve_when_it_ends() {
    let mut st = store();
    let p = conn(&mut st);
    let (w, wake) = connect(&mut st);
    reserve_waits(&mut st, w, None, 0);
    let id = put(&mut st, p, 0, 2, 60, 0);
    assert_eq!(st.take_delivery(w), None);
    assert_eq!(wake_all(&mut st), 0);
    tick(&mut st, 2 * S);
    assert_eq!(mailbox_job(&mut st, w), id);
    assert_eq!(wake_all(&mut st), 1);
    assert_eq!(wake.count(), 1);
    assert_eq!(state(&st, id, 2 * S), "reserved");
    assert_eq!(st.stats().current_waiting, 0);
}

#[test]
fn release_with_delay_delays_the_job() {
    let mut st = store();
    let c = conn(&mut st);
    let id = put(&mut st, c, 3, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    assert!(st.release(c, id, 4, 2, S));
    ok(&st);
    let j = job(&st, id, S);
    assert_eq!(
        (j.state, j.pri, j.delay, j.time_left, j.releases),
        ("delayed", 4, 2, 2, 1)
    );
    tick(&mut st, 3 * S - 1);
    assert_eq!(state(&st, id, 3 * S - 1), "delayed");
    tick(&mut st, 3 * S);
    assert_eq!(state(&st, id, 3 * S), "ready");
}

// ----- TTR ----------------------------------------------------------------------

#[test]
fn ttr_expiry_returns_the_job_and_counts_timeouts() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let id = put(&mut st, c1, 0, 0, 2, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), id);
    assert_eq!(job(&st, id, 0).time_left, 2);
    assert_eq!(st.next_deadline(), Some(2 * S));
    tick(&mut st, 2 * S - 1);
    assert_eq!(state(&st, id, 2 * S - 1), "reserved");
    assert_eq!(st.stats().job_timeouts, 0);

    tick(&mut st, 2 * S);
    assert_eq!(state(&st, id, 2 * S), "ready");
    assert_eq!(job(&st, id, 2 * S).timeouts, 1);
    assert_eq!(st.stats().job_timeouts, 1);
    assert_eq!(st.stats().reserved, 0);
    // c1 no longer holds it.
    assert!(!st.touch(c1, id, 2 * S));
    assert!(!st.release(c1, id, 0, 0, 2 * S));
    assert!(!st.bury(c1, id, 0));

    assert_eq!(reserve_now(&mut st, c2, 2 * S), id);
    assert!(!st.delete(c1, id));
    assert_eq!(job(&st, id, 2 * S).reserves, 2);
    tick(&mut st, 4 * S);
    assert_eq!(job(&st, id, 4 * S).timeouts, 2);
    assert_eq!(st.stats().job_timeouts, 2);
}

#[test]
fn expired_job_goes_to_a_waiting_reserve() {
    let mut st = store();
    let c1 = conn(&mut st);
    let (c2, wake) = connect(&mut st);
    let id = put(&mut st, c1, 0, 0, 2, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), id);
    reserve_waits(&mut st, c2, None, S);
    tick(&mut st, 2 * S);
    assert_eq!(mailbox_job(&mut st, c2), id);
    wake_all(&mut st);
    assert_eq!(wake.count(), 1);
    assert!(st.delete(c2, id));
}

#[test]
fn touch_restarts_the_ttr() {
    let mut st = store();
    let c = conn(&mut st);
    let other = conn(&mut st);
    let id = put(&mut st, c, 0, 0, 3, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    assert_eq!(
        st.reserve(c, Some(0), 2 * S),
        ReserveOutcome::Now(Delivery::DeadlineSoon)
    );
    assert!(!st.touch(other, id, 2 * S));
    assert!(st.touch(c, id, 2 * S));
    ok(&st);
    assert_eq!(job(&st, id, 2 * S).time_left, 3);
    // No longer within the margin.
    assert_eq!(
        st.reserve(c, Some(0), 2 * S),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    tick(&mut st, 3 * S);
    assert_eq!(state(&st, id, 3 * S), "reserved");
    tick(&mut st, 5 * S);
    assert_eq!(state(&st, id, 5 * S), "ready");
    assert_eq!(st.stats().job_timeouts, 1);
    assert!(!st.touch(c, id, 5 * S));
}

// ----- DEADLINE_SOON ------------------------------------------------------------

#[test]
fn reserve_within_the_margin_answers_deadline_soon_at_once() {
    let mut st = store();
    let c = conn(&mut st);
    let id = put(&mut st, c, 0, 0, 3, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    // The margin starts 1 s before the deadline (3 s).
    assert_eq!(
        st.reserve(c, Some(0), S),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    assert_eq!(
        st.reserve(c, Some(0), 2 * S - 1),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
    assert_eq!(
        st.reserve(c, None, 2 * S),
        ReserveOutcome::Now(Delivery::DeadlineSoon)
    );
    assert_eq!(
        st.reserve(c, Some(5), 2 * S),
        ReserveOutcome::Now(Delivery::DeadlineSoon)
    );
    assert_eq!(
        st.reserve(c, Some(0), 2 * S),
        ReserveOutcome::Now(Delivery::DeadlineSoon)
    );
    assert_eq!(st.stats().current_waiting, 0);
    ok(&st);

    // A ready job is reserved instead.
    let next = put(&mut st, c, 0, 0, 3, 2 * S);
    assert_eq!(got(st.reserve(c, None, 2 * S + 1)), next);
    ok(&st);
}

#[test]
fn ready_job_in_a_paused_tube_defers_deadline_soon_to_the_next_tick() {
    // beanstalkd only answers DEADLINE_SOON at once when no watched tube has a
    // ready job, paused or not; otherwise the wait ends at the margin timer.
    let mut st = store();
    let (c, wake) = connect(&mut st);
    let id = put(&mut st, c, 0, 0, 3, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    st.watch(c, b"p");
    let paused = put_in(&mut st, c, "p", 0, 0);
    assert!(st.pause_tube(b"p", 100, 0));
    assert_eq!(
        st.reserve(c, Some(0), 2 * S),
        ReserveOutcome::Now(Delivery::DeadlineSoon)
    );
    reserve_waits(&mut st, c, None, 2 * S);
    tick(&mut st, 2 * S);
    assert_eq!(st.take_delivery(c), Some(Delivery::DeadlineSoon));
    wake_all(&mut st);
    assert_eq!(wake.count(), 1);
    assert_eq!(state(&st, paused, 2 * S), "ready");
}

#[test]
fn ttr_of_one_second_is_within_the_margin_at_once() {
    let mut st = store();
    let c = conn(&mut st);
    for ttr in [1, 0] {
        let id = put(&mut st, c, 0, 0, ttr, 10 * S);
        assert_eq!(job(&st, id, 10 * S).ttr, 1);
        assert_eq!(reserve_now(&mut st, c, 10 * S), id);
        assert_eq!(
            st.reserve(c, None, 10 * S),
            ReserveOutcome::Now(Delivery::DeadlineSoon)
        );
        assert!(st.delete(c, id));
    }
}

#[test]
fn waiting_reserve_gets_deadline_soon_when_the_margin_starts() {
    let mut st = store();
    let (c, wake) = connect(&mut st);
    let id = put(&mut st, c, 0, 0, 5, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    reserve_waits(&mut st, c, None, S);
    assert_eq!(st.stats().current_waiting, 1);
    assert_eq!(tube(&st, "default", S).waiting, 1);
    assert_eq!(st.next_deadline(), Some(4 * S));

    tick(&mut st, 4 * S - 1);
    assert_eq!(st.take_delivery(c), None);
    assert_eq!(wake_all(&mut st), 0);

    tick(&mut st, 4 * S);
    assert_eq!(st.take_delivery(c), Some(Delivery::DeadlineSoon));
    assert_eq!(wake_all(&mut st), 1);
    assert_eq!(wake.count(), 1);
    assert_eq!(st.stats().current_waiting, 0);
    assert_eq!(tube(&st, "default", 4 * S).waiting, 0);
    assert_eq!(state(&st, id, 4 * S), "reserved");
    assert_eq!(job(&st, id, 4 * S).time_left, 1);

    tick(&mut st, 5 * S);
    assert_eq!(state(&st, id, 5 * S), "ready");
    assert_eq!(st.take_delivery(c), None);
}

#[test]
fn waiting_reserve_with_timeout_ends_at_whichever_comes_first() {
    let mut st = store();
    let c = conn(&mut st);
    let id = put(&mut st, c, 0, 0, 5, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    // Timeout (1 s + 10 s) after the margin (4 s): DEADLINE_SOON at 4 s.
    reserve_waits(&mut st, c, Some(10), S);
    tick(&mut st, 4 * S);
    assert_eq!(st.take_delivery(c), Some(Delivery::DeadlineSoon));
    assert!(st.touch(c, id, 4 * S));
    // Now the deadline is 9 s, margin 8 s; a 2 s timeout at 5 s ends first.
    reserve_waits(&mut st, c, Some(2), 5 * S);
    tick(&mut st, 7 * S - 1);
    assert_eq!(st.take_delivery(c), None);
    tick(&mut st, 7 * S);
    assert_eq!(st.take_delivery(c), Some(Delivery::TimedOut));
    assert_eq!(state(&st, id, 7 * S), "reserved");
}
