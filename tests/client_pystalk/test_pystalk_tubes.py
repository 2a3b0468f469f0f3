"""pystalk and tubes: use, using, watch, ignore, watchlist, reconnects, pauses, names."""

from __future__ import annotations

import time

import pystalk  # type: ignore[import-untyped]
import pytest
from pystalk.client import BeanstalkInsertingProxy, Job  # type: ignore[import-untyped]

from client_common import wait_until
from pystalk_common import connect, inserted, open_client, raises_beanstalk
from servers import Running


def test_use_using_and_put_job_into(client: pystalk.BeanstalkClient) -> None:
    assert client.current_tube == "default"
    client.use("main")
    assert client.current_tube == "main"
    main_id = inserted(client.put_job("into main"))

    with client.using("side") as inserter:
        assert isinstance(inserter, BeanstalkInsertingProxy)
        assert (inserter.tube, inserter.beanstalk_client) == ("side", client)
        assert client.current_tube == "side"
        side_id = inserted(inserter.put_job("into side", pri=3, delay=3600, ttr=30))
    assert client.current_tube == "main"  # restored

    with pytest.raises(RuntimeError), client.using("oops"):
        raise RuntimeError("the previous tube is restored even on error")
    assert client.current_tube == "main"

    other_id = inserted(client.put_job_into("other", b"into other", pri=9, ttr=15))
    assert client.current_tube == "main"
    assert client.stats_job(main_id)["tube"] == "main"
    side = client.stats_job(side_id)
    assert (side["tube"], side["pri"], side["state"], side["ttr"]) == ("side", 3, "delayed", 30)
    other = client.stats_job(other_id)
    assert (other["tube"], other["pri"], other["ttr"]) == ("other", 9, 15)
    assert sorted(client.list_tubes()) == ["default", "main", "other", "side"]

    tube = client.stats_tube("side")
    assert tube["name"] == "side"
    assert (tube["total-jobs"], tube["current-jobs-delayed"], tube["current-using"]) == (1, 1, 0)
    assert client.stats_tube("main")["current-using"] == 1
    with raises_beanstalk("NOT_FOUND"):
        client.stats_tube("no-such-tube")


def test_watch_ignore_and_watchlist(client: pystalk.BeanstalkClient) -> None:
    assert client.watchlist == {"default"}
    inserted(client.put_job_into("a", "from a"))
    inserted(client.put_job_into("b", "from b"))
    client.watch("a")  # the first explicit watch drops "default"
    assert client.watchlist == {"a"}
    assert client.stats_tube("a")["current-watching"] == 1
    assert client.stats_tube("default")["current-watching"] == 0
    assert client.reserve_job(0).job_data == b"from a"

    client.watch("default")
    assert client.watchlist == {"a", "default"}
    client.ignore("a")
    assert client.watchlist == {"default"}
    with pytest.raises(KeyError):
        client.ignore("never-watched")  # pystalk checks its own list first
    with raises_beanstalk("NOT_IGNORED"):
        client.ignore("default")  # the server refuses to drop the last tube
    assert client.watchlist == {"default"}

    client.watchlist = ["b", "c"]
    assert client.watchlist == {"b", "c"}
    assert client.stats_tube("default")["current-watching"] == 0
    assert client.stats_tube("b")["current-watching"] == 1
    assert client.stats_tube("c")["current-watching"] == 1
    assert client.reserve_job(0).job_data == b"from b"
    s = client.stats()
    assert (s["cmd-watch"], s["cmd-ignore"]) == (4, 4)


def test_close_reconnects_and_restores_tubes(any_server: Running) -> None:
    with open_client(any_server) as observer, open_client(any_server) as c:
        c.use("out")
        c.watch("in")
        inserted(observer.put_job_into("in", "queued"))
        held = c.reserve_job(0)
        c.close()
        # the server let go of the reserved job when the connection closed
        wait_until(lambda: observer.stats_job(held)["state"] == "ready", "release on close")
        assert observer.stats_job(held)["reserves"] == 1

        jid = inserted(c.put_job("after reconnect"))  # reconnects, then `use out` again
        assert observer.stats_job(jid)["tube"] == "out"
        assert c.reserve_job(0) == Job(held.job_id, b"queued")  # watching "in" again
        assert c.watchlist == {"in"}
        assert observer.stats_tube("in")["current-watching"] == 1
        assert observer.stats()["total-connections"] == 3


def test_pause_and_unpause_tube(client: pystalk.BeanstalkClient) -> None:
    jid = inserted(client.put_job("paused"))
    assert client.pause_tube("default") == b"PAUSED"  # an hour by default
    tube = client.stats_tube("default")
    assert tube["pause"] == 3600
    assert 3590 <= tube["pause-time-left"] <= 3600
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    assert client.unpause_tube("default") == b"PAUSED"
    assert client.stats_tube("default")["pause"] == 0
    job = client.reserve_job(0)
    client.release_job(job)

    assert client.pause_tube("default", delay=1) == b"PAUSED"
    t0 = time.monotonic()
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    assert client.reserve_job(3).job_id == jid  # handed out when the pause ends
    assert 0.5 <= time.monotonic() - t0 < 3
    with raises_beanstalk("NOT_FOUND"):
        client.pause_tube("no-such-tube", 1)
    assert client.stats_tube("default")["cmd-pause-tube"] == 3


def test_tube_names_come_back_as_yaml_scalars(any_server: Running) -> None:
    """pystalk YAML-parses list-tubes, which beanstalkd (1.12 and 1.13) writes unquoted."""
    names = ["1.5", "123", "yes", "plain"]
    clients = [connect(any_server) for _ in names]
    try:
        for c, name in zip(clients, names, strict=True):
            c.use(name)
        tubes = clients[0].list_tubes()
        assert sorted(map(str, tubes)) == sorted(["default", "1.5", "123", "True", "plain"])
        assert 1.5 in tubes
        assert 123 in tubes
        assert True in tubes
        # stats-tube quotes the name since beanstalkd 1.13 ("1.5"); 1.12 leaves it bare (1.5)
        assert str(clients[0].stats_tube("1.5")["name"]) == "1.5"
    finally:
        for c in clients:
            c.close()
