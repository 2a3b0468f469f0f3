//! Pipelined batches: many commands written ahead of their replies, in bounded windows.
//!
//! Commands go out in chunks of half the window, and a new chunk is written only when
//! the replies outstanding fall to half the window, so the server always has work
//! queued while the client reads, and never more than `window` commands are in
//! flight (which bounds both sides' buffers).

use crate::command::Command;
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
/// (see [`Command::server_wait`]).
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

/// A batch that stopped at a failing item.
#[derive(Debug)]
pub struct BatchFailure {
    /// Index of the item that failed (for a lost connection: the first unanswered).
    pub index: usize,
    pub error: ClientError,
    /// Ids acknowledged before the failing item, in order.
    pub done: Vec<u64>,
    /// `(index, id)` acknowledged after it: commands already in flight.
    pub after: Vec<(usize, u64)>,
}

/// Put every body, pipelined; the ids in order.
pub fn put_many<'b>(
    conn: &mut Connection,
    bodies: impl IntoIterator<Item = &'b [u8]>,
    pri: u32,
    delay: u32,
    ttr: u32,
    window: usize,
) -> Result<Vec<u64>, BatchFailure> {
    let mut bodies = bodies.into_iter();
    let mut done = Vec::new();
    let mut after = Vec::new();
    let mut failed: Option<(usize, ClientError)> = None;
    let result = pipeline(
        conn,
        window,
        None,
        |q, room| {
            for body in bodies.by_ref().take(room) {
                q.push(Command::Put {
                    pri,
                    delay,
                    ttr,
                    body,
                })?;
            }
            Ok::<(), ClientError>(())
        },
        |index, reply| {
            match (Command::Put {
                pri,
                delay,
                ttr,
                body: b"",
            })
            .expect(reply)
            {
                Ok(Reply::Inserted(id)) if failed.is_none() => done.push(id),
                Ok(Reply::Inserted(id)) => after.push((index, id)),
                Ok(_) => {}
                Err(e) => {
                    if failed.is_none() {
                        failed = Some((index, e));
                    }
                }
            }
            failed.is_none()
        },
    );
    let answered = done.len() + after.len() + usize::from(failed.is_some());
    match (result, failed) {
        (Err(error), None) | (Ok(Some(error)), None) => Err(BatchFailure {
            index: answered,
            error,
            done,
            after,
        }),
        (_, Some((index, error))) => Err(BatchFailure {
            index,
            error,
            done,
            after,
        }),
        (Ok(None), None) => Ok(done),
    }
}
