"""The dashboard's history: once a second, a sample of the server's rates and jobs by
state, kept for the last 15 minutes in a ring; and the tubes' puts per second.

A :class:`Sampler` is one daemon thread per watched server. It exists only when the
dashboard is served (``--http``), so a server without it pays nothing. Each tick reads
one snapshot (``stats`` and every tube's ``stats-tube``): from an embedded server under
one acquisition of the store lock, from a remote one in one pipelined exchange.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from beanpole.client.snapshot import StatValue

__all__ = ["FIELDS", "HISTORY", "Ring", "Sample", "Sampler", "SnapshotFn"]

#: Seconds of history kept.
HISTORY: Final = 15 * 60
#: What each sample holds after its time, in order (rates per second, then jobs).
FIELDS: Final = (
    "puts",
    "reserves",
    "deletes",
    "urgent",
    "ready",
    "reserved",
    "delayed",
    "buried",
)
#: Counters behind the rates: a rate is the sum of its keys' increase per second.
_RATE_KEYS: Final = (
    ("puts", ("cmd-put",)),
    ("reserves", ("cmd-reserve", "cmd-reserve-with-timeout")),
    ("deletes", ("cmd-delete",)),
)
_STATE_KEYS: Final = tuple(
    (state, f"current-jobs-{state}")
    for state in ("urgent", "ready", "reserved", "delayed", "buried")
)

#: ``stats`` and each tube's ``total-jobs`` by name; raises when the server is away.
SnapshotFn = Callable[[], tuple[Mapping[str, StatValue], Mapping[str, int]]]

_LOG: Final = logging.getLogger("beanpole").getChild("dashboard")


@dataclass(frozen=True)
class Sample:
    """One second of history: Unix time, then :data:`FIELDS`."""

    at: float
    values: tuple[float, ...]


def _num(stats: Mapping[str, StatValue], key: str) -> float:
    value = stats.get(key, 0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class Ring:
    """The last :data:`HISTORY` samples. A condition guards it: the sampler appends
    and wakes the requests waiting for a newer sample; request threads copy; each
    holds it only for a deque operation."""

    def __init__(self, size: int = HISTORY) -> None:
        self._samples: deque[Sample] = deque(maxlen=size)
        self._changed = threading.Condition()

    def append(self, sample: Sample) -> None:
        with self._changed:
            self._samples.append(sample)
            self._changed.notify_all()

    def since(self, at: float, wait: float = 0.0) -> list[Sample]:
        """The samples taken after Unix time ``at``, oldest first; with ``wait``, up
        to that many seconds for one if there is none yet."""
        with self._changed:
            self._changed.wait_for(
                lambda: bool(self._samples) and self._samples[-1].at > at, timeout=wait
            )
            samples = list(self._samples)
        if not samples or samples[0].at > at:
            return samples
        return [s for s in samples if s.at > at]


class Sampler:
    """Samples a server once a second into a :class:`Ring` (rates from counter
    deltas) and keeps each tube's puts per second; stopped by :meth:`close`."""

    def __init__(self, name: str, snapshot: SnapshotFn, interval: float = 1.0) -> None:
        self.name = name
        self.ring = Ring()
        self.interval = interval
        self._snapshot = snapshot
        self._prev: tuple[float, Mapping[str, StatValue], Mapping[str, int]] | None = None
        # Replaced whole by the sampler, read by request threads: a plain attribute
        # swap needs no lock.
        self._tube_rates: Mapping[str, float] = {}
        self._rates: Mapping[str, float] = {name: 0.0 for name, _k in _RATE_KEYS}
        self._failing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"beanpole-dashboard-{name}", daemon=True
        )
        self._thread.start()

    def tube_rate(self, tube: str) -> float:
        """The tube's puts per second over the last second (0.0 if not known)."""
        return self._tube_rates.get(tube, 0.0)

    @property
    def tube_rates(self) -> Mapping[str, float]:
        return self._tube_rates

    @property
    def rates(self) -> Mapping[str, float]:
        """Puts, reserves and deletes per second over the last second."""
        return self._rates

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow server): start afresh
                next_at, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def tick(self) -> None:
        """Take one sample (the thread does this once a second)."""
        try:
            stats, totals = self._snapshot()
        except Exception as err:  # the server is away; the gap shows in the charts
            if not self._failing and not self._stop.is_set():
                _LOG.warning("dashboard: cannot sample %s: %s", self.name, err)
            self._failing = True
            self._prev = None
            return
        if self._failing:
            _LOG.info("dashboard: sampling %s again", self.name)
        self._failing = False
        now = round(time.time(), 3)  # as the API shows it, so ``since`` matches
        prev = self._prev
        self._prev = (now, stats, totals)
        if prev is None:
            return
        then, old, old_totals = prev
        span = max(now - then, 1e-3)
        rates = {
            name: max(sum(_num(stats, k) - _num(old, k) for k in keys), 0.0) / span
            for name, keys in _RATE_KEYS
        }
        self._rates = rates
        self._tube_rates = {
            tube: max(total - old_totals.get(tube, total), 0) / span
            for tube, total in totals.items()
        }
        values = tuple(rates[name] for name, _k in _RATE_KEYS) + tuple(
            _num(stats, key) for _s, key in _STATE_KEYS
        )
        self.ring.append(Sample(now, values))
