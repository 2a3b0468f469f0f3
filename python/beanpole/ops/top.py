"""``beanpole top``: a live view of a server, refreshed every interval.

Each frame is one pipelined exchange (``stats``, ``list-tubes``, then every tube's
``stats-tube`` in windows), so 10,000 tubes cost a few round trips. Rates are counter
deltas between two frames. In a terminal, keys are read in cbreak mode; ``q`` quits.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from beanpole.client.stats import Stats, StatsClient, StatsError
from beanpole.ops.stats import duration

__all__ = ["Frame", "print_once", "render", "run"]

#: Lines around the tube rows: the server, rates and jobs lines, a blank line, the
#: table's heading, the hint, and one spare.
_CHROME = 7


def _int(stats: Mapping[str, Any], key: str) -> int:
    value = stats.get(key, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass
class Frame:
    """One fetch: the server's stats and its tubes, and when they were read."""

    server: Stats
    tubes: list[Stats]
    at: float = field(default_factory=time.monotonic)


def fetch(client: StatsClient) -> Frame:
    server, tubes = client.snapshot()
    return Frame(server, tubes)


def _rate(now: Frame, before: Frame | None, value: Any) -> str:
    if before is None:
        return "-"
    dt = now.at - before.at
    if dt <= 0:
        return "-"
    return f"{max(value(now) - value(before), 0) / dt:,.1f}"


def render(name: str, now: Frame, before: Frame | None, rows: int | None = None) -> Group:
    """A frame: the server line, the jobs line and the tube table sorted by ready."""
    s = now.server
    puts = _rate(now, before, lambda f: _int(f.server, "cmd-put"))
    reserves = _rate(
        now,
        before,
        lambda f: _int(f.server, "cmd-reserve") + _int(f.server, "cmd-reserve-with-timeout"),
    )
    deletes = _rate(now, before, lambda f: _int(f.server, "cmd-delete"))
    draining = "  [bold red]DRAINING[/]" if s.get("draining") is True else ""
    head = Text.from_markup(
        f"[bold]{name}[/]  {s.get('version', '?')}  up {duration(_int(s, 'uptime'))}  "
        f"connections {_int(s, 'current-connections')} "
        f"(producers {_int(s, 'current-producers')}, workers {_int(s, 'current-workers')}, "
        f"waiting {_int(s, 'current-waiting')}){draining}\n"
        f"puts/s {puts}  reserves/s {reserves}  deletes/s {deletes}"
    )
    jobs = Text(
        f"jobs: ready {_int(s, 'current-jobs-ready'):,}  urgent {_int(s, 'current-jobs-urgent'):,}"
        f"  reserved {_int(s, 'current-jobs-reserved'):,}"
        f"  delayed {_int(s, 'current-jobs-delayed'):,}  buried {_int(s, 'current-jobs-buried'):,}"
        f"  tubes {_int(s, 'current-tubes'):,}"
    )
    previous = {} if before is None else {str(t.get("name")): t for t in before.tubes}
    table = Table(box=None, pad_edge=False, header_style="bold reverse")
    table.add_column("TUBE")
    for heading in (
        "READY",
        "RESERVED",
        "DELAYED",
        "BURIED",
        "URGENT",
        "WAITING",
        "PAUSED",
        "PUTS/S",
    ):
        table.add_column(heading, justify="right")
    tubes = sorted(now.tubes, key=lambda t: -_int(t, "current-jobs-ready"))
    shown = tubes if rows is None else tubes[: max(rows, 1)]
    for t in shown:
        old = previous.get(str(t.get("name")))
        tube_puts = "-"
        if before is not None and old is not None and now.at > before.at:
            delta = max(_int(t, "total-jobs") - _int(old, "total-jobs"), 0)
            tube_puts = f"{delta / (now.at - before.at):,.1f}"
        left = _int(t, "pause-time-left")
        table.add_row(
            str(t.get("name", "")),
            f"{_int(t, 'current-jobs-ready'):,}",
            f"{_int(t, 'current-jobs-reserved'):,}",
            f"{_int(t, 'current-jobs-delayed'):,}",
            f"{_int(t, 'current-jobs-buried'):,}",
            f"{_int(t, 'current-jobs-urgent'):,}",
            f"{_int(t, 'current-waiting'):,}",
            duration(left) if left else "",
            tube_puts,
        )
    more = len(tubes) - len(shown)
    hint = Text(f"q quit{f'   ({more:,} more tubes)' if more > 0 else ''}", style="dim")
    return Group(head, jobs, Text(""), table, hint)


def print_once(client: StatsClient, console: Console) -> None:
    """Print one frame as the live view would show it on this console (a console that
    is not a terminal counts as 25 lines); no rates: they need two frames."""
    frame = fetch(client)
    console.print(render(client.name, frame, None, max(console.size.height - _CHROME, 1)))


@contextlib.contextmanager
def _keys() -> Iterator[int | None]:
    """stdin in cbreak mode while the view runs (its fd), or None when it is not a tty."""
    fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    if fd is None:
        yield None
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _quit_pressed(fd: int | None, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds; True if q (or Q) was pressed meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if fd is None:
            time.sleep(left)
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            data = os.read(fd, 64)
            if not data or b"q" in data.lower():
                return True


def run(client: StatsClient, interval: float) -> None:
    """Refresh every ``interval`` seconds until q is pressed (or Ctrl-C)."""
    console = Console()
    before: Frame | None = None
    with _keys() as fd, Live(console=console, screen=True, auto_refresh=False) as live:
        while True:
            started = time.monotonic()
            try:
                now = fetch(client)
                rows = max(console.size.height - _CHROME, 1)
                live.update(render(client.name, now, before, rows), refresh=True)
                before = now
            except StatsError as err:
                client.close()  # reconnect at the next refresh
                live.update(Text(f"{err}; retrying every {interval:g}s   (q quit)"), refresh=True)
                before = None
            if _quit_pressed(fd, interval - (time.monotonic() - started)):
                return
