"""``beanpole serve --cluster FILE --node N -b DIR``: three real node processes on
loopback. Every node serves stock clients (greenstalk): the leader itself, a
follower by relaying them to the leader. A put is acknowledged once a
majority has it on disk, so after the leader is killed with SIGKILL the new leader
has every acknowledged put and delete, and ids go on after them; a survivor stands
for it because the dead leader's address refuses dials. On SIGTERM the
leader hands its lead to a follower, elected in the next term. Bad starts get one
line and a non-zero exit. A killed follower's client's job is ready again after
--session-grace-ms."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest

from servechild import BeanpoleChild, cluster_file

DEADLINE = 30.0  # seconds for a cluster to elect a leader that serves




def start_node(path: Path, node: int, data: Path, *more: str) -> BeanpoleChild:
    child = BeanpoleChild(
        "serve", "--cluster", str(path), "--node", str(node), "-b", str(data), *more
    )
    child.wait_line(rf"^beanpole node {node} of cluster .*: clients on ")
    return child


LEADS = re.compile(r"node (\d+) leads \(term (\d+)\)")
NO_LONGER = re.compile(r"node (\d+) no longer leads \(term (\d+)\)")
HANDED = re.compile(r"handed the lead to node (\d+) \(term (\d+)\)")
GONE = re.compile(r"leader (\d+)'s peer address refuses connections \(its process is gone\)")


def leading_term(child: BeanpoleChild) -> int | None:
    """The term the node's stderr says it serves clients in now, if any."""
    term = None
    for line in list(child.stderr):
        if (m := LEADS.search(line)) is not None:
            term = int(m[2])
        elif (m := NO_LONGER.search(line)) is not None and term == int(m[2]):
            term = None
    return term


