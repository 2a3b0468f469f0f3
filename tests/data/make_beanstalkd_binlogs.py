#!/usr/bin/env python3
"""Write beanstalkd binlog directories for the importer's tests.

For each case this starts the real beanstalkd (Debian's 1.12 here) with ``-b`` on a fresh
temporary directory, drives it over a raw socket, stops it with SIGKILL (SIGTERM for one
case; beanstalkd 1.12 does not catch either, so both leave the files as they are), and
copies the ``binlog.N`` files to ``tests/data/beanstalkd-binlog/<case>/``, next to an
``expected.json`` that ``rust/engine/tests/import.rs`` compares the reader's output with.

The expectation is what beanstalkd put on disk, which is not always the server's state at
the end: beanstalkd journals puts, deletes, buries, kicks and releases with a delay, and
writes the whole job struct each time, but it does not journal reserves, touches, releases
with delay 0 or timeouts. So after every command the generator reads ``stats``: when
``binlog-records-written`` went up, the command was journaled and the jobs it touched are
snapshotted with ``stats-job`` (the struct on disk is the struct in memory at that moment).
Each command states which jobs it expects to be journaled, and a mismatch stops the run.
When ``binlog-records-migrated`` went up, compaction copied jobs into the current file;
``stats-job``'s ``file`` field tells which, and they are snapshotted too.

Usage: python3 tests/data/make_beanstalkd_binlogs.py [--out DIR] [--beanstalkd PATH] [CASE...]
"""

from __future__ import annotations

import argparse
import json
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "beanstalkd-binlog"
HEX_BODY_LIMIT = 512
STATES = ("ready", "reserved", "buried", "delayed")


def fnv1a64(data: bytes) -> str:
    """FNV-1a, 64 bits, as 16 hex digits: the tests compare long bodies by this."""
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


