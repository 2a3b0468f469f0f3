"""TLS listeners: certificates made with ``openssl`` for the session, real ``ssl`` sockets
against an embedded server and a ``beanpole serve`` process (SIGHUP reload, CLI errors)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import beanpole
from beanpole.cli import cli
from servechild import TIMEOUT, ServeChild, command
from tlscerts import Certs, client_context, make_certs

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("beanpole._core") is None,
        reason="native module beanpole._core is not built",
    ),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed"),
]


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


def tls_connect(address: tuple[str, int], ctx: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(address, timeout=TIMEOUT)
    try:
        return ctx.wrap_socket(raw, server_hostname="localhost")
    except BaseException:
        raw.close()
        raise


def recv_all_until_closed(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def tls_server(certs: Certs, *, client_ca: bool = False) -> beanpole.Server:
    return beanpole.Server(
        listen=["tls:127.0.0.1:0", "127.0.0.1:0"],
        tls_cert=str(certs.server_cert),
        tls_key=str(certs.server_key),
        tls_client_ca=str(certs.ca) if client_ca else None,
    )


def test_put_and_reserve_over_tls_beside_a_plain_listener(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, plain_address = srv.addresses
        assert isinstance(tls_address, tuple) and isinstance(plain_address, tuple)
        with tls_connect(tls_address, client_context(certs.ca)) as sock:
            assert command(sock, b"put 5 0 60 5\r\nhello\r\n") == b"INSERTED 1\r\n"
            # Several commands in one write, and a body larger than one TLS record.
            body = b"x" * 40000
            reply = command(sock, b"put 0 0 60 %d\r\n%s\r\nreserve\r\n" % (len(body), body))
            assert reply.startswith(b"INSERTED 2\r\n")
            if not reply.endswith(b"\r\n" + body + b"\r\n"):
                reply += sock.recv(65536)
                while len(reply) < 12 + 20 + len(body):
                    reply += sock.recv(65536)
            assert reply == b"INSERTED 2\r\nRESERVED 2 %d\r\n%s\r\n" % (len(body), body)
            assert command(sock, b"delete 2\r\n") == b"DELETED\r\n"
        with socket.create_connection(plain_address, timeout=TIMEOUT) as plain:
            assert command(plain, b"reserve\r\n") == b"RESERVED 1 5\r\nhello\r\n"


def test_a_blocked_reserve_over_tls_is_answered(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, plain_address = srv.addresses
        assert isinstance(tls_address, tuple) and isinstance(plain_address, tuple)
        with tls_connect(tls_address, client_context(certs.ca)) as waiter:
            waiter.sendall(b"reserve\r\n")
            with socket.create_connection(plain_address, timeout=TIMEOUT) as plain:
                # The waiter's reserve has arrived once the server counts it.
                assert command(plain, b"list-tubes-watched\r\n").startswith(b"OK")
                assert command(plain, b"put 0 0 60 2\r\nhi\r\n") == b"INSERTED 1\r\n"
            got = b""
            while not got.endswith(b"hi\r\n"):
                chunk = waiter.recv(100)
                assert chunk
                got += chunk
            assert got == b"RESERVED 1 2\r\nhi\r\n"


def test_greenstalk_over_a_wrapped_socket(certs: Certs) -> None:
    greenstalk = pytest.importorskip("greenstalk")
    with tls_server(certs) as srv:
        tls_address = srv.addresses[0]
        assert isinstance(tls_address, tuple)
        client = greenstalk.Client(tls_address)
        # greenstalk connects by itself; swap its socket for a TLS one.
        client._sock.close()
        client._sock = tls_connect(tls_address, client_context(certs.ca))
        client._reader = client._sock.makefile("rb")
        try:
            jid = client.put("over tls")
            job = client.reserve(timeout=5)
            assert (job.id, job.body) == (jid, "over tls")
            client.delete(job)
        finally:
            client.close()


def test_a_plain_client_on_the_tls_port_is_closed_and_the_server_stays_up(
    certs: Certs,
) -> None:
    with tls_server(certs) as srv:
        tls_address, plain_address = srv.addresses
        assert isinstance(tls_address, tuple) and isinstance(plain_address, tuple)
        with socket.create_connection(tls_address, timeout=TIMEOUT) as sock:
            sock.sendall(b"put 0 0 60 1\r\nx\r\nstats\r\n")
            got = recv_all_until_closed(sock)  # closed by the server, not a timeout
            assert b"INSERTED" not in got and b"OK" not in got
        # Still serving, on both listeners.
        with tls_connect(tls_address, client_context(certs.ca)) as tls_sock:
            assert command(tls_sock, b"put 0 0 60 1\r\ny\r\n") == b"INSERTED 1\r\n"
        with socket.create_connection(plain_address, timeout=TIMEOUT) as plain:
            assert command(plain, b"peek-ready\r\n") == b"FOUND 1 1\r\ny\r\n"
        assert srv.stats()["tls-failed-handshakes"] == 1


def test_a_client_trusting_another_ca_refuses_the_server(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address = srv.addresses[0]
        assert isinstance(tls_address, tuple)
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_connect(tls_address, client_context(certs.other_ca))
        with tls_connect(tls_address, client_context(certs.ca)) as sock:
            assert command(sock, b"list-tube-used\r\n") == b"USING default\r\n"


def _refused(address: tuple[str, int], ctx: ssl.SSLContext) -> bool:
    """Whether the server refuses this client: during the handshake, or (TLS 1.3, where
    the client finishes first) at the first read."""
    try:
        with tls_connect(address, ctx) as sock:
            sock.sendall(b"list-tube-used\r\n")
            return sock.recv(100) == b""
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True


def test_mutual_tls_lets_in_only_clients_with_a_certificate_from_the_ca(certs: Certs) -> None:
    with tls_server(certs, client_ca=True) as srv:
        tls_address, plain_address = srv.addresses
        assert isinstance(tls_address, tuple)
        assert _refused(tls_address, client_context(certs.ca))
        stranger = (certs.stranger_cert, certs.stranger_key)
        assert _refused(tls_address, client_context(certs.ca, stranger))
        good = (certs.client_cert, certs.client_key)
        with tls_connect(tls_address, client_context(certs.ca, good)) as sock:
            assert command(sock, b"put 0 0 60 2\r\nok\r\n") == b"INSERTED 1\r\n"
        assert srv.stats()["tls-failed-handshakes"] == 2
        # The plain listener asks for no certificate.
        assert isinstance(plain_address, tuple)
        with socket.create_connection(plain_address, timeout=TIMEOUT) as plain:
            assert command(plain, b"reserve\r\n") == b"RESERVED 1 2\r\nok\r\n"


def test_reload_tls_without_tls_says_so() -> None:
    with beanpole.Server(port=0) as srv:
        assert srv.reload_tls() is False
        assert "tls-failed-handshakes" not in srv.stats()


def _server_cert(address: tuple[str, int], ca: Path) -> bytes:
    with tls_connect(address, client_context(ca)) as sock:
        der = sock.getpeercert(binary_form=True)
        assert der is not None
        return der


def _der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


def test_sighup_rereads_the_certificates_and_open_connections_keep_working(
    certs: Certs, tmp_path: Path
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(certs.server_cert, cert)
    shutil.copy(certs.server_key, key)
    child = ServeChild("-l", "tls:127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        (address,) = child.addresses()
        assert isinstance(address, tuple)
        assert _server_cert(address, certs.ca) == _der(certs.server_cert)
        with tls_connect(address, client_context(certs.ca)) as kept:
            assert command(kept, b"put 0 0 60 1\r\na\r\n") == b"INSERTED 1\r\n"
            shutil.copy(certs.server2_cert, cert)
            shutil.copy(certs.server2_key, key)
            child.proc.send_signal(signal.SIGHUP)
            child.wait_line("SIGHUP: TLS certificates re-read")
            assert _server_cert(address, certs.ca) == _der(certs.server2_cert)
            assert command(kept, b"put 0 0 60 1\r\nb\r\n") == b"INSERTED 2\r\n"
            # A bad file: the reload fails, the certificate in force stays.
            cert.write_text("not a certificate\n")
            child.proc.send_signal(signal.SIGHUP)
            child.wait_line("TLS certificates in force are kept")
            assert _server_cert(address, certs.ca) == _der(certs.server2_cert)
            assert command(kept, b"stats-job 2\r\n").startswith(b"OK ")
        child.proc.send_signal(signal.SIGTERM)
        assert child.finish() == 0
    finally:
        child.kill()


@pytest.mark.parametrize(
    ("args", "status", "fragment"),
    [
        (["-l", "tls:127.0.0.1:0"], 2, "needs a certificate and a key"),
        (["-l", "tls:unix:/tmp/x.sock", "--tls-cert", "c", "--tls-key", "k"], 2, "tls: takes"),
        (["--tls-cert", "c"], 2, "needs --tls-key"),
        (["-l", "tls:127.0.0.1:0", "--tls-cert", "/nonexistent/c", "--tls-key", "k"], 1,
         "cannot read /nonexistent/c"),
    ],
)  # fmt: skip
def test_tls_setting_errors_are_one_line(args: list[str], status: int, fragment: str) -> None:
    result = CliRunner().invoke(cli, ["serve", *args], prog_name="beanpole")
    assert result.exit_code == status, result.output
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_tls_settings_come_from_the_environment() -> None:
    config = beanpole.Config.from_env(
        {
            "BEANPOLE_LISTEN": "127.0.0.1,tls:[::1]:11443",
            "BEANPOLE_TLS_CERT": "/etc/beanpole/cert.pem",
            "BEANPOLE_TLS_KEY": "/etc/beanpole/key.pem",
            "BEANPOLE_TLS_CLIENT_CA": "/etc/beanpole/ca.pem",
        }
    )
    assert config.listen == ("127.0.0.1", "tls:[::1]:11443")
    assert (config.tls_cert, config.tls_key, config.tls_client_ca) == (
        "/etc/beanpole/cert.pem",
        "/etc/beanpole/key.pem",
        "/etc/beanpole/ca.pem",
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"listen": "tls:127.0.0.1"}, "listen"),
        ({"listen": "tls:localhost:1"}, "listen"),
        ({"tls_key": "k"}, "tls_key"),
        ({"tls_client_ca": "ca", "listen": "127.0.0.1"}, "tls_client_ca"),
        ({"tls_cert": "", "tls_key": "k"}, "tls_cert"),
    ],
)
def test_incomplete_tls_settings_are_refused(changes: dict[str, str], field: str) -> None:
    with pytest.raises(beanpole.ConfigError) as caught:
        beanpole.Config(**changes)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_tls_listener_from_the_environment_without_files_is_one_line() -> None:
    result = CliRunner().invoke(
        cli, ["serve"], prog_name="beanpole", env={"BEANPOLE_LISTEN": "tls:127.0.0.1:0"}
    )
    assert result.exit_code == 1, result.output
    assert "needs a certificate and a key" in result.output
    assert "Traceback" not in result.output


def test_tls_bench_runs_tiny() -> None:
    """bench/tls_bench.py end to end with tiny counts (its figures are not checked)."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed")
    root = Path(__file__).resolve().parent.parent
    subprocess.run([cargo, "build", "-q", "-p", "beanpole-bench"], cwd=root, check=True)
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    bench = Path(json.loads(meta.stdout)["target_directory"]) / "debug" / "beanpole-bench"
    proc = subprocess.run(
        [
            sys.executable, str(root / "bench" / "tls_bench.py"), "--bench", str(bench),
            "--pairs", "1", "--jobs", "200", "--connections", "2", "--pipeline", "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root / "bench",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.splitlines()
    assert table[0].split()[:3] == ["load", "mode", "ops/s"]
    rows = [line.split() for line in table[1:]]
    assert [row[-1] for row in rows if "tls" in row]  # a ratio on every TLS row
    # three generator loads, and beanpole.Client put_many and single puts with TLS
    # from files and from an ssl.SSLContext, each plain and TLS
    assert len(rows) == 14


def _wait_for_stat(srv: beanpole.Server, key: str, want: int) -> None:
    """Poll the embedded server's stats (no connection of its own) until ``key`` is
    ``want``; fails after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while srv.stats()[key] != want:
        assert time.monotonic() < deadline, f"{key} never became {want}: {srv.stats()[key]}"
        time.sleep(0.01)


def test_a_hang_up_behind_a_blocked_reserve_and_much_input_is_seen_over_tls(
    certs: Certs,
) -> None:
    """More input than a waiting connection reads ahead (64 KiB), partly decrypted and
    held by the TLS session: the client's hang-up must still end the connection."""
    with tls_server(certs) as srv:
        tls_address = srv.addresses[0]
        assert isinstance(tls_address, tuple)
        sock = tls_connect(tls_address, client_context(certs.ca))
        sock.sendall(b"reserve\r\n")
        _wait_for_stat(srv, "current-waiting", 1)
        sock.sendall(b"put 0 0 60 100000\r\n" + b"z" * 100_002)
        sock.close()
        _wait_for_stat(srv, "current-connections", 0)
        assert srv.stats()["current-jobs-ready"] == 0


def test_quit_ends_the_tls_session_cleanly(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address = srv.addresses[0]
        assert isinstance(tls_address, tuple)
        raw = socket.create_connection(tls_address, timeout=TIMEOUT)
        # Without suppress_ragged_eofs, an end without close_notify raises SSLEOFError.
        with client_context(certs.ca).wrap_socket(
            raw, server_hostname="localhost", suppress_ragged_eofs=False
        ) as sock:
            sock.sendall(b"list-tube-used\r\nquit\r\n")
            assert recv_all_until_closed(sock) == b"USING default\r\n"


def test_sighup_without_tls_leaves_the_server_running() -> None:
    child = ServeChild("-l", "127.0.0.1:0")
    try:
        (address,) = child.addresses()
        child.proc.send_signal(signal.SIGHUP)
        child.wait_line("SIGHUP: no tls: listener")
        with socket.create_connection(address, timeout=TIMEOUT) as plain:
            assert command(plain, b"list-tube-used\r\n") == b"USING default\r\n"
        child.proc.send_signal(signal.SIGTERM)
        assert child.finish() == 0
    finally:
        child.kill()
