"""Operating a cluster: ``beanpole serve --cluster ... --http ... --hooks ...`` as
three real node processes on loopback. Each node's ``/metrics`` shows its role, term
and leader (and the queue, the leader's, read through the node); a SIGKILL of the
leader changes them on the survivors; ``/readyz`` answers 200 on a healthy node and
503 with the reason on a node whose peers are all gone; a hook module gets
``leader-elected`` at start and after the failover, ``node-down`` for the killed
nodes and ``shutdown`` last. Bad starts get one line and a non-zero exit."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import greenstalk
import pytest

from rawhttp import Answer, get
from servechild import BeanpoleChild, cluster_file
from tlscerts import client_context, make_certs

DEADLINE = 30.0  # seconds for what a cluster does in well under one
T = TypeVar("T")

HOOK_MODULE = '''
import json, os

OUT = os.environ["NODE_HOOK_OUT"]

def install(node):
    def record(event):
        with open(OUT, "a", encoding="utf-8") as out:
            out.write(json.dumps([event.kind, event.detail, event.job_id]) + "\\n")

    for kind in ("leader-elected", "node-down", "shutdown"):
        node.hook(kind, record)
'''

BAD_HOOK_MODULE = '''
def install(node):
    node.hook("bury", print)
'''




@dataclass
class NodeProc:
    child: BeanpoleChild
    http: tuple[str, int]
    client: tuple[str, int]
    hooks: Path

    def metrics(self) -> dict[str, float]:
        """``/metrics`` as name{labels} -> value."""
        answer = get(self.http, "/metrics")
        assert answer.status == 200, answer.body
        out = {}
        for line in answer.body.decode().splitlines():
            if line and not line.startswith("#"):
                name, _sp, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def events(self) -> list[list[object]]:
        if not self.hooks.exists():
            return []
        return [json.loads(line) for line in self.hooks.read_text().splitlines()]


def start(path: Path, node: int, tmp_path: Path, *extra: str) -> NodeProc:
    hooks = tmp_path / f"hooks{node}.jsonl"
    child = BeanpoleChild(
        "serve", "--cluster", str(path), "--node", str(node), "-b", str(tmp_path / f"node{node}"),
        "--http", "127.0.0.1:0", "--hooks", "nodehooks:install", *extra,
        env={"NODE_HOOK_OUT": str(hooks)}, path=[str(tmp_path)],
    )  # fmt: skip
    clients = child.wait_line(r"^beanpole node \d+ of cluster .*: clients on 127\.0\.0\.1:(\d+)")
    http = child.wait_line(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")
    return NodeProc(child, ("127.0.0.1", int(http[1])), ("127.0.0.1", int(clients[1])), hooks)


def until(what: str, probe: Callable[[], T | None]) -> T:
    """``probe()``'s first value that is not None, within :data:`DEADLINE`."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE}s: {what}")
        time.sleep(0.05)


def answered(address: tuple[str, int], path: str, status: int, **options: object) -> Answer:
    """The first answer to GET ``path`` with ``status``, within :data:`DEADLINE`."""

    def probe() -> Answer | None:
        answer = get(address, path, **options)
        return answer if answer.status == status else None

    return until(f"{path} answers {status}", probe)


def heard(node: NodeProc, *wanted: list[object]) -> list[list[object]]:
    """``node``'s hook events once every one of ``wanted`` is among them (a
    ``node-down`` is matched on its node alone: its reason varies)."""

    def probe() -> list[list[object]] | None:
        events = node.events()
        seen = [[k, _field(d, "node")] if k == "node-down" else [k, d, j] for k, d, j in events]
        return events if all(w in seen for w in wanted) else None

    return until(f"hooks hear {wanted}", probe)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, dict[int, NodeProc]]]:
    (tmp_path / "nodehooks.py").write_text(HOOK_MODULE, encoding="utf-8")
    path, _clients = cluster_file(tmp_path)
    nodes: dict[int, NodeProc] = {}
    try:
        for n in (1, 2, 3):
            nodes[n] = start(path, n, tmp_path)
        yield path, nodes
    finally:
        for node in nodes.values():
            node.child.kill()


