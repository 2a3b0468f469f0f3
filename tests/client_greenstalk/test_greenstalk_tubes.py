"""greenstalk and tubes: use, watch, ignore, listing, names, constructor tubes, pauses."""

from __future__ import annotations

import time

import greenstalk
import pytest

from servers import Running


def test_use_watch_ignore_and_listing(client: greenstalk.Client[str]) -> None:
    assert client.using() == "default"
    assert client.watching() == ["default"]
    assert client.tubes() == ["default"]
    client.use("jobs")
    assert client.using() == "jobs"
    jid = client.put("in jobs")
    assert sorted(client.tubes()) == ["default", "jobs"]
    assert client.stats_job(jid)["tube"] == "jobs"

    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)  # still watching only default
    assert client.watch("jobs") == 2
    assert client.watch("jobs") == 2  # idempotent
    assert sorted(client.watching()) == ["default", "jobs"]
    assert client.ignore("default") == 1
    assert client.ignore("default") == 1  # ignoring an unwatched tube is fine
    assert client.watching() == ["jobs"]
    with pytest.raises(greenstalk.NotIgnoredError):
        client.ignore("jobs")  # the last watched tube
    assert client.watching() == ["jobs"]
    assert client.reserve(timeout=0).id == jid

    tube = client.stats_tube("jobs")
    assert tube["name"] == "jobs"
    assert tube["total-jobs"] == 1
    assert tube["current-jobs-reserved"] == 1
    assert tube["current-using"] == 1
    assert tube["current-watching"] == 1
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_tube("no-such-tube")
    s = client.stats()
    assert s["cmd-use"] == 1
    assert s["cmd-watch"] == 2
    assert s["cmd-ignore"] == 3
    assert s["cmd-list-tube-used"] == 2
    assert s["cmd-list-tubes-watched"] == 4
    assert s["cmd-list-tubes"] == 2


def test_unused_tube_disappears(any_server: Running) -> None:
    with greenstalk.Client(any_server.address) as observer:
        with greenstalk.Client(any_server.address, use="temp") as c:
            assert "temp" in observer.tubes()
            assert observer.stats()["current-tubes"] == 2
            c.use("default")
        assert observer.tubes() == ["default"]
        assert observer.stats()["current-tubes"] == 1


def test_tube_names(client: greenstalk.Client[str]) -> None:
    odd = "a-+/;.$_()Z9"
    assert client.watch(odd) == 2
    client.use(odd)
    assert client.using() == odd
    longest = "t" * 200
    client.use(longest)
    assert client.using() == longest
    client.use("1.5")  # looks like a number, is still a name
    assert "1.5" in client.tubes()
    for bad in ("-leading-hyphen", "t" * 201, "has space", "star*"):
        with pytest.raises(greenstalk.BadFormatError):
            client.use(bad)
        with pytest.raises(greenstalk.BadFormatError):
            client.watch(bad)
    assert client.using() == "1.5"
    with pytest.raises(UnicodeEncodeError):
        client.use("tübe")  # greenstalk only sends ASCII tube names


def test_constructor_use_and_watch(any_server: Running) -> None:
    with greenstalk.Client(any_server.address, use="out", watch=["in1", "in2"]) as c:
        assert c.using() == "out"
        assert sorted(c.watching()) == ["in1", "in2"]
    with greenstalk.Client(any_server.address, watch="solo") as c:
        assert c.watching() == ["solo"]
        assert c.using() == "default"
    with greenstalk.Client(any_server.address, watch=("default", "extra")) as c:
        assert sorted(c.watching()) == ["default", "extra"]
    with (
        greenstalk.Client(any_server.address, use="pipe") as producer,
        greenstalk.Client(any_server.address, watch="pipe") as consumer,
    ):
        producer.put("through the pipe")
        assert consumer.reserve(timeout=0).body == "through the pipe"


def test_pause_tube(client: greenstalk.Client[str]) -> None:
    jid = client.put("paused")
    client.pause_tube("default", 3600)
    tube = client.stats_tube("default")
    assert tube["pause"] == 3600
    assert 3590 <= tube["pause-time-left"] <= 3600
    assert tube["cmd-pause-tube"] == 1
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    client.pause_tube("default", 0)  # a zero pause lifts the pause
    assert client.stats_tube("default")["pause"] == 0
    job = client.reserve(timeout=0)
    assert job.id == jid
    client.release(job)

    client.pause_tube("default", 1)
    t0 = time.monotonic()
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    assert client.reserve(timeout=3).id == jid  # handed out once the pause ends
    assert 0.5 <= time.monotonic() - t0 < 3
    with pytest.raises(greenstalk.NotFoundError):
        client.pause_tube("no-such-tube", 1)
    assert client.stats()["cmd-pause-tube"] == 4
