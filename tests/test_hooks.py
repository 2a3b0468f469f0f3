"""Admin hooks: every kind of event, with its fields, in order, off the server's path."""

from __future__ import annotations

import logging
import queue
import socket
import threading
from pathlib import Path

import pytest

import beanpole
from beanpole.server.hooks import KINDS, Event, HookError
from logserver import TIMEOUT, Child, Client


class Recorder:
    """Collects events from a hook and lets a test wait for the n-th one."""

    def __init__(self) -> None:
        self.events: queue.Queue[Event] = queue.Queue()

    def __call__(self, event: Event) -> None:
        self.events.put(event)

    def next(self) -> Event:
        try:
            return self.events.get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no event within {TIMEOUT}s") from None

    def take(self, n: int) -> list[Event]:
        return [self.next() for _ in range(n)]


def _server(**config: object) -> beanpole.Server:
    return beanpole.Server(listen="127.0.0.1", port=0, **config)  # type: ignore[arg-type]


def test_every_job_event_carries_its_job() -> None:
    seen = Recorder()
    with _server() as srv:
        for kind in ("put", "reserve", "release", "bury", "kick", "touch", "delete"):
            srv.hook(kind, seen)
        with Client(srv.address) as c:
            c.use("mail")
            c.watch("mail")
            job = c.put(b"hello", pri=5)
            assert c.reserve() == (job, b"hello")
            c.touch(job)
            c.release(job, 7)
            assert c.reserve()[0] == job
            c.bury(job, 9)
            assert c.kick(1) == 1
            c.delete(job)
        events = seen.take(8)
    kinds = [e.kind for e in events]
    assert kinds == ["put", "reserve", "touch", "release", "reserve", "bury", "kick", "delete"]
    assert all(e.job_id == job and e.tube == "mail" for e in events)
    assert [e.priority for e in events] == [5, 5, 5, 7, 7, 9, 9, 9]
    assert all(e.detail is None for e in events)
    stamps = [e.at for e in events]
    assert stamps == sorted(stamps)
    assert seen.events.empty()


def test_timeout_event_then_the_job_is_ready_again() -> None:
    seen = Recorder()
    with _server() as srv:
        srv.hook("timeout", seen)
        with Client(srv.address) as holder:
            job = holder.put(b"slow", ttr=1)
            assert holder.reserve()[0] == job
            event = seen.next()
            assert (event.kind, event.job_id, event.tube) == ("timeout", job, "default")
            assert holder.stats_job(job)["state"] == "ready"  # type: ignore[index]


def test_server_events_have_no_job() -> None:
    seen = Recorder()
    srv = _server()
    for kind in ("pause-tube", "drain", "shutdown"):
        srv.hook(kind, seen)
    with srv:
        with Client(srv.address) as c:
            c.expect("pause-tube default 30", "PAUSED")
        srv.drain()
        srv.drain()  # already draining: no second event
    pause, drain, shutdown = seen.take(3)
    assert (pause.kind, pause.tube, pause.detail, pause.job_id) == (
        "pause-tube",
        "default",
        "30",
        None,
    )
    assert (drain.kind, drain.job_id, drain.tube) == ("drain", None, None)
    assert shutdown.kind == "shutdown"
    assert seen.events.empty()


def test_decorator_and_only_registered_kinds() -> None:
    deletes: list[Event] = []
    done = threading.Event()
    with _server() as srv:

        @srv.hook("delete")
        def on_delete(event: Event) -> None:
            deletes.append(event)
            done.set()

        assert on_delete.__name__ == "on_delete"  # the decorator returns the function
        with Client(srv.address) as c:
            first = c.put(b"a")
            second = c.put(b"b")
            c.delete(second)
        assert done.wait(TIMEOUT)
    assert [e.job_id for e in deletes] == [second]
    assert first != second


def test_unknown_kind_is_refused() -> None:
    srv = _server()
    with pytest.raises(HookError, match="unknown event kind 'puts'"):
        srv.hook("puts", print)
    assert "connection-refused" in KINDS and len(KINDS) == 14


def test_a_failing_hook_is_logged_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    seen = Recorder()

    def broken(event: Event) -> None:
        raise RuntimeError(f"hook broke on job {event.job_id}")

    with caplog.at_level(logging.ERROR, logger="beanpole"), _server() as srv:
        srv.hook("put", broken)
        srv.hook("put", seen)
        with Client(srv.address) as c:
            first = c.put(b"one")
            second = c.put(b"two")
            assert [e.job_id for e in seen.take(2)] == [first, second]
            assert c.stats()["current-jobs-ready"] == "2"
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].exc_info is not None
    assert f"hook broke on job {first}" in str(failures[0].exc_info[1])
    assert failures[0].exc_text is not None and "in broken" in failures[0].exc_text


