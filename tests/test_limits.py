"""Limits on what clients can make the server hold: ``--max-connections``,
``--max-memory``, the open-files limit, and memory that stays bounded whatever a
hostile client sends (a line without CRLF, a large body sent slowly, pipelined
commands whose replies are never read).

Memory is the server process's resident size (a ``beanpole serve`` child), read from
/proc before and after; the bounds are far below what the client sent, so that an
unbounded buffer cannot pass.
"""

from __future__ import annotations

import resource
import socket
import time

import pytest

import beanpole
from client_common import wait_until
from servechild import ServeChild, command, serving

MiB = 1 << 20
JOB_OVERHEAD = 128  # rust/engine/src/store/job.rs


def test_max_connections_closes_the_extra_ones_and_counts_them() -> None:
    with beanpole.Server(port=0, max_connections=3) as srv:
        conns = [socket.create_connection(srv.address, timeout=5) for _ in range(3)]
        for c in conns:
            assert command(c, b"list-tube-used\r\n") == b"USING default\r\n"
        extra = socket.create_connection(srv.address, timeout=5)
        # Closed at once, before reading anything.
        try:
            extra.sendall(b"list-tube-used\r\n")
            assert extra.recv(100) == b""
        except ConnectionResetError:
            pass
        extra.close()
        assert srv.stats()["connections-refused"] == 1
        # The connections that got in are served as before.
        assert command(conns[0], b"put 0 0 60 1\r\nx\r\n") == b"INSERTED 1\r\n"
        # Once one leaves, a new one gets in.
        conns.pop().close()
        wait_until(lambda: srv.stats()["current-connections"] == 2, "the close")
        deadline = time.monotonic() + 5
        while True:
            late = socket.create_connection(srv.address, timeout=5)
            try:
                answer = command(late, b"list-tube-used\r\n")
                break
            except (AssertionError, ConnectionResetError):
                # The task of the closed connection had not quite ended yet.
                late.close()
                assert time.monotonic() < deadline, "no connection got in after one left"
        assert answer == b"USING default\r\n"
        late.close()
        for c in conns:
            c.close()


def test_max_connections_refusals_are_logged() -> None:
    with serving("--max-connections", "1") as child:
        first = child.connect()
        assert command(first, b"list-tube-used\r\n") == b"USING default\r\n"
        second = child.connect()
        with pytest.raises((AssertionError, ConnectionResetError)):
            command(second, b"list-tube-used\r\n")
        line = child.next_line()
        assert line is not None and "connection refused" in line, child.stderr
        assert "--max-connections 1" in line
        first.close()
        second.close()


def test_max_memory_refuses_puts_until_deletes_make_room() -> None:
    body = b"x" * 1000
    cost = len(body) + 2 + JOB_OVERHEAD
    with beanpole.Server(port=0, max_memory=5 * cost) as srv:
        c = socket.create_connection(srv.address, timeout=5)
        put = b"put 0 0 60 1000\r\n" + body + b"\r\n"
        for i in range(1, 6):
            assert command(c, put) == b"INSERTED %d\r\n" % i
        assert srv.stats()["job-bytes"] == 5 * cost
        assert command(c, put) == b"OUT_OF_MEMORY\r\n"
        assert command(c, put) == b"OUT_OF_MEMORY\r\n"
        # Everything else works: reserve, delete, and then puts again.
        assert command(c, b"reserve\r\n").startswith(b"RESERVED 1 1000\r\n")
        assert command(c, b"delete 1\r\n") == b"DELETED\r\n"
        assert command(c, b"delete 2\r\n") == b"DELETED\r\n"
        assert srv.stats()["job-bytes"] == 3 * cost
        assert command(c, put) == b"INSERTED 8\r\n"
        assert command(c, put) == b"INSERTED 9\r\n"
        assert command(c, put) == b"OUT_OF_MEMORY\r\n"
        assert srv.stats()["current-jobs-ready"] == 5
        c.close()


def test_limits_come_from_flags_and_environment() -> None:
    config = beanpole.Config.load(
        environ={"BEANPOLE_MAX_CONNECTIONS": "100", "BEANPOLE_MAX_MEMORY": "1000000"},
        flags={"max_memory": 2000},
    )
    assert (config.max_connections, config.max_memory) == (100, 2000)
    assert (beanpole.Config().max_connections, beanpole.Config().max_memory) == (0, 0)
    with pytest.raises(beanpole.ConfigError, match="BEANPOLE_MAX_CONNECTIONS"):
        beanpole.Config.load(environ={"BEANPOLE_MAX_CONNECTIONS": "-1"})
    with serving("--max-memory", "300") as child:
        c = child.connect()
        # 300 bytes hold one job of 100 bytes (plus its overhead), not two.
        put = b"put 0 0 60 100\r\n" + b"y" * 100 + b"\r\n"
        assert command(c, put) == b"INSERTED 1\r\n"
        assert command(c, put) == b"OUT_OF_MEMORY\r\n"
        c.close()


