"""beanpole: a beanstalkd-compatible work-queue server with a Rust core.

Run one in-process (``with beanpole.Server(port=0) as srv: ...``) or from the command line
(``beanpole serve``). Importing this package loads nothing else: every public name
(``Server``, ``Config``, the clients ``Client``, ``AsyncClient``, ``ShardedClient``,
``Job``, the ``ClientError`` family ...) is loaded from its module on first use, and the
native module when a server starts or ``beanpole.__version__`` is read. So a command
such as ``beanpole serve`` pays only for the modules it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beanpole.async_client import AsyncClient as AsyncClient
    from beanpole.client import Client as Client
    from beanpole.client import Job as Job
    from beanpole.client_errors import BadFormatError as BadFormatError
    from beanpole.client_errors import BatchError as BatchError
    from beanpole.client_errors import BeanstalkdError as BeanstalkdError
    from beanpole.client_errors import BuriedError as BuriedError
    from beanpole.client_errors import ClientConnectionError as ClientConnectionError
    from beanpole.client_errors import ClientError as ClientError
    from beanpole.client_errors import ConnectFailedError as ConnectFailedError
    from beanpole.client_errors import ConnectionLostError as ConnectionLostError
    from beanpole.client_errors import ConnectionTimeoutError as ConnectionTimeoutError
    from beanpole.client_errors import DeadlineSoonError as DeadlineSoonError
    from beanpole.client_errors import DrainingError as DrainingError
    from beanpole.client_errors import ExpectedCrlfError as ExpectedCrlfError
    from beanpole.client_errors import InternalError as InternalError
    from beanpole.client_errors import JobTooBigError as JobTooBigError
    from beanpole.client_errors import NotConnectedError as NotConnectedError
    from beanpole.client_errors import NotFoundError as NotFoundError
    from beanpole.client_errors import NotIgnoredError as NotIgnoredError
    from beanpole.client_errors import OutOfMemoryError as OutOfMemoryError
    from beanpole.client_errors import ServerDownError as ServerDownError
    from beanpole.client_errors import TimedOutError as TimedOutError
    from beanpole.client_errors import TLSConfigError as TLSConfigError
    from beanpole.client_errors import TLSError as TLSError
    from beanpole.client_errors import UnknownCommandError as UnknownCommandError
    from beanpole.client_errors import UnknownResponseError as UnknownResponseError
    from beanpole.config import Config as Config
    from beanpole.config import ConfigError as ConfigError
    from beanpole.config import ConfigWarning as ConfigWarning
    from beanpole.hooks import Event as Event
    from beanpole.hooks import HookError as HookError
    from beanpole.server import Server as Server
    from beanpole.server import ServerError as ServerError
    from beanpole.sharded import ShardedClient as ShardedClient

    __version__: str

# Names loaded on first use, and the module each lives in.
_LAZY = {
    "Config": "beanpole.config",
    "ConfigError": "beanpole.config",
    "ConfigWarning": "beanpole.config",
    "Event": "beanpole.hooks",
    "HookError": "beanpole.hooks",
    "Server": "beanpole.server",
    "ServerError": "beanpole.server",
    "Client": "beanpole.client",
    "Job": "beanpole.client",
    "AsyncClient": "beanpole.async_client",
    "ShardedClient": "beanpole.sharded",
    "BadFormatError": "beanpole.client_errors",
    "BatchError": "beanpole.client_errors",
    "BeanstalkdError": "beanpole.client_errors",
    "BuriedError": "beanpole.client_errors",
    "ClientConnectionError": "beanpole.client_errors",
    "ClientError": "beanpole.client_errors",
    "ConnectFailedError": "beanpole.client_errors",
    "ConnectionLostError": "beanpole.client_errors",
    "ConnectionTimeoutError": "beanpole.client_errors",
    "DeadlineSoonError": "beanpole.client_errors",
    "DrainingError": "beanpole.client_errors",
    "ExpectedCrlfError": "beanpole.client_errors",
    "InternalError": "beanpole.client_errors",
    "JobTooBigError": "beanpole.client_errors",
    "NotConnectedError": "beanpole.client_errors",
    "NotFoundError": "beanpole.client_errors",
    "NotIgnoredError": "beanpole.client_errors",
    "OutOfMemoryError": "beanpole.client_errors",
    "ServerDownError": "beanpole.client_errors",
    "TimedOutError": "beanpole.client_errors",
    "TLSConfigError": "beanpole.client_errors",
    "TLSError": "beanpole.client_errors",
    "UnknownCommandError": "beanpole.client_errors",
    "UnknownResponseError": "beanpole.client_errors",
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
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
