//! What a follower needs to forward a client's session to the leader and carry
//! it over to a new one: where each client command ends (as the leader's server
//! will frame it), where each reply ends, and which reply answers which command.
//!
//! * [`command`]: [`CommandFramer`] cuts the client's bytes into
//!   [`FramedCommand`]s, making the engine server's framing decisions for any
//!   input (over-long lines, put bodies, oversized bodies, `quit`);
//! * [`reply`]: [`ReplyFramer`] cuts the server's bytes into [`Reply`]s (a line,
//!   and a body after `RESERVED`, `FOUND` and `OK`);
//! * [`session`]: [`Session`] pairs them in order: commands sent and answered,
//!   those to send again after a change of leader (within a bound), and the used
//!   tube and watch list the server holds for the session;
//! * [`outbox`]: [`Outbox`] holds back the commands behind a reserve that may
//!   wait, and after the client's hang-up gives them out one at a time, so the
//!   leader applies what a server would.
//!
//! All of it is synchronous and does no I/O: the caller reads and writes the
//! sockets and feeds the bytes here.

pub mod command;
pub mod outbox;
pub mod reply;
pub mod session;

pub use self::command::{CommandFramer, CommandKind, FramedCommand};
pub use self::outbox::Outbox;
pub use self::reply::{Reply, ReplyError, ReplyFramer, MAX_REPLY_LINE};
pub use self::session::{Session, TrackError, DEFAULT_TUBE};

/// Room the framers' input buffers have for each read: without it a read
/// into a buffer grown only to the bytes held gets a few bytes at a time (a
/// put's line and body took two system calls).
const READ_SPARE: usize = 8 << 10;

#[cfg(test)]
mod tests;
