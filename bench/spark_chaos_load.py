"""The queue side of bench/spark_chaos.py: the two server processes, the producers,
the rival worker of the TTR cycles, and the probes of what a server still holds.

Servers are ``python -m beanpole serve`` children on loopback (stderr read for the
"listening on" line); a server keeps one port, picked free below the kernel's
ephemeral range, across its restarts, so the query's ``servers`` option stays valid.
Each server counts its incarnations: a restart kills the old process (SIGTERM or
SIGKILL), waits for it to be gone, counts one more, and only then starts the new one.
A connection is therefore known to belong to incarnation k when the count read before
and after connecting is k.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import socket
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import beanpole
from beanpole.client import BeanstalkdError, ClientConnectionError, NotFoundError, TimedOutError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from spark_chaos_check import Put, Taken, body_for

from servechild import ServeChild

RECONNECT_FOR = 30.0  # seconds a producer keeps trying to reach a server that is down
REBIND_FOR = 10.0  # seconds a restart keeps trying to bind its port while it is taken


def free_port() -> int:
    """A free port below the kernel's ephemeral range (32768 and up on Linux), so that
    no other process's outgoing connection or port-0 bind takes it while the server
    is down between two incarnations."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found between 20000 and 32000")


class Server:
    """One beanpole server process, restarted in place."""

    def __init__(self, name: str, log: Path | None) -> None:
        self.name = name
        self.log = log  # -b DIR -f 0 when set; None: no log, a restart loses every job
        self.port = free_port()
        self.incarnation = 0
        self.child: ServeChild | None = None
        self.restarts: list[tuple[int, str, bool]] = []  # (cycle, how, kept its jobs)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = ["-l", "127.0.0.1", "-p", str(self.port)]
        if self.log is not None:
            args += ["-b", str(self.log), "-f", "0"]
        deadline = time.monotonic() + REBIND_FOR
        while True:
            self.child = ServeChild(*args)
            try:
                address = self.child.addresses()[0]
                break
            except AssertionError as e:
                # Another process may hold the port for a moment (a connection to it
                # closing); anything else is a failure.
                if "Address already in use" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert isinstance(address, tuple)
        self.port = address[1]

    def down(self, how: str) -> None:
        assert self.child is not None
        if how == "kill":
            self.child.kill()
        else:
            self.child.stop()
        self.child = None

    def restart(self, how: str, cycle: int) -> None:
        """SIGTERM (``term``) or SIGKILL (``kill``), then start again on the same port."""
        self.down(how)
        self.incarnation += 1
        self.restarts.append((cycle, how, self.log is not None))
        self.start()

    def lossy(self) -> set[tuple[str, int]]:
        """(address, incarnation) of the incarnations whose jobs died with a restart."""
        return (
            set() if self.log is not None else {(self.address, i) for i in range(self.incarnation)}
        )


