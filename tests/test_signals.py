"""Signals to ``beanpole serve``, acted on at once, and the graceful shutdown.

Every test runs a real ``python -m beanpole serve`` child and sends it real signals.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from logserver import TIMEOUT, Child, Client


def put_until_draining(c: Client) -> list[bytes]:
    """Put until a put is answered DRAINING (at most TIMEOUT seconds): every reply."""
    replies: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while not replies or replies[-1] != b"DRAINING":
        assert time.monotonic() < deadline, f"still not draining: {replies[-3:]}"
        replies.append(c.cmd("put 0 0 10 1", b"x"))
    return replies


def test_sigusr1_drains_while_idle() -> None:
    child = Child("-p", "0")
    try:
        address = child.listening()
        child.proc.send_signal(signal.SIGUSR1)
        with Client(address) as c:
            replies = put_until_draining(c)
            # Puts before the server acted on the signal were taken, none refused otherwise.
            assert all(r.startswith(b"INSERTED") for r in replies[:-1]), replies
            assert c.stats()["draining"] == "true"
            assert c.cmd("put 0 0 10 1", b"x") == b"DRAINING"  # and it stays so
        assert child.stop() == 0
    finally:
        child.kill()
    assert "SIGUSR1: draining (puts are refused)" in "".join(child.stderr)


def test_sigusr1_drains_under_load() -> None:
    """A producer keeps putting; once one put is refused, every later one is."""
    child = Child("-p", "0")
    try:
        address = child.listening()
        with Client(address) as c:
            assert c.cmd("put 0 0 10 1", b"x").startswith(b"INSERTED")
            child.proc.send_signal(signal.SIGUSR1)
            replies = put_until_draining(c)
            assert all(r.startswith(b"INSERTED") for r in replies[:-1]), replies
            assert [c.cmd("put 0 0 10 1", b"x") for _ in range(20)] == [b"DRAINING"] * 20
            assert c.stats()["current-jobs-ready"] == str(len(replies))
        assert child.stop() == 0
    finally:
        child.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stop_signal_while_idle_exits_zero(sig: signal.Signals) -> None:
    child = Child("-p", "0")
    try:
        address = child.listening()
        with Client(address) as c:
            c.expect("use idle", "USING idle")
            child.proc.send_signal(sig)
            # The connection is closed by the stop, without the client sending anything.
            c.sock.settimeout(2.0)
            assert c.sock.recv(100) == b""
        assert child.proc.wait(timeout=2.0) == 0
        child.finish()
    finally:
        child.kill()
    assert f"{sig.name}: stopping" in "".join(child.stderr)


def _producer(
    address: tuple[str, int], acked: list[int], stop: threading.Event, n: int
) -> None:
    """Pipeline puts in batches of 50 until the server goes away; keep the ids of the
    puts answered INSERTED (a reply cut off by the stop is simply not counted)."""
    try:
        sock = socket.create_connection(address, timeout=TIMEOUT)
    except OSError:
        return
    body = f"job from producer {n}".encode()
    put = b"put 100 0 60 %d\r\n%s\r\n" % (len(body), body)
    buf = b""
    try:
        while True:
            sock.sendall(put * 50)
            got = 0
            while got < 50:
                while b"\r\n" not in buf:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                line, buf = buf.split(b"\r\n", 1)
                assert line.startswith(b"INSERTED "), line
                acked.append(int(line.split()[1]))
                got += 1
                if got == 1 and len(acked) > 2000:
                    stop.set()
    except OSError:
        return
    finally:
        sock.close()


@pytest.mark.parametrize("fsync", [["-f", "50"], ["-F"], ["-f", "0"]], ids=["f50", "F", "f0"])
def test_sigterm_under_pipelined_puts_keeps_every_acknowledged_put(
    tmp_path: Path, fsync: list[str]
) -> None:
    log = tmp_path / "log"
    child = Child("-p", "0", "-b", str(log), *fsync)
    acked: list[list[int]] = [[] for _ in range(4)]
    busy = threading.Event()
    try:
        address = child.listening()
        threads = [
            threading.Thread(target=_producer, args=(address, acked[i], busy, i))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        assert busy.wait(TIMEOUT), "the producers never got going"
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(timeout=2.0) == 0
        for t in threads:
            t.join(TIMEOUT)
        child.finish()
    finally:
        child.kill()
    every = sorted(i for ids in acked for i in ids)
    assert len(every) > 2000
    assert len(set(every)) == len(every)

    again = Child("-p", "0", "-b", str(log))
    try:
        with Client(again.listening()) as c:
            for job_id in every:
                assert c.peek(job_id) is not None, f"acknowledged job {job_id} is gone"
        assert again.stop() == 0
    finally:
        again.kill()


HOOK_MODULE = '''
import sys
import threading

never = threading.Event()


def install(server):
    @server.hook("shutdown")
    def hold(event):
        print("shutdown hook running", flush=True)
        never.wait()
'''


def test_second_sigterm_during_shutdown_ends_the_process_at_once(tmp_path: Path) -> None:
    (tmp_path / "slowstop.py").write_text(HOOK_MODULE)
    child = Child(
        "-p", "0", "--hooks", "slowstop:install", path=[str(tmp_path)], stdout=subprocess.PIPE
    )
    try:
        child.listening()
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.stdout is not None
        # The shutdown is now held up by the hook (the stop waits for the hooks).
        assert child.proc.stdout.readline() == "shutdown hook running\n"
        assert child.proc.poll() is None
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(timeout=2.0) == -signal.SIGTERM
    finally:
        child.kill()


def test_serve_forever_in_the_main_thread_returns_when_stopped_from_another() -> None:
    """The native wait also wakes when the server finishes, not only for signals."""
    import beanpole

    srv = beanpole.Server(listen="127.0.0.1", port=0)
    stopper: list[threading.Thread] = []

    def on_ready(server: beanpole.Server) -> None:
        thread = threading.Thread(target=server.stop)
        stopper.append(thread)
        thread.start()

    before = signal.getsignal(signal.SIGTERM)
    srv.serve_forever(on_ready=on_ready)
    stopper[0].join(TIMEOUT)
    assert not srv.running
    assert signal.getsignal(signal.SIGTERM) is before  # handlers are put back
    assert signal.set_wakeup_fd(-1) == -1  # and so is the wakeup fd