def agreed_leader(nodes: dict[int, NodeProc], among: set[int], not_: int = 0) -> tuple[int, int]:
    """The leader and term every node of ``among`` reports in its metrics, once they
    agree on one (other than ``not_``) and it says it leads and is ready."""

    def probe() -> tuple[int, int] | None:
        seen = {n: nodes[n].metrics() for n in among}
        leaders = {m["beanpole_cluster_leader"] for m in seen.values()}
        terms = {m["beanpole_cluster_term"] for m in seen.values()}
        if len(leaders) != 1 or len(terms) != 1:
            return None
        leader = int(leaders.pop())
        if leader in (0, not_) or leader not in among:
            return None
        if not all(m["beanpole_cluster_ready"] == 1 for m in seen.values()):
            return None
        return leader, int(terms.pop())

    return until(f"nodes {sorted(among)} agree on a leader", probe)


def test_metrics_readiness_and_hooks_through_a_failover(
    cluster: tuple[Path, dict[int, NodeProc]],
) -> None:
    _path, nodes = cluster
    leader, term = agreed_leader(nodes, {1, 2, 3})
    follower = next(n for n in nodes if n != leader)
    client = greenstalk.Client(nodes[follower].client, use="ops")
    for i in range(5):
        client.put(f"job {i}".encode())
    client.close()

    for n, node in nodes.items():
        m = node.metrics()
        assert m["beanpole_cluster_node_id"] == n
        role = "leader" if n == leader else "follower"
        for name in ("leader", "follower", "candidate", "learner", "down"):
            assert m[f'beanpole_cluster_role{{role="{name}"}}'] == (1 if name == role else 0)
        assert m["beanpole_cluster_last_log_index"] >= m["beanpole_cluster_commit_index"] > 0
        # The five puts' records at least, all of them in memory (below the bound).
        assert 5 * len(b"job 0") < m["beanpole_cluster_log_memory_bytes"] <= 16 << 20
        # The queue is the leader's, read through this node's client address.
        assert m["beanpole_up"] == 1
        assert m['beanpole_jobs{state="ready",tube="ops"}'] == 5
        assert get(node.http, "/readyz").body == b"ready\n"
        assert get(node.http, "/healthz").body == b"ok\n"
    on_leader = nodes[leader].metrics()
    assert "beanpole_cluster_quorum_ack_age_seconds" in on_leader
    assert {k for k in on_leader if k.startswith("beanpole_cluster_follower_lag")} == {
        f'beanpole_cluster_follower_lag{{node="{n}"}}' for n in nodes if n != leader
    }
    assert not any(k.startswith("beanpole_cluster_follower_lag") for k in nodes[follower].metrics())
    elected = ["leader-elected", f"leader={leader} term={term}", None]
    for node in nodes.values():
        heard(node, elected)

    # A SIGKILL of the leader: the survivors elect another and their gauges say so.
    nodes[leader].child.kill()
    survivors = set(nodes) - {leader}
    second, second_term = agreed_leader(nodes, survivors, not_=leader)
    assert second_term > term
    until(
        "the new leader sees the old one down",
        lambda: nodes[second].metrics().get(f'beanpole_cluster_member_up{{node="{leader}"}}') == 0
        or None,
    )
    for n in survivors:
        events = heard(
            nodes[n],
            ["node-down", leader],
            ["leader-elected", f"leader={second} term={second_term}", None],
        )
        assert events[0] == elected  # the start's leader came first
        down = next(d for k, d, _j in events if k == "node-down")
        assert _field(down, "reason")  # says why (a refused connection here)
    assert nodes[second].metrics()['beanpole_jobs{state="ready",tube="ops"}'] == 5

    # Its last peer killed too: the leader has no quorum, so it is not ready, says
    # why, and its queue is not read (a read could not be committed).
    last = next(n for n in survivors if n != second)
    nodes[last].child.kill()
    answer = answered(nodes[second].http, "/readyz", 503)
    assert answer.body.startswith(b"not ready: no quorum: a majority of the voters last")
    m = nodes[second].metrics()
    assert m["beanpole_cluster_ready"] == 0 and m["beanpole_up"] == 0
    assert m["beanpole_cluster_quorum_ack_age_seconds"] > 0.8
    assert get(nodes[second].http, "/healthz").status == 200
    events = heard(nodes[second], ["node-down", last])
    assert [k for k, d, _j in events if _field(d, "node") == last] == ["node-down"]
    assert nodes[second].child.stop() == 0
    assert nodes[second].events()[-1] == ["shutdown", f"node={second}", None]