class Producers:
    """One thread per server putting numbered jobs, every put and its reply recorded."""

    def __init__(self, servers: list[Server], tube: str, seed: int, short_ttr: float) -> None:
        self.servers = servers
        self.tube = tube
        self.rng = random.Random(seed)
        self.short_ttr = short_ttr
        self.seqs = itertools.count(1)
        self.lock = threading.Lock()  # guards seqs, puts and the quota across producer threads
        self.puts: list[Put] = []
        self.errors: list[str] = []

    def _ttr(self, seq: int) -> int:
        # Mixed TTRs: a share of 2-3 s (shorter than a slow sink's batch), the rest 60 s.
        r = random.Random(seq).random()
        return 2 + seq % 2 if r < self.short_ttr else 60

    def run(self, jobs: int, cycle: int, seconds: float) -> list[threading.Thread]:
        """Put ``jobs`` jobs over ``seconds`` (about), spread over the servers; the threads."""
        share = [
            jobs // len(self.servers) + (i < jobs % len(self.servers))
            for i in range(len(self.servers))
        ]
        threads = [
            threading.Thread(target=self._produce, args=(s, n, cycle, seconds), daemon=True)
            for s, n in zip(self.servers, share, strict=True)
        ]
        for t in threads:
            t.start()
        return threads

    def _connect(self, server: Server) -> tuple[beanpole.Client[bytes], int] | None:
        deadline = time.monotonic() + RECONNECT_FOR
        while time.monotonic() < deadline:
            before = server.incarnation
            try:
                client = beanpole.Client(server.address, encoding=None, use=self.tube, timeout=10)
            except (ClientConnectionError, OSError):
                time.sleep(0.05)
                continue
            if server.incarnation == before:
                return client, before
            client.close()
        return None

    def burst(self, server: Server, n: int, cycle: int) -> None:
        """Put ``n`` jobs into ``server`` at once (new work arriving after a restart)."""
        self._produce(server, n, cycle, 0.0)

    def _produce(self, server: Server, n: int, cycle: int, seconds: float) -> None:
        pause = seconds / max(1, n) * 10  # puts go in bursts of 10
        conn: tuple[beanpole.Client[bytes], int] | None = None
        for k in range(n):
            if conn is None or not conn[0].connected:
                conn = self._connect(server)
                if conn is None:
                    self.errors.append(f"{server.name}: unreachable for {RECONNECT_FOR}s")
                    return
            client, incarnation = conn
            with self.lock:
                seq = next(self.seqs)
            ttr = self._ttr(seq)
            sent = time.time()
            status, job_id = "unknown", None
            try:
                job_id = client.put(body_for(seq), ttr=ttr)
                status = "ok"
            except BeanstalkdError:
                status = "refused"
            except (ClientConnectionError, OSError):
                client.close()
            with self.lock:
                self.puts.append(
                    Put(seq, server.address, incarnation, status, job_id, ttr, cycle, sent)
                )
            if k % 10 == 9:
                time.sleep(pause)
        if conn is not None:
            conn[0].close()


class Rival:
    """Another worker on the tube (the TTR cycles): reserves, deletes, records what it took."""

    def __init__(self, servers: list[Server], tube: str, cycle: int, every: float) -> None:
        self.servers = servers
        self.tube = tube
        self.cycle = cycle
        self.every = every
        self.taken: list[Taken] = []
        self.done = threading.Event()
        self.threads = [
            threading.Thread(target=self._work, args=(s,), daemon=True) for s in servers
        ]
        for t in self.threads:
            t.start()

    def _work(self, server: Server) -> None:
        client: beanpole.Client[bytes] | None = None
        while not self.done.is_set():
            try:
                if client is None or not client.connected:
                    client = beanpole.Client(
                        server.address, encoding=None, watch=self.tube, timeout=10
                    )
                job = client.reserve(timeout=1)
                client.delete(job)
                self.taken.append(Taken(job.body, self.cycle))
            except TimedOutError:
                continue
            except (BeanstalkdError, ClientConnectionError, OSError):
                time.sleep(0.1)
                continue
            self.done.wait(self.every)
        if client is not None:
            client.close()

    def stop(self) -> list[Taken]:
        self.done.set()
        for t in self.threads:
            t.join(timeout=15)
        return self.taken


def still_there(
    address: str, jobs: Iterable[tuple[int, bytes]], let_go: float = 30.0
) -> set[bytes]:
    """The bodies of ``jobs`` (id, body) that the server still holds under that id,
    once none of them is reserved any more (waiting up to ``let_go`` seconds):
    ``query.stop()`` returns before Spark's Python process for the reader has ended,
    and that process deletes the committed batch on its way out."""
    jobs = list(jobs)
    found: set[bytes] = set()
    with beanpole.Client(address, encoding=None, timeout=10) as client:
        deadline = time.monotonic() + let_go
        while time.monotonic() < deadline:
            states = []
            for job_id, _ in jobs:
                with contextlib.suppress(NotFoundError):
                    states.append(client.stats_job(job_id)["state"])
            if "reserved" not in states:
                break
            time.sleep(0.05)
        for job_id, body in jobs:
            try:
                if client.peek(job_id).body == body:
                    found.add(body)
            except NotFoundError:
                continue
    return found


def tube_counts(address: str, tube: str) -> dict[str, int]:
    """stats-tube's job counts by state (empty if the tube does not exist)."""
    with beanpole.Client(address, timeout=10) as client:
        try:
            st = client.stats_tube(tube)
        except NotFoundError:
            return {}
    return {s: int(st[f"current-jobs-{s}"]) for s in ("ready", "reserved", "delayed", "buried")}
