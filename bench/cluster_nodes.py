"""A three-node beanpole cluster on loopback for the cluster bench: the cluster file, node
processes (``python -m beanpole serve --cluster FILE --node N -b DIR``, or the bench's own
launcher ``cluster_node.py`` when Raft timing or phase events are wanted), finding the
leader with raw-socket puts, and telling when a restarted node has caught up.

Every node answers clients (a follower relays them to the leader), so "who leads" is
asked of the nodes themselves (``beanpole._core.cluster_status``, what ``beanpole cluster
status`` shows), and the leader must then take a put on its own client address.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
START_TIMEOUT = 30.0  # seconds for a node to say both its addresses listen
LEAD_TIMEOUT = 30.0  # seconds for a cluster to take a put
CATCH_UP_TIMEOUT = 30.0  # seconds for a restarted node to hold the latest entry
STARTED = re.compile(r"^beanpole node (\d+) of cluster .*: clients on ")
# Ports for the nodes come from below the ephemeral range, so that a port freed by a
# killed node is not handed to some client connection before the node comes back on it.
PORT_LOW, PORT_HIGH = 20000, 32000


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports below the ephemeral range, free now."""
    out: list[int] = []
    rng = random.Random()
    while len(out) < n:
        port = rng.randrange(PORT_LOW, PORT_HIGH)
        if port in out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        out.append(port)
    return out


def write_cluster_file(path: Path, n: int) -> dict[int, int]:
    """Write a cluster file of ``n`` loopback nodes; their client ports by id."""
    ports = free_ports(2 * n)
    clients = {i + 1: ports[2 * i] for i in range(n)}
    text = "".join(
        f'[[node]]\nid = {i}\nclient = "127.0.0.1:{clients[i]}"\n'
        f'peer = "127.0.0.1:{ports[2 * i - 1]}"\n'
        for i in clients
    )
    path.write_text(text, encoding="utf-8")
    return clients


@dataclass
class Timing:
    """Raft timing for the launcher (``None``: the node's defaults); ``hand_over``: on
    SIGTERM a leader hands its lead over before it stops, as ``serve`` does (without it,
    the node stops at once: what ``serve`` did before hand-overs)."""

    heartbeat_ms: int | None = None
    election_ms: tuple[int, int] | None = None
    hand_over: bool = True


