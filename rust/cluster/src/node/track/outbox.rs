//! Which of a client's commands a follower sends the leader now, and which it
//! holds back, so that the leader applies exactly the commands a server would.
//!
//! A server applies nothing behind a reserve that waits for a job until it has
//! answered it, and once the client has hung up it writes each reply before it
//! applies the next command: a client that closed its socket makes the second
//! such write fail, and the commands behind it are never applied. A follower
//! that passed every command on at once would leave them with the leader, whose
//! writes (to the follower) never fail. So the [`Outbox`] holds back every
//! command behind a reserve that may wait until the reserve's reply has come
//! (and been written to the client); and if the client's input ends while such
//! a reserve is unanswered, it gives the held commands out one at a time
//! ([`Outbox::next_alone`]), each sent only once the reply before it was
//! written, each followed by the end of input as the server would have seen it.

use std::collections::VecDeque;

use super::command::FramedCommand;

/// The commands of one session not yet sent to the leader, and whether the
/// next one may go.
#[derive(Debug, Default)]
pub struct Outbox {
    held: VecDeque<FramedCommand>,
    /// Bytes of the held commands.
    held_bytes: usize,
    /// Commands sent that may wait for their reply ([`FramedCommand::waits`])
    /// and are not answered yet.
    waiting: usize,
    /// The client's input ended while a command waited: commands go one at a
    /// time from then on.
    one_by_one: bool,
}

impl Outbox {
    /// An empty outbox: commands go out as they come.
    pub fn new() -> Outbox {
        Outbox::default()
    }

    /// Whether commands are held back now (so nothing else of the client's
    /// input, a command's unfinished start included, may go to the leader).
    pub fn holding(&self) -> bool {
        self.waiting > 0 || self.one_by_one || !self.held.is_empty()
    }

    /// A command the client sent: returned to be sent now, or kept (None).
    pub fn offer(&mut self, cmd: FramedCommand) -> Option<FramedCommand> {
        if self.holding() {
            self.held_bytes += cmd.bytes.len();
            self.held.push_back(cmd);
            return None;
        }
        self.waiting += usize::from(cmd.waits);
        Some(cmd)
    }

    /// The leader answered `cmd` (and the reply went to the client): the held
    /// commands to send now, in order, up to and including the next one that
    /// may wait. None while commands go one at a time.
    pub fn answered(&mut self, cmd: &FramedCommand) -> Vec<FramedCommand> {
        if cmd.waits {
            self.waiting = self.waiting.saturating_sub(1);
        }
        let mut out = Vec::new();
        while self.waiting == 0 && !self.one_by_one {
            let Some(next) = self.take() else {
                break;
            };
            out.push(next);
        }
        out
    }

    /// The client's input ended. Returns whether commands go one at a time
    /// from now on: when a command that may wait is unanswered (the leader
    /// must see the end of input at once, to answer it as a server does when
    /// its client hangs up, so nothing more can be sent on that link).
    pub fn client_ended(&mut self) -> bool {
        self.one_by_one |= self.waiting > 0;
        self.one_by_one
    }

    /// Whether commands go one at a time (see [`Outbox::client_ended`]).
    pub fn one_by_one(&self) -> bool {
        self.one_by_one
    }

    /// One at a time: the next held command, to send alone once every reply
    /// before it was written to the client.
    pub fn next_alone(&mut self) -> Option<FramedCommand> {
        self.take()
    }

    /// Commands held.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    /// Bytes the held commands hold.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    fn take(&mut self) -> Option<FramedCommand> {
        let next = self.held.pop_front()?;
        self.held_bytes -= next.bytes.len();
        self.waiting += usize::from(next.waits);
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::super::CommandFramer;
    use super::*;

    fn cmds(input: &[u8]) -> Vec<FramedCommand> {
        let mut framer = CommandFramer::new(100);
        framer.push(input);
        std::iter::from_fn(|| framer.next_command()).collect()
    }

