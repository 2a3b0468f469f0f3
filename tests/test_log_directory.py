"""The log directory: its lock, beanstalkd directories refused, binlog stats, room for big jobs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import beanpole
from logserver import Child, Client
from restart_fill import MAX_JOB_SIZE
from restart_servers import client_on

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)

DEFAULT_SEGMENT_SIZE = 10485760


# -- the lock, beanstalkd directories --------------------------------------------------------


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


# -- stats -----------------------------------------------------------------------------------


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


# -- space in the log ------------------------------------------------------------------------


def test_jobs_of_the_maximum_size_fit_with_small_segments(tmp_path: Path) -> None:
    with client_on(tmp_path, segment_size=4096) as c:
        body = b"m" * MAX_JOB_SIZE
        replies = [c.cmd(f"put 0 0 60 {len(body)}", body) for _ in range(3)]
        assert replies == [b"INSERTED 1", b"INSERTED 2", b"INSERTED 3"]
