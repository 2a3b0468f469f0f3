"""The embedded server: :class:`Server` (:mod:`.embedded`: start, stop, drain, signals,
the admin calls), its hooks (:mod:`.hooks`), switching user (:mod:`.privileges`) and
systemd's socket activation and readiness (:mod:`.systemd`).

The server layer: above ``beanpole.client`` (it raises the clients' error classes and
returns their stats values); it imports nothing of ``beanpole.ops`` (the HTTP endpoint
and the dashboard are wired to a server from above, see :mod:`beanpole.ops.served`),
``beanpole.cli`` or ``beanpole.spark``.

Importing the package loads none of its modules: ``Server`` and ``ServerError`` are
loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beanpole.server.embedded import Server as Server
    from beanpole.server.embedded import ServerError as ServerError

__all__ = ["Server", "ServerError"]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from beanpole.server import embedded

    value = getattr(embedded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
