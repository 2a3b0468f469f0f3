"""How many replies a byte stream gets from beanstalkd: the framing, not the queue.

The differential runner (``diffrun.py``) reads each step's replies by count when it
can, which is fast, and waits for the server to fall quiet only when it cannot. This
module supplies the counts. It follows beanstalkd's reader: a command line ends at
the first CR in its first 224 bytes if an LF follows that CR; a longer line is thrown
away up to the next line end and answered BAD_FORMAT; a put's header is parsed field
by field as beanstalkd's ``read_u32`` does, then its body (size + 2 bytes) is read,
or thrown away before JOB_TOO_BIG; ``quit`` closes; a reserve that may wait makes
the count uncertain.

Nothing here decides what a reply says. A wrong count costs time, never a verdict:
the runner notices that the oracle did not send what was predicted and falls back to
waiting for quiet on that connection.
"""

from __future__ import annotations

import dataclasses

MAX_LINE = 224
U32_MAX = (1 << 32) - 1


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one chunk of input does to a connection."""

    replies: int  # reply events, the connection's closing counted as one
    uncertain: bool  # a reserve that may wait: when its reply comes is unknown
    closes: bool
    puts: int = 0  # put headers accepted (each takes a job id)
    # A put header (or an oversized one) was read after the last reply: it took an
    # id or counted a put, and no reply tells when that happened.
    silent_effect: bool = False


def line_end(buf: bytes | bytearray) -> int | None:
    """Index of the CR ending the first line, as beanstalkd's scan finds it."""
    window = buf[: min(len(buf), MAX_LINE)]
    if len(window) < 2:
        return None
    cr = window.find(b"\r", 0, len(window) - 1)
    if cr < 0 or window[cr + 1] != ord("\n"):
        return None
    return cr


def read_u32(s: bytes) -> tuple[int, bytes] | None:
    """beanstalkd's ``read_u32`` with an end pointer: spaces, digits, the rest."""
    s = s.lstrip(b" ")
    digits = len(s) - len(s.lstrip(b"0123456789"))
    if digits == 0:
        return None
    value = int(s[:digits])
    if value > U32_MAX:
        return None
    return value, s[digits:]


@dataclasses.dataclass(frozen=True)
class Line:
    """How beanstalkd treats one command line, as far as counting replies goes."""

    kind: str  # "reply", "put", "discard", "quit" or "wait"
    need: int = 0  # body bytes to read ("put") or throw away ("discard"), CRLF included


REPLY = Line("reply")


def put_line(rest: bytes, max_job_size: int) -> Line:
    """``put `` and then ``rest``: BAD_FORMAT, JOB_TOO_BIG, or a body to read."""
    fields: list[int] = []
    for _ in range(4):
        parsed = read_u32(rest)
        if parsed is None:
            return REPLY
        value, rest = parsed
        fields.append(value)
    size = fields[3]
    if size > max_job_size:
        return Line("discard", size + 2)
    if rest:
        return REPLY
    return Line("put", size + 2)


def timeout_is_zero(rest: bytes) -> bool:
    """True when both 1.12 (strtol) and 1.13 (read_u32) read ``rest`` as 0."""
    parsed = read_u32(rest)
    return parsed is not None and parsed[0] == 0


def classify(line: bytes, max_job_size: int) -> Line:
    if b"\0" in line:
        return REPLY
    if line.startswith(b"put "):
        return put_line(line[4:], max_job_size)
    # Prefixes tested before "reserve" in beanstalkd's order.
    if line.startswith((b"peek", b"reserve-job ")):
        return REPLY
    if line.startswith(b"reserve-with-timeout "):
        return REPLY if timeout_is_zero(line[21:]) else Line("wait")
    if line.startswith(b"reserve"):
        return Line("wait") if line == b"reserve" else REPLY
    if line.startswith(b"quit"):
        return Line("quit")
    return REPLY


class ConnModel:
    """One connection's input as beanstalkd frames it."""

    def __init__(self, max_job_size: int) -> None:
        self.max_job_size = max_job_size
        self.buf = bytearray()
        self.mode = "command"  # "command", "skip-line", "body" or "discard"
        self.need = 0
        self.closed = False
        self.lines: list[bytes] = []  # every command line framed so far
        # A connection of its own tube: it watches only that tube (no other connection
        # does) and sends no watch or ignore, so it may wait in reserve beside others.
        self.private = False

    def at_boundary(self) -> bool:
        """True when the next byte sent starts a command line."""
        return self.mode == "command" and not self.buf and not self.closed

    def feed(self, data: bytes) -> Outcome:
        replies = 0
        puts = 0
        uncertain = False
        effect = False
        if self.closed:
            return Outcome(0, False, True)
        self.buf += data
        while True:
            if self.mode in ("command", "skip-line"):
                cr = line_end(self.buf)
                if cr is None:
                    if len(self.buf) >= MAX_LINE:
                        del self.buf[:MAX_LINE]
                        self.mode = "skip-line"
                        continue
                    break
                line = bytes(self.buf[:cr])
                del self.buf[: cr + 2]
                if self.mode == "skip-line":
                    self.mode = "command"
                    replies += 1
                    continue
                self.lines.append(line)
                kind = classify(line, self.max_job_size)
                if kind.kind == "quit":
                    self.closed = True
                    self.buf.clear()
                    return Outcome(replies + 1, uncertain, True, puts)
                puts += kind.kind == "put"
                if kind.kind in ("put", "discard"):
                    self.mode = "body" if kind.kind == "put" else "discard"
                    self.need = kind.need
                    effect = True
                    continue
                uncertain |= kind.kind == "wait"
                replies += 1
            else:
                take = min(self.need, len(self.buf))
                del self.buf[:take]
                self.need -= take
                if self.need:
                    break
                self.mode = "command"
                effect = False
                replies += 1
        return Outcome(replies, uncertain, False, puts, effect)
