"""A short run of ``bench/crash_cycles.py`` (the full one runs 100 cycles): SIGKILL
under mixed load at ``-f 0`` loses nothing acknowledged, nor does SIGTERM; the check
itself sees a lost change; a small tmpfs that fills up refuses puts and recovers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import crash_cycles
from crash_cycles import Model, Report, View

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)
SEED = int(os.environ.get("BEANPOLE_CRASH_SEED", "7"))


@pytest.mark.parametrize("stop", ["kill", "term"])
def test_a_few_cycles_lose_nothing(stop: str) -> None:
    report = crash_cycles.run_cycles(3, 3, ["-f", "0"], stop, SEED)
    assert report.problems == []
    assert report.cycles == 3
    assert report.lost_ages == []
    assert report.changes > 30, "too little load to mean much"


def test_the_check_sees_a_lost_or_changed_job() -> None:
    job = View("buried", 7, b"c0/1/1|x")
    history = [(0.0, None), (1.0, View("ready", 5, job.body)), (2.0, job)]
    strict, lenient = Report(), Report()
    model = Model(1)
    model.compare(1, history, View("ready", 5, job.body), 2.5, True, strict)
    model.compare(1, history, View("ready", 5, job.body), 2.5, False, lenient)
    assert len(strict.problems) == 1 and "lost" in strict.problems[0]
    assert lenient.problems == [] and lenient.lost_ages == [0.5]
    # A state nobody acknowledged is wrong either way.
    model.compare(1, history, View("ready", 6, job.body), 2.5, False, lenient)
    assert len(lenient.problems) == 1 and "never acknowledged" in lenient.problems[0]
    # A reserved job comes back ready; the change in flight may or may not have happened.
    model.in_flight[2] = None
    reserved = [(0.0, None), (1.0, View("reserved", 1, b"b"))]
    ok = Report()
    model.compare(2, reserved, View("ready", 1, b"b"), 2.0, True, ok)
    model.compare(2, reserved, None, 2.0, True, ok)
    assert ok.problems == []


def test_a_full_disk_refuses_puts_and_recovers() -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        problems = crash_cycles.disk_full()
    except OSError as err:
        pytest.skip(str(err))
    assert problems == []
