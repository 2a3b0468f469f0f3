"""Helpers of the dashboard tests: JSON API calls over real HTTP, a token file, and
``beanpole exporter`` as a real child process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from servechild import BeanpoleChild as Child

TIMEOUT = 20.0
TOKEN = "open-sesame-0123456789"


def base_url(address: tuple[str, int]) -> str:
    host, port = address
    return f"http://{host}:{port}"


def get(
    base: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """GET ``path``: status, headers (lower-case names) and body, errors included."""
    request = urllib.request.Request(base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def get_json(base: str, path: str, status: int = 200, token: str | None = None) -> Any:
    """GET ``path`` and decode its JSON, checking the status; ``token`` is sent as a
    bearer token."""
    code, headers, body = get(base, path, {} if token is None else bearer(token))
    assert code == status, body
    assert headers["content-type"] == "application/json"
    return json.loads(body)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def post(
    base: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = None,
    header: str = "Authorization",
) -> tuple[int, Any]:
    """POST JSON to ``path`` with the token in ``header``: status and decoded reply."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers[header] = f"Bearer {token}" if header == "Authorization" else token
    data = json.dumps({} if body is None else body).encode()
    request = urllib.request.Request(base + path, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def token_file(tmp_path: Path, token: str = TOKEN, name: str = "admin-token") -> Path:
    path = tmp_path / name
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def exporter(targets: list[str], token: Path | None = None) -> tuple[Child, str]:
    """``beanpole exporter`` for ``targets`` on a free port: the child and its base URL."""
    args = ["exporter", "--http", "127.0.0.1:0"]
    for target in targets:
        args += ["--target", target]
    if token is not None:
        args += ["--admin-token-file", str(token)]
    child = Child(*args)
    match = child.wait_line(r"dashboard on (http://127\.0\.0\.1:\d+)/")
    return child, match.group(1)
