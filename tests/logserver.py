"""Helpers for the write-ahead-log tests: a small blocking beanstalkd client, and a
``python -m beanpole serve`` child process that can be killed with SIGKILL.

Only the standard library is used. The client speaks the protocol directly so that
every reply is checked exactly (greenstalk and pystalk hide some of them).
"""

from __future__ import annotations

import socket

from servechild import TIMEOUT, ServeChild


class ProtocolError(AssertionError):
    """The server sent something other than what the command allows."""


class Client:
    """One connection; each method sends one command and reads its reply."""

    def __init__(self, address: tuple[str, int], timeout: float = TIMEOUT) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- framing ----------------------------------------------------------------------

    def send(self, line: bytes, body: bytes | None = None) -> None:
        data = line + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.sock.sendall(data)

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError(f"connection closed by the server; unread {self.buf!r}")
        self.buf += chunk

    def read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_body(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        body, rest = self.buf[:n], self.buf[n:]
        if rest[:2] != b"\r\n":
            raise ProtocolError(f"body of {n} bytes not followed by CRLF: {rest[:10]!r}")
        self.buf = rest[2:]
        return body

    def cmd(self, line: bytes | str, body: bytes | None = None) -> bytes:
        """Send a command; return its reply line (without CRLF)."""
        self.send(line.encode() if isinstance(line, str) else line, body)
        return self.read_line()

    def expect(self, line: str, reply: str) -> None:
        got = self.cmd(line)
        if got != reply.encode():
            raise ProtocolError(f"{line!r}: expected {reply!r}, got {got!r}")

    def _yaml(self, line: str) -> dict[str, str] | None:
        head = self.cmd(line)
        if head == b"NOT_FOUND":
            return None
        if not head.startswith(b"OK "):
            raise ProtocolError(f"{line!r}: {head!r}")
        text = self.read_body(int(head.split()[1])).decode()
        out: dict[str, str] = {}
        for row in text.splitlines()[1:]:
            key, _, value = row.partition(": ")
            out[key] = value.strip().strip('"')
        return out

    # -- commands ---------------------------------------------------------------------

    def use(self, tube: str) -> None:
        self.expect(f"use {tube}", f"USING {tube}")

    def watch(self, tube: str) -> None:
        reply = self.cmd(f"watch {tube}")
        if not reply.startswith(b"WATCHING "):
            raise ProtocolError(f"watch {tube}: {reply!r}")

    def ignore(self, tube: str) -> None:
        reply = self.cmd(f"ignore {tube}")
        if not reply.startswith(b"WATCHING "):
            raise ProtocolError(f"ignore {tube}: {reply!r}")

    def put(self, body: bytes, pri: int = 0, delay: int = 0, ttr: int = 60) -> int:
        reply = self.cmd(f"put {pri} {delay} {ttr} {len(body)}".encode(), body)
        if not reply.startswith(b"INSERTED "):
            raise ProtocolError(f"put: {reply!r}")
        return int(reply.split()[1])

    def reserve(self, timeout: int = 0) -> tuple[int, bytes]:
        reply = self.cmd(f"reserve-with-timeout {timeout}")
        if not reply.startswith(b"RESERVED "):
            raise ProtocolError(f"reserve-with-timeout {timeout}: {reply!r}")
        _, job_id, size = reply.split()
        return int(job_id), self.read_body(int(size))

    def reserve_job(self, job_id: int) -> bytes:
        reply = self.cmd(f"reserve-job {job_id}")
        if not reply.startswith(f"RESERVED {job_id} ".encode()):
            raise ProtocolError(f"reserve-job {job_id}: {reply!r}")
        return self.read_body(int(reply.split()[2]))

    def release(self, job_id: int, pri: int, delay: int = 0) -> None:
        self.expect(f"release {job_id} {pri} {delay}", "RELEASED")

    def bury(self, job_id: int, pri: int) -> None:
        self.expect(f"bury {job_id} {pri}", "BURIED")

    def touch(self, job_id: int) -> None:
        self.expect(f"touch {job_id}", "TOUCHED")

    def delete(self, job_id: int) -> None:
        self.expect(f"delete {job_id}", "DELETED")

    def kick_job(self, job_id: int) -> None:
        self.expect(f"kick-job {job_id}", "KICKED")

    def kick(self, bound: int) -> int:
        reply = self.cmd(f"kick {bound}")
        if not reply.startswith(b"KICKED "):
            raise ProtocolError(f"kick {bound}: {reply!r}")
        return int(reply.split()[1])

    def _peek(self, line: str) -> tuple[int, bytes] | None:
        reply = self.cmd(line)
        if reply == b"NOT_FOUND":
            return None
        if not reply.startswith(b"FOUND "):
            raise ProtocolError(f"{line}: {reply!r}")
        _, job_id, size = reply.split()
        return int(job_id), self.read_body(int(size))

    def peek(self, job_id: int) -> bytes | None:
        found = self._peek(f"peek {job_id}")
        if found is not None and found[0] != job_id:
            raise ProtocolError(f"peek {job_id} found job {found[0]}")
        return None if found is None else found[1]

    def peek_buried(self) -> tuple[int, bytes] | None:
        return self._peek("peek-buried")

    def stats_job(self, job_id: int) -> dict[str, str] | None:
        return self._yaml(f"stats-job {job_id}")

    def stats_tube(self, tube: str) -> dict[str, str] | None:
        return self._yaml(f"stats-tube {tube}")

    def stats(self) -> dict[str, str]:
        out = self._yaml("stats")
        assert out is not None
        return out


class Child(ServeChild):
    """``python -m beanpole serve ARGS`` in a child process that can be killed with
    SIGKILL, for servers listening on one TCP address."""

    def listening(self) -> tuple[str, int]:
        """Wait for the "listening on" line (other lines before it are kept in stderr);
        the first address it names."""
        address = self.addresses()[0]
        assert isinstance(address, tuple), address
        return address