    fn lines(cmds: &[FramedCommand]) -> Vec<&[u8]> {
        cmds.iter().map(|c| &c.bytes[..]).collect()
    }

    /// Offer every command; the ones that go out at once.
    fn offer_all(outbox: &mut Outbox, input: &[u8]) -> Vec<FramedCommand> {
        cmds(input)
            .into_iter()
            .filter_map(|c| outbox.offer(c))
            .collect()
    }

    #[test]
    fn commands_go_out_at_once_until_one_may_wait() {
        let mut outbox = Outbox::new();
        let sent = offer_all(
            &mut outbox,
            b"stats\r\nreserve-with-timeout 0\r\nreserve\r\nput 0 0 1 1\r\na\r\npeek 1\r\n",
        );
        assert_eq!(
            lines(&sent),
            [
                &b"stats\r\n"[..],
                b"reserve-with-timeout 0\r\n",
                b"reserve\r\n"
            ]
        );
        assert!(outbox.holding());
        assert_eq!(outbox.held_len(), 2);
        assert_eq!(outbox.held_bytes(), b"put 0 0 1 1\r\na\r\npeek 1\r\n".len());
        // Answers to the commands before the reserve release nothing.
        assert!(outbox.answered(&sent[0]).is_empty());
        assert!(outbox.answered(&sent[1]).is_empty());
        // The reserve's answer releases what was behind it.
        let released = outbox.answered(&sent[2]);
        assert_eq!(
            lines(&released),
            [&b"put 0 0 1 1\r\na\r\n"[..], b"peek 1\r\n"]
        );
        assert!(!outbox.holding());
        assert_eq!(outbox.held_bytes(), 0);
    }

    #[test]
    fn a_release_stops_after_the_next_command_that_may_wait() {
        let mut outbox = Outbox::new();
        let sent = offer_all(
            &mut outbox,
            b"reserve-with-timeout 5\r\ndelete 1\r\nreserve\r\ndelete 2\r\n",
        );
        assert_eq!(sent.len(), 1);
        let released = outbox.answered(&sent[0]);
        assert_eq!(lines(&released), [&b"delete 1\r\n"[..], b"reserve\r\n"]);
        assert!(outbox.holding());
        assert!(outbox.answered(&released[0]).is_empty());
        assert_eq!(
            lines(&outbox.answered(&released[1])),
            [&b"delete 2\r\n"[..]]
        );
        // Once nothing waits, new commands go out at once again.
        assert_eq!(offer_all(&mut outbox, b"stats\r\n").len(), 1);
    }

    #[test]
    fn after_the_end_of_input_behind_a_wait_commands_go_one_by_one() {
        let mut outbox = Outbox::new();
        let sent = offer_all(
            &mut outbox,
            b"reserve\r\nput 0 0 1 1\r\na\r\nreserve\r\nquit\r\n",
        );
        assert!(outbox.client_ended());
        assert!(outbox.one_by_one());
        // The reserve's answer releases nothing: each goes alone.
        assert!(outbox.answered(&sent[0]).is_empty());
        let first = outbox.next_alone().expect("a held put");
        assert_eq!(&first.bytes[..], b"put 0 0 1 1\r\na\r\n");
        assert!(outbox.answered(&first).is_empty());
        let second = outbox.next_alone().expect("a held reserve");
        assert!(second.waits);
        assert!(outbox.answered(&second).is_empty());
        assert!(!outbox.next_alone().expect("a held quit").expects_reply());
        assert!(outbox.next_alone().is_none());
    }

    #[test]
    fn the_end_of_input_with_nothing_waiting_changes_nothing() {
        let mut outbox = Outbox::new();
        let sent = offer_all(&mut outbox, b"reserve-with-timeout 0\r\nstats\r\n");
        assert_eq!(sent.len(), 2);
        assert!(!outbox.client_ended());
        assert!(!outbox.holding());
    }
}
