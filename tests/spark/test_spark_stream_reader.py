"""The streaming reader, format ``beanpole`` on ``readStream``, against embedded servers.

Every test puts numbered jobs, runs real streaming queries into a real sink, and then
checks the rows the sink holds against the ids put, and the tube against what should
be left (nothing, once a run ends cleanly).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import beanpole

pytestmark = pytest.mark.spark


@pytest.fixture
def server() -> Iterator[str]:
    with beanpole.Server(listen="127.0.0.1", port=0) as srv:
        host, port = srv.address  # type: ignore[misc]
        yield f"{host}:{port}"


def fill(address: str, tube: str, n: int, first: int = 0) -> list[int]:
    with beanpole.Client(address, encoding=None, use=tube) as c:
        return c.put_many(b"job-%d" % i for i in range(first, first + n))


def left_in(address: str, tube: str) -> dict[str, int]:
    """Jobs of the tube by state (all zero once a clean run has read everything)."""
    with beanpole.Client(address) as c:
        try:
            st = c.stats_tube(tube)
        except beanpole.client.NotFoundError:
            return {}
    states = ("ready", "reserved", "delayed", "buried")
    return {s: st[f"current-jobs-{s}"] for s in states if st[f"current-jobs-{s}"]}


def left_in_once_seen(address: str, tube: str, want: dict[str, int]) -> dict[str, int]:
    """:func:`left_in` once it is ``want`` (a close is seen by the server a moment after
    the client closes), or what it is after 10 s."""
    deadline = time.monotonic() + 10
    while (now := left_in(address, tube)) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return now


def stream(spark: Any, address: str, tube: str, **options: Any) -> Any:
    reader = spark.readStream.format("beanpole").option("servers", address).option("tube", tube)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def written(spark: Any, out: Path) -> list[tuple[int, bytes]]:
    return [(r.id, bytes(r.body)) for r in spark.read.parquet(str(out)).collect()]


def test_available_now_delivers_every_job_once_and_leaves_none(
    spark: Any, server: str, tmp_path: Path
) -> None:
    ids = fill(server, "emails", 3000)
    out, log = tmp_path / "out", tmp_path / "calls.jsonl"
    query = (
        stream(spark, server, "emails", callLog=log)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.id for r in rows) == sorted(ids)
    assert {bytes(r.body) for r in rows} == {b"job-%d" % i for i in range(3000)}
    assert {r.server for r in rows} == {server}
    assert {r.tube for r in rows} == {"emails"}
    assert left_in(server, "emails") == {}
    # No commit() for the run's only batch: the last latestOffset deleted its jobs.
    names = [c["call"] for c in calls(log)]
    assert "commit" not in names
    last = [c for c in calls(log) if c["call"] == "latestOffset"][-1]
    assert last["start_jobs"] == 3000

    # A restart from a checkpoint whose last batch is committed reads only new jobs.
    # What Spark 4.3 calls then: latestOffset with that batch's end as start (its
    # jobs are deleted again if they are still there), never partitions() for it.
    before = len(calls(log))
    more = fill(server, "emails", 500, first=3000)
    again = (
        stream(spark, server, "emails", callLog=log)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    again.awaitTermination()
    assert sorted(r[0] for r in written(spark, out)) == sorted(ids + more)
    assert left_in(server, "emails") == {}
    restart = [(c["call"], c.get("start"), c.get("end")) for c in calls(log)[before:]]
    spark_calls = [c for c in restart if c[0] not in ("read", "planned", "stop")]
    print("calls at a restart after a committed batch:", spark_calls)
    assert spark_calls == [
        ("prepareForTriggerAvailableNow", None, None),
        ("latestOffset", 1, None),  # no initialOffset: the checkpoint has the start
        ("commit", None, 1),  # made only because a new batch was planned
        ("partitions", 1, 2),
        ("latestOffset", 2, None),  # nothing more; no commit(2)
    ]


def test_max_rows_per_trigger_splits_into_batches(spark: Any, server: str, tmp_path: Path) -> None:
    fill(server, "t", 2500)
    query = (
        stream(spark, server, "t", maxRowsPerTrigger=1000)
        .writeStream.format("memory")
        .queryName("split")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [1000, 1000, 500]
    assert spark.sql("select count(distinct id) from split").first()[0] == 2500
    assert left_in(server, "t") == {}


def test_with_priority_fills_each_jobs_priority(spark: Any, server: str) -> None:
    with beanpole.Client(server, encoding=None, use="p") as c:
        ids = [c.put(b"job-%d" % i, priority=i * 7) for i in range(300)]
    query = (
        stream(spark, server, "p", withPriority="true")
        .writeStream.format("memory")
        .queryName("prio")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    got = {r.id: r.priority for r in spark.sql("select id, priority from prio").collect()}
    assert got == {job: i * 7 for i, job in enumerate(ids)}
    assert left_in(server, "p") == {}


def test_bad_options_give_one_clear_error(spark: Any, server: str) -> None:
    cases = {
        "option maxRowsPerTrigger must be a whole number from 1": {
            "servers": server,
            "maxRowsPerTrigger": "lots",
        },
        "give option tube or option tubes, not both": {
            "servers": server,
            "tube": "a",
            "tubes": "b,c",
        },
        "option servers is required": {"tube": "a"},
        "option servers takes host:port pairs": {"servers": "nohost"},
        "option servers names a server twice": {"servers": f"{server},{server}"},
        "option withPriority must be true or false (1/0, yes/no, on/off)": {
            "servers": server,
            "withPriority": "maybe",
        },
        "option checkpointLocation must be a local directory": {
            "servers": server,
            "checkpointLocation": "s3://bucket/cp",
        },
    }
    for message, options in cases.items():
        reader = spark.readStream.format("beanpole")
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises(Exception) as info:
            reader.load()
        # Spark wraps it with the source's traceback; the error itself is one line.
        text = str(info.value)
        assert text.count("Error: beanpole: ") == 1
        assert f"Error: beanpole: {message}" in text


def test_stopped_query_restarts_from_its_checkpoint(
    spark: Any, server: str, tmp_path: Path
) -> None:
    ids = fill(server, "work", 4000)
    out, cp = tmp_path / "out", tmp_path / "cp"

    def start(**trigger: Any) -> Any:
        return (
            stream(spark, server, "work", maxRowsPerTrigger=400)
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(**trigger)
            .start()
        )

    first = start(processingTime="0 seconds")
    # Stop once a few batches are in, whatever the query is doing at that moment.
    while sum(p["numInputRows"] for p in first.recentProgress) < 1200:
        assert first.exception() is None
        first.awaitTermination(0.05)
    first.stop()
    assert 0 < len({r[0] for r in written(spark, out)}) < 4000
    second = start(availableNow=True)
    second.awaitTermination()
    seen = [r[0] for r in written(spark, out)]
    assert set(seen) == set(ids)
    assert left_in(server, "work") == {}
    # What came twice is what the first run held when it stopped: at most a batch.
    assert len(seen) - len(ids) <= 400


def test_batch_written_but_not_committed_is_replayed(
    spark: Any, server: str, tmp_path: Path
) -> None:
    ids = fill(server, "jobs", 1000)
    out, cp, log = tmp_path / "out", tmp_path / "cp", tmp_path / "calls.jsonl"

    class SinkFailed(RuntimeError):
        pass

    def write_then_fail(df: Any, batch_id: int) -> None:
        df.write.mode("append").parquet(str(out))
        if batch_id == 1:
            raise SinkFailed("the sink wrote batch 1 and failed before its commit")

    def start(sink: Any) -> Any:
        return (
            stream(spark, server, "jobs", maxRowsPerTrigger=300, callLog=log)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )

    first = start(write_then_fail)
    with pytest.raises(Exception, match="failed before its commit"):
        first.awaitTermination()
    assert len(written(spark, out)) == 600
    first_calls = len(calls(log))

    second = start(lambda df, _: df.write.mode("append").parquet(str(out)))
    second.awaitTermination()
    rows = written(spark, out)
    seen = [i for i, _ in rows]
    assert set(seen) == set(ids)
    assert len(seen) == 1300  # batch 1 (ids 301-600) twice, nothing else
    assert {i for i in seen if seen.count(i) == 2} == set(ids[300:600])
    assert {b for _, b in rows} == {b"job-%d" % i for i in range(1000)}
    assert left_in(server, "jobs") == {}
    # The duplicates are counted in the offsets.
    assert json.loads(second.lastProgress["sources"][0]["endOffset"])["redelivered"] == 300
    # What Spark 4.3 calls on the restart: the uncommitted batch is planned again with
    # the offsets its checkpoint holds (start = batch 1's start, end = batch 1's end),
    # before any latestOffset; commit() comes for each batch after the next is
    # planned, never for the last one.
    restart = [(c["call"], c.get("start"), c.get("end")) for c in calls(log)[first_calls:]]
    planned = [c for c in restart if c[0] not in ("read", "planned", "stop")]
    print("calls at a restart after an uncommitted batch:", planned)
    assert planned == [
        ("prepareForTriggerAvailableNow", None, None),
        ("partitions", 1, 2),
        ("latestOffset", 2, None),
        ("commit", None, 2),
        ("partitions", 2, 3),
        ("latestOffset", 3, None),
        ("commit", None, 3),
        ("partitions", 3, 4),
        ("latestOffset", 4, None),
    ]


def test_reader_after_a_crash_deletes_the_committed_and_replays_the_rest(
    server: str, pyspark_api: None
) -> None:
    """The reader's own calls, in the order Spark makes them around a driver crash (no
    session needed): a batch the checkpoint shows committed is deleted at the restart
    even though the crash put its jobs back to ready; the uncommitted one is read
    again by id, with the same rows, and counted."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from beanpole.spark.stream_options import StreamSettings
    from beanpole.spark.stream_reader import BeanpoleStreamReader, rows

    ids = fill(server, "crash", 30)
    settings = StreamSettings.from_options({"servers": server, "tube": "crash"})

    def read(reader: BeanpoleStreamReader, start: Any, end: Any) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        for part in reader.partitions(start, end):
            batch = rows(part).to_pydict()  # type: ignore[arg-type]
            out += zip(batch["id"], batch["body"], strict=True)
        return sorted(out)

    first = BeanpoleStreamReader(settings)
    o0 = first.initialOffset()
    o1 = first.latestOffset(o0, ReadMaxRows(10))
    batch1 = read(first, o0, o1)
    o2 = first.latestOffset(o1, ReadMaxRows(10))  # batch 1 is in the sink: deleted
    batch2 = read(first, o1, o2)
    assert [i for i, _ in batch1] == ids[:10] and [i for i, _ in batch2] == ids[10:20]
    assert left_in(server, "crash") == {"ready": 10, "reserved": 10}
    first.holds.close()  # the driver dies: its connections close
    assert left_in_once_seen(server, "crash", {"ready": 20}) == {"ready": 20}

    # The checkpoint shows batch 2 planned, not committed: Spark plans it again.
    second = BeanpoleStreamReader(settings)
    assert read(second, o1, o2) == batch2
    o3 = second.latestOffset(o2, ReadMaxRows(100))
    assert o3["redelivered"] == 10
    assert read(second, o2, o3) == [(i, b"job-%d" % n) for n, i in enumerate(ids) if n >= 20]
    assert second.latestOffset(o3, ReadMaxRows(100)) == o3  # nothing more; o3 deleted
    assert left_in(server, "crash") == {}
    second.stop()

    # A crash after the sink committed batch 4 but before anything deleted it: the
    # restart deletes it, although its jobs are ready again by then.
    more = fill(server, "crash", 5, first=100)
    third = BeanpoleStreamReader(settings)
    o4 = third.latestOffset(o3, ReadMaxRows(100))
    assert [i for i, _ in read(third, o3, o4)] == more
    third.holds.close()
    assert left_in_once_seen(server, "crash", {"ready": 5}) == {"ready": 5}
    fourth = BeanpoleStreamReader(settings)
    assert fourth.latestOffset(o4, ReadMaxRows(100)) == o4
    assert left_in(server, "crash") == {}
    fourth.stop()


