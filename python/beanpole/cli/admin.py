"""Admin commands of ``beanpole``, built on :class:`beanpole.Client`, that work on stock
beanstalkd too: ``put``, ``peek``, ``kick``, ``kick-job``, ``delete``, ``pause``,
``clear`` and ``tail``.

Every command takes ``-H/--host HOST:PORT|unix:PATH`` (default ``127.0.0.1:11300``, or
``BEANPOLE_HOST``), and ``--tls``/``--tls-ca``/``--tls-cert``/``--tls-key`` for a TLS
listener. ``--json`` prints data as JSON. A failure prints one line and exits 1;
usage errors exit 2. The client is imported when a command runs, so ``import
beanpole.cli`` stays light.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from beanpole.cli.tls import tls_client_options

if TYPE_CHECKING:
    from beanpole.client.blocking import Client, Job
    from beanpole.client.tls import TLSOptions

__all__ = ["COMMANDS", "DEFAULT_HOST"]

DEFAULT_HOST = "127.0.0.1:11300"
HOST_ENV = "BEANPOLE_HOST"
STATES = ("ready", "delayed", "buried")

F = TypeVar("F", bound=Callable[..., Any])

_host_option = click.option(
    "-H",
    "--host",
    default=DEFAULT_HOST,
    envvar=HOST_ENV,
    show_default=True,
    metavar="HOST:PORT|unix:PATH",
    help=f"Server to talk to  [env: {HOST_ENV}]",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _admin(fn: F) -> F:
    """Turn client and OS errors into one line and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from beanpole.client.errors import ClientError

        try:
            return fn(*args, **kwargs)
        except (ClientError, OSError, UnicodeError, ValueError, TypeError) as err:
            raise click.ClickException(_describe(err)) from None

    return wrapper  # type: ignore[return-value]


def _describe(err: BaseException) -> str:
    from beanpole.client.errors import BatchError, BeanstalkdError

    if isinstance(err, BatchError):
        return f"{err} ({len(err.ids)} done before it)"
    if isinstance(err, BeanstalkdError):
        return f"the server replied {err.reply or err}"
    return str(err) or type(err).__name__


def _connect(host: str, tls: TLSOptions | None) -> Client[bytes]:
    from beanpole.client.blocking import Client

    if tls is None:
        return Client(host, encoding=None, timeout=30)
    return Client(
        host,
        encoding=None,
        timeout=30,
        tls=True,
        ca=tls.ca,
        cert=tls.cert,
        key=tls.key,
        server_name=tls.server_name,
    )


def _text(body: bytes) -> str:
    return body.decode("utf-8", "backslashreplace")


def _show_job(job: Job[bytes], as_json: bool, extra: dict[str, Any] | None = None) -> None:
    if as_json:
        click.echo(json.dumps({"id": job.id, "body": _text(job.body), **(extra or {})}))
    else:
        click.echo(f"{job.id}\t{_text(job.body)}")


@click.command()
@_host_option
@tls_client_options
@click.option("--tube", default="default", show_default=True)
@click.option("--priority", type=click.IntRange(0, 2**32 - 1), default=2**16, show_default=True)
@click.option("--delay", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True)
@click.option("--ttr", type=click.IntRange(0, 2**32 - 1), default=60, show_default=True)
@click.option("--lines", is_flag=True, help="One job per line of BODY (or of stdin).")
@_json_option
@click.argument("body")
@_admin
def put(
    host: str,
    tls: TLSOptions | None,
    tube: str,
    priority: int,
    delay: int,
    ttr: int,
    lines: bool,
    as_json: bool,
    body: str,
) -> None:
    """Put a job; BODY - reads it from stdin. Prints the new id(s)."""
    data = sys.stdin.buffer.read() if body == "-" else body.encode()
    with _connect(host, tls) as c:
        c.use(tube)
        if lines:
            items = data.splitlines()
            ids = c.put_many(items, priority=priority, delay=delay, ttr=ttr)
        else:
            ids = [c.put(data, priority, delay, ttr)]
    if as_json:
        click.echo(json.dumps({"ids": ids} if lines else {"id": ids[0]}))
    else:
        for job_id in ids:
            click.echo(job_id)


@click.command()
@_host_option
@tls_client_options
@click.option("--tube", default="default", show_default=True)
@click.option("--ready", "state", flag_value="ready", help="The next ready job.")
@click.option("--delayed", "state", flag_value="delayed", help="The next delayed job.")
@click.option("--buried", "state", flag_value="buried", help="The next buried job.")
@_json_option
@click.argument("job_id", metavar="[ID]", type=click.IntRange(0), required=False)
@_admin
def peek(
    host: str,
    tls: TLSOptions | None,
    tube: str,
    state: str | None,
    as_json: bool,
    job_id: int | None,
) -> None:
    """Show a job by ID, or the next ready/delayed/buried one of --tube."""
    if (job_id is None) == (state is None):
        raise click.UsageError("give a job ID or one of --ready, --delayed, --buried")
    with _connect(host, tls) as c:
        c.use(tube)
        if job_id is not None:
            job = c.peek(job_id)
        elif state == "ready":
            job = c.peek_ready()
        elif state == "delayed":
            job = c.peek_delayed()
        else:
            job = c.peek_buried()
        stats = c.stats_job(job.id)
    _show_job(job, as_json, {"stats": stats} if as_json else None)


@click.command()
@_host_option
@tls_client_options
@click.option("--tube", default="default", show_default=True)
@_json_option
@click.argument("bound", metavar="N", type=click.IntRange(0, 2**32 - 1))
@_admin
def kick(host: str, tls: TLSOptions | None, tube: str, as_json: bool, bound: int) -> None:
    """Kick up to N buried jobs (or delayed ones if none is buried) of --tube."""
    with _connect(host, tls) as c:
        c.use(tube)
        kicked = c.kick(bound)
    click.echo(json.dumps({"kicked": kicked}) if as_json else kicked)


