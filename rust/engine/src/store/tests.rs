//! Tests of the store through its public methods. Time is the `now` argument, so
//! every deadline is hit exactly; `check_invariants` runs after every change.
//!
//! The unit tests pin down one behaviour each; `random_operations_keep_the_model`
//! drives three connections through random command sequences and compares the
//! store with a small reference model after every step.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::{ConnId, Delivery, NotIgnored, PutRefused, ReserveOutcome, Store, Wakeup, SECOND};
use crate::protocol::Op;
use crate::stats::{JobStats, TubeStats};

const S: u64 = SECOND;

// ----- helpers ------------------------------------------------------------------

/// A wakeup that counts how often it was woken.
#[derive(Debug, Default)]
struct Counter(AtomicUsize);

impl Wakeup for Counter {
    fn wake(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counter {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn store() -> Store {
    Store::new(65535)
}

/// A new connection and its wakeup counter.
fn connect(st: &mut Store) -> (ConnId, Arc<Counter>) {
    let wake = Arc::new(Counter::default());
    let id = st.connect(wake.clone());
    ok(st);
    (id, wake)
}

fn conn(st: &mut Store) -> ConnId {
    connect(st).0
}

fn body_of(id: u64) -> Bytes {
    Bytes::from(format!("job {id}\r\n"))
}

fn ok(st: &Store) {
    if let Err(e) = st.check_invariants() {
        panic!("store invariant broken: {e}");
    }
}

/// begin_put + put; returns the id.
fn put(st: &mut Store, c: ConnId, pri: u32, delay: u32, ttr: u32, now: u64) -> u64 {
    let id = st.begin_put(c);
    assert_eq!(st.put(c, id, pri, delay, ttr, body_of(id), now), Ok(id));
    ok(st);
    id
}

fn put_in(st: &mut Store, c: ConnId, tube: &str, pri: u32, now: u64) -> u64 {
    st.use_tube(c, tube.as_bytes());
    put(st, c, pri, 0, 60, now)
}

/// The id of a job handed over at once; panics on anything else.
fn got(outcome: ReserveOutcome) -> u64 {
    match outcome {
        ReserveOutcome::Now(Delivery::Reserved { id, body }) => {
            assert_eq!(body, body_of(id));
            id
        }
        other => panic!("expected a job at once, got {other:?}"),
    }
}

/// reserve-with-timeout 0 that must give a job.
fn reserve_now(st: &mut Store, c: ConnId, now: u64) -> u64 {
    let id = got(st.reserve(c, Some(0), now));
    ok(st);
    id
}

fn reserve_waits(st: &mut Store, c: ConnId, timeout: Option<u32>, now: u64) {
    assert_eq!(st.reserve(c, timeout, now), ReserveOutcome::Waiting);
    ok(st);
}

/// The job left in a connection's mailbox.
fn mailbox_job(st: &mut Store, c: ConnId) -> u64 {
    match st.take_delivery(c) {
        Some(Delivery::Reserved { id, body }) => {
            assert_eq!(body, body_of(id));
            id
        }
        other => panic!("expected a job in the mailbox, got {other:?}"),
    }
}

/// Take and run the queued wakeups; returns how many there were.
fn wake_all(st: &mut Store) -> usize {
    let had = st.has_wakeups();
    let wakeups = st.take_wakeups();
    assert_eq!(had, !wakeups.is_empty());
    for w in &wakeups {
        w.wake();
    }
    assert!(!st.has_wakeups());
    wakeups.len()
}

fn tick(st: &mut Store, now: u64) {
    st.tick(now);
    ok(st);
}

fn job(st: &Store, id: u64, now: u64) -> JobStats {
    st.stats_job(id, now)
        .unwrap_or_else(|| panic!("job {id} not found"))
}

fn state(st: &Store, id: u64, now: u64) -> &'static str {
    st.stats_job(id, now).map_or("gone", |j| j.state)
}

fn tube(st: &Store, name: &str, now: u64) -> TubeStats {
    st.stats_tube(name.as_bytes(), now)
        .unwrap_or_else(|| panic!("tube {name} not found"))
}

fn names(list: Vec<&[u8]>) -> Vec<String> {
    list.into_iter()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}

fn tubes(st: &Store) -> Vec<String> {
    names(st.list_tubes())
}

fn watched(st: &Store, c: ConnId) -> Vec<String> {
    names(st.list_tubes_watched(c))
}

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
fn pause_zero_unpauses_at_the_next_tick() {
    let mut st = store();
    let p = conn(&mut st);
    let id = put_in(&mut st, p, "t", 0, 0);
    let (w, wake) = connect(&mut st);
    st.watch(w, b"t");
    assert!(st.pause_tube(b"t", 100, 0));
    reserve_waits(&mut st, w, None, 0);
    assert!(st.pause_tube(b"t", 0, 5 * S));
    ok(&st);
    assert_eq!(tube(&st, "t", 5 * S).cmd_pause_tube, 2);
    assert_eq!(tube(&st, "t", 5 * S).pause, 0);
    assert_eq!(st.take_delivery(w), None);
    let next = st.next_deadline().unwrap();
    assert!(next <= 5 * S + 1, "next deadline {next}");
    tick(&mut st, next);
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

// ----- tubes --------------------------------------------------------------------

#[test]
fn tubes_are_created_on_demand_and_dropped_when_unused() {
    let mut st = store();
    assert_eq!(tubes(&st), vec!["default"]);
    let c = conn(&mut st);
    assert_eq!(st.tube_used(c), b"default");
    assert_eq!(watched(&st, c), vec!["default"]);
    st.use_tube(c, b"a");
    assert_eq!(st.tube_used(c), b"a");
    assert_eq!(tubes(&st), vec!["default", "a"]);
    assert_eq!(st.watch(c, b"b"), 2);
    assert_eq!(st.watch(c, b"b"), 2);
    assert_eq!(tubes(&st), vec!["default", "a", "b"]);
    assert_eq!(st.stats().current_tubes, 3);
    st.use_tube(c, b"default");
    ok(&st);
    assert_eq!(tubes(&st), vec!["default", "b"]);
    // A job keeps its tube alive.
    st.use_tube(c, b"x");
    let id = put(&mut st, c, 0, 0, 60, 0);
    st.use_tube(c, b"default");
    assert_eq!(tubes(&st), vec!["default", "b", "x"]);
    assert_eq!(st.ignore(c, b"b"), Ok(1));
    assert_eq!(tubes(&st), vec!["default", "x"]);
    assert!(st.delete(c, id));
    ok(&st);
    assert_eq!(tubes(&st), vec!["default"]);
    assert_eq!(st.stats_tube(b"x", 0).map(|t| t.total_jobs), None);
    // default stays even when nothing refers to it.
    assert_eq!(st.watch(c, b"other"), 2);
    assert_eq!(st.ignore(c, b"default"), Ok(1));
    st.use_tube(c, b"other");
    assert_eq!(tubes(&st), vec!["default", "other"]);
    st.disconnect(c, 0);
    ok(&st);
    assert_eq!(tubes(&st), vec!["default"]);
    assert_eq!(st.stats().current_tubes, 1);
    // Stats of a tube start afresh when it is created again.
    let c = conn(&mut st);
    st.use_tube(c, b"x");
    assert_eq!(tube(&st, "x", 0).total_jobs, 0);
}

#[test]
fn list_tubes_after_a_drop_puts_the_last_tube_in_its_place() {
    let mut st = store();
    let c = conn(&mut st);
    for name in ["a", "b", "c", "d"] {
        st.watch(c, name.as_bytes());
    }
    assert_eq!(tubes(&st), vec!["default", "a", "b", "c", "d"]);
    assert_eq!(st.ignore(c, b"a"), Ok(4));
    assert_eq!(tubes(&st), vec!["default", "d", "b", "c"]);
    assert_eq!(watched(&st, c), vec!["default", "d", "b", "c"]);
    st.watch(c, b"a");
    assert_eq!(tubes(&st), vec!["default", "d", "b", "c", "a"]);
    assert_eq!(st.ignore(c, b"d"), Ok(4));
    assert_eq!(tubes(&st), vec!["default", "a", "b", "c"]);
    assert_eq!(watched(&st, c), vec!["default", "a", "b", "c"]);
    ok(&st);
}

#[test]
fn ignore_rules() {
    let mut st = store();
    let c = conn(&mut st);
    assert_eq!(st.ignore(c, b"default"), Err(NotIgnored));
    assert_eq!(st.ignore(c, b"missing"), Ok(1));
    assert_eq!(tubes(&st), vec!["default"]);
    assert_eq!(st.watch(c, b"a"), 2);
    assert_eq!(st.ignore(c, b"default"), Ok(1));
    assert_eq!(watched(&st, c), vec!["a"]);
    assert_eq!(st.ignore(c, b"a"), Err(NotIgnored));
    assert_eq!(st.ignore(c, b"default"), Ok(1));
    assert_eq!(watched(&st, c), vec!["a"]);
    ok(&st);
}

#[test]
fn disconnect_returns_reserved_jobs_and_drops_tubes_in_beanstalkd_order() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let held = put(&mut st, c2, 0, 0, 60, 0);
    let other = put(&mut st, c2, 1, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), held);
    assert_eq!(reserve_now(&mut st, c1, 0), other);
    assert_eq!(st.stats().reserved, 2);
    for name in ["a", "b", "c"] {
        st.watch(c1, name.as_bytes());
    }
    st.use_tube(c1, b"d");
    for name in ["f", "g", "h"] {
        st.watch(c2, name.as_bytes());
    }
    // Ignoring default swap-removes it from the watch list: c takes its place.
    assert_eq!(st.ignore(c1, b"default"), Ok(3));
    assert_eq!(watched(&st, c1), vec!["c", "a", "b"]);
    assert_eq!(
        tubes(&st),
        vec!["default", "a", "b", "c", "d", "f", "g", "h"]
    );

    st.disconnect(c1, S);
    ok(&st);
    assert_eq!(state(&st, held, S), "ready");
    assert_eq!(state(&st, other, S), "ready");
    assert_eq!(st.stats().reserved, 0);
    assert_eq!(st.stats().ready, 2);
    assert_eq!(job(&st, held, S).timeouts, 0);
    // The watch list [c, a, b] is emptied by removing element 0 each time (the
    // last taking its place): c, b, a; then the used tube d goes. Each dropped
    // tube's place in the listing is taken by the last tube:
    //   [default a b c d f g h] -c-> [default a b h d f g] -b-> [default a g h d f]
    //   -a-> [default f g h d] -d-> [default f g h]
    assert_eq!(tubes(&st), vec!["default", "f", "g", "h"]);
    assert_eq!(st.stats().current_connections, 1);
    assert_eq!(st.stats().total_connections, 2);
}

#[test]
fn disconnect_drops_watched_tubes_before_the_used_one() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    for name in ["a", "b", "c"] {
        st.watch(c1, name.as_bytes());
    }
    st.use_tube(c1, b"d");
    st.watch(c2, b"e");
    st.watch(c2, b"f");
    // Watch list [default, a, b, c]: default (kept), then c, b, a; then d.
    //   [default a b c d e f] -c-> [default a b f d e] -b-> [default a e f d]
    //   -a-> [default d e f] -d-> [default f e]
    st.disconnect(c1, 0);
    ok(&st);
    assert_eq!(tubes(&st), vec!["default", "f", "e"]);
}

