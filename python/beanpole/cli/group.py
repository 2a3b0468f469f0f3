"""The ``beanpole`` click group, whose subcommands load on first use.

Each subcommand lives in a module of its own (``serve`` in :mod:`beanpole.cli.serve`,
``stats``/``top``/``exporter`` in :mod:`beanpole.cli.ops`, the client commands in
:mod:`beanpole.cli.admin`, ``binlog`` in :mod:`beanpole.cli.binlog`, ``cluster`` in
:mod:`beanpole.cli.cluster`), named in :data:`COMMANDS` and imported only when that
command runs or its help is shown; ``beanpole --help`` lists them from that table
without importing any.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import click
from click.utils import make_default_short_help

__all__ = ["COMMANDS", "CONTEXT_SETTINGS", "cli", "print_version", "version_option"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Every subcommand: its module, the command object's name there, and the first
#: paragraph of its help (what ``beanpole --help`` shows, shortened as click does).
COMMANDS: Final[dict[str, tuple[str, str, str]]] = {
    "serve": ("beanpole.cli.serve", "serve", "Run a server until SIGTERM or SIGINT."),
    "binlog": (
        "beanpole.cli.binlog",
        "binlog",
        "Inspect, verify, compact or import write-ahead log directories.",
    ),
    "stats": (
        "beanpole.cli.ops",
        "stats",
        "Show a server's stats: server-wide by default, or of tubes or a job.",
    ),
    "top": (
        "beanpole.cli.ops",
        "top",
        "A live view of a server: jobs, connections, rates and the busiest tubes.",
    ),
    "exporter": (
        "beanpole.cli.ops",
        "exporter",
        "Serve Prometheus metrics and the web dashboard of beanstalkd-protocol servers.",
    ),
    "put": ("beanpole.cli.admin", "put", "Put a job; BODY - reads it from stdin."),
    "peek": (
        "beanpole.cli.admin",
        "peek",
        "Show a job by ID, or the next ready/delayed/buried one of --tube.",
    ),
    "kick": (
        "beanpole.cli.admin",
        "kick",
        "Kick up to N buried jobs (or delayed ones if none is buried) of --tube.",
    ),
    "kick-job": ("beanpole.cli.admin", "kick_job", "Kick one buried or delayed job."),
    "delete": ("beanpole.cli.admin", "delete", "Delete jobs by id (pipelined)."),
    "pause": (
        "beanpole.cli.admin",
        "pause",
        "Pause TUBE: no job is reserved from it for SECONDS.",
    ),
    "clear": (
        "beanpole.cli.admin",
        "clear",
        "Delete the jobs of TUBE in the given states, with a progress bar.",
    ),
    "tail": ("beanpole.cli.admin", "tail", "Reserve and print the jobs of TUBE as they come."),
    "cluster": (
        "beanpole.cli.cluster",
        "cluster",
        "Look at a replicated cluster: status, add, promote, remove.",
    ),
}

#: Both commands and subcommands take -h as well as --help.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class _LazyGroup(click.Group):
    """A group that imports a subcommand's module when the subcommand is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in COMMANDS:
            module, name, _help = COMMANDS[cmd_name]
            # __import__ rather than importlib.import_module: the same import, and
            # `python -X importtime` lists it with what it pulls in below it.
            command = getattr(__import__(module, fromlist=[name]), name)
            assert isinstance(command, click.Command)
            self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands' list from the table: no subcommand module is imported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None:
                rows.append((name, loaded.get_short_help_str(limit)))
            else:
                rows.append((name, make_default_short_help(COMMANDS[name][2], limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    try:
        from beanpole._core import __version__
    except ImportError as err:
        raise click.ClickException(f"beanpole's native module is not available: {err}") from None
    click.echo(f"beanpole {__version__}")
    ctx.exit()


def version_option(*short: str) -> Callable[[_F], _F]:
    """``--version`` (and the ``short`` names): print beanpole's version and exit. The
    group's and ``serve``'s (which also takes beanstalkd's ``-v``)."""
    return click.option(
        *short,
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=print_version,
        help="Show the version and exit.",
    )


@click.group(name="beanpole", cls=_LazyGroup, context_settings=CONTEXT_SETTINGS)
@version_option()
def cli() -> None:
    """beanpole: a beanstalkd-compatible work-queue server."""
