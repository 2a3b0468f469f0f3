"""The ``beanpole`` command's entry point.

``beanpole serve`` with well-formed options (what a service manager or a test harness
runs) goes straight to :mod:`beanpole.cli.serve_fast`, which parses them without importing
click: a start is mostly imports, and click is the largest. Every other command line,
help, version and error included, goes to the click group (:mod:`beanpole.cli.group`),
whose subcommands load on first use. ``beanpole.cli.cli`` is that
group, loaded when asked for. ``tests/test_cli_imports.py`` keeps the import graph of a
start small.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beanpole.cli.group import cli as cli

__all__ = ["cli", "main"]

def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: run the ``beanpole`` command and exit."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["serve"]:
        from beanpole.cli.serve_fast import serve

        serve(args[1:])  # exits, unless click is to take this command line
    from beanpole.cli.group import cli

    cli.main(args=args)


def __getattr__(name: str) -> object:
    if name == "cli":
        from beanpole.cli.group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