@dataclass
class NodeProc:
    """One node process, its stderr kept (last lines) and, with the launcher, its role
    changes as (monotonic time, status) pairs."""

    id: int
    port: int
    proc: subprocess.Popen[str]
    log: deque[str] = field(default_factory=lambda: deque(maxlen=50))
    events: list[tuple[float, dict[str, object]]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (0 once it is gone)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def threads_cpu_seconds(self) -> dict[str, float]:
        """User + system CPU time so far of the process's threads, summed by thread
        name (``beanpole`` the engine's, ``beanpole-raft`` Raft and the network's,
        ``beanpole-raft-l`` the log writer's); empty once it is gone."""
        out: dict[str, float] = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return out
        for tid in tids:
            try:
                text = Path(f"/proc/{self.pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name = text[text.index("(") + 1 : text.rindex(")")]
            fields = text.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            out[name] = out.get(name, 0.0) + cpu
        return out


class Cluster:
    """``n`` nodes sharing a cluster file under ``root``; node ``i`` keeps ``root/nodeI``."""

    def __init__(
        self, root: Path, n: int = 3, timing: Timing | None = None, token: bool = False
    ) -> None:
        self.root = root
        self.file = root / "cluster.toml"
        self.clients = write_cluster_file(self.file, n)
        self.timing = timing
        self.nodes: dict[int, NodeProc] = {}
        self.marks = 0
        #: With ``token``: an admin token file the nodes take membership changes with.
        self.token: Path | None = None
        if token:
            self.token = root / "admin.token"
            self.token.write_text(f"{random.getrandbits(128):032x}\n", encoding="utf-8")

    def command(self, node: int) -> list[str]:
        data = str(self.root / f"node{node}")
        if self.timing is None:
            cmd = [
                sys.executable,
                "-m",
                "beanpole",
                "serve",
                "--cluster",
                str(self.file),
                "--node",
                str(node),
                "-b",
                data,
            ]
            if self.token is not None:
                cmd += ["--admin-token-file", str(self.token)]
            return cmd
        cmd = [sys.executable, str(BENCH / "cluster_node.py"), str(self.file), str(node), data]
        if self.timing.heartbeat_ms is not None:
            cmd += ["--heartbeat-ms", str(self.timing.heartbeat_ms)]
        if self.timing.election_ms is not None:
            cmd += ["--election-ms", f"{self.timing.election_ms[0]},{self.timing.election_ms[1]}"]
        if self.timing.hand_over:
            cmd += ["--hand-over"]
        if self.token is not None:
            cmd += ["--admin-token-file", str(self.token)]
        return cmd

    def change(self, op: str, node: int, timeout: float = 60.0) -> str:
        """``beanpole cluster OP --node NODE`` (add, promote, remove) with the token."""
        from beanpole import _core

        assert self.token is not None, "a cluster made without token=True"
        token = self.token.read_text(encoding="utf-8").strip()
        answer: str = _core.cluster_change(self.file, op, node, token, timeout)
        return answer

    def start(self, node: int) -> NodeProc:
        """Start node ``node`` and wait for its line saying both addresses listen."""
        proc = subprocess.Popen(
            self.command(node),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.timing is not None else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        np = NodeProc(node, self.clients[node], proc)
        lines: queue.Queue[str | None] = queue.Queue()
        # Read stderr (and the launcher's events on stdout) on threads for the process's
        # life, so it never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc.stderr, lines, np.log), daemon=True).start()
        if self.timing is not None:
            threading.Thread(target=_events, args=(proc.stdout, np.events), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                line = None
            if line is None:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"node {node} did not start: " + " | ".join(np.log))
            if STARTED.search(line):
                break
        self.nodes[node] = np
        return np

    def start_all(self) -> None:
        for node in self.clients:
            self.start(node)

    def signal(self, node: int, sig: int) -> float:
        """Send ``sig`` to a node; the monotonic time just before it was sent."""
        t0 = time.monotonic()
        os.kill(self.nodes[node].pid, sig)
        return t0

    def wait_exit(self, node: int, timeout: float = 20.0) -> int:
        proc = self.nodes[node].proc
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"node {node} did not exit within {timeout} s") from None

    def stop_all(self) -> None:
        for np in self.nodes.values():
            if np.alive():
                np.proc.send_signal(signal.SIGTERM)
        for np in self.nodes.values():
            try:
                np.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                np.proc.kill()
                np.proc.wait()

    def leader(self, among: Sequence[int] | None = None, timeout: float = LEAD_TIMEOUT) -> int:
        """The node of ``among`` (default: every live node) that says it leads, in the
        highest term, once it takes a put itself."""
        from beanpole import _core

        ids = [i for i in (among or self.nodes) if self.nodes[i].alive()]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = _core.cluster_status(self.file, 0.5)
            leading = [r for r in rows if r["role"] == "leader" and r["id"] in ids]
            if leading:
                node = int(max(leading, key=lambda r: int(r["term"] or 0))["id"])
                if try_put(self.clients[node], b"probe") is not None:
                    return node
            time.sleep(0.005)
        raise RuntimeError(f"no node of {ids} led and took a put within {timeout} s")

    def wait_caught_up(self, node: int, leader: int) -> None:
        """Put a marker through ``leader`` and wait until ``node``'s Raft log holds it:
        the node has every entry up to an acknowledged put made after it restarted."""
        self.marks += 1
        mark = f"catch-up-{node}-{self.marks}-{random.getrandbits(48):012x}".encode()
        if try_put(self.clients[leader], mark, timeout=5.0) is None:
            raise RuntimeError(f"leader {leader} did not take the catch-up marker")
        raft = self.root / f"node{node}" / "raft"
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while time.monotonic() < deadline:
            if log_holds(raft, mark):
                return
            time.sleep(0.01)
        raise RuntimeError(f"node {node} did not catch up within {CATCH_UP_TIMEOUT} s")


#: How far ahead of its frames a log segment holds written zeros (the log's ZEROS_AHEAD).
ZEROS_AHEAD = 1 << 20


def log_holds(raft_dir: Path, mark: bytes, tail: int = 1 << 20) -> bool:
    """Whether the last ``tail`` bytes of the newest log segment's frames (before the
    zeros the log keeps written ahead of them) hold ``mark`` (a put's body is in its
    entry as sent)."""
    segments = sorted(raft_dir.glob("*.rlog"))
    if not segments:
        return False
    with segments[-1].open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(size - tail - 2 * ZEROS_AHEAD, 0))
        return mark in f.read().rstrip(b"\0")[-tail:]


def _exchange(
    port: int, data: bytes, done: Callable[[bytes], bool], timeout: float
) -> bytes | None:
    """Send ``data`` on a new connection and read until ``done`` says the answer is whole;
    None if the connection was refused or closed first, or nothing came within ``timeout``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(data)
            reply = b""
            while not done(reply):
                chunk = s.recv(65536)
                if not chunk:
                    return None
                reply += chunk
    except OSError:
        return None
    return reply


def try_put(port: int, body: bytes, timeout: float = 1.0) -> int | None:
    """One put on a new connection: the job id if the node answered INSERTED, None if it
    closed the connection, refused it, or said nothing within ``timeout``."""
    put = b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body)
    reply = _exchange(port, put, lambda r: r.endswith(b"\r\n"), timeout)
    if reply is None:
        return None
    if not reply.startswith(b"INSERTED "):
        raise RuntimeError(f"a put was answered {reply!r}")
    return int(reply[9:-2])


def served_by(port: int, body: bytes, timeout: float = 1.0) -> int | None:
    """One put on a new connection, and ``stats`` after it: the pid of the process whose
    server answered (through a follower, the leader's), or None if the put was not
    answered INSERTED or the connection closed."""
    data = b"put 0 0 60 %d\r\n%s\r\nstats\r\n" % (len(body), body)
    reply = _exchange(
        port, data, lambda r: b"\npid: " in r and r.endswith(b"\r\n"), timeout
    )
    if reply is None:
        return None
    if not reply.startswith(b"INSERTED "):
        raise RuntimeError(f"a put was answered {reply[:40]!r}")
    return int(reply.split(b"\npid: ", 1)[1].split(b"\n", 1)[0])


def _drain(stream: object, lines: queue.Queue[str | None], log: deque[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        log.append(line.rstrip("\n"))
        lines.put(line)
    lines.put(None)


def _events(stream: object, events: list[tuple[float, dict[str, object]]]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        events.append((float(ev.pop("t")), ev))
