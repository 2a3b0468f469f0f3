"""The ``beanpole-binlog`` source against what a restarted server reports.

A log with jobs in every state (tests/restart_fill.py: ready, delayed, buried,
reserved at the stop, released with a new priority, kicked, timed out, deleted from
every state, bodies with every byte value) is read through Spark and compared, job by
job, with stats-job and peek of a real server started again on the same directory;
records mode is compared with ``beanpole binlog dump``; then a torn tail, a directory
a live server is writing, and committed beanstalkd directories.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from beanpole import _core
from logserver import Client
from restart_fill import fill
from restart_servers import InProcess

pytestmark = pytest.mark.spark

DATA = Path(__file__).resolve().parent.parent / "data" / "beanstalkd-binlog"
COUNTERS = ("reserves", "timeouts", "releases", "buries", "kicks")


def read_jobs(spark: Any, path: Path, **options: str) -> dict[int, dict[str, Any]]:
    reader = spark.read.format("beanpole-binlog")
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = [r.asDict() for r in reader.load(str(path)).collect()]
    by_id = {r["id"]: r for r in rows}
    assert len(by_id) == len(rows), "a job came out twice"
    return by_id


def server_view(log: Path, highest: int) -> dict[int, tuple[dict[str, str], bytes]]:
    """Every job a server restarted on ``log`` holds: stats-job and body by id."""
    running = InProcess(log, max_job_size=4096)
    try:
        out = {}
        with Client(running.address) as c:
            for job_id in range(1, highest + 1):
                stats = c.stats_job(job_id)
                if stats is not None:
                    body = c.peek(job_id)
                    assert body is not None
                    out[job_id] = (stats, body)
        return out
    finally:
        running.stop()


def assert_same(rows: dict[int, dict[str, Any]], view: dict[int, tuple[dict[str, str], bytes]]):
    assert sorted(rows) == sorted(view)
    problems = []
    for job_id, (stats, body) in view.items():
        row = rows[job_id]
        want = {
            "tube": stats["tube"],
            "state": stats["state"],
            "priority": int(stats["pri"]),
            "delay": int(stats["delay"]),
            "ttr": int(stats["ttr"]),
            **{k: int(stats[k]) for k in COUNTERS},
            "body": body,
        }
        got = {k: (bytes(row[k]) if k == "body" else row[k]) for k in want}
        if got != want:
            problems.append(f"job {job_id}: read {got!r:.300} server {want!r:.300}")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def filled_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, set[int]]:
    """A stopped server's log with jobs in every state, over several segments, with
    changes recorded segments after the jobs they change; its last record deletes
    the job with the highest id. Gives the directory, that id and the deleted ids."""
    log = tmp_path_factory.mktemp("binlog") / "log"
    running = InProcess(log, segment_size=4096, max_job_size=4096)
    try:
        filled = fill(running.address, max_job_size=4096)
        deleted = set(filled.deleted)
        with Client(running.address) as c:
            states = {c.stats_job(i)["state"] for i in filled.live}  # type: ignore[index]
            assert states == {"ready", "delayed", "buried", "reserved"}
            # Short-lived jobs fill segments (compaction may move older jobs on).
            c.use("churn")
            for _ in range(300):
                c.delete(c.put(b"c" * 100))
            # Changes in a later segment than the jobs they change.
            c.use("graveyard")
            assert c.kick(1) == 1
            c.use("emails")
            ready = c._peek("peek-ready")
            assert ready is not None
            c.delete(ready[0])
            deleted.add(ready[0])
            last = c.put(b"the last one")
            c.delete(last)
            deleted.add(last)
    finally:
        running.stop()
        for holder in filled.holders:
            holder.close()
    return log, last, deleted


#: Ways of packing segments into partitions: the default (as many as the cores), one
#: segment per partition, and three partitions.
PACKINGS = {
    "default": {},
    "per-segment": {"max-partition-bytes": "1"},
    "three": {"min-partitions": "3"},
}


MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("sizes", "min_parts", "max_bytes", "want"),
    [
        ([], 2, 128 * MIB, []),
        # Each segment counts 4 MiB more than its size, as Spark counts a file.
        ([7 * MIB] * 21, 2, 128 * MIB, [range(0, 10), range(10, 21)]),
        ([7 * MIB] * 21, 1, 128 * MIB, [range(0, 10), range(10, 21)]),
        ([7 * MIB] * 4, 1, 128 * MIB, [range(0, 4)]),
        (
            [7 * MIB] * 21,
            1,
            64 * MIB,
            [range(0, 4), range(4, 8), range(8, 13), range(13, 17), range(17, 21)],
        ),
        ([100 * MIB] * 3, 1, 128 * MIB, [range(0, 1), range(1, 2), range(2, 3)]),
        ([500 * MIB, MIB, MIB], 2, 128 * MIB, [range(0, 1), range(1, 3)]),
        ([MIB] * 3, 8, 128 * MIB, [range(0, 1), range(1, 2), range(2, 3)]),
        ([MIB] * 4, 2, 1, [range(0, 1), range(1, 2), range(2, 3), range(3, 4)]),
    ],
)
def test_pack_splits_in_order_into_even_groups(
    sizes: list[int], min_parts: int, max_bytes: int, want: list[range]
) -> None:
    from beanpole.spark.binlog_source import pack

    got = pack(sizes, min_parts, max_bytes)
    assert got == want
    assert [i for g in got for i in g] == list(range(len(sizes)))
    assert all(len(g) == 1 or sum(sizes[i] + 4 * MIB for i in g) <= max_bytes for g in got)


def partitions(spark: Any, path: Path, **options: str) -> int:
    reader = spark.read.format("beanpole-binlog")
    for key, value in options.items():
        reader = reader.option(key, value)
    return int(reader.load(str(path)).rdd.getNumPartitions())


def test_segments_are_packed_into_partitions(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    running = InProcess(log, segment_size=4096, max_job_size=4096)
    try:
        with Client(running.address) as c:
            ids = [c.put(b"%d" % i + b"b" * 200) for i in range(200)]
    finally:
        running.stop()
    parts, _ = _core.binlog_table_plan(str(log))
    assert len(parts) > 3
    for packing in ("per-segment", "three"):
        rows = read_jobs(spark, log, **PACKINGS[packing])
        assert sorted(rows) == ids
        assert all(bytes(rows[j]["body"]).startswith(b"%d" % i) for i, j in enumerate(ids))
    assert partitions(spark, log, **PACKINGS["per-segment"]) == len(parts)
    assert partitions(spark, log, **PACKINGS["three"]) == 3
    assert partitions(spark, log, **{"min-partitions": "1"}) == 1
    assert partitions(spark, log, **{"min-partitions": "1000"}) == len(parts)


@pytest.mark.parametrize("packing", sorted(PACKINGS))
def test_jobs_are_what_a_restart_reports(
    spark: Any, filled_log: Any, tmp_path: Path, packing: str
) -> None:
    log, highest, deleted = filled_log
    rows = read_jobs(spark, log, **PACKINGS[packing])
    assert not deleted & set(rows)
    parts, _ = _core.binlog_table_plan(str(log))
    assert len(parts) >= 2, "the log should span several segments"
    assert any(later for _, _, later in parts), "no change crosses a segment"
    assert {r["state"] for r in rows.values()} == {"ready", "delayed", "buried"}
    # Compared on a copy, so the restart cannot change what was read.
    copy = tmp_path / "copy"
    shutil.copytree(log, copy)
    assert_same(rows, server_view(copy, highest))
    assert {r["body"] for r in rows.values()} >= {bytes(range(256)), b"", b"\r\n"}


@pytest.mark.parametrize("packing", sorted(PACKINGS))
def test_records_are_what_dump_lists(spark: Any, filled_log: Any, packing: str) -> None:
    log, last, _ = filled_log
    reader = spark.read.format("beanpole-binlog").option("records", "true")
    for key, value in PACKINGS[packing].items():
        reader = reader.option(key, value)
    df = reader.load(str(log))
    rows = sorted((r.asDict() for r in df.collect()), key=lambda r: (r["segment"], r["offset"]))
    dumped, problems = _core.binlog_dump(str(log))
    assert problems == []
    want = [
        (d["segment"], d["offset"], d["kind"], None if d["kind"] == "next-id" else d["id"])
        for d in dumped
    ]
    assert [(r["segment"], r["offset"], r["kind"], r["id"]) for r in rows] == want
    tubes = [(r["tube"], r["state"], r["body_size"]) for r in rows if r["kind"] == "job"]
    assert tubes == [(d["tube"], d["state"], len(d["body"])) for d in dumped if d["kind"] == "job"]
    # Compaction has removed the oldest segments; what is left has these at least.
    assert {"job", "kick", "delete", "next-id"} <= {r["kind"] for r in rows}
    assert rows[-1]["kind"] == "delete" and rows[-1]["id"] == last


def test_torn_tail_is_the_end(spark: Any, filled_log: Any, tmp_path: Path) -> None:
    log, highest, _ = filled_log
    torn = tmp_path / "torn"
    shutil.copytree(log, torn)
    dumped, _ = _core.binlog_dump(str(torn))
    last = dumped[-1]
    assert last["kind"] == "delete" and last["id"] == highest
    segment = torn / f"{last['segment']:010d}.log"
    with open(segment, "r+b") as f:
        f.truncate(last["offset"] + 5)
    rows = read_jobs(spark, torn)
    # The cut delete is gone, so the job it deleted is live again, for the reader as
    # for a restarted server (which cuts the torn tail itself).
    assert highest in rows
    records = spark.read.format("beanpole-binlog").option("records", "true").load(str(torn))
    assert records.count() == len(dumped) - 1
    assert_same(rows, server_view(torn, highest))


def test_a_directory_a_live_server_is_writing(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "live"
    running = InProcess(log, segment_size=4096, max_job_size=4096)
    acked: dict[int, bytes] = {}
    stop = threading.Event()

    def writer() -> None:
        with Client(running.address) as c:
            n = 0
            while not stop.is_set():
                body = f"live {n} ".encode() * (n % 7)
                acked[c.put(body)] = body
                n += 1

    try:
        with Client(running.address) as c:
            gone = [c.put(b"short-lived") for _ in range(20)]
            for job_id in gone:
                c.delete(job_id)
        thread = threading.Thread(target=writer)
        thread.start()
        deadline = time.monotonic() + 60
        while len(acked) < 300:
            assert time.monotonic() < deadline and thread.is_alive(), len(acked)
            time.sleep(0.01)
        before = dict(acked)
        rows = read_jobs(spark, log)
        stop.set()
        thread.join()
        # Everything acknowledged before the read began is there, nothing deleted
        # is, and every row is a job the server acknowledged, with its body.
        assert set(before) <= set(rows)
        assert not set(gone) & set(rows)
        for job_id, row in rows.items():
            assert bytes(row["body"]) == acked[job_id], job_id
            assert row["state"] == "ready"
        # The reader took no lock: the server still writes.
        with Client(running.address) as c:
            assert c.put(b"after") > max(acked)
    finally:
        stop.set()
        running.stop()


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


@pytest.mark.parametrize(
    ("case", "packing"),
    [("states", "default"), ("multi-file", "default"), ("multi-file", "per-segment")],
)
def test_beanstalkd_directory(spark: Any, case: str, packing: str, tmp_path: Path) -> None:
    src = DATA / case
    copy = tmp_path / case
    copy.mkdir()
    for f in src.glob("binlog.*"):
        shutil.copy(f, copy / f.name)
    expected = json.loads((src / "expected.json").read_text())
    rows = read_jobs(spark, copy, format="beanstalkd", **PACKINGS[packing])
    want = {j["id"]: j for j in expected["jobs"]}
    assert sorted(rows) == sorted(want)
    assert not set(expected["deleted_ids"]) & set(rows)
    now = time.time_ns()
    for job_id, j in want.items():
        row = rows[job_id]
        state = {"reserved": "ready"}.get(j["state"], j["state"])
        if state == "delayed" and j["deadline_at_max_ns"] <= now:
            state = "ready"
        got = (row["tube"], row["state"], row["priority"], row["delay"], row["ttr"])
        assert got == (j["tube"], state, j["pri"], j["delay_ns"] // 10**9, j["ttr_ns"] // 10**9)
        assert [row[k] for k in COUNTERS] == [j[k] for k in COUNTERS]
        assert fnv1a64(bytes(row["body"])) == j["body_fnv1a64"]
        assert row["segment"] >= 1
    files = {int(f.split(".")[1]) for f in expected["files"]}
    assert {r["segment"] for r in rows.values()} <= files


def test_bad_options_are_refused(spark: Any, tmp_path: Path) -> None:
    reader = spark.read.format("beanpole-binlog")
    with pytest.raises(Exception, match="option format must be one of beanpole, beanstalkd"):
        reader.option("format", "kafka").load(str(tmp_path)).collect()
    fresh = spark.read.format("beanpole-binlog")
    with pytest.raises(Exception, match="option min-partitions must be a whole number from 1"):
        fresh.option("min-partitions", "0").load(str(tmp_path)).collect()
    fresh = spark.read.format("beanpole-binlog")
    with pytest.raises(Exception, match="option max-partition-bytes must be a whole number from 1"):
        fresh.option("max-partition-bytes", "lots").load(str(tmp_path)).collect()
    with pytest.raises(Exception, match=r"option records must be true or false \(1/0, yes/no"):
        reader.option("format", "beanpole").option("records", "maybe").load(str(tmp_path)).collect()
