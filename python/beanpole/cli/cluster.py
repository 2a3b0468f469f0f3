"""``beanpole cluster``: commands about a replicated cluster. ``status`` asks every
node of a cluster file for its view (over its peer address) and prints one row per
node: id, role (``leader``, ``follower``, ``candidate``, ``learner`` or ``down``),
term, the leader it knows, commit (the last log index it applied), the last index
in its log, and lag (entries the leader has that the node has not applied).

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (the click group) imports it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from beanpole.cli.group import CONTEXT_SETTINGS

__all__ = ["cluster"]

#: The columns of ``status``, in order.
COLUMNS = ("id", "role", "term", "leader", "commit", "last_log", "lag", "client", "peer")


@click.group(context_settings=CONTEXT_SETTINGS)
def cluster() -> None:
    """Look at a replicated cluster (beanpole serve --cluster FILE --node N)."""


@cluster.command()
@click.option(
    "--cluster",
    "cluster_file",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="The cluster file ([[node]] entries with id, client and peer).",
)
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
