"""The ``beanpole`` writer: DataFrames to jobs on real embedded servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import beanpole
from beanpole.client.sharded import rendezvous

pytestmark = pytest.mark.spark

ROWS = 100_000


def _name(srv: beanpole.Server) -> str:
    host, port = srv.address  # type: ignore[misc]
    return f"{host}:{port}"


@pytest.fixture
def two_servers() -> Iterator[list[beanpole.Server]]:
    with (
        beanpole.Server(listen="127.0.0.1", port=0) as a,
        beanpole.Server(listen="127.0.0.1", port=0) as b,
    ):
        yield [a, b]


def _rows(spark: Any, n: int) -> Any:
    """Rows whose body starts with every byte value in turn and ends with the row id,
    and whose settings vary per row (some null, to take the options)."""
    return spark.range(n).selectExpr(
        "id",
        "concat(unhex(lpad(hex(id % 256), 2, '0')), cast(cast(id as string) as binary)) as body",
        "case when id % 3 = 0 then 'a' when id % 3 = 1 then 'b' else null end as tube",
        "case when id % 11 = 0 then null else id % 1000 end as priority",
        "case when id % 10007 = 5 then 3600 else 0 end as delay",
        "cast(1 + id % 500 as int) as ttr",
    )


def _expected(i: int) -> dict[str, Any]:
    return {
        "body": bytes([i % 256]) + str(i).encode(),
        "tube": "a" if i % 3 == 0 else "b" if i % 3 == 1 else "emails",
        "pri": 7 if i % 11 == 0 else i % 1000,
        "delay": 3600 if i % 10007 == 5 else 0,
        "ttr": 1 + i % 500,
    }


def _jobs_on(server: str) -> dict[int, tuple[int, bytes, dict[str, Any]]]:
    """Every job on ``server``: row id -> (job id, body, stats-job)."""
    out: dict[int, tuple[int, bytes, dict[str, Any]]] = {}
    with beanpole.Client(server, encoding=None) as c:
        # Ids are dense per server: peek every id it has handed out.
        for job_id in range(1, c.stats()["total-jobs"] + 1):
            job = c.peek(job_id)
            row = int(job.body[1:])
            assert row not in out, f"row {row} written twice"
            out[row] = (job_id, job.body, c.stats_job(job_id))
    return out


def test_round_trip_with_per_row_overrides(spark: Any, two_servers: list[Any]) -> None:
    servers = [_name(s) for s in two_servers]
    (
        _rows(spark, ROWS)
        .drop("id")
        .write.format("beanpole")
        .option("servers", ",".join(servers))
        .option("tube", "emails")
        .option("priority", "7")
        .mode("append")
        .save()
    )
    seen: dict[int, tuple[int, bytes, dict[str, Any]]] = {}
    per_server = []
    for server in servers:
        jobs = _jobs_on(server)
        per_server.append(len(jobs))
        assert not seen.keys() & jobs.keys()
        seen.update(jobs)
    assert sorted(seen) == list(range(ROWS))
    # Round robin without a key: both servers take a fair share.
    assert min(per_server) > ROWS // 3
    for row, (_, body, st) in seen.items():
        want = _expected(row)
        assert body == want["body"]
        got = {"tube": st["tube"], "pri": st["pri"], "delay": st["delay"], "ttr": st["ttr"]}
        assert got == {k: want[k] for k in ("tube", "pri", "delay", "ttr")}, row
        assert st["state"] == ("delayed" if want["delay"] else "ready")
    bodies = {body[0] for _, body, _ in seen.values()}
    assert bodies == set(range(256))


def test_key_picks_the_server_shardedclient_picks(spark: Any, two_servers: list[Any]) -> None:
    servers = [_name(s) for s in two_servers]
    df = spark.range(3000).selectExpr(
        "concat('user-', cast(id % 700 as string)) as key",
        "cast(concat('user-', cast(id % 700 as string)) as binary) as body",
    )
    df.write.format("beanpole").option("servers", ",".join(servers)).option("tube", "keyed").mode(
        "append"
    ).save()
    total = 0
    for server in servers:
        with beanpole.Client(server, encoding="utf-8", watch="keyed") as c:
            jobs = c.reserve_many(5000, 0)
        total += len(jobs)
        for job in jobs:
            assert rendezvous(servers, job.body) == server, job.body
    assert total == 3000


def test_overwrite_is_refused(spark: Any, two_servers: list[Any]) -> None:
    server = _name(two_servers[0])
    df = spark.range(3).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match="cannot be overwritten"):
        df.write.format("beanpole").option("servers", server).mode("overwrite").save()
    with beanpole.Client(server) as c:
        assert c.stats()["total-jobs"] == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option servers is required"),
        ({"servers": "127.0.0.1:1", "priority": "-1"}, "option priority must be a whole number"),
        ({"servers": "127.0.0.1:1", "ttr": "soon"}, "option ttr must be a whole number"),
        ({"servers": "127.0.0.1:1", "tube": "has space"}, "option tube must be a tube name"),
        ({"servers": "127.0.0.1:1,127.0.0.1:1"}, "option servers names a server twice"),
    ],
)
def test_bad_options_give_one_clear_error(
    spark: Any, options: dict[str, str], message: str
) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match=message):
        df.write.format("beanpole").options(**options).mode("append").save()


def test_a_body_column_is_required(spark: Any, two_servers: list[Any]) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as text")
    with pytest.raises(Exception, match="needs a body column"):
        df.write.format("beanpole").option("servers", _name(two_servers[0])).mode("append").save()


def test_a_priority_out_of_range_fails_the_write(spark: Any, two_servers: list[Any]) -> None:
    server = _name(two_servers[0])
    # One partition: the task that fails is the one that put the other rows (with two,
    # a task that finished after Spark aborted the write may leave its jobs, which the
    # writer's at-least-once promise allows).
    df = spark.range(0, 3, numPartitions=1).selectExpr(
        "cast(id as string) as body", "1 - id as priority"
    )
    with pytest.raises(Exception, match="column priority holds -1"):
        df.write.format("beanpole").option("servers", server).mode("append").save()
    with beanpole.Client(server) as c:
        assert c.stats()["current-jobs-ready"] == 0


def test_server_stopped_mid_write(spark: Any, tmp_path: Path) -> None:
    """The second server stops after taking some jobs: the write fails, the task and
    abort delete what the first server took, and what the second server logged before
    it stopped is all that remains (at-least-once: it could not be reached). Both
    tasks lose the second server at the same moment, so both clean up at once; the
    server stops early so that what they clean up is small."""
    stop_after = 5_000
    reached = threading.Event()
    with (
        beanpole.Server(listen="127.0.0.1", port=0) as a,
        beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)) as b,
    ):
        puts = [0]

        @b.hook("put")
        def count(event: Any) -> None:
            puts[0] += 1
            if puts[0] == stop_after:
                reached.set()

        stopper = threading.Thread(target=lambda: (reached.wait(120), b.stop()))
        stopper.start()
        servers = [_name(a), _name(b)]
        df = spark.range(ROWS).selectExpr("cast(id as string) as body")
        with pytest.raises(Exception):  # noqa: B017 - Spark wraps the task's error
            df.write.format("beanpole").option("servers", ",".join(servers)).option(
                "tube", "half"
            ).mode("append").save()
        stopper.join()
        assert reached.is_set()
        with beanpole.Client(servers[0]) as c:
            left = c.stats_tube("half") if "half" in c.tubes() else {"total-jobs": 0}
            assert c.stats()["current-jobs-ready"] == 0, left
    # The stopped server comes back from its log with the jobs it had taken.
    again = beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path))
    with again, beanpole.Client(_name(again)) as c:
        kept = c.stats_tube("half")["current-jobs-ready"]
    assert stop_after <= kept < ROWS


def test_write_task_messages_match_the_servers(
    two_servers: list[Any], pyspark_api: None
) -> None:
    """The task code outside Spark: the commit message's counts and ids are exactly the
    jobs on each server, and deleting them (what abort does) leaves none behind."""
    import pyarrow as pa

    from beanpole.spark import id_runs
    from beanpole.spark.options import QueueOptions
    from beanpole.spark.writer import delete_jobs, write_batches

    servers = [_name(s) for s in two_servers]
    opts = QueueOptions.from_options({"servers": ",".join(servers), "tube": "m"})
    batches = [
        pa.record_batch({"body": pa.array([f"{k}-{i}" for i in range(1000)])}) for k in range(5)
    ]
    msg = write_batches(opts, iter(batches))
    assert msg.total == 5000
    for server in servers:
        with beanpole.Client(server) as c:
            assert c.stats_tube("m")["current-jobs-ready"] == msg.counts[server] > 0
            ids = id_runs.expand(msg.runs[server])
            assert len(ids) == msg.counts[server]
            assert {c.stats_job(i)["tube"] for i in ids} == {"m"}
    assert delete_jobs(msg, opts, "test") == 5000
    for server in servers:
        with beanpole.Client(server) as c:
            assert c.stats()["current-jobs-ready"] == 0


def test_stream_writer(spark: Any, two_servers: list[Any], tmp_path: Path) -> None:
    server = _name(two_servers[0])
    src = tmp_path / "in"
    src.mkdir()
    spark.range(500).selectExpr("cast(id as string) as body").write.parquet(str(src / "p"))
    query = (
        spark.readStream.schema("body string")
        .parquet(str(src / "p"))
        .writeStream.format("beanpole")
        .option("servers", server)
        .option("tube", "streamed")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    with beanpole.Client(server, watch="streamed") as c:
        jobs = c.reserve_many(1000, 0)
    assert sorted(int(j.body) for j in jobs) == list(range(500))
