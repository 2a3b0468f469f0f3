"""The HTTP endpoint as a guarded door, over real HTTP against real servers: the
``Host`` allowlist, job bodies only with the read or admin token (counts stay open),
the token files checked at start, and every error a JSON ``{"error": ...}``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest

import beanpole
from beanpole.config import Config
from beanpole.ops.dashboard.actions import HIDDEN_NO_TOKEN, HIDDEN_NOT_GIVEN
from dashboard_common import TOKEN, token_file
from rawhttp import TIMEOUT, exchange, get, request
from servechild import BeanpoleChild as Child

READ_TOKEN = "read-token-0123456789"
SECRET = "the secret body"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[beanpole.Server, tuple[str, int], int]]:
    """A server with both tokens, an allowed name, and one job: (server, HTTP address,
    job id)."""
    srv = beanpole.Server(
        port=0,
        http="127.0.0.1:0",
        admin_token_file=str(token_file(tmp_path)),
        http_read_token_file=str(token_file(tmp_path, READ_TOKEN, "read-token")),
        http_allowed_host=("queue.example",),
    )
    with srv:
        address = srv.address
        assert isinstance(address, tuple) and srv.http_address is not None
        with greenstalk.Client(address, use="mail") as c:
            job_id = c.put(SECRET)
        yield srv, srv.http_address, job_id


# -- Host --------------------------------------------------------------------------------


def test_only_the_hosts_of_the_endpoint_are_answered(
    guarded: tuple[beanpole.Server, tuple[str, int], int],
) -> None:
    _srv, address, _job = guarded
    port = address[1]
    for host in (f"127.0.0.1:{port}", "localhost", f"LOCALHOST.:{port}", "queue.example:8080"):
        assert get(address, "/healthz", host=host).status == 200, host
    # HTTP/1.0 tools may send no Host; browsers (and so DNS rebinding) always do.
    assert get(address, "/healthz", host=None, version="HTTP/1.0").status == 200
    for host in (f"evil.example:{port}", "127.0.0.2", "queue.example.evil", "[::1]"):
        for path in ("/api/jobs/1", "/metrics", "/", "/api/server"):
            answer = get(address, path, host=host)
            assert answer.status == 421, (host, path)
            assert "Host" in answer.json()["error"]
            assert SECRET.encode() not in answer.body


def test_a_wildcard_endpoint_answers_to_the_address_a_client_came_in_on() -> None:
    with beanpole.Server(port=0, http="0.0.0.0:0") as srv:
        assert srv.http_address is not None
        address = ("127.0.0.1", srv.http_address[1])
        assert get(address, "/healthz", host=f"127.0.0.1:{address[1]}").status == 200
        assert get(address, "/healthz", host="attacker.example").status == 421


def test_allowed_hosts_come_from_flags_environment_and_the_config_file(tmp_path: Path) -> None:
    env = Config.from_env({"BEANPOLE_HTTP_ALLOWED_HOST": "a.example, B.example."})
    assert env.http_allowed_host == ("a.example", "b.example")
    toml = tmp_path / "b.toml"
    toml.write_text('[beanpole]\nhttp_allowed_host = ["c.example"]\n')
    assert Config.from_toml(toml).http_allowed_host == ("c.example",)
    child = Child(
        "serve", "-p", "0", "--http", "127.0.0.1:0",
        "--http-allowed-host", "q.example", "--http-allowed-host", "r.example",
    )  # fmt: skip
    try:
        match = child.wait_line(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")
        address = ("127.0.0.1", int(match.group(1)))
        assert get(address, "/healthz", host="r.example").status == 200
        assert get(address, "/healthz", host="q.example").status == 200
        assert get(address, "/healthz", host="s.example").status == 421
        assert child.stop() == 0
    finally:
        child.kill()


# -- bodies and tokens -------------------------------------------------------------------


def test_job_bodies_need_the_read_token_or_the_admin_token(
    guarded: tuple[beanpole.Server, tuple[str, int], int],
) -> None:
    _srv, address, job_id = guarded
    for path in (f"/api/jobs/{job_id}", "/api/tubes/mail"):
        hidden = get(address, path)
        assert hidden.status == 200
        assert SECRET.encode() not in hidden.body
        assert hidden.json()["bodies-hidden"] == HIDDEN_NOT_GIVEN
        for header in (
            {"Authorization": f"Bearer {READ_TOKEN}"},
            {"X-Beanpole-Token": READ_TOKEN},
            {"Authorization": f"Bearer {TOKEN}"},
        ):
            shown = get(address, path, headers=header).json()
            assert "bodies-hidden" not in shown
            job = shown if path.startswith("/api/jobs") else shown["next"]["ready"]
            assert job["body"]["data"] == SECRET
            assert job["stats"]["tube"] == "mail"
        wrong = get(address, path, headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401 and "wrong token" in wrong.json()["error"]
    hidden_job = get(address, f"/api/jobs/{job_id}").json()
    assert hidden_job["body"] is None and hidden_job["stats"]["state"] == "ready"
    # Counts and health stay open to scrapers.
    for path in ("/metrics", "/healthz", "/readyz", "/api/server", "/api/tubes"):
        assert get(address, path).status == 200, path
    assert b'beanpole_jobs{state="ready",tube="mail"} 1.0' in get(address, "/metrics").body
    # The read token reads; it does not act.
    kick = request("POST", f"/api/jobs/{job_id}/delete",
                   headers={"Authorization": f"Bearer {READ_TOKEN}"}, body=b"{}")
    refused = exchange(address, kick)
    assert refused.status == 401 and refused.json()["error"] == "wrong admin token"


def test_without_any_token_bodies_are_always_hidden() -> None:
    with beanpole.Server(port=0, http="127.0.0.1:0") as srv:
        address = srv.address
        assert isinstance(address, tuple) and srv.http_address is not None
        with greenstalk.Client(address) as c:
            job_id = c.put(SECRET)
        answer = get(srv.http_address, f"/api/jobs/{job_id}")
        assert answer.json()["bodies-hidden"] == HIDDEN_NO_TOKEN
        assert SECRET.encode() not in answer.body
        tried = get(srv.http_address, f"/api/jobs/{job_id}", headers={"X-Beanpole-Token": "x"})
        assert tried.status == 401


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "holds no token"),
        (b"  \n", "holds no token"),
        ("t\u00f6ken\n".encode(), "printable ASCII"),
        (b"tok\x01en\n", "printable ASCII"),
    ],
)
@pytest.mark.parametrize("flag", ["--http-read-token-file", "--admin-token-file"])
def test_a_token_file_is_checked_at_start(
    tmp_path: Path, flag: str, content: bytes, problem: str
) -> None:
    bad = tmp_path / "token"
    bad.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", "0", flag, str(bad)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    assert problem in lines[0] and str(bad) in lines[0]
    kind = "read token" if flag == "--http-read-token-file" else "admin token"
    assert kind in lines[0]


# -- errors ------------------------------------------------------------------------------


def test_every_error_is_json(guarded: tuple[beanpole.Server, tuple[str, int], int]) -> None:
    _srv, address, job_id = guarded
    auth = {"Authorization": f"Bearer {TOKEN}"}
    cases = [
        (request("POST", "/api/tubes/mail/kick", headers={**auth, "Content-Length": "abc"}),
         400, "Content-Length must be a number"),
        (request("POST", "/api/tubes/mail/kick", headers={**auth, "Content-Length": "-1"}),
         400, "Content-Length must be a number"),
        (request("POST", "/api/tubes/mail/kick", headers={**auth, "Content-Length": "70000"}),
         413, "larger than 65536 bytes"),
        (request("POST", "/api/tubes/mail/kick", headers={**auth,
                                                          "Transfer-Encoding": "chunked"}),
         411, "Content-Length"),
        (request("GET", "/nothing/here"), 404, "not found"),
        (request("GET", "/api/nothing"), 404, "no such API path"),
        (request("GET", "/api/jobs/abc"), 400, "invalid job id"),
        (request("POST", "/api/tubes/mail/kick", body=b'{"bound": 1}'), 401, "admin token"),
        (b"BREW /pot HTTP/1.1\r\n\r\n", 501, "not served"),
        (b"GET /x HTTP/2.0\r\n\r\n", 505, "not served"),
        (b"not http at all\r\n\r\n", 400, "malformed request line"),
        (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400, "malformed header"),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 20000 + b"\r\n\r\n", 431, "larger than"),
    ]
    for raw, status, fragment in cases:
        answer = exchange(address, raw)
        assert answer.status == status, (raw[:60], answer)
        error = answer.json()["error"]
        assert isinstance(error, str) and fragment in error, (raw[:60], error)
    # The job was not touched by any of it.
    assert get(address, f"/api/jobs/{job_id}").json()["stats"]["kicks"] == 0
