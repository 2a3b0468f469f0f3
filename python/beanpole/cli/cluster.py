"""``beanpole cluster``: commands about a replicated cluster. ``status`` asks every
node of a cluster file for its view (over its peer address) and prints one row per
node: id, role (``leader``, ``follower``, ``candidate``, ``learner``, ``down`` when it
does not answer, ``removed`` when the leader's membership no longer has it),
term, the leader it knows, commit (the last log index it applied), the last index
in its log, and lag (entries the leader has that the node has not applied).

``add``, ``promote`` and ``remove`` change the membership: they find the leader and
ask it, with the admin token the nodes were started with (``--admin-token-file``).
A new node is listed in the cluster file, started with it, then added (it becomes a
learner and catches up) and promoted (a voter). ``remove`` takes a voter or a
learner out, the leader too (another voter then leads).

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (the click group) imports it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from beanpole.cli.group import CONTEXT_SETTINGS

__all__ = ["cluster"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: The columns of ``status``, in order.
COLUMNS = ("id", "role", "term", "leader", "commit", "last_log", "lag", "client", "peer")


@click.group(context_settings=CONTEXT_SETTINGS)
def cluster() -> None:
    """Look at a replicated cluster: status, add, promote, remove."""


def _cluster_option(help_text: str) -> Callable[[_F], _F]:
    return click.option(
        "--cluster",
        "cluster_file",
        required=True,
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help=help_text,
    )


@cluster.command()
@_cluster_option("The cluster file ([[node]] entries with id, client and peer).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "json")),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.0),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="How long each node may take to answer.",
)
def status(cluster_file: str, fmt: str, timeout: float) -> None:
    """Each node's role, term, leader, commit and lag, asked of the node itself."""
    from beanpole import _core

    try:
        nodes = _core.cluster_status(cluster_file, timeout)
    except (OSError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    if fmt == "json":
        click.echo(json.dumps(nodes, indent=2))
        return
    _print_table(nodes)


def _print_table(nodes: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="cluster status")
    for column in COLUMNS:
        table.add_column(
            column, justify="right" if column not in ("role", "client", "peer") else "left"
        )
    for node in nodes:
        cells = ["-" if node.get(c) is None else str(node[c]) for c in COLUMNS]
        table.add_row(*cells, style="red" if node["role"] == "down" else None)
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    for node in nodes:
        if node.get("error"):
            click.echo(f"node {node['id']} ({node['peer']}): {node['error']}", err=True)


def _membership(op: str, doc: str) -> None:
    @cluster.command(name=op, help=doc)
    @_cluster_option("The cluster file; it lists the node with its addresses.")
    @click.option(
        "--node", required=True, type=click.IntRange(min=1), metavar="ID", help="The node."
    )
    @click.option(
        "--token-file",
        required=True,
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="The admin token the nodes were started with (--admin-token-file).",
    )
    @click.option(
        "--timeout",
        type=click.FloatRange(min=0.0),
        default=120.0,
        show_default=True,
        metavar="SECONDS",
        help="How long to wait for the leader's answer.",
    )
    def command(cluster_file: str, node: int, token_file: str, timeout: float) -> None:
        from beanpole import _core
        from beanpole.ops.dashboard.actions import TokenError, load_token

        try:
            token = load_token(token_file).decode("ascii")
            click.echo(_core.cluster_change(cluster_file, op, node, token, timeout))
        except (TokenError, OSError, ValueError) as err:
            raise click.ClickException(str(err)) from None


_membership("add", "Add a node as a learner; returns once it has caught up.")
_membership("promote", "Make a learner a voter.")
_membership("remove", "Take a voter or a learner out of the cluster (the leader too).")
