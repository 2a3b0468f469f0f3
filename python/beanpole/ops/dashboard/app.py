"""The dashboard as an :data:`beanpole.ops.http.App`: the page (``/`` and ``/static/...``),
the JSON API (:mod:`.api`) and the actions (:mod:`.actions`), for one or more servers.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any, Final
from urllib.parse import parse_qsl, unquote

from beanpole.ops.dashboard import api
from beanpole.ops.dashboard.actions import Guard, describe, log_refusal, run_action
from beanpole.ops.dashboard.api import ApiError, Watched
from beanpole.ops.dashboard.sources import ActionError, Source
from beanpole.ops.http import Reply, Request

__all__ = ["SECURITY_HEADERS", "Dashboard"]

#: Sent with every answer of the dashboard: the page may load only from this origin,
#: be framed by nobody, and send no referrer.
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_STATIC: Final = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/static/cluster.js": ("cluster.js", "text/javascript; charset=utf-8"),
}
_JSON: Final = "application/json"
#: beanstalkd's longest tube name, in bytes.
_MAX_NAME: Final = 200
_BAD_NAME: Final = re.compile(r"[\s\x00-\x1f\x7f]")


def _static(name: str) -> bytes:
    return (resources.files("beanpole.ops.dashboard") / "static" / name).read_bytes()


class Dashboard:
    """Serves the page and the API for ``sources`` (the first is the default; the
    others are picked with ``?server=NAME``). Actions need ``token``; None turns
    them off. Job bodies need ``read_token`` or ``token``; without either they are
    hidden. ``cluster`` (a cluster node's :meth:`~beanpole.server.node.Node.view`)
    answers ``/api/cluster``, the page's cluster panel; without it that path is 404.
    Starts one sampler thread per source; :meth:`close` stops them."""

    def __init__(
        self,
        sources: Sequence[Source],
        token: bytes | None = None,
        *,
        read_token: bytes | None = None,
        cluster: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        if not sources:
            raise ValueError("a dashboard needs at least one server")
        self._watched = {s.name: Watched(s) for s in sources}
        self._names = [s.name for s in sources]
        self._guard = Guard(token, read_token)
        self._cluster = cluster
        self._files = {path: (_static(f), ctype) for path, (f, ctype) in _STATIC.items()}

    def close(self) -> None:
        for watched in self._watched.values():
            watched.close()
            close = getattr(watched.source, "close", None)
            if close is not None:
                close()

    def watched(self, name: str) -> Watched:
        return self._watched[name]

    def __call__(self, request: Request) -> Reply | None:
        if request.method in ("GET", "HEAD") and request.path in self._files:
            body, ctype = self._files[request.path]
            return Reply(200, ctype, body, SECURITY_HEADERS)
        if not request.path.startswith("/api/"):
            return None
        try:
            status, value = self._api(request)
        except ApiError as err:
            status, value = err.status, {"error": err.message}
        except KeyError as err:  # NotFoundError of both kinds of server
            message = str(err.args[0]) if err.args else "not found"
            status, value = 404, {"error": message}
        except ActionError as err:
            status, value = 409, {"error": str(err)}
        except Exception as err:  # the server cannot be reached or answered oddly
            status, value = 502, {"error": str(err) or type(err).__name__}
        body = json.dumps(value, separators=(",", ":")).encode()
        return Reply(status, _JSON, body, SECURITY_HEADERS)

    def _api(self, request: Request) -> tuple[int, Any]:
        try:
            parts = [unquote(p, errors="strict") for p in request.path[5:].split("/")]
        except UnicodeDecodeError:
            raise ApiError(400, "the path is not UTF-8 once decoded") from None
        query = dict(parse_qsl(request.query))
        watched = self._pick(query)
        if request.method == "POST":
            return 200, self._act(request, watched, parts)
        if request.method not in ("GET", "HEAD"):
            raise ApiError(405, "use GET, or POST for actions")
        match parts:
            case ["servers"]:
                return 200, {"servers": self._names}
            case ["cluster"] if self._cluster is not None:
                return 200, self._cluster()
            case ["server"]:
                return 200, api.server_view(watched, self._names, self._guard.enabled)
            case ["series"]:
                since = _float(query.get("since", "0"), "since")
                wait = _float(query.get("wait", "0"), "wait")
                return 200, api.series_view(watched, since, wait)
            case ["tubes"]:
                return 200, api.tubes_page(watched, query)
            case ["tubes", name]:
                hidden = self._guard.may_read(request.headers)
                return 200, api.tube_page(watched, _tube_name(name), hidden)
            case ["jobs", raw_id]:
                hidden = self._guard.may_read(request.headers)
                return 200, api.job_view(watched.source, _job_id(raw_id), hidden)
        raise ApiError(404, "no such API path")

    def _act(self, request: Request, watched: Watched, parts: list[str]) -> Any:
        match parts:
            case ["tubes", name, verb]:
                target = ("tube", _tube_name(name))
            case ["jobs", raw_id, verb]:
                target = ("job", str(_job_id(raw_id)))
            case _:
                raise ApiError(404, "no such action")
        try:
            self._guard.check(request.headers)
        except ApiError as err:
            log_refusal(describe(watched.source, target, verb, request.client), err)
            raise
        return run_action(watched.source, target, verb, request.body, request.client)

    def _pick(self, query: Mapping[str, str]) -> Watched:
        name = query.get("server") or self._names[0]
        watched = self._watched.get(name)
        if watched is None:
            raise ApiError(404, f"no server named {name!r}; known: {', '.join(self._names)}")
        return watched


def _tube_name(name: str) -> str:
    if not name or len(name.encode()) > _MAX_NAME or _BAD_NAME.search(name):
        raise ApiError(400, f"invalid tube name {name[:_MAX_NAME]!r}")
    return name


def _job_id(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or len(raw) > 20 or int(raw) >= 1 << 64:
        raise ApiError(400, f"invalid job id {raw[:40]!r}")
    return int(raw)


def _float(raw: str, key: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ApiError(400, f"{key} must be a number, got {raw[:40]!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ApiError(400, f"{key} must be a finite number")
    return value
