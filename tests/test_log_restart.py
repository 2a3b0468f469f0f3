"""Restarting on a write-ahead log, seen through the wire.

A server with ``-b DIR`` is filled with jobs in every state, every job's stats-job and
body are recorded, and the server is stopped, either cleanly or by SIGKILL of a
``beanpole serve -f 0`` process. Servers started again on the same directory must show
the same jobs: ids, bodies, tubes, priorities, states (reserved jobs come back ready),
remaining delays, buried order and stats-job counters, and new ids continue after the
highest one ever handed out.
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import beanpole
from logserver import Child, Client

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)

MAX_JOB_SIZE = 65535  # the default -z
DEFAULT_SEGMENT_SIZE = 10485760
WEIRD_TUBE = "img/thumbs;v2.$(x)_+-"
COUNTERS = ("reserves", "timeouts", "releases", "buries", "kicks")
UNCHANGED = ("id", "tube", "pri", "delay", "ttr", *COUNTERS)


# -- servers: in-process (clean stop) or a child process (SIGKILL) --------------------------


class Running:
    """A server on a log directory, however it runs; ``stop()`` ends it the chosen way."""

    address: tuple[str, int]

    def stop(self) -> None:
        raise NotImplementedError


class InProcess(Running):
    def __init__(self, log_dir: Path, **config: object) -> None:
        self.server = beanpole.Server(
            listen="127.0.0.1",
            port=0,
            binlog_dir=str(log_dir),
            **config,  # type: ignore[arg-type]
        ).start()
        address = self.server.address
        assert isinstance(address, tuple)
        self.address = address

    def stop(self) -> None:
        self.server.stop()


class Killed(Running):
    """``python -m beanpole serve -b DIR -f 0 -p 0``, ended by SIGKILL."""

    def __init__(self, log_dir: Path, *extra: str) -> None:
        self.child = Child("-p", "0", "-b", str(log_dir), "-f", "0", *extra)
        try:
            self.address = self.child.listening()
        except BaseException:
            self.child.kill()
            raise

    def stop(self) -> None:
        self.child.kill()
        assert self.child.proc.returncode == -9


Starter = Callable[[Path], Running]

MODES: dict[str, Starter] = {
    "stop": lambda d: InProcess(d),
    "stop-no-fsync": lambda d: InProcess(d, no_fsync=True),
    "stop-small-segments": lambda d: InProcess(d, segment_size=4096, fsync_ms=0),
    "sigkill": lambda d: Killed(d),
}


@pytest.fixture
def servers() -> Iterator[list[Running]]:
    """Every server a test starts, stopped at the end whatever happens."""
    started: list[Running] = []
    yield started
    for running in started:
        with contextlib.suppress(Exception):
            running.stop()


@contextlib.contextmanager
def client_on(log_dir: Path, **config: object) -> Iterator[Client]:
    """An embedded server on ``log_dir`` and a connection to it, both closed at the end."""
    with beanpole.Server(
        listen="127.0.0.1",
        port=0,
        binlog_dir=str(log_dir),
        **config,  # type: ignore[arg-type]
    ) as server:
        address = server.address
        assert isinstance(address, tuple)
        with Client(address) as c:
            yield c


# -- filling a server and recording what it holds -------------------------------------------


@dataclass
class Filled:
    """What was done to the first server, and what it showed just before it stopped."""

    live: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)
    reserved_at_stop: set[int] = field(default_factory=set)
    buried_order: dict[str, list[int]] = field(default_factory=dict)
    highest_id: int = 0
    tubes: set[str] = field(default_factory=set)
    stats: dict[int, dict[str, str]] = field(default_factory=dict)
    bodies: dict[int, bytes] = field(default_factory=dict)
    taken_at: float = 0.0
    holders: list[Client] = field(default_factory=list)


def worker(address: tuple[str, int], tube: str) -> Client:
    """A connection watching only ``tube``."""
    c = Client(address)
    c.watch(tube)
    if tube != "default":
        c.ignore("default")
    return c


def fill(address: tuple[str, int], max_job_size: int = MAX_JOB_SIZE) -> Filled:
    """Jobs in every state, through several connections. Reserved jobs stay reserved by
    connections kept open in ``Filled.holders``."""
    f = Filled()
    rng = random.Random(20260101)
    p = Client(address)
    f.holders.append(p)

    def put(tube: str, body: bytes, pri: int = 0, delay: int = 0, ttr: int = 60) -> int:
        p.use(tube)
        job_id = p.put(body, pri=pri, delay=delay, ttr=ttr)
        assert job_id > f.highest_id
        f.highest_id = job_id
        f.live.add(job_id)
        f.tubes.add(tube)
        return job_id

    # Ready jobs in several tubes, with priorities across the whole range.
    for pri in (0, 1023, 1024, 2**31, 2**32 - 1, 0):
        put("default", f"default at {pri}".encode(), pri=pri)
    for pri in (5, 7, 5):
        put("emails", f"mail {pri}".encode(), pri=pri, ttr=300)
    put(WEIRD_TUBE, b"odd tube name", pri=100, ttr=1)

    # Binary bodies: NUL, CRLF, something that looks like a command, every byte value.
    for body in (
        b"",
        b"\x00",
        b"\r\n",
        b"a\r\nb\x00c\r\n",
        b"\r\n\r\nput 0 0 1 1\r\nx\r\n",
        bytes(range(256)),
        bytes(range(255, -1, -1)) * 3,
    ):
        put("binary", body, pri=rng.randrange(2**32))

    # Delayed jobs, with time left.
    put("later", b"in an hour", pri=9, delay=3600)
    put("later", b"in two minutes", pri=3, delay=120, ttr=5)

    # A job of exactly the maximum size, then two small ones (beanstalkd's replay skips
    # the rest of a file after a job of the maximum size).
    big = bytes(rng.randrange(256) for _ in range(max_job_size - 4)) + b"\r\n\r\n"
    assert len(big) == max_job_size
    put("big", big, pri=1)
    put("big", b"after the big one", pri=2)
    put("big", b"and another", pri=2, delay=600)

    # Buried jobs in a known order, with priorities changed by bury.
    graves = [put("graveyard", f"grave {i}".encode(), pri=10) for i in range(4)]
    w = worker(address, "graveyard")
    f.holders.append(w)
    assert [w.reserve()[0] for _ in graves] == graves
    w.bury(graves[2], 7)
    w.bury(graves[0], 3)
    w.bury(graves[3], 4000)
    w.bury(graves[1], 3)
    # Kicked from buried, reserved and buried again: it goes to the end of the order.
    w.kick_job(graves[0])
    assert w.reserve() == (graves[0], b"grave 0")
    w.bury(graves[0], 2**32 - 1)
    f.buried_order["graveyard"] = [graves[2], graves[3], graves[1], graves[0]]

    # Released with delay 0 and a new priority (beanstalkd forgets the priority), and
    # released with a delay.
    w = worker(address, "released")
    f.holders.append(w)
    first = put("released", b"release me now", pri=500)
    second = put("released", b"release me later", pri=501)
    assert w.reserve()[0] == first
    w.release(first, 7, 0)
    assert w.reserve()[0] == first  # now pri 7, ahead of the second job
    w.release(first, 600, 0)  # now behind the second one
    assert w.reserve()[0] == second
    w.release(second, 11, 900)

    # Kicked from buried, from delayed (kick-job), and in bulk (kick) from delayed.
    w = worker(address, "kicks")
    f.holders.append(w)
    from_buried = put("kicks", b"kicked from buried", pri=20)
    assert w.reserve()[0] == from_buried
    w.bury(from_buried, 21)
    w.kick_job(from_buried)
    from_delayed = put("kicks", b"kicked from delayed", pri=22, delay=3600)
    w.kick_job(from_delayed)
    put("bulk", b"bulk 1", pri=1, delay=1000)
    put("bulk", b"bulk 2", pri=1, delay=2000)
    p.use("bulk")
    assert p.kick(10) == 2

    # A TTR timeout: a job with TTR 1 held and not released; another connection waiting
    # in reserve-with-timeout gets it when the TTR runs out, and releases it.
    w = worker(address, "slow")
    f.holders.append(w)
    slow = put("slow", b"too slow", pri=30, ttr=1)
    assert w.reserve()[0] == slow
    w2 = worker(address, "slow")
    f.holders.append(w2)
    assert w2.reserve(timeout=5) == (slow, b"too slow")
    w2.release(slow, 31, 0)

    # Reserved at stop time: one touched, one just reserved, one released and reserved
    # again, one reserved by a connection that also holds a buried job.
    w = worker(address, "held")
    f.holders.append(w)
    touched = put("held", b"touched", pri=40, ttr=100)
    assert w.reserve()[0] == touched
    w.touch(touched)
    held = put("held", b"held", pri=41, ttr=100)
    assert w.reserve()[0] == held
    again = put("held", b"held again", pri=42, ttr=100)
    assert w.reserve()[0] == again
    w.release(again, 43, 0)
    assert w.reserve()[0] == again
    f.reserved_at_stop |= {touched, held, again}

    # Deleted jobs, from every state; the job with the highest id is deleted last.
    w = worker(address, "gone")
    f.holders.append(w)
    gone_ready = put("gone", b"deleted while ready")
    gone_delayed = put("gone", b"deleted while delayed", delay=100)
    gone_reserved = put("gone", b"deleted while reserved", pri=0)
    assert w.reserve()[0] == gone_ready
    w.delete(gone_ready)
    assert w.reserve()[0] == gone_reserved
    w.delete(gone_reserved)
    gone_buried = put("gone", b"deleted while buried")
    assert w.reserve()[0] == gone_buried
    w.bury(gone_buried, 1)
    p.delete(gone_delayed)
    p.delete(gone_buried)
    last = put("default", b"the highest id, deleted")
    p.delete(last)
    for job_id in (gone_ready, gone_delayed, gone_reserved, gone_buried, last):
        f.live.discard(job_id)
        f.deleted.add(job_id)
    return f


def record(address: tuple[str, int], f: Filled) -> None:
    """stats-job and body of every job, just before the stop."""
    with Client(address) as c:
        for job_id in sorted(f.live):
            stats = c.stats_job(job_id)
            body = c.peek(job_id)
            assert stats is not None and body is not None, job_id
            f.stats[job_id] = stats
            f.bodies[job_id] = body
        for job_id in f.deleted:
            assert c.stats_job(job_id) is None
        f.taken_at = time.monotonic()
    states = {s["state"] for s in f.stats.values()}
    assert states == {"ready", "delayed", "buried", "reserved"}, states
    assert {i for i, s in f.stats.items() if s["state"] == "reserved"} == f.reserved_at_stop


# -- comparing -----------------------------------------------------------------------------


def compare(address: tuple[str, int], f: Filled) -> None:
    """Every job as recorded (reserved ones now ready), deleted ones absent."""
    with Client(address) as c:
        stats = c.stats()
        oldest = int(stats["binlog-oldest-index"])
        current = int(stats["binlog-current-index"])
        assert 1 <= oldest <= current, stats
        problems: list[str] = []
        for job_id in sorted(f.live):
            before = f.stats[job_id]
            after = c.stats_job(job_id)
            now = time.monotonic()
            if after is None:
                problems.append(f"job {job_id} ({before['state']} in {before['tube']}) is gone")
                continue
            elapsed = now - f.taken_at
            for key in UNCHANGED:
                if after[key] != before[key]:
                    problems.append(
                        f"job {job_id} ({before['state']}): {key} {before[key]} -> {after[key]}"
                    )
            state = "ready" if before["state"] == "reserved" else before["state"]
            if after["state"] != state:
                problems.append(f"job {job_id}: state {before['state']} -> {after['state']}")
            if state == "delayed":
                # Whole seconds left, so the difference is within one second.
                drift = int(after["time-left"]) - (int(before["time-left"]) - elapsed)
                if not -1.25 < drift < 1.25:
                    problems.append(
                        f"job {job_id}: time-left {before['time-left']} -> {after['time-left']} "
                        f"after {elapsed:.2f}s"
                    )
            elif after["time-left"] != "0":
                problems.append(f"job {job_id} ({state}): time-left {after['time-left']}")
            drift = int(after["age"]) - (int(before["age"]) + elapsed)
            if not -1.25 < drift < 1.25:
                problems.append(
                    f"job {job_id}: age {before['age']} -> {after['age']} after {elapsed:.2f}s"
                )
            if not oldest <= int(after["file"]) <= current:
                problems.append(f"job {job_id}: file {after['file']} not in {oldest}..{current}")
            body = c.peek(job_id)
            if body != f.bodies[job_id]:
                problems.append(f"job {job_id}: body {f.bodies[job_id]!r:.60} -> {body!r:.60}")
        for job_id in sorted(f.deleted):
            if c.peek(job_id) is not None or c.stats_job(job_id) is not None:
                problems.append(f"deleted job {job_id} is back")
        assert not problems, "\n".join(problems)

        # The per-tube and global counts agree (reserved jobs are ready now).
        totals = {"ready": 0, "delayed": 0, "buried": 0, "urgent": 0}
        for tube in sorted(f.tubes):
            jobs = [s for s in f.stats.values() if s["tube"] == tube]
            ready = [s for s in jobs if s["state"] in ("ready", "reserved")]
            expected = {
                "current-jobs-ready": len(ready),
                "current-jobs-urgent": sum(int(s["pri"]) < 1024 for s in ready),
                "current-jobs-reserved": 0,
                "current-jobs-delayed": sum(s["state"] == "delayed" for s in jobs),
                "current-jobs-buried": sum(s["state"] == "buried" for s in jobs),
            }
            tube_stats = c.stats_tube(tube)
            if not jobs:
                continue
            assert tube_stats is not None, f"tube {tube} is gone"
            got = {key: int(tube_stats[key]) for key in expected}
            assert got == expected, tube
            for key in totals:
                totals[key] += expected[f"current-jobs-{key}"]
        stats = c.stats()
        got = {key: int(stats[f"current-jobs-{key}"]) for key in totals}
        assert got == totals
        assert stats["current-jobs-reserved"] == "0"


def check_order_and_next_id(address: tuple[str, int], f: Filled) -> None:
    """Destructive checks, done last: reserve order, buried order, the next id."""
    # Ready jobs come out by priority, then id, in every tube.
    for tube in sorted(f.tubes):
        ready = sorted(
            (int(s["pri"]), int(s["id"]))
            for s in f.stats.values()
            if s["tube"] == tube and s["state"] in ("ready", "reserved")
        )
        with worker(address, tube) as w:
            got = [w.reserve()[0] for _ in ready]
            assert got == [job_id for _, job_id in ready], tube
            # (DEADLINE_SOON when one of them has a TTR of 1 second.)
            assert w.cmd("reserve-with-timeout 0") in (b"TIMED_OUT", b"DEADLINE_SOON")
    with Client(address) as c:
        # Buried jobs come out in the order they were buried, and one buried now comes
        # after all of them.
        for tube, order in f.buried_order.items():
            c.use(tube)
            with worker(address, tube) as w:
                new = c.put(b"buried after the restart")
                assert w.reserve() == (new, b"buried after the restart")
                w.bury(new, 0)
            f.highest_id = new
            order = [*order, new]
            got = []
            while (found := c.peek_buried()) is not None:
                got.append(found[0])
                assert c.kick(1) == 1
            assert got == order
        c.use("default")
        assert c.put(b"new") == f.highest_id + 1


def restart_and_compare(tmp_path: Path, servers: list[Running], first: str, then: str) -> None:
    log = tmp_path / "log"
    running = MODES[first](log)
    servers.append(running)
    filled = fill(running.address)
    record(running.address, filled)
    running.stop()
    for holder in filled.holders:
        holder.close()

    # Started again (and stopped the same way), then once more: nothing may drift.
    running = MODES[then](log)
    servers.append(running)
    compare(running.address, filled)
    running.stop()
    running = MODES[then](log)
    servers.append(running)
    compare(running.address, filled)
    check_order_and_next_id(running.address, filled)
    running.stop()


@pytest.mark.parametrize("mode", list(MODES))
def test_restart_keeps_every_job(tmp_path: Path, servers: list[Running], mode: str) -> None:
    restart_and_compare(tmp_path, servers, mode, mode)


def test_restart_after_compaction_moved_every_job(tmp_path: Path, servers: list[Running]) -> None:
    # Small segments, then many short-lived jobs: compaction moves every job of the fill
    # (in every state) into newer segments before the stop.
    running = InProcess(tmp_path, segment_size=4096, max_job_size=4096)
    servers.append(running)
    filled = fill(running.address, max_job_size=4096)
    with Client(running.address) as c:
        first = {job_id: int(s["file"]) for job_id in filled.live if (s := c.stats_job(job_id))}
        c.use("churn")
        for _ in range(2000):
            c.delete(c.put(b"x" * 100))
        migrated = int(c.stats()["binlog-records-migrated"])
        oldest = int(c.stats()["binlog-oldest-index"])
    assert migrated >= len(filled.live)
    assert oldest > max(first.values())
    record(running.address, filled)
    running.stop()
    for holder in filled.holders:
        holder.close()
    for _ in range(2):
        running = InProcess(tmp_path, segment_size=4096, max_job_size=4096)
        servers.append(running)
        compare(running.address, filled)
        running.stop()
    running = InProcess(tmp_path, segment_size=4096, max_job_size=4096)
    servers.append(running)
    check_order_and_next_id(running.address, filled)


def test_restart_after_sigkill_in_process(tmp_path: Path, servers: list[Running]) -> None:
    # Written by a killed `serve -f 0`, read back by an embedded server.
    restart_and_compare(tmp_path, servers, "sigkill", "stop")


def test_the_test_fails_without_the_log(tmp_path: Path) -> None:
    """The comparison is not vacuous: a server without the log does not pass it."""
    server = beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path / "a")).start()
    try:
        address = server.address
        assert isinstance(address, tuple)
        filled = fill(address)
        record(address, filled)
    finally:
        server.stop()
    with beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path / "other")) as fresh:
        address = fresh.address
        assert isinstance(address, tuple)
        with pytest.raises(AssertionError, match="is gone"):
            compare(address, filled)


# -- ids, the lock, beanstalkd directories, stats ----------------------------------------------


def test_ids_continue_after_the_highest_even_when_all_were_deleted(
    tmp_path: Path, servers: list[Running]
) -> None:
    running = InProcess(tmp_path)
    servers.append(running)
    with Client(running.address) as c:
        ids = [c.put(b"x") for _ in range(5)]
        for job_id in ids:
            c.delete(job_id)
    running.stop()
    running = InProcess(tmp_path)
    servers.append(running)
    with Client(running.address) as c:
        assert c.put(b"y") == ids[-1] + 1


def test_a_second_server_on_the_same_directory_refuses(tmp_path: Path) -> None:
    with beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)) as first:
        second = beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path))
        with pytest.raises(OSError, match="lock") as info:
            second.start()
        assert str(tmp_path) in str(info.value)
        assert not second.running
        address = first.address
        assert isinstance(address, tuple)
        with Client(address) as c:
            assert c.put(b"still fine") == 1
    # Once the first has stopped the directory is free again.
    with client_on(tmp_path) as c:
        assert c.peek(1) == b"still fine"


def test_a_second_process_on_the_same_directory_refuses(tmp_path: Path) -> None:
    with beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)):
        child = Child("-p", "0", "-b", str(tmp_path))
        status = child.finish()
    assert status == 1
    lines = "".join(child.stderr).splitlines()
    assert len(lines) == 1, lines
    assert "lock" in lines[0]


def test_a_beanstalkd_binlog_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "binlog.1").write_bytes(b"\x07\x00\x00\x00")
    with pytest.raises(OSError, match="beanpole binlog import") as info:
        beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)).start()
    assert str(tmp_path) in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binlog.1"]

    child = Child("-p", "0", "-b", str(tmp_path))
    assert child.finish() == 1
    lines = "".join(child.stderr).splitlines()
    assert len(lines) == 1, lines
    assert "beanpole binlog import" in lines[0]


def test_binlog_stats_with_a_log(tmp_path: Path) -> None:
    with beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)) as server:
        address = server.address
        assert isinstance(address, tuple)
        with Client(address) as c:
            stats = c.stats()
            assert stats["binlog-records-written"] == "0"
            ids = [c.put(b"job") for _ in range(3)]
            c.delete(ids[0])
            stats = c.stats()
            current = int(stats["binlog-current-index"])
            assert current >= 1
            assert 1 <= int(stats["binlog-oldest-index"]) <= current
            assert stats["binlog-records-written"] == "4"
            assert stats["binlog-records-migrated"] == "0"
            assert stats["binlog-max-size"] == str(DEFAULT_SEGMENT_SIZE)
            job = c.stats_job(ids[1])
            assert job is not None
            assert job["file"] == str(current)
            assert server.stats()["binlog-records-written"] == 4
    first_current = current

    # After a restart the log goes on in a new segment; old jobs are in segments that
    # exist (compaction may have moved them on).
    segment_size = 1 << 20
    with client_on(tmp_path, segment_size=segment_size) as c:
        stats = c.stats()
        current = int(stats["binlog-current-index"])
        assert current > first_current
        assert 1 <= int(stats["binlog-oldest-index"]) <= current
        assert stats["binlog-max-size"] == str(segment_size)
        for job_id in ids[1:]:
            job = c.stats_job(job_id)
            assert job is not None
            assert int(stats["binlog-oldest-index"]) <= int(job["file"]) <= current
            on_disk = tmp_path / f"{int(job['file']):010d}.log"
            assert on_disk.exists(), sorted(p.name for p in tmp_path.iterdir())
        new = c.put(b"new")
        job = c.stats_job(new)
        assert job is not None
        assert job["file"] == stats["binlog-current-index"]


def test_binlog_stats_without_a_log() -> None:
    with beanpole.Server(listen="127.0.0.1", port=0) as server:
        address = server.address
        assert isinstance(address, tuple)
        with Client(address) as c:
            job_id = c.put(b"job")
            stats = c.stats()
            for key in (
                "binlog-oldest-index",
                "binlog-current-index",
                "binlog-records-written",
                "binlog-records-migrated",
            ):
                assert stats[key] == "0", key
            assert stats["binlog-max-size"] == str(DEFAULT_SEGMENT_SIZE)
            job = c.stats_job(job_id)
            assert job is not None
            assert job["file"] == "0"


# -- damaged logs ------------------------------------------------------------------------------


def segments(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob("*.log"))


def record_offsets(segment: Path) -> list[int]:
    """Where each record of a segment starts (read by length only, as documented in
    rust/engine/src/wal/format.rs: 40-byte header, then u32 len, u32 crc, len bytes)."""
    data = segment.read_bytes()
    offsets = []
    at = 40
    while at + 8 <= len(data):
        length = int.from_bytes(data[at : at + 4], "little")
        if length == 0:
            break
        offsets.append(at)
        at += 8 + length
    return [*offsets, at]  # the last one is where the next record would go


def fill_and_stop(log_dir: Path, count: int) -> dict[int, bytes]:
    with client_on(log_dir) as c:
        return {c.put(b"job %d" % i, pri=i): b"job %d" % i for i in range(count)}


def test_corruption_in_the_middle_refuses_to_start_unless_skipped(tmp_path: Path) -> None:
    jobs = fill_and_stop(tmp_path, 10)
    segment = next(s for s in segments(tmp_path) if len(record_offsets(s)) > 1)
    offsets = record_offsets(segment)
    data = bytearray(segment.read_bytes())
    data[offsets[4] + 20] ^= 0x40  # inside the fifth record: job 5
    segment.write_bytes(bytes(data))

    with pytest.raises(OSError) as info:
        beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)).start()
    message = str(info.value)
    assert f"segment {int(segment.stem)}" in message
    assert f"offset {offsets[4]}" in message

    # Told to skip it, the server starts without that job and keeps every other one.
    with client_on(tmp_path, skip_corrupt=True) as c:
        assert c.peek(5) is None
        for job_id, body in jobs.items():
            if job_id != 5:
                assert c.peek(job_id) == body, job_id


def test_a_torn_tail_before_the_spare_segment_is_cut(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # What SIGKILL (or a power cut) during a write leaves: the first bytes of the last
    # record reached the file, the rest did not. The preallocated spare segment after
    # it holds only its header.
    jobs = fill_and_stop(tmp_path, 5)
    written = [s for s in segments(tmp_path) if len(record_offsets(s)) > 1]
    assert written and segments(tmp_path)[-1] not in written, "a spare segment follows"
    segment = written[-1]
    end = record_offsets(segment)[-1]
    torn = (60).to_bytes(4, "little") + b"\xde\xad\xbe\xef" + b"\x01" + b"\x07" * 20
    with segment.open("r+b") as f:
        f.seek(end)
        f.write(torn)

    with client_on(tmp_path) as c:
        for job_id, body in jobs.items():
            assert c.peek(job_id) == body
        assert c.put(b"next") == max(jobs) + 1
    # Reported, not silently dropped.
    report = capfd.readouterr().err
    assert f"segment {int(segment.stem)}" in report
    assert f"torn tail cut at offset {end}" in report


@pytest.mark.parametrize("size", [0, 8192])
def test_a_segment_killed_while_being_preallocated_is_harmless(tmp_path: Path, size: int) -> None:
    # Enough live jobs that compaction keeps every segment in between.
    settings: dict[str, object] = {"segment_size": 4096, "max_job_size": 100}
    with client_on(tmp_path, **settings) as c:
        ids = [c.put(b"j" * 50) for _ in range(1000)]
    newest = segments(tmp_path)[-1]
    headerless = tmp_path / f"{int(newest.stem) + 1:010d}.log"
    with headerless.open("wb") as f:
        f.truncate(size)  # created (and maybe preallocated), header not yet written

    for start in range(3):
        with client_on(tmp_path, **settings) as c:
            assert c.peek(ids[0]) is not None, start
            assert c.peek(ids[-1]) is not None, start


def test_ids_are_not_reused_once_their_segments_are_compacted_away(tmp_path: Path) -> None:
    settings: dict[str, object] = {"segment_size": 4096, "max_job_size": 100}
    with client_on(tmp_path, **settings) as c:
        keeper = c.put(b"long-lived")
        for _ in range(300):
            c.delete(c.put(b"0123456789"))
        highest = c.put(b"the highest id")
        c.delete(highest)
        where = int(c.stats()["binlog-current-index"])
        # Work on the one live job until compaction has removed that segment.
        while int(c.stats()["binlog-oldest-index"]) <= where:
            assert c.reserve()[0] == keeper
            c.release(keeper, 0, 0)
    # The newest segment is the spare after the current one and holds no record; a
    # crash just before it was preallocated leaves the directory without it.
    spare = segments(tmp_path)[-1]
    assert len(record_offsets(spare)) == 1, "the newest segment is an empty spare"
    spare.unlink()

    with client_on(tmp_path, **settings) as c:
        assert c.peek(keeper) == b"long-lived"
        assert c.put(b"new") == highest + 1


# -- space in the log ---------------------------------------------------------------------------


def test_jobs_of_the_maximum_size_fit_with_small_segments(tmp_path: Path) -> None:
    with client_on(tmp_path, segment_size=4096) as c:
        body = b"m" * MAX_JOB_SIZE
        replies = [c.cmd(f"put 0 0 60 {len(body)}", body) for _ in range(3)]
        assert replies == [b"INSERTED 1", b"INSERTED 2", b"INSERTED 3"]
