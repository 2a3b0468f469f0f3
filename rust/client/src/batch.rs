//! Pipelined batches: many commands written ahead of their replies, in bounded windows.
//!
//! Commands go out in chunks of half the window, and a new chunk is written only when
//! the replies outstanding fall to half the window, so the server always has work
//! queued while the client reads, and never more than `window` commands are in
//! flight (which bounds both sides' buffers).

use crate::command::{self, Command, PutLines};
use crate::conn::Connection;
use crate::error::ClientError;
use crate::reply::Reply;

/// Commands in flight by default.
pub const DEFAULT_WINDOW: usize = 1000;

/// Where a batch's source queues its commands.
#[derive(Debug)]
pub struct Queue<'c> {
    conn: &'c mut Connection,
    queued: usize,
}

impl Queue<'_> {
    pub fn push(&mut self, cmd: Command<'_>) -> Result<(), ClientError> {
        self.conn.queue(cmd)?;
        self.queued += 1;
        Ok(())
    }

    /// Queue a put, its line written by (and kept in) `lines`: the same bytes as
    /// `push(Command::Put { .. })`, with less work when puts repeat their settings.
    pub fn push_put(&mut self, lines: &mut PutLines, pri: u32, delay: u32, ttr: u32, body: &[u8]) {
        lines.encode(&mut self.conn.wbuf, pri, delay, ttr, body);
        self.queued += 1;
    }

    /// Commands queued so far in this chunk.
    pub fn len(&self) -> usize {
        self.queued
    }

    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }
}