@click.command("kick-job")
@_host_option
@tls_client_options
@click.argument("job_id", metavar="ID", type=click.IntRange(0))
@_admin
def kick_job(host: str, tls: TLSOptions | None, job_id: int) -> None:
    """Kick one buried or delayed job."""
    with _connect(host, tls) as c:
        c.kick_job(job_id)


@click.command()
@_host_option
@tls_client_options
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=click.IntRange(0))
@_admin
def delete(host: str, tls: TLSOptions | None, job_ids: tuple[int, ...]) -> None:
    """Delete jobs by id (pipelined)."""
    with _connect(host, tls) as c:
        c.delete_many(job_ids)


@click.command()
@_host_option
@tls_client_options
@click.argument("tube")
@click.argument("seconds", type=click.IntRange(0, 2**32 - 1))
@_admin
def pause(host: str, tls: TLSOptions | None, tube: str, seconds: int) -> None:
    """Pause TUBE: no job is reserved from it for SECONDS."""
    with _connect(host, tls) as c:
        c.pause_tube(tube, seconds)


def _states(value: str) -> list[str]:
    states = [s.strip() for s in value.split(",") if s.strip()]
    bad = [s for s in states if s not in STATES]
    if bad or not states:
        raise click.BadParameter(f"states are {', '.join(STATES)}; got {value!r}")
    return states


@click.command()
@_host_option
@tls_client_options
@click.option(
    "--state",
    "states",
    default=",".join(STATES),
    show_default=True,
    help="Which jobs to delete, comma separated.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask before deleting.")
@_json_option
@click.argument("tube")
@_admin
def clear(
    host: str, tls: TLSOptions | None, states: str, yes: bool, as_json: bool, tube: str
) -> None:
    """Delete the jobs of TUBE in the given states, with a progress bar. Jobs reserved
    by other clients are left alone."""
    wanted = _states(states)
    with _connect(host, tls) as c:
        stats = c.stats_tube(tube)
        total = sum(int(stats[f"current-jobs-{s}"]) for s in wanted)
        if total == 0:
            click.echo(json.dumps({"deleted": 0}) if as_json else "nothing to delete")
            return
        if not yes and not click.confirm(
            f"Delete {total} {'/'.join(wanted)} job(s) from tube {tube!r}?", err=True
        ):
            raise click.ClickException("nothing deleted")
        deleted = _clear(c, tube, wanted, total, progress=not as_json)
    click.echo(json.dumps({"deleted": deleted}) if as_json else f"deleted {deleted} job(s)")


def _clear(c: Client[bytes], tube: str, states: list[str], total: int, progress: bool) -> int:
    from rich.progress import Progress

    deleted = 0
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"clearing {tube}", total=total)
        for count in _clear_steps(c, tube, states):
            deleted += count
            bar.update(task, advance=count)
    return deleted


def _clear_steps(c: Client[bytes], tube: str, states: list[str]) -> Iterator[int]:
    """Delete in steps, yielding how many each step deleted."""
    if "ready" in states:
        c.watch(tube)
        if tube != "default":
            c.ignore("default")
        while True:
            jobs = c.reserve_many(1000, timeout=0)
            if not jobs:
                break
            c.delete_many(jobs)
            yield len(jobs)
    c.use(tube)
    from beanpole.client.errors import NotFoundError

    for state in (s for s in states if s != "ready"):
        peek = c.peek_delayed if state == "delayed" else c.peek_buried
        while True:
            try:
                job = peek()
            except NotFoundError:
                break
            try:
                c.delete(job)
            except NotFoundError:  # gone meanwhile (kicked, or deleted by another)
                continue
            yield 1


@click.command()
@_host_option
@tls_client_options
@click.option("--delete", "delete_jobs", is_flag=True, help="Delete each job once printed.")
@click.option("--count", type=click.IntRange(1), help="Stop after this many jobs.")
@click.option("--timeout", type=click.IntRange(0), help="Stop after this many idle seconds.")
@_json_option
@click.argument("tube")
@_admin
def tail(
    host: str,
    tls: TLSOptions | None,
    delete_jobs: bool,
    count: int | None,
    timeout: int | None,
    as_json: bool,
    tube: str,
) -> None:
    """Reserve and print the jobs of TUBE as they come. With --delete each is deleted;
    without, the jobs printed stay reserved while tail runs (so each is printed once)
    and are released, with their own priority, when it stops."""
    from beanpole.client.errors import NotFoundError, TimedOutError

    held: dict[int, int] = {}
    seen = 0
    with _connect(host, tls) as c:
        c.watch(tube)
        if tube != "default":
            c.ignore("default")
        try:
            while count is None or seen < count:
                try:
                    job = c.reserve(timeout=1 if timeout is None else min(timeout, 1))
                except TimedOutError:
                    if timeout is not None:
                        timeout -= 1
                        if timeout <= 0:
                            break
                    continue
                if job.id in held:  # its ttr ran out and it came back: keep it, silently
                    continue
                stats = c.stats_job(job.id)
                _show_job(job, as_json)
                sys.stdout.flush()
                seen += 1
                if delete_jobs:
                    c.delete(job)
                else:
                    held[job.id] = int(stats["pri"])
        except KeyboardInterrupt:
            pass
        finally:
            for job_id, pri in held.items() if c.connected else ():
                # A job deleted meanwhile by another client is no reason to stop.
                with contextlib.suppress(NotFoundError):
                    c.release(job_id, priority=pri, delay=0)


COMMANDS = (put, peek, kick, kick_job, delete, pause, clear, tail)
