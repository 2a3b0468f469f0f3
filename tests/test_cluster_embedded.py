"""``beanpole.Cluster`` and the ``beanpole_cluster`` fixture: three nodes in this
process over loopback. Every node serves stock clients (a follower relays to the
leader), the leader's stats count what clients did through any node, stopping the
leader fails over to a node with every acknowledged change, and a stopped node
comes back on its directory."""

from __future__ import annotations

import time

import greenstalk
import pytest

import beanpole


def test_any_node_serves_and_a_stopped_leader_loses_nothing(
    beanpole_cluster: beanpole.Cluster,
) -> None:
    cluster = beanpole_cluster
    leader = cluster.leader()
    followers = cluster.followers()
    assert sorted([leader, *followers]) == [1, 2, 3]
    # The others are followers once the leader's first append reaches them.
    deadline = time.monotonic() + 10
    while True:
        roles = {s["id"]: s["role"] for s in cluster.status()}
        if all(roles[f] == "follower" for f in followers) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert roles == {leader: "leader", **{f: "follower" for f in followers}}

    clients = {n: greenstalk.Client(cluster.address(n), use="t", watch="t") for n in cluster.nodes}
    ids = [clients[n].put(f"via {n}, job {i}".encode()) for i in range(5) for n in cluster.nodes]
    assert ids == sorted(ids) and len(set(ids)) == 15
    assert cluster.stats()["cmd-put"] == 15
    job = clients[followers[0]].reserve(timeout=0)
    clients[followers[0]].delete(job)
    for client in clients.values():
        client.close()

    cluster.stop_node(leader)
    assert {s["id"]: s["role"] for s in cluster.status()}[leader] == "down"
    new = cluster.leader()
    assert new != leader
    client = greenstalk.Client(cluster.address(new), use="t")
    assert client.stats_tube("t")["current-jobs-ready"] == 14
    with pytest.raises(greenstalk.NotFoundError):
        client.peek(job.id)
    assert client.peek(ids[-1]).body == "via 3, job 4"
    client.close()

    cluster.start_node(leader)
    other = next(n for n in cluster.running() if n != new)
    client = greenstalk.Client(cluster.address(other), use="t")
    assert client.put(b"after") > max(ids)
    client.close()


def test_bad_clusters_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one node"):
        beanpole.Cluster(nodes=0)
    cluster = beanpole.Cluster(nodes=1)
    with pytest.raises(beanpole.ClusterError, match="not been started"):
        cluster.start_node(1)
    with cluster:
        assert cluster.leader() == 1
        with pytest.raises(beanpole.ClusterError, match="is running"):
            cluster.start_node(1)


def test_a_cluster_without_fsync_serves_the_same() -> None:
    with beanpole.Cluster(nodes=3, fsync=False) as cluster:
        follower = cluster.followers()[0]
        client = greenstalk.Client(cluster.address(follower))
        job_id = client.put(b"not synced")
        assert client.peek(job_id).body == "not synced"
        client.close()


def _job_state(client: greenstalk.Client, job_id: int) -> str:
    state: str = client.stats_job(job_id)["state"]
    return state


def _held_through_a_follower(cluster: beanpole.Cluster) -> tuple[int, greenstalk.Client, int]:
    """A client of a follower puts a job and reserves it: the follower, the client
    (whose connection must stay open: closing it would end the session at once) and
    the job."""
    follower = cluster.followers()[0]
    client = greenstalk.Client(cluster.address(follower), use="t", watch="t")
    job_id = client.put(b"held")
    job = client.reserve(timeout=0)
    assert job.id == job_id
    return follower, client, job_id


def test_a_stopped_followers_client_gives_its_job_back_at_once() -> None:
    # A grace time far longer than the test: the job comes back only because the
    # stopping follower ends its client's session (nobody could attach it again).
    with beanpole.Cluster(nodes=3, session_grace_ms=600_000) as cluster:
        follower, held, job_id = _held_through_a_follower(cluster)
        leader = cluster.leader()
        direct = greenstalk.Client(cluster.address(leader), use="t", watch="t")
        assert _job_state(direct, job_id) == "reserved"
        cluster.stop_node(follower)
        deadline = time.monotonic() + 10
        while _job_state(direct, job_id) != "ready" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _job_state(direct, job_id) == "ready"
        assert direct.reserve(timeout=0).id == job_id
        direct.close()
        held.close()
