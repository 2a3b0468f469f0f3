"""The replicated cluster of bench/cluster_chaos.py (``--nodes 3`` or 5): its addresses
and cluster file, a fault-injecting proxy on every directed link between two nodes,
the node processes, and a monitor that sees which node serves clients.

**A proxy per directed link.** The cluster file gives each node one peer address, the
one it listens on and the one every other node dials. To put a proxy on the link from
node i to node j, that address is a name, ``bp-node<j>:<port>``, and each node runs in
a mount namespace of its own (``unshare --mount``) whose /etc/hosts says where the
names lead *for it*: its own name to 127.0.0.1 (where it listens), node j's name to
127.21.i.j, where the proxy of link (i, j) listens on node j's port and forwards to
127.0.0.1. So node i's traffic to node j (its requests, and the replies on the same
connections) goes through proxy (i, j) and nowhere else, and a fault on (i, j) alone
is a one-way partition. This needs root (a mount namespace and a bind mount); the
nodes' client addresses are plain 127.0.0.1 ports, reached through a client proxy of
each node as on one node.

**Who serves.** Only the leader serves clients itself; a node that does not lead
forwards client connections to the leader, so a probe tells them apart by the ``pid``
in the ``stats`` it is answered (the node's own process, or the leader's).
Every client of a node is a session whose reservations outlive a change of leader:
a follower's client is forwarded to the leader, and a leader's own client is carried
to the next leader when its term ends. The harness still records, for the report and
for the workers, which node serves, seen from outside: a monitor thread per node
probes the node's client address (not through its proxy) every few milliseconds
while it does not serve itself, and holds a connection open while it does. It
records, as history faults (the checker ends no reservation at either):

- ``leader`` (node, ``at``, ``seen``): the node began to serve a term, after ``at``
  (its last probe that was refused, closed or relayed, or the end of its previous term) and
  before ``seen`` (the probe's reply);
- ``depose`` (node, ``at``, ``seen``): the node's term server closed the monitor's
  connection, or the node's Raft term moved on (asked on its peer address: the
  monitor's connection is a session, which outlives the term), after ``at`` (the
  last request it answered in its term) and before ``seen``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from cluster_chaos_load import Recorder
from cluster_chaos_proxy import Proxy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from servechild import BeanpoleChild

HOME = "127.0.0.1"
PORT_RANGE = (20000, 32000)  # below the ephemeral range
PORT_REGISTRY = Path(tempfile.gettempdir()) / "beanpole-chaos-ports"
SYNC_RECORD_ENV = "BEANPOLE_SYNC_RECORD"  # rust/cluster/src/synced.rs
SYNC_STALL_ENV = "BEANPOLE_SYNC_STALL_MS"  # the same: each log fsync held back
SYNC_STALLS = (0, 0, 0, 5, 20)  # milliseconds, one drawn per node start
# --log-cache-bytes, one drawn per node start: with 0 every committed entry on disk
# leaves memory, so applies and replication read the log back from the files.
LOG_CACHES = (0, 64 << 10, 16 << 20)
# --snapshot-bytes, one drawn per node start: with 4 KiB a node snapshots every few
# entries, so builds (from the snapshot on disk and the log after it), their files'
# writes and installs on followers behind run under every fault.
SNAPSHOT_FLOORS = (4 << 10, 64 << 10, 64 << 20)
PROBE_EVERY = 0.025  # seconds between probes of a node that does not serve
HOLD_EVERY = 0.05  # seconds between the requests on a serving node's held connection
REPLY_WAIT = 0.5  # seconds a probe waits for its answer
START_LINE = r"^beanpole node {} of cluster .*: clients on "
# Each node's own view of the names: /etc/hosts is bind-mounted over in its namespace.
IN_NAMESPACE = 'mount --bind "$0" /etc/hosts && exec "$@"'


def link_host(dialer: int, target: int) -> str:
    """Where the proxy of the link from node ``dialer`` to node ``target`` listens."""
    return f"127.21.{dialer}.{target}"


def name(node: int) -> str:
    return f"bp-node{node}"


class PortTaken(RuntimeError):
    """A node could not bind one of its addresses: another process took the port
    after the harness chose it. The run is void (retried, or counted as a harness
    error), never a pass."""


class NodeStartError(RuntimeError):
    """A node process ended before it said it was serving."""


class Ports:
    """Ports for one run's nodes, claimed in a registry shared by every harness
    process on this machine, so that parallel runs and batches never pick the same
    port, and free (bound and released) on every host when claimed.

    The registry is a directory with one file per claimed port holding the
    claimer's pid; a claim is made under an exclusive ``flock`` of the registry's
    lock file, and a port whose claimer is no longer alive is free again. The ports
    are below the kernel's ephemeral range (32768 and up on Linux), so no outgoing
    connection takes one while its node is down between a kill and its restart;
    a process outside the registry that binds one explicitly still can, and the
    node's start then raises ``PortTaken``."""

    def __init__(self, rng: random.Random, registry: Path = PORT_REGISTRY) -> None:
        self.rng = rng
        self.registry = registry
        self.claimed: list[int] = []

    def claim(self, hosts: Sequence[str]) -> int:
        self.registry.mkdir(parents=True, exist_ok=True)
        with (self.registry / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            for _ in range(2000):
                port = self.rng.randrange(*PORT_RANGE)
                entry = self.registry / str(port)
                if _claimed_by_live(entry) or not _free(hosts, port):
                    continue
                entry.write_text(str(os.getpid()), encoding="ascii")
                self.claimed.append(port)
                return port
        raise RuntimeError(f"no port free on {', '.join(hosts)} in {PORT_RANGE}")

    def release(self) -> None:
        for port in self.claimed:
            with contextlib.suppress(OSError):
                (self.registry / str(port)).unlink()
        self.claimed = []


def _claimed_by_live(entry: Path) -> bool:
    try:
        pid = int(entry.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _free(hosts: Sequence[str], port: int) -> bool:
    socks = []
    try:
        for host in hosts:
            s = socket.socket()
            socks.append(s)
            s.bind((host, port))
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()
    return True


def namespaces_work() -> str | None:
    """None if a node can be run in a mount namespace of its own; else why not."""
    try:
        done = subprocess.run(
            ["unshare", "--mount", "sh", "-c", "mount --bind /etc/hosts /etc/hosts"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare: {e}"
    if done.returncode != 0:
        return f"unshare --mount: {done.stderr.strip() or done.returncode} (root is needed)"
    return None


class Net:
    """The cluster's addresses, its files, each node's hosts file, and the proxies of
    every directed link between two nodes.

    ``n`` nodes make the cluster (``cluster.toml`` lists them: the lowest id
    initializes the cluster with them) and ``spares`` more may join it later
    (``cluster-all.toml`` lists every node: what the spares start with and what
    ``beanpole cluster add|promote|remove`` is given). ``members`` is the set of
    nodes the harness has made members; the faults and the clients use only those."""

    def __init__(self, n: int, work: Path, spares: int = 0) -> None:
        self.ports = Ports(random.Random())  # ports need not repeat between runs of a seed
        self.ids = list(range(1, n + spares + 1))
        self.members = set(self.ids[:n])
        self.links: dict[tuple[int, int], Proxy] = {}
        try:
            self.client = {j: self.ports.claim([HOME]) for j in self.ids}
            self.peer = {
                j: self.ports.claim([HOME, *(link_host(i, j) for i in self.ids if i != j)])
                for j in self.ids
            }
        except BaseException:
            self.ports.release()
            raise
        self.file = self._write(work / "cluster.toml", self.ids[:n])
        self.all_file = self._write(work / "cluster-all.toml", self.ids)
        self.hosts: dict[int, Path] = {}
        for i in [0, *self.ids]:  # 0: the harness's own view, every name direct
            lines = [f"{HOME} localhost", "::1 localhost ip6-localhost"]
            lines += [f"{HOME if i in (0, j) else link_host(i, j)} {name(j)}" for j in self.ids]
            self.hosts[i] = work / f"hosts{i}"
            self.hosts[i].write_text("\n".join(lines) + "\n", encoding="utf-8")
        for i in self.ids:
            for j in self.ids:
                if i != j:
                    proxy = Proxy((HOME, self.peer[j]), host=link_host(i, j), port=self.peer[j])
                    self.links[i, j] = proxy.start()

    def _write(self, path: Path, ids: Sequence[int]) -> Path:
        path.write_text(
            "".join(
                f'[[node]]\nid = {j}\nclient = "{HOME}:{self.client[j]}"\n'
                f'peer = "{name(j)}:{self.peer[j]}"\n'
                for j in ids
            ),
            encoding="utf-8",
        )
        return path

    def of(self, node: int, peers: Sequence[int], way: str) -> list[Proxy]:
        """The proxies of ``node``'s links to (``out``), from (``in``) or both ways
        (``both``) with each of ``peers``."""
        out = [self.links[node, p] for p in peers if way in ("out", "both")]
        return out + [self.links[p, node] for p in peers if way in ("in", "both")]

    def dials(self, node: int, taken: bool) -> None:
        """Whether dials of ``node``'s peer address are taken: refused while its
        process is down, as its machine's kernel would (node/vacancy.rs acts on it)."""
        for (_, target), proxy in self.links.items():
            if target == node:
                proxy.listen(taken)

    def heal(self) -> None:
        for proxy in self.links.values():
            proxy.heal()

    def close(self) -> None:
        for proxy in self.links.values():
            proxy.close()
        self.ports.release()


class ClusterNode:
    """One node process (``serve --cluster FILE --node N -b DIR`` in its own mount
        namespace) and the proxy in front of its client address. A node that is no
        member when the run starts (a spare) starts with the file of every node; each
        start records the node's fsyncs (``SYNC_RECORD_ENV``) in ``synced``, for a
        simulated power loss (bench/cluster_chaos_power.py). With ``stalls``, each start
    holds the node's log fsyncs back a drawn number of milliseconds (``SYNC_STALLS``;
    a slow disk), so that a power loss more often finds writes not yet synced, and
    keeps a drawn number of bytes of its log in memory (``LOG_CACHES``) and snapshots
    past a drawn number of bytes of log (``SNAPSHOT_FLOORS``)."""

    def __init__(self, ident: int, net: Net, work: Path, token: Path | None = None,
                 stalls: random.Random | None = None) -> None:  # fmt: skip
        self.id = ident
        self.stalls = stalls  # draws each start's fsync stall, log cache, snapshot floor
        self.stall = 0
        self.cache = LOG_CACHES[-1]
        self.floor = SNAPSHOT_FLOORS[-1]
        self.net = net
        self.dir = work / f"node{ident}"
        self.log = work / f"node{ident}.log"  # every incarnation's stderr
        self.synced = work / f"node{ident}.synced"
        self.file = net.file if ident in net.members else net.all_file
        self.token = token  # --admin-token-file: membership changes allowed
        self.child: BeanpoleChild | None = None
        self.stopped = False  # SIGSTOP sent, no SIGCONT yet
        self.proxy = Proxy((HOME, net.client[ident])).start()

    def start(self) -> None:
        """Start the node and wait until it serves; ``PortTaken`` if one of its
        addresses was in use, ``NodeStartError`` if it ended for another reason."""
        prefix = ["unshare", "--mount", "sh", "-c", IN_NAMESPACE, str(self.net.hosts[self.id])]
        more = [] if self.token is None else ["--admin-token-file", str(self.token)]
        self.stall = 0 if self.stalls is None else self.stalls.choice(SYNC_STALLS)
        if self.stalls is not None:
            self.cache = self.stalls.choice(LOG_CACHES)
            self.floor = self.stalls.choice(SNAPSHOT_FLOORS)
        self.net.dials(self.id, True)
        self.child = BeanpoleChild(
            "serve", "--cluster", str(self.file), "--node", str(self.id),
            "-b", str(self.dir), "--log-cache-bytes", str(self.cache),
            "--snapshot-bytes", str(self.floor), *more, prefix=prefix,
            env={SYNC_RECORD_ENV: str(self.synced), SYNC_STALL_ENV: str(self.stall)},
        )  # fmt: skip
        try:
            self.child.wait_line(START_LINE.format(self.id))
        except AssertionError:
            self.child.kill()
            self._keep_log()
            said = "".join(self.child.stderr).strip().splitlines()
            self.child = None
            why = f"node {self.id} did not start: {said[-1] if said else '(nothing said)'}"
            if any("in use" in line for line in said):
                raise PortTaken(why) from None
            raise NodeStartError(why) from None

    def signal(self, sig: signal.Signals) -> None:
        assert self.child is not None
        self.child.proc.send_signal(sig)
        self.stopped = sig == signal.SIGSTOP

    def down(self, how: str) -> None:
        """SIGKILL (``kill``) or SIGTERM and wait for the exit."""
        assert self.child is not None
        if self.stopped:
            self.signal(signal.SIGCONT)
        if how == "kill":
            self.child.kill()
        else:
            self.child.stop()
        self.net.dials(self.id, False)
        self._keep_log()
        self.child = None

    def wipe(self) -> None:
        """Remove the data directory (the node must be down), and the record of
        what it had synced."""
        assert self.child is None
        shutil.rmtree(self.dir, ignore_errors=True)
        self.synced.unlink(missing_ok=True)

    def _keep_log(self) -> None:
        assert self.child is not None
        with self.log.open("a") as f:
            f.write(
                f"--- pid {self.child.proc.pid}, exit {self.child.proc.returncode}, "
                f"fsyncs held back {self.stall} ms\n"
            )
            f.writelines(self.child.stderr)

    def close(self) -> None:
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                self.child.proc.send_signal(signal.SIGCONT)
            self.child.kill()
            self._keep_log()
            self.child = None
        self.proxy.close()

    @property
    def up(self) -> bool:
        return self.child is not None

    @property
    def pid(self) -> int | None:
        """The node process's id while it runs (the namespace wrapper execs it)."""
        return None if self.child is None else self.child.proc.pid

    @property
    def port(self) -> int:
        return self.proxy.port


class Monitor:
    """Which nodes serve clients, seen from outside; the changes recorded as history
    faults ``leader`` and ``depose`` (the module's docstring says what they bound)."""

    def __init__(self, net: Net, rec: Recorder, pid_of: Callable[[int], int | None]) -> None:
        self.net = net
        self.rec = rec
        # A follower answers clients too (it relays them to the leader): a node
        # serves itself when the `stats` it answers are its own process's.
        self.pid_of = pid_of
        self.stop = threading.Event()
        self._lock = threading.Lock()  # guards serving; taken briefly by many threads
        self.serving: dict[int, int] = {}  # node -> when it was seen to begin serving
        self.changes = 0
        self.threads = [
            threading.Thread(target=self._watch, args=(j,), name=f"monitor{j}", daemon=True)
            for j in net.ids
        ]

    def start(self) -> Monitor:
        for t in self.threads:
            t.start()
        return self

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)

    def leader(self) -> int | None:
        """The node seen last to begin serving, of those that still do."""
        with self._lock:
            return max(self.serving, key=self.serving.__getitem__, default=None)

    def wait_leader(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.leader()
            if node is not None:
                return node
            time.sleep(0.02)
        return None

    def _note(self, kind: str, node: int, at: int, seen: int) -> None:
        self.rec.write({"t": "fault", "kind": kind, "node": node, "at": at, "seen": seen})

    def _watch(self, node: int) -> None:
        address = (HOME, self.net.client[node])
        known_not = time.monotonic_ns()  # the node is known not to serve a new term before
        while not self.stop.is_set():
            probe = time.monotonic_ns()
            try:
                sock = socket.create_connection(address, timeout=REPLY_WAIT)
            except OSError:
                known_not = probe  # down: any term it serves begins later
                self.stop.wait(PROBE_EVERY)
                continue
            with sock:
                # The term around the probe: a node that served it throughout
                # (a change within it would go unseen: the monitor's connection
                # may be a session, which a change of leader does not close).
                term = _term(self.net.peer[node])
                answer = _serves(sock, self.pid_of(node))
                if answer is False:
                    known_not = probe  # accepted and closed: it did not serve then
                if answer is True and (term is None or _term(self.net.peer[node]) != term):
                    answer = None  # the term moved: try again
                if answer is not True:
                    self.stop.wait(PROBE_EVERY)
                    continue
                seen = time.monotonic_ns()
                self._note("leader", node, known_not, seen)
                with self._lock:
                    self.serving[node] = seen
                    self.changes += 1
                last_ok = self._hold(sock, self.net.peer[node], term)
            with self._lock:
                self.serving.pop(node, None)
            if last_ok is not None:
                self._note("depose", node, last_ok, time.monotonic_ns())
                known_not = max(known_not, last_ok)

    def _hold(self, sock: socket.socket, peer: int, term: int) -> int | None:
        """Keep asking on a serving node's connection until it closes or the node's
        term moves on; when it last answered in its term (sent at), or None if the
        monitor stopped first."""
        last_ok = time.monotonic_ns()
        while not self.stop.wait(HOLD_EVERY):
            sent = time.monotonic_ns()
            answer = _ask(sock)
            while answer is None and not self.stop.is_set():
                answer = _ask(sock, send=False)  # slow (a stall, SIGSTOP): wait on
            now_term = _term(peer)
            if now_term is not None and now_term != term:
                return last_ok  # a new term: the old one's server is gone
            if answer is True:
                last_ok = sent
            elif answer is False:
                return last_ok
        return None


def _serves(sock: socket.socket, pid: int | None) -> bool | None:
    """``stats`` on a new connection to a node: True if the node answered itself (the
    stats' ``pid`` is the node's), False if the connection was closed or a follower
    relayed it to another node, None if no whole answer came within REPLY_WAIT."""
    try:
        sock.sendall(b"stats\r\n")
        sock.settimeout(REPLY_WAIT)
        got = b""
        while b"\r\n" not in got:
            chunk = sock.recv(4096)
            if not chunk:
                return False
            got += chunk
        head, _, rest = got.partition(b"\r\n")
        if not head.startswith(b"OK "):
            return False
        need = int(head[3:]) + 2
        while len(rest) < need:
            chunk = sock.recv(4096)
            if not chunk:
                return False
            rest += chunk
    except TimeoutError:
        return None
    except (OSError, ValueError):
        return False
    line = next((x for x in rest.split(b"\n") if x.startswith(b"pid: ")), b"")
    return pid is not None and line[5:].strip() == str(pid).encode()


def _term(port: int) -> int | None:
    """The node's Raft term, asked on its peer address (the status frames 9 and 10 of
    rust/cluster/src/net/status.rs); None if it did not answer."""
    body = b"BPPEER" + (1).to_bytes(2, "little")
    try:
        with socket.create_connection((HOME, port), timeout=REPLY_WAIT) as s:
            s.sendall((len(body) + 1).to_bytes(4, "little") + bytes([9]) + body)
            got = b""
            while len(got) < 4 + 1 + 17:  # length, kind, node u64, role u8, term u64
                chunk = s.recv(4096)
                if not chunk:
                    return None
                got += chunk
    except OSError:
        return None
    if got[4] != 10:
        return None
    return int.from_bytes(got[5 + 9 : 5 + 17], "little")


def _ask(sock: socket.socket, send: bool = True) -> bool | None:
    """``list-tube-used`` on ``sock``: True if a reply line came, False if the
    connection was closed, None if no whole line came within REPLY_WAIT (unknown)."""
    try:
        if send:
            sock.sendall(b"list-tube-used\r\n")
        sock.settimeout(REPLY_WAIT)
        got = b""
        while not got.endswith(b"\r\n"):
            chunk = sock.recv(256)
            if not chunk:
                return False
            got += chunk
    except TimeoutError:
        return None
    except OSError:
        return False
    return True
