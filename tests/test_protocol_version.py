"""``version`` in the wire stats is the protocol's, 1.13, so clients that gate features
on it take the same paths as against beanstalkd 1.13.

Client libraries read ``version`` from ``stats`` and compare it with the release that
brought a command: Perl's Beanstalk::Client and fivebeans send ``kick-job`` only to 1.8 or
later, and otherwise skip it without a word. The client below does the same over a real
socket, against beanpole and against Debian's beanstalkd, and the job it kicks must really
be kicked. beanpole's own version stays out of the wire: ``beanpole --version``, the start
line, ``Server.stats()["beanpole-version"]``, the ``beanpole_build_info`` metric and the
dashboard have it.
"""

from __future__ import annotations

import socket

import pytest

import beanpole
from servers import KINDS, start
from transcript import protocol_version

KICK_JOB_SINCE = (1, 8)


class GatingClient:
    """A minimal beanstalkd client that, like several real ones, asks the server's
    version before using a command newer than the protocol's first releases."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _body(self, size: int) -> bytes:
        while len(self.buf) < size + 2:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        body, self.buf = self.buf[:size], self.buf[size + 2 :]
        return body

    def call(self, command: bytes) -> bytes:
        self.sock.sendall(command + b"\r\n")
        return self._line()

    def stats(self) -> dict[str, str]:
        head = self.call(b"stats")
        assert head.startswith(b"OK "), head
        body = self._body(int(head[3:])).decode()
        pairs = (line.partition(": ") for line in body.splitlines()[1:])
        return {key: value.strip('"') for key, _, value in pairs}

    def server_version(self) -> tuple[int, ...]:
        """``version`` as numbers, compared part by part (so 1.13 is after 1.8)."""
        return parse_version(self.stats()["version"])

    def kick_job(self, job_id: int) -> bool:
        """``kick-job`` if the server is new enough; False (nothing sent) otherwise."""
        if self.server_version() < KICK_JOB_SINCE:
            return False
        reply = self.call(b"kick-job %d" % job_id)
        assert reply == b"KICKED", reply
        return True


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def test_the_gate_is_a_real_gate() -> None:
    """The old value (beanpole's own 0.1.0) and releases before 1.8 are refused."""
    assert parse_version("0.1.0") < KICK_JOB_SINCE
    assert parse_version("1.7") < KICK_JOB_SINCE
    assert parse_version("1.8") >= KICK_JOB_SINCE
    assert parse_version("1.13") >= KICK_JOB_SINCE
    assert parse_version("1.12") >= KICK_JOB_SINCE


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_that_gates_on_the_version_kicks_the_job(kind: str) -> None:
    with start(kind) as srv:
        client = GatingClient(srv.address)
        try:
            assert client.call(b"use gate") == b"USING gate"
            assert client.call(b"watch gate") == b"WATCHING 2"
            client.sock.sendall(b"put 0 0 60 1\r\nx\r\n")
            job_id = int(client._line().removeprefix(b"INSERTED "))
            assert client.call(b"reserve-with-timeout 0") == b"RESERVED %d 1" % job_id
            client._body(1)
            assert client.call(b"bury %d 0" % job_id) == b"BURIED"
            assert client.kick_job(job_id), "the client skipped kick-job"
            # It ran: the job is ready again, kicked once.
            head = client.call(b"stats-job %d" % job_id)
            job = client._body(int(head[3:])).decode()
            assert "\nstate: ready\n" in job and "\nkicks: 1\n" in job, job
            assert client.stats()["version"] == protocol_version(kind)
        finally:
            client.close()


def test_wire_stats_report_the_protocol_version_and_beanstalkds_keys() -> None:
    """beanpole's ``stats``: every key beanstalkd sends, in its order, and ``version``
    the protocol's (1.13), whatever beanpole's own version is."""
    with start("beanstalkd") as bs, start("beanpole") as bp:
        theirs, ours = GatingClient(bs.address), GatingClient(bp.address)
        try:
            oracle, mine = theirs.stats(), ours.stats()
        finally:
            theirs.close()
            ours.close()
    assert list(mine) == list(oracle)
    assert mine["version"] == "1.13"


def test_beanpoles_own_version_is_beside_the_wire_stats() -> None:
    with beanpole.Server(port=0) as srv:
        stats = srv.stats()
        snapshot = srv.snapshot()
    assert stats["version"] == "1.13"
    assert stats["beanpole-version"] == beanpole.__version__
    assert snapshot.server["version"] == "1.13"
    assert snapshot.server["beanpole-version"] == beanpole.__version__
