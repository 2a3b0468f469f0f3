"""Pipelined batches against both servers: results, per-job settings, pyarrow arrays,
bounded memory for a long generator, and failures in the middle (a JOB_TOO_BIG at item k,
a NOT_FOUND at item k, an iterable that raises, the server stopped mid-batch)."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator

import pytest

from beanpole.client import Client
from beanpole.client import errors as errors
from native_common import stop_server
from servers import Running

pytestmark = pytest.mark.timeout(120)


def test_put_many_then_reserve_many_then_delete_many(client: Client[str]) -> None:
    bodies = [f"job {i}" for i in range(2500)]
    ids = client.put_many(iter(bodies), window=100)
    assert len(ids) == 2500 and ids == sorted(ids) and len(set(ids)) == 2500
    jobs = client.reserve_many(3000, timeout=0, window=64)
    assert [j.body for j in jobs] == bodies
    assert [j.id for j in jobs] == ids
    client.delete_many(jobs, window=50)
    assert client.stats()["current-jobs-reserved"] == 0
    assert client.stats()["current-jobs-ready"] == 0
    assert client.reserve_many(10) == []


def test_reserve_many_waits_for_the_first_job_only(client: Client[str]) -> None:
    client.put_many(["a", "b", "c"])
    jobs = client.reserve_many(10, timeout=2)
    assert [j.body for j in jobs] == ["a", "b", "c"]
    with pytest.raises(errors.TimedOutError):
        client.reserve(0)
    assert client.reserve_many(1, timeout=1) == []


def test_per_job_settings(client: Client[str]) -> None:
    ids = client.put_many(["a", "b", "c"], priority=[3, 2, 1], delay=[0, 100, 0], ttr=7)
    assert [client.stats_job(i)["pri"] for i in ids] == [3, 2, 1]
    assert [client.stats_job(i)["state"] for i in ids] == ["ready", "delayed", "ready"]
    assert {client.stats_job(i)["ttr"] for i in ids} == {7}
    with pytest.raises(errors.BatchError) as info:
        client.put_many(["x", "y"], priority=[1])
    assert info.value.index == 1 and isinstance(info.value.reason, ValueError)
    assert len(info.value.ids) == 1


def test_put_many_into_a_tube_goes_back_to_the_tube_in_use(client: Client[str]) -> None:
    client.use("mine")
    client.put_many(["t"], tube="other")
    assert client.using() == "mine"
    assert client.stats_tube("other")["current-jobs-ready"] == 1


def test_release_and_bury_many(client: Client[str]) -> None:
    ids = client.put_many(["a", "b", "c", "d"])
    jobs = client.reserve_many(4)
    client.release_many(jobs[:2], priority=5, delay=0)
    client.bury_many(jobs[2:], priority=6)
    assert [client.stats_job(i)["state"] for i in ids] == ["ready", "ready", "buried", "buried"]
    assert client.stats_job(ids[0])["pri"] == 5 and client.stats_job(ids[3])["pri"] == 6
    assert client.kick(10) == 2


def test_bytes_and_buffers(bclient: Client[bytes]) -> None:
    bodies: list[object] = [b"\x00\xff", bytearray(b"ba"), memoryview(b"mv"), b""]
    ids = bclient.put_many(bodies)
    got = bclient.reserve_many(10)
    assert [j.body for j in got] == [b"\x00\xff", b"ba", b"mv", b""]
    assert [j.id for j in got] == ids
    with pytest.raises(errors.BatchError) as info:
        bclient.put_many([b"ok", "text"])
    assert info.value.index == 1 and isinstance(info.value.reason, TypeError)


def test_job_too_big_at_item_k(small_server: Running) -> None:
    with Client(small_server.address) as c:
        k = 37
        bodies = ["x" * (101 if i == k else 10) for i in range(200)]
        with pytest.raises(errors.BatchError) as info:
            c.put_many(bodies, window=10)
        err = info.value
        assert err.index == k
        assert isinstance(err.reason, errors.JobTooBigError)
        assert err.ids == list(range(1, k + 1))
        # Items in flight behind item k were stored; each is reported, none twice.
        after_ids = [job_id for _, job_id in err.after]
        assert all(k < i < k + 10 for i, _ in err.after)
        assert c.stats()["current-jobs-ready"] == k + len(after_ids)
        assert c.put("still in step") == k + len(after_ids) + 1


def test_not_found_at_item_k(client: Client[str]) -> None:
    ids = client.put_many(["a"] * 10)
    with pytest.raises(errors.BatchError) as info:
        client.delete_many([*ids[:4], 999_999, *ids[4:]], window=4)
    assert info.value.index == 4
    assert isinstance(info.value.reason, errors.NotFoundError)
    assert info.value.ids == ids[:4]
    deleted_after = [i for _, i in info.value.after]
    assert client.stats()["current-jobs-ready"] == 10 - 4 - len(deleted_after)


def test_iterable_that_raises(client: Client[str]) -> None:
    def bodies() -> Iterator[str]:
        yield from ["a", "b", "c"]
        raise RuntimeError("source broke")

    with pytest.raises(errors.BatchError) as info:
        client.put_many(bodies())
    assert info.value.index == 3
    assert isinstance(info.value.reason, RuntimeError)
    assert info.value.ids == [1, 2, 3]


def test_server_stopped_mid_batch(any_server: Running) -> None:
    c = Client(any_server.address, timeout=30)
    c.put("warm up")  # the server is up before the batch starts
    produced = threading.Event()

    def bodies() -> Iterator[str]:
        for i in range(10_000_000):
            if i == 5000:
                produced.set()
                stop_server(any_server)
            yield "b" * 100

    with pytest.raises(errors.BatchError) as info:
        c.put_many(bodies(), window=200)
    err = info.value
    assert produced.is_set()
    assert isinstance(err.reason, errors.ClientConnectionError)
    assert err.ids == list(range(2, 2 + len(err.ids)))
    assert 4000 <= err.index <= 5200
    with pytest.raises(errors.NotConnectedError):
        c.put("x")


def test_long_generator_in_bounded_memory(client: Client[bytes] | Client[str]) -> None:
    """50,000 bodies of 1 KiB (50 MB if they were all held) pass with the Python heap
    peaking far below that: only a window's worth is alive at a time."""
    n = 50_000

    def bodies() -> Iterator[str]:
        for i in range(n):
            yield f"{i:08d}" + "x" * 1016

    tracemalloc.start()
    try:
        ids = client.put_many(bodies())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(ids) == n
    assert peak < 8 * 1024 * 1024, peak


