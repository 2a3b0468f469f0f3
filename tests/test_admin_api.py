"""The in-process admin calls of ``beanpole.Server``: tube_stats, job_stats, tubes, pause,
kick and the bulk snapshot, checked against what the same server answers over the
protocol (real connections through greenstalk)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest

import beanpole
from beanpole.client.snapshot import TUBE_FIELDS
from beanpole.client.stats import StatsClient


@pytest.fixture
def server() -> Iterator[beanpole.Server]:
    with beanpole.Server(port=0) as srv:
        yield srv


def client(srv: beanpole.Server, tube: str = "default") -> greenstalk.Client:
    return greenstalk.Client((srv.host, srv.port), use=tube, watch=tube)


def test_tube_and_job_stats_match_the_protocol(server: beanpole.Server) -> None:
    with client(server, "mail") as c:
        first = c.put("a", priority=10)
        c.put("b", delay=60)
        job = c.reserve()
        assert job.id == first
        remote = StatsClient((server.host, server.port))
        with remote:
            # Only time-based values may move between the two reads.
            assert server.tube_stats("mail") == remote.stats_tube("mail")
            local = server.job_stats(first)
            wire = remote.stats_job(first)
        for key in ("time-left", "age"):
            assert abs(int(local.pop(key)) - int(wire.pop(key))) <= 1
        assert local == wire
    assert local["state"] == "reserved"
    assert isinstance(local["pri"], int) and local["pri"] == 10
    assert local["tube"] == "mail"


def test_stats_values_are_typed(server: beanpole.Server) -> None:
    stats = server.stats()
    assert isinstance(stats["uptime"], int)
    assert isinstance(stats["rusage-utime"], float)
    assert isinstance(stats["hostname"], str)
    tube = server.tube_stats("default")
    assert tube["name"] == "default"
    assert all(isinstance(tube[key], int) for key in TUBE_FIELDS[1:])


def test_tubes_lists_every_tube_in_order(server: beanpole.Server) -> None:
    with client(server, "one") as c1, client(server, "two") as c2:
        c1.put("x")
        c2.put("y")
        assert server.tubes() == ["default", "one", "two"]


def test_missing_tube_or_job_raises_not_found(server: beanpole.Server) -> None:
    with pytest.raises(beanpole.NotFoundError, match="no tube named 'nope'"):
        server.tube_stats("nope")
    with pytest.raises(KeyError):  # NotFoundError is a KeyError
        server.job_stats(12345)
    with pytest.raises(beanpole.NotFoundError, match="no job with id 12345"):
        server.job_stats(12345)
    with pytest.raises(beanpole.NotFoundError):
        server.pause("nope", 10)
    with pytest.raises(beanpole.NotFoundError):
        server.kick("nope", 10)


def test_pause_stops_reserves_until_unpaused(server: beanpole.Server) -> None:
    with client(server, "jobs") as c:
        c.put("x")
        server.pause("jobs", 100)
        stats = server.tube_stats("jobs")
        assert stats["pause"] == 100 and stats["cmd-pause-tube"] == 1
        with pytest.raises(greenstalk.TimedOutError):
            c.reserve(timeout=0)
        server.pause("jobs", 0)
        assert c.reserve(timeout=0).body == "x"


def test_unpause_hands_the_job_to_a_waiting_worker(server: beanpole.Server) -> None:
    with client(server, "jobs") as producer, client(server, "jobs") as worker:
        producer.put("x")
        server.pause("jobs", 100)
        got: list[str] = []

        def reserve() -> None:
            got.append(worker.reserve(timeout=10).body)

        waiter = threading.Thread(target=reserve)
        waiter.start()
        # Unpause only once the server counts the blocked reserve.
        deadline = time.monotonic() + 10
        while server.tube_stats("jobs")["current-waiting"] != 1:
            assert time.monotonic() < deadline, "the reserve never blocked"
            time.sleep(0.001)
        assert got == []
        server.pause("jobs", 0)
        waiter.join(timeout=10)
        assert got == ["x"]


def test_kick_moves_buried_then_delayed_jobs(server: beanpole.Server) -> None:
    with client(server, "k") as c:
        for body in ("a", "b", "c"):
            c.put(body)
        for _ in range(3):
            c.bury(c.reserve())
        c.put("late", delay=100)
        assert server.kick("k", 2) == 2
        stats = server.tube_stats("k")
        assert (stats["current-jobs-buried"], stats["current-jobs-ready"]) == (1, 2)
        assert server.kick("k", 10) == 1  # the last buried one; delayed ones wait
        assert server.kick("k", 10) == 1  # now the delayed one
        assert server.tube_stats("k")["current-jobs-ready"] == 4
        assert server.stats()["cmd-kick"] == 0  # not a protocol command


def test_admin_calls_need_a_running_server() -> None:
    srv = beanpole.Server(port=0)
    with pytest.raises(beanpole.ServerError):
        srv.tubes()
    srv.start()
    srv.stop()
    with pytest.raises(beanpole.ServerError):
        srv.tube_stats("default")


def test_bad_arguments_are_value_errors(server: beanpole.Server) -> None:
    with pytest.raises(ValueError):
        server.pause("default", -1)
    with pytest.raises((ValueError, OverflowError)):
        server.kick("default", 1 << 40)


def test_snapshot_is_stats_and_every_tube(server: beanpole.Server) -> None:
    with client(server, "s") as c:
        c.put("x")
        snap = server.snapshot()
        assert snap.server["current-jobs-ready"] == 1
        assert [row[0] for row in snap.tubes] == server.tubes()
        assert snap.tube_dicts()[1] == server.tube_stats("s")
        assert snap.other is None
        assert snap.lock_seconds > 0  # measured, so never exactly zero
        assert server.last_snapshot_lock_seconds == snap.lock_seconds


def test_snapshot_cap_keeps_the_busiest_tubes_and_sums_the_rest(server: beanpole.Server) -> None:
    with client(server) as c:
        for i, jobs in enumerate([1, 3, 0, 2, 5]):
            c.use(f"t{i}")
            for _ in range(jobs):
                c.put("x", delay=100 if i == 3 else 0)
        c.use("default")
        full = server.snapshot()
        capped = server.snapshot(max_tubes=2)
    assert [row[0] for row in capped.tubes] == ["t1", "t4"]  # most jobs, in listing order
    assert capped.other is not None
    left_out = [row for row in full.tubes if row[0] not in ("t1", "t4")]
    assert capped.other[0] == "_other"
    for col in range(1, 12):
        assert capped.other[col] == sum(row[col] for row in left_out)
    assert capped.other[4] == 2  # the delayed jobs of t3


def test_kick_hands_the_job_to_a_blocked_worker(server: beanpole.Server) -> None:
    with client(server, "k") as producer, client(server, "k") as worker:
        producer.put("x")
        producer.bury(producer.reserve())
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.append(worker.reserve(timeout=10).body))
        waiter.start()
        deadline = time.monotonic() + 10
        while server.tube_stats("k")["current-waiting"] != 1:
            assert time.monotonic() < deadline, "the reserve never blocked"
            time.sleep(0.001)
        assert server.kick("k", 1) == 1
        waiter.join(timeout=10)
        assert got == ["x"]


def test_kick_is_logged_and_survives_a_restart(tmp_path: Path) -> None:
    with beanpole.Server(port=0, binlog_dir=str(tmp_path)) as srv, client(srv, "k") as c:
        c.put("x")
        c.bury(c.reserve())
        assert srv.kick("k", 1) == 1
    with beanpole.Server(port=0, binlog_dir=str(tmp_path)) as srv:
        stats = srv.tube_stats("k")
        assert (stats["current-jobs-ready"], stats["current-jobs-buried"]) == (1, 0)
        assert srv.job_stats(1)["kicks"] == 1
