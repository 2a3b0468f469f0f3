//! Tests of the store through its public methods. Time is the `now` argument, so
//! every deadline is hit exactly; `check_invariants` runs after every change.
//!
//! The unit tests pin down one behaviour each, grouped by topic in the modules
//! below; `model::random_operations_keep_the_model` drives three connections
//! through random command sequences and compares the store with a small reference
//! model after every step.

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

mod jobs;
mod model;
mod sessions;
mod stats;
mod timing;
mod tubes;
mod waiting;

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
