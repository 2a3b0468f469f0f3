//! What the writer thread and its callers signal each other (kicks, sleep,
//! segments made, stop), and the log's failures and recoveries as reported.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::{lock, Failure, LogPipe};
use crate::events::{level, EventHub, EventKind};

impl LogPipe {
    /// Wake the writer thread (cheap when it is busy anyway).
    pub fn kick(&self) {
        self.kicked.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let _g = lock(&self.signal);
            self.wake.notify_one();
        }
    }

    /// Sleep until kicked or stopped, or for at most `timeout`. Returns the stop flag.
    pub(in crate::wal) fn sleep(&self, timeout: std::time::Duration) -> bool {
        let mut stop = lock(&self.signal);
        let deadline = Instant::now() + timeout;
        loop {
            self.sleeping.store(true, Ordering::SeqCst);
            if *stop || self.kicked.swap(false, Ordering::SeqCst) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stop = self
                .wake
                .wait_timeout(stop, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        self.sleeping.store(false, Ordering::SeqCst);
        *stop
    }

    /// Wait (at most `timeout`) until a segment beyond `created` exists. False if
    /// none came, or the log is failing.
    pub fn wait_for_segment(&self, created: u64, timeout: std::time::Duration) -> bool {
        self.kick();
        let deadline = Instant::now() + timeout;
        let mut guard = lock(&self.made_lock);
        loop {
            if self.created.load(Ordering::SeqCst) > created {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.failing() || left.is_zero() {
                return false;
            }
            guard = self
                .made
                .wait_timeout(guard, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The writer made segment `seq` (or failed to: `report` calls this too).
    pub(in crate::wal) fn segment_made(&self, seq: Option<u64>) {
        if let Some(seq) = seq {
            self.created.fetch_max(seq, Ordering::SeqCst);
        }
        let _g = lock(&self.made_lock);
        self.made.notify_all();
    }

    /// Ask the writer to finish what is queued, sync, and exit.
    pub fn stop(&self) {
        *lock(&self.signal) = true;
        self.wake.notify_one();
    }

    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed) != 0
    }

    /// Report log errors and recoveries to the server's events from now on.
    pub fn set_events(&self, hub: Arc<EventHub>) {
        let _ = self.events.set(hub);
    }

    pub(in crate::wal) fn report(&self, cause: Failure, what: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if self.failing.fetch_or(cause as u8, Ordering::SeqCst) == 0 {
            self.segment_made(None);
            let line = format!(
                "log in {}: {what}; puts are refused until it recovers",
                self.dir_name
            );
            match self.events.get() {
                Some(hub) => {
                    hub.server_event(EventKind::LogError, || Some(what.to_owned()));
                    hub.log(level::ERROR, || line);
                }
                None => eprintln!("beanpole: {line}"),
            }
        }
    }

    /// `causes` work again; the log recovers once nothing fails.
    pub(in crate::wal) fn clear_failure(&self, causes: &[Failure]) {
        let bits = causes.iter().fold(0, |b, c| b | *c as u8);
        let before = self.failing.fetch_and(!bits, Ordering::SeqCst);
        if before != 0 && before & !bits == 0 {
            let line = format!("log in {}: recovered", self.dir_name);
            match self.events.get() {
                Some(hub) => {
                    hub.server_event(EventKind::LogRecovered, || None);
                    hub.log(level::WARNING, || line);
                }
                None => eprintln!("beanpole: {line}"),
            }
        }
    }
}
