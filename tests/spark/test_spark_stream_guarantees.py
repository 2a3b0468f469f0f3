"""The streaming reader's guarantees at its edges, each first seen failing:

* a checkpoint's ids are deleted or replayed only on the server instance they were
  reserved on (a server restarted without its log hands the same ids to new jobs);
* a batch's jobs are touched before the smallest TTR among them runs out, however
  TTRs are mixed;
* a clean ``query.stop()`` leaves nothing behind that the sink has committed, when the
  reader is told the checkpoint (option ``checkpointLocation``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import beanpole
from beanpole.client import NotFoundError

pytestmark = pytest.mark.spark


def _address(srv: beanpole.Server) -> str:
    host, port = srv.address  # type: ignore[misc]
    return f"{host}:{port}"


@pytest.fixture
def server() -> Iterator[beanpole.Server]:
    with beanpole.Server(listen="127.0.0.1", port=0) as srv:
        yield srv


def fill(address: str, tube: str, bodies: list[bytes], ttr: int | list[int] = 60) -> list[int]:
    ttrs = [ttr] * len(bodies) if isinstance(ttr, int) else ttr
    with beanpole.Client(address, encoding=None, use=tube) as c:
        return [c.put(b, ttr=t) for b, t in zip(bodies, ttrs, strict=True)]


def counts(address: str, tube: str) -> dict[str, int]:
    with beanpole.Client(address) as c:
        try:
            st = c.stats_tube(tube)
        except NotFoundError:
            return {}
    states = ("ready", "reserved", "delayed", "buried")
    return {s: st[f"current-jobs-{s}"] for s in states if st[f"current-jobs-{s}"]}


def after_stop(address: str, tube: str) -> dict[str, int]:
    """The tube's counts once the stopped reader's process has let go of its jobs
    (query.stop() returns before Spark's Python process for the reader is gone)."""
    deadline = time.monotonic() + 30
    while "reserved" in (now := counts(address, tube)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return now


def test_restart_without_the_log_never_touches_new_jobs(
    spark: Any, server: beanpole.Server, tmp_path: Path
) -> None:
    """The issue's reproduction: a query stopped after its first batches, the server
    restarted without a log, 100 new jobs put (ids 1..100 again), the query restarted
    from its checkpoint. Every new job must reach the sink; the checkpoint's ids are
    counted as orphaned, not deleted."""
    address = _address(server)
    port = server.address[1]  # type: ignore[misc]
    fill(address, "t", [b"old-%d" % i for i in range(200)])
    out, cp = tmp_path / "out", tmp_path / "cp"
    got: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        rows = [(batch_id, bytes(r.body)) for r in df.select("body").collect()]
        with lock:
            got.extend(rows)

    def start(**trigger: Any) -> Any:
        return (
            spark.readStream.format("beanpole")
            .option("servers", address)
            .option("tube", "t")
            .option("maxRowsPerTrigger", "50")
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(cp))
            .trigger(**trigger)
            .start()
        )

    first = start(processingTime="0 seconds")
    while len(got) < 100:
        assert first.exception() is None
        first.awaitTermination(0.05)
    first.stop()
    server.stop()
    with beanpole.Server(listen="127.0.0.1", port=port) as again:
        fresh = [b"new-%d" % i for i in range(100)]
        new_ids = fill(address, "t", fresh)
        assert new_ids[0] == 1
        second = start(availableNow=True)
        second.awaitTermination()
        bodies = {b for _, b in got}
        assert set(fresh) <= bodies, f"{len(set(fresh) - bodies)} new jobs never reached the sink"
        assert counts(address, "t") == {}
        end = json.loads(second.lastProgress["sources"][0]["endOffset"])
        assert end["orphaned"] >= 50
        assert end["instances"] == {address: again.stats()["id"]}
    del out


def test_replay_on_another_instance_reads_nothing_of_the_new_jobs(
    server: beanpole.Server, pyspark_api: None
) -> None:
    """The reader's own calls around a crash (no query): the replayed batch and the
    committed one name ids that, after a restart without the log, belong to other
    jobs. Nothing is reserved or deleted by id; everything is counted."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from beanpole.spark.stream_options import StreamSettings
    from beanpole.spark.stream_reader import BeanpoleStreamReader, rows

    address = _address(server)
    port = server.address[1]  # type: ignore[misc]
    fill(address, "c", [b"old-%d" % i for i in range(30)])
    settings = StreamSettings.from_options({"servers": address, "tube": "c"})
    first = BeanpoleStreamReader(settings)
    o0 = first.initialOffset()
    o1 = first.latestOffset(o0, ReadMaxRows(10))
    o2 = first.latestOffset(o1, ReadMaxRows(10))
    first.holds.close()
    server.stop()
    with beanpole.Server(listen="127.0.0.1", port=port) as again:
        fresh = [b"new-%d" % i for i in range(30)]
        fill(address, "c", fresh)
        second = BeanpoleStreamReader(settings)
        replayed = [rows(p).to_pydict() for p in second.partitions(o1, o2)]  # type: ignore[arg-type]
        assert sum(len(r["id"]) for r in replayed) == 0
        o3 = second.latestOffset(o2, ReadMaxRows(100))
        # Batch 2's ids (not replayed, then not deleted: counted once), and batch 1's,
        # whose delete before the crash the new reader cannot know of.
        assert o3["orphaned"] == 20
        assert counts(address, "c") == {"reserved": 30}
        parts = second.partitions(o2, o3)
        bodies = [b for p in parts for b in rows(p).to_pydict()["body"]]  # type: ignore[arg-type]
        assert sorted(bodies) == sorted(fresh)
        assert {p.instance for p in parts} == {again.stats()["id"]}  # type: ignore[attr-defined]
        assert second.latestOffset(o3, ReadMaxRows(100)) == o3
        assert counts(address, "c") == {}
        second.stop()


def test_mixed_ttrs_are_touched_by_the_smallest(
    spark: Any, server: beanpole.Server, tmp_path: Path
) -> None:
    """A slow sink holds a batch whose first job has a TTR of 60 s and the rest 2 s:
    none of them may time out (the reader touches by the batch's smallest TTR)."""
    address = _address(server)
    bodies = [b"job-%d" % i for i in range(600)]
    fill(address, "m", bodies, ttr=[60] + [2] * 599)
    seen: list[bytes] = []

    def slow_sink(df: Any, batch_id: int) -> None:
        seen.extend(bytes(r.body) for r in df.select("body").collect())
        time.sleep(5)  # the sink is slow: longer than the 2 s TTR, twice over

    query = (
        spark.readStream.format("beanpole")
        .option("servers", address)
        .option("tube", "m")
        .option("maxRowsPerTrigger", "300")
        .load()
        .writeStream.foreachBatch(slow_sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sorted(seen) == sorted(bodies)
    assert server.stats()["job-timeouts"] == 0
    assert counts(address, "m") == {}


def test_touches_are_pipelined_and_keep_a_held_batch(
    server: beanpole.Server, pyspark_api: None
) -> None:
    """The reader's touch thread alone: 20,000 jobs of TTR 1 held for 3 s stay
    reserved, touched in pipelined batches (touch counts per job, no timeouts)."""
    from beanpole.spark.stream_holds import Holds
    from beanpole.spark.stream_options import StreamSettings

    address = _address(server)
    with beanpole.Client(address, encoding=None, use="h") as c:
        c.put_many((b"x%d" % i for i in range(20_000)), ttr=1)
    holds = Holds(StreamSettings.from_options({"servers": address, "tube": "h"}))
    since = time.monotonic()
    slots, _ = holds.reserve([(address, "h")], None)
    assert sum(len(v) for v in slots.values()) == 20_000
    holds.hold(1, slots, since)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert server.stats()["job-timeouts"] == 0
        time.sleep(0.1)  # sampling the state while the touch thread works
    st = server.stats()
    assert st["job-timeouts"] == 0 and st["current-jobs-reserved"] == 20_000
    assert st["cmd-touch"] >= 4 * 20_000  # every 0.5 s at least
    assert holds.least_ttr(1) == 1
    holds.delete(1, {(address, "h"): [i for v in slots.values() for i in v]},
                 holds.instances_of(slots))
    holds.close()
    assert counts(address, "h") == {}


def test_ttrs_are_read_once_at_the_fourth_touch_then_touches_follow_them(
    server: beanpole.Server, pyspark_api: None
) -> None:
    """A batch of TTR-60 jobs held long: touched every half second until the fourth
    touch, where the TTRs are read once (one stats-job per job); then the next touch
    is half a minute away, so no fifth pass comes soon after."""
    from beanpole.spark.stream_holds import TOUCHES_BEFORE_TTRS, Holds
    from beanpole.spark.stream_options import StreamSettings

    address = _address(server)
    n = 200
    with beanpole.Client(address, encoding=None, use="long") as c:
        c.put_many((b"y%d" % i for i in range(n)), ttr=60)
    holds = Holds(StreamSettings.from_options({"servers": address, "tube": "long"}))
    slots, _ = holds.reserve([(address, "long")], None)
    base = server.stats()
    holds.hold(1, slots, time.monotonic())
    deadline = time.monotonic() + 60
    while server.stats()["cmd-touch"] - base["cmd-touch"] < TOUCHES_BEFORE_TTRS * n:
        assert time.monotonic() < deadline, server.stats()["cmd-touch"]
        time.sleep(0.05)  # sampling the counters while the touch thread works
    # Three would-be half-second intervals: without the TTRs, a fifth pass would come.
    time.sleep(1.6)
    st = server.stats()
    assert st["cmd-touch"] - base["cmd-touch"] == TOUCHES_BEFORE_TTRS * n
    assert st["cmd-stats-job"] - base["cmd-stats-job"] == n
    holds.delete(1, {(address, "long"): [i for v in slots.values() for i in v]},
                 holds.instances_of(slots))
    holds.close()
    assert counts(address, "long") == {}


@pytest.mark.parametrize("told", [True, False])
def test_a_clean_stop_leaves_nothing_the_sink_committed(
    spark: Any, server: beanpole.Server, tmp_path: Path, told: bool
) -> None:
    """A processingTime query stopped between triggers, after its batch is in the
    sink: with the checkpoint given to the reader, the committed batch is deleted at
    the stop (nothing left); without it the batch goes back to ready (the reader
    cannot know the sink has it) until a restart from the checkpoint deletes it.
    Neither reads a job twice."""
    address = _address(server)
    bodies = [b"job-%d" % i for i in range(300)]
    fill(address, "s", bodies)
    cp, out = tmp_path / "cp", tmp_path / "out"

    def start(**trigger: Any) -> Any:
        reader = spark.readStream.format("beanpole").option("servers", address)
        reader = reader.option("tube", "s")
        if told:
            reader = reader.option("checkpointLocation", str(cp))
        return (
            reader.load()
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(**trigger)
            .start()
        )

    query = start(processingTime="1 hour")
    while not (query.lastProgress and query.lastProgress["numInputRows"] == 300):
        assert query.exception() is None
        query.awaitTermination(0.05)
    query.stop()
    assert after_stop(address, "s") == ({} if told else {"ready": 300})
    again = start(availableNow=True)
    again.awaitTermination()
    written = [bytes(r.body) for r in spark.read.parquet(str(out)).collect()]
    assert sorted(written) == sorted(bodies)
    assert counts(address, "s") == {}


@pytest.mark.parametrize("with_log", [False, True])
def test_against_beanstalkd_restarted(
    pyspark_api: None, tmp_path: Path, with_log: bool
) -> None:
    """Debian's beanstalkd draws a new stats id at every start, also with -b (where
    its ids survive): a restarted reader never deletes or replays the checkpoint's ids
    there. Without -b every new job is read; with -b the old batch's jobs are read
    again (counted orphaned), none is deleted unseen."""
    import shutil
    import signal
    import socket
    import subprocess

    from pyspark.sql.streaming.datasource import ReadMaxRows

    from beanpole.spark.stream_options import StreamSettings
    from beanpole.spark.stream_reader import BeanpoleStreamReader, rows

    exe = shutil.which("beanstalkd")
    if exe is None:
        pytest.skip("beanstalkd is not installed (apt-get install beanstalkd)")
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(128)
    address = f"127.0.0.1:{lsock.getsockname()[1]}"
    flags = ["-b", str(tmp_path / "binlog"), "-f", "0"] if with_log else []
    (tmp_path / "binlog").mkdir()

    def launch() -> subprocess.Popen[bytes]:
        # Socket activation: the listening socket outlives each process, so the port
        # stays the same and clients can connect at once.
        script = 'exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"'
        return subprocess.Popen(["sh", "-c", script, "sh", exe, *flags], stdin=lsock.fileno())

    proc = launch()
    try:
        fill(address, "k", [b"old-%d" % i for i in range(30)])
        settings = StreamSettings.from_options({"servers": address, "tube": "k"})
        first = BeanpoleStreamReader(settings)
        o1 = first.latestOffset(first.initialOffset(), ReadMaxRows(10))
        o2 = first.latestOffset(o1, ReadMaxRows(10))
        first.holds.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = launch()
        fresh = [b"new-%d" % i for i in range(30)]
        fill(address, "k", fresh)
        second = BeanpoleStreamReader(settings)
        assert sum(p.rows for p in second.partitions(o1, o2)) == 0  # type: ignore[attr-defined]
        o3 = second.latestOffset(o2, ReadMaxRows(1000))
        assert o3["orphaned"] == 20
        parts = second.partitions(o2, o3)
        bodies = sorted(b for p in parts for b in rows(p).to_pydict()["body"])  # type: ignore[arg-type]
        old = [b"old-%d" % i for i in range(10, 30)] if with_log else []
        assert bodies == sorted(fresh + old)
        assert second.latestOffset(o3, ReadMaxRows(1000)) == o3
        assert counts(address, "k") == {}
        second.stop()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lsock.close()
