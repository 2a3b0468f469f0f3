"""A cluster node's dashboard API (``/api/cluster``, and the queue's views through the
node) on three nodes of a ``beanpole.Cluster`` in this process, each with its own
HTTP endpoint (``beanpole.ops.served_node.ServedNode``); and the node events'
machinery (the kinds a node takes, the detail's fields, a full queue)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import greenstalk
import pytest

import beanpole
from beanpole.ops.served_node import ServedNode
from beanpole.server.hooks import NODE_KINDS, Event, HookError
from beanpole.server.node_events import NodeDispatcher, detail_fields
from dashboard_common import TIMEOUT, base_url, get, get_json

NodeSet = tuple[beanpole.Cluster, dict[int, ServedNode]]


def until(what: str, probe: object) -> object:
    deadline = time.monotonic() + TIMEOUT
    while True:
        value = probe()  # type: ignore[operator]
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {TIMEOUT}s: {what}")
        time.sleep(0.05)


@pytest.fixture
def served() -> Iterator[NodeSet]:
    config = beanpole.Config(http="127.0.0.1:0")
    with beanpole.Cluster(nodes=3) as cluster:
        assert cluster.cluster_file is not None
        nodes = {}
        try:
            for n in cluster.nodes:
                node = ServedNode(
                    cluster.cluster_file, n, config, election_timeout_ms=600, probe_every=0.2
                )
                node.listen()
                native = cluster.node(n)
                assert native is not None
                node.start(native)
                nodes[n] = node
            yield cluster, nodes
        finally:
            for node in nodes.values():
                node.close()


def base(node: ServedNode) -> str:
    assert node.http_address is not None
    return base_url(node.http_address)


def test_the_cluster_panel_api(served: NodeSet) -> None:
    cluster, nodes = served
    leader = cluster.leader()
    with greenstalk.Client(cluster.address(leader), use="panel") as client:
        for i in range(3):
            client.put(f"p{i}".encode())

    def settled() -> dict[int, dict[str, object]] | None:
        views = {n: get_json(base(node), "/api/cluster") for n, node in nodes.items()}
        ok = all(v["ready"] and v["leader"] == leader for v in views.values())
        ok = ok and all(m["up"] for v in views.values() for m in v["members"])  # type: ignore[union-attr]
        return views if ok else None

    views = until("every node agrees and sees the others up", settled)
    assert isinstance(views, dict)
    for n, view in views.items():
        assert view["id"] == n
        assert view["role"] == ("leader" if n == leader else "follower")
        assert view["reason"] is None and view["election_timeout_ms"] == 600
        assert view["voters"] == [1, 2, 3]
        assert [m["id"] for m in view["members"]] == [m for m in (1, 2, 3) if m != n]
        assert view["commit"] <= view["last_log"]
    lead = views[leader]
    assert lead["quorum_ack_ms"] is not None and lead["quorum_ack_ms"] <= 600
    assert all(m["lag"] is not None and m["lag"] >= 0 for m in lead["members"])
    # The queue's views through any node are the leader's.
    follower = next(n for n in nodes if n != leader)
    server = get_json(base(nodes[follower]), "/api/server")
    assert server["server"] == f"node {follower}"

    def ready_in_panel() -> object:
        tubes = get_json(base(nodes[follower]), "/api/tubes")["tubes"]
        return {t["name"]: t["current-jobs-ready"] for t in tubes}.get("panel") == 3

    until("the follower's tube list shows the puts", ready_in_panel)  # (shared 0.25 s)
    # A single server's dashboard has no cluster panel.
    with beanpole.Server(port=0, http="127.0.0.1:0") as single:
        assert single.http_address is not None
        assert get(base_url(single.http_address), "/api/cluster")[0] == 404

    # The others stopped: the leader says why it is not ready, and the queue's views
    # fail at once with that reason instead of waiting for a commit.
    for n in cluster.nodes:
        if n != leader:
            cluster.stop_node(n)
    view = until(
        "the lone leader is not ready",
        lambda: (v := get_json(base(nodes[leader]), "/api/cluster"))["ready"] is False and v,
    )
    assert isinstance(view, dict)
    assert view["reason"].startswith("no quorum: a majority of the voters last acknowledged")
    until(
        "the lone leader sees both others down",
        lambda: [m["up"] for m in get_json(base(nodes[leader]), "/api/cluster")["members"]]
        == [False, False],
    )
    started = time.monotonic()
    failed = get_json(base(nodes[leader]), "/api/server", status=502)
    assert time.monotonic() - started < TIMEOUT
    assert "no quorum" in failed["error"]


def test_node_hooks_take_node_kinds_only() -> None:
    dispatcher = NodeDispatcher(4)
    for kind in NODE_KINDS:
        dispatcher.add(kind, print)
    with pytest.raises(HookError, match="'bury' is for single servers only"):
        dispatcher.add("bury", print)
    with pytest.raises(HookError, match="unknown event kind 'nope'"):
        dispatcher.add("nope", print)
    with beanpole.Server(port=0) as single, pytest.raises(HookError, match="cluster nodes only"):
        single.hook("leader-elected", print)


def test_detail_fields() -> None:
    assert detail_fields("leader=2 term=17") == {"leader": "2", "term": "17"}
    assert detail_fields("node=3 reason=cannot connect: refused (os error 111)") == {
        "node": "3",
        "reason": "cannot connect: refused (os error 111)",
    }
    assert detail_fields(None) == {}


def test_a_full_node_queue_drops_and_counts() -> None:
    """The hook thread is held by a hook; events beyond the queue's size are dropped
    and counted, the rest are delivered in order."""
    dispatcher = NodeDispatcher(2)
    release = threading.Event()
    entered = threading.Event()
    seen: list[Event] = []

    def slow(event: Event) -> None:
        seen.append(event)
        entered.set()
        release.wait(TIMEOUT)

    dispatcher.add("leader-elected", slow)
    dispatcher.start()
    dispatcher.emit("leader-elected", "leader=1 term=1")
    assert entered.wait(TIMEOUT)  # the thread now holds event 1
    for term in (2, 3, 4, 5):
        dispatcher.emit("leader-elected", f"leader=1 term={term}")
    dispatcher.emit("node-down", "node=2")  # no hook for it: not even queued
    assert dispatcher.dropped == 2
    release.set()
    dispatcher.close()
    assert [e.detail for e in seen] == ["leader=1 term=1", "leader=1 term=2", "leader=1 term=3"]
    assert all(e.kind == "leader-elected" and e.job_id is None for e in seen)