#[test]
fn disconnect_hands_returned_jobs_to_waiting_reserves() {
    let mut st = store();
    let c1 = conn(&mut st);
    let (c2, wake) = connect(&mut st);
    let id = put(&mut st, c1, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), id);
    reserve_waits(&mut st, c2, None, 0);
    st.disconnect(c1, S);
    ok(&st);
    assert_eq!(mailbox_job(&mut st, c2), id);
    wake_all(&mut st);
    assert_eq!(wake.count(), 1);
    assert!(st.delete(c2, id));
}

#[test]
fn connection_ids_are_reused_after_disconnect_without_confusion() {
    let mut st = store();
    let c1 = conn(&mut st);
    let id = put(&mut st, c1, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), id);
    reserve_waits(&mut st, c1, Some(10), 0);
    st.disconnect(c1, 0);
    ok(&st);
    // The slot is likely reused; the old connection's wait timer (10 s) and queue
    // entries must not touch the new one.
    let c2 = conn(&mut st);
    assert_eq!(reserve_now(&mut st, c2, 0), id);
    reserve_waits(&mut st, c2, None, S);
    tick(&mut st, 20 * S);
    assert_eq!(st.take_delivery(c2), None);
    assert_eq!(st.stats().current_waiting, 1);
}

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

// ----- stats --------------------------------------------------------------------

