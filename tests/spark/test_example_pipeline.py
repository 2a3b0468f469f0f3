"""examples/spark_pipeline.py, run small on the session of the Spark tests: parquet ->
jobs on two servers -> Python workers -> streaming results -> the logs as a table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "spark_pipeline.py"


def test_the_pipeline_example_runs_every_task_once(spark: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # its dataclass looks its module up there
    spec.loader.exec_module(example)
    summary = example.run(spark, tmp_path, tasks=300, workers=3)
    assert summary.enqueued == 300 and summary.worked == 300
    assert summary.results == summary.distinct_results == 300
    assert summary.wrong_results == 0 and summary.left_in_queues == 0
    # Every task was put, reserved and deleted, and so was every result.
    assert summary.records["job"] == 600
    assert summary.records["delete"] == 600
    assert summary.ok()
    assert summary.lines()[-1] == "pipeline OK"
