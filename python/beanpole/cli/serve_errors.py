"""What stops ``beanpole serve`` from serving, as exceptions: :class:`ServeError` (the
command prints ``Error: ...`` and exits with status 1) and :class:`FlagError` (a
flag's value is refused: a usage error of that flag, exit status 2).

The command, the top layer: imports nothing of beanpole; the command's modules
import it.
"""

from __future__ import annotations

__all__ = ["FlagError", "ServeError"]


class ServeError(Exception):
    """A one-line reason the server cannot serve (address in use, a bad environment
    variable or config file, a log directory that cannot be used ...)."""


class FlagError(ServeError):
    """The value of the flag that sets ``field`` is refused: ``problem`` says why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem
