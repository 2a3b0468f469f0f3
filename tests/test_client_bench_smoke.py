"""``bench/client_bench.py --smoke`` end to end (a few seconds): it starts its own server,
runs every figure for both clients, and prints a summary and one JSON line with every
median and ratio. Nothing here asserts a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_client_bench_smoke() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "client_bench.py"), "--smoke", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("beanpole.Client vs greenstalk")
    result = json.loads(lines[-1])
    assert set(result["ratios"]) == {
        "put_many_vs_gs_put",
        "drain_many_vs_gs_drain",
        "put_p50_vs_gs",
        "put_p99_vs_gs",
    }
    medians = result["medians"]
    assert all(v > 0 for v in medians.values()), medians
    assert medians["put_p50_us"] <= medians["put_p99_us"]
    assert len(result["rounds"]) == 1
