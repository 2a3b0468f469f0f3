"""beanstalkd for the generator: a server on a socket bound first, a connection, its files."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path
from typing import ClassVar


class Server:
    """beanstalkd on a listening socket bound here first (systemd socket activation)."""

    # Every server started, so that one left running by a failed case can be killed.
    started: ClassVar[list[Server]] = []

    def __init__(self, exe: str, binlog_dir: Path, args: list[str]) -> None:
        self.binlog_dir = binlog_dir
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(128)
        self.port: int = lsock.getsockname()[1]
        # The socket goes in as standard input; the shell moves it to fd 3 and execs
        # beanstalkd under its own pid, which is what LISTEN_PID must name.
        script = 'exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"'
        self.proc = subprocess.Popen(
            ["sh", "-c", script, "sh", exe, "-b", str(binlog_dir), *args],
            stdin=lsock.fileno(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        lsock.close()
        self.stderr: str | None = None
        Server.started.append(self)

    def connect(self) -> Conn:
        return Conn(self.port)

    def stop(self, sig: int = signal.SIGKILL) -> str:
        """Stops the server (if running) and returns what it wrote to stderr."""
        if self.stderr is None:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            _, err = self.proc.communicate(timeout=10)
            self.stderr = err.decode(errors="replace")
        return self.stderr


class Conn:
    """One client connection speaking the beanstalkd protocol."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> str:
        raw = self.file.readline()
        if not raw.endswith(b"\r\n"):
            raise ConnectionError(f"connection closed (got {raw!r})")
        return raw[:-2].decode()

    def cmd(self, line: str, body: bytes | None = None) -> tuple[str, bytes | None]:
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.send(data)
        reply = self.line()
        word = reply.split(" ", 1)[0]
        if word in ("OK", "RESERVED", "FOUND"):
            size = int(reply.rsplit(" ", 1)[1])
            payload = self.file.read(size + 2)
            return reply, payload[:-2]
        return reply, None

    def expect(self, line: str, want: str, body: bytes | None = None) -> None:
        reply, _ = self.cmd(line, body)
        if reply != want:
            raise RuntimeError(f"{line!r}: expected {want!r}, got {reply!r}")

    def yaml(self, line: str) -> dict[str, str] | None:
        reply, payload = self.cmd(line)
        if payload is None:
            if reply == "NOT_FOUND":
                return None
            raise RuntimeError(f"{line!r}: {reply!r}")
        out: dict[str, str] = {}
        for row in payload.decode().splitlines():
            if ": " in row:
                key, value = row.split(": ", 1)
                out[key] = value.strip('"')
        return out


def use(conn: Conn, tube: str) -> None:
    conn.expect(f"use {tube}", f"USING {tube}")


def binlog_files(d: Path) -> list[Path]:
    found = [p for p in d.iterdir() if p.name.startswith("binlog.") and p.name[7:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[7:]))
