"""The TLS options of beanpole's clients (``tls=True``, ``ca=``, ``cert=``, ``key=``,
``server_name=``, or ``tls=<ssl.SSLContext>``), checked once and handed to the native
client, or turned into an ``ssl.SSLContext`` for the pure-Python stats client.

The native client does TLS in Rust (rustls), so with ``tls=True`` it is given file
paths: a context's certificates and keys cannot be read back out of it. Without ``ca``
the system's CA bundle is trusted, the file Python's ``ssl`` module would use
(``ssl.get_default_verify_paths()``, which honours ``SSL_CERT_FILE``). An
``ssl.SSLContext`` is used as it is, by Python's ``ssl`` behind a relay thread
(:mod:`beanpole.client.relay`).

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import TypeAlias

from beanpole.client.errors import TLSConfigError

__all__ = ["ContextTLS", "PathArg", "TLSOptions", "client_tls", "system_ca", "tls_options"]

PathArg: TypeAlias = str | os.PathLike[str]


def system_ca() -> str:
    """The system's CA bundle; ``TLSConfigError`` if there is none."""
    cafile = ssl.get_default_verify_paths().cafile
    if cafile is None:
        raise TLSConfigError(
            "no system CA bundle found (set SSL_CERT_FILE, or pass the CA file as ca=)"
        )
    return cafile


@dataclass(frozen=True)
class TLSOptions:
    """Checked TLS settings: the CA file to trust, the client certificate and key for
    servers that ask for one, and the name the server's certificate must carry
    (default: the host connected to)."""

    ca: str
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None

    def native(self) -> dict[str, object]:
        """Keyword arguments for ``NativeClient``."""
        return {
            "tls": True,
            "ca": self.ca,
            "cert": self.cert,
            "key": self.key,
            "server_name": self.server_name,
        }

    def ssl_context(self) -> ssl.SSLContext:
        """The same settings as an ``ssl.SSLContext``; ``TLSConfigError`` if a file
        cannot be used."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca)
            if self.cert is not None:
                ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as err:
            raise TLSConfigError(f"TLS settings: {err}") from None
        return ctx


@dataclass(frozen=True)
class ContextTLS:
    """TLS from an ``ssl.SSLContext``: the context, and the name the server's
    certificate must carry (default: the host connected to)."""

    context: ssl.SSLContext
    server_name: str | None = None


def client_tls(
    tls: object,
    ca: PathArg | None = None,
    cert: PathArg | None = None,
    key: PathArg | None = None,
    server_name: str | None = None,
) -> TLSOptions | ContextTLS | None:
    """Check the TLS arguments of ``Client``, ``AsyncClient`` or ``ShardedClient``:
    None for a plain connection. ``tls`` is a bool or an ``ssl.SSLContext``."""
    if isinstance(tls, ssl.SSLContext):
        given = [n for n, v in (("ca", ca), ("cert", cert), ("key", key)) if v is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} cannot be given with an ssl.SSLContext: "
                "load the CA and certificate into the context instead"
            )
        return ContextTLS(tls, server_name)
    return tls_options(tls, ca, cert, key, server_name)


def tls_options(
    tls: object,
    ca: PathArg | None = None,
    cert: PathArg | None = None,
    key: PathArg | None = None,
    server_name: str | None = None,
) -> TLSOptions | None:
    """Check file-based TLS arguments (``tls`` a bool): None for a plain connection."""
    if not isinstance(tls, bool):
        raise TypeError(f"tls must be True, False or an ssl.SSLContext, not {type(tls).__name__}")
    given = [n for n, v in (("ca", ca), ("cert", cert), ("key", key)) if v is not None]
    if server_name is not None:
        given.append("server_name")
    if not tls:
        if given:
            raise ValueError(f"{', '.join(given)} given without tls=True")
        return None
    if (cert is None) != (key is None):
        raise ValueError("cert= and key= go together: give both or neither")
    return TLSOptions(
        ca=os.fspath(ca) if ca is not None else system_ca(),
        cert=os.fspath(cert) if cert is not None else None,
        key=os.fspath(key) if key is not None else None,
        server_name=server_name,
    )
