"""The client side of bench/cluster_chaos.py: a recorder of JSON-lines history, a raw
protocol connection that records every command and reply with its times, the seeded
workers, and the final drain.

Every time is ``time.monotonic_ns()`` in this one process. A command whose reply does
not come within its deadline, or whose connection fails, is recorded with no reply and
its connection is closed (and the close recorded) before anything else is sent, so
that the checker may treat it as having happened or not. A worker names a job by id
only on the connection that learned the id, and records the body it learned with it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TUBES = ("ca", "cb")
REPLY_SLACK = 2.0  # seconds a reply may take beyond a reserve's own timeout
Route = Callable[[random.Random], tuple[int, int]]  # -> (node, proxy port)


class Recorder:
    """History lines, written as they happen (a lock keeps lines whole)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("w")
        self._lock = threading.Lock()  # one writer at a time: lines must not interleave
        self._conns = itertools.count(1)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")

    def conn_id(self) -> int:
        return next(self._conns)

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Gone(Exception):
    """The connection failed or a reply did not come in time; it is closed."""


class Conn:
    """One recorded protocol connection through the proxy of a node."""

    def __init__(self, rec: Recorder, client: str, node: int, port: int) -> None:
        self.rec = rec
        self.client = client
        self.id = rec.conn_id()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=2.0)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.ids: dict[int, str] = {}  # job id -> body, learned on this connection
        self.used = "default"
        self.closed = False
        rec.write({"t": "open", "conn": self.id, "client": client, "node": node,
                   "at": time.monotonic_ns()})  # fmt: skip

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.rec.write({"t": "close", "conn": self.id, "at": time.monotonic_ns()})
            with contextlib.suppress(OSError):
                self.sock.close()

    def _line(self, deadline: float) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _bytes(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n + 2:
            self._fill(deadline)
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.buf += chunk

    def call(self, cmd: str, line: str, wait: float = 0.0, body: bytes | None = None,
             **fields: Any) -> tuple[str, list[str], bytes | None]:  # fmt: skip
        """Send one command; record it; return (first word, other words, reply body).
        Raises Gone (after recording no reply and closing) if no reply comes."""
        if self.closed:
            raise Gone("closed")
        data = line.encode() + b"\r\n" + (b"" if body is None else body + b"\r\n")
        record: dict[str, Any] = {"t": "op", "client": self.client, "conn": self.id, "cmd": cmd,
                                  **fields}  # fmt: skip
        record["inv"] = time.monotonic_ns()
        try:
            self.sock.sendall(data)
            words = self._line(time.monotonic() + wait + REPLY_SLACK).decode().split()
            got = None
            if words and words[0] in ("RESERVED", "FOUND", "OK"):
                got = self._bytes(int(words[-1]), time.monotonic() + REPLY_SLACK)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            record.update(ret=None, reply=None)
            self.rec.write(record)
            self.close()
            raise Gone(str(e)) from e
        record["ret"] = time.monotonic_ns()
        reply = words[0] if words else ""
        record["reply"] = reply
        if reply in ("RESERVED", "FOUND", "INSERTED") and len(words) > 1:
            record["id"] = int(words[1])
        if reply == "KICKED" and len(words) > 1:
            record["count"] = int(words[1])
        if got is not None and reply in ("RESERVED", "FOUND"):
            record["body"] = got.decode("latin-1")
            self.ids[int(words[1])] = record["body"]
        if got is not None and reply == "OK" and cmd == "stats-job":
            for yaml_line in got.decode().splitlines():
                if yaml_line.startswith("state: "):
                    record["state"] = yaml_line.split(": ", 1)[1].strip()
        self.rec.write(record)
        return reply, words[1:], got

    def plain(self, line: str) -> str:
        """A command the history does not need (use, watch, ignore, stats); raises Gone
        like ``call`` but records only a lost connection."""
        try:
            self.sock.sendall(line.encode() + b"\r\n")
            words = self._line(time.monotonic() + REPLY_SLACK).decode().split()
            if words and words[0] == "OK":
                self._bytes(int(words[1]), time.monotonic() + REPLY_SLACK)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            self.close()
            raise Gone(str(e)) from e
        return words[0] if words else ""


class Worker:
    """A client thread doing a seeded mix of commands, reconnecting whenever its
    connection goes."""

    def __init__(
        self, rec: Recorder, index: int, seed: int, route: Route, stop: threading.Event
    ) -> None:
        self.rec = rec
        self.name = f"w{index}"
        self.rng = random.Random(f"{seed}-{index}")
        self.route = route  # (node, proxy port) to connect to next
        self.stop = stop
        self.seq = 0
        self.held: dict[int, str] = {}  # ids reserved on the current connection
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)

    def connect(self) -> Conn | None:
        try:
            c = Conn(self.rec, self.name, *self.route(self.rng))
        except OSError:
            return None
        try:
            self.watch = sorted(self.rng.sample(TUBES, self.rng.choice((1, 2))))
            for tube in self.watch:
                c.plain(f"watch {tube}")
            c.plain("ignore default")
        except Gone:
            return None
        self.held = {}
        return c

    def run(self) -> None:
        c: Conn | None = None
        while not self.stop.is_set():
            if c is None or c.closed:
                c = self.connect()
                if c is None:
                    time.sleep(0.05)
                    continue
            with contextlib.suppress(Gone):
                self.step(c)
        if c is not None:
            c.close()

    def step(self, c: Conn) -> None:
        r = self.rng.random()
        if r < 0.3:
            self.put(c)
        elif r < 0.65:
            self.reserve(c)
        elif r < 0.7:
            tube = self.rng.choice(TUBES)
            self.use(c, tube)
            c.call("kick", f"kick {self.rng.randint(1, 5)}", tube=tube)
        elif r < 0.9 and c.ids:
            job_id = self.rng.choice(list(c.ids))
            cmd = self.rng.choice(("peek", "stats-job", "kick-job"))
            c.call(cmd, f"{cmd} {job_id}", id=job_id, target=c.ids[job_id])
        else:
            tube = self.rng.choice(TUBES)
            self.use(c, tube)
            cmd = self.rng.choice(("peek-ready", "peek-delayed", "peek-buried"))
            c.call(cmd, cmd, tube=tube)
        time.sleep(self.rng.random() * 0.01)

    def use(self, c: Conn, tube: str) -> None:
        if c.used != tube:
            c.plain(f"use {tube}")
            c.used = tube

    def put(self, c: Conn) -> None:
        self.seq += 1
        body = f"{self.name}-{self.seq}-{self.rng.getrandbits(40):010x}"
        tube = self.rng.choice(TUBES)
        self.use(c, tube)
        pri = self.rng.randrange(0, 2000)
        delay = 0 if self.rng.random() < 0.8 else self.rng.randint(1, 2)
        ttr = self.rng.randint(1, 3)
        reply, words, _ = c.call(
            "put", f"put {pri} {delay} {ttr} {len(body)}", body=body.encode(),
            target=body, tube=tube, pri=pri, delay=delay, ttr=ttr,
        )  # fmt: skip
        if reply == "INSERTED":
            c.ids[int(words[0])] = body

    def reserve(self, c: Conn) -> None:
        wait = self.rng.choice((0, 0, 1))
        reply, words, got = c.call(
            "reserve-with-timeout", f"reserve-with-timeout {wait}", wait=wait, watch=self.watch
        )
        if reply != "RESERVED" or got is None:
            return
        job_id, body = int(words[0]), got.decode("latin-1")
        r = self.rng.random()
        if r < 0.1:
            return  # left to run out its TTR
        if r < 0.2:
            time.sleep(self.rng.random() * 1.5)  # may outlive a TTR of 1 s
        elif r < 0.3:
            c.call("touch", f"touch {job_id}", id=job_id, target=body)
            time.sleep(self.rng.random() * 0.5)
        r = self.rng.random()
        if r < 0.6:
            c.call("delete", f"delete {job_id}", id=job_id, target=body)
        elif r < 0.85:
            delay = self.rng.choice((0, 0, 1))
            c.call("release", f"release {job_id} 100 {delay}", id=job_id, target=body, delay=delay)
        else:
            c.call("bury", f"bury {job_id} 100", id=job_id, target=body)


