"""One local SparkSession for every Spark test (starting one costs seconds).

The tests here carry the ``spark`` marker (``pytestmark`` in each module); they are
skipped, with the reason, when pyspark or pyarrow is not installed or no Java runtime
is found. The test command (scripts/test.sh) installs both, so CI runs them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

MISSING = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]


def _skip_reason() -> str | None:
    if MISSING:
        return f"{' and '.join(MISSING)} not installed (pip install 'beanpole[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime found (pyspark needs one)"
    return None


@pytest.fixture
def pyspark_api() -> None:
    """For tests that call the sources' classes without a session: skipped, with the
    reason, like the others when pyspark or pyarrow is missing."""
    if MISSING:
        pytest.skip(f"{' and '.join(MISSING)} not installed (pip install 'beanpole[spark]')")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    # The driver binds loopback only, and workers run this interpreter (which has
    # beanpole and pyarrow), not whatever python3 is first on PATH.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import beanpole.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("beanpole-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    beanpole.spark.register(session)
    yield session
    session.stop()
