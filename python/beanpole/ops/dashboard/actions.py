"""The dashboard's actions: kick N, kick a job, delete a job, pause a tube, clear a
tube's ready, delayed or buried jobs.

They are off unless an admin token is configured (``--admin-token-file``). Each is a
POST carrying the token in a header (``Authorization: Bearer TOKEN``, or
``X-Beanpole-Token``), compared in constant time; there is no cookie, so a page from
another origin cannot make a browser send one (the header needs a CORS preflight this
endpoint never grants). Reading job bodies takes the same header with the read token
(``--http-read-token-file``) or the admin token (:meth:`Guard.may_read`).

Every action, done or refused, is logged under the ``beanpole.dashboard`` logger; on
an embedded server it goes through the in-process admin calls, so the admin hooks see
its events.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Final

from beanpole.ops.dashboard.api import ApiError
from beanpole.ops.dashboard.sources import STATES, Source

__all__ = [
    "HIDDEN_NOT_GIVEN",
    "HIDDEN_NO_TOKEN",
    "Guard",
    "TokenError",
    "describe",
    "load_token",
    "log_refusal",
    "run_action",
]

_LOG: Final = logging.getLogger("beanpole").getChild("dashboard")
_U32_MAX: Final = (1 << 32) - 1
#: Longest token file read.
_MAX_TOKEN_FILE: Final = 4096


class TokenError(Exception):
    """The token file cannot be used."""


def load_token(path: str | os.PathLike[str], what: str = "admin token") -> bytes:
    """The token in ``path``: its first line, spaces around it removed; the file must
    exist and hold one, of printable ASCII (it travels in an HTTP header)."""
    shown = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_TOKEN_FILE + 1)
    except OSError as err:
        raise TokenError(f"cannot read {what} file {shown}: {err.strerror or err}") from None
    if len(raw) > _MAX_TOKEN_FILE:
        raise TokenError(f"{what} file {shown} is larger than {_MAX_TOKEN_FILE} bytes")
    token = raw.split(b"\n", 1)[0].strip()
    if not token:
        raise TokenError(f"{what} file {shown} holds no token")
    if any(not 0x20 <= b <= 0x7E for b in token):
        raise TokenError(
            f"{what} file {shown}: the token must be printable ASCII "
            "(it is sent in an HTTP header)"
        )
    return token


#: Why the API leaves bodies out, for each case (the page shows it).
HIDDEN_NO_TOKEN: Final = (
    "job bodies are hidden: this server has no read token or admin token configured "
    "(--http-read-token-file)"
)
HIDDEN_NOT_GIVEN: Final = (
    "job bodies are hidden: reading them needs the read token or the admin token"
)


def _given(headers: Mapping[str, str]) -> str | None:
    """The token a request carries, in ``X-Beanpole-Token`` or as a bearer token."""
    given = headers.get("x-beanpole-token")
    if given is None:
        scheme, _sep, value = headers.get("authorization", "").partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else None
    return given or None


def _matches(given: str, token: bytes | None) -> bool:
    if token is None:
        return False
    # The header arrives decoded as Latin-1: encoding it back gives its bytes.
    return hmac.compare_digest(given.encode("latin-1", "replace"), token)


class Guard:
    """Says whether a request may act (only with the admin token) and read job
    bodies (with the read token or the admin token)."""

    def __init__(self, token: bytes | None, read_token: bytes | None = None) -> None:
        self._token = token
        self._read = read_token

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def check(self, headers: Mapping[str, str]) -> None:
        """Raise :class:`ApiError` (403 when actions are off, 401 for a missing or
        wrong token) unless the request carries the admin token."""
        if self._token is None:
            raise ApiError(403, "actions are off: the server has no admin token configured")
        given = _given(headers)
        if given is None:
            raise ApiError(401, "this action needs the admin token")
        if not _matches(given, self._token):
            raise ApiError(401, "wrong admin token")

    def may_read(self, headers: Mapping[str, str]) -> str | None:
        """None when the request may read job bodies, else why not. Raises
        :class:`ApiError` 401 for a token that is neither the read nor the admin one."""
        given = _given(headers)
        if given is None:
            if self._token is None and self._read is None:
                return HIDDEN_NO_TOKEN
            return HIDDEN_NOT_GIVEN
        # Both compared, so the time taken does not tell which one matched.
        read_ok = _matches(given, self._read)
        admin_ok = _matches(given, self._token)
        if not (read_ok or admin_ok):
            raise ApiError(401, "wrong token: neither the read token nor the admin token")
        return None


def _body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "the request body must be a JSON object") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return value


def _number(body: Mapping[str, Any], key: str, *, low: int, default: int | None = None) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _U32_MAX:
        raise ApiError(400, f"{key} must be an integer between {low} and {_U32_MAX}")
    return value


def describe(source: Source, target: tuple[str, str], verb: str, who: str) -> str:
    """How the log names an action: ``kick on tube 'x' of local from 127.0.0.1``."""
    kind, what = target
    where = f"tube {what!r}" if kind == "tube" else f"job {what}"
    return f"{verb} on {where} of {source.name} from {who}"


def log_refusal(action: str, err: BaseException) -> None:
    message = err.message if isinstance(err, ApiError) else str(err)
    if isinstance(err, KeyError) and err.args:
        message = str(err.args[0])
    _LOG.warning("dashboard: %s refused: %s", action, message)


def run_action(
    source: Source, target: tuple[str, str], verb: str, raw_body: bytes, who: str
) -> dict[str, Any]:
    """Do ``verb`` on ``target`` (``("tube", name)`` or ``("job", id)``) and log it,
    done or refused. The caller has checked the token."""
    kind, what = target
    action = describe(source, target, verb, who)
    try:
        result = _apply(source, kind, what, verb, _body(raw_body))
    except Exception as err:
        log_refusal(action, err)
        raise
    _LOG.info("dashboard: %s: %s", action, json.dumps(result, sort_keys=True))
    return result


def _apply(
    source: Source, kind: str, what: str, verb: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    if kind == "job":
        job_id = int(what)
        if verb == "kick":
            source.kick_job(job_id)
            return {"kicked": job_id}
        if verb == "delete":
            source.delete(job_id)
            return {"deleted": job_id}
    elif verb == "kick":
        bound = _number(body, "bound", low=1)
        return {"kicked": source.kick(what, bound)}
    elif verb == "pause":
        seconds = _number(body, "seconds", low=0)
        source.pause(what, seconds)
        return {"paused": seconds}
    elif verb == "clear":
        state = body.get("state")
        if state not in STATES:
            raise ApiError(400, f"state must be one of {', '.join(STATES)}")
        if body.get("confirm") != what:
            raise ApiError(400, "confirm must be the tube's name")
        limit = _number(body, "limit", low=1, default=_U32_MAX)
        return {"deleted": source.clear(what, state, limit), "state": state}
    raise ApiError(404, f"no action {verb!r} on a {kind}")
