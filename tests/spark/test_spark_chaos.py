"""A short run of ``bench/spark_chaos.py`` (the full one runs 50 cycles): a server
restarted without a log, a driver SIGKILL, a clean stop and TTRs running out under a
slow sink, each once with a fixed seed, and the total-queue checker's verdict.

The harness starts its own servers and its own Spark driver process (this test's
session is not used); it is skipped like the other Spark tests where pyspark, pyarrow
or Java is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "spark_chaos.py"
FAULTS = ["b_restart", "driver_kill", "clean_stop", "ttr"]


def _skip_reason() -> str | None:
    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (pip install 'beanpole[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime found (pyspark needs one)"
    return None


pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


def test_chaos_cycles_lose_nothing_and_repeat_only_counted(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    args = [
        "--cycles", str(len(FAULTS)), "--seed", "20", "--faults", ",".join(FAULTS),
        "--jobs-per-cycle", "300", "--max-rows", "50", "--put-seconds", "3",
        "--dir", str(tmp_path / "run"), "--json", str(summary),
    ]  # fmt: skip
    run = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert summary.exists(), run.stdout + run.stderr
    s = json.loads(summary.read_text())
    # The run did what it was asked: every fault once, jobs put and read.
    assert s["cycles"] == dict.fromkeys(FAULTS, 1)
    assert s["puts"].get("ok", 0) >= 300 * len(FAULTS)
    assert s["delivered"] > 0
    assert s["failed_runs"] == [], run.stdout
    # The verdict.
    assert (s["lost"], s["unexpected"]) == (0, 0), run.stdout
    assert s["violations"] == [], run.stdout
    assert run.returncode == 0, run.stdout
