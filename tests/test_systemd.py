"""systemd: socket activation through Debian's ``systemd-socket-activate`` (TCP and Unix
sockets handed to a real ``beanpole serve``), and ``READY=1`` / ``STOPPING=1`` received on
a datagram socket standing in for ``NOTIFY_SOCKET``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import beanpole
from beanpole.cli import cli
from beanpole.server import systemd
from servechild import TIMEOUT, ServeChild, command, connect, free_port, stats

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built",
)
ACTIVATE = shutil.which("systemd-socket-activate")
needs_activate = pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate not found")


@pytest.fixture
def children() -> Iterator[list[ServeChild]]:
    started: list[ServeChild] = []
    yield started
    for child in started:
        child.kill()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path (a Unix socket path has at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="bp-") as name:
        yield Path(name)


class NotifySocket:
    """A datagram socket in the role of systemd's notification socket."""

    def __init__(self, name: str) -> None:
        self.name = name  # as NOTIFY_SOCKET gives it: a path, or @name (abstract)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + name[1:] if name.startswith("@") else name)
        self.sock.settimeout(TIMEOUT)

    def receive(self) -> dict[str, str]:
        """The next notification, as its KEY=VALUE lines."""
        try:
            data = self.sock.recv(4096)
        except TimeoutError:
            pytest.fail(f"no notification within {TIMEOUT}s")
        return dict(line.split("=", 1) for line in data.decode().splitlines())

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def notify_path(short_tmp: Path) -> Iterator[NotifySocket]:
    sock = NotifySocket(str(short_tmp / "notify"))
    yield sock
    sock.close()


# -- readiness notification ------------------------------------------------------------------


def test_ready_once_serving_then_stopping_on_sigterm(
    children: list[ServeChild], notify_path: NotifySocket
) -> None:
    child = ServeChild("-p", "0", env={"NOTIFY_SOCKET": notify_path.name})
    children.append(child)
    ready = notify_path.receive()
    assert ready["READY"] == "1"
    assert ready["STATUS"].startswith("listening on 127.0.0.1:")
    # READY=1 means serving: the announced address accepts at once.
    port = int(ready["STATUS"].rsplit(":", 1)[1])
    with connect(("127.0.0.1", port)) as sock:
        assert command(sock, b"put 0 0 60 1\r\nx\r\n") == b"INSERTED 1\r\n"
    child.proc.send_signal(signal.SIGUSR1)
    assert notify_path.receive() == {"STATUS": "draining (puts are refused)"}
    child.proc.send_signal(signal.SIGTERM)
    stopping = notify_path.receive()
    assert stopping["STOPPING"] == "1"
    assert child.finish() == 0
    # Nothing more once stopping has been said.
    notify_path.sock.settimeout(0)
    with pytest.raises(BlockingIOError):
        notify_path.sock.recv(4096)


def test_notify_socket_in_the_abstract_namespace(children: list[ServeChild]) -> None:
    notify = NotifySocket(f"@beanpole-test-{uuid.uuid4().hex}")
    try:
        child = ServeChild("-p", "0", env={"NOTIFY_SOCKET": notify.name})
        children.append(child)
        assert notify.receive()["READY"] == "1"
        child.proc.send_signal(signal.SIGINT)
        assert notify.receive()["STOPPING"] == "1"
        assert child.finish() == 0
    finally:
        notify.close()


def test_an_unreachable_notify_socket_is_a_warning_not_a_failure(
    children: list[ServeChild], short_tmp: Path
) -> None:
    child = ServeChild("-p", "0", env={"NOTIFY_SOCKET": str(short_tmp / "nobody-here")})
    children.append(child)
    [address] = child.addresses()
    child.wait_line(r"warning: cannot notify systemd: No such file or directory")
    with connect(address) as sock:
        assert command(sock, b"use a\r\n") == b"USING a\r\n"
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0


# -- socket activation ---------------------------------------------------------------------


