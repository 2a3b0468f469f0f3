"""The HTTP endpoint over TLS (``--http tls:HOST:PORT``) with the queue's certificate
options: HTTPS with ``--tls-cert``/``--tls-key``, mutual TLS with ``--tls-client-ca``,
for ``beanpole serve`` and ``beanpole exporter``; certificates made by openssl."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

import beanpole
from rawhttp import TIMEOUT, closed_by_server, get
from servechild import BeanpoleChild as Child
from servers import start
from tlscerts import Certs, make_certs
from tlscerts import client_context as tls_client_context


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("http-tls"))


def client_context(certs: Certs, client: bool = False) -> ssl.SSLContext:
    return tls_client_context(certs.ca, (certs.client_cert, certs.client_key) if client else None)


def test_https_with_the_queues_certificate(certs: Certs) -> None:
    srv = beanpole.Server(
        port=0, http="tls:127.0.0.1:0", tls_cert=str(certs.server_cert),
        tls_key=str(certs.server_key),
    )  # fmt: skip
    with srv:
        assert srv.http_address is not None
        address = srv.http_address
        answer = get(address, "/metrics", context=client_context(certs))
        assert answer.status == 200 and b"beanpole_jobs" in answer.body
        assert get(address, "/healthz", context=client_context(certs)).body == b"ok\n"
        # Plain HTTP on the TLS port gets no answer: the connection is closed.
        with socket.create_connection(address, timeout=TIMEOUT) as plain:
            plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert b"200" not in closed_by_server(plain)
        # A client that does not trust the certificate fails the handshake.
        with pytest.raises(ssl.SSLCertVerificationError):
            get(address, "/healthz", context=ssl.create_default_context())
        assert get(address, "/healthz", context=client_context(certs)).status == 200


def test_mutual_tls_lets_in_only_clients_with_a_certificate_of_the_ca(certs: Certs) -> None:
    srv = beanpole.Server(
        port=0, http="tls:127.0.0.1:0", tls_cert=str(certs.server_cert),
        tls_key=str(certs.server_key), tls_client_ca=str(certs.ca),
    )  # fmt: skip
    with srv:
        assert srv.http_address is not None
        address = srv.http_address
        assert get(address, "/healthz", context=client_context(certs, client=True)).status == 200
        with pytest.raises((ssl.SSLError, ConnectionError)):
            get(address, "/healthz", context=client_context(certs))
        stranger = client_context(certs)
        stranger.load_cert_chain(str(certs.stranger_cert), str(certs.stranger_key))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            get(address, "/healthz", context=stranger)
        assert get(address, "/healthz", context=client_context(certs, client=True)).status == 200


def test_serve_and_exporter_serve_https(certs: Certs) -> None:
    tls = ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)]
    serve = Child("serve", "-p", "0", "--http", "tls:127.0.0.1:0", *tls)
    try:
        match = serve.wait_line(r"metrics on https://127\.0\.0\.1:(\d+)/metrics")
        address = ("127.0.0.1", int(match.group(1)))
        assert get(address, "/readyz", context=client_context(certs)).body == b"ready\n"
        assert serve.stop() == 0
    finally:
        serve.kill()
    with start("beanpole") as target:
        exporter = Child(
            "exporter", "--target", f"{target.host}:{target.port}",
            "--http", "tls:127.0.0.1:0", *tls, "--tls-client-ca", str(certs.ca),
        )  # fmt: skip
        try:
            match = exporter.wait_line(r"https://127\.0\.0\.1:(\d+)/metrics")
            address = ("127.0.0.1", int(match.group(1)))
            answer = get(address, "/metrics", context=client_context(certs, client=True))
            assert b"beanpole_up" in answer.body
            assert exporter.stop() == 0
        finally:
            exporter.kill()


def test_tls_http_without_a_certificate_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", "tls:127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert "needs a certificate and a key" in proc.stderr and "Traceback" not in proc.stderr
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n")
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", "tls:127.0.0.1:0",
         "--tls-cert", str(not_pem), "--tls-key", str(not_pem)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot serve HTTP on tls:"), lines


def served_name(address: tuple[str, int], certs: Certs) -> str:
    """The common name of the certificate the endpoint shows a new connection."""
    context = client_context(certs)
    with (
        socket.create_connection(address, timeout=TIMEOUT) as plain,
        context.wrap_socket(plain, server_hostname="localhost") as tls,
    ):
        cert = tls.getpeercert()
    assert cert is not None
    subject = dict(pair[0] for pair in cert["subject"])
    return str(subject["commonName"])


def test_reload_tls_takes_new_certificate_files_for_new_connections(
    certs: Certs, tmp_path: Path
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(certs.server_cert.read_bytes())
    key.write_bytes(certs.server_key.read_bytes())
    srv = beanpole.Server(port=0, http="tls:127.0.0.1:0", tls_cert=str(cert), tls_key=str(key))
    with srv:
        assert srv.http_address is not None
        assert served_name(srv.http_address, certs) == "server"
        cert.write_bytes(certs.server2_cert.read_bytes())
        key.write_bytes(certs.server2_key.read_bytes())
        assert srv.reload_tls() is True
        assert served_name(srv.http_address, certs) == "server2"
        key.write_text("broken\n")
        with pytest.raises(OSError, match="cannot use --tls-cert"):
            srv.reload_tls()
        assert served_name(srv.http_address, certs) == "server2"  # kept
    with beanpole.Server(port=0, http="127.0.0.1:0") as plain_srv:
        assert plain_srv.reload_tls() is False
