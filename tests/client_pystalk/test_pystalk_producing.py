"""pystalk putting jobs: the round trip, text and binary bodies, the max job size."""

from __future__ import annotations

import random

import pystalk  # type: ignore[import-untyped]
import pytest
from pystalk.client import Job  # type: ignore[import-untyped]

from client_common import COMMON_BINARY_BODIES, COMMON_UNICODE_BODIES
from pystalk_common import DEFAULT_PRI, DEFAULT_TTR, inserted, open_client, raises_beanstalk
from servers import Running

UNICODE_BODIES = [
    *COMMON_UNICODE_BODIES,
    "INSERTED 99\r\n",  # a reply line as a body must stay a body
]

BINARY_BODIES = [
    *COMMON_BINARY_BODIES,
    random.Random(99).randbytes(5000),  # several of pystalk's 4096-byte reads
    random.Random(98).randbytes(65535),  # the default max job size
]


def test_put_reserve_delete(client: pystalk.BeanstalkClient) -> None:
    first = inserted(client.put_job("hello"))
    second = inserted(client.put_job(b"world"))
    assert (first, second) == (1, 2)  # a fresh server numbers jobs from 1

    stats = client.stats_job(first)
    assert stats["id"] == first
    assert stats["tube"] == "default"
    assert stats["state"] == "ready"
    assert stats["pri"] == DEFAULT_PRI
    assert stats["ttr"] == DEFAULT_TTR
    assert stats["delay"] == 0

    job = client.reserve_job(0)
    assert isinstance(job, Job)
    assert job == Job(first, b"hello")  # bytes unless auto_decode
    assert client.stats_job(job)["state"] == "reserved"  # a Job works where an id does
    assert client.stats_job(job)["reserves"] == 1
    client.delete_job(job)
    with raises_beanstalk("NOT_FOUND"):
        client.stats_job(first)
    with raises_beanstalk("NOT_FOUND"):
        client.delete_job(first)

    client.delete_job(second)  # a ready job can be deleted by id without reserving it
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    s = client.stats()
    assert (s["cmd-put"], s["cmd-delete"], s["total-jobs"]) == (2, 3, 2)


@pytest.mark.parametrize("body", UNICODE_BODIES)
def test_unicode_bodies(any_server: Running, body: str) -> None:
    with open_client(any_server, auto_decode=True) as text, open_client(any_server) as raw:
        jid = inserted(text.put_job(body))
        assert raw.peek_ready() == Job(jid, body.encode("utf-8"))
        assert text.reserve_job(0) == Job(jid, body)


@pytest.mark.parametrize("body", BINARY_BODIES, ids=lambda b: f"{len(b)}B")
def test_binary_bodies(client: pystalk.BeanstalkClient, body: bytes) -> None:
    jid = inserted(client.put_job(body))
    assert client.peek_ready() == Job(jid, body)
    job = client.reserve_job(0)
    assert job.job_id == jid
    assert job.job_data == body
    client.delete_job(job)


def test_auto_decode_of_invalid_utf8(any_server: Running) -> None:
    with open_client(any_server, auto_decode=True) as c:
        jid = inserted(c.put_job(b"\xff\xfe not utf-8"))
        with pytest.raises(UnicodeDecodeError):
            c.peek_ready()
        # the body was read in full before decoding: the connection is still in step
        assert c.stats_job(jid)["state"] == "ready"


def test_max_job_size_boundary(small_server: Running) -> None:
    with open_client(small_server) as c:
        assert c.stats()["max-job-size"] == 100
        with raises_beanstalk("JOB_TOO_BIG"):
            c.put_job(b"y" * 101)
        jid = inserted(c.put_job(b"x" * 100))  # the connection is still usable
        assert jid == 1  # and the refused job used up no id
        with raises_beanstalk("JOB_TOO_BIG"):
            c.put_job("é" * 50 + "a")  # 51 characters, 101 bytes
        assert c.reserve_job(0) == Job(1, b"x" * 100)
        assert inserted(c.put_job("é" * 50)) == 2  # 100 bytes exactly
        assert c.stats()["total-jobs"] == 2


def test_default_max_job_size(client: pystalk.BeanstalkClient) -> None:
    assert client.stats()["max-job-size"] == 65535
    with raises_beanstalk("JOB_TOO_BIG"):
        client.put_job(b"z" * 65536)
    assert client.stats()["total-jobs"] == 0
