"""bench/metrics_bench.py end to end with tiny counts, so that it cannot rot. Nothing
here asserts a timing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_metrics_bench_runs_small() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/metrics_bench.py"), "--tubes", "30", "--scrapes", "2",
         "--max-tubes", "10"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^tubes: 31, metrics body: \d+ bytes$", out, re.MULTILINE), out
    for label in (
        "scrape /metrics",
        "scrape CPU time",
        "store lock held",
        "Server.snapshot()",
        "fetch, beanpole",
    ):
        assert re.search(rf"{re.escape(label)}.*median [\d.]+ ms, max [\d.]+ ms", out), out
