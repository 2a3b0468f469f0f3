"""A setting's problem as the checks and the sources find it, before it is a
:class:`beanpole.config.ConfigError`; and the "did you mean" hint of a misspelt name.

The lowest module of the settings: imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Invalid", "did_you_mean"]


class Invalid(ValueError):
    """What is wrong (``problem``), with the field and where its value came from when
    known. :class:`beanpole.config.Config` raises it as a ``ConfigError``."""

    def __init__(self, problem: str, *, field: str | None = None, source: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.field = field
        self.source = source


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'port'?)`` for the closest of ``known``, or nothing."""
    import difflib  # only for a mistake: kept out of every start

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
