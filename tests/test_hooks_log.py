"""The log-error and log-recovered hooks on a real full disk: a small tmpfs.

Needs root (to mount); skipped otherwise. The disk is filled by the server's own log
plus a filler file; removing the filler gives the log room again.
"""

from __future__ import annotations

import os
import queue
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import beanpole
from beanpole.server.hooks import Event
from logserver import TIMEOUT, Client


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _next(events: queue.Queue[Event]) -> Event:
    try:
        return events.get(timeout=TIMEOUT)
    except queue.Empty:
        raise AssertionError(f"no event within {TIMEOUT}s") from None


def test_full_disk_reports_log_error_once_then_log_recovered(small_disk: Path) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (1536 * 1024))
    events: queue.Queue[Event] = queue.Queue()
    srv = beanpole.Server(
        listen="127.0.0.1", port=0, binlog_dir=str(small_disk / "log"), segment_size=1 << 20
    )
    srv.hook("log-error", events.put)
    srv.hook("log-recovered", events.put)
    with srv, Client(srv.address) as c:
        body = b"x" * 60000
        for _ in range(200):
            reply = c.cmd(f"put 0 0 60 {len(body)}", body)
            if reply == b"OUT_OF_MEMORY":
                break
            assert reply.startswith(b"INSERTED")
        else:
            raise AssertionError("the disk never filled up")
        error = _next(events)
        assert error.kind == "log-error" and error.job_id is None
        assert error.detail is not None and "No space left on device" in error.detail
        # Puts are refused, deletes work, and nothing flips back and forth meanwhile.
        assert c.cmd("put 0 0 60 1", b"y") == b"OUT_OF_MEMORY"
        assert c.cmd("delete 1") == b"DELETED"
        assert events.empty()

        filler.unlink()
        assert _next(events).kind == "log-recovered"
        assert c.cmd("put 0 0 60 1", b"y").startswith(b"INSERTED")
    assert events.empty()
