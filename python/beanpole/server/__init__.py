"""The embedded server: :class:`Server` (:mod:`.embedded`: start, stop, drain, signals,
the admin calls), its hooks (:mod:`.hooks`), switching user (:mod:`.privileges`) and
systemd's socket activation and readiness (:mod:`.systemd`), and a replicated cluster
of nodes in one process (:class:`Cluster`, :mod:`.cluster`).

The server layer: above ``beanpole.client`` (it raises the clients' error classes and
returns their stats values); it imports nothing of ``beanpole.ops`` (the HTTP endpoint
and the dashboard are wired to a server from above, see :mod:`beanpole.ops.served`),
``beanpole.cli`` or ``beanpole.spark``.

Importing the package loads none of its modules: ``Server``, ``ServerError``,
``Cluster`` and ``ClusterError`` are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beanpole.server.cluster import Cluster as Cluster
    from beanpole.server.cluster import ClusterError as ClusterError
    from beanpole.server.embedded import Server as Server
    from beanpole.server.embedded import ServerError as ServerError

__all__ = ["Cluster", "ClusterError", "Server", "ServerError"]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    where = "cluster" if name.startswith("Cluster") else "embedded"
    value = getattr(importlib.import_module(f"beanpole.server.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
