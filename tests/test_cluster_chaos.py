"""Short seeded runs of ``bench/cluster_chaos.py`` (the long runs are in
bench/README.md): against one node and against a three-node cluster, every fault
kind, 0 violations; the same load on a node without a log, killed, loses acknowledged
jobs and the checker says so; the proxy's faults do what the harness relies on; a
cluster's peer traffic goes through the proxy of each directed link; and what the
harness found: an old leader cut off from its peers answers no stale read (its
lease runs out; a read then waits for a commit that cannot come)."""

from __future__ import annotations

import importlib.util
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import cluster_chaos
from cluster_chaos_check import load, report
from cluster_chaos_load import Recorder
from cluster_chaos_nodes import ClusterNode, Monitor, Net, Ports, PortTaken, namespaces_work
from cluster_chaos_proxy import Proxy

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)
SEED = int(os.environ.get("BEANPOLE_CHAOS_SEED", "11"))
WAIT = 10.0  # seconds; a deadline for things that take milliseconds


def test_a_seeded_run_with_every_fault_has_no_violation(tmp_path: Path) -> None:
    args = cluster_chaos.parse_args(["--seconds", "30", "--workers", "4"])
    v, line = cluster_chaos.run_once(args, SEED, tmp_path)
    assert v.ok, f"{line}\n{report(v)}"
    assert v.acknowledged > 100, f"too little load to mean much: {line}"
    assert "faults: none" not in line


needs_namespaces = pytest.mark.skipif(
    namespaces_work() is not None, reason=f"cluster nodes need root: {namespaces_work()}"
)


@needs_namespaces
def test_a_seeded_run_on_three_nodes_with_every_fault_has_no_violation(tmp_path: Path) -> None:
    args = cluster_chaos.parse_args(["--nodes", "3", "--seconds", "20", "--workers", "4"])
    v, line = cluster_chaos.run_once(args, SEED, tmp_path)
    assert v.ok, f"{line}\n{report(v)}"
    assert v.acknowledged > 100, f"too little load to mean much: {line}"
    assert "faults: none" not in line
    h = load(tmp_path / "history.jsonl")
    assert sum(1 for f in h.faults if f.kind == "leader") >= 2, f"no change of leader: {line}"


@needs_namespaces
def test_power_losses_and_membership_changes_under_load_lose_nothing(tmp_path: Path) -> None:
    """Nodes' files cut back to what they had fsynced, one node or all, and the
    cluster grown to five through ``beanpole cluster add|promote`` and shrunk back
    with ``remove`` while the clients run."""
    args = cluster_chaos.parse_args(
        ["--nodes", "3", "--faults", "power,members", "--cycles", "5", "--workers", "4"]
    )
    v, line = cluster_chaos.run_once(args, SEED, tmp_path)
    assert v.ok, f"{line}\n{report(v)}"
    assert v.acknowledged > 50, f"too little load to mean much: {line}"
    h = load(tmp_path / "history.jsonl")
    kinds = Counter(f.kind for f in h.faults)
    assert kinds["power"] >= 1 and kinds["promote"] >= 2 and kinds["remove"] >= 2, line


@needs_namespaces
def test_a_nodes_peer_traffic_goes_through_the_proxies_of_its_links(tmp_path: Path) -> None:
    """Cutting only the links into the leader changes nothing (its requests and their
    replies go on its own links out); cutting its links out, another node leads."""
    rec = Recorder(tmp_path / "history.jsonl")
    net = Net(3, tmp_path)
    nodes = [ClusterNode(i, net, tmp_path) for i in net.ids]
    monitor = Monitor(net, rec, lambda j: nodes[j - 1].pid).start()
    try:
        for n in nodes:
            n.start()
        first = monitor.wait_leader(30)
        assert first is not None
        others = [i for i in net.ids if i != first]
        for proxy in net.of(first, others, "in"):
            proxy.cut()
        # The followers keep hearing from the leader: writes still commit there.
        with socket.create_connection(("127.0.0.1", net.client[first]), timeout=WAIT) as s:
            for i in range(20):
                s.sendall(b"put 0 0 5 1\r\nx\r\n")
                assert s.recv(100).startswith(b"INSERTED"), i
        assert monitor.leader() == first
        net.heal()
        for proxy in net.of(first, others, "out"):
            proxy.cut()
        deadline = time.monotonic() + 30
        while monitor.leader() in (first, None) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert monitor.leader() in others
    finally:
        monitor.close()
        for n in nodes:
            n.close()
        net.close()
        rec.close()


