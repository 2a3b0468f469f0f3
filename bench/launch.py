"""Starting and stopping the servers under test: beanpole, and beanstalkd on a bound socket."""

from __future__ import annotations

import os
import queue
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios import ROOT, A, B

READY_TIMEOUT = 30.0  # seconds for a server to say it is listening
LISTENING = re.compile(r"listening on (\S+):(\d+)(?:[;,\s]|$)")


def nofile_limit() -> int:
    """Raise our soft open-file limit to the hard one (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def beanpole_command(extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "beanpole", "serve", "-l", "127.0.0.1", "-p", "0", *extra]


def beanstalkd_command(exe: str, port: int, extra: Sequence[str], nofile: int) -> list[str]:
    flags = " ".join([exe, "-l", "127.0.0.1", "-p", str(port), *extra])
    return ["sh", "-c", f"ulimit -n {nofile}; LISTEN_PID=$$ LISTEN_FDS=1 exec {flags}"]


@dataclass
class Server:
    kind: str
    proc: subprocess.Popen[str]
    port: int
    log: deque[str] = field(default_factory=lambda: deque(maxlen=50))
    # The thread reading the server's stderr into `log`; joined by `stop`, so the log
    # holds the server's last lines once it has stopped.
    reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_bytes(self) -> int:
        """Resident set size from /proc/PID/status (VmRSS)."""
        text = Path(f"/proc/{self.pid}/status").read_text()
        m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
        if m is None:
            raise RuntimeError(f"no VmRSS for {self.kind} (pid {self.pid})")
        return int(m.group(1)) * 1024

    def ping(self) -> None:
        """One round trip, so the process is fully started (not still the `sh` before
        `exec`) before its RSS is read."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=READY_TIMEOUT) as s:
            s.sendall(b"list-tube-used\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(256)
                if not chunk:
                    break
                reply += chunk
        if reply != b"USING default\r\n":
            raise RuntimeError(f"{self.kind} answered {reply!r} to list-tube-used")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if self.kind == A else signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.log.append("did not stop within 10 s of SIGTERM; killed")
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.reader is not None:
            self.reader.join(timeout=5)


def _drain(stream: Any, lines: queue.Queue[str | None], log: deque[str]) -> None:
    for line in stream:
        log.append(line.rstrip("\n"))
        lines.put(line)
    lines.put(None)


def start_beanpole(extra: Sequence[str]) -> Server:
    proc = subprocess.Popen(
        beanpole_command(extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    log: deque[str] = deque(maxlen=50)
    lines: queue.Queue[str | None] = queue.Queue()
    # Read stderr on a thread for the whole run, so the server can never block on it.
    reader = threading.Thread(target=_drain, args=(proc.stderr, lines, log), daemon=True)
    reader.start()
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(left, 0.001))
        except queue.Empty:
            line = None
            left = 0
        if line is None or left <= 0:
            proc.kill()
            proc.wait()
            raise RuntimeError("beanpole did not report listening: " + " | ".join(log))
        m = LISTENING.search(line)
        if m:
            return Server(A, proc, int(m.group(2)), log, reader)


def start_beanstalkd(extra: Sequence[str], nofile: int) -> Server:
    exe = shutil.which("beanstalkd")
    if exe is None:
        raise RuntimeError("beanstalkd is not installed (apt-get install beanstalkd)")
    # A socket bound and listening before the process starts (systemd socket activation on
    # fd 3): clients can connect at once, no readiness to poll for.
    # beanstalkd sets these options on the socket it makes itself, and takes a socket it is
    # handed as already set up: without TCP_NODELAY (which accepted sockets inherit) its
    # one-reply-per-write output meets Nagle's algorithm and stalls for hundreds of ms.
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lsock.setblocking(False)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1024)  # beanstalkd's own backlog
    port = lsock.getsockname()[1]
    fd = lsock.fileno()

    def in_child() -> None:
        # The socket must be fd 3 and survive exec. (pass_fds would not do: it keeps the
        # socket's own number open, and closes fd 3 after this runs.)
        if fd == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(fd, 3, inheritable=True)

    try:
        proc = subprocess.Popen(
            beanstalkd_command(exe, port, extra, nofile),
            close_fds=False,  # Python's own descriptors are not inheritable anyway
            preexec_fn=in_child,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        lsock.close()
    log: deque[str] = deque(maxlen=50)
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_drain, args=(proc.stderr, lines, log), daemon=True)
    reader.start()
    return Server(B, proc, port, log, reader)


def start_server(kind: str, extra: Sequence[str], nofile: int) -> Server:
    return start_beanpole(extra) if kind == A else start_beanstalkd(extra, nofile)
