"""The ``beanpole`` batch reader: ready jobs to rows, then the ``ack``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import beanpole

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
    rows = _read(spark, servers, tube="work", **{"partitions-per-server": "2"})
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
    rows = _read(spark, servers, tubes="one,two", **{"max-jobs": "500"})
    assert len(rows) == 500
    assert {r["tube"] for r in rows} <= {"one", "two"}
    rest = _read(spark, servers, tubes="one,two")
    assert len(rest) == 700
    assert {r["tube"] for r in rest} == {"one", "two"}
    assert [_ready(s) for s in servers] == [300, 300]


def test_an_empty_tube_reads_no_rows(spark: Any, servers: list[str]) -> None:
    assert _read(spark, servers, tube="nothing") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ack": "forget"}, "option ack must be one of delete, release, bury, none"),
        ({"partitions-per-server": "0"}, "option partitions-per-server must be between"),
        ({"max-jobs": "many"}, "option max-jobs must be a whole number"),
    ],
)
def test_bad_options_give_one_clear_error(
    spark: Any, servers: list[str], options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _read(spark, servers, **options)