def drain(rec: Recorder, route: Callable[[], tuple[int, int]], deadline: float) -> bool:
    """Kick, reserve and delete everything left, recorded as client ``drain``, on the
    node ``route`` gives (node, proxy port; asked again after a lost connection); then
    record ``end`` with the stats read that saw the server empty. False if it never
    did before ``deadline``."""
    c: Conn | None = None
    while time.monotonic() < deadline:
        try:
            if c is None or c.closed:
                c = Conn(rec, "drain", *route())
                for tube in TUBES:
                    c.plain(f"watch {tube}")
            for tube in TUBES:
                c.plain(f"use {tube}")
                c.used = tube
                c.call("kick", "kick 100000", tube=tube)
            while True:
                reply, words, got = c.call(
                    "reserve-with-timeout", "reserve-with-timeout 0", watch=list(TUBES)
                )
                if reply != "RESERVED" or got is None:
                    break
                job_id = int(words[0])
                c.call("delete", f"delete {job_id}", id=job_id, target=got.decode("latin-1"))
            inv = time.monotonic_ns()
            c.sock.sendall(b"stats\r\n")
            words = c._line(time.monotonic() + REPLY_SLACK).decode().split()
            yaml = c._bytes(int(words[1]), time.monotonic() + REPLY_SLACK).decode()
            ret = time.monotonic_ns()
            stats = dict(line.split(": ", 1) for line in yaml.splitlines() if ": " in line)
            keys = ("ready", "reserved", "delayed", "buried")
            if all(stats.get(f"current-jobs-{k}", "1").strip() == "0" for k in keys):
                rec.write({"t": "end", "inv": inv, "ret": ret, "empty": True})
                c.close()
                return True
        except (Gone, OSError, ValueError):
            if c is not None:
                c.close()
            c = None
        time.sleep(0.1)
    if c is not None:
        c.close()
    return False