def leader(
    clients: dict[int, int], children: dict[int, BeanpoleChild], among: set[int]
) -> tuple[int, greenstalk.Client]:
    """The node among ``among`` that says it leads (in the highest term), and a
    client connected to it directly."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        terms = {n: leading_term(children[n]) for n in among}
        leading = {n: t for n, t in terms.items() if t is not None}
        if leading:
            node = max(leading, key=lambda n: leading[n])
            return node, greenstalk.Client(("127.0.0.1", clients[node]))
        time.sleep(0.02)
    raise AssertionError(f"no node of {sorted(among)} served within {DEADLINE}s")


def settled(path: Path) -> None:
    """Wait until every node of the file says it leads or follows in one cluster and
    has applied the whole log. Each has then heard from the leader, and a node that
    started with an empty directory votes (until it holds what a leader committed it
    keeps its vote back, as a wiped node must: docs/cluster.md, "A wiped follower").
    Killed before that, a leader leaves the others without a majority of votes."""
    deadline = time.monotonic() + DEADLINE
    rows: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        status, out = cluster_status(path)
        rows = json.loads(out) if status == 0 else []
        last = max((int(str(r["last_log"] or 0)) for r in rows), default=0)
        if (
            rows
            and len({r["cluster"] for r in rows}) == 1
            and all(r["cluster"] and r["role"] in ("leader", "follower") for r in rows)
            and all(r["commit"] == last for r in rows)
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"the nodes did not settle within {DEADLINE}s: {rows}")


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[tuple[Path, dict[int, int], dict[int, BeanpoleChild]]]:
    path, clients = cluster_file(tmp_path)
    children = {i: start_node(path, i, tmp_path / f"node{i}") for i in clients}
    try:
        settled(path)
        yield path, clients, children
    finally:
        for child in children.values():
            child.kill()


def test_a_killed_leader_loses_no_acknowledged_change(
    tmp_path: Path, nodes: tuple[Path, dict[int, int], dict[int, BeanpoleChild]]
) -> None:
    path, clients, children = nodes
    first, client = leader(clients, children, set(clients))
    client.use("jobs")
    # Every node serves clients: a follower relays them to the leader.
    follower = next(n for n in clients if n != first)
    relayed = greenstalk.Client(("127.0.0.1", clients[follower]), use="jobs")
    relayed_id = relayed.put(b"through a follower")
    assert client.peek(relayed_id).body == "through a follower"
    relayed.delete(relayed_id)
    relayed.close()
    put = {client.put(f"job {i} {i * i}".encode()): f"job {i} {i * i}" for i in range(50)}
    client.watch("jobs")
    deleted = []
    for _ in range(10):
        job = client.reserve(timeout=0)
        client.delete(job)
        deleted.append(job.id)
    client.close()

    children[first].kill()
    second, client = leader(clients, children, set(clients) - {first})
    assert second != first
    # A survivor stood because the killed leader's address refused its dials, not
    # by its election timer (node/vacancy.rs).
    stood = [
        n
        for n in set(clients) - {first}
        for line in list(children[n].stderr)
        if (m := GONE.search(line)) is not None and int(m[1]) == first
    ]
    assert stood, {n: "".join(children[n].stderr) for n in set(clients) - {first}}
    for job_id, body in put.items():
        if job_id in deleted:
            with pytest.raises(greenstalk.NotFoundError):
                client.peek(job_id)
        else:
            assert client.peek(job_id).body == body
    assert client.stats_tube("jobs")["current-jobs-ready"] == 40
    client.use("jobs")
    assert client.put(b"after") > max(put)

    # The killed node comes back on its directory; whichever node leads after the
    # second leader stops has everything too.
    children[first] = start_node(path, first, tmp_path / f"node{first}")
    client.close()
    assert children[second].stop() == 0
    _, client = leader(clients, children, set(clients) - {second})
    assert client.stats_tube("jobs")["current-jobs-ready"] == 41
    client.close()


def test_bad_starts_get_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    path, _ = cluster_file(tmp_path)

    def fails(*args: str) -> tuple[int, str]:
        child = BeanpoleChild("serve", *args)
        status = child.finish()
        lines = [line for line in child.stderr if line.strip()]
        assert len(lines) == 1 or status == 2, lines
        return status, "".join(lines)

    status, out = fails("--cluster", str(path), "--node", "7", "-b", str(tmp_path / "d"))
    assert status == 1
    assert "has no node 7 (it lists 1, 2, 3)" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[[node]]\nid = 1\nclient = 'nowhere'\n", encoding="utf-8")
    status, out = fails("--cluster", str(bad), "--node", "1", "-b", str(tmp_path / "d"))
    assert status == 1
    assert "cluster file" in out and "line" in out
    status, out = fails("--node", "1")
    assert status == 2
    assert "needs --cluster" in out
    status, out = fails("--cluster", str(path), "--node", "1")
    assert status == 2
    assert "needs -b/--binlog-dir" in out
    status, out = fails("--commit-timeout-ms", "100")
    assert status == 2
    assert "applies to cluster nodes only" in out
    status, out = fails("--session-grace-ms", "100")
    assert status == 2
    assert "applies to cluster nodes only" in out
    status, out = fails("--cluster", str(path), "--node", "1", "-b", str(tmp_path / "d"), "-f", "0")
    assert status == 1
    assert "-f/--fsync-ms cannot be used with --cluster" in out

    # A directory belongs to the node that made it.
    child = start_node(path, 1, tmp_path / "one")
    assert child.stop() == 0
    status, out = fails("--cluster", str(path), "--node", "2", "-b", str(tmp_path / "one"))
    assert status == 1
    assert "belongs to node 1, not node 2" in out
    # A single server's log directory is not a node's.
    single = BeanpoleChild("serve", "-p", "0", "-b", str(tmp_path / "single"))
    single.wait_line("listening on")
    assert single.stop() == 0
    status, out = fails("--cluster", str(path), "--node", "1", "-b", str(tmp_path / "single"))
    assert status == 1
    assert "a single-node log" in out
    assert not os.path.exists(tmp_path / "single" / "cluster")


def cluster_status(path: Path, fmt: str = "json") -> tuple[int, str]:
    child = BeanpoleChild(
        "cluster", "status", "--cluster", str(path), "--format", fmt, stdout=subprocess.PIPE
    )
    assert child.proc.stdout is not None
    out = child.proc.stdout.read()
    child.finish()
    return child.proc.returncode, out


def test_cluster_status_shows_each_nodes_view(
    nodes: tuple[Path, dict[int, int], dict[int, BeanpoleChild]],
) -> None:
    path, clients, children = nodes
    first, client = leader(clients, children, set(clients))
    for i in range(10):
        client.put(f"status {i}".encode())
    client.close()
    deadline = time.monotonic() + DEADLINE
    while True:
        status, out = cluster_status(path)
        assert status == 0, out
        rows = {row["id"]: row for row in json.loads(out)}
        settled = all(row["lag"] == 0 for row in rows.values())
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert sorted(rows) == [1, 2, 3]
    assert rows[first]["role"] == "leader"
    assert {rows[n]["role"] for n in rows if n != first} == {"follower"}
    assert {row["leader"] for row in rows.values()} == {first}
    assert len({row["term"] for row in rows.values()}) == 1
    assert {row["commit"] for row in rows.values()} == {rows[first]["last_log"]}
    assert all(row["lag"] == 0 for row in rows.values()), rows
    assert {row["client"] for row in rows.values()} == {f"127.0.0.1:{p}" for p in clients.values()}

    # An idle cluster's log does not grow: nothing is journaled without a client
    # (the time under test: over two leases, and two of the clock's old wakeups).
    time.sleep(2.5)
    status, out = cluster_status(path)
    assert {row["last_log"] for row in json.loads(out)} == {rows[first]["last_log"]}

    children[first].kill()
    status, out = cluster_status(path)
    assert status == 0
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows[first]["role"] == "down" and rows[first]["error"]
    assert rows[first]["commit"] is None
    status, out = cluster_status(path, "table")
    assert status == 0
    assert "down" in out and "cluster status" in out

    missing = path.with_name("nothing.toml")
    status, out = cluster_status(missing)
    assert status == 1


def test_a_wiped_lowest_node_founds_no_second_cluster(
    tmp_path: Path, nodes: tuple[Path, dict[int, int], dict[int, BeanpoleChild]]
) -> None:
    path, clients, children = nodes
    leader(clients, children, set(clients))
    status, out = cluster_status(path)
    assert status == 0
    ids = {row["cluster"] for row in json.loads(out)}
    assert len(ids) == 1 and None not in ids
    children[1].kill()
    shutil.rmtree(tmp_path / "node1")
    children[1] = BeanpoleChild(
        "serve", "--cluster", str(path), "--node", "1", "-b", str(tmp_path / "node1")
    )
    children[1].wait_line(r"node 1: node \d already belongs to cluster [0-9a-f]+; not founding")
    children[1].wait_line(r"^beanpole node 1 of cluster ")
    status, out = cluster_status(path)
    assert status == 0
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows[1]["cluster"] in ids | {None}
    assert {rows[n]["cluster"] for n in (2, 3)} == ids


def test_a_node_stopped_and_continued_keeps_running_and_stops_on_sigterm(
    nodes: tuple[Path, dict[int, int], dict[int, BeanpoleChild]],
) -> None:
    """SIGSTOP and SIGCONT once made the node's signal wait return a number that is no
    signal's, and the node stopped (or crashed on it)."""
    path, clients, children = nodes
    leader(clients, children, set(clients))
    child = children[2]
    for _ in range(5):
        child.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.1)  # the time under test: stopped, then continued
        child.proc.send_signal(signal.SIGCONT)
    status, out = cluster_status(path)
    assert status == 0
    assert {row["id"]: row["role"] for row in json.loads(out)}[2] != "down"
    assert child.proc.poll() is None, "".join(child.stderr)
    assert child.stop() == 0
    assert any("SIGTERM: stopping" in line for line in child.stderr), child.stderr


