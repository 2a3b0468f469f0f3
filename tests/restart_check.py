"""Checking a restarted server against what was recorded: every job, count and order."""

from __future__ import annotations

import time

from logserver import Client
from restart_fill import Filled, worker

COUNTERS = ("reserves", "timeouts", "releases", "buries", "kicks")
UNCHANGED = ("id", "tube", "pri", "delay", "ttr", *COUNTERS)


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
