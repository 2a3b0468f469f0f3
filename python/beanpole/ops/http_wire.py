"""HTTP/1.1 on the wire for the endpoint (:mod:`beanpole.ops.http`): the request and reply
types, reading a request head from bytes, the ``Host`` allowlist, and encoding a reply.

Nothing here does I/O: the connection loop (:mod:`beanpole.ops.http_loop`) feeds the bytes
it has read to :func:`parse_request` and writes what :func:`encode` returns.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeAlias

__all__ = [
    "MAX_HEAD",
    "MAX_REQUEST_BODY",
    "BadRequest",
    "Incomplete",
    "Reply",
    "Request",
    "encode",
    "error_reply",
    "host_allowed",
    "parse_request",
]

#: The largest request head (request line and headers) read; a longer one is a 431.
MAX_HEAD: Final = 16 * 1024
#: The largest request body read (the dashboard's actions are a few bytes of JSON).
MAX_REQUEST_BODY: Final = 64 * 1024
_MAX_HEADERS: Final = 100
_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
JSON: Final = "application/json"


@dataclass(frozen=True)
class Request:
    """A request handed to an app: ``path`` without the query, still percent-encoded
    (so a tube name holding ``/`` stays one segment); ``headers`` keyed in lower case."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    client: str


@dataclass(frozen=True)
class Reply:
    """What an app or a route answers: status, content type, body and extra headers."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class BadRequest(Exception):
    """A request head the endpoint answers with ``status`` and closes the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Incomplete(Exception):
    """Not the whole request yet: read more."""


@dataclass(frozen=True)
class Head:
    """A parsed request head: what comes before the body, and how long the body is."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    length: int
    #: Bytes of the buffer the head took (the body starts there).
    size: int

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


Parsed: TypeAlias = tuple[Head, bytes]


def parse_request(buffer: bytes | bytearray) -> Parsed:
    """The first request in ``buffer``: its head and its body. Raises
    :class:`Incomplete` when more bytes are needed, :class:`BadRequest` when the
    request cannot be served."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise BadRequest(431, f"the request head is larger than {MAX_HEAD} bytes")
        first = buffer.find(b"\r\n", 0, MAX_HEAD)
        if first >= 0:  # what is not HTTP is answered now, not at the deadline
            _request_line(bytes(buffer[:first]).decode("latin-1"))
        raise Incomplete
    head = _parse_head(bytes(buffer[:end]), end + 4)
    if head.length > MAX_REQUEST_BODY:
        raise BadRequest(413, f"the request body is larger than {MAX_REQUEST_BODY} bytes")
    if len(buffer) < head.size + head.length:
        raise Incomplete
    return head, bytes(buffer[head.size : head.size + head.length])


def _parse_head(raw: bytes, size: int) -> Head:
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover (latin-1 decodes every byte)
        raise BadRequest(400, "the request head is not text") from None
    lines = text.split("\r\n")
    method, target, version = _request_line(lines[0])
    if len(lines) - 1 > _MAX_HEADERS:
        raise BadRequest(431, f"more than {_MAX_HEADERS} header fields")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or " " in name:
            raise BadRequest(400, "malformed header field")
        key = name.lower()
        value = value.strip(" \t")
        if key in headers:
            if key in ("host", "content-length"):
                raise BadRequest(400, f"more than one {name} header")
            headers[key] += ", " + value
        else:
            headers[key] = value
    if "transfer-encoding" in headers:
        raise BadRequest(411, "a request body needs a Content-Length (no chunked bodies)")
    raw_length = headers.get("content-length", "0")
    if not raw_length.isascii() or not raw_length.isdigit() or len(raw_length) > 18:
        raise BadRequest(400, f"Content-Length must be a number, got {raw_length[:40]!r}")
    return Head(method, target, version, headers, int(raw_length), size)


def _request_line(line: str) -> tuple[str, str, str]:
    parts = line.split(" ")
    if len(parts) != 3:
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        if version.startswith("HTTP/"):
            raise BadRequest(505, f"HTTP version {version[5:40]!r} is not served")
        raise BadRequest(400, "malformed request line")
    if method not in _METHODS:
        raise BadRequest(501, f"method {method[:20]!r} is not served")
    if not target.startswith("/"):
        raise BadRequest(400, "the request target must be a path")
    return method, target, version


def host_allowed(host_header: str | None, allowed: Collection[str], local_ip: str) -> bool:
    """Whether the ``Host`` header names this endpoint: ``localhost``, the address the
    connection came in on, or a name of ``allowed`` (any case, port ignored). A request
    without one (HTTP/1.0 tools) is let in; browsers always send it."""
    if host_header is None:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    host = host.rstrip(".")
    return host == "localhost" or host == local_ip.lower() or host in allowed


def error_reply(status: int, message: str) -> Reply:
    """``{"error": message}`` with ``status``: every error of the endpoint looks so."""
    body = json.dumps({"error": message}, separators=(",", ":")).encode()
    return Reply(status, JSON, body)


def encode(reply: Reply, *, head_only: bool, close: bool) -> bytes:
    """The bytes of ``reply`` on the wire (without the body for a HEAD request)."""
    reason = _REASONS.get(reply.status, "")
    lines = [
        f"HTTP/1.1 {reply.status} {reason}",
        f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
    ]
    lines += [f"{name}: {value}" for name, value in reply.headers.items()]
    if close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + reply.body