#[test]
fn stats_job_fields() {
    let mut st = store();
    let c = conn(&mut st);
    st.use_tube(c, b"jobs");
    st.watch(c, b"jobs");
    let id = put(&mut st, c, 7, 3, 10, S);
    let j = job(&st, id, 2 * S + S / 2);
    assert_eq!(j.id, id);
    assert_eq!(j.tube, b"jobs");
    assert_eq!(
        (j.state, j.pri, j.age, j.delay, j.ttr, j.time_left, j.file),
        ("delayed", 7, 1, 3, 10, 1, 0)
    );
    assert_eq!(
        (j.reserves, j.timeouts, j.releases, j.buries, j.kicks),
        (0, 0, 0, 0, 0)
    );

    tick(&mut st, 4 * S);
    let j = job(&st, id, 4 * S);
    assert_eq!((j.state, j.age, j.time_left), ("ready", 3, 0));

    assert_eq!(reserve_now(&mut st, c, 4 * S), id);
    assert_eq!(job(&st, id, 4 * S).time_left, 10);
    assert_eq!(job(&st, id, 4 * S + S / 2).time_left, 9);
    assert_eq!(job(&st, id, 4 * S).reserves, 1);

    assert!(st.release(c, id, 8, 0, 5 * S));
    let j = job(&st, id, 5 * S);
    assert_eq!((j.state, j.pri, j.releases, j.delay), ("ready", 8, 1, 0));

    assert_eq!(reserve_now(&mut st, c, 5 * S), id);
    assert!(st.bury(c, id, 9));
    let j = job(&st, id, 5 * S);
    assert_eq!((j.state, j.pri, j.buries, j.time_left), ("buried", 9, 1, 0));

    assert_eq!(st.kick(c, 1, 6 * S), 1);
    assert_eq!(job(&st, id, 6 * S).kicks, 1);
    assert_eq!(reserve_now(&mut st, c, 6 * S), id);
    tick(&mut st, 16 * S);
    let j = job(&st, id, 16 * S);
    assert_eq!(
        (j.state, j.timeouts, j.reserves, j.age),
        ("ready", 1, 3, 15)
    );
    assert!(st.stats_job(999, 0).is_none());
}

#[test]
fn stats_tube_fields() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let c3 = conn(&mut st);
    st.use_tube(c1, b"t");
    st.use_tube(c2, b"t");
    st.watch(c2, b"t");
    st.watch(c3, b"t");
    st.ignore(c3, b"default").unwrap();
    let urgent = put(&mut st, c1, 0, 0, 60, 0);
    let _normal = put(&mut st, c1, 1024, 0, 60, 0);
    let reserved = put(&mut st, c1, 1023, 0, 60, 0);
    let buried = put(&mut st, c1, 0, 0, 60, 0);
    let _delayed = put(&mut st, c1, 0, 5, 60, 0);
    let deleted = put(&mut st, c1, 5000, 0, 60, 0);
    assert!(st.delete(c1, deleted));
    assert_eq!(
        st.reserve_job(c2, reserved, 0).map(|(i, _)| i),
        Some(reserved)
    );
    assert_eq!(st.reserve_job(c2, buried, 0).map(|(i, _)| i), Some(buried));
    assert!(st.bury(c2, buried, 0));
    assert!(st.pause_tube(b"t", 30, 0));
    reserve_waits(&mut st, c3, None, 0);

    let t = tube(&st, "t", 10 * S + 1);
    assert_eq!(t.name, b"t");
    assert_eq!(
        (t.urgent, t.ready, t.reserved, t.delayed, t.buried),
        (1, 2, 1, 1, 1)
    );
    assert_eq!(t.total_jobs, 6);
    assert_eq!((t.using, t.watching, t.waiting), (2, 2, 1));
    assert_eq!(
        (t.cmd_delete, t.cmd_pause_tube, t.pause, t.pause_time_left),
        (1, 1, 30, 19)
    );
    let d = tube(&st, "default", 0);
    assert_eq!(
        (d.using, d.watching, d.waiting, d.total_jobs, d.ready),
        (1, 2, 0, 0, 0)
    );
    assert!(st.stats_tube(b"nope", 0).is_none());
    // Urgent is about ready jobs only: reserving the urgent one drops the count.
    assert_eq!(st.reserve_job(c2, urgent, 0).map(|(i, _)| i), Some(urgent));
    assert_eq!(tube(&st, "t", 0).urgent, 0);
}

#[test]
fn stats_counts() {
    let mut st = store();
    let s = st.stats();
    assert_eq!(
        (
            s.current_tubes,
            s.current_connections,
            s.total_connections,
            s.max_job_size
        ),
        (1, 0, 0, 65535)
    );
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let c3 = conn(&mut st);
    put(&mut st, c1, 0, 0, 60, 0);
    put(&mut st, c1, 2000, 0, 60, 0);
    put(&mut st, c1, 5, 0, 60, 0);
    put(&mut st, c1, 5, 10, 60, 0);
    let b = put(&mut st, c1, 1, 0, 60, 0);
    assert_eq!(st.reserve_job(c2, b, 0).map(|(i, _)| i), Some(b));
    assert!(st.bury(c2, b, 1));
    let r = reserve_now(&mut st, c2, 0);
    st.watch(c3, b"empty");
    st.ignore(c3, b"default").unwrap();
    reserve_waits(&mut st, c3, None, 0);
    st.count(Op::Put);
    st.count(Op::Put);
    st.count(Op::StatsJob);

    let s = st.stats();
    assert_eq!(
        (s.urgent, s.ready, s.reserved, s.delayed, s.buried),
        (1, 2, 1, 1, 1)
    );
    assert_eq!((s.total_jobs, s.job_timeouts), (5, 0));
    assert_eq!(
        (s.current_tubes, s.current_connections, s.total_connections),
        (2, 3, 3)
    );
    assert_eq!(
        (s.current_producers, s.current_workers, s.current_waiting),
        (1, 2, 1)
    );
    assert_eq!(
        (
            s.ops[Op::Put.index()],
            s.ops[Op::StatsJob.index()],
            s.ops[Op::Reserve.index()]
        ),
        (2, 1, 0)
    );
    assert!(!s.draining);

    st.disconnect(c2, 0);
    st.disconnect(c3, 0);
    ok(&st);
    let s = st.stats();
    assert_eq!(state(&st, r, 0), "ready");
    assert_eq!((s.urgent, s.ready, s.reserved), (2, 3, 0));
    assert_eq!(
        (
            s.current_connections,
            s.total_connections,
            s.current_workers,
            s.current_waiting
        ),
        (1, 3, 0, 0)
    );
    assert_eq!((s.current_producers, s.current_tubes), (1, 1));
    st.disconnect(c1, 0);
    assert_eq!(st.stats().current_producers, 0);
}

