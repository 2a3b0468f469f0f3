"""TLS from an ``ssl.SSLContext`` for the native client, through a relay thread.

The native client does TLS in Rust from certificate files and cannot use a Python
context. So for ``tls=<ssl.SSLContext>`` this module makes the TCP connection and the
handshake with Python's ``ssl`` (the context decides everything: CAs, verification,
client certificate, hostname check), then gives the native client one end of a
``socket.socketpair()`` to speak plain beanstalkd over. A daemon thread per connection
("beanpole-tls-relay") copies bytes between the other end and the TLS socket.

The relay ends, closing both sides, as soon as either side is gone: the client closing
(or being interrupted) ends it at once; the server closing, or failing the session with
an alert, lets it deliver what the server had sent and then close the client's end, so
a waiting call gets ``ConnectionLostError`` rather than waiting for ever.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
from typing import TYPE_CHECKING

from beanpole.client.errors import ConnectFailedError, TLSError

if TYPE_CHECKING:
    from beanpole._core import NativeClient
    from beanpole.client.tls import ContextTLS

__all__ = ["HANDSHAKE_TIMEOUT", "RELAY_THREAD_NAME", "Relay", "open_relayed", "split_host_port"]

#: The name of every relay thread.
RELAY_THREAD_NAME = "beanpole-tls-relay"
#: Seconds the handshake may take when the client has no timeout (the native client's
#: limit too).
HANDSHAKE_TIMEOUT = 10.0
#: Bytes asked for per read.
CHUNK = 256 * 1024
#: Bytes held for one direction before the relay stops reading its source, so a side
#: that does not read cannot make the relay buffer without bound.
HIGH_WATER = 1024 * 1024
#: Seconds ``Relay.close`` waits for the thread to end (it ends at once: this only
#: bounds a thread stuck in a slow TLS write).
JOIN_WAIT = 5.0


def split_host_port(address: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` as (host, port); ``ValueError`` otherwise."""
    if address.startswith("unix:") or address.startswith("/"):
        raise ValueError(f"TLS needs a host:port address, not {address}")
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"address {address!r} is not host:port or unix:/path")
    return host, int(port)


def _handshake_error(address: str, err: OSError, limit: float) -> TLSError:
    if isinstance(err, ssl.SSLCertVerificationError):
        problem = err.verify_message or str(err)
    elif isinstance(err, ssl.SSLEOFError | ConnectionError):
        problem = "the server closed the connection during the handshake"
    elif isinstance(err, ssl.SSLError):
        problem = err.reason or str(err)
        if problem == "WRONG_VERSION_NUMBER":
            problem += "; the server does not speak TLS there (a plain listener?)"
    elif isinstance(err, TimeoutError):
        problem = (
            f"no handshake answer within {limit:.1f} s; does the server listen with TLS there?"
        )
    else:
        problem = str(err)
    return TLSError(f"TLS with {address} failed: {problem}")


def _connect(address: str, tls: ContextTLS, limit: float) -> ssl.SSLSocket:
    """The TCP connection and the whole handshake, within ``limit`` seconds each."""
    host, port = split_host_port(address)
    try:
        raw = socket.create_connection((host, port), timeout=limit)
    except OSError as err:
        raise ConnectFailedError(f"cannot connect to {address}: {err}") from None
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The socket's timeout bounds the handshake as a whole (one deadline).
        return tls.context.wrap_socket(raw, server_hostname=tls.server_name or host)
    except OSError as err:
        raw.close()
        raise _handshake_error(address, err, limit) from None
    except BaseException:
        raw.close()
        raise


def open_relayed(
    address: str, tls: ContextTLS, timeout: float | None
) -> tuple[NativeClient, Relay]:
    """Connect to ``address`` ("host:port") with the context of ``tls``; the native
    client speaking through a relay, and the relay (close it after the client).
    ``ConnectFailedError`` if nothing answers, ``TLSError`` if the handshake fails."""
    from beanpole._core import NativeClient

    secure = _connect(address, tls, timeout if timeout is not None else HANDSHAKE_TIMEOUT)
    ours, theirs = socket.socketpair()
    try:
        # The native client keeps a duplicate of the descriptor.
        native = NativeClient.from_fd(ours.fileno(), address, timeout)
    except BaseException:
        theirs.close()
        secure.close()
        raise
    finally:
        ours.close()
    return native, Relay(secure, theirs)


