"""``beanpole.Server``: the embedded server with its HTTP endpoint and dashboard wired in.

:class:`beanpole.server.Server` serves the beanstalkd protocol and knows nothing of
HTTP. This subclass adds what ``http`` in the settings asks for: once the engine serves,
the HTTP endpoint (:mod:`beanpole.ops.http`: ``/metrics``, ``/healthz``, ``/readyz``)
with the dashboard (:mod:`beanpole.ops.dashboard`) reading this server through a
``LocalSource``; both are stopped before the engine and re-read their certificates with
it. It is the class users know as ``beanpole.Server`` and the one ``beanpole serve`` runs;
the endpoint's modules are imported only when ``http`` is set, so a start without it
loads nothing more than this file.

Imports ``beanpole.server`` and, when used, the rest of ``beanpole.ops``; nothing of
``beanpole.cli``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Unpack

from beanpole.config import Config, ConfigChanges
from beanpole.server import embedded
from beanpole.server.embedded import ServerError

if TYPE_CHECKING:
    from beanpole._core import ServerHandle
    from beanpole.ops.dashboard import Dashboard
    from beanpole.ops.http import HttpServer

__all__ = ["Server", "read_tokens"]


class Server(embedded.Server):
    """One beanpole server, running in this process on threads of its own, with the
    HTTP endpoint and the web dashboard when ``http`` is set.

    ``Server(config, **overrides)`` takes a :class:`~beanpole.Config` (default: the
    defaults) with any fields replaced by keyword arguments, e.g. ``Server(port=0)``. Nothing
    happens until :meth:`start` (or ``with``); a server starts at most once, and once
    stopped it stays stopped.

    ``listen_fds`` are listening sockets inherited from a service manager (see
    :func:`beanpole.server.systemd.listen_fds`); when given they are served instead of the
    ``listen`` addresses. The server takes them over: they are closed once :meth:`start`
    returns (the engine serves copies of them).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        listen_fds: Sequence[int] = (),
        **overrides: Unpack[ConfigChanges],
    ) -> None:
        super().__init__(config, listen_fds=listen_fds, **overrides)
        self._tokens: tuple[bytes | None, bytes | None] = (None, None)
        self._http: HttpServer | None = None
        self._dashboard: Dashboard | None = None

    def reload_tls(self) -> bool:
        reloaded = super().reload_tls()
        http = self._http
        if http is not None and http.reload_tls():
            reloaded = True
        return reloaded

    reload_tls.__doc__ = embedded.Server.reload_tls.__doc__

    @property
    def http_address(self) -> tuple[str, int] | None:
        """``(host, port)`` the HTTP endpoint (``/metrics``, ``/healthz``, ``/readyz``)
        listens on, or None without ``http`` in the config."""
        http = self._http
        return None if http is None else http.address

    def dashboard(self) -> Dashboard | None:
        """The web dashboard served on the HTTP endpoint, or None without ``http``."""
        return self._dashboard

    # -- the endpoint beside the engine -------------------------------------------------

    def _prepare_beside(self) -> None:
        # The token files may be readable by root only: read before switching user.
        self._tokens = read_tokens(self.config)

    def _start_beside(self, handle: ServerHandle) -> None:
        http = self.config.http
        if http is None:
            return
        from beanpole.ops.dashboard import Dashboard, LocalSource
        from beanpole.ops.http import serve_http

        admin, read = self._tokens
        dashboard = Dashboard([LocalSource(self)], admin, read_token=read)
        try:
            self._http = serve_http(self, http, dashboard)
            self._dashboard = dashboard
        except (OSError, ValueError) as err:
            dashboard.close()
            if isinstance(err, ValueError):
                raise ServerError(f"cannot serve HTTP on {http}: {err}") from None
            reason = err.strerror or str(err)
            raise OSError(err.errno, f"cannot serve HTTP on {http}: {reason}") from None

    def _stop_beside(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()
        dashboard, self._dashboard = self._dashboard, None
        if dashboard is not None:
            dashboard.close()


def read_tokens(cfg: Config) -> tuple[bytes | None, bytes | None]:
    """The dashboard's admin and read tokens, read from ``admin_token_file`` and
    ``http_read_token_file`` (None without the file or without ``http``)."""
    if cfg.http is None or (cfg.admin_token_file is None and cfg.http_read_token_file is None):
        return None, None
    from beanpole.ops.dashboard import TokenError, load_token

    try:
        admin = None if cfg.admin_token_file is None else load_token(cfg.admin_token_file)
        read = (
            None
            if cfg.http_read_token_file is None
            else load_token(cfg.http_read_token_file, "read token")
        )
    except TokenError as err:
        raise ServerError(str(err)) from None
    return admin, read
