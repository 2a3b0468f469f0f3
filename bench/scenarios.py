"""What the main suite measures: the servers compared, the scenarios and their targets."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("beanpole", "beanstalkd")
A, B = KINDS
BIG_JOB = "65536"  # max job size both servers get for the 64 KiB scenario


@dataclass(frozen=True)
class Target:
    """A target from issue 4: ``ratio(metric) op value`` (ratio = beanpole / beanstalkd)."""

    metric: str
    op: str  # ">=" or "<="
    value: float

    def met(self, ratio: float | None) -> bool | None:
        if ratio is None:
            return None
        return ratio >= self.value if self.op == ">=" else ratio <= self.value

    def text(self) -> str:
        return f"{LABELS[self.metric]} {'≥' if self.op == '>=' else '≤'} {self.value:g}x"


LABELS = {
    "ops_per_s": "ops/s",
    "p50_us": "p50",
    "p99_us": "p99",
    "server_cpu_us_per_op": "server CPU/op",
    "bytes_per_job": "bytes per job",
}


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    args: tuple[str, ...]  # bench arguments (duration or counts are added per mode)
    full: tuple[str, ...]  # extra arguments of a full run
    quick: tuple[str, ...]  # extra arguments of a --quick run
    unit: str = "jobs/s"
    server_args: tuple[str, ...] = ()  # flags for both servers (same meaning in both)
    targets: tuple[Target, ...] = ()


FULL_SECONDS = "5"
QUICK_SECONDS = "1"
RT = ("--producers", "10", "--consumers", "10")

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "rt16",
        "rt, 10 producers + 10 consumers, pipeline 16",
        ("rt", *RT, "--pipeline", "16"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        targets=(Target("server_cpu_us_per_op", "<=", 0.5), Target("ops_per_s", ">=", 1.5)),
    ),
    Scenario(
        "rt1",
        "rt, 10 + 10, pipeline 1",
        ("rt", *RT, "--pipeline", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        targets=(Target("ops_per_s", ">=", 1.3),),
    ),
    Scenario(
        "put1",
        "put, 1 connection, pipeline 1",
        ("put", "--connections", "1", "--pipeline", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        unit="puts/s",
        targets=(Target("p50_us", "<=", 1.0), Target("p99_us", "<=", 1.0)),
    ),
    Scenario(
        "rd100",
        "reserve-delete, 100 connections, pipeline 1",
        ("reserve-delete", "--connections", "100", "--pipeline", "1"),
        ("--jobs", "100000"),
        ("--jobs", "20000"),
        targets=(Target("ops_per_s", ">=", 1.3),),
    ),
    Scenario(
        "tubes1000",
        "many-tubes, 1000 tubes (10 + 10, pipeline 1)",
        ("many-tubes", *RT, "--pipeline", "1", "--tubes", "1000"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        targets=(Target("ops_per_s", ">=", 3.0),),
    ),
    Scenario(
        "tubes1",
        "many-tubes, 1 tube (the same load, for the drop)",
        ("many-tubes", *RT, "--pipeline", "1", "--tubes", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
    ),
    Scenario(
        "big",
        "big (64 KiB), 10 connections (5 + 5)",
        ("big", "--connections", "10", "--pipeline", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        server_args=("-z", BIG_JOB),
        targets=(Target("ops_per_s", ">=", 1.5),),
    ),
    Scenario(
        "storm",
        "storm, 50 at once",
        ("storm", "--connections", "50"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        unit="connections/s",
        targets=(Target("ops_per_s", ">=", 1.5),),
    ),
    Scenario(
        "delayed",
        "delayed 1 s, 2 + 2, 1000 puts/s (latency = lateness)",
        ("delayed", "--producers", "2", "--consumers", "2", "--delay", "1", "--rate", "1000"),
        ("--jobs", "5000"),
        ("--jobs", "1000"),
    ),
)
MEMORY_TARGET = Target("bytes_per_job", "<=", 0.5)
MEMORY_JOBS = {"full": 1_000_000, "quick": 200_000}
IDLE_CONNECTIONS = {"full": 10_000, "quick": 2_000}
ALL_KEYS = [s.key for s in SCENARIOS] + ["memory"]