def test_a_leader_stopped_with_sigterm_hands_its_lead_to_a_follower(
    nodes: tuple[Path, dict[int, int], dict[int, BeanpoleChild]],
) -> None:
    _, clients, children = nodes
    first, client = leader(clients, children, set(clients))
    term = leading_term(children[first])
    assert term is not None
    client.use("planned")
    put = {client.put(f"job {i}".encode()): f"job {i}" for i in range(30)}
    raw = socket.create_connection(("127.0.0.1", clients[first]), timeout=30)

    assert children[first].stop() == 0
    said = [m for line in children[first].stderr if (m := HANDED.search(line)) is not None]
    assert said, "".join(children[first].stderr)
    successor, next_term = int(said[0][1]), int(said[0][2])
    assert successor != first
    assert next_term == term + 1
    # The old leader's clients are carried to its successor, and closed when it exits.
    assert raw.recv(64) == b""
    raw.close()
    client.close()
    second, client = leader(clients, children, set(clients) - {first})
    assert second == successor
    assert leading_term(children[second]) == next_term
    for job_id, body in put.items():
        assert client.peek(job_id).body == body
    assert client.stats_tube("planned")["current-jobs-ready"] == 30
    client.use("planned")
    assert client.put(b"after") > max(put)
    client.close()


def test_a_killed_followers_client_gets_its_job_back_after_the_grace_time(
    tmp_path: Path,
) -> None:
    path, clients = cluster_file(tmp_path)
    grace = ("--session-grace-ms", "300")
    children = {i: start_node(path, i, tmp_path / f"node{i}", *grace) for i in clients}
    try:
        first, direct = leader(clients, children, set(clients))
        follower = next(n for n in clients if n != first)
        held = greenstalk.Client(("127.0.0.1", clients[follower]), use="t", watch="t")
        job_id = held.put(b"held")
        assert held.reserve(timeout=0).id == job_id
        assert direct.stats_job(job_id)["state"] == "reserved"
        children[follower].kill()
        # Generous for 300 ms, and short of the default 5 s: the job comes back
        # because of the setting.
        deadline = time.monotonic() + 4
        while direct.stats_job(job_id)["state"] != "ready" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert direct.stats_job(job_id)["state"] == "ready"
        direct.watch("t")
        assert direct.reserve(timeout=0).id == job_id
        held.close()
        direct.close()
    finally:
        for child in children.values():
            child.kill()