def _field(detail: object, key: str) -> object:
    from beanpole.server.node_events import detail_fields

    value = detail_fields(str(detail)).get(key)
    return int(value) if value is not None and value.isdigit() else value


def test_a_follower_alone_is_not_ready_because_it_knows_no_leader(
    cluster: tuple[Path, dict[int, NodeProc]],
) -> None:
    _path, nodes = cluster
    leader, _term = agreed_leader(nodes, {1, 2, 3})
    follower = next(n for n in nodes if n != leader)
    for n in nodes:
        if n != follower:
            nodes[n].child.kill()
    answer = answered(nodes[follower].http, "/readyz", 503)
    reason = answer.body.decode()
    assert re.match(r"not ready: (no leader known|leader \d+ does not answer)", reason), reason
    until(
        "the lone node no longer names a leader",
        lambda: nodes[follower].metrics()["beanpole_cluster_leader"] == 0 or None,
    )
    assert b"no leader known" in get(nodes[follower].http, "/readyz").body


def test_https_endpoint_on_a_node(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    (tmp_path / "nodehooks.py").write_text(HOOK_MODULE, encoding="utf-8")
    path, _clients = cluster_file(tmp_path, 1)
    child = BeanpoleChild(
        "serve", "--cluster", str(path), "--node", "1", "-b", str(tmp_path / "node1"),
        "--http", "tls:127.0.0.1:0", "--tls-cert", str(certs.server_cert),
        "--tls-key", str(certs.server_key),
    )  # fmt: skip
    try:
        port = int(child.wait_line(r"metrics on https://127\.0\.0\.1:(\d+)/metrics")[1])
        context = client_context(certs.ca)
        answer = answered(("127.0.0.1", port), "/readyz", 200, context=context)
        assert answer.body == b"ready\n"
        body = get(("127.0.0.1", port), "/metrics", context=context).body
        assert b'beanpole_cluster_role{role="leader"} 1.0' in body
        assert child.stop() == 0
    finally:
        child.kill()


def test_bad_node_settings_get_one_line(tmp_path: Path) -> None:
    (tmp_path / "badhooks.py").write_text(BAD_HOOK_MODULE, encoding="utf-8")
    path, _clients = cluster_file(tmp_path, 1)
    base = ("serve", "--cluster", str(path), "--node", "1", "-b", str(tmp_path / "d"))

    def fails(*args: str) -> str:
        child = BeanpoleChild(*base, *args, path=[str(tmp_path)])
        assert child.finish() == 1
        lines = [line for line in child.stderr if line.strip()]
        assert len(lines) == 1, lines
        assert "Traceback" not in lines[0]
        return lines[0]

    out = fails("--tls-cert", "x.pem", "--tls-key", "y.pem")
    assert "--tls-cert cannot be used with --cluster except for --http tls:" in out
    out = fails("--hooks", "badhooks:install")
    assert "event kind 'bury' is for single servers only" in out
    assert "leader-elected, node-down, shutdown" in out
    out = fails("--hooks", "no_such_hook_module:install")
    assert "cannot import hook module 'no_such_hook_module'" in out
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        out = fails("--http", f"127.0.0.1:{taken.getsockname()[1]}")
    assert "cannot serve HTTP on 127.0.0.1:" in out
    out = fails("-u", "nobody")
    assert "-u/--user cannot be used with --cluster" in out
