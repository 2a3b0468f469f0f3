//! A client of a follower keeps its connection and its reservation when the
//! leader stops: three nodes in one process over loopback, the client's
//! commands forwarded as a session, the leader stopped while the client holds a
//! job and while commands are in flight, and the next leader answering it with
//! nothing lost and nothing applied twice.

mod nodes;

use std::io::Write;
use std::time::Duration;

use nodes::*;

#[test]
fn a_followers_client_keeps_its_connection_and_its_job_through_a_change_of_leader(
) -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    // A follower that stays: not the leader.
    let follower = (first + 1) % 3;
    let addr = nodes[follower].as_ref().ok_or("follower")?.client_addr()?;
    let mut client = Client::connect(addr)?;
    assert_eq!(client.call(b"use work\r\n")?, "USING work\r\n");
    assert_eq!(client.call(b"watch work\r\n")?, "WATCHING 2\r\n");
    assert_eq!(client.call(b"ignore default\r\n")?, "WATCHING 1\r\n");
    for i in 1..=3u32 {
        let put = format!("put {i} 0 60 5\r\njob {i}\r\n");
        assert_eq!(client.call(put.as_bytes())?, format!("INSERTED {i}\r\n"));
    }
    assert_eq!(client.call(b"reserve\r\n")?, "RESERVED 1 5\r\n");
    assert_eq!(client.body(5)?, b"job 1");

    // The leader stops. The client's connection stays open.
    if let Some(mut old) = nodes[first].take() {
        old.stop();
    }
    // Commands sent while no node leads are answered by the next leader.
    client
        .writer
        .write_all(b"put 9 0 60 5\r\njob 4\r\nlist-tube-used\r\n")?;
    assert_eq!(client.call(b"")?, "INSERTED 4\r\n");
    assert_eq!(client.call(b"")?, "USING work\r\n");
    // The reservation went with the session: still the client's to delete.
    assert_eq!(job_state(&mut client, 1)?, "reserved");
    assert_eq!(client.call(b"touch 1\r\n")?, "TOUCHED\r\n");
    assert_eq!(client.call(b"delete 1\r\n")?, "DELETED\r\n");
    // Its tubes too: the next reserve comes from `work`.
    assert_eq!(
        client.call(b"reserve-with-timeout 1\r\n")?,
        "RESERVED 2 5\r\n"
    );
    assert_eq!(client.body(5)?, b"job 2");
    // Nothing was applied twice: jobs 2, 3 and 4, ids going on after them.
    assert_eq!(client.call(b"peek 5\r\n")?, "NOT_FOUND\r\n");
    assert_eq!(client.call(b"put 0 0 60 1\r\nx\r\n")?, "INSERTED 5\r\n");
    let second = serving(&nodes)?;
    assert_ne!(second, first);
    let mut direct = Client::connect(nodes[second].as_ref().ok_or("leader")?.client_addr()?)?;
    assert_eq!(direct.call(b"use work\r\n")?, "USING work\r\n");
    // Job 2 is held by the follower's client, so another client cannot take it.
    assert_eq!(job_state(&mut direct, 2)?, "reserved");
    assert_eq!(direct.call(b"delete 2\r\n")?, "NOT_FOUND\r\n");
    drop(client);
    // The client hung up: its session ends at once, and job 2 is ready again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while job_state(&mut direct, 2)? != "ready" {
        assert!(
            std::time::Instant::now() < deadline,
            "job 2 never came back"
        );
        std::thread::yield_now();
    }
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
