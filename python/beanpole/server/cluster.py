"""``beanpole.Cluster``: a replicated cluster of nodes in this process, for tests
and experiments (production nodes run as ``beanpole serve --cluster FILE --node N
-b DIR``, one process each).

Each node is a ``beanpole._core.ClusterNode`` with its own data directory and its
own threads; they talk to each other over loopback TCP exactly as separate
processes would. ::

    with beanpole.Cluster(nodes=3) as cluster:
        client = greenstalk.Client(cluster.address(2))   # any node serves clients
        client.put(b"hello")
        cluster.stop_node(cluster.leader())              # a failover
        cluster.leader()                                 # waits for the new one

The server layer: imports the native module and nothing of beanpole above it.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from beanpole import _core

__all__ = ["Cluster", "ClusterError"]


class ClusterError(RuntimeError):
    """The cluster cannot start, or did not do in time what was waited for."""


def _listen(host: str) -> socket.socket:
    """A socket listening on ``host`` and a free port."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(1024)
    return sock


class Cluster:
    """``nodes`` nodes on ``host`` (free ports), their data under ``data_dir`` (a
    temporary directory, removed at stop, when None). Raft timing is quicker than a
    production node's by default (``heartbeat_ms`` 50, an election after 300-600 ms
    of silence), so that tests fail over fast. A reply waits at most
    ``commit_timeout_ms`` for its commit (then INTERNAL_ERROR, and the connection
    closes). A client of a node that stops keeps its reservations for
    ``session_grace_ms``; then its jobs are ready again. ``fsync=False`` (``-F``)
    skips the Raft log's fsyncs: faster, and a crash of a majority's machines can
    lose what they acknowledged. Each node keeps ``log_cache_bytes`` of its Raft
    log's records in memory and reads older committed entries back from disk, and
    snapshots its state once its log since the last snapshot holds more than
    ``snapshot_bytes`` of records and a snapshot would drop more than half of that
    log and the last snapshot together."""

    def __init__(
        self,
        nodes: int = 3,
        *,
        host: str = "127.0.0.1",
        data_dir: str | os.PathLike[str] | None = None,
        max_job_size: int = 65535,
        heartbeat_ms: int = 50,
        election_timeout_ms: tuple[int, int] = (300, 600),
        commit_timeout_ms: int = 5000,
        session_grace_ms: int = 5000,
        fsync: bool = True,
        log_cache_bytes: int = 16 << 20,
        snapshot_bytes: int = 64 << 20,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
        self.size = nodes
        self.host = host
        self._data_dir = None if data_dir is None else Path(data_dir)
        self._owned_dir: str | None = None
        self._options: dict[str, Any] = {
            "max_job_size": max_job_size,
            "heartbeat_ms": heartbeat_ms,
            "election_timeout_ms": election_timeout_ms,
            "commit_timeout_ms": commit_timeout_ms,
            "session_grace_ms": session_grace_ms,
            "fsync": fsync,
            "log_cache_bytes": log_cache_bytes,
            "snapshot_bytes": snapshot_bytes,
        }
        self._nodes: dict[int, _core.ClusterNode | None] = {}
        self._clients: dict[int, tuple[str, int]] = {}
        self.cluster_file: Path | None = None

    # -- life ---------------------------------------------------------------------

    def start(self) -> Self:
        """Write the cluster file and start every node; returns once all listen (a
        leader is elected soon after: :meth:`leader` waits for it)."""
        if self._data_dir is None:
            self._owned_dir = tempfile.mkdtemp(prefix="beanpole-cluster-")
            self._data_dir = Path(self._owned_dir)
        self._data_dir.mkdir(parents=True, exist_ok=True)
        # Each node's two sockets are bound here, before the file names their ports,
        # and handed to the node: no other program can take a port in between.
        sockets: dict[int, tuple[socket.socket, socket.socket]] = {}
        entries = []
        shown = f"[{self.host}]" if ":" in self.host else self.host
        try:
            for node in range(1, self.size + 1):
                client, peer = _listen(self.host), _listen(self.host)
                sockets[node] = (client, peer)
                self._clients[node] = (self.host, client.getsockname()[1])
                entries.append(
                    f'[[node]]\nid = {node}\nclient = "{shown}:{client.getsockname()[1]}"\n'
                    f'peer = "{shown}:{peer.getsockname()[1]}"\n'
                )
            self.cluster_file = self._data_dir / "cluster.toml"
            self.cluster_file.write_text("".join(entries), encoding="utf-8")
            for node, (client, peer) in sockets.items():
                self._start(node, client.fileno(), peer.fileno())
        except BaseException:
            self.stop()
            raise
        finally:
            for pair in sockets.values():
                for sock in pair:
                    sock.close()
        return self

    def start_node(self, node: int) -> None:
        """Start ``node`` again on its data directory (binding its addresses anew)."""
        self._start(node, None, None)

    def _start(self, node: int, client_fd: int | None, peer_fd: int | None) -> None:
        if self.cluster_file is None or self._data_dir is None:
            raise ClusterError("the cluster has not been started")
        if self._nodes.get(node) is not None:
            raise ClusterError(f"node {node} is running")
        try:
            self._nodes[node] = _core.ClusterNode.start(
                self.cluster_file,
                node,
                self._data_dir / f"node{node}",
                client_fd=client_fd,
                peer_fd=peer_fd,
                announce=False,
                **self._options,
            )
        except (OSError, ValueError) as err:
            raise ClusterError(str(err)) from None

    def stop_node(self, node: int) -> None:
        """Stop ``node`` (its clients' connections close; its data stays)."""
        running = self._nodes.get(node)
        if running is not None:
            self._nodes[node] = None
            running.stop()

    def stop(self) -> None:
        """Stop every node; remove the data directory if it was a temporary one."""
        for node in list(self._nodes):
            self.stop_node(node)
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None
            self._data_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- looking at it --------------------------------------------------------------

    @property
    def nodes(self) -> list[int]:
        """The node ids, running or not."""
        return list(range(1, self.size + 1))

    def running(self) -> list[int]:
        """The nodes running now."""
        return [n for n, node in self._nodes.items() if node is not None]

    def address(self, node: int) -> tuple[str, int]:
        """Where clients of ``node`` connect (every node serves them)."""
        return self._clients[node]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Every node's client address, by id."""
        return [self._clients[n] for n in self.nodes]

    def status(self) -> list[dict[str, Any]]:
        """Each node's view (``_core.ClusterNode.status``: id, role, term, leader,
        applied, last_log, serving, voters, learners, matched, ...); role ``down``
        for a stopped node."""
        out: list[dict[str, Any]] = []
        for n in self.nodes:
            node = self._nodes.get(n)
            if node is None:
                out.append(
                    {
                        "id": n,
                        "role": "down",
                        "term": 0,
                        "leader": None,
                        "applied": 0,
                        "last_log": 0,
                        "serving": False,
                    }
                )
            else:
                out.append(dict(node.status()))
        return out

    def node(self, node: int) -> _core.ClusterNode | None:
        """The native node ``node`` while it runs (for its status, stats, drain)."""
        return self._nodes.get(node)

    def leader(self, timeout: float = 10.0) -> int:
        """The node that serves clients itself (the leader, caught up), waiting up
        to ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        while True:
            for n in self.running():
                node = self._nodes[n]
                if node is not None and node.wait_serving(0.01):
                    return n
            if time.monotonic() >= deadline:
                raise ClusterError(f"no node served clients within {timeout} s")

    def followers(self, timeout: float = 10.0) -> list[int]:
        """The running nodes other than the leader."""
        leader = self.leader(timeout)
        return [n for n in self.running() if n != leader]

    def drain(self) -> None:
        """Drain mode on every node: whichever leads answers puts DRAINING."""
        for node in self._nodes.values():
            if node is not None:
                node.drain()

    def stats(self, timeout: float = 10.0) -> dict[str, Any]:
        """The leader's ``stats`` (no command is counted)."""
        deadline = time.monotonic() + timeout
        while True:
            node = self._nodes.get(self.leader(max(deadline - time.monotonic(), 0.0)))
            stats = None if node is None else node.stats()
            if stats is not None:
                return dict(stats)
            if time.monotonic() >= deadline:
                raise ClusterError(f"no leader's stats within {timeout} s")
