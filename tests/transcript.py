"""Wire transcripts: parse ``tests/transcripts/*.t`` and run one against a fresh server.

The format is described in ``tests/transcripts/README.md``. In short, each step line is
``[VERSION:] CONN OP [PAYLOAD]``::

    %max-job-size 10                 header: server option, then the steps
    c1 > put 0 0 10 5                send the line and CRLF
    c1 >> hello\\r\\n                send bytes exactly (escapes \\r \\n \\0 \\s \\xHH ...)
    c1 < INSERTED 1                  expect exactly this line and CRLF
    c1 < OK {len}                    expect a YAML body: the lines follow as "| ..." lines
      | pid: {pid}                   placeholders match variable values
      | name: "default" || 1.12: name: default
    c1 <~ USING [a-z]+               expect a line matching a regular expression
    c1 silent 200                    expect no byte for 200 ms
    c1 eof                           expect the server to close the connection

Only the Python standard library is used (sockets, re, time).
"""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

DEFAULT_TIMEOUT = 3.0  # seconds to wait for an expected reply
GRACE = 0.15  # seconds to collect more bytes for a failure message
FINAL_CHECK = b"list-tube-used\r\n"
FINAL_REPLY = re.compile(rb"USING [A-Za-z0-9+/;.$_()-]+\r\n")

# Values that differ from run to run: a named placeholder per value, as a regex on bytes.
PLACEHOLDERS: dict[str, bytes] = {
    "int": rb"[0-9]+",
    "float": rb"[0-9]+\.[0-9]{6}",
    "hex": rb"[0-9a-f]+",
    "str": rb"[^\"\r\n]*",
    "any": rb"[^\r\n]*",
    "pid": rb"[1-9][0-9]*",
    "uptime": rb"[0-9]+",
    "rusage": rb"[0-9]+\.[0-9]{6}",
    "id": rb"[0-9a-f]{16}",
    "hostname": rb"[^\"\r\n]*",
    "os": rb"[^\"\r\n]*",
    "platform": rb"[^\"\r\n]*",
    "version": rb"[0-9A-Za-z.+~_-]+",
    "age": rb"[0-9]+",
    "time-left": rb"[0-9]+",
}

_RANGE = re.compile(r"([0-9]+)\.\.([0-9]+)")
_REPEAT = re.compile(r"([0-9]+)\*(.+)", re.DOTALL)
_VERSION_PREFIX = re.compile(r"([0-9]+\.[0-9]+):\s+(.*)")
_ALT = re.compile(r" \|\| ([0-9]+\.[0-9]+): ")
_TIMED = re.compile(
    r"reserve-with-timeout +[1-9]|pause-tube\S* +\S+ +[1-9]|DEADLINE_SOON"
    r"|put +[0-9]+ +[1-9]|release +[0-9]+ +[0-9]+ +[1-9]"
)
_CONN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIMPLE_ESCAPES = {
    "\\": b"\\",
    "r": b"\r",
    "n": b"\n",
    "t": b"\t",
    "0": b"\0",
    "s": b" ",
    "{": b"{",
    "}": b"}",
    "|": b"|",
}

OPS = (">", ">>", "<", "<~", "silent", "eof", "shutdown", "close", "connect")


class TranscriptError(Exception):
    """A transcript file that does not follow the format."""


class TranscriptFailure(AssertionError):
    """The server's bytes differ from the transcript."""

    def __init__(
        self, name: str, step: Step | None, what: str, expected: object, received: bytes
    ) -> None:
        where = f"line {step.lineno}: {step.source}" if step else "final check"
        super().__init__(
            f"transcript {name}, {where}\n  {what}\n"
            f"  expected: {expected!r}\n  received: {received!r}"
        )


