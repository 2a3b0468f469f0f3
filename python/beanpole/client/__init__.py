"""beanpole's clients: :class:`Client` (blocking, the protocol work in Rust),
:class:`AsyncClient` (the same calls as coroutines), :class:`ShardedClient` (one queue
over several servers), their errors, TLS (:mod:`.tls`, :mod:`.relay`), puts from Arrow
arrays (:mod:`.arrow`), the read-only stats client (:mod:`.stats`) and the stats values
as data (:mod:`.snapshot`).

The client layer: above ``beanpole.config``/``beanpole.addr``; it imports nothing of
``beanpole.server``, ``beanpole.ops``, ``beanpole.cli`` or ``beanpole.spark``.

Importing the package loads none of its modules: each name here is loaded from its module
on first use (``from beanpole.client import Client``), so ``import beanpole.client.errors``
stays as light as that module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beanpole.client.async_client import AsyncClient as AsyncClient
    from beanpole.client.blocking import DEFAULT_DELAY as DEFAULT_DELAY
    from beanpole.client.blocking import DEFAULT_PRIORITY as DEFAULT_PRIORITY
    from beanpole.client.blocking import DEFAULT_TTR as DEFAULT_TTR
    from beanpole.client.blocking import DEFAULT_TUBE as DEFAULT_TUBE
    from beanpole.client.blocking import DEFAULT_WINDOW as DEFAULT_WINDOW
    from beanpole.client.blocking import Client as Client
    from beanpole.client.blocking import Job as Job
    from beanpole.client.blocking import format_address as format_address
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

# Names loaded on first use, and the module each lives in.
_LAZY = {
    "AsyncClient": "beanpole.client.async_client",
    "Client": "beanpole.client.blocking",
    "DEFAULT_DELAY": "beanpole.client.blocking",
    "DEFAULT_PRIORITY": "beanpole.client.blocking",
    "DEFAULT_TTR": "beanpole.client.blocking",
    "DEFAULT_TUBE": "beanpole.client.blocking",
    "DEFAULT_WINDOW": "beanpole.client.blocking",
    "Job": "beanpole.client.blocking",
    "format_address": "beanpole.client.blocking",
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
    "TLSConfigError": "beanpole.client.errors",
    "TLSError": "beanpole.client.errors",
    "TimedOutError": "beanpole.client.errors",
    "UnknownCommandError": "beanpole.client.errors",
    "UnknownResponseError": "beanpole.client.errors",
    "ShardedClient": "beanpole.client.sharded",
}

__all__ = [
    "DEFAULT_DELAY",
    "DEFAULT_PRIORITY",
    "DEFAULT_TTR",
    "DEFAULT_TUBE",
    "DEFAULT_WINDOW",
    "AsyncClient",
    "BadFormatError",
    "BatchError",
    "BeanstalkdError",
    "BuriedError",
    "Client",
    "ClientConnectionError",
    "ClientError",
    "ConnectFailedError",
    "ConnectionLostError",
    "ConnectionTimeoutError",
    "DeadlineSoonError",
    "DrainingError",
    "ExpectedCrlfError",
    "InternalError",
    "Job",
    "JobTooBigError",
    "NotConnectedError",
    "NotFoundError",
    "NotIgnoredError",
    "OutOfMemoryError",
    "ServerDownError",
    "ShardedClient",
    "TLSConfigError",
    "TLSError",
    "TimedOutError",
    "UnknownCommandError",
    "UnknownResponseError",
    "format_address",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