class Server:
    """beanstalkd on a listening socket bound here first (systemd socket activation)."""

    # Every server started, so that one left running by a failed case can be killed.
    started: ClassVar[list[Server]] = []

    def __init__(self, exe: str, binlog_dir: Path, args: list[str]) -> None:
        self.binlog_dir = binlog_dir
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(128)
        self.port: int = lsock.getsockname()[1]
        # The socket goes in as standard input; the shell moves it to fd 3 and execs
        # beanstalkd under its own pid, which is what LISTEN_PID must name.
        script = 'exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"'
        self.proc = subprocess.Popen(
            ["sh", "-c", script, "sh", exe, "-b", str(binlog_dir), *args],
            stdin=lsock.fileno(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        lsock.close()
        self.stderr: str | None = None
        Server.started.append(self)

    def connect(self) -> Conn:
        return Conn(self.port)

    def stop(self, sig: int = signal.SIGKILL) -> str:
        """Stops the server (if running) and returns what it wrote to stderr."""
        if self.stderr is None:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            _, err = self.proc.communicate(timeout=10)
            self.stderr = err.decode(errors="replace")
        return self.stderr


class Conn:
    """One client connection speaking the beanstalkd protocol."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> str:
        raw = self.file.readline()
        if not raw.endswith(b"\r\n"):
            raise ConnectionError(f"connection closed (got {raw!r})")
        return raw[:-2].decode()

    def cmd(self, line: str, body: bytes | None = None) -> tuple[str, bytes | None]:
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.send(data)
        reply = self.line()
        word = reply.split(" ", 1)[0]
        if word in ("OK", "RESERVED", "FOUND"):
            size = int(reply.rsplit(" ", 1)[1])
            payload = self.file.read(size + 2)
            return reply, payload[:-2]
        return reply, None

    def expect(self, line: str, want: str, body: bytes | None = None) -> None:
        reply, _ = self.cmd(line, body)
        if reply != want:
            raise RuntimeError(f"{line!r}: expected {want!r}, got {reply!r}")

    def yaml(self, line: str) -> dict[str, str] | None:
        reply, payload = self.cmd(line)
        if payload is None:
            if reply == "NOT_FOUND":
                return None
            raise RuntimeError(f"{line!r}: {reply!r}")
        out: dict[str, str] = {}
        for row in payload.decode().splitlines():
            if ": " in row:
                key, value = row.split(": ", 1)
                out[key] = value.strip('"')
        return out


@dataclass
class DiskJob:
    """One job as the generator believes beanstalkd's files hold it."""

    id: int
    tube: str
    body: bytes
    pri: int
    delay_s: int
    ttr_s: int
    state: str
    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int
    file: int
    created: tuple[int, int]
    deadline: tuple[int, int] | None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.id,
            "tube": self.tube,
            "pri": self.pri,
            "delay_ns": self.delay_s * 1_000_000_000,
            "ttr_ns": self.ttr_s * 1_000_000_000,
            "state": self.state,
            "reserves": self.reserves,
            "timeouts": self.timeouts,
            "releases": self.releases,
            "buries": self.buries,
            "kicks": self.kicks,
            "body_len": len(self.body),
            "body_fnv1a64": fnv1a64(self.body),
            "created_at_min_ns": self.created[0],
            "created_at_max_ns": self.created[1],
        }
        if len(self.body) <= HEX_BODY_LIMIT:
            out["body_hex"] = self.body.hex()
        if self.deadline is not None:
            out["deadline_at_min_ns"] = self.deadline[0]
            out["deadline_at_max_ns"] = self.deadline[1]
        return out


@dataclass
class Recorder:
    """Tracks what beanstalkd has journaled, through a control connection."""

    ctl: Conn
    disk: dict[int, DiskJob] = field(default_factory=dict)
    bodies: dict[int, bytes] = field(default_factory=dict)
    created: dict[int, tuple[int, int]] = field(default_factory=dict)
    bury_order: list[int] = field(default_factory=list)
    deleted: set[int] = field(default_factory=set)
    optional_ids: set[int] = field(default_factory=set)
    unacked_put_bodies: list[bytes] = field(default_factory=list)
    max_id: int = 0
    migrations: int = 0
    written: int = 0
    migrated: int = 0
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reset_counters()

    def reset_counters(self) -> None:
        """After connecting to a (re)started server: its counters start again."""
        stats = self.ctl.yaml("stats")
        assert stats is not None
        self.written = int(stats["binlog-records-written"])
        self.migrated = int(stats["binlog-records-migrated"])

    def stats_job(self, job_id: int) -> dict[str, str] | None:
        return self.ctl.yaml(f"stats-job {job_id}")

    def snapshot(self, job_id: int, sj: dict[str, str], deadline: tuple[int, int] | None) -> None:
        state = sj["state"]
        assert state in STATES, sj
        old = self.disk.get(job_id)
        if state != "delayed":
            deadline = None
        elif deadline is None and old is not None:
            deadline = old.deadline
        self.disk[job_id] = DiskJob(
            id=job_id,
            tube=sj["tube"],
            body=self.bodies[job_id],
            pri=int(sj["pri"]),
            delay_s=int(sj["delay"]),
            ttr_s=int(sj["ttr"]),
            state=state,
            reserves=int(sj["reserves"]),
            timeouts=int(sj["timeouts"]),
            releases=int(sj["releases"]),
            buries=int(sj["buries"]),
            kicks=int(sj["kicks"]),
            file=int(sj["file"]),
            created=self.created[job_id],
            deadline=deadline,
        )
        if state == "buried":
            if old is None or old.state != "buried" or job_id not in self.bury_order:
                if job_id in self.bury_order:
                    self.bury_order.remove(job_id)
                self.bury_order.append(job_id)
        elif job_id in self.bury_order:
            self.bury_order.remove(job_id)

    def after(
        self,
        what: str,
        journaled: list[int],
        window: tuple[int, int],
        delay_s: int = 0,
    ) -> None:
        """Account for a command that should have journaled the jobs ``journaled``."""
        stats = self.ctl.yaml("stats")
        assert stats is not None
        written = int(stats["binlog-records-written"])
        migrated = int(stats["binlog-records-migrated"])
        dw, dm = written - self.written, migrated - self.migrated
        self.written, self.migrated = written, migrated
        if dw - dm != len(journaled):
            raise RuntimeError(
                f"{what}: expected {len(journaled)} journaled records, beanstalkd wrote "
                f"{dw - dm} (and migrated {dm})"
            )
        deadline = None
        if delay_s:
            ns = delay_s * 1_000_000_000
            deadline = (window[0] + ns, window[1] + ns)
        for job_id in journaled:
            sj = self.stats_job(job_id)
            if sj is None:
                self.disk.pop(job_id, None)
                self.deleted.add(job_id)
                if job_id in self.bury_order:
                    self.bury_order.remove(job_id)
            else:
                self.snapshot(job_id, sj, deadline)
        if dm:
            seen = 0
            for job_id, job in sorted(self.disk.items()):
                sj = self.stats_job(job_id)
                if sj is not None and int(sj["file"]) != job.file:
                    seen += 1
                    self.snapshot(job_id, sj, None)
            self.migrations += dm
            self.log.append(f"{what}: {dm} migrated ({seen} tracked)")
            if seen > dm:
                raise RuntimeError(f"{what}: {seen} jobs moved but {dm} migrations counted")

    # Commands, each checked against what it should journal.

    def put(
        self,
        conn: Conn,
        body: bytes,
        pri: int = 0,
        delay: int = 0,
        ttr: int = 120,
    ) -> int:
        t0 = time.time_ns()
        reply, _ = conn.cmd(f"put {pri} {delay} {ttr} {len(body)}", body)
        t1 = time.time_ns()
        if not reply.startswith("INSERTED "):
            raise RuntimeError(f"put: {reply!r}")
        job_id = int(reply.split()[1])
        self.max_id = max(self.max_id, job_id)
        self.bodies[job_id] = body
        self.created[job_id] = (t0, t1)
        self.after(f"put {job_id}", [job_id], (t0, t1), delay)
        return job_id

    def run(
        self,
        conn: Conn,
        line: str,
        want: str,
        journaled: list[int],
        delay: int = 0,
    ) -> None:
        t0 = time.time_ns()
        conn.expect(line, want)
        t1 = time.time_ns()
        self.after(line, journaled, (t0, t1), delay)

    def reserve(self, conn: Conn, job_id: int) -> None:
        self.run(conn, f"reserve-job {job_id}", f"RESERVED {job_id} {len(self.bodies[job_id])}", [])
        # (the reply carries the body; Conn.cmd has read it)

    def delete(self, conn: Conn, job_id: int) -> None:
        self.run(conn, f"delete {job_id}", "DELETED", [job_id])

    def bury(self, conn: Conn, job_id: int, pri: int) -> None:
        self.run(conn, f"bury {job_id} {pri}", "BURIED", [job_id])

    def release(self, conn: Conn, job_id: int, pri: int, delay: int) -> None:
        self.run(
            conn, f"release {job_id} {pri} {delay}", "RELEASED", [job_id] if delay else [], delay
        )

    def kick_job(self, conn: Conn, job_id: int) -> None:
        self.run(conn, f"kick-job {job_id}", "KICKED", [job_id])

    def expected(
        self, case: str, args: list[str], stop: str, files: list[str]
    ) -> dict[str, object]:
        return {
            "case": case,
            "beanstalkd_args": args,
            "stopped_with": stop,
            "version": 7,
            "files": files,
            "max_id_min": self.max_id,
            "max_id_max": self.max_id + len(self.unacked_put_bodies),
            "jobs": [j.to_json() for _, j in sorted(self.disk.items())],
            "buried_order": list(self.bury_order),
            "deleted_ids": sorted(self.deleted - set(self.disk)),
            "optional_ids": sorted(self.optional_ids),
            "unacked_put_bodies_fnv1a64": sorted(fnv1a64(b) for b in self.unacked_put_bodies),
            "migrations": self.migrations,
        }


@dataclass
class Meta:
    """How a case ran, for expected.json."""

    args: list[str] = field(default_factory=list)
    stop: str = "SIGKILL"
    torn: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def use(conn: Conn, tube: str) -> None:
    conn.expect(f"use {tube}", f"USING {tube}")


def binlog_files(d: Path) -> list[Path]:
    found = [p for p in d.iterdir() if p.name.startswith("binlog.") and p.name[7:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[7:]))


def torn_tail(path: Path) -> str | None:
    """If the newest record in ``path`` is only partly written, say which part is missing.

    Looks only for the shapes an interrupted write leaves in beanstalkd's zero-filled
    files (version 7): a name length followed by zeros, a tube name followed by an
    all-zero job struct, or a job struct followed by a body that is still zeros.
    """
    data = path.read_bytes()
    if data[:4] != (7).to_bytes(4, "little"):
        return None
    pos = 4
    while pos + 84 <= len(data):
        name_len = int.from_bytes(data[pos : pos + 4], "little", signed=True)
        if not 0 <= name_len <= 200:
            return None
        job = pos + 4 + name_len
        if job + 80 > len(data):
            return None
        job_id = int.from_bytes(data[job : job + 8], "little")
        if job_id == 0:
            if not name_len:
                return None
            return "job struct" if any(data[pos + 4 : job]) else "tube name"
        size = int.from_bytes(data[job + 32 : job + 36], "little", signed=True)
        pos = job + 80
        if name_len:
            body = data[pos : pos + size]
            if len(body) < size or size < 2:
                return None
            if not body.endswith(b"\r\n"):
                return "body"
            pos += size
    return None


def wait_stopped(pid: int) -> None:
    """Wait until a SIGSTOP has taken effect (a write under way finishes first)."""
    stat = Path(f"/proc/{pid}/stat")
    for _ in range(10_000):
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("T", "t"):
            return
        time.sleep(0.0001)
    raise RuntimeError("beanstalkd did not stop")


@dataclass
class Burst:
    """Clients putting (and deleting some of their older jobs) as fast as they can."""

    server: Server
    rec: Recorder
    tube: str
    clients: int = 4
    keep: int = 8
    batch: int = 16
    acked: dict[int, tuple[bytes, int, int, int]] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)
    in_flight_puts: list[bytes] = field(default_factory=list)
    in_flight_deletes: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)
    attempts: int = 0

    def start(self) -> None:
        for n in range(self.clients):
            t = threading.Thread(target=self.client, args=(n,), daemon=True)
            t.start()
            self.threads.append(t)

    def client(self, n: int) -> None:
        rng = random.Random(n)
        conn = self.server.connect()
        mine: list[int] = []
        seq = 0
        try:
            use(conn, self.tube)
            while True:
                # A pipelined batch keeps beanstalkd busy writing, so that a random stop
                # often lands inside a record.
                batch: list[tuple[bytes, int]] = []
                for _ in range(self.batch):
                    seq += 1
                    pad = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))
                    batch.append((f"burst {n}.{seq} ".encode() + pad, rng.randrange(0, 2000)))
                with self.lock:
                    self.in_flight_puts.extend(body for body, _ in batch)
                t0 = time.time_ns()
                conn.send(b"".join(b"put %d 0 60 %d\r\n%s\r\n" % (p, len(b), b) for b, p in batch))
                for body, pri in batch:
                    reply = conn.line()
                    t1 = time.time_ns()
                    if not reply.startswith("INSERTED "):
                        raise RuntimeError(f"put: {reply}")
                    job_id = int(reply.split()[1])
                    with self.lock:
                        self.in_flight_puts.remove(body)
                        self.acked[job_id] = (body, pri, t0, t1)
                    mine.append(job_id)
                victims = []
                while len(mine) > self.keep:
                    victims.append(mine.pop(rng.randrange(len(mine) - self.keep // 2)))
                if not victims:
                    continue
                with self.lock:
                    self.in_flight_deletes.update(victims)
                conn.send(b"".join(b"delete %d\r\n" % v for v in victims))
                for v in victims:
                    reply = conn.line()
                    if reply != "DELETED":
                        raise RuntimeError(f"delete {v}: {reply}")
                    with self.lock:
                        self.in_flight_deletes.discard(v)
                        self.deleted.add(v)
        except (OSError, ConnectionError, RuntimeError):
            return
        finally:
            conn.close()

    def kill_mid_record(self, want: str | None = None, attempts: int = 1000) -> str | None:
        """Stop beanstalkd at random moments until its newest record is half written (with
        ``want`` missing, if given), then kill it there. Returns the missing part, or None
        if every attempt missed."""
        rng = random.Random(1)
        pid = self.server.proc.pid
        torn: str | None = None
        time.sleep(0.05)
        for attempt in range(attempts):
            self.attempts = attempt + 1
            time.sleep(rng.uniform(0.0005, 0.004))
            os.kill(pid, signal.SIGSTOP)
            wait_stopped(pid)
            try:
                for path in reversed(binlog_files(self.server.binlog_dir)):
                    torn = torn_tail(path)
                    if torn:
                        break
                if want is not None and torn != want:
                    torn = None
            except OSError:
                torn = None
            if torn:
                break
            os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGKILL)
        self.server.stop()
        for t in self.threads:
            t.join(timeout=10)
        return torn

    def account(self) -> None:
        """Add the burst's outcome to the recorder: acknowledged puts are required (as put),
        jobs with a delete in flight or puts without a reply are optional."""
        rec = self.rec
        for job_id, (body, pri, t0, t1) in sorted(self.acked.items()):
            rec.max_id = max(rec.max_id, job_id)
            if job_id in self.deleted:
                rec.deleted.add(job_id)
                continue
            if job_id in self.in_flight_deletes:
                rec.optional_ids.add(job_id)
                continue
            rec.bodies[job_id] = body
            rec.created[job_id] = (t0, t1)
            rec.disk[job_id] = DiskJob(
                id=job_id,
                tube=self.tube,
                body=body,
                pri=pri,
                delay_s=0,
                ttr_s=60,
                state="ready",
                reserves=0,
                timeouts=0,
                releases=0,
                buries=0,
                kicks=0,
                file=-1,
                created=(t0, t1),
                deadline=None,
            )
        rec.unacked_put_bodies.extend(self.in_flight_puts)


# The cases. Each gets a fresh directory and server and returns the recorder.

ODD_TUBE = "t$()+;./_-"
LONG_TUBE = "L" * 199 + ")"


def case_states(exe: str, d: Path, meta: Meta) -> Recorder:
    """Jobs in every state, several tubes, deletes, releases, kicks, counters."""
    srv = Server(exe, d, ["-f", "0", "-s", "8192"])
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "default")
    ready1 = rec.put(prod, b"ready in default", pri=100)
    use(prod, ODD_TUBE)
    urgent = rec.put(prod, b"urgent in an odd tube", pri=0, ttr=5)
    use(prod, "emails.v2")
    lowest = rec.put(prod, b"lowest priority", pri=2**32 - 1, ttr=0)
    use(prod, LONG_TUBE)
    rec.put(prod, b"in a 200-byte tube name", pri=7)
    use(prod, "default")
    rec.put(prod, b"delayed for an hour", pri=10, delay=3600)
    use(prod, "graves")
    b1 = rec.put(prod, b"buried third", pri=30)
    b2 = rec.put(prod, b"buried first", pri=31)
    b3 = rec.put(prod, b"buried second", pri=32)
    for j, p in ((b2, 500), (b3, 501), (b1, 502)):
        rec.reserve(work, j)
        rec.bury(work, j, p)
    use(prod, "default")
    held = rec.put(prod, b"reserved when the server stopped", pri=40, ttr=3600)
    rec.reserve(work, held)
    rel_delay = rec.put(prod, b"released with a new priority and a delay", pri=50)
    rec.reserve(work, rel_delay)
    rec.release(work, rel_delay, 51, 1800)
    rel_now = rec.put(prod, b"released with a new priority, no delay", pri=60)
    rec.reserve(work, rel_now)
    rec.release(work, rel_now, 61, 0)  # not journaled (beanstalkd issue 597)
    gone_ready = rec.put(prod, b"deleted while ready")
    rec.delete(prod, gone_ready)
    gone_buried = rec.put(prod, b"deleted while buried")
    rec.reserve(work, gone_buried)
    rec.bury(work, gone_buried, 1)
    rec.delete(prod, gone_buried)
    gone_delayed = rec.put(prod, b"deleted while delayed", delay=600)
    rec.delete(prod, gone_delayed)
    gone_reserved = rec.put(prod, b"deleted while reserved")
    rec.reserve(work, gone_reserved)
    rec.delete(work, gone_reserved)
    kicked_buried = rec.put(prod, b"buried then kicked", pri=70)
    rec.reserve(work, kicked_buried)
    rec.bury(work, kicked_buried, 71)
    rec.kick_job(prod, kicked_buried)
    kicked_delayed = rec.put(prod, b"delayed then kicked", pri=80, delay=900)
    rec.kick_job(prod, kicked_delayed)
    use(prod, "kickme")
    k1 = rec.put(prod, b"kicked by kick 1")
    k2 = rec.put(prod, b"still buried after kick 1")
    for j in (k1, k2):
        rec.reserve(work, j)
        rec.bury(work, j, 5)
    rec.run(prod, "kick 1", "KICKED 1", [k1])
    busy = rec.put(prod, b"reserved twice, buried twice, kicked once", pri=90)
    rec.reserve(work, busy)
    rec.bury(work, busy, 91)
    rec.kick_job(prod, busy)
    rec.reserve(work, busy)
    rec.bury(work, busy, 92)
    touched = rec.put(prod, b"reserved and touched, then released with a delay")
    rec.reserve(work, touched)
    rec.run(work, f"touch {touched}", "TOUCHED", [])
    rec.release(work, touched, 3, 7200)
    del ready1, urgent, lowest
    meta.stop = "SIGTERM"
    meta.args = ["-f", "0", "-s", "8192"]
    srv.stop(signal.SIGTERM)
    return rec


def case_max_size(exe: str, d: Path, meta: Meta) -> Recorder:
    """A 65535-byte body (the default maximum) followed by two small jobs: beanstalkd's own
    replay drops all three."""
    args = ["-f", "0", "-s", "66560"]
    srv = Server(exe, d, args)
    ctl, prod = srv.connect(), srv.connect()
    rec = Recorder(ctl)
    big = bytes((i * 7 + 3) % 251 for i in range(65535))
    rec.put(prod, big, pri=1)
    rec.put(prod, b"small after the big one", pri=2)
    rec.put(prod, b"another small one", pri=3, delay=3000)
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    # What beanstalkd itself makes of this directory (in a copy: it writes a new file).
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        copy.mkdir()
        for p in binlog_files(d):
            shutil.copyfile(p, copy / p.name)
        again = Server(exe, copy, args)
        c = again.connect()
        stats = c.yaml("stats")
        assert stats is not None
        c.close()
        err = again.stop()
        meta.extra["beanstalkd_replay_total_jobs"] = int(stats["total-jobs"])
        meta.extra["beanstalkd_replay_stderr"] = [
            line.replace(str(copy), "DIR") for line in err.splitlines() if line.strip()
        ]
    return rec


def case_binary(exe: str, d: Path, meta: Meta) -> Recorder:
    """Bodies with NUL, CR, LF and CRLF inside, every byte value, and an empty body."""
    args = ["-f", "0", "-s", "4096"]
    srv = Server(exe, d, args)
    ctl, prod = srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "bin")
    for body in (
        b"",
        b"\x00",
        b"\r\n",
        b"a\r\nb",
        b"\r\n\r\n",
        b"\x00\x00\r\n\x00",
        b"\r",
        b"\n",
        bytes(range(256)),
        b"\x00" * 100,
        b"ends with CR\r",
    ):
        rec.put(prod, body, pri=len(body))
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_multi_file(exe: str, d: Path, meta: Meta) -> Recorder:
    """Small segments: jobs and their updates spread over many files."""
    args = ["-f", "0", "-s", "1024"]
    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    ids: list[int] = []
    for i in range(24):
        tube = ("alpha", "beta", ODD_TUBE)[i % 3]
        use(prod, tube)
        body = f"job {i} ".encode() + b"." * (i * 5)
        ids.append(rec.put(prod, body, pri=i, delay=3600 if i % 7 == 3 else 0))
    for j in (ids[1], ids[0], ids[5]):
        rec.reserve(work, j)
        rec.bury(work, j, 1000 + j)
    rec.reserve(work, ids[2])
    rec.release(work, ids[2], 5, 600)
    for j in (ids[6], ids[9], ids[20]):
        rec.delete(prod, j)
    rec.kick_job(prod, ids[1])
    rec.reserve(work, ids[8])
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_compaction(exe: str, d: Path, meta: Meta) -> Recorder:
    """Compaction copies old jobs forward: two buried ones (copied in put order, which is
    not their bury order) and one that is reserved at that moment (the only way state 2
    reaches a file). A later ready job keeps the oldest file, and with it the bury
    records, alive: once that file goes, the files no longer say in which order jobs
    were buried, as the copies come in the order of their puts."""
    args = ["-f", "0", "-s", "2048"]
    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "old")
    c = rec.put(prod, b"C: reserved while copied", pri=3, ttr=3600)
    a = rec.put(prod, b"A: buried second", pri=1)
    b = rec.put(prod, b"B: buried first", pri=2)
    for k in range(6):  # compaction may copy several at once; some must stay
        rec.put(prod, f"K{k}: ready, keeps the first file".encode(), pri=6)
    rec.reserve(work, b)
    rec.bury(work, b, 20)
    rec.reserve(work, a)
    rec.bury(work, a, 10)
    rec.reserve(work, c)
    use(prod, "churn")
    n = 0
    while rec.migrations < 3 and n < 200:
        n += 1
        j = rec.put(prod, f"filler {n}".encode() + b"-" * 40)
        rec.delete(prod, j)
    copied = {job_id for job_id, job in rec.disk.items() if job.file > 1}
    if not {a, b, c} <= copied:
        raise RuntimeError(f"compaction copied {sorted(copied)}, not A, B and C")
    if rec.disk[c].state != "reserved":
        raise RuntimeError("the reserved job was not copied while reserved")
    stats = ctl.yaml("stats")
    assert stats is not None
    if stats["binlog-oldest-index"] != "1":
        raise RuntimeError("the first file is gone, and the bury order with it")
    rec.put(prod, b"E: after compaction", pri=5)
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_burst_kill(exe: str, d: Path, meta: Meta) -> Recorder:
    """Clients put and delete as fast as they can; beanstalkd is killed in the middle of
    writing a record (found by stopping it and looking at its newest file)."""
    args = ["-s", "4096"]
    srv = Server(exe, d, args)
    rec = Recorder(srv.connect())
    rec.ctl.close()
    burst = Burst(srv, rec, "burst")
    burst.start()
    torn = burst.kill_mid_record(want="body")
    burst.account()
    meta.args = args
    meta.stop = "SIGKILL"
    meta.torn = torn
    print(f"  burst: {burst.attempts} stops, {len(burst.acked)} puts acknowledged")
    return rec


