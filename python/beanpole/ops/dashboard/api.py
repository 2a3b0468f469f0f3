"""The dashboard's read-only JSON API: ``/api/servers``, ``/api/server``,
``/api/series``, ``/api/tubes``, ``/api/tubes/{name}`` and ``/api/jobs/{id}``
(documented in docs/http.md). Values keep the keys and types of
``beanpole stats --format json``; what the dashboard adds (rates, bodies) has keys of
its own.

Payloads are bounded: the tube list is filtered, sorted and cut into pages here, at
most :data:`MAX_PAGE` tubes at a time, and a body is cut at
:data:`~beanpole.ops.dashboard.sources.BODY_SHOWN` bytes.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from beanpole.client.snapshot import TUBE_FIELDS, TubeRow
from beanpole.ops.dashboard.ring import FIELDS, HISTORY, Sampler
from beanpole.ops.dashboard.sources import STATES, Peeked, Source, Stats

__all__ = [
    "HIDDEN_KEY",
    "MAX_PAGE",
    "RATE_KEY",
    "ApiError",
    "Watched",
    "body_view",
    "job_view",
    "tube_page",
    "tubes_page",
]

#: Most tubes in one page of ``/api/tubes``.
MAX_PAGE: Final = 500
DEFAULT_PAGE: Final = 50
#: The key the dashboard adds to each tube: puts per second over the last second.
RATE_KEY: Final = "puts-per-second"
SORT_KEYS: Final = (*TUBE_FIELDS, RATE_KEY)
_TOTAL: Final = TUBE_FIELDS.index("total-jobs")


class ApiError(Exception):
    """A request the API answers with ``status`` and a JSON ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Cached:
    at: float
    server: Stats
    tubes: list[TubeRow]


class Watched:
    """One server the dashboard shows: its :class:`Source`, its :class:`Sampler`, and
    the latest snapshot, shared by the requests that come within the source's
    ``max_age`` (0 for an embedded server: each request reads the store once)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.name = source.name
        self._cached: _Cached | None = None
        # Serialises fetching the snapshot, so many viewers cost one read a period.
        self._lock = threading.Lock()
        self.sampler = Sampler(source.name, self._sample)

    def _sample(self) -> tuple[Stats, dict[str, int]]:
        snap = self.snapshot(max_age=0.0)
        totals = {t[0]: int(t[_TOTAL]) for t in snap.tubes}
        return snap.server, totals

    def snapshot(self, max_age: float | None = None) -> _Cached:
        if max_age is None:
            max_age = self.source.max_age
        with self._lock:
            cached = self._cached
            if cached is not None and time.monotonic() - cached.at <= max_age:
                return cached
            server, tubes = self.source.snapshot()
            self._cached = cached = _Cached(time.monotonic(), server, tubes)
            return cached

    def close(self) -> None:
        self.sampler.close()


def server_view(watched: Watched, names: list[str], actions: bool) -> dict[str, Any]:
    """``/api/server``: the ``stats`` values, the rates and what the page needs."""
    stats = watched.source.server_stats()
    return {
        "server": watched.name,
        "servers": names,
        "actions": actions,
        "stats": stats,
        "rates": dict(watched.sampler.rates),
        "tubes": stats.get("current-tubes", 0),
    }


#: The longest ``wait`` of ``/api/series``, in seconds.
MAX_WAIT: Final = 5.0


def series_view(watched: Watched, since: float, wait: float = 0.0) -> dict[str, Any]:
    """``/api/series``: the samples after Unix time ``since``, one row per second;
    with ``wait``, the answer waits up to that many seconds for a first one."""
    samples = watched.sampler.ring.since(since, min(max(wait, 0.0), MAX_WAIT))
    return {
        "server": watched.name,
        "interval": watched.sampler.interval,
        "history": HISTORY,
        "fields": ["at", *FIELDS],
        "points": [[s.at, *(round(v, 3) for v in s.values)] for s in samples],
    }


def tubes_page(watched: Watched, query: Mapping[str, str]) -> dict[str, Any]:
    """``/api/tubes``: filter (``filter``, a part of the name, any case), sort
    (``sort``, any key, ``order`` asc or desc), page (``offset``, ``limit``)."""
    snap = watched.snapshot()
    rates = watched.sampler.tube_rates
    needle = query.get("filter", "").strip().lower()
    sort = query.get("sort", "name")
    if sort not in SORT_KEYS:
        raise ApiError(400, f"sort must be one of {', '.join(SORT_KEYS)}")
    order = query.get("order", "asc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "order must be asc or desc")
    offset = _query_int(query, "offset", 0, low=0)
    limit = _query_int(query, "limit", DEFAULT_PAGE, low=1, high=MAX_PAGE)
    matched = [t for t in snap.tubes if needle in t[0].lower()] if needle else list(snap.tubes)
    # By name first, then (a stable sort) by the column: rows with equal values keep
    # one order from poll to poll.
    matched.sort(key=lambda t: t[0])
    if sort == RATE_KEY:
        matched.sort(key=lambda t: rates.get(t[0], 0.0), reverse=order == "desc")
    elif sort != "name":
        column = TUBE_FIELDS.index(sort)
        matched.sort(key=lambda t: t[column], reverse=order == "desc")
    elif order == "desc":
        matched.reverse()
    page = matched[offset : offset + limit]
    return {
        "server": watched.name,
        "total": len(snap.tubes),
        "matched": len(matched),
        "offset": offset,
        "limit": limit,
        "sort": sort,
        "order": order,
        "tubes": [
            {**dict(zip(TUBE_FIELDS, t, strict=True)), RATE_KEY: round(rates.get(t[0], 0.0), 3)}
            for t in page
        ],
    }


def _query_int(
    query: Mapping[str, str], key: str, default: int, *, low: int, high: int | None = None
) -> int:
    raw = query.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise ApiError(400, f"{key} must be an integer, got {raw!r}") from None
    if value < low or (high is not None and value > high):
        top = "" if high is None else f" and {high}"
        raise ApiError(400, f"{key} must be between {low}{top}, got {value}")
    return value


def body_view(peeked: Peeked) -> dict[str, Any]:
    """A body as the page shows it: text when the shown bytes are UTF-8 without
    control characters (tabs and line ends allowed), hex otherwise; ``size`` is the
    whole body's, ``truncated`` says whether bytes were left out."""
    head = peeked.head
    truncated = len(head) < peeked.size
    text = _as_text(head, cut=truncated)
    return {
        "size": peeked.size,
        "shown": len(head),
        "truncated": truncated,
        "encoding": "hex" if text is None else "text",
        "data": head.hex() if text is None else text,
    }


