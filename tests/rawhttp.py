"""A raw HTTP/1.1 client for the endpoint tests: the request's bytes exactly as given
(any Host, a bad Content-Length, a partial head), the reply parsed by hand."""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass
from typing import Any, BinaryIO

TIMEOUT = 10.0  # seconds; an upper bound for anything that should take milliseconds


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json", self.headers
        return json.loads(self.body)


def request(
    method: str,
    path: str,
    *,
    host: str | None = "localhost",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    version: str = "HTTP/1.1",
) -> bytes:
    """The bytes of one request; ``host`` None sends no Host header."""
    lines = [f"{method} {path} {version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body and not any(k.lower() == "content-length" for k in headers or {}):
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def read_answer(sock: socket.socket | BinaryIO, *, head: bool = False) -> Answer:
    """One reply read from ``sock``, or from a file made of it (to read several
    replies of one connection, read them all through one such file); ``head``: the
    reply to a HEAD request, which has no body."""
    rfile = sock.makefile("rb") if isinstance(sock, socket.socket) else sock
    status_line = rfile.readline()
    if not status_line:
        raise ConnectionError("closed before a reply")
    status = int(status_line.split(b" ")[1])
    headers = {}
    while (line := rfile.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if head else int(headers.get("content-length", "0"))
    return Answer(status, headers, rfile.read(length))


def exchange(
    address: tuple[str, int], raw: bytes, context: ssl.SSLContext | None = None
) -> Answer:
    """Send ``raw`` on a new connection and read the reply."""
    with socket.create_connection(address, timeout=TIMEOUT) as plain:
        sock = plain if context is None else context.wrap_socket(plain, server_hostname="localhost")
        sock.sendall(raw)
        return read_answer(sock)


def get(address: tuple[str, int], path: str, **options: Any) -> Answer:
    context = options.pop("context", None)
    return exchange(address, request("GET", path, **options), context)


def closed_by_server(sock: socket.socket) -> bytes:
    """Read until the server closes ``sock`` (a reset counts as closed): what it sent."""
    sock.settimeout(TIMEOUT)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data
