"""Parsing the addresses the operator's commands take.

* a server to talk to (``-H/--host``, ``--target``): ``HOST:PORT``, ``[V6]:PORT``, ``HOST``
  (port 11300), or ``unix:PATH``;
* an HTTP address to serve on (``--http``): ``PORT`` (loopback), ``HOST:PORT`` or
  ``[V6]:PORT``; port 0 picks a free port.

Lowest layer: imports no other beanpole module; every layer may import it.
"""

from __future__ import annotations

import ipaddress
from typing import Final, TypeAlias

__all__ = ["DEFAULT_PORT", "Address", "describe", "is_tls_http", "parse_http", "parse_server"]

#: beanstalkd's port, for a server address given without one.
DEFAULT_PORT: Final = 11300
#: ``(host, port)`` for TCP, or the socket path for a unix socket.
Address: TypeAlias = tuple[str, int] | str


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise ValueError(f"port must be a number from 0 to 65535 in {whole!r}")
    return int(text)


def _split(value: str) -> tuple[str, str | None]:
    """``HOST`` and ``PORT`` (None when absent) of ``HOST[:PORT]`` or ``[V6][:PORT]``."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise ValueError(f"missing ']' in {value!r}")
        host, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"expected ':PORT' after ']' in {value!r}")
        return host, (rest[1:] if rest else None)
    if value.count(":") > 1:  # a bare IPv6 address
        return value, None
    host, sep, port = value.partition(":")
    return host, (port if sep else None)


def parse_server(value: str) -> Address:
    """A server address: ``HOST[:PORT]``, ``[V6][:PORT]`` or ``unix:PATH``."""
    value = value.strip()
    if value.startswith("unix:"):
        path = value.removeprefix("unix:")
        if not path:
            raise ValueError("unix: needs a socket path, e.g. unix:/run/beanpole.sock")
        return path
    if not value:
        raise ValueError("empty address")
    host, port = _split(value)
    if not host:
        raise ValueError(f"missing host in {value!r}")
    return host, DEFAULT_PORT if port is None else _port(port, value)


def parse_http(value: str) -> tuple[str, int]:
    """An HTTP listening address: ``PORT`` (on 127.0.0.1), ``HOST:PORT`` or ``[V6]:PORT``;
    ``tls:`` before it (HTTPS, see :func:`is_tls_http`) is skipped here."""
    value = value.strip().removeprefix("tls:")
    if value.isdigit():
        return "127.0.0.1", _port(value, value)
    host, port = _split(value)
    if port is None:
        raise ValueError(f"expected [HOST:]PORT, got {value!r}")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ValueError(f"host must be an IP address or localhost in {value!r}") from None
    return host, _port(port, value)


def is_tls_http(value: str) -> bool:
    """Whether the HTTP address ``value`` is served with TLS (``tls:HOST:PORT``)."""
    return value.strip().startswith("tls:")


def describe(address: Address) -> str:
    """``host:port``, ``[v6]:port`` or ``unix:path``."""
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
