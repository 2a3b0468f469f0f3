"""TLS in beanpole's own clients: ``Client``, ``AsyncClient`` and ``ShardedClient`` with
``tls=True`` against embedded servers with ``tls:`` listeners (certificates made with
``openssl`` for the session), the refusals (wrong CA, wrong name, mutual TLS without or
with a stranger's certificate, a plain port, bad files), and the CLI's ``--tls``. Then
the same clients with ``tls=<ssl.SSLContext>``, which go through a relay thread."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import beanpole
from beanpole.cli import cli
from beanpole.client import errors as errors
from beanpole.client.relay import RELAY_THREAD_NAME
from servechild import TIMEOUT
from tlscerts import Certs, make_certs

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("beanpole._core") is None,
        reason="native module beanpole._core is not built",
    ),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed"),
]


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("client-tls"))


def tls_server(certs: Certs, *, client_ca: bool = False) -> beanpole.Server:
    """A server with a TLS listener first and a plain one second."""
    return beanpole.Server(
        listen=["tls:127.0.0.1:0", "127.0.0.1:0"],
        tls_cert=str(certs.server_cert),
        tls_key=str(certs.server_key),
        tls_client_ca=str(certs.ca) if client_ca else None,
    )


def addresses(srv: beanpole.Server) -> tuple[tuple[str, int], tuple[str, int]]:
    tls_address, plain_address = srv.addresses
    assert isinstance(tls_address, tuple) and isinstance(plain_address, tuple)
    return tls_address, plain_address


def test_client_commands_and_batches_over_tls(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, plain_address = addresses(srv)
        with beanpole.Client(tls_address, tls=True, ca=certs.ca, timeout=TIMEOUT) as c:
            jid = c.put("hello", priority=5)
            job = c.reserve(timeout=0)
            assert (job.id, job.body) == (jid, "hello")
            c.delete(job)
            # Bodies larger than one TLS record, pipelined in windows.
            bodies = [f"{i}:" + "x" * (i % 7 * 5000) for i in range(3000)]
            ids = c.put_many(bodies, window=200)
            assert len(ids) == 3000 and ids == sorted(ids)
            jobs = c.reserve_many(3000, timeout=0)
            assert [j.body for j in jobs] == bodies
            c.delete_many(jobs)
            assert c.stats()["current-jobs-ready"] == 0
        # The same server seen through its plain listener agrees.
        with beanpole.Client(plain_address, timeout=TIMEOUT) as plain:
            assert plain.stats()["total-jobs"] == 3001
        assert srv.stats()["tls-failed-handshakes"] == 0


def test_the_system_ca_bundle_is_the_default(certs: Certs, monkeypatch: pytest.MonkeyPatch) -> None:
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        # The test CA is in no system bundle: refused.
        with pytest.raises(errors.TLSError, match="certificate"):
            beanpole.Client(tls_address, tls=True, timeout=TIMEOUT)
        # Python's own variable for the bundle points at it: trusted.
        monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
        with beanpole.Client(tls_address, tls=True, timeout=TIMEOUT) as c:
            assert c.put("via SSL_CERT_FILE") == 1


def test_async_client_over_tls(certs: Certs) -> None:
    async def run(address: tuple[str, int]) -> None:
        async with beanpole.AsyncClient(address, tls=True, ca=certs.ca, timeout=TIMEOUT) as c:
            ids = await c.put_many([f"job {i}" for i in range(100)])
            job = await c.reserve(timeout=0)
            assert (job.id, job.body) == (ids[0], "job 0")
            await c.delete(job)
            assert (await c.stats())["current-jobs-ready"] == 99

    with tls_server(certs) as srv:
        asyncio.run(run(addresses(srv)[0]))


def test_sharded_client_over_tls(certs: Certs) -> None:
    with tls_server(certs) as one, tls_server(certs) as two:
        servers = [addresses(one)[0], addresses(two)[0]]
        with beanpole.ShardedClient(servers, tls=True, ca=certs.ca, timeout=TIMEOUT) as c:
            ids = c.put_many([f"job {i}" for i in range(200)])
            assert len(ids) == 200
            assert {srv.stats()["current-jobs-ready"] for srv in (one, two)} != {0}
            assert sum(int(srv.stats()["current-jobs-ready"]) for srv in (one, two)) == 200
            job = c.reserve(timeout=1)
            c.delete(job)
        with pytest.raises(errors.ServerDownError) as caught:
            beanpole.ShardedClient(servers, tls=True, ca=certs.other_ca, timeout=TIMEOUT)
        assert isinstance(caught.value.__cause__, errors.TLSError)


def test_a_server_certificate_from_another_ca_is_refused(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        with pytest.raises(errors.TLSError, match="UnknownIssuer") as caught:
            beanpole.Client(tls_address, tls=True, ca=certs.other_ca, timeout=TIMEOUT)
        assert isinstance(caught.value, errors.ClientConnectionError)
        assert "127.0.0.1" in str(caught.value)


def test_the_server_name_must_be_in_the_certificate(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        with pytest.raises(errors.TLSError, match="not valid for name"):
            beanpole.Client(
                tls_address, tls=True, ca=certs.ca, server_name="elsewhere.test", timeout=TIMEOUT
            )
        # "localhost" is in the certificate too.
        with beanpole.Client(
            tls_address, tls=True, ca=certs.ca, server_name="localhost", timeout=TIMEOUT
        ) as c:
            c.put("by name")


def test_mutual_tls_lets_in_only_a_certificate_from_the_client_ca(certs: Certs) -> None:
    with tls_server(certs, client_ca=True) as srv:
        tls_address, _ = addresses(srv)
        refused: list[dict[str, Any]] = [
            {},
            {"cert": certs.stranger_cert, "key": certs.stranger_key},
        ]
        for extra in refused:
            # In TLS 1.3 the server's verdict comes after the client's handshake ends:
            # the refusal arrives with the first reply.
            c = beanpole.Client(tls_address, tls=True, ca=certs.ca, timeout=TIMEOUT, **extra)
            with pytest.raises(errors.TLSError, match="alert"):
                c.put("must not land")
            assert not c.connected
        with beanpole.Client(
            tls_address,
            tls=True,
            ca=certs.ca,
            cert=certs.client_cert,
            key=certs.client_key,
            timeout=TIMEOUT,
        ) as c:
            jid = c.put("let in")
            assert c.stats()["current-jobs-ready"] == 1
            assert c.peek(jid).body == "let in"
        assert srv.stats()["tls-failed-handshakes"] == 2


def test_a_tls_client_on_a_plain_port_fails_within_its_timeout(certs: Certs) -> None:
    with tls_server(certs) as srv:
        _, plain_address = addresses(srv)
        started = time.monotonic()
        with pytest.raises(errors.ClientConnectionError) as caught:
            beanpole.Client(plain_address, tls=True, ca=certs.ca, timeout=3)
        # A plain listener waits for a command line that never comes: the client's
        # timeout ends the handshake, and the error says what is likely wrong.
        assert time.monotonic() - started < 3 + TIMEOUT
        assert isinstance(caught.value, errors.TLSError)
        assert "does the server listen with TLS" in str(caught.value)
        assert srv.running


def test_a_plain_client_on_a_tls_port_fails_cleanly(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, plain_address = addresses(srv)
        c = beanpole.Client(tls_address, timeout=TIMEOUT)
        with pytest.raises(errors.ClientConnectionError):
            c.put("never inserted")
        assert not c.connected
        with beanpole.Client(plain_address, timeout=TIMEOUT) as plain:
            assert plain.stats()["total-jobs"] == 0


def interrupt_a_blocked_reserve(srv: Any, c: beanpole.Client[Any]) -> None:
    """Block ``c`` in reserve on a thread, interrupt it once the server counts the
    wait, and check the reserve failed with a connection error."""
    failed: list[BaseException] = []

    def reserve() -> None:
        try:
            c.reserve()
        except BaseException as err:
            failed.append(err)

    t = threading.Thread(target=reserve)
    t.start()
    deadline = time.monotonic() + TIMEOUT
    while srv.stats()["current-waiting"] != 1:
        assert time.monotonic() < deadline, "the reserve never reached the server"
        time.sleep(0.01)
    c.interrupt()
    t.join(TIMEOUT)
    assert not t.is_alive()
    assert len(failed) == 1 and isinstance(failed[0], errors.ClientConnectionError)


def test_interrupt_wakes_a_reserve_blocked_over_tls(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        c = beanpole.Client(tls_address, tls=True, ca=certs.ca, timeout=TIMEOUT)
        interrupt_a_blocked_reserve(srv, c)
        c.close()


def test_bad_tls_arguments_fail_before_connecting(certs: Certs, tmp_path: Path) -> None:
    address = ("127.0.0.1", 1)  # nothing is connected, so no server is needed
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"ca": tmp_path / "missing.pem"}, "missing.pem: cannot read"),
        ({"ca": not_pem}, "no PEM certificate"),
        ({"ca": certs.ca, "cert": certs.client_cert, "key": not_pem}, "private key"),
        ({"ca": certs.ca, "cert": certs.client_cert, "key": certs.stranger_key}, "go with"),
    ]
    for kwargs, fragment in cases:
        with pytest.raises(errors.TLSConfigError, match=fragment):
            beanpole.Client(address, tls=True, timeout=TIMEOUT, **kwargs)
    with pytest.raises(ValueError, match="both or neither"):
        beanpole.Client(address, tls=True, ca=certs.ca, cert=certs.client_cert)
    with pytest.raises(ValueError, match="ca given without tls=True"):
        beanpole.Client(address, ca=certs.ca)
    with pytest.raises(ValueError, match="host:port"):
        beanpole.Client("unix:/nonexistent.sock", tls=True, ca=certs.ca)
    with pytest.raises(TypeError, match="SSLContext"):
        beanpole.Client(address, tls="yes")  # type: ignore[call-overload]
    context = ssl.create_default_context(cafile=certs.ca)
    with pytest.raises(ValueError, match=r"ca cannot be given with an ssl\.SSLContext"):
        beanpole.Client(address, tls=context, ca=certs.ca)
    with pytest.raises(ValueError, match="cert, key cannot be given"):
        beanpole.AsyncClient(address, tls=context, cert=certs.client_cert, key=certs.client_key)
    with pytest.raises(ValueError, match="ca cannot be given"):
        beanpole.ShardedClient([address], tls=context, ca=certs.ca)
    with pytest.raises(ValueError, match="host:port"):
        beanpole.Client("unix:/nonexistent.sock", tls=context)
    with pytest.raises(errors.TLSConfigError):
        beanpole.ShardedClient([address], tls=True, ca=not_pem)


def test_cli_client_commands_take_tls_options(certs: Certs) -> None:
    runner = CliRunner()
    with tls_server(certs, client_ca=True) as srv:
        tls_address, _ = addresses(srv)
        host = f"127.0.0.1:{tls_address[1]}"
        tls = ["--tls-ca", str(certs.ca), "--tls-cert", str(certs.client_cert),
               "--tls-key", str(certs.client_key)]  # fmt: skip
        result = runner.invoke(cli, ["put", "-H", host, *tls, "over tls"], prog_name="beanpole")
        assert result.exit_code == 0, result.output
        assert result.output.strip() == "1"
        result = runner.invoke(cli, ["peek", "-H", host, "--tls", *tls, "1"])
        assert result.exit_code == 0, result.output
        assert result.output == "1\tover tls\n"
        result = runner.invoke(cli, ["stats", "-H", host, *tls, "--format", "json"])
        assert result.exit_code == 0, result.output
        assert '"current-jobs-ready": 1' in result.output
        result = runner.invoke(cli, ["top", "--once", "-H", host, *tls])
        assert result.exit_code == 0, result.output
        assert "ready 1" in result.output
        # Without the client certificate: one line, exit 1, no traceback.
        result = runner.invoke(cli, ["put", "-H", host, "--tls-ca", str(certs.ca), "x"])
        assert result.exit_code == 1
        assert "TLS" in result.output and "Traceback" not in result.output
        result = runner.invoke(cli, ["stats", "-H", host, "--tls-ca", str(certs.ca)])
        assert result.exit_code == 1
        assert "Traceback" not in result.output
        assert srv.stats()["current-jobs-ready"] == 1


# -- tls=<ssl.SSLContext>: Python's ssl and a relay thread ----------------------------


def relay_threads() -> int:
    return sum(t.name == RELAY_THREAD_NAME for t in threading.enumerate())


def test_client_with_an_ssl_context(certs: Certs) -> None:
    context = ssl.create_default_context(cafile=certs.ca)
    with tls_server(certs) as srv:
        tls_address, plain_address = addresses(srv)
        before = relay_threads()
        with beanpole.Client(tls_address, tls=context, timeout=TIMEOUT) as c:
            assert relay_threads() == before + 1
            jid = c.put("hello", priority=5)
            job = c.reserve(timeout=0)
            assert (job.id, job.body) == (jid, "hello")
            c.delete(job)
            # Several MiB each way: more than the relay holds for one direction, so
            # it has to stop reading and go on again in both directions.
            bodies = [f"{i}:" + "x" * (i % 7 * 5000) for i in range(1000)]
            ids = c.put_many(bodies, window=200)
            assert len(ids) == 1000 and ids == sorted(ids)
            jobs = c.reserve_many(1000, timeout=0)
            assert [j.body for j in jobs] == bodies
            c.delete_many(jobs)
            assert c.stats()["current-jobs-ready"] == 0
        assert relay_threads() == before
        with pytest.raises(errors.NotConnectedError):
            c.put("after close")
        with beanpole.Client(plain_address, timeout=TIMEOUT) as plain:
            assert plain.stats()["total-jobs"] == 1001
        assert srv.stats()["tls-failed-handshakes"] == 0


def test_async_client_with_an_ssl_context(certs: Certs) -> None:
    context = ssl.create_default_context(cafile=certs.ca)

    async def run(address: tuple[str, int]) -> None:
        async with beanpole.AsyncClient(address, tls=context, timeout=TIMEOUT) as c:
            ids = await c.put_many([f"job {i}" for i in range(100)])
            job = await c.reserve(timeout=0)
            assert (job.id, job.body) == (ids[0], "job 0")
            await c.delete(job)
            assert (await c.stats())["current-jobs-ready"] == 99

    before = relay_threads()
    with tls_server(certs) as srv:
        asyncio.run(run(addresses(srv)[0]))
    assert relay_threads() == before


def test_sharded_client_with_an_ssl_context(certs: Certs) -> None:
    context = ssl.create_default_context(cafile=certs.ca)
    before = relay_threads()
    with tls_server(certs) as one, tls_server(certs) as two:
        servers = [addresses(one)[0], addresses(two)[0]]
        with beanpole.ShardedClient(servers, tls=context, timeout=TIMEOUT) as c:
            assert relay_threads() == before + 2
            ids = c.put_many([f"job {i}" for i in range(200)])
            assert len(ids) == 200
            assert sum(int(srv.stats()["current-jobs-ready"]) for srv in (one, two)) == 200
            job = c.reserve(timeout=1)
            c.delete(job)
        assert relay_threads() == before
        wrong = ssl.create_default_context(cafile=certs.other_ca)
        with pytest.raises(errors.ServerDownError) as caught:
            beanpole.ShardedClient(servers, tls=wrong, timeout=TIMEOUT)
        assert isinstance(caught.value.__cause__, errors.TLSError)
    assert relay_threads() == before


def test_an_ssl_context_with_the_wrong_ca_is_refused_at_construction(certs: Certs) -> None:
    before = relay_threads()
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        wrong = ssl.create_default_context(cafile=certs.other_ca)
        with pytest.raises(errors.TLSError, match="certificate") as caught:
            beanpole.Client(tls_address, tls=wrong, timeout=TIMEOUT)
        assert f"127.0.0.1:{tls_address[1]}" in str(caught.value)
        # The refused connection is closed on both sides: nothing is left behind.
        deadline = time.monotonic() + TIMEOUT
        while srv.stats()["current-connections"] != 0:
            assert time.monotonic() < deadline, "the refused connection stayed open"
            time.sleep(0.01)
    assert relay_threads() == before


def test_the_context_decides_hostname_checking(certs: Certs) -> None:
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        checking = ssl.create_default_context(cafile=certs.ca)
        with pytest.raises(errors.TLSError, match=r"elsewhere\.test"):
            beanpole.Client(
                tls_address, tls=checking, server_name="elsewhere.test", timeout=TIMEOUT
            )
        with beanpole.Client(
            tls_address, tls=checking, server_name="localhost", timeout=TIMEOUT
        ) as c:
            c.put("by name")
        # A context that verifies the chain but not the name lets the same name in.
        lenient = ssl.create_default_context(cafile=certs.ca)
        lenient.check_hostname = False
        with beanpole.Client(
            tls_address, tls=lenient, server_name="elsewhere.test", timeout=TIMEOUT
        ) as c:
            assert c.put("chain only") == 2


def test_mutual_tls_with_an_ssl_context(certs: Certs) -> None:
    before = relay_threads()
    with tls_server(certs, client_ca=True) as srv:
        tls_address, _ = addresses(srv)
        without = ssl.create_default_context(cafile=certs.ca)
        stranger = ssl.create_default_context(cafile=certs.ca)
        stranger.load_cert_chain(certs.stranger_cert, certs.stranger_key)
        for context in (without, stranger):
            # TLS 1.3: the refusal comes after the client's side of the handshake, so
            # it shows on the constructor or on the first command, as the connection
            # closing; never as a wait for the timeout.
            started = time.monotonic()
            with pytest.raises(errors.ClientConnectionError) as caught:
                c = beanpole.Client(tls_address, tls=context, timeout=TIMEOUT)
                try:
                    c.put("must not land")
                finally:
                    c.close()
            assert not isinstance(caught.value, errors.ConnectionTimeoutError)
            assert time.monotonic() - started < TIMEOUT
        assert relay_threads() == before
        good = ssl.create_default_context(cafile=certs.ca)
        good.load_cert_chain(certs.client_cert, certs.client_key)
        with beanpole.Client(tls_address, tls=good, timeout=TIMEOUT) as c:
            jid = c.put("let in")
            assert c.stats()["current-jobs-ready"] == 1
            assert c.peek(jid).body == "let in"
        assert srv.stats()["tls-failed-handshakes"] == 2
    assert relay_threads() == before


def test_the_relay_ends_when_the_server_goes_away(certs: Certs) -> None:
    context = ssl.create_default_context(cafile=certs.ca)
    before = relay_threads()
    srv = tls_server(certs)
    with srv:
        tls_address, _ = addresses(srv)
        c = beanpole.Client(tls_address, tls=context, timeout=TIMEOUT)
        c.put("before the stop")
    # The server closed the connection: the next command learns it at once.
    started = time.monotonic()
    with pytest.raises(errors.ConnectionLostError):
        c.put("after the stop")
    assert time.monotonic() - started < TIMEOUT
    assert not c.connected
    c.close()
    assert relay_threads() == before


def test_interrupt_wakes_a_reserve_blocked_behind_a_relay(certs: Certs) -> None:
    context = ssl.create_default_context(cafile=certs.ca)
    before = relay_threads()
    with tls_server(certs) as srv:
        tls_address, _ = addresses(srv)
        c = beanpole.Client(tls_address, tls=context, timeout=TIMEOUT)
        interrupt_a_blocked_reserve(srv, c)
        c.close()
        assert relay_threads() == before
        # The server saw the connection go, and gave up the waiting reserve.
        deadline = time.monotonic() + TIMEOUT
        while srv.stats()["current-waiting"] != 0:
            assert time.monotonic() < deadline, "the server still has the reserve waiting"
            time.sleep(0.01)


def test_an_ssl_context_on_a_plain_port_fails_within_its_timeout(certs: Certs) -> None:
    with tls_server(certs) as srv:
        _, plain_address = addresses(srv)
        context = ssl.create_default_context(cafile=certs.ca)
        started = time.monotonic()
        with pytest.raises(errors.TLSError, match="does the server listen with TLS"):
            beanpole.Client(plain_address, tls=context, timeout=2)
        assert time.monotonic() - started < 2 + TIMEOUT
        assert srv.running


def test_the_native_client_takes_only_a_unix_socket_descriptor() -> None:
    from beanpole._core import NativeClient

    with socket.socket() as tcp, pytest.raises(ValueError, match="not a Unix socket"):
        NativeClient.from_fd(tcp.fileno(), "x:1")
    # Far above any open files limit, so never an open descriptor.
    with pytest.raises(ValueError, match="file descriptor"):
        NativeClient.from_fd(2**30, "x:1")