/// Run a batch.
///
/// `fill(queue, room)` queues up to `room` commands; queueing none ends the batch,
/// and returning an error ends it after the commands already queued. Every reply
/// goes to `handle(index, reply)` in order; when it returns false no more commands
/// are sent, but the replies of those in flight are still read and handed over, so
/// the connection stays in step. `wait` is the server wait of the batch's command
/// (see [`command::server_wait`]).
///
/// Returns the source's error, if it stopped the batch, once every reply is read;
/// a connection failure returns at once (the replies not handed over are lost, and
/// so is the connection).
pub fn pipeline<E>(
    conn: &mut Connection,
    window: usize,
    wait: Option<Option<u32>>,
    mut fill: impl FnMut(&mut Queue<'_>, usize) -> Result<(), E>,
    mut handle: impl FnMut(usize, Reply) -> bool,
) -> Result<Option<E>, ClientError> {
    let window = window.max(1);
    let chunk = window.div_ceil(2);
    let mut in_flight = 0usize;
    let mut index = 0usize;
    let mut sending = true;
    let mut source_error = None;
    conn.wbuf.clear();
    loop {
        if sending && in_flight + chunk <= window {
            let mut queue = Queue { conn, queued: 0 };
            let room = window - in_flight;
            let result = fill(&mut queue, room.min(chunk));
            let queued = queue.queued;
            if let Err(e) = result {
                source_error = Some(e);
                sending = false;
            } else if queued == 0 {
                sending = false;
            }
            if queued > 0 {
                conn.send_queued()?;
                in_flight += queued;
            } else {
                conn.wbuf.clear();
            }
            continue;
        }
        if in_flight == 0 {
            return Ok(source_error);
        }
        let low = if sending { window - chunk } else { 0 };
        while in_flight > low {
            let reply = conn.read_reply(wait)?;
            in_flight -= 1;
            if !handle(index, reply) && sending {
                sending = false;
            }
            index += 1;
            if !sending && low > 0 {
                break;
            }
        }
    }
}

/// Why a batch stopped early.
#[derive(Debug)]
pub enum Cause<E> {
    /// The server refused an item, or the connection failed.
    Client(ClientError),
    /// The source of the items failed (for Python: the iterable raised).
    Source(E),
}

/// A batch that stopped at a failing item.
#[derive(Debug)]
pub struct BatchFailure<T, E> {
    /// Index of the item that failed (for a lost connection: the first unanswered).
    pub index: usize,
    pub cause: Cause<E>,
    /// Results acknowledged before the failing item, in order.
    pub done: Vec<T>,
    /// `(index, result)` acknowledged after it: items that were already in flight.
    pub after: Vec<(usize, T)>,
}

/// Keeps the results of a batch as replies come, and the first failure.
#[derive(Debug)]
pub struct Tally<T> {
    pub done: Vec<T>,
    pub after: Vec<(usize, T)>,
    pub failed: Option<(usize, ClientError)>,
    /// Replies seen so far.
    pub answered: usize,
}

impl<T> Default for Tally<T> {
    fn default() -> Self {
        Tally {
            done: Vec::new(),
            after: Vec::new(),
            failed: None,
            answered: 0,
        }
    }
}

impl<T> Tally<T> {
    /// Record item `index`'s outcome; false once the batch has failed.
    pub fn record(&mut self, index: usize, outcome: Result<T, ClientError>) -> bool {
        self.answered += 1;
        match outcome {
            Ok(v) if self.failed.is_none() => self.done.push(v),
            Ok(v) => self.after.push((index, v)),
            Err(e) => {
                if self.failed.is_none() {
                    self.failed = Some((index, e));
                }
            }
        }
        self.failed.is_none()
    }

    /// The batch's result, given what [`pipeline`] returned.
    pub fn finish<E>(
        self,
        result: Result<Option<E>, ClientError>,
    ) -> Result<Vec<T>, BatchFailure<T, E>> {
        let (index, cause) = match (self.failed, result) {
            (Some((index, e)), _) => (index, Cause::Client(e)),
            (None, Err(e)) => (self.answered, Cause::Client(e)),
            (None, Ok(Some(e))) => (self.answered, Cause::Source(e)),
            (None, Ok(None)) => return Ok(self.done),
        };
        Err(BatchFailure {
            index,
            cause,
            done: self.done,
            after: self.after,
        })
    }
}

/// Put every body, pipelined; the ids in order.
pub fn put_many<'b>(
    conn: &mut Connection,
    bodies: impl IntoIterator<Item = &'b [u8]>,
    pri: u32,
    delay: u32,
    ttr: u32,
    window: usize,
) -> Result<Vec<u64>, BatchFailure<u64, ClientError>> {
    let mut bodies = bodies.into_iter();
    let mut tally = Tally::default();
    let mut lines = PutLines::default();
    let result = pipeline(
        conn,
        window,
        None,
        |q, room| {
            for body in bodies.by_ref().take(room) {
                q.push_put(&mut lines, pri, delay, ttr, body);
            }
            Ok::<(), ClientError>(())
        },
        |index, reply| {
            let outcome = command::put_id(reply);
            tally.record(index, outcome)
        },
    );
    tally.finish(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorReply;

    fn refused() -> ClientError {
        ClientError::Reply(ErrorReply::JobTooBig)
    }

    #[test]
    fn tally_keeps_results_before_and_after_the_first_failure() {
        let mut t = Tally::default();
        assert!(t.record(0, Ok(10u64)));
        assert!(t.record(1, Ok(11)));
        assert!(!t.record(2, Err(refused())));
        assert!(!t.record(3, Ok(13)));
        assert!(!t.record(4, Err(ClientError::Reply(ErrorReply::NotFound))));
        let f = t.finish::<()>(Ok(None)).expect_err("failed");
        assert_eq!(f.index, 2);
        assert!(matches!(
            f.cause,
            Cause::Client(ClientError::Reply(ErrorReply::JobTooBig))
        ));
        assert_eq!(f.done, vec![10, 11]);
        assert_eq!(f.after, vec![(3, 13)]);
    }

    #[test]
    fn tally_reports_source_and_connection_failures_at_the_first_unanswered_item() {
        let mut t = Tally::default();
        t.record(0, Ok(1u64));
        let f = t.finish(Ok(Some("source broke"))).expect_err("failed");
        assert_eq!((f.index, f.done), (1, vec![1]));
        assert!(matches!(f.cause, Cause::Source("source broke")));

        let mut t = Tally::default();
        t.record(0, Ok(1u64));
        t.record(1, Ok(2));
        let lost = ClientError::Closed { addr: "x".into() };
        let f = t.finish::<()>(Err(lost)).expect_err("failed");
        assert_eq!(f.index, 2);
        assert!(matches!(f.cause, Cause::Client(ClientError::Closed { .. })));
    }

    #[test]
    fn tally_without_failure_is_the_results() {
        let mut t = Tally::default();
        for i in 0..5u64 {
            assert!(t.record(i as usize, Ok(i)));
        }
        assert_eq!(t.finish::<()>(Ok(None)).ok(), Some(vec![0, 1, 2, 3, 4]));
    }
}
