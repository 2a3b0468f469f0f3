"""greenstalk connections: closing, the three address forms, server stats, drain mode."""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
from collections.abc import Iterator

import greenstalk
import pytest

from client_common import drain, wait_until
from servers import Running


@contextlib.contextmanager
def unix_forwarder(target: tuple[str, int]) -> Iterator[str]:
    """A Unix socket path whose single connection is spliced onto a TCP ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "beanstalk.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        socks: list[socket.socket] = [listener]

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        def serve() -> None:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                upstream = socket.create_connection(target)
                socks.extend([conn, upstream])
                threading.Thread(target=pump, args=(conn, upstream), daemon=True).start()
                threading.Thread(target=pump, args=(upstream, conn), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        try:
            yield path
        finally:
            for s in socks:
                s.close()


def test_context_manager_and_close_release_reserved_jobs(any_server: Running) -> None:
    with greenstalk.Client(any_server.address) as watcher:
        jid = watcher.put("orphan")
        with greenstalk.Client(any_server.address) as c:
            assert c.reserve(timeout=0).id == jid
            assert watcher.stats_job(jid)["state"] == "reserved"
        # leaving the block closed the connection, so the server released the job
        job = watcher.reserve(timeout=5)
        assert (job.id, job.body) == (jid, "orphan")
        assert watcher.stats_job(jid)["reserves"] == 2
        with pytest.raises(OSError):
            c.put("after close")

        closer = greenstalk.Client(any_server.address)
        closer.close()
        with pytest.raises(OSError):
            closer.stats()


def test_repr_and_address_forms(any_server: Running) -> None:
    host, port = any_server.address
    with greenstalk.Client((host, port)) as c:
        assert repr(c) == f"greenstalk.Client(host={host!r}, port={port!r})"
        jid = c.put("via tcp")

    sock = socket.create_connection(any_server.address)
    with greenstalk.Client(sock) as c:
        assert repr(c) == f"greenstalk.Client(host={host!r}, port={port!r})"
        assert c.peek(jid).body == "via tcp"

    with unix_forwarder(any_server.address) as path, greenstalk.Client(path) as c:
        assert repr(c) == f"greenstalk.Client(socket={path!r})"
        assert c.peek(jid).body == "via tcp"
        assert c.put("via unix") == jid + 1


# --------------------------------------------------------------------------- stats & draining


def test_stats(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address) as a,
        greenstalk.Client(any_server.address) as b,
    ):
        a.put("x")
        b.reserve(timeout=0)
        s = a.stats()
        ints = [
            "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
            "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-reserve",
            "cmd-reserve-with-timeout", "cmd-stats", "job-timeouts", "total-jobs",
            "max-job-size", "current-tubes", "current-connections", "current-producers",
            "current-workers", "current-waiting", "total-connections", "pid", "uptime",
        ]  # fmt: skip
        for key in ints:
            assert isinstance(s[key], int), key  # type: ignore[literal-required]
        assert isinstance(s["version"], str)
        assert s["draining"] == "false"
        assert s["pid"] == (any_server.pid if any_server.pid is not None else os.getpid())
        assert s["current-connections"] == 2
        assert s["total-connections"] == 2
        assert s["current-producers"] == 1
        assert s["current-workers"] == 1
        assert s["current-jobs-reserved"] == 1
        assert s["cmd-reserve-with-timeout"] == 1
        assert s["cmd-reserve"] == 0
        assert s["cmd-stats"] == 1
        assert s["cmd-stats-job"] == 0
        assert a.stats()["cmd-stats"] == 2


def test_draining_refuses_puts(any_server: Running) -> None:
    with greenstalk.Client(any_server.address) as c:
        jid = c.put("before")
        drain(any_server)
        wait_until(lambda: c.stats()["draining"] == "true", "drain mode")
        with pytest.raises(greenstalk.DrainingError):
            c.put("after")
        job = c.reserve(timeout=0)  # workers carry on
        assert job.id == jid
        c.delete(job)
        assert c.stats()["total-jobs"] == 1
