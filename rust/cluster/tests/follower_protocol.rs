//! A follower's client gets the protocol of one server where the timing of its
//! input shows: commands queued behind a waiting reserve when the client hangs
//! up, and a put whose line has come but not its body. Three nodes in one
//! process over loopback; a client of a follower beside one of the leader's.

mod nodes;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

use beanpole_cluster::node::Node;
use nodes::*;

/// The value of `key` in the `stats` of `client`'s server.
fn stat(client: &mut Client, key: &str) -> Result<u64, Error> {
    Ok(yaml_value(client, "stats", key)?.parse()?)
}

/// Ask `client`'s server until `key` is `want` (within 10 s).
fn await_stat(client: &mut Client, key: &str, want: u64) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = stat(client, key)?;
        if got == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{key} stayed {got}, not {want}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A started cluster (stopped when dropped), with a client of a follower and
/// one of the leader.
struct Cluster {
    nodes: Vec<Option<Node>>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().flatten() {
            node.stop();
        }
    }
}

fn clients() -> Result<(Cluster, Client, Client), Error> {
    let file = cluster_file(3)?;
    let (dirs, nodes) = three(&file)?;
    let leader = serving(&nodes)?;
    let follower = (leader + 1) % 3;
    let via = Client::connect(nodes[follower].as_ref().ok_or("follower")?.client_addr()?)?;
    let direct = Client::connect(nodes[leader].as_ref().ok_or("leader")?.client_addr()?)?;
    Ok((Cluster { nodes, _dirs: dirs }, via, direct))
}

#[test]
fn a_client_closing_behind_a_waiting_reserve_has_one_queued_command_applied() -> Result<(), Error> {
    let (_cluster, via, mut direct) = clients()?;
    // Two puts queued behind a reserve that waits (no job is ready).
    let mut via = via;
    via.writer
        .write_all(b"reserve\r\nput 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\n")?;
    await_stat(&mut direct, "current-waiting", 1)?;
    // The client closes its socket: as on one server, TIMED_OUT is written
    // (the client's side answers it with a reset), the first put is applied,
    // its reply's write fails, and the second put never is.
    drop(via);
    await_stat(&mut direct, "current-connections", 1)?;
    assert_eq!(direct.call(b"peek 1\r\n")?, "FOUND 1 1\r\n");
    assert_eq!(direct.body(1)?, b"a");
    assert_eq!(direct.call(b"peek 2\r\n")?, "NOT_FOUND\r\n");
    assert_eq!(stat(&mut direct, "cmd-put")?, 1);
    Ok(())
}

#[test]
fn a_client_half_closing_behind_a_waiting_reserve_has_every_command_answered() -> Result<(), Error>
{
    let (_cluster, mut via, mut direct) = clients()?;
    via.writer
        .write_all(b"reserve\r\nput 0 0 60 1\r\na\r\nreserve\r\nput 0 0 60 1\r\nb\r\n")?;
    await_stat(&mut direct, "current-waiting", 1)?;
    // Only the sending side: every reply is written, the waiting reserves end
    // TIMED_OUT (the second finds job 1 ready), and the connection closes.
    via.writer.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    via.reader.read_to_end(&mut rest)?;
    assert_eq!(
        String::from_utf8(rest)?,
        "TIMED_OUT\r\nINSERTED 1\r\nRESERVED 1 1\r\na\r\nINSERTED 2\r\n"
    );
    await_stat(&mut direct, "current-connections", 1)?;
    // The session ended: job 1 is back, job 2 was put.
    assert_eq!(direct.call(b"peek-ready\r\n")?, "FOUND 1 1\r\n");
    assert_eq!(direct.body(1)?, b"a");
    assert_eq!(direct.call(b"peek 2\r\n")?, "FOUND 2 1\r\n");
    assert_eq!(direct.body(1)?, b"b");
    Ok(())
}

#[test]
fn commands_behind_a_reserve_are_applied_once_it_is_answered() -> Result<(), Error> {
    let (_cluster, mut via, mut direct) = clients()?;
    via.writer
        .write_all(b"reserve\r\nlist-tube-used\r\nput 0 0 60 2\r\nhe")?;
    await_stat(&mut direct, "current-waiting", 1)?;
    // Nothing behind the waiting reserve has been applied: the put's line
    // has not taken an id.
    assert_eq!(stat(&mut direct, "cmd-put")?, 0);
    assert_eq!(direct.call(b"put 0 0 60 1\r\nx\r\n")?, "INSERTED 1\r\n");
    assert_eq!(via.call(b"")?, "RESERVED 1 1\r\n");
    assert_eq!(via.body(1)?, b"x");
    assert_eq!(via.call(b"")?, "USING default\r\n");
    // The put's line is applied with the commands before it: id 2 is its,
    // though its body comes after another client's put.
    await_stat(&mut direct, "cmd-put", 2)?;
    assert_eq!(direct.call(b"put 0 0 60 1\r\ny\r\n")?, "INSERTED 3\r\n");
    assert_eq!(via.call(b"\r\n")?, "INSERTED 2\r\n");
    Ok(())
}

#[test]
fn a_put_takes_its_id_when_its_line_arrives() -> Result<(), Error> {
    let (_cluster, mut via, mut direct) = clients()?;
    // The line and part of the body: the id is taken now, as on one server.
    via.writer.write_all(b"put 0 0 60 5\r\nab")?;
    await_stat(&mut direct, "cmd-put", 1)?;
    assert_eq!(direct.call(b"put 0 0 60 1\r\nx\r\n")?, "INSERTED 2\r\n");
    assert_eq!(via.call(b"cde\r\n")?, "INSERTED 1\r\n");
    // An oversized put counts when its line arrives, too.
    via.writer.write_all(b"put 0 0 60 70000\r\n0123")?;
    await_stat(&mut direct, "cmd-put", 3)?;
    // A put cut short by the end of input still used up its id.
    via.writer.write_all(&vec![b'-'; 69996])?;
    assert_eq!(via.call(b"\r\n")?, "JOB_TOO_BIG\r\n");
    via.writer.write_all(b"put 0 0 60 5\r\nab")?;
    await_stat(&mut direct, "cmd-put", 4)?;
    via.writer.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    via.reader.read_to_end(&mut rest)?;
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(direct.call(b"put 0 0 60 1\r\nx\r\n")?, "INSERTED 4\r\n");
    Ok(())
}
