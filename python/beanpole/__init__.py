"""beanpole: a beanstalkd-compatible work-queue server with a Rust core.

Run one in-process (``with beanpole.Server(port=0) as srv: ...``) or from the command line
(``beanpole serve``), or a replicated cluster of them (``beanpole.Cluster``, or
``beanpole serve --cluster FILE --node N``). Importing this package loads nothing
else: every public name (``Server``, ``Config``, the clients ``Client``,
``AsyncClient``, ``ShardedClient``, ``Job``, the ``ClientError`` family ...) is
loaded from its module on first use, and the native module when a server starts or
``beanpole.__version__`` is read. So a command such as ``beanpole serve`` pays only
for the modules it uses.

The front door: may import any layer; nothing in the package imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beanpole.client.async_client import AsyncClient as AsyncClient
    from beanpole.client.blocking import Client as Client
    from beanpole.client.blocking import Job as Job
    from beanpole.client.errors import BadFormatError as BadFormatError
    from beanpole.client.errors import BatchError as BatchError
    from beanpole.client.errors import BeanstalkdError as BeanstalkdError
    from beanpole.client.errors import BuriedError as BuriedError
    from beanpole.client.errors import ClientConnectionError as ClientConnectionError
    from beanpole.client.errors import ClientError as ClientError
    from beanpole.client.errors import ConnectFailedError as ConnectFailedError
    from beanpole.client.errors import ConnectionLostError as ConnectionLostError
    from beanpole.client.errors import ConnectionTimeoutError as ConnectionTimeoutError
    from beanpole.client.errors import DeadlineSoonError as DeadlineSoonError
    from beanpole.client.errors import DrainingError as DrainingError
    from beanpole.client.errors import ExpectedCrlfError as ExpectedCrlfError
    from beanpole.client.errors import InternalError as InternalError
    from beanpole.client.errors import JobTooBigError as JobTooBigError
    from beanpole.client.errors import NotConnectedError as NotConnectedError
    from beanpole.client.errors import NotFoundError as NotFoundError
    from beanpole.client.errors import NotIgnoredError as NotIgnoredError
    from beanpole.client.errors import OutOfMemoryError as OutOfMemoryError
    from beanpole.client.errors import ServerDownError as ServerDownError
    from beanpole.client.errors import TimedOutError as TimedOutError
    from beanpole.client.errors import TLSConfigError as TLSConfigError
    from beanpole.client.errors import TLSError as TLSError
    from beanpole.client.errors import UnknownCommandError as UnknownCommandError
    from beanpole.client.errors import UnknownResponseError as UnknownResponseError
    from beanpole.client.sharded import ShardedClient as ShardedClient
    from beanpole.config import Config as Config
    from beanpole.config import ConfigError as ConfigError
    from beanpole.config import ConfigWarning as ConfigWarning
    from beanpole.ops.served import Server as Server
    from beanpole.server.cluster import Cluster as Cluster
    from beanpole.server.cluster import ClusterError as ClusterError
    from beanpole.server.embedded import ServerError as ServerError
    from beanpole.server.hooks import Event as Event
    from beanpole.server.hooks import HookError as HookError

    __version__: str

# Names loaded on first use, and the module each lives in.
_LAZY = {
    "Config": "beanpole.config",
    "ConfigError": "beanpole.config",
    "ConfigWarning": "beanpole.config",
    "Event": "beanpole.server.hooks",
    "HookError": "beanpole.server.hooks",
    "Server": "beanpole.ops.served",
    "ServerError": "beanpole.server.embedded",
    "Cluster": "beanpole.server.cluster",
    "ClusterError": "beanpole.server.cluster",
    "Client": "beanpole.client.blocking",
    "Job": "beanpole.client.blocking",
    "AsyncClient": "beanpole.client.async_client",
    "ShardedClient": "beanpole.client.sharded",
    "BadFormatError": "beanpole.client.errors",
    "BatchError": "beanpole.client.errors",
    "BeanstalkdError": "beanpole.client.errors",
    "BuriedError": "beanpole.client.errors",
    "ClientConnectionError": "beanpole.client.errors",
    "ClientError": "beanpole.client.errors",
    "ConnectFailedError": "beanpole.client.errors",
    "ConnectionLostError": "beanpole.client.errors",
    "ConnectionTimeoutError": "beanpole.client.errors",
    "DeadlineSoonError": "beanpole.client.errors",
    "DrainingError": "beanpole.client.errors",
    "ExpectedCrlfError": "beanpole.client.errors",
    "InternalError": "beanpole.client.errors",
    "JobTooBigError": "beanpole.client.errors",
    "NotConnectedError": "beanpole.client.errors",
    "NotFoundError": "beanpole.client.errors",
    "NotIgnoredError": "beanpole.client.errors",
    "OutOfMemoryError": "beanpole.client.errors",
    "ServerDownError": "beanpole.client.errors",
    "TimedOutError": "beanpole.client.errors",
    "TLSConfigError": "beanpole.client.errors",
    "TLSError": "beanpole.client.errors",
    "UnknownCommandError": "beanpole.client.errors",
    "UnknownResponseError": "beanpole.client.errors",
}

# Modules that moved into a subpackage and that docs showed at their old place
# (``beanpole.systemd.listen_fds()``, ``beanpole.sharded.rendezvous``): still
# reachable as attributes of the package.
_MODULES = {
    "sharded": "beanpole.client.sharded",
    "systemd": "beanpole.server.systemd",
}

__all__ = [
    "AsyncClient",
    "BadFormatError",
    "BatchError",
    "BeanstalkdError",
    "BuriedError",
    "Client",
    "ClientConnectionError",
    "ClientError",
    "Cluster",
    "ClusterError",
    "Config",
    "ConfigError",
    "ConfigWarning",
    "ConnectFailedError",
    "ConnectionLostError",
    "ConnectionTimeoutError",
    "DeadlineSoonError",
    "DrainingError",
    "Event",
    "ExpectedCrlfError",
    "HookError",
    "InternalError",
    "Job",
    "JobTooBigError",
    "NotConnectedError",
    "NotFoundError",
    "NotIgnoredError",
    "OutOfMemoryError",
    "Server",
    "ServerDownError",
    "ServerError",
    "ShardedClient",
    "TLSConfigError",
    "TLSError",
    "TimedOutError",
    "UnknownCommandError",
    "UnknownResponseError",
    "__version__",
]


def __getattr__(name: str) -> object:
    if name == "__version__":
        from beanpole._core import __version__ as version

        globals()["__version__"] = version
        return version
    if name in _MODULES:
        import importlib

        value = importlib.import_module(_MODULES[name])
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
