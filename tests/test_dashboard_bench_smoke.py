"""bench/dashboard_bench.py end to end with tiny counts, so that it cannot rot. Nothing
is timed here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dashboard_bench_runs_small() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/dashboard_bench.py"), "--tubes", "30", "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "tubes: 30, rounds: 2" in proc.stdout
    assert "/api/tubes, a page of 50 sorted by ready" in proc.stdout
