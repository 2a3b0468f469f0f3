"""The dashboard's JSON API and page over real HTTP (no browser): ``beanpole serve
--http`` in process, and ``beanpole exporter`` as a child process in front of Debian's
beanstalkd and beanpole."""

from __future__ import annotations

import json
import logging
import queue
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import greenstalk
import pytest

import beanpole
from beanpole.config import Config
from dashboard_common import (
    TIMEOUT,
    TOKEN,
    base_url,
    exporter,
    get,
    get_json,
    post,
    token_file,
)
from servers import start


@pytest.fixture
def token(tmp_path: Path) -> Path:
    return token_file(tmp_path)


@pytest.fixture
def served(token: Path) -> Iterator[tuple[beanpole.Server, str]]:
    with beanpole.Server(port=0, http="127.0.0.1:0", admin_token_file=str(token)) as srv:
        assert srv.http_address is not None
        yield srv, base_url(srv.http_address)


def client(srv: beanpole.Server, tube: str = "default") -> greenstalk.Client:
    address = srv.address
    assert isinstance(address, tuple)
    return greenstalk.Client(address, use=tube, watch=tube)


# -- the page --------------------------------------------------------------------------


def test_the_page_and_its_files_are_served_with_a_same_origin_policy(
    served: tuple[beanpole.Server, str],
) -> None:
    _srv, base = served
    status, headers, page = get(base, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    html = page.decode()
    # Everything the page loads is a path on this endpoint (or an inline data: icon).
    for url in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert url.startswith(("/", "#", "data:")) and not url.startswith("//"), url
    for path in ("/static/app.js", "/static/app.css"):
        status, headers, body = get(base, path)
        assert status == 200 and body
        assert "default-src 'self'" in headers["content-security-policy"]
        # No absolute URL to any host in the script or the style sheet.
        assert not re.search(rb"https?://(?!www\.w3\.org/2000/svg)", body), path
    assert b"innerHTML" not in get(base, "/static/app.js")[2]
    assert get(base, "/nope")[0] == 404
    head = urllib.request.Request(base + "/", method="HEAD")
    with urllib.request.urlopen(head, timeout=TIMEOUT) as r:
        assert r.status == 200 and r.read() == b""
    assert get(base, "/metrics")[0] == 200  # the routes of #5 are still there


def test_no_dashboard_threads_without_http() -> None:
    import threading

    with beanpole.Server(port=0) as srv:
        assert srv.http_address is None
        names = [t.name for t in threading.enumerate()]
        assert not [n for n in names if n.startswith(("beanpole-dashboard", "beanpole-http"))]


# -- reading ----------------------------------------------------------------------------


def test_server_and_tubes_show_the_counts_with_the_stats_keys(
    served: tuple[beanpole.Server, str],
) -> None:
    srv, base = served
    with client(srv, "emails") as c:
        for _ in range(3):
            c.put("x")
        c.put("later", delay=100)
        c.put("now", priority=5)
    server = get_json(base, "/api/server")
    assert server["server"] == "local" and server["servers"] == ["local"]
    assert server["actions"] is True
    stats = server["stats"]
    assert stats["current-jobs-ready"] == 4 and stats["current-jobs-delayed"] == 1
    assert stats["cmd-put"] == 5 and stats["current-jobs-urgent"] == 1
    assert stats["version"] == "1.13" and isinstance(stats["draining"], bool)
    # beanpole's own version beside the protocol's (the page shows both).
    assert stats.pop("beanpole-version") == beanpole.__version__
    # Otherwise the same keys and types as `beanpole stats --format json`.
    assert _types(stats) == _types(_cli_json(srv))
    page = get_json(base, "/api/tubes?filter=EMA")
    assert (page["total"], page["matched"]) == (2, 1)
    (row,) = page["tubes"]
    assert row == {**srv.tube_stats("emails"), "puts-per-second": row["puts-per-second"]}
    assert row["current-jobs-ready"] == 4 and row["current-jobs-urgent"] == 1
    (cli_row,) = _cli_json(srv, "--tube", "emails")
    assert cli_row == {k: v for k, v in row.items() if k != "puts-per-second"}


def _cli_json(srv: beanpole.Server, *args: str) -> Any:
    address = srv.address
    assert isinstance(address, tuple)
    printed = subprocess.run(
        [sys.executable, "-m", "beanpole", "stats", "-H", f"{address[0]}:{address[1]}", *args,
         "--format", "json"],
        capture_output=True, text=True, timeout=TIMEOUT, check=True,
    )
    return json.loads(printed.stdout)


def _types(stats: dict[str, Any]) -> dict[str, type]:
    return {k: type(v) for k, v in stats.items()}


def test_tubes_filter_sort_and_pages_with_ten_thousand_tubes(
    served: tuple[beanpole.Server, str],
) -> None:
    srv, base = served
    address = srv.address
    assert isinstance(address, tuple)
    n = 10_000
    with socket.create_connection(address) as sock:
        # Watching keeps a tube alive; all sent at once, the replies read after.
        sock.sendall(b"".join(b"watch t%05d\r\n" % i for i in range(n)))
        want = sum(len(b"WATCHING %d\r\n" % (i + 2)) for i in range(n))
        got = 0
        while got < want:
            chunk = sock.recv(1 << 16)
            assert chunk
            got += len(chunk)
        with client(srv, "t00042") as c:
            for _ in range(7):
                c.put("x")
        status, _h, body = get(base, "/api/tubes?limit=500")
        assert status == 200 and len(body) < 300_000  # one page, not 10,001 tubes
        page = json.loads(body)
        assert page["total"] == n + 1 and len(page["tubes"]) == 500
        top = get_json(base, "/api/tubes?sort=current-jobs-ready&order=desc&limit=3")
        assert top["tubes"][0]["name"] == "t00042"
        by_name = get_json(base, "/api/tubes?sort=name&order=desc&offset=10&limit=5")
        names = [t["name"] for t in by_name["tubes"]]
        assert names == [f"t{i:05d}" for i in range(9989, 9984, -1)]
        found = get_json(base, "/api/tubes?filter=t0999")
        assert found["matched"] == 10 and found["tubes"][0]["name"] == "t09990"
    for bad in ("limit=501", "limit=0", "offset=-1", "sort=nope", "order=up", "limit=x"):
        assert "error" in get_json(base, f"/api/tubes?{bad}", status=400)


def test_tube_page_shows_the_next_jobs_with_safe_bodies(
    served: tuple[beanpole.Server, str],
) -> None:
    srv, base = served
    big = ("€" * 2000).encode()  # 6000 bytes: cut at 4096, inside a character
    with client(srv, "work/x") as c:
        c.put(b"to bury")
        job = c.reserve(timeout=1)
        c.bury(job)
        c.put(b"<b>hello</b>\n")
        c.put(b"\x00\x01\xff", delay=500)
        big_id = c.put(big)
    data = get_json(base, "/api/tubes/work%2Fx", token=TOKEN)
    assert data["tube"]["name"] == "work/x" and data["tube"]["current-jobs-buried"] == 1
    ready, delayed, buried = (data["next"][s] for s in ("ready", "delayed", "buried"))
    assert ready["body"] == {
        "size": 13, "shown": 13, "truncated": False, "encoding": "text",
        "data": "<b>hello</b>\n",
    }
    assert ready["stats"]["state"] == "ready" and ready["stats"]["pri"] == 65536
    assert delayed["body"]["encoding"] == "hex" and delayed["body"]["data"] == "0001ff"
    assert delayed["stats"]["delay"] == 500
    assert buried["id"] == job.id and buried["stats"]["buries"] == 1
    whole = get_json(base, f"/api/jobs/{big_id}", token=TOKEN)
    assert whole["body"]["size"] == 6000 and whole["body"]["truncated"] is True
    assert whole["body"]["encoding"] == "text"
    assert whole["body"]["data"] == "€" * 1365 and whole["body"]["shown"] == 4096
    assert get_json(base, "/api/tubes/nope", status=404)["error"]
    assert get_json(base, "/api/jobs/99999", status=404)["error"]
    assert get_json(base, "/api/jobs/abc", status=400)["error"]
    assert get_json(base, "/api/tubes/a%20b", status=400)["error"]
    assert get_json(base, "/api/tube", status=404)["error"]
    assert get_json(base, "/api/tubes/%ff", status=400)["error"]


def test_series_keeps_a_sample_a_second(served: tuple[beanpole.Server, str]) -> None:
    srv, base = served
    with client(srv) as c:
        c.put("x")
    # The sampler's first two ticks make the first point; wait= waits for a newer one.
    first_point = get_json(base, "/api/series?wait=5")["points"][0]
    series = get_json(base, f"/api/series?since={first_point[0] - 1e-3}&wait=5")
    if len(series["points"]) < 2:
        series = get_json(base, f"/api/series?since={first_point[0]}&wait=5")
        series["points"].insert(0, first_point)
    assert series["fields"] == [
        "at", "puts", "reserves", "deletes", "urgent", "ready", "reserved", "delayed", "buried",
    ]
    assert series["history"] == 900 and series["interval"] == 1.0
    first, second = series["points"][:2]
    assert 0.5 < second[0] - first[0] < 1.5
    assert second[5] == 1  # ready
    later = get_json(base, f"/api/series?since={second[0]}")
    assert all(p[0] > second[0] for p in later["points"])
    assert get_json(base, "/api/series?since=x", status=400)["error"]


# -- actions ----------------------------------------------------------------------------


@pytest.fixture
def action_log() -> Iterator[list[str]]:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("beanpole.dashboard")
    handler = Keep()
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_actions_are_refused_without_a_configured_token() -> None:
    with beanpole.Server(port=0, http="127.0.0.1:0") as srv:
        assert srv.http_address is not None
        base = base_url(srv.http_address)
        with client(srv) as c:
            c.put("x", delay=100)
        assert get_json(base, "/api/server")["actions"] is False
        status, reply = post(base, "/api/tubes/default/kick", {"bound": 1}, token=TOKEN)
        assert status == 403 and "no admin token" in reply["error"]
        assert srv.tube_stats("default")["current-jobs-delayed"] == 1


def test_actions_need_the_token_and_go_through_the_hooks(
    token: Path, action_log: list[str]
) -> None:
    events: queue.Queue[beanpole.Event] = queue.Queue()
    srv = beanpole.Server(port=0, http="127.0.0.1:0", admin_token_file=str(token))
    for kind in ("kick", "delete", "pause-tube"):
        srv.hook(kind, events.put)
    with srv:
        assert srv.http_address is not None
        base = base_url(srv.http_address)
        with client(srv, "jobs") as c:
            ids = [c.put(f"job {i}", delay=100) for i in range(3)]
        path = "/api/tubes/jobs/kick"
        assert post(base, path, {"bound": 1})[0] == 401
        assert post(base, path, {"bound": 1}, token="wrong")[0] == 401
        assert post(base, path, {"bound": 1}, token=TOKEN + "x")[0] == 401
        assert srv.tube_stats("jobs")["current-jobs-delayed"] == 3
        assert post(base, path, {"bound": 1}, token=TOKEN) == (200, {"kicked": 1})
        assert post(base, path, {"bound": 0}, token=TOKEN)[0] == 400
        status, reply = post(
            base, f"/api/jobs/{ids[1]}/kick", token=TOKEN, header="X-Beanpole-Token"
        )
        assert (status, reply) == (200, {"kicked": ids[1]})
        assert post(base, f"/api/jobs/{ids[1]}/kick", token=TOKEN)[0] == 409  # ready now
        assert post(base, f"/api/jobs/{ids[2]}/delete", token=TOKEN) == (200, {"deleted": ids[2]})
        assert post(base, f"/api/jobs/{ids[2]}/delete", token=TOKEN)[0] == 404
        assert post(base, "/api/tubes/jobs/pause", {"seconds": 30}, token=TOKEN)[0] == 200
        stats = srv.tube_stats("jobs")
        assert (stats["current-jobs-ready"], stats["current-jobs-delayed"]) == (2, 0)
        assert stats["pause"] == 30
        got = [events.get(timeout=TIMEOUT) for _ in range(4)]
        assert [(e.kind, e.job_id) for e in got] == [
            ("kick", ids[0]), ("kick", ids[1]), ("delete", ids[2]), ("pause-tube", None),
        ]
        assert post(base, "/api/tubes/jobs/explode", token=TOKEN)[0] == 404
        assert post(base, "/api/tubes/nope/kick", {"bound": 1}, token=TOKEN)[0] == 404
    assert any("kick on tube 'jobs'" in line and '"kicked": 1' in line for line in action_log)
    assert any("refused" in line and "wrong admin token" in line for line in action_log)
    assert any(f"delete on job {ids[2]}" in line for line in action_log)


def test_clear_needs_a_confirmation_and_spares_reserved_jobs(
    served: tuple[beanpole.Server, str],
) -> None:
    srv, base = served
    with client(srv, "q") as c:
        for i in range(2500):  # more than one batch under the lock
            c.put(f"{i}")
        held = c.reserve(timeout=1)
        path = "/api/tubes/q/clear"
        assert post(base, path, {"state": "ready"}, token=TOKEN)[0] == 400
        assert post(base, path, {"state": "ready", "confirm": "x"}, token=TOKEN)[0] == 400
        assert post(base, path, {"state": "all", "confirm": "q"}, token=TOKEN)[0] == 400
        reply = post(base, path, {"state": "ready", "confirm": "q"}, token=TOKEN)
        assert reply == (200, {"deleted": 2499, "state": "ready"})
        status, err = post(base, f"/api/jobs/{held.id}/delete", token=TOKEN)
        assert status == 409 and "reserved" in err["error"]
        c.delete(held)
    assert srv.stats()["current-jobs-ready"] == 0


def test_a_bad_token_file_stops_the_start(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path in (empty, tmp_path / "missing"):
        with pytest.raises(beanpole.ServerError, match="admin token file"):
            beanpole.Server(port=0, http="0", admin_token_file=str(path)).start()
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", "0",
         "--admin-token-file", str(tmp_path / "missing")],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot read admin token file" in proc.stderr


def test_the_token_file_setting_from_the_environment(tmp_path: Path) -> None:
    config = Config.from_env({"BEANPOLE_ADMIN_TOKEN_FILE": str(tmp_path / "t")})
    assert config.admin_token_file == str(tmp_path / "t")


def test_requests_too_large_are_refused(served: tuple[beanpole.Server, str]) -> None:
    import urllib.error

    _srv, base = served
    data = json.dumps({"bound": 1, "pad": "x" * 70_000}).encode()
    request = urllib.request.Request(
        base + "/api/tubes/default/kick",
        data=data,
        headers={"Authorization": f"Bearer {TOKEN}"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert caught.value.code == 413


# -- beanpole exporter: stock beanstalkd -----------------------------------------------


def test_exporter_serves_the_api_for_beanstalkd_and_acts_through_the_protocol(
    token: Path,
) -> None:
    with start("beanstalkd") as bs, start("beanpole") as bp:
        targets = [f"{s.host}:{s.port}" for s in (bs, bp)]
        with greenstalk.Client(bs.address, use="mail", watch="mail") as c:
            ids = [c.put(f"m{i}") for i in range(4)]
            c.put("d", delay=300)
            for _ in range(3):
                c.bury(c.reserve(timeout=1))
        child, base = exporter(targets, token)
        try:
            assert get_json(base, "/api/servers") == {"servers": targets}
            server = get_json(base, f"/api/server?server={targets[0]}")
            assert server["stats"]["version"].startswith("1.")  # stock beanstalkd
            page = get_json(base, f"/api/tubes?server={targets[0]}&filter=mail")
            (row,) = page["tubes"]
            assert (row["current-jobs-ready"], row["current-jobs-buried"]) == (1, 3)
            assert get_json(base, f"/api/tubes?server={targets[1]}&filter=mail")["matched"] == 0
            assert get_json(base, "/api/server?server=nope", status=404)["error"]
            tube = get_json(base, f"/api/tubes/mail?server={targets[0]}", token=TOKEN)
            assert tube["next"]["buried"]["id"] == ids[0]
            assert tube["next"]["delayed"]["body"]["data"] == "d"
            q = f"?server={targets[0]}"
            assert post(base, f"/api/tubes/mail/kick{q}", {"bound": 1})[0] == 401
            assert post(base, f"/api/tubes/mail/kick{q}", {"bound": 1}, token=TOKEN) == (
                200, {"kicked": 1},
            )
            assert post(base, f"/api/jobs/{ids[2]}/kick{q}", token=TOKEN)[0] == 200
            assert post(base, f"/api/jobs/{ids[0]}/delete{q}", token=TOKEN)[0] == 200
            body = {"state": "buried", "confirm": "mail"}
            assert post(base, f"/api/tubes/mail/clear{q}", body, token=TOKEN) == (
                200, {"deleted": 1, "state": "buried"},
            )
            assert post(base, f"/api/tubes/mail/pause{q}", {"seconds": 9}, token=TOKEN)[0] == 200
            job = get_json(base, f"/api/jobs/{ids[2]}{q}", token=TOKEN)
            assert job["stats"]["kicks"] == 1 and job["body"]["data"] == "m2"
            assert child.stop() == 0
        finally:
            child.kill()
        stats = c_stats(bs.address, "mail")
        assert (stats["current-jobs-buried"], stats["current-jobs-ready"]) == (0, 2)
        assert stats["cmd-pause-tube"] == 1 and stats["cmd-delete"] == 2


def c_stats(address: tuple[str, int], tube: str) -> dict[str, int]:
    with greenstalk.Client(address) as c:
        return c.stats_tube(tube)  # type: ignore[return-value]


def test_exporter_logs_each_action(token: Path) -> None:
    with start("beanstalkd") as bs:
        child, base = exporter([f"{bs.host}:{bs.port}"], token)
        try:
            assert post(base, "/api/tubes/default/pause", {"seconds": 1}, token=TOKEN)[0] == 200
            child.wait_line(r"dashboard: pause on tube 'default' of 127\.0\.0\.1:\d+ from ")
            assert child.stop() == 0
        finally:
            child.kill()


def test_exporter_bad_token_file_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "exporter", "--http", "0", "--target",
         "127.0.0.1:1", "--admin-token-file", str(tmp_path / "missing")],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "admin token file" in proc.stderr


def test_exporter_answers_502_for_a_server_that_is_away() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there
    child, base = exporter([dead])
    try:
        warning = rf"warning: dashboard: cannot sample {dead}: cannot connect"
        if not any(re.search(warning, line) for line in child.stderr):
            child.wait_line(warning)  # logged once, maybe before the start lines
        reply = get_json(base, "/api/server", status=502)
        assert "cannot connect" in reply["error"]
        assert get_json(base, "/api/tubes", status=502)["error"]
        assert child.stop() == 0
    finally:
        child.kill()
