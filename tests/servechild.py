"""A ``beanpole serve`` child process for the tests that look at a server from the
outside (listeners, systemd, limits, privileges, logs): started directly or through a
launcher (``systemd-socket-activate``), stderr read line by line, the addresses of its
"listening on" line parsed, its memory, CPU time and open-file limits read from
/proc; plus a small blocking client that speaks TCP or a Unix socket."""

from __future__ import annotations

import contextlib
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import beanpole

TIMEOUT = 10.0  # seconds; an upper bound for anything that should take milliseconds
LISTENING = re.compile(r"^beanpole (\S+) listening on (.+?)(?:; log: .*)?$")

Address = tuple[str, int] | str


def parse_address(text: str) -> Address:
    """``127.0.0.1:5`` -> ("127.0.0.1", 5), ``[::1]:5`` -> ("::1", 5), ``unix:/p`` -> "/p"."""
    if text.startswith("unix:"):
        return text.removeprefix("unix:")
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def child_env(extra: Mapping[str, str] | None = None, path: Sequence[str] = ()) -> dict[str, str]:
    """This environment without BEANPOLE_*, NOTIFY_SOCKET or LISTEN_*, with beanpole
    (and the directories in ``path``) importable, plus ``extra``."""
    package_root = str(Path(beanpole.__file__).resolve().parent.parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BEANPOLE_", "LISTEN_")) and k != "NOTIFY_SOCKET"
    }
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [package_root, *path, env.get("PYTHONPATH")] if p
    )
    env.update(extra or {})
    return env


class BeanpoleChild:
    """``[*prefix] python -m beanpole ARGV``; stderr is read line by line.

    ``env``: more environment variables; ``prefix``: a launcher to start it through;
    ``preexec``: run in the child before it starts; ``path``: more directories for the
    child's PYTHONPATH (a hook module's); ``stdout``: where the child's stdout goes
    (``subprocess.PIPE`` to read it)."""

    def __init__(
        self,
        *argv: str,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        preexec: Callable[[], None] | None = None,
        path: Sequence[str] = (),
        stdout: int = subprocess.DEVNULL,
    ) -> None:
        self.args: tuple[str, ...] = argv
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "beanpole", *argv],
            env=child_env(env, path),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=preexec,
        )
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def next_line(self, timeout: float = TIMEOUT) -> str | None:
        """The next stderr line; None when none comes within ``timeout`` or the
        process has ended."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_line(self, pattern: str | re.Pattern[str]) -> re.Match[str]:
        """Wait for a stderr line matching ``pattern`` (earlier lines are skipped)."""
        while True:
            try:
                line = self._lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern!r} within {TIMEOUT}s; "
                    f"stderr so far: {''.join(self.stderr)!r}"
                ) from None
            if line is None:
                status = self.proc.wait(timeout=TIMEOUT)
                raise AssertionError(
                    f"{self.args} exited ({status}) before a line matching {pattern!r}; "
                    f"stderr: {''.join(self.stderr)!r}"
                )
            match = re.search(pattern, line)
            if match:
                return match

    def finish(self) -> int:
        """Wait for the process to exit; its status, with all of stderr read."""
        status = self.proc.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        return status

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)

    def stop(self) -> int:
        """SIGTERM (a clean stop); the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.finish()


class ServeChild(BeanpoleChild):
    """``[*prefix] python -m beanpole serve ARGS`` (the options as BeanpoleChild's)."""

    #: The TCP address it listens on, once :func:`serving` has read it.
    address: tuple[str, int] = ("", 0)

    def __init__(self, *args: str, **options: Any) -> None:
        super().__init__("serve", *args, **options)

    def addresses(self) -> list[Address]:
        """Wait for the "listening on" line; every address it names, in order."""
        match = self.wait_line(LISTENING)
        assert match.group(1) == beanpole.__version__
        return [parse_address(part) for part in match.group(2).split(", ")]

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
def serving(*args: str, preexec: Callable[[], None] | None = None) -> Iterator[ServeChild]:
    """Run ``beanpole serve -p 0 ARGS`` until the block ends (then kill it)."""
    child = ServeChild("-p", "0", *args, preexec=preexec)
    try:
        address = child.addresses()[0]
        assert isinstance(address, tuple), address
        child.address = address
        yield child
    finally:
        child.kill()


def connect(address: Address) -> socket.socket:
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        sock.connect(address)
        return sock
    return socket.create_connection(address, timeout=TIMEOUT)


def command(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data``; return one reply line (with its body when the reply has one)."""
    sock.sendall(data)
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed; got {buf!r}"
        buf += chunk
    head = buf.split(b"\r\n", 1)[0]
    if head.startswith((b"OK ", b"RESERVED ", b"FOUND ")):
        total = len(head) + 2 + int(head.split()[-1]) + 2
        while len(buf) < total:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed; got {buf!r}"
            buf += chunk
    return buf


def stats(address: Address) -> dict[str, str]:
    """The ``stats`` of the server at ``address`` (values as strings)."""
    with connect(address) as sock:
        reply = command(sock, b"stats\r\n").decode()
    body = reply.split("\r\n", 1)[1]
    pairs = (line.split(": ", 1) for line in body.splitlines() if ": " in line)
    return {key: value.strip() for key, value in pairs}


#: Ports handed out lie here, below the kernel's ephemeral range (32768 on): a port
#: got by binding port 0 is one outgoing connections draw from too, and a server
#: restarted on it could find it taken by another test's client socket. Below the
#: bench's cluster harness's range too (20000-32000), which may run beside the tests.
FREE_PORTS = range(10000, 20000)


#: Ports this process has handed out: a port is free until its server binds it, so a
#: cluster file's ports, all drawn before any node starts, could otherwise repeat.
_GIVEN: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port below the ephemeral range that was free a moment ago (bound, then
    closed), drawn at random so that tests running at once do not try the same ones, and
    never one this process handed out before."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(1000):
        port = random.choice(FREE_PORTS)
        if port in _GIVEN:
            continue
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            _GIVEN.add(port)
            return port
    raise RuntimeError(f"no free port on {host} below the ephemeral range")


def cluster_file(directory: Path, n: int = 3) -> tuple[Path, dict[int, int]]:
    """A cluster file of ``n`` loopback nodes in ``directory``; their client ports by id."""
    clients = {i: free_port() for i in range(1, n + 1)}
    text = "".join(
        f'[[node]]\nid = {i}\nclient = "127.0.0.1:{port}"\npeer = "127.0.0.1:{free_port()}"\n'
        for i, port in clients.items()
    )
    path = directory / "cluster.toml"
    path.write_text(text, encoding="utf-8")
    return path, clients


def have_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True
