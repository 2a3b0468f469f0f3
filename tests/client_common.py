"""Test data and helpers shared by the third-party client tests (greenstalk, pystalk).

Each client's tests add their own bodies to these lists and keep their own client fixtures.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

from servers import Running

COMMON_UNICODE_BODIES = [
    "",
    "plain ascii",
    "naïve café",
    "日本語のテキスト",
    "emoji 🐍🚀 and a flag 🇳🇱",
    "nul\x00inside and zero\u200bwidth",
    "line\r\nbreaks\r\nin the middle\r\n",
    "RTL עברית and combining e\u0301",
]

COMMON_BINARY_BODIES = [
    b"",
    bytes(range(256)),
    b"\r\n" * 50,
    b"\x00" * 1000,
    b"\xff\xfe\xfd not utf-8 \x80\x81",
    b"RESERVED 1 5\r\nhello\r\n",
]


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll server state (not a fixed sleep) until ``predicate()`` is true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def drain(running: Running) -> None:
    """Put the server into drain mode (beanstalkd: SIGUSR1)."""
    if running.pid is not None:
        os.kill(running.pid, signal.SIGUSR1)
    else:
        running.server.drain()  # type: ignore[attr-defined]


@contextlib.contextmanager
def nudging(running: Running, poke: Callable[[], object]) -> Iterator[None]:
    """Keep the reserving connection busy while the caller blocks, on beanstalkd only.

    beanstalkd 1.12 expires reserved jobs from a per-connection timer and checks
    ``deadline_at >= nanoseconds()`` on a microsecond clock (gettimeofday). When the timer
    fires in the very microsecond of the deadline, the job is neither expired nor the timer
    re-armed: the job stays reserved, time-left goes negative, until that connection sends
    another command (about one run in five here). Any command re-arms it, so ``poke`` (one
    cheap command on the reserving connection) is called every 50 ms. beanpole has to
    expire jobs unaided.
    """
    if running.kind != "beanstalkd":
        yield
        return
    stop = threading.Event()

    def keep_poking() -> None:
        while not stop.wait(0.05):
            poke()

    thread = threading.Thread(target=keep_poking)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