def test_events_a_hook_keeps_never_change() -> None:
    """The engine refills the Event it handed to the hooks for the next event when no
    hook kept a reference to it: what a hook kept must stay as it was."""
    count = 300
    seen: list[tuple[str, int | None, str | None]] = []
    kept: list[Event] = []
    done = threading.Event()

    def keep_some(event: Event) -> None:
        seen.append((event.kind, event.job_id, event.tube))
        if event.job_id is not None and event.job_id % 3 == 0:
            kept.append(event)
        if len(seen) == count:
            done.set()

    with _server() as srv:
        srv.hook("put", keep_some)
        with beanpole.Client(srv.address) as c:
            ids = c.put_many([b"x"] * count)
        assert done.wait(TIMEOUT)
    assert seen == [("put", job, "default") for job in ids]
    assert [e.job_id for e in kept] == [job for job in ids if job % 3 == 0]
    assert all(type(e) is Event and e.kind == "put" and e.tube == "default" for e in kept)


def test_a_refilled_event_carries_each_events_own_fields() -> None:
    """Events nobody keeps are refilled in place, a field left alone when it repeats:
    tubes and priorities that alternate, repeat and come back must each show."""
    plan = [(f"t{i % 3}", (i * 7) % 4) for i in range(200)]
    seen: list[tuple[object, ...]] = []
    done = threading.Event()

    def copy_fields(event: Event) -> None:
        seen.append(tuple(event))
        if len(seen) == len(plan):
            done.set()

    wire = b"".join(f"use {tube}\r\nput {pri} 0 60 1\r\nx\r\n".encode() for tube, pri in plan)
    with _server() as srv:
        srv.hook("put", copy_fields)
        with socket.create_connection(srv.address, timeout=TIMEOUT) as sock:
            sock.sendall(wire)  # one write: the events reach the hook in few batches
            replies = b""
            while replies.count(b"INSERTED") < len(plan):
                chunk = sock.recv(65536)
                assert chunk, "the server closed the connection"
                replies += chunk
        assert done.wait(TIMEOUT)
    assert [(e[0], e[2], e[3], e[5]) for e in seen] == [("put", t, p, None) for t, p in plan]
    ids = [e[1] for e in seen]
    assert ids == sorted(ids) and len(set(ids)) == len(plan)
    assert all(isinstance(e[4], float) for e in seen)


def test_a_full_queue_drops_and_counts_without_blocking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    entered = threading.Event()
    calls: list[int | None] = []

    def stuck(event: Event) -> None:
        calls.append(event.job_id)
        entered.set()
        release.wait()

    with caplog.at_level(logging.WARNING, logger="beanpole"), _server(hook_queue=4) as srv:
        srv.hook("put", stuck)
        with Client(srv.address) as c:
            c.put(b"first")
            assert entered.wait(TIMEOUT)
            # The hook is stuck: four events fit in the queue, the rest are dropped,
            # and the puts are answered all the same.
            ids = [c.put(b"more") for _ in range(20)]
            assert srv.hook_events_dropped == 16
            release.set()
            assert c.stats()["current-jobs-ready"] == "21"
    assert calls == [1, *ids[:4]]
    assert any("16 events dropped" in r.getMessage() for r in caplog.records)


def test_engine_log_lines_reach_the_beanpole_logger(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.DEBUG, logger="beanpole"),
        _server(verbose=1) as srv,
        Client(srv.address) as c,
    ):
        c.expect("use t", "USING t")  # the connection has been served
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("connection ") and m.endswith(" opened") for m in messages)


AUDIT_MODULE = '''
import json


def install(server):
    out = open(AUDIT_FILE, "a", buffering=1)

    def record(event):
        out.write(json.dumps([event.kind, event.job_id, event.tube]) + "\\n")

    for kind in ("put", "delete", "shutdown"):
        server.hook(kind, record)
'''


def test_serve_hooks_flag_installs_module_functions(tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.log"
    (tmp_path / "audit.py").write_text(f"AUDIT_FILE = {str(audit_file)!r}\n{AUDIT_MODULE}")
    child = Child("-p", "0", "--hooks", "audit:install", path=[str(tmp_path)])
    try:
        with Client(child.listening()) as c:
            job = c.put(b"x")
            c.delete(job)
        assert child.stop() == 0
    finally:
        child.kill()
    assert audit_file.read_text().splitlines() == [
        f'["put", {job}, "default"]',
        f'["delete", {job}, "default"]',
        '["shutdown", null, null]',
    ]


def test_serve_refuses_a_hook_that_cannot_be_loaded(tmp_path: Path) -> None:
    child = Child("-p", "0", "--hooks", "no_such_module_here:install")
    status = child.finish()
    assert status == 1
    stderr = "".join(child.stderr)
    assert "cannot import hook module 'no_such_module_here'" in stderr
    assert "Traceback" not in stderr


def test_connection_refused_event_beyond_max_connections() -> None:
    import socket

    seen = Recorder()
    with _server(max_connections=1) as srv:
        srv.hook("connection-refused", seen)
        with Client(srv.address) as first:
            first.expect("use t", "USING t")  # served: it counts as open
            with socket.create_connection(srv.address, timeout=TIMEOUT) as second:
                assert second.recv(16) == b""  # closed at once
            event = seen.next()
    assert (event.kind, event.job_id) == ("connection-refused", None)
    assert event.detail == "1 connections open (--max-connections 1)"
