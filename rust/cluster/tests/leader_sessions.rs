//! A client connected to the leader itself keeps its connection and its
//! reservations when the leader's term ends and the node stays up: three
//! nodes in one process over loopback, the leader handing its lead over and
//! going on as a follower while its client holds a job, the client's commands
//! sent meanwhile answered by the next leader, nothing applied twice, and the
//! job given back when the client hangs up.

mod nodes;

use std::io::Write;
use std::time::{Duration, Instant};

use beanpole_cluster::node::{HandoverOutcome, Node};
use nodes::*;

/// Have `node` hand its lead over and stay up; `meanwhile` runs once it no
/// longer serves clients, while the hand-over may still be under way.
fn step_down(node: &Node, meanwhile: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    std::thread::scope(|scope| {
        let handing = scope.spawn(|| node.step_down(Duration::from_secs(5)));
        let deadline = Instant::now() + Duration::from_secs(5);
        while node.status().serving {
            if Instant::now() > deadline {
                return Err("the leader never stopped serving".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        meanwhile()?;
        match handing.join() {
            Ok(HandoverOutcome::HandedOver { .. }) => Ok(()),
            Ok(other) => Err(format!("the hand-over: {other:?}").into()),
            Err(_) => Err("the hand-over panicked".into()),
        }
    })
}

#[test]
fn a_leaders_own_client_keeps_its_connection_and_its_job_when_the_leader_steps_down(
) -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"use work\r\n")?, "USING work\r\n");
    assert_eq!(client.call(b"watch work\r\n")?, "WATCHING 2\r\n");
    assert_eq!(client.call(b"ignore default\r\n")?, "WATCHING 1\r\n");
    for i in 1..=3u32 {
        let put = format!("put {i} 0 60 5\r\njob {i}\r\n");
        assert_eq!(client.call(put.as_bytes())?, format!("INSERTED {i}\r\n"));
    }
    assert_eq!(client.call(b"reserve\r\n")?, "RESERVED 1 5\r\n");
    assert_eq!(client.body(5)?, b"job 1");

    // The leader hands its lead over and goes on as a follower; commands the
    // client sends once it no longer serves are answered by the next leader.
    step_down(leader, || {
        client
            .writer
            .write_all(b"put 9 0 60 5\r\njob 4\r\nlist-tube-used\r\n")?;
        Ok(())
    })?;
    assert_eq!(client.call(b"")?, "INSERTED 4\r\n");
    assert_eq!(client.call(b"")?, "USING work\r\n");
    let second = serving(&nodes)?;
    assert_ne!(second, first, "another node leads");
    assert!(!nodes[first].as_ref().ok_or("old")?.status().serving);

    // The reservation went with the session: still the client's.
    assert_eq!(job_state(&mut client, 1)?, "reserved");
    let mut other = Client::connect(nodes[second].as_ref().ok_or("new")?.client_addr()?)?;
    assert_eq!(other.call(b"use work\r\n")?, "USING work\r\n");
    assert_eq!(job_state(&mut other, 1)?, "reserved");
    assert_eq!(other.call(b"reserve-job 1\r\n")?, "NOT_FOUND\r\n");
    assert_eq!(other.call(b"delete 1\r\n")?, "NOT_FOUND\r\n");
    assert_eq!(client.call(b"touch 1\r\n")?, "TOUCHED\r\n");
    // Its tubes too: the next reserve comes from `work`.
    assert_eq!(
        client.call(b"reserve-with-timeout 1\r\n")?,
        "RESERVED 2 5\r\n"
    );
    assert_eq!(client.body(5)?, b"job 2");
    // Nothing was applied twice: jobs 1 to 4, ids going on after them.
    assert_eq!(client.call(b"peek 5\r\n")?, "NOT_FOUND\r\n");
    assert_eq!(client.call(b"put 0 0 60 1\r\nx\r\n")?, "INSERTED 5\r\n");
    assert_eq!(job_state(&mut other, 3)?, "ready");
    assert_eq!(job_state(&mut other, 4)?, "ready");

    // The client hangs up: its session ends at once, its jobs are ready again.
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(10);
    while job_state(&mut other, 1)? != "ready" || job_state(&mut other, 2)? != "ready" {
        assert!(Instant::now() < deadline, "jobs 1 and 2 never came back");
        std::thread::sleep(Duration::from_millis(5));
    }
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

#[test]
fn a_leaders_own_client_waiting_in_reserve_is_answered_by_the_next_leader() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let mut waiter = Client::connect(leader.client_addr()?)?;
    assert_eq!(waiter.call(b"watch quiet\r\n")?, "WATCHING 2\r\n");
    // A reserve that waits while the term ends.
    waiter.writer.write_all(b"reserve-with-timeout 30\r\n")?;
    // Seen waiting by the store before the lead goes.
    let mut probe = Client::connect(leader.client_addr()?)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let head = probe.call(b"stats-tube quiet\r\n")?;
        let len: usize = head
            .trim_end()
            .strip_prefix("OK ")
            .ok_or("stats-tube")?
            .parse()?;
        let yaml = String::from_utf8(probe.body(len)?)?;
        if yaml.contains("current-waiting: 1\n") {
            break;
        }
        assert!(Instant::now() < deadline, "the reserve never waited");
        std::thread::sleep(Duration::from_millis(2));
    }
    step_down(leader, || Ok(()))?;
    let second = serving(&nodes)?;
    assert_ne!(second, first);
    // A job put on the new leader goes to the waiting reserve, carried there.
    let mut producer = Client::connect(nodes[second].as_ref().ok_or("new")?.client_addr()?)?;
    assert_eq!(producer.call(b"use quiet\r\n")?, "USING quiet\r\n");
    assert_eq!(producer.call(b"put 0 0 60 3\r\nhey\r\n")?, "INSERTED 1\r\n");
    assert_eq!(waiter.call(b"")?, "RESERVED 1 3\r\n");
    assert_eq!(waiter.body(3)?, b"hey");
    assert_eq!(waiter.call(b"delete 1\r\n")?, "DELETED\r\n");
    // The probe, another of the old leader's clients, was carried too.
    assert_eq!(probe.call(b"peek 1\r\n")?, "NOT_FOUND\r\n");
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

#[test]
fn a_stopping_nodes_carried_client_gives_its_job_back_at_once() -> Result<(), Error> {
    // A grace time and a TTR far longer than the test: the job can come back
    // only because the stopping node ended its client's session.
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three_with(&file, |c| {
        c.server.session_grace = Duration::from_secs(600);
    })?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 600 4\r\nheld\r\n")?, "INSERTED 1\r\n");
    assert_eq!(client.call(b"reserve\r\n")?, "RESERVED 1 4\r\n");
    assert_eq!(client.body(4)?, b"held");
    step_down(leader, || Ok(()))?;
    // Carried to the next leader: still the client's.
    assert_eq!(job_state(&mut client, 1)?, "reserved");
    let second = serving(&nodes)?;
    let mut other = Client::connect(nodes[second].as_ref().ok_or("new")?.client_addr()?)?;
    assert_eq!(job_state(&mut other, 1)?, "reserved");
    // The old leader stops: it closes the client's connection and ends its
    // session on the way.
    if let Some(mut old) = nodes[first].take() {
        old.stop();
    }
    let mut rest = String::new();
    assert_eq!(
        std::io::BufRead::read_line(&mut client.reader, &mut rest)?,
        0,
        "closed"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while job_state(&mut other, 1)? != "ready" {
        assert!(Instant::now() < deadline, "job 1 never came back");
        std::thread::sleep(Duration::from_millis(5));
    }
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
