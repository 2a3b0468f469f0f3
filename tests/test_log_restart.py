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
from collections.abc import Iterator
from pathlib import Path

import pytest

import beanpole
from logserver import Client
from restart_check import check_order_and_next_id, compare
from restart_fill import fill, record
from restart_servers import MODES, InProcess, Running

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)


@pytest.fixture
def servers() -> Iterator[list[Running]]:
    """Every server a test starts, stopped at the end whatever happens."""
    started: list[Running] = []
    yield started
    for running in started:
        with contextlib.suppress(Exception):
            running.stop()


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


def _stats_id(address: tuple[str, int] | str) -> str:
    with beanpole.Client(address) as c:
        return str(c.stats()["id"])


@pytest.mark.parametrize("mode", list(MODES))
def test_stats_id_names_the_log_and_starts_over_with_it(
    tmp_path: Path, servers: list[Running], mode: str
) -> None:
    """With a log, `stats`'s id stays across restarts (clean or SIGKILL), since ids do;
    a log that starts empty gets a new one, as a server without a log does at every
    start (its ids start over at 1)."""
    running = MODES[mode](tmp_path / "log")
    servers.append(running)
    first = _stats_id(running.address)
    assert len(first) == 16 and int(first, 16) >= 0
    with Client(running.address) as c:
        c.put(b"x")
    running.stop()
    running = MODES[mode](tmp_path / "log")
    servers.append(running)
    assert _stats_id(running.address) == first
    running.stop()
    # The same files in another place are the same id space.
    (tmp_path / "log").rename(tmp_path / "moved")
    running = MODES[mode](tmp_path / "moved")
    servers.append(running)
    assert _stats_id(running.address) == first
    running.stop()
    running = MODES[mode](tmp_path / "empty")
    servers.append(running)
    assert _stats_id(running.address) != first
    running.stop()
    with beanpole.Server(listen="127.0.0.1", port=0) as a, beanpole.Server(
        listen="127.0.0.1", port=0
    ) as b:
        assert _stats_id(a.address) != _stats_id(b.address)  # type: ignore[arg-type]
