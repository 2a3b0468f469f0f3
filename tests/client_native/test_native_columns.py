"""``Client.put_arrow`` (per-row settings and tubes from Arrow columns),
``Client.stats_job_many``, ``ttr_many``, ``touch_many`` and the key hashing done in
Rust, against both servers."""

from __future__ import annotations

import pytest

from beanpole import _core
from beanpole.client import Client
from beanpole.client import errors as errors
from beanpole.client.sharded import rendezvous
from servers import Running

pa = pytest.importorskip("pyarrow")

pytestmark = pytest.mark.timeout(120)


def test_per_row_settings_and_tubes(bclient: Client[bytes]) -> None:
    n = 3000
    bodies = pa.array([bytes([i % 256]) * (i % 7) for i in range(n)], pa.binary())
    pri = pa.array([i % 1000 for i in range(n)], pa.uint32())
    ttr = pa.array([1 + i % 90 for i in range(n)], pa.uint32())
    delay = pa.array([3600 if i % 500 == 1 else 0 for i in range(n)], pa.uint32())
    tubes = pa.array([f"t{i // 7 % 3}" for i in range(n)])
    ids = bclient.put_arrow(bodies, priority=pri, delay=delay, ttr=ttr, tube=tubes, window=64)
    assert str(ids.type) == "uint64" and len(ids) == n
    ids_list = ids.to_pylist()
    for i in range(0, n, 97):
        st = bclient.stats_job(ids_list[i])
        assert (st["pri"], st["ttr"], st["delay"], st["tube"]) == (
            i % 1000,
            1 + i % 90,
            3600 if i % 500 == 1 else 0,
            f"t{i // 7 % 3}",
        )
        assert bclient.peek(ids_list[i]).body == bodies[i].as_py()
    assert bclient.stats_job_many([ids_list[0], ids_list[5], 10**9]) == [
        ("t0", 0),
        ("t0", 5),
        None,
    ]


def test_ttr_many_and_touch_many(bclient: Client[bytes]) -> None:
    """Pipelined TTRs and touches: each job's own TTR, None when gone; a touch is True
    only for a job this connection holds (NOT_FOUND otherwise, as `touch`)."""
    ids = [bclient.put(b"t%d" % i, ttr=1 + i % 7) for i in range(700)]
    assert bclient.ttr_many([*ids, 10**9]) == [*(1 + i % 7 for i in range(700)), None]
    held = [j.id for j in bclient.reserve_many(300, 0)]
    assert held == ids[:300]
    assert bclient.touch_many(held + ids[300:310]) == [True] * 300 + [False] * 10
    bclient.delete_many(held)
    assert bclient.touch_many(held[:5]) == [False] * 5


def test_sliced_columns_and_one_value(bclient: Client[bytes]) -> None:
    bodies = pa.array([b"a", b"b", b"c", b"d"]).slice(1, 2)
    pri = pa.array([9, 8, 7, 6], pa.uint32()).slice(2)
    ids = bclient.put_arrow(bodies, priority=pri, ttr=5, tube=pa.array(["x", "y"]))
    got = [(bclient.peek(i).body, bclient.stats_job(i)["pri"]) for i in ids.to_pylist()]
    assert got == [(b"b", 7), (b"c", 6)]


def test_bad_columns_are_refused_before_anything_is_sent(bclient: Client[bytes]) -> None:
    bodies = pa.array([b"a", b"b"])
    with pytest.raises(ValueError, match="priority has 1 items"):
        bclient.put_arrow(bodies, priority=pa.array([1], pa.uint32()))
    with pytest.raises(TypeError, match="uint32"):
        bclient.put_arrow(bodies, ttr=pa.array([1, 2], pa.int64()))
    with pytest.raises(ValueError, match="null tube"):
        bclient.put_arrow(bodies, tube=pa.array(["a", None]))
    with pytest.raises(ValueError, match="outside"):
        bclient.put_arrow(bodies, delay=-1)
    assert bclient.stats()["current-jobs-ready"] == 0


def test_a_refused_item_reports_its_row(small_server: Running) -> None:
    with Client(small_server.address, encoding=None) as c:
        bodies = pa.array([b"a", b"b", b"x" * 101, b"d"])
        with pytest.raises(errors.BatchError) as info:
            c.put_arrow(bodies, tube=pa.array(["p", "q", "q", "p"]), window=1)
        assert info.value.index == 2
        assert info.value.ids == [1, 2]


def test_shard_column_agrees_with_rendezvous() -> None:
    servers = ["127.0.0.1:11300", "127.0.0.1:11301", "10.0.0.7:11300"]
    keys = pa.array([f"user-{i}" for i in range(2000)] + [None, "", "é"])
    validity, offsets, data = keys.buffers()
    picks = _core.shard_column(offsets, data, False, 0, len(keys), validity, servers, 1)
    got = list(memoryview(picks).cast("I"))
    for i, key in enumerate(keys.to_pylist()):
        if key is None:
            assert got[i] == (1 + i) % 3
        else:
            assert servers[got[i]] == rendezvous(servers, key)
    assert len(set(got)) == 3


def test_reserve_job_many_takes_the_named_jobs(any_server: Running) -> None:
    with (
        Client(any_server.address, encoding=None, timeout=30) as c,
        Client(any_server.address, encoding=None, timeout=30) as other,
    ):
        ids = [c.put(bytes([i]) * (i + 1)) for i in range(6)]
        c.delete(ids[1])
        assert other.reserve_job(ids[2]).id == ids[2]
        got = c.reserve_job_many([*ids, 10**9], window=2)
        assert [None if j is None else (j.id, j.body) for j in got] == [
            (ids[0], b"\x00"),
            None,
            None,
            (ids[3], b"\x03" * 4),
            (ids[4], b"\x04" * 5),
            (ids[5], b"\x05" * 6),
            None,
        ]
        for job in (ids[0], ids[3], ids[4], ids[5]):
            assert c.stats_job(job)["state"] == "reserved"
        # Reserved by this connection already: reserve-job does not find it again.
        assert c.reserve_job_many([ids[0]]) == [None]
        assert c.reserve_job_many([]) == []
