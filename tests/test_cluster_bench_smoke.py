"""``bench/cluster_bench.py --smoke`` end to end (about 15 seconds): three real node processes
on loopback, two leader kills, one leader stop with hand-over, one without, and one removal
of the leader, each followed by a put on a survivor and the node's return, then one short
round of durable puts against a single node and against the cluster's leader
(``beanpole-bench``, debug build). Nothing here asserts a timing: only that every figure
was taken and adds up."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench() -> Path:
    """The beanpole-bench binary, built (debug) with cargo."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed")
    subprocess.run(
        [cargo, "build", "-q", "-p", "beanpole-bench"], cwd=ROOT, check=True, timeout=900
    )
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    path = Path(json.loads(meta.stdout)["target_directory"]) / "debug" / "beanpole-bench"
    assert path.exists(), path
    return path


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``bench/NAME`` with ``args``; its result, once it exited 0."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_cluster_bench_smoke(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "cluster.json"
    proc = run_script(
        "cluster_bench.py", "--smoke", "--bench", str(bench), "--tmp", str(tmp_path),
        "--json", str(out),
    )  # fmt: skip
    assert "| leader SIGKILL, 3 nodes | 2 |" in proc.stdout
    assert "| `cluster remove` of the leader, 3 nodes | 1 |" in proc.stdout
    assert "cluster / single:" in proc.stdout
    data = json.loads(out.read_text())
    runs, summary = data["runs"], data["summary"]
    assert [r["sig"] for r in runs["kill"]] == ["SIGKILL", "SIGKILL"]
    assert [r["sig"] for r in runs["stop"]] == ["SIGTERM"]
    assert [r["sig"] for r in runs["stop-plain"]] == ["SIGTERM"]
    assert [r["sig"] for r in runs["remove"]] == ["remove"]
    for r in runs["kill"] + runs["stop"] + runs["stop-plain"] + runs["remove"]:
        # A survivor took the put, some time after the signal.
        assert r["winner"] != r["victim"]
        assert r["seconds"] > 0
    # The second kill stops whoever leads after the first one's node came back.
    assert runs["kill"][1]["victim"] == runs["kill"][0]["winner"]
    kill = summary["kill"]
    assert kill["count"] == 2
    assert kill["min"] <= kill["p50"] <= kill["p99"] <= kill["max"]
    puts = summary["puts"]
    assert puts["problems"] == []
    for kind in ("single", "cluster", "follower"):
        assert puts[kind]["ops_per_s"] > 0
        assert puts[kind]["p50_us"] <= puts[kind]["p99_us"]
    assert len(puts["ratios"]) == 1
    assert puts["ratio"] == pytest.approx(
        puts["cluster"]["ops_per_s"] / puts["single"]["ops_per_s"]
    )
    assert puts["follower_ratio"] == pytest.approx(
        puts["follower"]["ops_per_s"] / puts["cluster"]["ops_per_s"]
    )
    assert puts["nodes_cpu_us_per_op"] > 0
    # The CPU by thread: the log writers' is one part of the whole. The leader's
    # term server runs on its Raft thread: no thread of its own.
    threads = puts["threads_cpu_us_per_op"]["cluster"]
    assert {"beanpole-raft", "beanpole-raft-l"} <= set(threads)
    assert "beanpole" not in threads
    assert 0 < threads["beanpole-raft-l"] < puts["nodes_cpu_us_per_op"]
    assert "by thread: beanpole-" in proc.stdout
    # Every node's data directory was removed with its run.
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]


def test_cluster_ab_smoke(bench: Path, tmp_path: Path) -> None:
    """``bench/cluster_ab.py`` with two names for the package under test, one short round:
    both clusters run, and the second is reported against the first."""
    proc = run_script(
        "cluster_ab.py", "--rounds", "1", "--duration", "1", "--connections", "10",
        "--bench", str(bench), "--tmp", str(tmp_path), "--build", "one=",
        "--build", f"two={ROOT / 'python'}",
    )  # fmt: skip
    out = proc.stdout
    assert "round 1 one: " in out and "round 1 two: " in out, out
    assert "one: median " in out, out
    assert "per round against one: " in out, out
    assert "by thread (median µs/put): " in out and "beanpole-raft" in out, out
    assert not list(tmp_path.glob("beanpole-cluster-ab-*")), "a run's directory was left"


def test_cluster_stalls_smoke(bench: Path, tmp_path: Path) -> None:
    """``bench/cluster_stalls.py``, one short run of this interpreter's build: the probes'
    puts were timed and the terms read (no timing is asserted)."""
    proc = run_script(
        "cluster_stalls.py", "--build", "cur=", "--rounds", "1", "--seconds", "2",
        "--bench", str(bench), "--tmp", str(tmp_path),
    )  # fmt: skip
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("round 1 cur: "))
    assert "puts/s; probes p50" in line
    waited = line.split(" waited ")[0].rsplit(", ", 1)[1]
    held, timed = (int(x.replace(",", "")) for x in waited.split(" of "))
    assert 0 <= held <= timed and timed > 0, line
    assert " -> " in line.split("terms ")[1]
    assert "cur: median " in proc.stdout
