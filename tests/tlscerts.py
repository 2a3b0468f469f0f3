"""Certificates for the TLS tests, made with ``openssl`` once per session: two CAs, two
server certificates and a client certificate from the first, a client certificate from
the other (a stranger's)."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certs", "client_context", "make_certs"]


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    server2_cert: Path
    server2_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _make_ca(d: Path, name: str) -> tuple[Path, Path]:
    cert, key = d / f"{name}.pem", d / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN=beanpole test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return cert, key


def _make_leaf(d: Path, name: str, ca: tuple[Path, Path], usage: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (d / f"{name}{s}" for s in (".pem", ".key", ".csr", ".ext"))
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", f"/CN={name}",
    )  # fmt: skip
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        f"extendedKeyUsage={usage}\n"
    )
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext,
    )  # fmt: skip
    return cert, key


def make_certs(d: Path) -> Certs:
    """Every certificate of :class:`Certs`, in the directory ``d``."""
    ca = _make_ca(d, "ca")
    other = _make_ca(d, "other-ca")
    server = _make_leaf(d, "server", ca, "serverAuth")
    server2 = _make_leaf(d, "server2", ca, "serverAuth")
    client = _make_leaf(d, "client", ca, "clientAuth")
    stranger = _make_leaf(d, "stranger", other, "clientAuth")
    return Certs(d, ca[0], other[0], *server, *server2, *client, *stranger)


def client_context(ca: Path, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """A client's TLS context trusting ``ca``, with ``cert`` (certificate, key) as the
    client's own certificate when given."""
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context
