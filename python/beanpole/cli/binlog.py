"""``beanpole binlog``: look into, check, shrink and convert write-ahead log directories.

Every command takes the directory's lock, so none runs on a directory that a live
server is using.

* ``dump DIR`` prints one line per record (``--json`` for JSON lines);
* ``verify DIR`` replays without changing anything; exit 0 if a server would start on
  it, 1 with the reason if not;
* ``compact DIR`` rewrites the live jobs into fresh segments and removes the rest;
* ``import BEANSTALKD_DIR DIR`` converts a beanstalkd ``binlog.N`` directory into a
  beanpole log, so an operator can switch servers without losing jobs.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

from typing import Any

import click

__all__ = ["binlog", "format_record"]

_CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def _core() -> Any:
    from beanpole import _core

    return _core


def format_record(record: dict[str, Any]) -> str:
    """One human-readable line for a record dict from ``_core.binlog_dump``."""
    where = f"{record['segment']:>6}:{record['offset']:<10}"
    kind = record["kind"]
    head = f"{where} {kind:<8} id={record['id']}"
    if kind == "job":
        body: bytes = record["body"]
        preview = body[:40].decode("utf-8", "backslashreplace").replace("\n", "\\n")
        more = "…" if len(body) > 40 else ""
        return (
            f"{head} tube={record['tube']} state={record['state']} pri={record['pri']} "
            f"delay={record['delay']} ttr={record['ttr']} reserves={record['reserves']} "
            f"timeouts={record['timeouts']} releases={record['releases']} "
            f"buries={record['buries']} kicks={record['kicks']} bytes={len(body)} "
            f"body={preview!r}{more}"
        )
    fields = [f"{k}={record[k]}" for k in ("pri", "delay", "bury_seq", "next_id") if k in record]
    return " ".join([head, *fields])


def _json_record(record: dict[str, Any]) -> str:
    import json  # only for `dump --json`: kept out of every server start

    out = dict(record)
    if "body" in out:
        body: bytes = out.pop("body")
        out["body"] = body.decode("latin-1")
        out["body_bytes"] = len(body)
    return json.dumps(out, ensure_ascii=False)


@click.group(name="binlog", context_settings=_CONTEXT_SETTINGS)
def binlog() -> None:
    """Inspect, verify, compact or import write-ahead log directories."""


@binlog.command(context_settings=_CONTEXT_SETTINGS)
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def dump(directory: str, as_json: bool) -> None:
    """Print every record of the log in DIRECTORY, oldest first."""
    try:
        records, problems = _core().binlog_dump(directory)
    except OSError as err:
        raise click.ClickException(str(err)) from None
    for record in records:
        click.echo(_json_record(record) if as_json else format_record(record))
    for problem in problems:
        click.echo(f"problem: {problem}", err=True)
    if problems:
        raise SystemExit(1)


@binlog.command(context_settings=_CONTEXT_SETTINGS)
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
def verify(directory: str) -> None:
    """Check that a server would start on DIRECTORY, changing nothing."""
    try:
        report = _core().binlog_verify(directory)
    except OSError as err:
        click.echo(f"beanpole: {directory}: NOT sound: {err}", err=True)
        raise SystemExit(1) from None
    for warning in report["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    click.echo(
        f"{directory}: sound: {len(report['segments'])} segments, {report['records']} records, "
        f"{report['jobs']} live jobs, next id {report['next_id']}"
    )


@binlog.command(context_settings=_CONTEXT_SETTINGS)
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("-s", "--segment-size", type=int, default=10485760, show_default=True)
def compact(directory: str, segment_size: int) -> None:
    """Rewrite the live jobs of DIRECTORY into fresh segments (offline)."""
    try:
        kept, removed = _core().binlog_compact(directory, segment_size)
    except OSError as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"{directory}: {kept} live jobs kept, {removed} old segments removed")


@binlog.command(name="import", context_settings=_CONTEXT_SETTINGS)
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-s", "--segment-size", type=int, default=10485760, show_default=True)
def import_(source: str, directory: str, segment_size: int) -> None:
    """Convert beanstalkd's binlog directory SOURCE into a beanpole log in DIRECTORY."""
    try:
        jobs, warnings = _core().binlog_import(source, directory, segment_size)
    except OSError as err:
        raise click.ClickException(str(err)) from None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"imported {jobs} jobs from {source} into {directory}; start with -b {directory}")
