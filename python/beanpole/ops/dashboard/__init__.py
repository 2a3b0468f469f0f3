"""The web dashboard served at ``/`` of the HTTP endpoint (``beanpole serve --http``,
``beanpole exporter``): a static page (``static/``) that polls a JSON API, and guarded
actions. See docs/http.md.

Modules: :mod:`.app` (routing, the page), :mod:`.api` (the JSON views),
:mod:`.actions` (the token and the actions), :mod:`.ring` (the 15-minute history),
:mod:`.sources` (an embedded server or a remote one).

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

from beanpole.ops.dashboard.actions import TokenError, load_token
from beanpole.ops.dashboard.app import Dashboard
from beanpole.ops.dashboard.sources import LocalSource, RemoteSource

__all__ = ["Dashboard", "LocalSource", "RemoteSource", "TokenError", "load_token"]
