"""greenstalk putting jobs: the round trip, bodies in every encoding, the max job size."""

from __future__ import annotations

import random

import greenstalk
import pytest

from client_common import COMMON_BINARY_BODIES, COMMON_UNICODE_BODIES
from servers import Running

UNICODE_BODIES = [
    *COMMON_UNICODE_BODIES,
    "\r\n",
    "put 0 0 10 5\r\nhello\r\n",  # a protocol command as a body must stay a body
]

BINARY_BODIES = [*COMMON_BINARY_BODIES, random.Random(1234).randbytes(4096)]


# --------------------------------------------------------------------------- bodies


def test_put_reserve_delete_roundtrip(client: greenstalk.Client[str]) -> None:
    first = client.put("hello")
    second = client.put("world")
    assert (first, second) == (1, 2)  # a fresh server numbers jobs from 1

    stats = client.stats_job(first)
    assert stats["id"] == first
    assert stats["tube"] == "default"
    assert stats["state"] == "ready"
    assert stats["pri"] == greenstalk.DEFAULT_PRIORITY
    assert stats["delay"] == 0
    assert stats["ttr"] == greenstalk.DEFAULT_TTR
    assert stats["reserves"] == 0

    job = client.reserve()
    assert isinstance(job, greenstalk.Job)
    assert (job.id, job.body) == (first, "hello")
    assert repr(job) == f"greenstalk.Job(id={first}, body='hello')"
    reserved = client.stats_job(job)  # a Job works wherever an id does
    assert reserved["state"] == "reserved"
    assert reserved["reserves"] == 1
    assert 0 < reserved["time-left"] <= greenstalk.DEFAULT_TTR

    client.delete(job)
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_job(first)
    with pytest.raises(greenstalk.NotFoundError):
        client.peek(first)
    with pytest.raises(greenstalk.NotFoundError):
        client.delete(first)

    # delete by plain id, of a job that is ready (never reserved)
    client.delete(second)
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    s = client.stats()
    assert s["cmd-put"] == 2
    assert s["cmd-delete"] == 3  # the failed delete still counts as a delete command
    assert s["total-jobs"] == 2
    assert s["current-jobs-ready"] == 0


@pytest.mark.parametrize("body", UNICODE_BODIES)
def test_unicode_bodies(client: greenstalk.Client[str], body: str) -> None:
    jid = client.put(body)
    assert client.peek(jid).body == body
    job = client.reserve(timeout=0)
    assert (job.id, job.body) == (jid, body)
    client.delete(job)


def test_unicode_bodies_are_sized_in_bytes(
    any_server: Running, client: greenstalk.Client[str]
) -> None:
    """The server sees UTF-8 bytes: a bytes client reads exactly what was encoded."""
    with greenstalk.Client(any_server.address, encoding=None) as raw:
        for body in UNICODE_BODIES:
            jid = client.put(body)
            assert raw.peek(jid).body == body.encode("utf-8")
            client.delete(jid)


@pytest.mark.parametrize("body", BINARY_BODIES, ids=lambda b: f"{len(b)}B")
def test_binary_bodies_with_encoding_none(any_server: Running, body: bytes) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as c:
        assert c.encoding is None
        jid = c.put(body)
        peeked = c.peek(jid)
        assert isinstance(peeked.body, bytes)
        assert peeked.body == body
        job = c.reserve(timeout=0)
        assert (job.id, job.body) == (jid, body)
        c.delete(job)


def test_encoding_none_refuses_str(any_server: Running) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as c:
        with pytest.raises(TypeError):
            c.put("a str needs an encoding")  # type: ignore[arg-type]
        assert c.stats()["cmd-put"] == 0  # nothing reached the server


def test_other_encodings(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address, encoding="latin-1") as latin,
        greenstalk.Client(any_server.address, encoding="utf-16-le") as utf16,
        greenstalk.Client(any_server.address, encoding=None) as raw,
    ):
        a = latin.put("café")
        b = utf16.put("café")
        assert raw.peek(a).body == b"caf\xe9"
        assert raw.peek(b).body == "café".encode("utf-16-le")
        assert latin.reserve(timeout=0).body == "café"
        assert utf16.reserve(timeout=0).body == "café"
        # a str client also accepts bytes bodies, passing them through untouched
        c = latin.put(b"\x00\xff")  # type: ignore[arg-type]  # typed str, accepts bytes
        assert raw.peek(c).body == b"\x00\xff"


def test_undecodable_body_keeps_connection_in_sync(
    any_server: Running, client: greenstalk.Client[str]
) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as raw:
        jid = raw.put(b"\xff\xfe bad utf-8")
    with pytest.raises(UnicodeDecodeError):
        client.peek(jid)
    # the whole body was read before decoding, so the next reply lines up
    assert client.stats_job(jid)["state"] == "ready"
    assert client.using() == "default"


# --------------------------------------------------------------------------- sizes


def test_max_job_size_boundary(small_server: Running) -> None:
    with greenstalk.Client(small_server.address, encoding=None) as c:
        assert c.stats()["max-job-size"] == 100
        with pytest.raises(greenstalk.JobTooBigError):
            c.put(b"y" * 101)
        # the server skipped the oversized body: the connection is still usable and no
        # job (and no job id) was created
        jid = c.put(b"x" * 100)
        assert jid == 1
        assert c.stats()["current-jobs-ready"] == 1
        job = c.reserve(timeout=0)
        assert (job.id, job.body) == (1, b"x" * 100)
        with pytest.raises(greenstalk.JobTooBigError):
            c.put(b"\r\n" * 51)
        assert c.stats()["total-jobs"] == 1


def test_max_job_size_counts_utf8_bytes(small_server: Running) -> None:
    with greenstalk.Client(small_server.address) as c:
        fits = "é" * 50  # 50 characters, 100 bytes
        jid = c.put(fits)
        assert c.peek(jid).body == fits
        with pytest.raises(greenstalk.JobTooBigError):
            c.put(fits + "a")  # 51 characters, 101 bytes
        with pytest.raises(greenstalk.JobTooBigError):
            c.put("🐍" * 26)  # 26 characters, 104 bytes
        assert c.stats()["total-jobs"] == 1


def test_default_max_job_size(any_server: Running) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as raw:
        limit = raw.stats()["max-job-size"]
        assert limit == 65535
        body = random.Random(7).randbytes(limit)
        jid = raw.put(body)
        with pytest.raises(greenstalk.JobTooBigError):
            raw.put(body + b"!")
        job = raw.reserve(timeout=0)
        assert (job.id, job.body) == (jid, body)
