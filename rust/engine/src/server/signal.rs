//! [`ConnSignal`]: how a connection task is woken from outside, for a delivery to its
//! blocked reserve or because the server stops.
//!
//! One per connection, registered in the store with the connection. The task's waker
//! stays registered from one wait to the next (a task's waker does not change), so
//! waiting costs two atomic swaps and an uncontended lock, and nothing has to be
//! subscribed or unregistered around every read the way a `Notify` or `watch` future
//! is: the connection waits for its socket and its signal together on every request
//! (see `input::wait`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::store::Wakeup;

#[derive(Debug, Default)]
pub struct ConnSignal {
    /// Set by [`Wakeup::wake`], cleared when the task sees it: a wake that comes
    /// before the task waits is kept, as a `Notify` permit would be.
    raised: AtomicBool,
    /// The task's waker, once it has waited. A std mutex: it is held only to compare,
    /// replace or call the waker, never across an await, and is contended only when
    /// a wake races the task's own poll.
    waker: Mutex<Option<Waker>>,
}

impl ConnSignal {
    /// Ready (and lowered) once the signal has been raised since it was last seen;
    /// otherwise the task is woken when it is.
    pub fn poll_raised(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.raised.swap(false, Ordering::Acquire) {
            return Poll::Ready(());
        }
        {
            let mut slot = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
            match slot.as_ref() {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *slot = Some(cx.waker().clone()),
            }
        }
        // A raise between the first check and the registration found no waker (or
        // the old one): look again so that it is not lost.
        if self.raised.swap(false, Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Wakeup for ConnSignal {
    fn wake(&self) {
        self.raised.store(true, Ordering::Release);
        let slot = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = slot.as_ref() {
            w.wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_raise_before_the_wait_is_kept() {
        let s = ConnSignal::default();
        s.wake();
        poll_fn(|cx| s.poll_raised(cx)).await;
        // Seen once, then lowered.
        let again = poll_fn(|cx| Poll::Ready(s.poll_raised(cx))).await;
        assert!(again.is_pending());
    }

    #[tokio::test]
    async fn a_raise_wakes_the_waiting_task() {
        let s = Arc::new(ConnSignal::default());
        let waiter = tokio::spawn({
            let s = Arc::clone(&s);
            async move { poll_fn(|cx| s.poll_raised(cx)).await }
        });
        tokio::task::yield_now().await;
        s.wake();
        waiter.await.expect("the waiter ends");
    }
}
