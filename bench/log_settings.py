"""The log suite's settings, targets and run metadata, and the put arguments of its
runs: what bench/log_bench.py (which runs the suite) and bench/log_report.py (which
writes its section of bench/README.md) both need.

Imports nothing from the other bench modules, so the two import it, not each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

CONNECTIONS = (1, 10, 100)
BODY = "100"
FILL = ("--connections", "4", "--pipeline", "64", "--body-size", BODY)
FILL_RUNS = 3  # load generator runs at most per fill (it stops at its first error)
STATS_TIMEOUT = 600.0  # seconds for a restarted server's first reply (replay included)


@dataclass(frozen=True)
class Load:
    """A put load for the ``f50`` comparison (log with -f 50 against no log)."""

    key: str
    title: str
    args: tuple[str, ...]
    jobs: int | None = None  # a job count (at most the restart's) instead of the duration

    def bench_args(self, s: Settings) -> tuple[str, ...]:
        return (*self.args, "--jobs", str(min(self.jobs, s.jobs))) if self.jobs else self.args


F50_LOADS = (
    Load("c10", "10 connections, pipeline 1", ("--connections", "10", "--pipeline", "1")),
    # Counted, not timed: at 200,000-450,000 puts/s a timed run would pile up millions of
    # jobs, and beanpole refuses a few pipelined puts at about 617,000 live jobs (see the
    # README's problems), which would end the run.
    Load(
        "c4p64",
        "4 connections, pipeline 64",
        ("--connections", "4", "--pipeline", "64"),
        jobs=500_000,
    ),
)
# Targets of issue 3: f0 ratios beanpole / beanstalkd; f50 beanpole's own log / no log;
# restart time beanpole / beanstalkd.
F0_TARGETS = {10: 10.0, 100: 30.0}
F50_TARGET = 0.85
RESTART_TARGET = 1 / 3


@dataclass(frozen=True)
class Settings:
    mode: str
    pairs: int
    duration: float
    jobs: int  # ready jobs for the restart
    connections: tuple[int, ...]
    tmp: Path


def put_args(load: Sequence[str], s: Settings) -> list[str]:
    """The load generator's arguments for a put run of ``load``."""
    timed = () if "--jobs" in load else ("--duration", f"{s.duration:g}")
    return ["put", *load, "--body-size", BODY, *timed]


@dataclass
class Meta:
    """About a whole run of the suite."""

    when: str
    commit: str = "?"  # git describe of the tree the runs were made with
    took: float = 0.0
    # Median fsync latency (ms) of the log filesystem before and after the runs.
    fsync_ms: list[float] = field(default_factory=list)
