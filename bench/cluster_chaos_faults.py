"""The fault thread of bench/cluster_chaos.py: at seeded moments a seeded fault, held
for a seeded time, then healed, each recorded in the history as it happens.

On one node (``NodeFaults``): ``kill`` (SIGKILL, restart on the same directory),
``term`` (SIGTERM, restart), ``stop`` (SIGSTOP, then SIGCONT), and through the proxy
in front of its client port ``cut``, ``oneway``, ``stall`` and ``latency``.

In a cluster (``ClusterFaults``, bench/cluster_chaos_nodes.py): ``kill-leader``,
``kill-follower``, ``kill-all`` (SIGKILL of every node, then all restart), ``term``
(SIGTERM of a node, the leader half the time, restart), ``stop-leader``
(SIGSTOP/SIGCONT), ``wipe`` (SIGKILL of a node, its data directory removed, restart:
it rejoins as a new follower and is sent a snapshot; never node 1, which would
initialize a new cluster from an empty directory), ``isolate-leader`` (every link of
the leader cut both ways for 1.5-4 s: another node is elected while the old leader's
clients are still connected to it), and on the proxies of the links between nodes,
for a node (the leader half the time) and all its peers or one of them: ``cut``
(both ways: connections closed, new ones refused), ``oneway`` (only
its links out, or only its links in, cut), ``stall`` (both ways, bytes held) and
``latency`` (20-300 ms per chunk, both ways). The history names node faults by what
was done (``kill``, ``term``, ``stop``/``cont``, ``wipe``, ``restart``) and link
faults as ``link-cut``, ``link-oneway``, ``link-stall``, ``link-latency`` with the
peers and direction, then ``heal``.

Two more in a cluster: ``power`` (a simulated power loss: SIGKILL, the node's files
cut back to what it had fsynced, bench/cluster_chaos_power.py, restart; of one node,
the leader half the time, or a quarter of the time of every member at once; recorded
as ``power``, then ``cut`` with what was removed and cut, then ``restart``), and
``members`` (the cluster grows by its spare nodes, serves for the hold time and
shrinks back, through ``beanpole cluster add|promote|remove``,
bench/cluster_chaos_members.py). Every
fault but ``members`` hits only the nodes that are members at the time.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from cluster_chaos_load import Recorder
from cluster_chaos_members import Members
from cluster_chaos_nodes import ClusterNode, Monitor, Net
from cluster_chaos_power import cut
from cluster_chaos_proxy import Proxy

NODE_FAULTS = ("kill", "term", "stop", "cut", "oneway", "stall", "latency")
CLUSTER_FAULTS = ("kill-leader", "kill-follower", "kill-all", "term", "stop-leader", "wipe",
                  "isolate-leader", "cut", "oneway", "stall", "latency", "power",
                  "members")  # fmt: skip
POWER_ALL = 0.25  # the share of power losses that hit every member at once
ISOLATE_HOLD = (1.5, 4.0)  # seconds the leader is cut off: long enough for a new one
FAULT_GAP = (0.3, 2.0)  # seconds between faults
FAULT_HOLD = (0.1, 2.0)  # seconds a fault lasts
LEADER_WAIT = 10.0  # seconds a leader fault waits for a leader to hit


class SingleNode(Protocol):
    id: int
    proxy: Proxy | None

    def start(self) -> None: ...
    def down(self, how: str) -> None: ...
    def signal(self, sig: signal.Signals) -> None: ...


class Faults:
    """The fault thread: a seeded fault at a seeded moment, held, then healed."""

    def __init__(self, rec: Recorder, rng: random.Random, kinds: Sequence[str],
                 cycles: int | None) -> None:  # fmt: skip
        self.rec = rec
        self.rng = rng
        self.kinds = list(kinds)
        self.cycles = cycles
        self.done: Counter[str] = Counter()
        self.stop = threading.Event()
        self.finished = threading.Event()  # set once --cycles faults have run
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="faults", daemon=True)

    def note(self, kind: str, node: int, **more: object) -> None:
        self.rec.write({"t": "fault", "kind": kind, "node": node, "at": time.monotonic_ns(),
                        **more})  # fmt: skip

    def _run(self) -> None:
        try:
            while not self.stop.wait(self.rng.uniform(*FAULT_GAP)):
                if self.cycles is not None and sum(self.done.values()) >= self.cycles:
                    self.finished.set()
                    return
                kind = self.rng.choice(self.kinds)
                target = self.target()
                self.one(kind, target, self.rng.uniform(*FAULT_HOLD))
                self.done[kind] += 1
        except BaseException as e:  # reported by the run, which then stops
            self.error = e
            self.finished.set()

    def target(self) -> int | None:
        """The node a fault will hit, where it is drawn before the hold (on one node,
        so that a seed gives the schedule it always gave); None: drawn by ``one``."""
        return None

    def one(self, kind: str, target: int | None, hold: float) -> None:
        raise NotImplementedError


class NodeFaults(Faults):
    """Faults on single nodes and the proxies in front of their client ports."""

    def __init__(self, nodes: Sequence[SingleNode], *args: Any) -> None:
        super().__init__(*args)
        self.nodes = nodes

    def target(self) -> int | None:
        return self.rng.randrange(len(self.nodes))

    def one(self, kind: str, target: int | None, hold: float) -> None:
        assert target is not None
        node = self.nodes[target]
        proxy = node.proxy
        assert proxy is not None
        if kind in ("kill", "term"):
            self.note(kind, node.id)
            node.down(kind)
            time.sleep(hold / 2)
            node.start()
            self.note("restart", node.id)
            return
        if kind == "stop":
            self.note("stop", node.id)
            node.signal(signal.SIGSTOP)
            time.sleep(hold)
            node.signal(signal.SIGCONT)
            self.note("cont", node.id)
            return
        direction = self.rng.choice(("up", "down"))
        self.note(kind, node.id, direction=direction if kind == "oneway" else None)
        if kind == "cut":
            proxy.cut()
        elif kind == "oneway":
            proxy.oneway(direction)
        elif kind == "stall":
            proxy.stall()
        else:
            proxy.latency(self.rng.uniform(0.02, 0.3))
        time.sleep(hold)
        proxy.heal()
        self.note("heal", node.id)


class ClusterFaults(Faults):
    """Faults on the node processes of a cluster and the links between them."""

    def __init__(self, nodes: Sequence[ClusterNode], net: Net, monitor: Monitor,
                 token: Path | None, *args: Any) -> None:  # fmt: skip
        super().__init__(*args)
        self.all = {n.id: n for n in nodes}
        self.net = net
        self.monitor = monitor
        self.members = (
            None if token is None else Members(net, self.all, monitor, token, self.rng, self.note)
        )

    @property
    def nodes(self) -> dict[int, ClusterNode]:
        """The members: the nodes the faults hit (spares and removed nodes are not)."""
        return {i: n for i, n in self.all.items() if i in self.net.members}

    def leader(self) -> ClusterNode:
        node = self.monitor.wait_leader(LEADER_WAIT)
        if node is not None and node in self.net.members:
            return self.all[node]
        return self.rng.choice(list(self.nodes.values()))

    def follower(self, besides: int | None = None) -> ClusterNode:
        lead = self.monitor.leader() if besides is None else besides
        return self.rng.choice([n for i, n in self.nodes.items() if i != lead])

    def either(self) -> ClusterNode:
        return self.leader() if self.rng.random() < 0.5 else self.follower()

    def one(self, kind: str, target: int | None, hold: float) -> None:
        if kind in ("kill-leader", "kill-follower", "term", "wipe"):
            if kind == "wipe":
                node = self.rng.choice([n for i, n in self.nodes.items() if i != 1])
            else:
                node = {"kill-leader": self.leader, "kill-follower": self.follower,
                        "term": self.either}[kind]()  # fmt: skip
            how = "term" if kind == "term" else "kill"
            self.note(how, node.id, role=self._role(node.id))
            node.down(how)
            if kind == "wipe":
                node.wipe()
                self.note("wipe", node.id)
            time.sleep(hold / 2)
            node.start()
            self.note("restart", node.id)
        elif kind == "kill-all":
            for node in self.nodes.values():
                self.note("kill", node.id, role=self._role(node.id))
                node.down("kill")
            time.sleep(hold / 2)
            for node in self.nodes.values():
                node.start()
                self.note("restart", node.id)
        elif kind == "power":
            hit = list(self.nodes.values()) if self.rng.random() < POWER_ALL else [self.either()]
            for node in hit:
                self.note("power", node.id, role=self._role(node.id))
                node.down("kill")
                self.note("cut", node.id, **cut(node.dir, node.synced, self.rng).summary())
            time.sleep(hold / 2)
            for node in hit:
                node.start()
                self.note("restart", node.id)
        elif kind == "members":
            assert self.members is not None
            self.members.cycle(hold)
        elif kind == "stop-leader":
            node = self.leader()
            self.note("stop", node.id, role=self._role(node.id))
            node.signal(signal.SIGSTOP)
            time.sleep(hold)
            node.signal(signal.SIGCONT)
            self.note("cont", node.id)
        else:
            self.links(kind, hold)

    def links(self, kind: str, hold: float) -> None:
        if kind == "isolate-leader":
            node = self.leader()
            kind, hold = "cut", self.rng.uniform(*ISOLATE_HOLD)
            peers = [i for i in self.nodes if i != node.id]
        else:
            node = self.either()
            others = [i for i in self.nodes if i != node.id]
            peers = others if self.rng.random() < 0.5 else [self.rng.choice(others)]
        way = self.rng.choice(("out", "in")) if kind == "oneway" else "both"
        proxies = self.net.of(node.id, peers, way)
        seconds = round(self.rng.uniform(0.02, 0.3), 3) if kind == "latency" else None
        self.note(f"link-{kind}", node.id, peers=peers, way=way, seconds=seconds,
                  role=self._role(node.id))  # fmt: skip
        for proxy in proxies:
            if kind in ("cut", "oneway"):
                proxy.cut()
            elif kind == "stall":
                proxy.stall()
            else:
                assert seconds is not None
                proxy.latency(seconds)
        time.sleep(hold)
        for proxy in proxies:
            proxy.heal()
        self.note("heal", node.id)

    def _role(self, node: int) -> str:
        return "leader" if self.monitor.leader() == node else "follower"