#[test]
fn drain_mode_refuses_puts() {
    let mut st = store();
    let c = conn(&mut st);
    assert!(!st.draining());
    st.set_draining(true);
    assert!(st.draining());
    assert!(st.stats().draining);
    let id = st.begin_put(c);
    assert_eq!(id, 1);
    assert_eq!(
        st.put(c, id, 0, 0, 60, body_of(id), 0),
        Err(PutRefused::Draining)
    );
    ok(&st);
    assert_eq!(st.peek(id), None);
    assert_eq!(st.stats().total_jobs, 0);
    assert_eq!(st.stats().ready, 0);
    assert_eq!(tube(&st, "default", 0).total_jobs, 0);
    st.set_draining(false);
    assert_eq!(put(&mut st, c, 0, 0, 60, 0), 2);
}

#[test]
fn ids_are_taken_by_begin_put_even_without_a_put() {
    let mut st = store();
    let c = conn(&mut st);
    assert_eq!(st.begin_put(c), 1);
    assert_eq!(st.begin_put(c), 2);
    assert_eq!(put(&mut st, c, 0, 0, 60, 0), 3);
    assert_eq!(st.peek(1), None);
    assert_eq!(st.peek(2), None);
    assert_eq!(st.peek(3), Some((3, body_of(3))));
    assert_eq!(st.alloc_id(), 4);
    assert_eq!(put(&mut st, c, 0, 0, 60, 0), 5);
    assert_eq!(st.stats().current_producers, 1);
}

#[test]
fn stale_timers_do_not_pile_up_after_deletes() {
    let mut st = store();
    let c = conn(&mut st);
    let delayed: Vec<u64> = (0..300).map(|_| put(&mut st, c, 0, 100, 60, 0)).collect();
    for id in delayed {
        assert!(st.delete(c, id));
        ok(&st);
    }
    let ready: Vec<u64> = (0..300).map(|_| put(&mut st, c, 0, 0, 60, 0)).collect();
    for &id in &ready {
        assert_eq!(reserve_now(&mut st, c, 0), id);
    }
    for id in ready {
        assert!(st.delete(c, id));
        ok(&st);
    }
}

#[test]
fn stale_timers_do_not_pile_up_after_tubes_go() {
    let mut st = store();
    let c = conn(&mut st);
    let names: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
    for name in &names {
        st.watch(c, name.as_bytes());
        assert!(st.pause_tube(name.as_bytes(), 100, 0));
    }
    ok(&st);
    st.disconnect(c, 0);
    ok(&st);
    assert_eq!(tubes(&st), vec!["default"]);
}

#[test]
fn repeated_deadlines_at_one_instant_do_not_pile_up_timers() {
    // Commands can share a clock reading; re-arming the same deadline again and
    // again must not grow the timer heap without bound.
    let mut st = store();
    let c = conn(&mut st);
    let id = put(&mut st, c, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    for _ in 0..500 {
        assert!(st.touch(c, id, 0));
        ok(&st);
    }
    for _ in 0..500 {
        assert!(st.release(c, id, 0, 5, 0));
        assert_eq!(st.reserve_job(c, id, 0).map(|(i, _)| i), Some(id));
        ok(&st);
    }
    tick(&mut st, 60 * S);
    assert_eq!(st.stats().job_timeouts, 1);
    assert_eq!(job(&st, id, 60 * S).timeouts, 1);
}

// ----- property test ------------------------------------------------------------

const TUBES: [&str; 3] = ["default", "a", "b"];
const CONNS: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    Put {
        c: usize,
        pri: u32,
        delay: u32,
        ttr: u32,
    },
    BeginPutOnly {
        c: usize,
    },
    Reserve {
        c: usize,
        timeout: Option<u32>,
    },
    ReserveJob {
        c: usize,
        pick: usize,
    },
    Delete {
        c: usize,
        pick: usize,
    },
    Release {
        c: usize,
        pick: usize,
        pri: u32,
        delay: u32,
    },
    Bury {
        c: usize,
        pick: usize,
        pri: u32,
    },
    Touch {
        c: usize,
        pick: usize,
    },
    Kick {
        c: usize,
        bound: u32,
    },
    KickJob {
        pick: usize,
    },
    Use {
        c: usize,
        t: usize,
    },
    Watch {
        c: usize,
        t: usize,
    },
    Ignore {
        c: usize,
        t: usize,
    },
    Pause {
        t: usize,
        delay: u32,
    },
    Reconnect {
        c: usize,
    },
    Abandon {
        c: usize,
    },
    Advance {
        ns: u64,
    },
}

fn pri() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![Just(0u32), Just(1), Just(1023), Just(1024), Just(u32::MAX)]
}

fn delay() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![3 => Just(0u32), 1 => 1..4u32]
}