def test_reader_shares_the_limit_over_servers_and_tubes(server: str, pyspark_api: None) -> None:
    """Two servers and two tubes: one partition per server and tube, the limit shared
    out, and what a dry tube leaves taken by the others."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from beanpole.spark.stream_options import StreamSettings
    from beanpole.spark.stream_reader import BeanpoleStreamReader, rows

    with beanpole.Server(listen="127.0.0.1", port=0) as other:
        host, port = other.address  # type: ignore[misc]
        second = f"{host}:{port}"
        fill(server, "a", 100)
        fill(server, "b", 5)
        fill(second, "a", 100)
        settings = StreamSettings.from_options({"servers": f"{server},{second}", "tubes": "a,b"})
        reader = BeanpoleStreamReader(settings)
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadMaxRows(60))
        parts = reader.partitions(start, end)
        got = {(p.server, p.tube): rows(p).num_rows for p in parts}  # type: ignore[attr-defined]
        assert sum(got.values()) == 60
        assert got[(server, "b")] == 5
        assert set(got) == {(server, "a"), (server, "b"), (second, "a")}
        assert set(end["jobs"]) == {server, second}
        last = reader.latestOffset(end, ReadMaxRows(1000))
        assert sum(p.rows for p in reader.partitions(end, last)) == 145  # type: ignore[attr-defined]
        assert reader.latestOffset(last, ReadMaxRows(1000)) == last
        assert left_in(server, "a") == left_in(second, "a") == {}
        reader.stop()