def case_restart(exe: str, d: Path, meta: Meta) -> Recorder:
    """Killed in the middle of a record, restarted on the same directory (beanstalkd
    replays it and buries its buried jobs again), used some more, killed again. The file
    with the torn record is no longer the newest."""
    args = ["-s", "2048"]
    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "first")
    g1 = [rec.put(prod, f"generation 1 job {i}".encode(), pri=i) for i in range(6)]
    for j in (g1[4], g1[1]):
        rec.reserve(work, j)
        rec.bury(work, j, 100 + j)
    delayed = rec.put(prod, b"delayed across the restart", delay=7200)
    burst = Burst(srv, rec, "burst", clients=2)
    burst.start()
    torn = burst.kill_mid_record(want="job struct")
    for c in (ctl, prod, work):
        c.close()

    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec.ctl = ctl
    rec.reset_counters()
    burst.account()
    for job_id, job in rec.disk.items():
        sj = rec.stats_job(job_id)
        if sj is None:
            raise RuntimeError(f"job {job_id} did not survive beanstalkd's own replay")
        # (Compaction may have copied it during the burst; the copy holds the same
        # struct, as nothing unjournaled happened to these jobs.)
        job.file = int(sj["file"])
    use(prod, "second")
    g2 = [rec.put(prod, f"generation 2 job {i}".encode(), pri=50 + i) for i in range(4)]
    rec.kick_job(prod, g1[1])
    rec.reserve(work, g2[0])
    rec.bury(work, g2[0], 7)
    rec.reserve(work, g1[2])
    rec.bury(work, g1[2], 8)
    rec.delete(prod, g1[3])
    rec.reserve(work, g2[1])
    rec.release(work, g2[1], 9, 60)
    del delayed
    meta.args = args
    meta.stop = "SIGKILL, restarted, SIGKILL"
    meta.torn = torn
    srv.stop()
    return rec


