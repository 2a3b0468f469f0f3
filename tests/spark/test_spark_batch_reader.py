"""The ``beanpole`` batch reader: ready jobs to rows, then the ``ack``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import beanpole
import beanpole.spark

pytestmark = pytest.mark.spark


def _name(srv: beanpole.Server) -> str:
    host, port = srv.address  # type: ignore[misc]
    return f"{host}:{port}"


@pytest.fixture
def servers() -> Iterator[list[str]]:
    with (
        beanpole.Server(listen="127.0.0.1", port=0) as a,
        beanpole.Server(listen="127.0.0.1", port=0) as b,
    ):
        yield [_name(a), _name(b)]


def _fill(servers: list[str], n: int, tube: str = "work") -> dict[bytes, tuple[str, int, int]]:
    """Put ``n`` jobs per server with every byte value in the bodies; body -> (server,
    id, priority)."""
    out = {}
    for k, server in enumerate(servers):
        with beanpole.Client(server, encoding=None, use=tube) as c:
            for i in range(n):
                body = bytes([i % 256, k]) + str(i).encode()
                pri = (i * 7) % 5000
                out[body] = (server, c.put(body, priority=pri), pri)
    return out


def _read(spark: Any, servers: list[str], **options: str) -> list[Any]:
    reader = spark.read.format("beanpole").option("servers", ",".join(servers))
    return list(reader.options(**options).load().collect())


def _ready(server: str) -> int:
    with beanpole.Client(server) as c:
        return int(c.stats()["current-jobs-ready"])


def test_read_and_delete(spark: Any, servers: list[str]) -> None:
    want = _fill(servers, 3000)
    rows = _read(spark, servers, tube="work", ack="delete", partitionsPerServer="2")
    assert len(rows) == len(want) == 6000
    for row in rows:
        server, job_id, pri = want[bytes(row["body"])]
        assert (row["server"], row["id"], row["tube"], row["priority"]) == (
            server,
            job_id,
            "work",
            pri,
        )
    assert {bytes(r["body"])[0] for r in rows} == set(range(256))
    assert [_ready(s) for s in servers] == [0, 0]
    with beanpole.Client(servers[0]) as c:
        assert c.stats()["cmd-delete"] == 3000


def test_release_puts_jobs_back_with_their_priority(spark: Any, servers: list[str]) -> None:
    want = _fill(servers[:1], 500)
    rows = _read(spark, servers[:1], tube="work", ack="release")
    assert len(rows) == 500
    with beanpole.Client(servers[0], encoding=None) as c:
        assert c.stats()["current-jobs-ready"] == 500
        assert c.stats()["cmd-release"] == 500
        for _server, job_id, pri in want.values():
            assert c.stats_job(job_id)["pri"] == pri


def test_bury(spark: Any, servers: list[str]) -> None:
    _fill(servers, 200)
    rows = _read(spark, servers, tube="work", ack="bury")
    assert len(rows) == 400
    for server in servers:
        with beanpole.Client(server) as c:
            assert (c.stats()["current-jobs-buried"], c.stats()["current-jobs-ready"]) == (200, 0)


def test_none_leaves_the_jobs_to_come_back(spark: Any, servers: list[str]) -> None:
    _fill(servers, 100)
    rows = _read(spark, servers, tube="work", ack="none")
    assert len(rows) == 200
    # The connections closed, so the server released what they had reserved.
    assert [_ready(s) for s in servers] == [100, 100]
    assert len(_read(spark, servers, tube="work")) == 200


def test_max_jobs_and_tubes(spark: Any, servers: list[str]) -> None:
    _fill(servers, 300, tube="one")
    _fill(servers, 300, tube="two")
    _fill(servers, 300, tube="three")
    rows = _read(spark, servers, tubes="one,two", ack="delete", **{"max-jobs": "500"})
    assert len(rows) == 500
    assert {r["tube"] for r in rows} <= {"one", "two"}
    rest = _read(spark, servers, tubes="one,two", ack="delete")
    assert len(rest) == 700
    assert {r["tube"] for r in rest} == {"one", "two"}
    assert [_ready(s) for s in servers] == [300, 300]


def test_an_empty_tube_reads_no_rows(spark: Any, servers: list[str]) -> None:
    assert _read(spark, servers, tube="nothing") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ack": "forget"}, "option ack must be one of release, delete, bury, none"),
        ({"partitions-per-server": "0"}, "option partitions-per-server must be a whole number"),
        ({"maxJobs": "many"}, "option maxJobs must be a whole number from 0"),
        ({"maxJobs": "5", "max-jobs": "6"}, "option maxJobs is given twice"),
        ({"tube": "-x"}, "option tube must be a tube name"),
        ({"tube": "a", "tubes": "b"}, "give option tube or option tubes, not both"),
    ],
)
def test_bad_options_give_one_clear_error(
    spark: Any, servers: list[str], options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _read(spark, servers, **options)


def _left(server: str, tube: str = "work") -> int:
    with beanpole.Client(server) as c:
        try:
            return int(c.stats_tube(tube)["current-jobs-ready"])
        except beanpole.client.NotFoundError:
            return 0


def test_a_read_whose_consumer_fails_loses_no_job(spark: Any, servers: list[str]) -> None:
    """The default ack gives the jobs back: a consumer that fails before it wrote
    anything (here, at its first row) leaves every job in the queue."""
    _fill(servers, 500)
    jobs = spark.read.format("beanpole").option("servers", ",".join(servers)).option(
        "tube", "work"
    ).load()

    def fail(rows: Any) -> None:
        for _ in rows:
            raise RuntimeError("the sink is down")

    with pytest.raises(Exception, match="the sink is down"):
        jobs.foreachPartition(fail)
    assert [_left(s) for s in servers] == [500, 500]


def test_ack_deletes_exactly_what_the_sink_wrote(
    spark: Any, servers: list[str], tmp_path: Any
) -> None:
    """Read (jobs given back), write, then ack what was written: exactly those jobs
    are deleted, also when more jobs arrived after the read."""
    want = _fill(servers, 400)
    out = str(tmp_path / "out")
    jobs = spark.read.format("beanpole").option("servers", ",".join(servers)).option(
        "tube", "work"
    ).load()
    jobs.write.parquet(out)
    later = _fill(servers[:1], 50)  # put after the read: not in the table
    written = spark.read.parquet(out)
    assert {bytes(r["body"]) for r in written.collect()} == set(want)
    acked = beanpole.spark.ack(written)
    assert (acked.deleted, acked.gone, acked.orphaned) == (800, 0, 0)
    assert [_left(s) for s in servers] == [50, 0]
    with beanpole.Client(servers[0], encoding=None, watch="work") as c:
        left = c.reserve_many(100, 0)
    assert {j.body for j in left} == set(later)
    # Acked again: nothing more to delete.
    again = beanpole.spark.ack(written)
    assert (again.deleted, again.gone) == (0, 800)


def test_ack_refuses_rows_that_would_read_the_queue_again(
    spark: Any, servers: list[str]
) -> None:
    _fill(servers, 10)
    jobs = spark.read.format("beanpole").option("servers", ",".join(servers)).option(
        "tube", "work"
    ).load()
    with pytest.raises(ValueError, match="reads the queue again"):
        beanpole.spark.ack(jobs)
    with pytest.raises(ValueError, match="reads the queue again"):
        beanpole.spark.ack(jobs.filter("id > 0"))
    cached = jobs.cache()
    assert cached.count() == 20
    assert beanpole.spark.ack(cached).deleted == 20
    cached.unpersist()
    assert [_left(s) for s in servers] == [0, 0]
    with pytest.raises(ValueError, match="needs the columns"):
        beanpole.spark.ack(spark.range(3))


def test_ack_leaves_jobs_of_a_restarted_server_alone(spark: Any, tmp_path: Any) -> None:
    """Rows read from a server that then restarted without its log name ids that now
    belong to other jobs: ack leaves those alone and counts them."""
    with beanpole.Server(listen="127.0.0.1", port=0) as first:
        address = _name(first)
        _fill([address], 30)
        rows = spark.read.format("beanpole").option("servers", address).option(
            "tube", "work"
        ).load().localCheckpoint()
        assert rows.count() == 30
        port = first.address[1]  # type: ignore[misc]
    with beanpole.Server(listen="127.0.0.1", port=port) as second:
        assert _name(second) == address
        fresh = _fill([address], 30)  # ids 1..30 again, other jobs
        acked = beanpole.spark.ack(rows)
        assert (acked.deleted, acked.orphaned) == (0, 30)
        assert _left(address) == len(fresh) == 30