def test_pyarrow_arrays(bclient: Client[bytes]) -> None:
    pa = pytest.importorskip("pyarrow")
    arrays = [
        pa.array([b"a", b"", b"ccc"], pa.binary()),
        pa.array(["d", "ee"], pa.string()),
        pa.array([b"f", b"g", b"h"], pa.large_binary()).slice(1),
        pa.array(["i"], pa.large_string()),
        pa.chunked_array([[b"j"], [b"k", b"l"]]),
    ]
    ids: list[int] = []
    for arr in arrays:
        ids += bclient.put_many(arr, priority=4)
    jobs = bclient.reserve_many(100)
    assert [j.body for j in jobs] == [
        b"a",
        b"",
        b"ccc",
        b"d",
        b"ee",
        b"g",
        b"h",
        b"i",
        b"j",
        b"k",
        b"l",
    ]
    assert [j.id for j in jobs] == ids
    assert bclient.stats_job(ids[0])["pri"] == 4
    with pytest.raises(ValueError):
        bclient.put_many(pa.array([b"a", None]))
    with pytest.raises(TypeError):
        bclient.put_many(pa.array([1, 2]))
    many = pa.array([b"%d" % i for i in range(3000)])
    assert len(bclient.put_many(many, priority=range(3000), window=100)) == 3000


def test_pyarrow_failure_reports_the_index_across_chunks(small_server: Running) -> None:
    pa = pytest.importorskip("pyarrow")
    with Client(small_server.address, encoding=None) as c:
        arr = pa.chunked_array([[b"a", b"b"], [b"c", b"x" * 101, b"d"]])
        with pytest.raises(errors.BatchError) as info:
            c.put_many(arr, window=1)
        assert info.value.index == 3
        assert info.value.ids == [1, 2, 3]


def test_other_encodings(any_server: Running) -> None:
    with Client(any_server.address, encoding="latin-1") as c:
        ids = c.put_many(["café", b"raw\xe9"])
        c.put("ñ")
        jobs = c.reserve_many(3)
        assert [j.body for j in jobs] == ["café", "rawé", "ñ"]
        assert [j.id for j in jobs][:2] == ids
    with Client(any_server.address, encoding=None) as raw:
        raw.put_many([b"x"])
        assert raw.peek(ids[0]).body == "café".encode("latin-1")
