//! A leader whose process is gone is replaced once the other voters' lease
//! is over, not after a follower's own election timer on top of it
//! (`node/vacancy.rs`). Three nodes as `serve --cluster` runs them, with
//! election timeouts of 1.5-3 s so that the two ways are told apart by more
//! than a busy machine's delays: openraft's timer has a follower stand at the
//! earliest 3 s (the lease) + 1.5 s after the last append it took; a follower
//! that sees the leader's peer address refuse connections stands 3 s after.

use std::time::{Duration, Instant};

mod nodes;

use nodes::*;

const LEASE_MS: u64 = 3_000;
const ELECTION_MIN_MS: u64 = 1_500;

#[test]
fn a_leader_whose_process_is_gone_is_replaced_once_the_lease_is_over() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three_with(&file, |c| {
        c.raft.heartbeat_interval = 50;
        c.raft.election_timeout_min = ELECTION_MIN_MS;
        c.raft.election_timeout_max = LEASE_MS;
    })?;
    let lead = serving(&nodes)?;
    let addr = nodes[lead].as_ref().ok_or("no leader")?.client_addr()?;
    let mut client = Client::connect(addr)?;
    assert_eq!(
        client.call(b"put 0 0 60 9\r\nsurvivor!\r\n")?,
        "INSERTED 1\r\n"
    );

    // As a SIGKILL ends it: its connections and listeners close at once.
    let killed = Instant::now();
    nodes[lead].take().ok_or("no leader")?.crash();
    let next = serving(&nodes)?;
    let took = killed.elapsed();
    assert_ne!(next, lead);
    // Not before the lease (the voters refuse until it is over), and well
    // before openraft's own timer could have a follower stand.
    let timer_at_the_earliest = Duration::from_millis(LEASE_MS + ELECTION_MIN_MS - 100);
    assert!(
        took >= Duration::from_millis(LEASE_MS - 100),
        "a leader {took:?} after the kill, inside the lease"
    );
    assert!(
        took < timer_at_the_earliest - Duration::from_millis(400),
        "a leader only {took:?} after the kill: the follower waited for its own timer"
    );

    // The acknowledged put survived it.
    let addr = nodes[next].as_ref().ok_or("no leader")?.client_addr()?;
    let mut client = Client::connect(addr)?;
    assert_eq!(client.call(b"peek 1\r\n")?, "FOUND 1 9\r\n");
    assert_eq!(client.body(9)?, b"survivor!");
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
