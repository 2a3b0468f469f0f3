//! A connection's work with its panics caught, so one connection's bug closes that
//! connection and nothing else.
//!
//! tokio already catches a panic at the edge of every task (the worker thread and the
//! other connections go on), but then the task's own clean-up never runs: the
//! connection would stay registered in the store, holding its reserved jobs until
//! their TTR and counting as a current connection. Catching it one level down lets
//! the connection task close it the ordinary way. The release profile must keep
//! `panic = "unwind"` for either to work (see Cargo.toml).

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

/// `inner`, whose panic becomes `Err` with the panic's message.
pub struct Caught<F> {
    // Boxed so the future can be polled pinned without unsafe projection; one
    // allocation per connection, not per poll.
    inner: Pin<Box<F>>,
}

impl<F: Future> Caught<F> {
    pub fn new(inner: F) -> Self {
        Caught {
            inner: Box::pin(inner),
        }
    }
}

impl<F> std::fmt::Debug for Caught<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Caught")
    }
}

impl<F: Future> Future for Caught<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Unwind safety: after a panic the inner future is never polled again, and
        // the state it shares (the store) is behind a lock whose poisoning the server
        // ignores, because every change to it completes before anything can fail.
        let inner = self.inner.as_mut();
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(payload) => Poll::Ready(Err(message(&*payload))),
        }
    }
}

/// The text a panic was raised with (`panic!("...")` gives a `&str` or a `String`).
fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
