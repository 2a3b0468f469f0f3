"""The client side of the differential test: connections that cut the byte stream
into replies, and the normal form in which two servers' replies are compared.

A reply is a line up to CRLF, plus, after ``OK <bytes>``, ``RESERVED <id> <bytes>``
and ``FOUND <id> <bytes>``, a body of that many bytes and CRLF. The server closing the
connection is an event of its own, as are bytes left over that make no whole reply.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import socket
import time

BODY_HEADER = re.compile(rb"(?:OK|RESERVED [0-9]+|FOUND [0-9]+) ([0-9]+)")
EOF = b"<connection closed>"

# Values that differ between any two server processes: compared as present only.
SERVER_IGNORED = {
    b"pid",
    b"version",
    b"rusage-utime",
    b"rusage-stime",
    b"uptime",
    b"id",
    b"hostname",
    b"os",
    b"platform",
}
# Seconds counted from a moment the two servers saw a few milliseconds apart.
TOLERANT = {b"age", b"time-left", b"pause-time-left"}
# Whole seconds printed from two clocks read at slightly different moments; the runner
# adds the largest gap it measured between sending a step to one server and the other.
TOLERANCE = 1
# Quoted since beanstalkd 1.13 (and by beanpole); 1.12 prints them bare.
QUOTED_IN_113 = {b"name", b"tube", b"hostname", b"os", b"platform"}


@dataclasses.dataclass(frozen=True)
class Event:
    step: int  # index of the step after which it was read (-1: the final check)
    data: bytes  # the reply's bytes, or EOF
    whole: bool = True  # False: bytes that make no whole reply
    # The server reset the connection (it closed with input unread). The kernel then
    # drops what the client had not read yet, so the reply before it may be cut short.
    reset: bool = False


class Conn:
    """One client connection to one server."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.events: list[Event] = []
        self.eof = False
        self.hung_up = False
        self.closed = False
        self.step = -1

    def send(self, data: bytes) -> None:
        """Send; a server that already closed the connection is not an error here."""
        if self.eof or self.hung_up or self.closed:
            return
        with contextlib.suppress(OSError):
            self.sock.settimeout(5)
            self.sock.sendall(data)

    def hang_up(self) -> None:
        if self.hung_up:
            return
        self.hung_up = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Close the socket (what arrived before is kept; nothing is read after)."""
        if not self.closed:
            self.drain()
            self.closed = True
        self.sock.close()

    def _fill(self, timeout: float) -> bool:
        """One receive, waiting up to ``timeout``; False if nothing came."""
        if self.eof or self.closed:
            return False
        self.sock.settimeout(timeout if timeout > 0 else 0.0)
        try:
            chunk = self.sock.recv(1 << 16)
        except (BlockingIOError, TimeoutError):
            return False
        except ConnectionResetError:
            chunk = None
        if not chunk:
            self._split()
            if self.buf:
                self.events.append(Event(self.step, bytes(self.buf), whole=False))
                self.buf.clear()
            self.events.append(Event(self.step, EOF, reset=chunk is None))
            self.eof = True
            return True
        self.buf += chunk
        self._split()
        return True

    def _split(self) -> None:
        """Move every whole reply from the buffer to the events."""
        while (end := self.buf.find(b"\r\n")) >= 0:
            size = 0
            m = BODY_HEADER.fullmatch(bytes(self.buf[:end]))
            if m:
                size = int(m.group(1)) + 2
            total = end + 2 + size
            if len(self.buf) < total:
                return
            self.events.append(Event(self.step, bytes(self.buf[:total])))
            del self.buf[:total]

    def drain(self) -> None:
        """Take what has already arrived, without waiting."""
        while self._fill(0):
            pass

    def read_until(self, count: int, patience: float) -> bool:
        """Read until there are ``count`` events; False if they did not come in time."""
        deadline = time.monotonic() + patience
        while len(self.events) < count and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0 or not self._fill(left):
                break
        return len(self.events) >= count

    def read_quiet(self, quiet: float, patience: float) -> None:
        """Read until nothing arrives for ``quiet`` seconds (or the server closes)."""
        deadline = time.monotonic() + patience
        while not self.eof and time.monotonic() < deadline and self._fill(quiet):
            pass

    def leftover(self) -> None:
        """Bytes that never made a whole reply become an event of their own."""
        if self.buf:
            self.events.append(Event(self.step, bytes(self.buf), whole=False))
            self.buf.clear()


@dataclasses.dataclass(frozen=True)
class Norm:
    """A reply in comparable form: ``exact`` must be equal, ``approx`` within a tolerance."""

    exact: tuple[bytes, ...]
    approx: tuple[int, ...] = ()

    def same(self, other: Norm, tolerance: int = TOLERANCE) -> bool:
        return (
            self.exact == other.exact
            and len(self.approx) == len(other.approx)
            and all(abs(a - b) <= tolerance for a, b in zip(self.approx, other.approx, strict=True))
        )


def normalise(event: Event, quote_names: bool) -> Norm:
    """The comparable form of a reply. ``quote_names``: the server is beanstalkd 1.12,
    whose stats print tube names (and host, os, platform) without quotes."""
    data = event.data
    if not event.whole or data == EOF or not data.startswith(b"OK "):
        return Norm((b"whole" if event.whole else b"partial", data))
    head, _, body = data.partition(b"\r\n")
    if not head[3:].isdigit() or int(head[3:]) != len(body) - 2 or not body.endswith(b"\r\n"):
        return Norm((b"bad length", data))
    lines = body[:-2].split(b"\n")
    server_stats = len(lines) > 1 and lines[1].startswith(b"current-jobs-urgent:")
    exact: list[bytes] = [b"OK"]
    approx: list[int] = []
    for line in lines:
        key, sep, value = line.partition(b": ")
        if not sep or line.startswith(b"- "):
            exact.append(line)
            continue
        if quote_names and key in QUOTED_IN_113 and not value.startswith(b'"'):
            value = b'"' + value + b'"'
        if server_stats and key in SERVER_IGNORED:
            exact.append(key + b": <varies>")
        elif key in TOLERANT and value.isdigit():
            exact.append(key + b": <about>")
            approx.append(int(value))
        else:
            exact.append(key + b": " + value)
    return Norm(tuple(exact), tuple(approx))


def escape(data: bytes) -> str:
    """Bytes in the transcript notation (tests/transcripts/README.md)."""
    out = []
    for b in data:
        ch = chr(b)
        if ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif b == 0:
            out.append("\\0")
        elif ch in "\\{}|":
            out.append("\\" + ch)
        elif 32 <= b < 127:
            out.append(ch)
        else:
            out.append(f"\\x{b:02x}")
    text = "".join(out)
    if text.endswith(" "):
        text = text[:-1] + "\\s"
    if text.startswith(" "):
        text = "\\s" + text[1:]
    return text