def _want(sel: selectors.BaseSelector, sock: socket.socket, events: int) -> None:
    """Watch ``sock`` for exactly ``events`` (none: not at all)."""
    try:
        key = sel.get_key(sock)
    except KeyError:
        if events:
            sel.register(sock, events)
        return
    if not events:
        sel.unregister(sock)
    elif key.events != events:
        sel.modify(sock, events)


class Relay:
    """Copies bytes between ``local`` (the other end of the native client's socket
    pair) and ``secure`` (the TLS connection to the server) on a daemon thread."""

    def __init__(self, secure: ssl.SSLSocket, local: socket.socket) -> None:
        self._secure = secure
        self._local = local
        # Guards closing `local` against `close()` shutting it down from another
        # thread at the same moment (a closed descriptor's number may be reused).
        self._lock = threading.Lock()
        secure.setblocking(False)
        local.setblocking(False)
        self._thread = threading.Thread(target=self._run, name=RELAY_THREAD_NAME, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop relaying (the client's end sees the connection closed) and wait for
        the thread to end."""
        with self._lock:
            if self._local.fileno() >= 0:
                with contextlib.suppress(OSError):
                    self._local.shutdown(socket.SHUT_RDWR)
        if threading.current_thread() is not self._thread:
            self._thread.join(JOIN_WAIT)

    def _run(self) -> None:
        secure, local = self._secure, self._local
        up = bytearray()  # from the client, not yet sent to the server
        down = bytearray()  # from the server, not yet handed to the client
        server_open = True  # the TLS session still works
        # Set when a TLS write or read needs the socket the other way round (a
        # session ticket or key update in the middle of a write, say).
        send_needs_read = recv_needs_write = False
        sel = selectors.DefaultSelector()
        try:
            while True:
                # The client: its commands, or its closing, which ends the relay
                # (nothing is left to wait for replies).
                if len(up) < HIGH_WATER:
                    try:
                        data = local.recv(CHUNK)
                    except BlockingIOError:
                        pass
                    except OSError:
                        return
                    else:
                        if not data:
                            return
                        up += data
                if up and server_open:
                    send_needs_read = False
                    try:
                        del up[: secure.send(up)]
                    except (ssl.SSLWantWriteError, BlockingIOError):
                        pass
                    except ssl.SSLWantReadError:
                        send_needs_read = True
                    except OSError:
                        server_open = False
                # The server: read while there is room, including what the session
                # has decrypted already (pending), which select would not report.
                recv_needs_write = False
                while server_open and len(down) < HIGH_WATER:
                    try:
                        data = secure.recv(CHUNK)
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLWantWriteError:
                        recv_needs_write = True
                        break
                    except OSError:
                        # An alert (a refused client certificate), a reset, a bad record.
                        server_open = False
                        break
                    if not data:
                        server_open = False
                        break
                    down += data
                if down:
                    try:
                        del down[: local.send(down)]
                    except BlockingIOError:
                        pass
                    except OSError:
                        return
                if not server_open:
                    up.clear()
                    if not down:
                        # Every byte the server sent is with the client: closing our
                        # end makes its next read see the connection closed.
                        return
                if server_open and len(down) < HIGH_WATER and secure.pending():
                    continue
                local_events = selectors.EVENT_READ if len(up) < HIGH_WATER else 0
                if down:
                    local_events |= selectors.EVENT_WRITE
                secure_events = 0
                if server_open:
                    if len(down) < HIGH_WATER or send_needs_read:
                        secure_events |= selectors.EVENT_READ
                    if (up and not send_needs_read) or recv_needs_write:
                        secure_events |= selectors.EVENT_WRITE
                _want(sel, local, local_events)
                _want(sel, secure, secure_events)
                if not local_events and not secure_events:
                    return
                sel.select()
        finally:
            sel.close()
            if server_open:
                # Say goodbye (close_notify) if the session still works; the answer
                # is not waited for.
                with contextlib.suppress(OSError, ValueError):
                    secure.unwrap()
            secure.close()
            with self._lock:
                local.close()
