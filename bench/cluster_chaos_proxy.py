"""A fault-injecting TCP proxy for bench/cluster_chaos.py: one listening port on
loopback forwarding every connection to a target that may move (a restarted node
listens on a new port), with faults switched on and off from other threads.

Faults, each until ``heal()``:

- ``cut()``: every open connection is closed at once, and new ones are accepted and
  closed straight away (a partition that the peers notice);
- ``oneway(direction)``: bytes going ``"up"`` (to the target) or ``"down"`` (back to
  the client) are dropped from now on; the other direction still flows. The receiver
  sees a prefix of the stream (never a gap followed by more bytes), and the
  connections that lost bytes are closed when the fault heals;
- ``stall()``: nothing is forwarded in either direction; held bytes flow at the heal;
- ``latency(seconds)``: every chunk waits that long before it is forwarded.

A connection whose one end stops sending (a FIN) is half-closed on the other side too, as
a network passes a FIN: the other direction still flows; it is closed once both
directions have ended, or at once when either end fails (a reset). A proxy listens on a port of its
own (0: any free one) at ``host``, any address of the loopback range. The proxy runs an asyncio loop
on its own thread; the control methods block until the loop has applied them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CHUNK = 65536


@dataclass(eq=False)
class _Pair:
    """One proxied connection: the client's side and the target's side."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tainted: bool = False  # lost bytes to a one-way cut: closed at the heal
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)  # directions that saw their end

    def close(self) -> None:
        for w in (self.client, self.upstream):
            if w is not None:
                w.close()
        for t in self.tasks:
            t.cancel()


class Proxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = target
        self.host = host
        self.port = port  # 0: any free port, read back once started
        self.pairs: set[_Pair] = set()
        self.refusing = False
        self.dropping: set[str] = set()  # "up", "down"
        self.delay = 0.0
        self._loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # -- control, from any thread ---------------------------------------------------

    def start(self) -> Proxy:
        self._thread.start()
        self._call(self._start)
        return self

    def close(self) -> None:
        self._call(self._close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def listen(self, on: bool) -> None:
        """Take dials (``on``) or refuse them, the listening socket closed, as a
        machine whose node process is gone refuses them (not a cut: a cut link
        takes a dial and closes it)."""
        self._call(self._start if on else self._stop_listening)

    def retarget(self, target: tuple[str, int]) -> None:
        self._call(lambda: setattr(self, "target", target))

    def cut(self) -> None:
        def go() -> None:
            self.refusing = True
            for p in list(self.pairs):
                p.close()
            self.pairs.clear()

        self._call(go)

    def oneway(self, direction: str) -> None:
        assert direction in ("up", "down"), direction
        self._call(lambda: self.dropping.add(direction))

    def stall(self) -> None:
        self._call(lambda: self._flow().clear())

    def latency(self, seconds: float) -> None:
        self._call(lambda: setattr(self, "delay", seconds))

    def heal(self) -> None:
        def go() -> None:
            self.refusing = False
            self.dropping.clear()
            self.delay = 0.0
            self._flow().set()
            for p in [p for p in self.pairs if p.tainted]:
                p.close()
                self.pairs.discard(p)

        self._call(go)

    def _call(self, fn: Callable[[], Any]) -> None:
        async def run() -> None:
            result = fn()
            if asyncio.iscoroutine(result):
                await result

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    # -- the loop -------------------------------------------------------------------

    def _flow(self) -> asyncio.Event:
        if self._flowing is None:
            self._flowing = asyncio.Event()
            self._flowing.set()
        return self._flowing

    async def _start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _close(self) -> None:
        await self._stop_listening()
        for p in list(self.pairs):
            p.close()
        self.pairs.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        pair = _Pair(writer)
        self.pairs.add(pair)
        try:
            up_reader, pair.upstream = await asyncio.open_connection(*self.target)
        except OSError:
            pair.close()
            self.pairs.discard(pair)
            return
        if pair not in self.pairs:  # cut while connecting
            pair.close()
            return
        pair.tasks = [
            asyncio.create_task(self._pump(pair, reader, pair.upstream, "up")),
            asyncio.create_task(self._pump(pair, up_reader, writer, "down")),
        ]

    async def _pump(
        self, pair: _Pair, src: asyncio.StreamReader, dst: asyncio.StreamWriter, direction: str
    ) -> None:
        half_closed = False
        try:
            while True:
                data = await src.read(CHUNK)
                if not data:
                    break
                if self.delay:
                    await asyncio.sleep(self.delay)
                await self._flow().wait()
                if direction in self.dropping:
                    pair.tainted = True
                    continue
                dst.write(data)
                await dst.drain()
            # The sender's FIN: passed on, after the bytes before it.
            await self._flow().wait()
            if direction not in self.dropping and dst.can_write_eof():
                dst.write_eof()
                half_closed = True
                pair.ended.add(direction)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if not half_closed or len(pair.ended) == 2:
                with contextlib.suppress(Exception):
                    pair.close()
                self.pairs.discard(pair)