fn step() -> impl Strategy<Value = Step> {
    let c = 0..CONNS;
    let t = 0..TUBES.len();
    let pick = 0..64usize;
    let timeout = prop_oneof![Just(None), Just(Some(0u32)), (1..4u32).prop_map(Some)];
    let advance = prop_oneof![
        Just(0u64),
        0..3 * S,
        (0..=6u64).prop_map(|k| k * S / 2),
        (1..=3u64).prop_map(|k| k * S - 1),
    ];
    prop_oneof![
        8 => (c.clone(), pri(), delay(), 0..4u32)
            .prop_map(|(c, pri, delay, ttr)| Step::Put { c, pri, delay, ttr }),
        1 => c.clone().prop_map(|c| Step::BeginPutOnly { c }),
        8 => (c.clone(), timeout).prop_map(|(c, timeout)| Step::Reserve { c, timeout }),
        2 => (c.clone(), pick.clone()).prop_map(|(c, pick)| Step::ReserveJob { c, pick }),
        3 => (c.clone(), pick.clone()).prop_map(|(c, pick)| Step::Delete { c, pick }),
        3 => (c.clone(), pick.clone(), pri(), delay())
            .prop_map(|(c, pick, pri, delay)| Step::Release { c, pick, pri, delay }),
        2 => (c.clone(), pick.clone(), pri()).prop_map(|(c, pick, pri)| Step::Bury { c, pick, pri }),
        2 => (c.clone(), pick.clone()).prop_map(|(c, pick)| Step::Touch { c, pick }),
        2 => (c.clone(), 0..4u32).prop_map(|(c, bound)| Step::Kick { c, bound }),
        1 => pick.prop_map(|pick| Step::KickJob { pick }),
        3 => (c.clone(), t.clone()).prop_map(|(c, t)| Step::Use { c, t }),
        3 => (c.clone(), t.clone()).prop_map(|(c, t)| Step::Watch { c, t }),
        2 => (c.clone(), t.clone()).prop_map(|(c, t)| Step::Ignore { c, t }),
        1 => (t, 0..3u32).prop_map(|(t, delay)| Step::Pause { t, delay }),
        1 => c.clone().prop_map(|c| Step::Reconnect { c }),
        1 => c.prop_map(|c| Step::Abandon { c }),
        6 => advance.prop_map(|ns| Step::Advance { ns }),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MState {
    Ready,
    Delayed {
        until: u64,
    },
    /// `seq` orders the buried list.
    Buried {
        seq: u64,
    },
    Reserved {
        by: usize,
        deadline: u64,
    },
}

impl MState {
    fn name(self) -> &'static str {
        match self {
            MState::Ready => "ready",
            MState::Delayed { .. } => "delayed",
            MState::Buried { .. } => "buried",
            MState::Reserved { .. } => "reserved",
        }
    }
}

#[derive(Debug, Clone)]
struct MJob {
    tube: &'static str,
    pri: u32,
    delay: u32,
    ttr: u32,
    created: u64,
    state: MState,
    reserves: u32,
    timeouts: u32,
    releases: u32,
    buries: u32,
    kicks: u32,
}

#[derive(Debug)]
struct MConn {
    id: ConnId,
    wake: Arc<Counter>,
    /// Deliveries taken from the mailbox: the wakeup count must match.
    delivered: usize,
    use_tube: &'static str,
    watch: Vec<&'static str>,
    /// (order among waiters, timeout_at) while blocked in reserve.
    wait: Option<(u64, Option<u64>)>,
    producer: bool,
    worker: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct MTube {
    total_jobs: u64,
    cmd_delete: u64,
    pause_ct: u64,
    /// (length, until) of the last pause.
    pause: Option<(u64, u64)>,
}

/// How deliveries found in mailboxes after a step are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Exactly this (connection, job) or nothing.
    Exactly(Option<(usize, u64)>),
    /// Any job that is ready in a watched tube (several jobs became ready).
    AnyJob,
    /// A tick: jobs, TIMED_OUT after the timeout, DEADLINE_SOON in the margin
    /// (`soon[c]` says whether c's margin had started at the tick's time).
    Tick { soon: [bool; CONNS] },
}

/// The store and a reference model of it, compared after every step.
struct Harness {
    st: Store,
    now: u64,
    jobs: BTreeMap<u64, MJob>,
    /// Ids of deleted jobs (and ones never stored), which must stay unknown.
    gone: Vec<u64>,
    conns: Vec<MConn>,
    tubes: BTreeMap<&'static str, MTube>,
    last_id: u64,
    seq: u64,
    job_timeouts: u64,
    total_jobs: u64,
    total_connections: u64,
}

impl Harness {
    fn new() -> Harness {
        let mut h = Harness {
            st: store(),
            now: 0,
            jobs: BTreeMap::new(),
            gone: Vec::new(),
            conns: Vec::new(),
            tubes: BTreeMap::new(),
            last_id: 0,
            seq: 0,
            job_timeouts: 0,
            total_jobs: 0,
            total_connections: 0,
        };
        h.tubes.insert("default", MTube::default());
        for _ in 0..CONNS {
            let c = h.new_conn();
            h.conns.push(c);
        }
        h
    }

    fn new_conn(&mut self) -> MConn {
        let wake = Arc::new(Counter::default());
        let id = self.st.connect(wake.clone());
        self.total_connections += 1;
        MConn {
            id,
            wake,
            delivered: 0,
            use_tube: "default",
            watch: vec!["default"],
            wait: None,
            producer: false,
            worker: false,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn held(&self, c: usize) -> Vec<u64> {
        self.jobs
            .iter()
            .filter(|(_, j)| matches!(j.state, MState::Reserved { by, .. } if by == c))
            .map(|(&id, _)| id)
            .collect()
    }

    /// A job id to act on: often one `c` holds, else any live one, a deleted one
    /// or one never used.
    fn pick(&self, c: usize, pick: usize) -> u64 {
        let mut ids = self.held(c);
        ids.extend(self.jobs.keys().copied());
        ids.push(self.last_id + 1);
        if let Some(&g) = self.gone.last() {
            ids.push(g);
        }
        ids[pick % ids.len()]
    }

    fn paused(&self, tube: &str) -> bool {
        self.tubes
            .get(tube)
            .and_then(|t| t.pause)
            .is_some_and(|(_, until)| until > self.now)
    }

    fn soon(&self, c: usize, now: u64) -> bool {
        self.jobs.values().any(|j| {
            matches!(j.state, MState::Reserved { by, deadline } if by == c && now >= deadline.saturating_sub(S))
        })
    }

    fn ready_in(&self, tube: &str) -> impl Iterator<Item = (u32, u64)> + '_ {
        let tube = tube.to_owned();
        self.jobs
            .iter()
            .filter(move |(_, j)| j.state == MState::Ready && j.tube == tube)
            .map(|(&id, j)| (j.pri, id))
    }

    /// The longest-waiting connection watching `tube`, if the tube is not paused.
    fn first_waiter(&self, tube: &str) -> Option<usize> {
        if self.paused(tube) {
            return None;
        }
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.watch.contains(&tube))
            .filter_map(|(i, c)| c.wait.map(|(order, _)| (order, i)))
            .min()
            .map(|(_, i)| i)
    }

    fn reserve_in_model(&mut self, c: usize, id: u64) {
        let now = self.now;
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = MState::Reserved {
            by: c,
            deadline: now + u64::from(job.ttr) * S,
        };
        job.reserves += 1;
    }

    fn alive_tubes(&self) -> BTreeSet<&'static str> {
        let mut alive: BTreeSet<&'static str> = BTreeSet::from(["default"]);
        for c in &self.conns {
            alive.insert(c.use_tube);
            alive.extend(c.watch.iter().copied());
        }
        alive.extend(self.jobs.values().map(|j| j.tube));
        alive
    }

    /// Forget the stats of tubes that were dropped; start those that appeared.
    fn sync_tubes(&mut self) {
        let alive = self.alive_tubes();
        self.tubes.retain(|name, _| alive.contains(name));
        for name in alive {
            self.tubes.entry(name).or_default();
        }
    }

    /// Take every mailbox and judge what was delivered; then the wakeups.
    fn drain(&mut self, expect: Expect) {
        let mut seen = Vec::new();
        for c in 0..CONNS {
            let d = self.st.take_delivery(self.conns[c].id);
            let Some((_, timeout_at)) = self.conns[c].wait else {
                assert_eq!(d, None, "conn {c} was not waiting");
                continue;
            };
            let Some(d) = d else { continue };
            self.conns[c].wait = None;
            self.conns[c].delivered += 1;
            match d {
                Delivery::Reserved { id, body } => {
                    assert_eq!(body, body_of(id));
                    let job = self
                        .jobs
                        .get(&id)
                        .unwrap_or_else(|| panic!("delivered unknown job {id}"));
                    assert_eq!(
                        job.state,
                        MState::Ready,
                        "job {id} delivered to conn {c} but not free"
                    );
                    assert!(
                        self.conns[c].watch.contains(&job.tube),
                        "job {id}: tube not watched by {c}"
                    );
                    assert!(
                        !self.paused(job.tube),
                        "job {id} delivered from a paused tube"
                    );
                    self.reserve_in_model(c, id);
                    seen.push((c, id));
                }
                Delivery::DeadlineSoon => {
                    let Expect::Tick { soon } = expect else {
                        panic!("DEADLINE_SOON outside a tick")
                    };
                    assert!(soon[c], "conn {c}: DEADLINE_SOON outside the margin");
                }
                Delivery::TimedOut => {
                    assert!(
                        matches!(expect, Expect::Tick { .. }),
                        "TIMED_OUT outside a tick"
                    );
                    assert!(
                        timeout_at.is_some_and(|t| t <= self.now),
                        "conn {c}: TIMED_OUT too early"
                    );
                }
            }
        }
        if let Expect::Exactly(want) = expect {
            assert_eq!(
                seen,
                want.into_iter().collect::<Vec<_>>(),
                "wrong waiter served"
            );
        }
        let wakeups = self.st.take_wakeups();
        for w in &wakeups {
            w.wake();
        }
        for (c, conn) in self.conns.iter().enumerate() {
            assert_eq!(
                conn.wake.count(),
                conn.delivered,
                "conn {c}: wakeups vs deliveries"
            );
        }
    }

    fn apply(&mut self, step: &Step) {
        // A connection blocked in reserve sends nothing but can hang up.
        let blocked = |c: &usize| self.conns[*c].wait.is_some();
        let skip = match step {
            Step::Put { c, .. }
            | Step::BeginPutOnly { c }
            | Step::Reserve { c, .. }
            | Step::ReserveJob { c, .. }
            | Step::Delete { c, .. }
            | Step::Release { c, .. }
            | Step::Bury { c, .. }
            | Step::Touch { c, .. }
            | Step::Kick { c, .. }
            | Step::Use { c, .. }
            | Step::Watch { c, .. }
            | Step::Ignore { c, .. } => blocked(c),
            _ => false,
        };
        if skip {
            return;
        }
        let now = self.now;
        match *step {
            Step::Put { c, pri, delay, ttr } => {
                let conn = self.conns[c].id;
                let id = self.st.begin_put(conn);
                assert!(id > self.last_id, "ids must increase");
                self.last_id = id;
                self.conns[c].producer = true;
                assert_eq!(
                    self.st.put(conn, id, pri, delay, ttr, body_of(id), now),
                    Ok(id)
                );
                let tube = self.conns[c].use_tube;
                let state = if delay > 0 {
                    MState::Delayed {
                        until: now + u64::from(delay) * S,
                    }
                } else {
                    MState::Ready
                };
                self.jobs.insert(
                    id,
                    MJob {
                        tube,
                        pri,
                        delay,
                        ttr: ttr.max(1),
                        created: now,
                        state,
                        reserves: 0,
                        timeouts: 0,
                        releases: 0,
                        buries: 0,
                        kicks: 0,
                    },
                );
                self.total_jobs += 1;
                self.tubes.entry(tube).or_default().total_jobs += 1;
                let want = if delay == 0 {
                    self.first_waiter(tube).map(|w| (w, id))
                } else {
                    None
                };
                self.drain(Expect::Exactly(want));
            }
            Step::BeginPutOnly { c } => {
                let id = self.st.begin_put(self.conns[c].id);
                assert!(id > self.last_id, "ids must increase");
                self.last_id = id;
                self.gone.push(id);
                self.conns[c].producer = true;
            }
            Step::Reserve { c, timeout } => {
                let conn = self.conns[c].id;
                self.conns[c].worker = true;
                let watch = self.conns[c].watch.clone();
                let soon = self.soon(c, now);
                let any_ready = watch.iter().any(|t| self.ready_in(t).next().is_some());
                let best = watch
                    .iter()
                    .filter(|t| !self.paused(t))
                    .flat_map(|t| self.ready_in(t))
                    .min();
                let want = if soon && !any_ready {
                    ReserveOutcome::Now(Delivery::DeadlineSoon)
                } else if let Some((_, id)) = best {
                    ReserveOutcome::Now(Delivery::Reserved {
                        id,
                        body: body_of(id),
                    })
                } else if timeout == Some(0) {
                    ReserveOutcome::Now(if soon {
                        Delivery::DeadlineSoon
                    } else {
                        Delivery::TimedOut
                    })
                } else {
                    ReserveOutcome::Waiting
                };
                assert_eq!(self.st.reserve(conn, timeout, now), want);
                match want {
                    ReserveOutcome::Now(Delivery::Reserved { id, .. }) => {
                        self.reserve_in_model(c, id)
                    }
                    ReserveOutcome::Waiting => {
                        let order = self.next_seq();
                        self.conns[c].wait = Some((order, timeout.map(|t| now + u64::from(t) * S)));
                    }
                    ReserveOutcome::Now(_) => {}
                }
                self.drain(Expect::Exactly(None));
            }
            Step::ReserveJob { c, pick } => {
                let id = self.pick(c, pick);
                let free = self
                    .jobs
                    .get(&id)
                    .is_some_and(|j| !matches!(j.state, MState::Reserved { .. }));
                let got = self.st.reserve_job(self.conns[c].id, id, now);
                if free {
                    assert_eq!(got, Some((id, body_of(id))));
                    self.conns[c].worker = true;
                    self.reserve_in_model(c, id);
                } else {
                    assert_eq!(got, None, "reserve-job {id}");
                }
            }
            Step::Delete { c, pick } => {
                let id = self.pick(c, pick);
                let allowed = self
                    .jobs
                    .get(&id)
                    .is_some_and(|j| !matches!(j.state, MState::Reserved { by, .. } if by != c));
                assert_eq!(
                    self.st.delete(self.conns[c].id, id),
                    allowed,
                    "delete {id} by {c}"
                );
                if allowed {
                    let job = self.jobs.remove(&id).unwrap();
                    self.tubes.get_mut(job.tube).unwrap().cmd_delete += 1;
                    self.gone.push(id);
                }
            }
            Step::Release {
                c,
                pick,
                pri,
                delay,
            } => {
                let id = self.pick(c, pick);
                let mine = self.held(c).contains(&id);
                assert_eq!(
                    self.st.release(self.conns[c].id, id, pri, delay, now),
                    mine,
                    "release {id}"
                );
                if mine {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.pri = pri;
                    job.delay = delay;
                    job.releases += 1;
                    job.state = if delay > 0 {
                        MState::Delayed {
                            until: now + u64::from(delay) * S,
                        }
                    } else {
                        MState::Ready
                    };
                    let tube = job.tube;
                    let want = if delay == 0 {
                        self.first_waiter(tube).map(|w| (w, id))
                    } else {
                        None
                    };
                    self.drain(Expect::Exactly(want));
                }
            }
            Step::Bury { c, pick, pri } => {
                let id = self.pick(c, pick);
                let mine = self.held(c).contains(&id);
                assert_eq!(self.st.bury(self.conns[c].id, id, pri), mine, "bury {id}");
                if mine {
                    let seq = self.next_seq();
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.pri = pri;
                    job.buries += 1;
                    job.state = MState::Buried { seq };
                }
            }
            Step::Touch { c, pick } => {
                let id = self.pick(c, pick);
                let mine = self.held(c).contains(&id);
                assert_eq!(self.st.touch(self.conns[c].id, id, now), mine, "touch {id}");
                if mine {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.state = MState::Reserved {
                        by: c,
                        deadline: now + u64::from(job.ttr) * S,
                    };
                }
            }
            Step::Kick { c, bound } => {
                let tube = self.conns[c].use_tube;
                let mut buried: Vec<(u64, u64)> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.tube == tube)
                    .filter_map(|(&id, j)| match j.state {
                        MState::Buried { seq } => Some((seq, id)),
                        _ => None,
                    })
                    .collect();
                let mut delayed: Vec<(u64, u64)> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.tube == tube)
                    .filter_map(|(&id, j)| match j.state {
                        MState::Delayed { until } => Some((until, id)),
                        _ => None,
                    })
                    .collect();
                buried.sort_unstable();
                delayed.sort_unstable();
                let from = if buried.is_empty() { delayed } else { buried };
                let kicked: Vec<u64> = from
                    .iter()
                    .take(bound as usize)
                    .map(|&(_, id)| id)
                    .collect();
                assert_eq!(
                    self.st.kick(self.conns[c].id, bound, now),
                    kicked.len() as u32,
                    "kick {bound}"
                );
                for id in kicked {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.kicks += 1;
                    job.state = MState::Ready;
                }
                self.drain(Expect::AnyJob);
            }
            Step::KickJob { pick } => {
                let id = self.pick(0, pick);
                let kickable = self.jobs.get(&id).is_some_and(|j| {
                    matches!(j.state, MState::Buried { .. } | MState::Delayed { .. })
                });
                assert_eq!(self.st.kick_job(id, now), kickable, "kick-job {id}");
                if kickable {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.kicks += 1;
                    job.state = MState::Ready;
                    let tube = job.tube;
                    let want = self.first_waiter(tube).map(|w| (w, id));
                    self.drain(Expect::Exactly(want));
                }
            }
            Step::Use { c, t } => {
                self.st.use_tube(self.conns[c].id, TUBES[t].as_bytes());
                self.conns[c].use_tube = TUBES[t];
            }
            Step::Watch { c, t } => {
                let n = self.st.watch(self.conns[c].id, TUBES[t].as_bytes());
                let watch = &mut self.conns[c].watch;
                if !watch.contains(&TUBES[t]) {
                    watch.push(TUBES[t]);
                }
                assert_eq!(n, watch.len());
            }
            Step::Ignore { c, t } => {
                let got = self.st.ignore(self.conns[c].id, TUBES[t].as_bytes());
                let watch = &mut self.conns[c].watch;
                let want = match watch.iter().position(|&w| w == TUBES[t]) {
                    Some(_) if watch.len() < 2 => Err(NotIgnored),
                    Some(i) => {
                        watch.swap_remove(i);
                        Ok(watch.len())
                    }
                    None => Ok(watch.len()),
                };
                assert_eq!(got, want);
            }
            Step::Pause { t, delay } => {
                let name = TUBES[t];
                let exists = self.tubes.contains_key(name);
                assert_eq!(self.st.pause_tube(name.as_bytes(), delay, now), exists);
                if exists {
                    let length = (u64::from(delay) * S).max(1);
                    let tube = self.tubes.get_mut(name).unwrap();
                    tube.pause = Some((length, now + length));
                    tube.pause_ct += 1;
                }
            }
            Step::Reconnect { c } => {
                let old = self.conns[c].id;
                self.conns[c].wait = None;
                for id in self.held(c) {
                    self.jobs.get_mut(&id).unwrap().state = MState::Ready;
                }
                self.conns[c].watch.clear();
                self.conns[c].use_tube = "default";
                self.st.disconnect(old, now);
                self.drain(Expect::AnyJob);
                self.sync_tubes();
                self.conns[c] = self.new_conn();
            }
            Step::Abandon { c } => {
                let got = self.st.abandon_wait(self.conns[c].id);
                if self.conns[c].wait.take().is_some() {
                    assert_eq!(got, Some(Delivery::TimedOut));
                } else {
                    assert_eq!(got, None);
                }
            }
            Step::Advance { ns } => {
                self.now += ns;
                let now = self.now;
                let soon: [bool; CONNS] =
                    std::array::from_fn(|c| self.conns[c].wait.is_some() && self.soon(c, now));
                self.st.tick(now);
                for job in self.jobs.values_mut() {
                    match job.state {
                        MState::Delayed { until } if until <= now => job.state = MState::Ready,
                        MState::Reserved { deadline, .. } if deadline <= now => {
                            job.state = MState::Ready;
                            job.timeouts += 1;
                            self.job_timeouts += 1;
                        }
                        _ => {}
                    }
                }
                self.drain(Expect::Tick { soon });
                // Whoever still waits has neither timed out nor entered the margin.
                for (c, conn) in self.conns.iter().enumerate() {
                    if let Some((_, timeout_at)) = conn.wait {
                        assert!(
                            !timeout_at.is_some_and(|t| t <= now),
                            "conn {c} should have timed out"
                        );
                        assert!(!self.soon(c, now), "conn {c} should have had DEADLINE_SOON");
                    }
                }
            }
        }
    }

    /// Compare everything the store reports with the model.
    fn check(&mut self) {
        self.sync_tubes();
        ok(&self.st);
        // Every delivery was taken and judged by the step that caused it.
        assert!(!self.st.has_wakeups(), "wakeups left over");
        for (c, conn) in self.conns.iter().enumerate() {
            assert_eq!(
                self.st.take_delivery(conn.id),
                None,
                "conn {c}: delivery left over"
            );
        }
        let now = self.now;
        let st = &self.st;

        for (&id, j) in &self.jobs {
            let s = st
                .stats_job(id, now)
                .unwrap_or_else(|| panic!("live job {id} not found"));
            assert_eq!(s.state, j.state.name(), "state of job {id}");
            assert_eq!(s.tube, j.tube.as_bytes(), "tube of job {id}");
            assert_eq!(
                (s.pri, s.delay, s.ttr),
                (j.pri, u64::from(j.delay), u64::from(j.ttr)),
                "job {id}"
            );
            assert_eq!(s.age, (now - j.created) / S, "age of job {id}");
            let left = match j.state {
                MState::Delayed { until } => (until as i64 - now as i64) / S as i64,
                MState::Reserved { deadline, .. } => (deadline as i64 - now as i64) / S as i64,
                _ => 0,
            };
            assert_eq!(s.time_left, left, "time-left of job {id}");
            assert_eq!(
                (s.reserves, s.timeouts, s.releases, s.buries, s.kicks),
                (j.reserves, j.timeouts, j.releases, j.buries, j.kicks),
                "counters of job {id}"
            );
        }
        for &id in self.gone.iter().rev().take(8) {
            assert!(
                st.stats_job(id, now).is_none(),
                "deleted job {id} still found"
            );
            assert_eq!(st.peek(id), None);
        }

        let count = |name: &str| {
            self.jobs
                .values()
                .filter(|j| j.state.name() == name)
                .count() as u64
        };
        let s = st.stats();
        assert_eq!(
            s.ready + s.reserved + s.delayed + s.buried,
            self.jobs.len() as u64
        );
        assert_eq!(
            (s.ready, s.reserved, s.delayed, s.buried),
            (
                count("ready"),
                count("reserved"),
                count("delayed"),
                count("buried")
            )
        );
        let urgent = self
            .jobs
            .values()
            .filter(|j| j.state == MState::Ready && j.pri < 1024)
            .count() as u64;
        assert_eq!(s.urgent, urgent);
        assert_eq!(
            (s.total_jobs, s.job_timeouts),
            (self.total_jobs, self.job_timeouts)
        );
        assert_eq!(s.current_tubes, self.tubes.len() as u64);
        assert_eq!(
            (s.current_connections, s.total_connections),
            (CONNS as u64, self.total_connections)
        );
        let flags = |f: fn(&MConn) -> bool| self.conns.iter().filter(|c| f(c)).count() as u64;
        assert_eq!(s.current_producers, flags(|c| c.producer));
        assert_eq!(s.current_workers, flags(|c| c.worker));
        assert_eq!(s.current_waiting, flags(|c| c.wait.is_some()));

        let listed = tubes(st);
        let set: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
        assert_eq!(
            set.len(),
            listed.len(),
            "duplicate tubes listed: {listed:?}"
        );
        assert_eq!(set, self.tubes.keys().copied().collect(), "list-tubes");
        for (&name, mt) in &self.tubes {
            let t = st.stats_tube(name.as_bytes(), now).unwrap();
            let in_tube = |state: &str| {
                self.jobs
                    .values()
                    .filter(|j| j.tube == name && j.state.name() == state)
                    .count() as u64
            };
            let urgent = self.ready_in(name).filter(|&(pri, _)| pri < 1024).count() as u64;
            assert_eq!(
                (t.urgent, t.ready, t.reserved, t.delayed, t.buried),
                (
                    urgent,
                    in_tube("ready"),
                    in_tube("reserved"),
                    in_tube("delayed"),
                    in_tube("buried")
                ),
                "tube {name}"
            );
            let using = self.conns.iter().filter(|c| c.use_tube == name).count() as u64;
            let watching = self
                .conns
                .iter()
                .filter(|c| c.watch.contains(&name))
                .count() as u64;
            let waiting = self
                .conns
                .iter()
                .filter(|c| c.wait.is_some() && c.watch.contains(&name))
                .count() as u64;
            assert_eq!(
                (t.using, t.watching, t.waiting),
                (using, watching, waiting),
                "tube {name}"
            );
            assert_eq!(
                (t.total_jobs, t.cmd_delete, t.cmd_pause_tube),
                (mt.total_jobs, mt.cmd_delete, mt.pause_ct),
                "tube {name}"
            );
            let (pause, left) = match mt.pause {
                Some((length, until)) if until > now => (length / S, (until - now) / S),
                _ => (0, 0),
            };
            assert_eq!(
                (t.pause, t.pause_time_left),
                (pause, left),
                "pause of tube {name}"
            );
        }

        for (c, conn) in self.conns.iter().enumerate() {
            assert_eq!(
                st.tube_used(conn.id),
                conn.use_tube.as_bytes(),
                "conn {c} uses"
            );
            assert_eq!(watched(st, conn.id), conn.watch, "conn {c} watches");
            // The store's own invariant: nobody waits on an open tube with ready jobs.
            if conn.wait.is_some() {
                for t in &conn.watch {
                    assert!(
                        self.paused(t) || self.ready_in(t).next().is_none(),
                        "conn {c} waits while {t} has ready jobs"
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn random_operations_keep_the_model(steps in proptest::collection::vec(step(), 1..200)) {
        let mut h = Harness::new();
        h.check();
        for step in &steps {
            h.apply(step);
            h.check();
        }
    }
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
