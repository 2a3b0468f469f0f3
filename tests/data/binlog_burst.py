"""Clients putting as fast as they can, and beanstalkd killed in the middle of a record."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from binlog_journal import DiskJob, Recorder
from binlog_server import Server, binlog_files, use


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