def _as_text(data: bytes, *, cut: bool) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        # A cut may split the last character: up to 3 bytes of it may be left over.
        if not cut or err.start < len(data) - 3 or err.reason != "unexpected end of data":
            return None
        text = data[: err.start].decode("utf-8")
    if any((ord(c) < 32 and c not in "\t\r\n") or ord(c) == 127 for c in text):
        return None
    return text


#: The key that says why bodies are left out (absent when they are shown).
HIDDEN_KEY: Final = "bodies-hidden"


def job_view(source: Source, job_id: int, hidden: str | None = None) -> dict[str, Any]:
    """``/api/jobs/{id}``: ``stats-job`` and the body; with ``hidden`` (why), the body
    is None and not even read."""
    stats = source.job(job_id)
    if hidden is not None:
        return {"id": job_id, "stats": stats, "body": None, HIDDEN_KEY: hidden}
    return {"id": job_id, "stats": stats, "body": body_view(source.peek_job(job_id))}


def tube_page(watched: Watched, name: str, hidden: str | None = None) -> dict[str, Any]:
    """``/api/tubes/{name}``: ``stats-tube``, puts per second, and the next ready,
    delayed and buried job (stats and body), each None when there is none; with
    ``hidden`` (why), every body is None."""
    source = watched.source
    stats = source.tube(name)
    nexts: dict[str, Any] = {}
    for state in STATES:
        peeked = source.peek(name, state)
        if peeked is None:
            nexts[state] = None
            continue
        try:
            job_stats: Stats | None = source.job(peeked.id)
        except KeyError:  # gone between the peek and the stats
            job_stats = None
        body = None if hidden is not None else body_view(peeked)
        nexts[state] = {"id": peeked.id, "stats": job_stats, "body": body}
    page = {
        "server": watched.name,
        "tube": stats,
        RATE_KEY: round(watched.sampler.tube_rate(name), 3),
        "next": nexts,
    }
    if hidden is not None:
        page[HIDDEN_KEY] = hidden
    return page
