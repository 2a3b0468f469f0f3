"""The HTTP endpoint's connection loop: one thread that accepts, reads request heads
and bodies, and writes replies for every connection, with a selector; the work of a
request (a scrape, a dashboard view) runs on the endpoint's worker threads
(:mod:`beanpole.ops.http`), which hand the reply back with :meth:`Loop.finish`.

Bounds, so that hostile clients cost neither threads nor memory:

* at most ``max_connections`` connections at once. A new one beyond that takes the
  place of another, closed and counted as evicted: first the oldest that looks slow
  on purpose (part of a request head sent, idle after a reply, nothing finished after
  :data:`GRACE`), else the oldest that has sent nothing yet (read once more first),
  else the oldest whose reply is being written. Only when every connection has a
  request in work is the new one closed at once, and counted as refused;
* a request's head (and, for ``tls:``, the handshake before it) and body must arrive
  within ``head_timeout`` seconds of the connection or of the previous reply, and a
  head is at most :data:`~beanpole.ops.http_wire.MAX_HEAD` bytes;
* a reply must be taken by the client within :data:`WRITE_TIMEOUT` seconds.

The loop thread never waits on a client: every socket is non-blocking.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from beanpole.ops.http_wire import (
    MAX_HEAD,
    MAX_REQUEST_BODY,
    BadRequest,
    Head,
    Incomplete,
    encode,
    error_reply,
    host_allowed,
    parse_request,
)

if TYPE_CHECKING:
    import ssl

__all__ = ["GRACE", "WRITE_TIMEOUT", "Conn", "Counters", "Loop"]

#: A new connection that has sent nothing is not evicted for this long.
GRACE: Final = 0.5
#: Seconds a client has to take a reply.
WRITE_TIMEOUT: Final = 10.0
#: Connections accepted per turn of the loop, so reads are not starved by a burst.
_ACCEPT_BATCH: Final = 16
_READ_SIZE: Final = 65536
#: Silent connections read before one of them is evicted (each read is one syscall).
_EVICT_TRIES: Final = 4

_LOG: Final = logging.getLogger("beanpole.http")
_HANDSHAKE, _READING, _WORKING, _WRITING = "handshake", "reading", "working", "writing"
_CLOSED: Final = "closed"


@dataclass
class Counters:
    """What the endpoint counts, for ``/metrics``: open connections now, and since the
    start the connections refused at the cap, evicted to make room, and timed out."""

    open: int = 0
    refused: int = 0
    evicted: int = 0
    timed_out: int = 0


class Conn:
    """One client connection, owned by the loop thread."""

    def __init__(self, sock: socket.socket, client: str, local_ip: str, now: float) -> None:
        self.sock = sock
        self.client = client
        self.local_ip = local_ip
        self.state = _READING
        self.since = now
        self.buf = bytearray()
        self.out = memoryview(b"")
        self.close_after = False
        self.served = 0
        self.events = 0

    def eviction_rank(self, now: float) -> int | None:
        """How readily this connection is closed to let a new one in: 0 when it looks
        slow on purpose (part of a head, idle after a reply, no head or reply done
        after :data:`GRACE`), 1 when it is new and has sent nothing yet, 2 when its
        reply is being written; None when its request is being worked on."""
        if self.state == _WORKING:
            return None
        young = now - self.since <= GRACE
        if self.state == _WRITING:
            return 2 if young else 0
        if self.buf or self.served or not young:
            return 0
        return 1


#: Called on the loop thread with a complete request; runs it elsewhere.
Dispatch = Callable[[Conn, Head, bytes], None]


class Loop:
    """Serves ``listener`` (listening, any blocking mode) until :meth:`stop`."""

    def __init__(
        self,
        listener: socket.socket,
        dispatch: Dispatch,
        *,
        max_connections: int,
        head_timeout: float,
        allowed_hosts: Collection[str],
        ssl_context: ssl.SSLContext | None = None,
        counters: Counters | None = None,
    ) -> None:
        self.counters = Counters() if counters is None else counters
        self._listener = listener
        self._dispatch = dispatch
        self._max = max_connections
        self._head_timeout = head_timeout
        self._allowed = frozenset(h.lower().rstrip(".") for h in allowed_hosts)
        self._ssl = ssl_context
        # Exceptions of a non-blocking TLS socket that only mean "try again".
        self._want: tuple[type[BaseException], ...] = (BlockingIOError, InterruptedError)
        if ssl_context is not None:
            import ssl

            self._want += (ssl.SSLWantReadError, ssl.SSLWantWriteError)
        self._conns: dict[int, Conn] = {}
        self._selector = selectors.DefaultSelector()
        # Replies from the worker threads: deque's append and popleft are atomic, so
        # the workers and the loop share it without a lock; the socket pair wakes the
        # loop up.
        self._done: deque[tuple[Conn, bytes, bool]] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stopping = False
        listener.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)

    # -- the other threads ----------------------------------------------------------

    def finish(self, conn: Conn, data: bytes, close: bool) -> None:
        """Hand a reply for ``conn`` to the loop (from a worker thread)."""
        self._done.append((conn, data, close))
        self._wake()

    def use_ssl_context(self, context: ssl.SSLContext) -> None:
        """Serve connections accepted from now on with ``context`` (from any thread:
        one attribute, read once per accept)."""
        self._ssl = context

    def stop(self) -> None:
        """Make :meth:`run` return (from any thread)."""
        self._stopping = True
        self._wake()

    def _wake(self) -> None:
        # Failing means already awake (the pair's buffer is full), or closed at the stop.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    # -- the loop thread ------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self._stopping:
                timeout = self._expire(time.monotonic())
                accept = False
                # Connections first, then new ones: a request that has come is read
                # before a burst of new connections can push its connection out.
                for key, events in self._selector.select(timeout):
                    if key.fileobj is self._listener:
                        accept = True
                    elif key.fileobj is self._wake_r:
                        self._drain_wake()
                    else:
                        conn = self._conns.get(key.fd)
                        if conn is not None and conn is key.data:  # not closed meanwhile
                            self._on_ready(conn, events)
                self._take_replies()
                if accept:
                    self._accept()
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, or the peer went away: try later
                return
            now = time.monotonic()
            if len(self._conns) >= self._max and not self._evict(now):
                self.counters.refused += 1
                sock.close()
                continue
            sock.setblocking(False)
            try:
                local_ip = str(sock.getsockname()[0])
            except OSError:
                sock.close()
                continue
            client = str(peer[0]) if isinstance(peer, tuple) else str(peer)
            context = self._ssl
            if context is not None:
                try:
                    sock = context.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                except OSError:
                    sock.close()
                    continue
            conn = Conn(sock, client, local_ip, now)
            if context is not None:
                conn.state = _HANDSHAKE
            self._conns[sock.fileno()] = conn
            self.counters.open = len(self._conns)
            self._watch(conn, selectors.EVENT_READ)
            self._on_ready(conn, selectors.EVENT_READ)  # its bytes may be there already

    def _evict(self, now: float) -> bool:
        """Close the connection most readily closed (lowest rank, then oldest), if
        any is not being worked on. One that has sent nothing yet is read first: its
        request may have come since the loop last looked, and is then served."""
        for _ in range(_EVICT_TRIES):
            ranked = [(rank, c.since, c) for c in self._conns.values()
                      if (rank := c.eviction_rank(now)) is not None]  # fmt: skip
            if not ranked:
                return False
            rank, _since, victim = min(ranked, key=lambda r: (r[0], r[1]))
            if rank == 1:
                state = victim.state
                self._on_ready(victim, selectors.EVENT_READ)
                if victim.state == _CLOSED:
                    return True  # it had gone: there is room
                if victim.state != state or victim.buf:
                    continue  # it spoke: look again
            self._close(victim)
            self.counters.evicted += 1
            return True
        return False  # every one read had just spoken: this once, the new one goes

    def _expire(self, now: float) -> float:
        """Close the connections past their deadline; seconds until the next one."""
        nearest = 1.0
        for conn in list(self._conns.values()):
            if conn.state == _WORKING:
                continue
            limit = WRITE_TIMEOUT if conn.state == _WRITING else self._head_timeout
            left = conn.since + limit - now
            if left > 0:
                nearest = min(nearest, left)
                continue
            if conn.state == _READING and not conn.buf and conn.served:
                self._close(conn)  # an idle keep-alive connection: not an error
                continue
            self.counters.timed_out += 1
            if conn.state == _READING and conn.buf:
                late = error_reply(408, f"the request did not arrive within {limit:g} s")
                self._send_once(conn, encode(late, head_only=False, close=True))
            self._close(conn)
        return max(nearest, 0.0)

    def _on_ready(self, conn: Conn, events: int) -> None:
        try:
            if conn.state == _HANDSHAKE:
                self._handshake(conn)
            elif conn.state == _READING:
                self._read(conn)
            elif conn.state == _WRITING:
                self._write(conn)
        except OSError:  # reset by the peer, a failed TLS handshake, ...
            self._close(conn)
        except Exception:  # a bug must cost one connection, never the loop
            _LOG.exception("HTTP endpoint: dropping a connection from %s", conn.client)
            self._close(conn)

    def _handshake(self, conn: Conn) -> None:
        import ssl

        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return
        conn.state = _READING
        self._watch(conn, selectors.EVENT_READ)
        self._read(conn)

    def _read(self, conn: Conn) -> None:
        while True:
            try:
                data = conn.sock.recv(_READ_SIZE)
            except self._want:
                break
            if not data:
                self._close(conn)
                return
            conn.buf += data
            if len(conn.buf) > MAX_HEAD + MAX_REQUEST_BODY:
                break  # enough to decide; a flood is cut by the parse
            if self._ssl is None or not conn.sock.pending():  # type: ignore[attr-defined]
                break
        self._parse(conn)

    def _parse(self, conn: Conn) -> None:
        try:
            head, body = parse_request(conn.buf)
        except Incomplete:
            return
        except BadRequest as err:
            self._reply(conn, encode(error_reply(err.status, err.message), head_only=False,
                                     close=True), close=True)
            return
        del conn.buf[: head.size + head.length]
        if not host_allowed(head.headers.get("host"), self._allowed, conn.local_ip):
            refused = error_reply(
                421, "this endpoint does not serve that Host (see --http-allowed-host)"
            )
            self._reply(conn, encode(refused, head_only=head.method == "HEAD",
                                     close=True), close=True)
            return
        conn.state = _WORKING
        conn.close_after = not head.keep_alive
        self._unwatch(conn)
        self._dispatch(conn, head, body)

    def _take_replies(self) -> None:
        while self._done:
            conn, data, close = self._done.popleft()
            if self._conns.get(conn.sock.fileno()) is conn and conn.state == _WORKING:
                self._reply(conn, data, close or conn.close_after)

    def _reply(self, conn: Conn, data: bytes, close: bool) -> None:
        conn.state = _WRITING
        conn.since = time.monotonic()
        conn.out = memoryview(data)
        conn.close_after = close
        self._watch(conn, selectors.EVENT_WRITE)
        self._on_ready(conn, selectors.EVENT_WRITE)

    def _write(self, conn: Conn) -> None:
        while conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except self._want:
                return
            conn.out = conn.out[sent:]
        if conn.close_after:
            self._close(conn)
            return
        conn.served += 1
        conn.state = _READING
        conn.since = time.monotonic()
        self._watch(conn, selectors.EVENT_READ)
        if conn.buf:
            self._parse(conn)  # a pipelined request

    def _send_once(self, conn: Conn, data: bytes) -> None:
        with contextlib.suppress(OSError, ValueError):
            conn.sock.send(data)

    def _watch(self, conn: Conn, events: int) -> None:
        if conn.events == events:
            return
        if conn.events:
            self._selector.modify(conn.sock, events, conn)
        else:
            self._selector.register(conn.sock, events, conn)
        conn.events = events

    def _unwatch(self, conn: Conn) -> None:
        if conn.events:
            self._selector.unregister(conn.sock)
            conn.events = 0

    def _close(self, conn: Conn) -> None:
        fd = conn.sock.fileno()
        if self._conns.get(fd) is conn:
            del self._conns[fd]
            self.counters.open = len(self._conns)
        if conn.events:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
            conn.events = 0
        conn.state = _CLOSED
        with contextlib.suppress(OSError):
            conn.sock.close()


def serve(loop: Loop, name: str) -> threading.Thread:
    """Run ``loop`` on a daemon thread named ``name``."""
    thread = threading.Thread(target=loop.run, name=name, daemon=True)
    thread.start()
    return thread
