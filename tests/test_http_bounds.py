"""The HTTP endpoint's bounds, with real sockets: a cap on connections (a slow one
makes room, or the new one is closed at once; both counted), a deadline for a request's
head, a cap on its size, pipelined and keep-alive requests, a fixed set of threads,
and the counters in ``/metrics``."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import beanpole
from beanpole.ops.http import HttpServer, Response
from rawhttp import TIMEOUT, closed_by_server, get, read_answer, request

HEAD = b"GET /ok HTTP/1.1\r\nHost: localhost\r\n"  # never finished: no empty line


def ok() -> Response:
    return 200, "text/plain", b"ok\n"


@pytest.fixture
def endpoint() -> Iterator[Callable[..., HttpServer]]:
    made: list[HttpServer] = []

    def make(**options: Any) -> HttpServer:
        routes = options.pop("routes", {"/ok": ok})
        server = HttpServer("127.0.0.1:0", routes, **options)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=TIMEOUT)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.01)


def test_a_slow_connection_makes_room_for_a_new_one(
    endpoint: Callable[..., HttpServer],
) -> None:
    server = endpoint(max_connections=3)
    slow = [connect(server.address) for _ in range(3)]
    for sock in slow:
        sock.sendall(HEAD)
    wait_for(lambda: server.counters.open == 3, "three open connections")
    # At the cap: the oldest slow one is closed, and the new one is served.
    assert get(server.address, "/ok").status == 200
    assert server.counters.evicted == 1 and server.counters.refused == 0
    assert closed_by_server(slow[0]) == b""
    for sock in slow:
        sock.close()


def test_beyond_the_cap_a_new_connection_is_closed_at_once_when_all_are_busy(
    endpoint: Callable[..., HttpServer],
) -> None:
    release = threading.Event()

    def blocked() -> Response:
        release.wait(TIMEOUT)
        return 200, "text/plain", b"done\n"

    server = endpoint(max_connections=2, routes={"/block": blocked, "/ok": ok})
    busy = [connect(server.address) for _ in range(2)]
    for sock in busy:
        sock.sendall(request("GET", "/block"))
    wait_for(lambda: server.counters.open == 2, "two busy connections")
    refused = connect(server.address)
    refused.sendall(request("GET", "/ok"))
    assert closed_by_server(refused) == b""  # closed unanswered, without waiting
    wait_for(lambda: server.counters.refused == 1, "the refusal counted")
    release.set()
    for sock in busy:
        answer = read_answer(sock)
        assert (answer.status, answer.body) == (200, b"done\n")
        sock.close()
    assert get(server.address, "/ok").status == 200  # room again
    refused.close()


def test_a_request_head_has_a_deadline(endpoint: Callable[..., HttpServer]) -> None:
    server = endpoint(head_timeout=0.3)
    partial, silent = connect(server.address), connect(server.address)
    partial.sendall(HEAD)
    reply = closed_by_server(partial)
    assert reply.startswith(b"HTTP/1.1 408 ") and b'{"error":' in reply
    assert closed_by_server(silent) == b""
    assert server.counters.timed_out == 2
    partial.close()
    silent.close()


def test_a_flood_of_header_bytes_is_cut_at_the_head_limit(
    endpoint: Callable[..., HttpServer],
) -> None:
    server = endpoint()
    flood = connect(server.address)
    sent = 0
    try:
        flood.sendall(b"GET /ok HTTP/1.1\r\nHost: localhost\r\nX-Flood: ")
        chunk = b"a" * 65536
        while sent < 10 * 1024 * 1024:
            flood.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered 431 and closed: the rest is not read
    assert sent < 10 * 1024 * 1024
    flood.close()
    wait_for(lambda: server.counters.open == 0, "the flood connection closed")
    assert get(server.address, "/ok").status == 200


def test_keep_alive_and_pipelined_requests_on_one_connection(
    endpoint: Callable[..., HttpServer],
) -> None:
    server = endpoint()
    with connect(server.address) as sock:
        one = b"GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n"
        sock.sendall(one * 3 + b"HEAD /ok HTTP/1.1\r\nHost: localhost\r\n\r\n")
        replies = sock.makefile("rb")
        for _ in range(3):
            answer = read_answer(replies)
            assert (answer.status, answer.body) == (200, b"ok\n")
        head = read_answer(replies, head=True)  # a HEAD: the length of the body, and no body
        assert head.status == 200 and head.headers["content-length"] == "3"
        sock.sendall(one)
        assert read_answer(replies).status == 200
    assert server.counters.refused == server.counters.timed_out == 0


def test_the_endpoint_keeps_its_threads_under_many_slow_clients() -> None:
    with beanpole.Server(port=0, http="127.0.0.1:0", http_max_connections=20) as srv:
        assert srv.http_address is not None
        address = srv.http_address
        before = threading.active_count()
        slow = []
        for _ in range(200):
            sock = socket.socket()
            sock.settimeout(TIMEOUT)
            sock.connect(address)
            with contextlib.suppress(OSError):  # refused at once
                sock.sendall(HEAD)
            slow.append(sock)
        assert get(address, "/healthz").status == 200
        assert threading.active_count() == before
        metrics = get(address, "/metrics").body.decode()
        figures = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in metrics.splitlines()
            if line.startswith("beanpole_http_")
        }
        assert figures["beanpole_http_connections"] <= 20
        assert figures["beanpole_http_connections_evicted_total"] > 0
        assert (
            figures["beanpole_http_connections_evicted_total"]
            + figures["beanpole_http_connections_refused_total"]
            >= 200 + 1 - 20  # the slow ones and /healthz, beyond the cap
        )
        assert "beanpole_http_request_timeouts_total" in figures
        for sock in slow:
            sock.close()
