"""bench/spark_bench.py end to end with tiny counts, so that it cannot rot. Nothing
here asserts a timing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

BENCH = Path(__file__).resolve().parent.parent.parent / "bench" / "spark_bench.py"


def test_spark_bench_smoke(spark: Any, capsys: Any) -> None:
    spec = importlib.util.spec_from_file_location("spark_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run(spark, jobs=3000, runs=1, body_size=100, only=sorted(bench.FIGURES))
    figure = result["binlog"]
    assert figure["jobs"] == 3000
    for mode in ("jobs", "records"):
        assert len(figure["modes"][mode]["warm_s"]) == 1
        assert figure["modes"][mode]["rows_per_s"] > 0
    assert figure["floor"]["partitions"] >= 1 and figure["floor"]["rows_per_s"] > 0
    writer = result["writer"]
    assert set(writer["writers"]) == {
        "beanpole",
        "greenstalk",
        "socket loop",
        "spark floor",
        "beanpole (per-row strings)",
        "spark floor (per-row strings)",
    }
    assert set(writer["of_floor"]) == {"constant binary", "per-row strings"}
    assert all(w["rows_per_s"] > 0 for w in writer["writers"].values())
    # Where the time goes: CPU per part of the process tree, and the JVM always works.
    assert all(set(w["cpu_s"]) == {"driver", "jvm", "workers"} for w in writer["writers"].values())
    assert writer["writers"]["beanpole"]["cpu_s"]["jvm"] > 0
    stream = result["stream"]
    assert stream["jobs"] == 3000 and len(stream["warm_s"]) == 1
    assert stream["jobs_per_s"] > 0
    assert set(stream["cpu_s"]) == {"driver", "jvm", "workers"}
    assert result["touch"]["jobs"] == 3000 and result["touch"]["median_s"] > 0
    bench.report(result)
    out = capsys.readouterr().out
    assert "log reader, 3,000 jobs" in out
    assert "streaming reader, 3,000 jobs" in out
    assert "writer, 3,000 rows" in out
    assert "floor" in out
    assert "beanpole with per-row strings bodies" in out
    assert "CPU seconds per run" in out
    assert "touch of 3,000 held jobs" in out
