"""Summaries of runs: medians, per-pair ratios, and how figures and verdicts are written."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from runner import Run
from scenarios import A, B


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def medians(runs: Sequence[Run], key: str, kind: str, metric: str) -> float | None:
    vals = [
        v
        for r in runs
        if r.scenario == key and r.kind == kind and r.ok
        for v in [r.value(metric)]
        if v is not None
    ]
    return median(vals)


def pair_ratio(runs: Sequence[Run], key: str, metric: str) -> float | None:
    """Median over pairs of beanpole / beanstalkd (pairs where both runs succeeded)."""
    by_pair: dict[int, dict[str, float]] = {}
    for r in runs:
        v = r.value(metric) if r.scenario == key and r.ok else None
        if v is not None:
            by_pair.setdefault(r.pair, {})[r.kind] = v
    ratios = [p[A] / p[B] for p in by_pair.values() if A in p and B in p and p[B] > 0]
    return median(ratios)


def fmt(v: float | None, digits: int = 0) -> str:
    if v is None:
        return "—"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def fmt_ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}x"


def verdict(ok: bool | None) -> str:
    return {True: "met", False: "**not met**", None: "no data"}[ok]
