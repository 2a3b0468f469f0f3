"""beanpole.Server embedded in this process: lifecycle, address, stats, drain, signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import beanpole
from beanpole import Config, Server, ServerError

TIMEOUT = 10.0


def connect(address: tuple[str, int] | str) -> socket.socket:
    if isinstance(address, str):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(TIMEOUT)
        conn.connect(address)
        return conn
    return socket.create_connection(address, timeout=TIMEOUT)


def read_reply(conn: socket.socket) -> bytes:
    """One reply: a line, plus the body announced by ``OK n`` / ``RESERVED id n``."""
    buf = b""
    while b"\r\n" not in buf:
        chunk = conn.recv(4096)
        assert chunk, f"connection closed after {buf!r}"
        buf += chunk
    head = buf.split(b"\r\n", 1)[0]
    words = head.split()
    if words[0] in (b"OK", b"RESERVED", b"FOUND"):
        total = len(head) + 2 + int(words[-1]) + 2
        while len(buf) < total:
            chunk = conn.recv(4096)
            assert chunk, f"connection closed after {buf!r}"
            buf += chunk
    return buf


def request(address: tuple[str, int] | str, data: bytes) -> bytes:
    with connect(address) as conn:
        conn.sendall(data)
        return read_reply(conn)


def put(address: tuple[str, int] | str, body: bytes = b"hello") -> bytes:
    return request(address, b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))


@pytest.fixture
def server() -> Iterator[Server]:
    with Server(port=0) as srv:
        yield srv


def ipv6_loopback_works() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


# -- the package -----------------------------------------------------------------------------


def test_public_api() -> None:
    assert set(beanpole.__all__) >= {"Config", "ConfigError", "Server", "ServerError"}
    assert issubclass(beanpole.ServerError, RuntimeError)
    assert issubclass(beanpole.ConfigError, ValueError)


def test_version_comes_from_the_native_module() -> None:
    from beanpole import _core

    assert beanpole.__version__ == _core.__version__
    assert beanpole.__version__[:1].isdigit()


def test_import_does_not_load_the_native_module() -> None:
    code = "import sys, beanpole; print('beanpole._core' in sys.modules)"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(beanpole.__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=package_root),
        capture_output=True,
        text=True,
        check=True,
        timeout=TIMEOUT,
    )
    assert out.stdout.strip() == "False"


# -- lifecycle -----------------------------------------------------------------------------


def test_context_manager_starts_and_stops() -> None:
    with Server(port=0) as srv:
        assert srv.running
        address = srv.address
        assert isinstance(address, tuple)
        host, port = address
        assert host == "127.0.0.1"
        assert 0 < port < 65536
        assert (srv.host, srv.port) == (host, port)
        assert request((host, port), b"stats\r\n").startswith(b"OK ")
    assert not srv.running
    assert srv.address == (host, port)  # still known after stop
    with pytest.raises(ConnectionRefusedError):
        connect((host, port))


def test_start_returns_the_server_and_binds_before_returning() -> None:
    srv = Server(port=0)
    assert srv.start() is srv
    try:
        # No retry: the socket is bound and accepting the moment start() returns.
        assert put(srv.address) == b"INSERTED 1\r\n"
    finally:
        srv.stop()


def test_config_and_overrides() -> None:
    base = Config(max_job_size=100, port=11300)
    srv = Server(base, port=0)
    assert srv.config == base.replace(port=0)
    assert not srv.running
    with srv:
        assert srv.stats()["max-job-size"] == 100
        assert put(srv.address, b"x" * 100) == b"INSERTED 1\r\n"
        assert put(srv.address, b"x" * 101) == b"JOB_TOO_BIG\r\n"


def test_invalid_overrides_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="port"):
        Server(port=-1)


def test_not_started_server() -> None:
    srv = Server(port=0)
    assert not srv.running
    assert not srv.draining
    for use in (lambda: srv.address, srv.stats, srv.drain, srv.wait):
        with pytest.raises(ServerError, match="not been started"):
            use()
    srv.stop()  # nothing to stop: no error
    assert "not started" in repr(srv)


def test_unknown_user_fails_before_binding() -> None:
    srv = Server(port=0, user="no-such-user-beanpole")
    with pytest.raises(ServerError, match="cannot become user 'no-such-user-beanpole': no such"):
        srv.start()
    assert not srv.running
    with pytest.raises(ServerError, match="not been started"):
        _ = srv.address


def test_start_twice_is_an_error(server: Server) -> None:
    with pytest.raises(ServerError, match=r"already running on 127\.0\.0\.1:"):
        server.start()
    assert server.running
    assert put(server.address) == b"INSERTED 1\r\n"


def test_stop_is_idempotent_and_final(server: Server) -> None:
    server.stop()
    server.stop()
    server.stop(timeout=0)
    assert not server.running
    assert server.wait(0) is True
    assert server.wait() is True
    with pytest.raises(ServerError, match="has been stopped"):
        server.stats()
    with pytest.raises(ServerError, match="has been stopped"):
        server.drain()
    with pytest.raises(ServerError, match="create a new Server"):
        server.start()
    with pytest.raises(ServerError, match="create a new Server"), server:
        pass
    assert "stopped" in repr(server)


def test_wait_times_out_while_running(server: Server) -> None:
    assert server.wait(0.05) is False
    assert server.wait(0) is False
    assert server.running


def test_wait_returns_when_another_thread_stops_it(server: Server) -> None:
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    assert server.wait(TIMEOUT) is True
    stopper.join(TIMEOUT)
    assert not server.running


# -- stats and drain -----------------------------------------------------------------------


def test_stats_values_and_types(server: Server) -> None:
    stats = server.stats()
    for key in ("current-jobs-ready", "total-jobs", "cmd-put", "current-connections", "pid"):
        assert type(stats[key]) is int, key
    assert type(stats["draining"]) is bool
    assert type(stats["uptime"]) is int
    assert stats["max-job-size"] == 65535
    assert stats["pid"] == os.getpid()
    assert stats["total-jobs"] == 0
    assert stats["draining"] is False

    assert put(server.address) == b"INSERTED 1\r\n"
    assert put(server.address) == b"INSERTED 2\r\n"
    stats = server.stats()
    assert stats["total-jobs"] == 2
    assert stats["current-jobs-ready"] == 2
    assert stats["cmd-put"] == 2
    assert stats["current-tubes"] == 1


def test_stats_match_the_wire(server: Server) -> None:
    assert put(server.address) == b"INSERTED 1\r\n"
    wire = request(server.address, b"stats\r\n").decode()
    stats = server.stats()
    for key in ("total-jobs", "current-jobs-ready", "cmd-put", "max-job-size"):
        assert f"\n{key}: {stats[key]}\n" in wire


def test_drain(server: Server) -> None:
    assert put(server.address) == b"INSERTED 1\r\n"
    assert not server.draining
    server.drain()
    assert server.draining
    assert server.running
    assert put(server.address) == b"DRAINING\r\n"
    assert server.stats()["draining"] is True
    # Queued work can still be taken.
    assert request(server.address, b"reserve-with-timeout 0\r\n") == b"RESERVED 1 5\r\nhello\r\n"
    server.drain()  # draining twice is fine
    assert server.draining


# -- several servers, addresses ------------------------------------------------------------


def test_two_servers_at_once() -> None:
    with Server(port=0) as one, Server(port=0, max_job_size=10) as two:
        assert one.port != two.port
        assert put(one.address) == b"INSERTED 1\r\n"
        assert one.stats()["total-jobs"] == 1
        assert two.stats()["total-jobs"] == 0
        assert two.stats()["max-job-size"] == 10
        two.drain()
        assert put(one.address) == b"INSERTED 2\r\n"
        assert put(two.address) == b"DRAINING\r\n"
        two.stop()
        assert one.running
        assert put(one.address) == b"INSERTED 3\r\n"


def test_port_in_use_raises_oserror(server: Server) -> None:
    other = Server(port=server.port)
    with pytest.raises(OSError) as info:
        other.start()
    assert "in use" in str(info.value).lower()
    assert "Traceback" not in str(info.value)
    assert not other.running
    assert server.running
    assert put(server.address) == b"INSERTED 1\r\n"


def test_port_taken_by_another_socket() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError, match=r"(?i)in use"):
            Server(port=taken.getsockname()[1]).start()


@pytest.mark.skipif(not ipv6_loopback_works(), reason="no IPv6 loopback on this machine")
def test_ipv6_loopback() -> None:
    with Server(listen="::1", port=0) as srv:
        address = srv.address
        assert isinstance(address, tuple)
        host, port = address
        assert host == "::1"
        assert srv.host == "::1"
        assert port > 0
        assert put(srv.address) == b"INSERTED 1\r\n"
        assert "[::1]:" in repr(srv)


def test_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "beanpole.sock"
    with Server(listen=f"unix:{path}") as srv:
        assert srv.address == str(path)
        assert path.is_socket()
        with pytest.raises(ServerError, match="unix socket"):
            _ = srv.port
        with pytest.raises(ServerError, match="unix socket"):
            _ = srv.host
        assert put(srv.address) == b"INSERTED 1\r\n"
        assert srv.stats()["total-jobs"] == 1


# -- serve_forever and signals -------------------------------------------------------------


def _signal_when_up(
    ready: threading.Event,
    server: Server,
    sig: signal.Signals,
    seen: list[bytes],
) -> None:
    """Wait until serve_forever is ready, prove the server answers, then signal this process."""
    if not ready.wait(TIMEOUT):
        return  # serve_forever failed early; never signal a process with no handler
    seen.append(request(server.address, b"stats\r\n")[:3])
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_forever_stops_on_signal(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    srv = Server(port=0)
    ready = threading.Event()
    seen: list[bytes] = []
    received: list[signal.Signals] = []
    sender = threading.Thread(target=_signal_when_up, args=(ready, srv, sig, seen))
    sender.start()
    try:
        srv.serve_forever(on_ready=lambda _srv: ready.set(), on_signal=received.append)
    finally:
        ready.set()
        sender.join(TIMEOUT)
    assert seen == [b"OK "]
    assert received == [sig]
    assert not srv.running
    assert signal.getsignal(sig) is before  # previous handler restored


def test_serve_forever_drains_on_sigusr1() -> None:
    srv = Server(port=0)
    ready = threading.Event()
    drained = threading.Event()
    replies: list[bytes] = []
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        if sig == signal.SIGUSR1:
            drained.set()

    def client() -> None:
        if not ready.wait(TIMEOUT):
            return
        replies.append(put(srv.address))
        os.kill(os.getpid(), signal.SIGUSR1)
        if drained.wait(TIMEOUT):
            replies.append(put(srv.address))
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGUSR1)
    thread = threading.Thread(target=client)
    thread.start()
    try:
        srv.serve_forever(on_ready=lambda _srv: ready.set(), on_signal=on_signal)
    finally:
        ready.set()
        thread.join(TIMEOUT)
    assert replies == [b"INSERTED 1\r\n", b"DRAINING\r\n"]
    assert received == [signal.SIGUSR1, signal.SIGTERM]
    assert not srv.running
    assert signal.getsignal(signal.SIGUSR1) is before


def test_serve_forever_in_a_thread_returns_on_stop() -> None:
    srv = Server(port=0).start()
    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=srv.serve_forever)
    thread.start()
    assert put(srv.address) == b"INSERTED 1\r\n"
    assert signal.getsignal(signal.SIGTERM) is before  # no handlers outside the main thread
    srv.stop()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert not srv.running


def test_serve_forever_bind_error_restores_handlers(server: Server) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(OSError, match=r"(?i)in use"):
        Server(port=server.port).serve_forever()
    assert signal.getsignal(signal.SIGTERM) is before


def test_serve_forever_on_a_stopped_server(server: Server) -> None:
    server.stop()
    with pytest.raises(ServerError, match="stopped"):
        server.serve_forever()
