"""beanpole: a beanstalkd-compatible work-queue server with a Rust core.

Run one in-process (``with beanpole.Server(port=0) as srv: ...``) or from the command line
(``beanpole serve``). Importing this package does not load the native module; that happens
when a server starts or ``beanpole.__version__`` is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beanpole.admin import NotFoundError
from beanpole.config import Config, ConfigError, ConfigWarning
from beanpole.hooks import Event, HookError
from beanpole.server import Server, ServerError

__all__ = [
    "Config",
    "ConfigError",
    "ConfigWarning",
    "Event",
    "HookError",
    "Server",
    "ServerError",
    "__version__",
]
__all__ += ["NotFoundError"]

if TYPE_CHECKING:
    __version__: str


def __getattr__(name: str) -> str:
    if name == "__version__":
        from beanpole._core import __version__ as version

        globals()["__version__"] = version
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