# ---------------------------------------------------------------------------- parsing


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One expected line: literal bytes, or a regex when it has placeholders."""

    text: str  # as written in the transcript, for messages
    literal: bytes | None
    where: str = ""  # file:line
    regex: re.Pattern[bytes] | None = None
    ranges: tuple[tuple[str, int, int], ...] = ()
    has_len: bool = False

    def matches(self, data: bytes) -> bool:
        if self.literal is not None:
            return data == self.literal
        assert self.regex is not None
        m = self.regex.fullmatch(data)
        if m is None:
            return False
        return all(low <= int(m.group(group)) <= high for group, low, high in self.ranges)

    def describe(self) -> bytes | str:
        """The expected bytes, or the pattern as written when it has placeholders."""
        return self.literal if self.literal is not None else self.text


@dataclasses.dataclass(frozen=True)
class Step:
    lineno: int
    source: str
    conn: str
    op: str
    data: bytes = b""  # bytes to send
    pattern: Pattern | None = None  # expected line for "<" and "<~"
    body: tuple[Pattern, ...] = ()  # expected LF-terminated lines of the body after the line
    millis: int = 0  # for "silent"


@dataclasses.dataclass(frozen=True)
class Transcript:
    name: str
    path: Path
    max_job_size: int | None
    timeout: float
    skip: dict[str, str]  # kind or version -> reason
    steps: tuple[Step, ...]
    comment: str

    def beanstalkd_args(self) -> list[str]:
        return ["-z", str(self.max_job_size)] if self.max_job_size is not None else []

    def beanpole_config(self) -> dict[str, object]:
        return {"max_job_size": self.max_job_size} if self.max_job_size is not None else {}

    def estimated_seconds(self) -> float:
        """A rough guess of the run time, to start the slow transcripts first."""
        waits = sum(s.millis for s in self.steps) / 1000
        timed = any(_TIMED.search(s.source) for s in self.steps)
        return waits + (1.5 if timed else 0.0)


def _decode_escapes(text: str, where: str) -> bytes:
    """Decode backslash escapes; the text has no placeholders left in it."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out += ch.encode("latin-1")
            i += 1
            continue
        if i + 1 >= len(text):
            raise TranscriptError(f"{where}: lone backslash at the end")
        nxt = text[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[nxt]
            i += 2
        elif nxt == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", text[i + 2 : i + 4]):
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            raise TranscriptError(f"{where}: unknown escape \\{nxt}")
    return bytes(out)


def _split_braces(text: str, where: str) -> Iterator[tuple[bool, str]]:
    """Yield (is_brace, text) parts; ``\\{`` and ``\\}`` stay in the literal parts."""
    i = 0
    start = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "}":
            raise TranscriptError(f"{where}: unmatched }} (write \\}})")
        if ch == "{":
            end = text.find("}", i)
            if end < 0:
                raise TranscriptError(f"{where}: unclosed {{ (write \\{{)")
            if i > start:
                yield False, text[start:i]
            yield True, text[i + 1 : end]
            i = start = end + 1
            continue
        i += 1
    if start < len(text):
        yield False, text[start:]


def _repeat(inner: str, where: str) -> bytes | None:
    m = _REPEAT.fullmatch(inner)
    if not m:
        return None
    return _decode_escapes(m.group(2), where) * int(m.group(1))


def encode_send(text: str, where: str) -> bytes:
    """Bytes to send: escapes and ``{N*text}`` repetition."""
    out = bytearray()
    for is_brace, part in _split_braces(text, where):
        if not is_brace:
            out += _decode_escapes(part, where)
            continue
        rep = _repeat(part, where)
        if rep is None:
            raise TranscriptError(f"{where}: {{{part}}} is not {{N*text}} in a send")
        out += rep
    return bytes(out)


def compile_pattern(text: str, where: str, allow_len: bool = False) -> Pattern:
    """An expected line: literal text, escapes, ``{N*text}`` and placeholders."""
    literal = bytearray()
    regex = bytearray()
    ranges: list[tuple[str, int, int]] = []
    has_len = False
    dynamic = False
    for is_brace, part in _split_braces(text, where):
        if not is_brace:
            chunk = _decode_escapes(part, where)
        else:
            rep = _repeat(part, where)
            if rep is not None:
                chunk = rep
            else:
                dynamic = True
                rng = _RANGE.fullmatch(part)
                if rng:
                    group = f"r{len(ranges)}"
                    ranges.append((group, int(rng.group(1)), int(rng.group(2))))
                    regex += b"(?P<" + group.encode() + b">[0-9]+)"
                elif part == "len":
                    if not allow_len or has_len:
                        raise TranscriptError(f"{where}: {{len}} only once, in a '<' line")
                    has_len = True
                    regex += rb"(?P<len>[0-9]+)"
                elif part in PLACEHOLDERS:
                    regex += b"(?:" + PLACEHOLDERS[part] + b")"
                else:
                    raise TranscriptError(f"{where}: unknown placeholder {{{part}}}")
                continue
        literal += chunk
        regex += re.escape(chunk)
    if not dynamic:
        return Pattern(text, bytes(literal), where)
    compiled = re.compile(bytes(regex), re.DOTALL)
    return Pattern(text, None, where, compiled, tuple(ranges), has_len)


def _pick(text: str, version: str, where: str) -> str:
    """Choose between ``main || 1.12: alternative`` by server version."""
    parts = _ALT.split(text)
    chosen = parts[0]
    for i in range(1, len(parts), 2):
        if parts[i] == version:
            chosen = parts[i + 1]
    if chosen.endswith((" ", "\t")):
        raise TranscriptError(f"{where}: trailing whitespace before ||")
    return chosen


def parse(path: Path, version: str) -> Transcript:
    """Parse a transcript, keeping the steps and alternatives for ``version``."""
    name = path.stem
    max_job_size: int | None = None
    timeout = DEFAULT_TIMEOUT
    skip: dict[str, str] = {}
    steps: list[Step] = []
    comments: list[str] = []
    body_owner: int | None = None  # index in steps of the last "<" step
    body: list[Pattern] = []

    def close_body() -> None:
        nonlocal body_owner, body
        if body_owner is not None:
            owner = steps[body_owner]
            if owner.pattern is not None and owner.pattern.has_len and not body:
                raise TranscriptError(f"{path.name}:{owner.lineno}: {{len}} without body lines")
            steps[body_owner] = dataclasses.replace(owner, body=tuple(body))
        body_owner, body = None, []

    lines = path.read_text(encoding="latin-1").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, raw in enumerate(lines, 1):
        where = f"{path.name}:{lineno}"
        if raw.endswith((" ", "\t", "\r")):
            raise TranscriptError(f"{where}: trailing whitespace (write \\s for a space)")
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if not steps:
                comments.append(line.lstrip("# "))
            continue
        if line.startswith("|"):
            if body_owner is None:
                raise TranscriptError(f"{where}: body line without a '<' line before it")
            content = line[2:] if line.startswith("| ") else line[1:]
            body.append(compile_pattern(_pick(content, version, where), where))
            continue
        close_body()
        if line.startswith("%"):
            if steps:
                raise TranscriptError(f"{where}: header lines come before the steps")
            key, _, value = line[1:].partition(" ")
            if key == "max-job-size":
                max_job_size = int(value)
            elif key == "timeout":
                timeout = float(value)
            elif key == "skip":
                who, _, reason = value.partition(" ")
                if not reason:
                    raise TranscriptError(f"{where}: %skip KIND-OR-VERSION REASON")
                skip[who] = reason
            else:
                raise TranscriptError(f"{where}: unknown header %{key}")
            continue
        only: str | None = None
        m = _VERSION_PREFIX.fullmatch(line)
        if m:
            only, line = m.group(1), m.group(2)
        conn, _, rest = line.partition(" ")
        if not _CONN.fullmatch(conn):
            raise TranscriptError(f"{where}: a step starts with a connection name: {raw!r}")
        op, _, payload = rest.partition(" ")
        if op not in OPS:
            raise TranscriptError(f"{where}: unknown operation {op!r}")
        if only is not None and only != version:
            continue
        step = Step(lineno, line, conn, op)
        if op in (">", ">>"):
            data = encode_send(payload, where)
            step = dataclasses.replace(step, data=data + b"\r\n" if op == ">" else data)
        elif op == "<":
            pattern = compile_pattern(_pick(payload, version, where), where, allow_len=True)
            step = dataclasses.replace(step, pattern=pattern)
            body_owner = len(steps)
        elif op == "<~":
            chosen = _pick(payload, version, where)
            regex = re.compile(chosen.encode("latin-1"), re.DOTALL)
            step = dataclasses.replace(step, pattern=Pattern(chosen, None, where, regex))
        elif op == "silent":
            step = dataclasses.replace(step, millis=int(payload))
        elif payload:
            raise TranscriptError(f"{where}: {op} takes no argument")
        steps.append(step)
    close_body()
    if not steps:
        raise TranscriptError(f"{path.name}: no steps")
    return Transcript(name, path, max_job_size, timeout, skip, tuple(steps), " ".join(comments))


# ---------------------------------------------------------------------------- running


class Conn:
    """One client connection with its own receive buffer."""

    def __init__(self, name: str, address: tuple[str, int]) -> None:
        self.name = name
        self.sock = socket.create_connection(address, timeout=DEFAULT_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.half_closed = False
        self.closed = False
        self.last_op = "connect"

    def fill(self, deadline: float) -> bool:
        """Receive more bytes; False on timeout or end of stream (see ``eof``)."""
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def gather(self, seconds: float = GRACE) -> bytes:
        """What arrived so far, after waiting a little for the rest (for messages)."""
        deadline = time.monotonic() + seconds
        while self.fill(deadline):
            pass
        return bytes(self.buf) + (b"<EOF>" if self.eof else b"")

    def take(self, n: int) -> bytes:
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data


class Runner:
    def __init__(self, transcript: Transcript, address: tuple[str, int]) -> None:
        self.t = transcript
        self.address = address
        self.conns: dict[str, Conn] = {}

    def fail(self, step: Step | None, what: str, expected: object, conn: Conn) -> NoReturn:
        raise TranscriptFailure(self.t.name, step, what, expected, conn.gather())

    def conn(self, step: Step) -> Conn:
        c = self.conns.get(step.conn)
        if c is None:
            c = self.conns[step.conn] = Conn(step.conn, self.address)
        elif c.closed:
            raise TranscriptFailure(self.t.name, step, "connection was closed", b"", b"")
        return c

    def run(self) -> None:
        try:
            for step in self.t.steps:
                self.step(step)
            self.final_check()
        finally:
            for c in self.conns.values():
                c.sock.close()

    def step(self, step: Step) -> None:
        c = self.conn(step)
        deadline = time.monotonic() + self.t.timeout
        if step.op in (">", ">>"):
            try:
                c.sock.sendall(step.data)
            except OSError as e:
                self.fail(step, f"send failed: {e}", step.data, c)
        elif step.op == "<":
            assert step.pattern is not None
            if step.pattern.literal is not None and not step.body:
                self.expect_literal(step, c, step.pattern.literal + b"\r\n", deadline)
            else:
                line = self.expect_line(step, c, step.pattern, deadline)
                size = self.body_size(line)
                if step.body and size is not None:
                    self.expect_body(step, c, size, deadline)
        elif step.op == "<~":
            assert step.pattern is not None
            self.expect_line(step, c, step.pattern, deadline)
        elif step.op == "silent":
            if c.buf or c.fill(time.monotonic() + step.millis / 1000) or c.eof:
                self.fail(step, f"bytes within {step.millis} ms", b"", c)
        elif step.op == "eof":
            if c.buf:
                self.fail(step, "bytes before the end of stream", b"<EOF>", c)
            while c.fill(deadline):
                self.fail(step, "bytes before the end of stream", b"<EOF>", c)
            if not c.eof:
                self.fail(step, "no end of stream in time", b"<EOF>", c)
        elif step.op == "shutdown":
            c.sock.shutdown(socket.SHUT_WR)
            c.half_closed = True
        elif step.op == "close":
            c.sock.close()
            c.closed = True
        c.last_op = step.op

    def expect_literal(self, step: Step, c: Conn, want: bytes, deadline: float) -> None:
        while len(c.buf) < len(want) and want.startswith(c.buf):
            if not c.fill(deadline):
                what = "end of stream" if c.eof else f"timeout after {self.t.timeout} s"
                self.fail(step, what, want, c)
        if c.buf[: len(want)] != want:
            self.fail(step, "different bytes", want, c)
        c.take(len(want))

    def read_line(self, step: Step, c: Conn, want: object, deadline: float) -> bytes:
        while (end := c.buf.find(b"\r\n")) < 0:
            if not c.fill(deadline):
                what = "end of stream" if c.eof else f"no full line after {self.t.timeout} s"
                self.fail(step, what, want, c)
        return c.take(end + 2)[:-2]

    def expect_line(self, step: Step, c: Conn, pattern: Pattern, deadline: float) -> bytes:
        line = self.read_line(step, c, pattern.describe(), deadline)
        if not pattern.matches(line):
            c.buf[:0] = line + b"\r\n"
            self.fail(step, "line does not match", pattern.describe(), c)
        if self.body_size(line) is None and step.body:
            c.buf[:0] = line + b"\r\n"
            self.fail(step, "no body size at the end of the line", pattern.describe(), c)
        return line

    @staticmethod
    def body_size(line: bytes) -> int | None:
        last = line.rsplit(b" ", 1)[-1]
        return int(last) if last.isdigit() else None

    def expect_body(self, step: Step, c: Conn, size: int, deadline: float) -> None:
        while len(c.buf) < size + 2:
            if not c.fill(deadline):
                self.fail(step, f"body shorter than the announced {size} bytes", size, c)
        body = c.take(size + 2)
        if body[-2:] != b"\r\n":
            c.buf[:0] = body
            self.fail(step, f"body of {size} bytes is not followed by CRLF", b"\r\n", c)
        lines = body[:-2].split(b"\n")
        if lines[-1] != b"":
            self.fail(step, "body does not end with a newline", b"\n", c)
        lines.pop()
        for i, (got, pattern) in enumerate(zip(lines, step.body, strict=False), 1):
            if not pattern.matches(got):
                what = f"body line {i} ({pattern.where}) differs"
                raise TranscriptFailure(self.t.name, step, what, pattern.describe(), got)
        if len(lines) != len(step.body):
            raise TranscriptFailure(
                self.t.name,
                step,
                f"body has {len(lines)} lines, expected {len(step.body)}",
                [p.describe() for p in step.body],
                body,
            )

    def final_check(self) -> None:
        """Every open, idle connection must have nothing pending: ask and get the next line."""
        for c in self.conns.values():
            if c.closed or c.half_closed or c.eof or c.last_op == "silent":
                continue
            if c.buf:
                raise TranscriptFailure(
                    self.t.name, None, f"{c.name}: stray bytes at the end", b"", c.gather()
                )
            try:
                c.sock.sendall(FINAL_CHECK)
            except OSError as e:
                raise TranscriptFailure(
                    self.t.name, None, f"{c.name}: send failed: {e}", b"", b""
                ) from e
            deadline = time.monotonic() + self.t.timeout
            while c.buf.find(b"\r\n") < 0 and c.fill(deadline):
                pass
            got = c.gather(0.05)
            if not FINAL_REPLY.fullmatch(got):
                raise TranscriptFailure(
                    self.t.name,
                    None,
                    f"{c.name}: list-tube-used after the last step",
                    FINAL_REPLY.pattern,
                    got,
                )


# ---------------------------------------------------------------------------- servers


_VERSIONS: dict[str, str] = {}


def protocol_version(kind: str) -> str:
    """The beanstalkd version whose bytes a server of ``kind`` produces.

    beanpole follows 1.13. For beanstalkd, ask the binary (``beanstalkd -v``), which
    leaves the server's counters alone; Debian's build says 1.12.
    """
    if kind != "beanstalkd":
        return "1.13"
    if kind not in _VERSIONS:
        version = "1.12"
        try:
            out = subprocess.run(
                ["beanstalkd", "-v"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
            m = re.search(r"([0-9]+\.[0-9]+)", out)
            if m:
                version = m.group(1)
        except OSError:
            pass
        _VERSIONS[kind] = version
    return _VERSIONS[kind]


def skip_reason(transcript: Transcript, kind: str) -> str | None:
    # A cluster is beanpole, through a follower: beanpole's skips are its too.
    also = ("beanpole",) if kind == "beanpole-cluster" else ()
    for who in (kind, protocol_version(kind), *also):
        if who in transcript.skip:
            return transcript.skip[who]
    return None


def run(transcript: Transcript, kind: str) -> None:
    """Run ``transcript`` against a fresh server of ``kind``; raise TranscriptFailure."""
    from servers import start

    with start(kind, *transcript.beanstalkd_args(), **transcript.beanpole_config()) as srv:
        Runner(transcript, srv.address).run()


def load_all(directory: Path, version: str) -> list[Transcript]:
    return [parse(p, version) for p in sorted(directory.glob("*.t"))]


def main(argv: Sequence[str]) -> int:
    """``python tests/transcript.py [--no-skip] KIND FILE...``: run, print the failures."""
    args = list(argv)
    honour_skips = "--no-skip" not in args
    kind, *files = [a for a in args if a != "--no-skip"]
    status = 0
    for f in files:
        t = parse(Path(f), protocol_version(kind))
        reason = skip_reason(t, kind)
        if reason and honour_skips:
            print(f"skip {t.name}: {reason}")
            continue
        started = time.monotonic()
        try:
            run(t, kind)
            print(f"ok   {t.name} ({time.monotonic() - started:.2f} s)")
        except AssertionError as e:
            status = 1
            print(f"FAIL {e}")
    return status


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main(sys.argv[1:]))
