"""Several listeners: ``-l`` repeated (IPv4, IPv6, Unix), ``HOST:PORT`` and ``[V6]:PORT``,
``--unix-mode``, ``BEANPOLE_LISTEN`` lists, ``Server.addresses``; real ``beanpole serve``
processes and real sockets."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import beanpole
from beanpole.cli import cli
from servechild import (
    Address,
    ServeChild,
    command,
    connect,
    free_port,
    have_ipv6_loopback,
    stats,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built",
)
IPV6 = have_ipv6_loopback()


@pytest.fixture
def children() -> Iterator[list[ServeChild]]:
    started: list[ServeChild] = []
    yield started
    for child in started:
        child.kill()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path (a Unix socket path has at most 107 bytes)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bp-") as name:
        yield Path(name)


def serve(children: list[ServeChild], *args: str, env: dict[str, str] | None = None) -> ServeChild:
    child = ServeChild(*args, env=env)
    children.append(child)
    return child


def refused(address: Address) -> bool:
    try:
        connect(address).close()
    except (ConnectionRefusedError, FileNotFoundError):
        return True
    return False


def test_one_server_on_ipv4_ipv6_and_a_unix_socket(
    children: list[ServeChild], short_tmp: Path
) -> None:
    path = short_tmp / "b.sock"
    args = ["-p", "0", "-l", "127.0.0.1"]
    if IPV6:
        args += ["-l", "::1"]
    args += ["-l", f"unix:{path}", "--unix-mode", "0660"]
    child = serve(children, *args)
    addresses = child.addresses()
    assert len(addresses) == (3 if IPV6 else 2)
    v4 = addresses[0]
    assert isinstance(v4, tuple) and v4[0] == "127.0.0.1" and v4[1] > 0
    if IPV6:
        v6 = addresses[1]
        assert isinstance(v6, tuple) and v6[0] == "::1" and v6[1] > 0
    assert addresses[-1] == str(path)
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o660

    # One queue behind every address.
    for n, address in enumerate(addresses, start=1):
        with connect(address) as sock:
            assert command(sock, b"put 0 0 60 1\r\nx\r\n") == f"INSERTED {n}\r\n".encode()
    for address in reversed(addresses):
        with connect(address) as sock:
            assert command(sock, b"reserve-with-timeout 0\r\n").startswith(b"RESERVED ")
    assert stats(addresses[-1])["total-jobs"] == str(len(addresses))

    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0
    for address in addresses:
        assert refused(address), address
    assert not path.exists(), "the socket file was left behind"


def test_host_port_forms_take_their_own_port(children: list[ServeChild]) -> None:
    port = free_port()
    args = ["-p", "0", "-l", f"127.0.0.1:{port}", "-l", "127.0.0.1"]
    if IPV6:
        args += ["-l", f"[::1]:{free_port('::1')}"]
    child = serve(children, *args)
    addresses = child.addresses()
    assert addresses[0] == ("127.0.0.1", port)
    other = addresses[1]
    assert isinstance(other, tuple) and other[1] not in (0, port)  # -p 0: a free port
    if IPV6:
        assert addresses[2][0] == "::1"
    for address in addresses:
        with connect(address) as sock:
            assert command(sock, b"use t\r\n") == b"USING t\r\n"
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0


def test_listen_list_and_mode_from_the_environment(
    children: list[ServeChild], short_tmp: Path
) -> None:
    path = short_tmp / "env.sock"
    child = serve(
        children,
        env={"BEANPOLE_LISTEN": f"127.0.0.1:0, unix:{path}", "BEANPOLE_UNIX_MODE": "600"},
    )
    addresses = child.addresses()
    assert addresses[1] == str(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    child.proc.send_signal(signal.SIGINT)
    assert child.finish() == 0


def test_a_taken_address_fails_the_start_and_nothing_stays_bound(
    children: list[ServeChild], short_tmp: Path
) -> None:
    path = short_tmp / "first.sock"
    first_port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = serve(
            children,
            "-l",
            f"127.0.0.1:{first_port}",
            "-l",
            f"unix:{path}",
            "-l",
            f"127.0.0.1:{port}",
        )
        status = child.finish()
    assert status == 1
    lines = [line for line in child.stderr if line.strip()]
    assert len(lines) == 1, lines
    assert f"cannot listen on 127.0.0.1:{port}:" in lines[0]
    assert "Address already in use" in lines[0]
    assert not path.exists()
    # The first address was let go as well.
    with socket.socket() as again:
        again.bind(("127.0.0.1", first_port))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--unix-mode", "999"], "octal mode"),
        (["--unix-mode", "1777"], "between 0 and 0777"),
        (["-l", "[::1"], "got '[::1'"),
        (["-l", "127.0.0.1", "-l", "127.0.0.1:99999"], "got '127.0.0.1:99999'"),
    ],
)
def test_bad_listen_flags_are_usage_errors(args: list[str], fragment: str) -> None:
    result = CliRunner().invoke(cli, ["serve", *args], prog_name="beanpole")
    assert result.exit_code == 2, result.output
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_server_addresses_lists_every_listener(short_tmp: Path) -> None:
    path = short_tmp / "emb.sock"
    with beanpole.Server(listen=["127.0.0.1", f"unix:{path}"], port=0, unix_mode=0o600) as srv:
        addresses = srv.addresses
        assert len(addresses) == 2
        assert srv.address == addresses[0]
        assert addresses[1] == str(path)
        assert srv.port == addresses[0][1]  # type: ignore[index]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with connect(addresses[1]) as sock:
            assert command(sock, b"put 0 0 60 1\r\nx\r\n") == b"INSERTED 1\r\n"
        assert srv.stats()["current-jobs-ready"] == 1
    assert srv.addresses == addresses  # still known after stop
    assert not path.exists()
    assert refused(addresses[0])