def command(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data``; the first reply line."""
    sock.sendall(data)
    got = b""
    while b"\r\n" not in got:
        chunk = sock.recv(1000)
        assert chunk, f"connection closed; got {got!r}"
        got += chunk
    return got.split(b"\r\n", 1)[0]


@needs_namespaces
def test_an_isolated_old_leader_answers_no_stale_read(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "history.jsonl")
    net = Net(3, tmp_path)
    nodes = [ClusterNode(i, net, tmp_path) for i in net.ids]
    monitor = Monitor(net, rec, lambda j: nodes[j - 1].pid).start()
    try:
        for n in nodes:
            n.start()
        old = monitor.wait_leader(30)
        assert old is not None
        a = socket.create_connection(("127.0.0.1", net.client[old]), timeout=WAIT)
        assert command(a, b"put 0 0 60 5\r\nhello\r\n") == b"INSERTED 1"
        for proxy in net.of(old, [i for i in net.ids if i != old], "both"):
            proxy.cut()
        deadline = time.monotonic() + 30
        while monitor.leader() in (old, None) and time.monotonic() < deadline:
            time.sleep(0.02)
        new = monitor.leader()
        assert new not in (old, None)
        b = socket.create_connection(("127.0.0.1", net.client[new]), timeout=WAIT)
        assert command(b, b"delete 1\r\n") == b"DELETED"
        # The job is gone for good: the old leader may answer NOT_FOUND, no answer,
        # or close the connection, but not FOUND.
        try:
            reply = command(a, b"peek 1\r\n")
        except (OSError, AssertionError):
            reply = b"(no reply)"
        assert not reply.startswith(b"FOUND"), reply
        a.close()
        b.close()
    finally:
        monitor.close()
        for n in nodes:
            n.close()
        net.close()
        rec.close()


def test_a_node_without_a_log_loses_jobs_when_killed_and_the_check_sees_it(
    tmp_path: Path,
) -> None:
    args = cluster_chaos.parse_args(["--cycles", "3", "--faults", "kill", "--no-log"])
    v, line = cluster_chaos.run_once(args, SEED, tmp_path)
    assert v.lost.count > 0, f"{line}\n{report(v)}"
    assert not v.ok and not v.problems


def echo_server() -> tuple[socket.socket, int]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(WAIT)
    return listener, listener.getsockname()[1]


def test_the_proxy_forwards_cuts_and_drops_one_way() -> None:
    listener, port = echo_server()
    proxy = Proxy(("127.0.0.1", port)).start()
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT)
        server, _ = listener.accept()
        server.settimeout(WAIT)
        client.sendall(b"up")
        assert server.recv(10) == b"up"
        server.sendall(b"down")
        assert client.recv(10) == b"down"
        # One way: what goes up is dropped, what comes down still arrives.
        proxy.oneway("up")
        client.sendall(b"lost")
        server.sendall(b"still")
        assert client.recv(10) == b"still"
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.recv(10)
        # The heal closes the connection that lost bytes.
        proxy.heal()
        client.settimeout(WAIT)
        assert client.recv(10) == b""
        # A cut closes open connections and refuses new ones until the heal.
        c2 = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT)
        s2, _ = listener.accept()
        proxy.cut()
        assert c2.recv(10) == b""
        c3 = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT)
        assert c3.recv(10) == b""
        proxy.heal()
        for s in (client, server, c2, s2, c3):
            s.close()
    finally:
        proxy.close()
        listener.close()


def test_the_proxy_stalls_until_the_heal_and_follows_a_new_target() -> None:
    listener, port = echo_server()
    proxy = Proxy(("127.0.0.1", port)).start()
    try:
        proxy.stall()
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT)
        server, _ = listener.accept()
        server.settimeout(0.2)
        client.sendall(b"held")
        with pytest.raises(TimeoutError):
            server.recv(10)
        proxy.heal()
        server.settimeout(WAIT)
        got = b""
        deadline = time.monotonic() + WAIT
        while got != b"held" and time.monotonic() < deadline:
            got += server.recv(10)
        assert got == b"held"
        other, other_port = echo_server()
        proxy.retarget(("127.0.0.1", other_port))
        c2 = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT)
        s2, _ = other.accept()
        c2.sendall(b"moved")
        s2.settimeout(WAIT)
        assert s2.recv(10) == b"moved"
        for s in (client, server, c2, s2, other):
            s.close()
    finally:
        proxy.close()
        listener.close()


def test_ports_claimed_in_the_registry_are_not_given_twice_until_released(tmp_path: Path) -> None:
    registry = tmp_path / "ports"
    a = Ports(random.Random(1), registry)
    b = Ports(random.Random(1), registry)  # the same draws: only the registry keeps them apart
    mine = {a.claim(["127.0.0.1"]) for _ in range(20)}
    theirs = {b.claim(["127.0.0.1"]) for _ in range(20)}
    assert len(mine) == 20 and not mine & theirs
    a.release()
    assert not any((registry / str(p)).exists() for p in mine)
    # A claim left by a process that is gone is free again.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = next(iter(theirs))
    (registry / str(stale)).write_text(dead.stdout.strip())
    c = Ports(random.Random(1), registry)
    assert stale in {c.claim(["127.0.0.1"]) for _ in range(40)}


@needs_namespaces
def test_a_node_whose_port_was_taken_says_so(tmp_path: Path) -> None:
    net = Net(3, tmp_path)
    node = ClusterNode(1, net, tmp_path)
    taken = socket.create_server(("127.0.0.1", net.client[1]))
    try:
        with pytest.raises(PortTaken, match="in use"):
            node.start()
        assert node.child is None
    finally:
        taken.close()
        node.close()
        net.close()