@needs_activate
def test_socket_activation_serves_the_inherited_tcp_and_unix_sockets(
    children: list[ServeChild], short_tmp: Path, notify_path: NotifySocket
) -> None:
    assert ACTIVATE is not None
    port = free_port()
    path = short_tmp / "activated.sock"
    ignored_port = free_port()  # -l/-p are not used when sockets are inherited
    child = ServeChild(
        "-l",
        "127.0.0.1",
        "-p",
        str(ignored_port),
        env={"NOTIFY_SOCKET": notify_path.name},
        prefix=[
            ACTIVATE,
            "-l",
            f"127.0.0.1:{port}",
            "-l",
            str(path),
            "-E",
            "PYTHONPATH",
            "-E",
            "NOTIFY_SOCKET",
        ],
    )
    children.append(child)
    # systemd-socket-activate listens first, and starts beanpole on the first connection.
    child.wait_line(rf"Listening on {path} as 4\.")
    with connect(("127.0.0.1", port)) as producer:
        assert command(producer, b"put 0 0 60 5\r\nhello\r\n") == b"INSERTED 1\r\n"
        assert child.addresses() == [("127.0.0.1", port), str(path)]
        assert notify_path.receive()["READY"] == "1"
        with connect(str(path)) as worker:
            assert command(worker, b"reserve-with-timeout 0\r\n") == b"RESERVED 1 5\r\nhello\r\n"
            assert command(worker, b"delete 1\r\n") == b"DELETED\r\n"
        figures = stats(("127.0.0.1", port))
        assert figures["cmd-put"] == "1"
        assert figures["cmd-delete"] == "1"
        assert figures["pid"] == str(child.proc.pid)  # exec'd in place: LISTEN_PID matched
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", ignored_port), timeout=TIMEOUT)
    child.proc.send_signal(signal.SIGTERM)
    assert notify_path.receive()["STOPPING"] == "1"
    assert child.finish() == 0
    # The socket file belongs to whoever made it; beanpole leaves it alone.
    assert path.exists()


def test_activation_variables_for_another_process_are_ignored_and_removed() -> None:
    environ = {"LISTEN_PID": str(os.getpid() + 1), "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"}
    assert systemd.listen_fds(environ) == []
    assert environ == {}
    assert systemd.listen_fds({}) == []
    environ = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "0"}
    assert systemd.listen_fds(environ) == []


@pytest.mark.parametrize(
    "environ",
    [{"LISTEN_PID": "x", "LISTEN_FDS": "1"}, {"LISTEN_PID": "1", "LISTEN_FDS": "one"}],
)
def test_malformed_activation_variables(environ: dict[str, str]) -> None:
    with pytest.raises(systemd.SystemdError, match="not numbers"):
        systemd.listen_fds(dict(environ))
    result = CliRunner().invoke(cli, ["serve", "-p", "0"], env=environ, prog_name="beanpole")
    assert result.exit_code == 1
    assert "socket activation: " in result.output
    assert "Traceback" not in result.output


def test_notify_without_a_socket_sends_nothing() -> None:
    assert systemd.notify("READY=1", {}) is False
    assert systemd.notify("READY=1", {"NOTIFY_SOCKET": "vsock:2:9"}) is False


# -- the unit files in contrib/systemd -----------------------------------------------------

UNITS = Path(__file__).resolve().parent.parent / "contrib" / "systemd"
ANALYZE = shutil.which("systemd-analyze")


def unit_settings(name: str) -> dict[str, list[str]]:
    """Every ``Key=value`` of a unit file (a key may repeat), comments skipped."""
    settings: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not found")
def test_unit_files_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    assert ANALYZE is not None
    beanpole_command = Path(sys.executable).with_name("beanpole")
    assert beanpole_command.exists()
    for name in ("beanpole.service", "beanpole.socket"):
        text = (UNITS / name).read_text()
        (tmp_path / name).write_text(text.replace("/usr/local/bin/beanpole", str(beanpole_command)))
    done = subprocess.run(
        [ANALYZE, "verify", str(tmp_path / "beanpole.socket"), str(tmp_path / "beanpole.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Any unknown key or bad value is reported on stderr (the status stays 0 for those).
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_service_runs_beanpole_as_a_sandboxed_notify_service() -> None:
    service = unit_settings("beanpole.service")
    assert service["Type"] == ["notify"]
    assert service["DynamicUser"] == ["yes"]
    assert service["StateDirectory"] == ["beanpole"]
    for key in ("ProtectSystem", "ProtectHome", "PrivateTmp", "NoNewPrivileges"):
        assert service[key] in (["strict"], ["yes"]), key
    assert "@system-service" in service["SystemCallFilter"]
    assert service["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]
    [exec_start] = service["ExecStart"]
    command_path, *args = exec_start.split()
    assert command_path.endswith("/beanpole")
    assert args == ["serve", "-b", "/var/lib/beanpole"]
    # The arguments are ones beanpole serve takes.
    serve_command = cli.commands["serve"]
    context = serve_command.make_context("serve", args[1:])
    assert context.params["binlog_dir"] == "/var/lib/beanpole"
    socket_unit = unit_settings("beanpole.socket")
    assert socket_unit["ListenStream"] == ["127.0.0.1:11300"]


def test_server_serves_inherited_descriptors_and_keeps_no_copy_after_stop() -> None:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    address = listening.getsockname()
    fd = listening.detach()  # handed over, as systemd hands descriptors over
    server = beanpole.Server(listen_fds=[fd], listen="::1", port=0)  # listen is not used
    with server:
        assert server.addresses == (address,)
        with pytest.raises(OSError):
            os.fstat(fd)  # the server took it over and closed it: the engine has its copy
        with connect(address) as sock:
            assert command(sock, b"put 0 0 60 1\r\nx\r\n") == b"INSERTED 1\r\n"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=TIMEOUT)