def case_deleted(exe: str, d: Path, meta: Meta) -> Recorder:
    """Every job deleted: nothing live, but ids must continue after the highest."""
    args = ["-f", "0", "-s", "4096"]
    srv = Server(exe, d, args)
    ctl, prod = srv.connect(), srv.connect()
    rec = Recorder(ctl)
    for i in range(3):
        j = rec.put(prod, f"to be deleted {i}".encode())
        rec.delete(prod, j)
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_fresh(exe: str, d: Path, meta: Meta) -> Recorder:
    """Started and stopped with no job ever put: one file with a version and zeros."""
    args = ["-s", "4096"]
    srv = Server(exe, d, args)
    rec = Recorder(srv.connect())
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


CASES: dict[str, Callable[[str, Path, Meta], Recorder]] = {
    "states": case_states,
    "max-size": case_max_size,
    "binary": case_binary,
    "multi-file": case_multi_file,
    "compaction": case_compaction,
    "burst-kill": case_burst_kill,
    "restart": case_restart,
    "deleted": case_deleted,
    "fresh": case_fresh,
}


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="beanstalkd-binlog-") as tmp:
        d = Path(tmp) / "binlog"
        d.mkdir()
        yield d


def beanstalkd_version(exe: str) -> str:
    out = subprocess.run([exe, "-v"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def generate(name: str, exe: str, out: Path) -> dict[str, object]:
    meta = Meta()
    with scratch() as d:
        try:
            rec = CASES[name](exe, d, meta)
        finally:
            for server in Server.started:
                server.stop()
            Server.started.clear()
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        files = binlog_files(d)
        for p in files:
            shutil.copyfile(p, target / p.name)
            (target / p.name).chmod(0o644)
    expected = rec.expected(name, meta.args, meta.stop, [p.name for p in files])
    expected["beanstalkd"] = beanstalkd_version(exe)
    expected["torn"] = meta.torn
    expected.update(meta.extra)
    (target / "expected.json").write_text(to_json(expected))
    return expected


def to_json(doc: dict[str, object]) -> str:
    """JSON with one key, and one job, per line."""
    rows = []
    for key, value in doc.items():
        if key == "jobs" and isinstance(value, list) and value:
            jobs = ",\n  ".join(json.dumps(j, separators=(",", ":")) for j in value)
            rows.append(f'"{key}": [\n  {jobs}\n ]')
        else:
            rows.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n " + ",\n ".join(rows) + "\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"default: all of {', '.join(CASES)}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--beanstalkd", default=shutil.which("beanstalkd"))
    opts = parser.parse_args()
    if not opts.beanstalkd:
        print("beanstalkd is not installed (apt-get install beanstalkd)", file=sys.stderr)
        return 1
    unknown = [name for name in opts.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; cases: {', '.join(CASES)}")
    for name in opts.cases or list(CASES):
        exp = generate(name, opts.beanstalkd, opts.out)
        size = sum(p.stat().st_size for p in (opts.out / name).glob("binlog.*"))
        print(f"{name}: {size} bytes of binlog, {_summary(exp)}")
    return 0


def _summary(exp: dict[str, object]) -> str:
    jobs, files = exp["jobs"], exp["files"]
    assert isinstance(jobs, list) and isinstance(files, list)
    return (
        f"{len(files)} files, {len(jobs)} live jobs, max id {exp['max_id_min']}, "
        f"migrations {exp['migrations']}, torn {exp['torn']}"
    )


if __name__ == "__main__":
    sys.exit(main())
