"""What beanstalkd has journaled, followed command by command through its stats."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from binlog_server import Conn

HEX_BODY_LIMIT = 512
STATES = ("ready", "reserved", "buried", "delayed")


def fnv1a64(data: bytes) -> str:
    """FNV-1a, 64 bits, as 16 hex digits: the tests compare long bodies by this."""
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


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
