"""A ``beanpole serve`` child process for the tests that look at the server from the
outside: its resident memory, its CPU time, its open-file limits, its log lines.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

from servechild import TIMEOUT, ServeChild


class Child(ServeChild):
    """The process, the address it listens on, and its stderr lines."""

    address: tuple[str, int] = ("", 0)

    def rss(self) -> int:
        """Resident memory in bytes."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        assert match, status
        return int(match.group(1)) * 1024

    def cpu_seconds(self) -> float:
        """User plus system CPU time used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def open_files_limit(self) -> tuple[int, int]:
        """(soft, hard) limit on open files, as the kernel shows it."""
        for line in Path(f"/proc/{self.proc.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
        raise AssertionError("no open files limit shown")

    def connect(self) -> socket.socket:
        return socket.create_connection(self.address, timeout=TIMEOUT)


@contextlib.contextmanager
def serving(*args: str, preexec: Callable[[], None] | None = None) -> Iterator[Child]:
    """Run ``beanpole serve -p 0 ARGS`` until the block ends (then kill it)."""
    child = Child("-p", "0", *args, preexec=preexec)
    try:
        address = child.addresses()[0]
        assert isinstance(address, tuple), address
        child.address = address
        yield child
    finally:
        child.kill()


def reply(conn: socket.socket, data: bytes) -> bytes:
    """Send ``data`` and read one reply line (and a body when it announces one)."""
    conn.sendall(data)
    buf = b""
    while b"\r\n" not in buf:
        chunk = conn.recv(65536)
        assert chunk, f"connection closed; got {buf!r}"
        buf += chunk
    head = buf.split(b"\r\n", 1)[0]
    words = head.split()
    if words and words[0] in (b"OK", b"FOUND", b"RESERVED"):
        total = len(head) + 2 + int(words[-1]) + 2
        while len(buf) < total:
            chunk = conn.recv(65536)
            assert chunk, f"connection closed; got {buf!r}"
            buf += chunk
    return buf