def _open_files(soft: int, hard: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_open_files_limit_is_raised_to_the_hard_one() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard < 512:
        pytest.skip(f"the hard open files limit ({hard}) leaves no room to test a raise")
    with serving(preexec=lambda: _open_files(256, hard)) as child:
        assert child.open_files_limit() == (hard, hard)


def test_accept_does_not_spin_when_out_of_file_descriptors() -> None:
    limit = 48
    with serving(preexec=lambda: _open_files(limit, limit)) as child:
        held = []
        for _ in range(limit + 10):
            held.append(child.connect())
        # The server cannot accept the last ones: it must wait, not spin.
        cpu = child.cpu_seconds()
        started = time.monotonic()
        time.sleep(1.0)
        spent = child.cpu_seconds() - cpu
        elapsed = time.monotonic() - started
        assert spent < 0.5 * elapsed, f"{spent:.2f} s of CPU in {elapsed:.2f} s: spinning"
        assert any("accept failed" in line for line in _lines(child)), child.stderr
        for c in held:
            c.close()
        # With descriptors free again, it serves new connections.
        deadline = time.monotonic() + 5
        while True:
            c = child.connect()
            try:
                assert command(c, b"list-tube-used\r\n") == b"USING default\r\n"
                break
            except (AssertionError, ConnectionResetError):
                c.close()
                assert time.monotonic() < deadline, "not served after descriptors were freed"
        c.close()


def _lines(child: ServeChild) -> list[str]:
    """The stderr lines so far, reading for at most a second."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and child.next_line(timeout=0.1) is not None:
        pass
    return child.stderr


# -- hostile clients --------------------------------------------------------------------


def _served_alongside(child_connect: socket.socket) -> None:
    """Another client is served normally meanwhile."""
    assert command(child_connect, b"put 0 0 60 2\r\nok\r\n").startswith(b"INSERTED ")
    assert command(child_connect, b"reserve-with-timeout 0\r\n").startswith(b"RESERVED ")


def test_a_line_without_crlf_does_not_grow_memory() -> None:
    with serving() as child:
        other = child.connect()
        assert command(other, b"list-tube-used\r\n") == b"USING default\r\n"
        before = child.rss()
        c = child.connect()
        chunk = b"x" * 65536
        for _ in range(512):  # 32 MiB of one line
            c.sendall(chunk)
        _served_alongside(other)
        assert command(c, b"\r\n") == b"BAD_FORMAT\r\n"
        grown = child.rss() - before
        assert grown < 8 * MiB, f"resident memory grew by {grown} bytes for one line"
        assert command(c, b"list-tube-used\r\n") == b"USING default\r\n"


def test_large_bodies_sent_slowly_hold_only_what_arrived() -> None:
    announced = 64 * MiB
    with serving("-z", str(announced)) as child:
        other = child.connect()
        assert command(other, b"list-tube-used\r\n") == b"USING default\r\n"
        before = child.rss()
        slow = [child.connect() for _ in range(16)]  # 1 GiB announced in all
        for c in slow:
            c.sendall(b"put 0 0 60 %d\r\n" % announced)
        for _ in range(5):
            for c in slow:
                c.sendall(b"z")
            _served_alongside(other)
            time.sleep(0.05)
        grown = child.rss() - before
        assert grown < 16 * MiB, f"resident memory grew by {grown} bytes"
        for c in slow:
            c.close()


def test_pipelined_commands_whose_replies_are_never_read() -> None:
    with serving() as child:
        other = child.connect()
        big = b"b" * 60000
        assert command(other, b"put 0 0 60 60000\r\n" + big + b"\r\n") == b"INSERTED 1\r\n"
        before = child.rss()
        greedy = child.connect()
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        greedy.setblocking(False)
        sent = 0
        request = b"peek 1\r\n" * 1024
        deadline = time.monotonic() + 10
        # Send until the server stops taking more (it stops reading while its replies
        # cannot be written); each peek asks for 60 kB back.
        stalled_since = None
        while time.monotonic() < deadline:
            try:
                sent += greedy.send(request)
                stalled_since = None
            except BlockingIOError:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 0.5:
                    break
                time.sleep(0.01)
        assert stalled_since is not None, f"the server took {sent} bytes without stalling"
        asked = sent // 8 * 60000
        grown = child.rss() - before
        assert grown < 32 * MiB, f"resident memory grew by {grown} bytes ({asked} asked for)"
        _served_alongside(other)
        greedy.close()


def _recv_at_least(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(1 << 16)
        assert chunk, "the server closed the connection"
        got += chunk
    return got


def test_a_long_pipelined_stream_is_read_in_growing_reads_intact() -> None:
    """A client that keeps the server's reads full makes them grow (up to 64 KiB);
    commands and bodies cut at any point by those reads must all come through."""
    n = 3000
    bodies = [bytes((i + k) % 256 for k in range((i * 7919) % 5000)) for i in range(n)]
    puts = [b"put %d 0 60 %d\r\n%s\r\n" % (i % 7, len(b), b) for i, b in enumerate(bodies)]
    inserted = b"".join(b"INSERTED %d\r\n" % (i + 1) for i in range(n))
    found = [b"FOUND %d %d\r\n%s\r\n" % (i + 1, len(b), b) for i, b in enumerate(bodies)]
    with (
        beanpole.Server(listen="127.0.0.1", port=0) as srv,
        socket.create_connection(srv.address, timeout=30) as sock,
    ):
        sock.sendall(b"".join(puts))
        assert _recv_at_least(sock, len(inserted)) == inserted
        sock.sendall(b"".join(b"peek %d\r\n" % (i + 1) for i in range(n)))
        want = b"".join(found)
        assert _recv_at_least(sock, len(want)) == want
