"""Formatting stats for people and programs: tables (rich), JSON, YAML and the
Prometheus text format. Used by ``beanpole stats`` and ``beanpole top``.

JSON keeps every field with the server's own keys, numbers as numbers. Tables make
durations and sizes readable (``1h 02m``, ``64.0 KiB``).

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final

from rich import box
from rich.table import Table

from beanpole.client.snapshot import StatValue, row_of

__all__ = [
    "DURATION_KEYS",
    "SIZE_KEYS",
    "TUBE_COLUMNS",
    "duration",
    "human",
    "kv_table",
    "plain_tubes_table",
    "prometheus_text",
    "size",
    "to_json",
    "to_yaml",
    "tubes_table",
]

#: Values in whole seconds.
DURATION_KEYS: Final = frozenset(
    {"uptime", "pause", "pause-time-left", "age", "delay", "ttr", "time-left"}
)
#: CPU times, in seconds with fractions.
_CPU_KEYS: Final = frozenset({"rusage-utime", "rusage-stime"})
#: Numbers that are names rather than amounts: shown without thousands separators.
_PLAIN_KEYS: Final = frozenset(
    {"id", "pid", "pri", "file", "binlog-oldest-index", "binlog-current-index"}
)
#: Durations where 0 means "none" and is left blank in the tube table.
_BLANK_ZERO: Final = frozenset({"pause", "pause-time-left"})
#: Values in bytes.
SIZE_KEYS: Final = frozenset({"max-job-size", "binlog-max-size"})
#: Columns of a one-row-per-tube table: (heading, stats-tube key).
TUBE_COLUMNS: Final = (
    ("tube", "name"),
    ("ready", "current-jobs-ready"),
    ("urgent", "current-jobs-urgent"),
    ("reserved", "current-jobs-reserved"),
    ("delayed", "current-jobs-delayed"),
    ("buried", "current-jobs-buried"),
    ("total", "total-jobs"),
    ("using", "current-using"),
    ("watching", "current-watching"),
    ("waiting", "current-waiting"),
    ("deletes", "cmd-delete"),
    ("pauses", "cmd-pause-tube"),
    ("paused for", "pause"),
    ("left", "pause-time-left"),
)


def duration(seconds: float) -> str:
    """``45s``, ``3m 05s``, ``2h 04m``, ``3d 02h``; negative values keep their sign."""
    if seconds < 0:
        return "-" + duration(-seconds)
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def size(n: float) -> str:
    """``512 B``, ``64.0 KiB``, ``10.0 MiB``..."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def human(key: str, value: StatValue) -> str:
    """One value as a table shows it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if key in DURATION_KEYS:
            return duration(value)
        if key in _CPU_KEYS:
            return f"{value:.3f} s"
        if key in SIZE_KEYS:
            return size(value)
        if isinstance(value, int) and key not in _PLAIN_KEYS:
            return f"{value:,}"
    return str(value)


def kv_table(stats: Mapping[str, StatValue], title: str | None = None) -> Table:
    """A two-column table of every key and its readable value."""
    table = Table(title=title, box=box.SIMPLE, show_header=False, show_edge=False)
    table.add_column("key", style="bold")
    table.add_column("value", justify="right")
    for key, value in stats.items():
        table.add_row(key, human(key, value))
    return table


#: Past this many rows a tube table is written as plain aligned text: rich measures
#: and renders every cell, which takes seconds for thousands of rows.
RICH_ROWS_MAX: Final = 500


def tube_cells(tube: Mapping[str, StatValue]) -> list[str]:
    """One tube's row as a table shows it (pauses of 0 left blank)."""
    return [
        "" if key in _BLANK_ZERO and tube.get(key) == 0 else human(key, tube.get(key, ""))
        for _h, key in TUBE_COLUMNS
    ]


def plain_tubes_table(tubes: Sequence[Mapping[str, StatValue]]) -> str:
    """The tube table as plain aligned text, for many rows: the same columns as
    :func:`tubes_table`, names left-aligned, numbers right-aligned."""
    headings = [heading for heading, _key in TUBE_COLUMNS]
    rows = [tube_cells(tube) for tube in tubes]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headings)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return " " + "   ".join([first, *rest]).rstrip()

    rule = "\u2500" * (sum(widths) + 3 * (len(widths) - 1) + 2)
    return "\n".join([line(headings), rule, *(line(r) for r in rows)]) + "\n"


def tubes_table(tubes: Sequence[Mapping[str, StatValue]], title: str | None = None) -> Table:
    """One row per tube."""
    table = Table(title=title, box=box.SIMPLE, show_edge=False)
    for heading, _key in TUBE_COLUMNS:
        table.add_column(heading, justify="left" if heading == "tube" else "right")
    for tube in tubes:
        table.add_row(*tube_cells(tube))
    return table


def to_json(data: object) -> str:
    """Indented JSON, keys as the server names them."""
    return json.dumps(data, indent=2)


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string is a valid double-quoted YAML scalar.
    return json.dumps(str(value))


def to_yaml(data: Mapping[str, StatValue] | Sequence[Mapping[str, StatValue]]) -> str:
    """A YAML document: a mapping, or a list of mappings."""
    lines = ["---"]
    if isinstance(data, Mapping):
        lines += [f"{key}: {_yaml_scalar(value)}" for key, value in data.items()]
    else:
        for item in data:
            prefix = "- "
            for key, value in item.items():
                lines.append(f"{prefix}{key}: {_yaml_scalar(value)}")
                prefix = "  "
    return "\n".join(lines) + "\n"


def prometheus_text(
    server: Mapping[str, StatValue],
    tubes: Sequence[Mapping[str, StatValue]],
    *,
    max_tubes: int = 1000,
) -> str:
    """The Prometheus text format of one server's stats, with the names of ``/metrics``."""
    from prometheus_client import generate_latest

    from beanpole.ops.metrics import SnapshotCollector, registry_of

    rows = [row_of(dict(t)) for t in tubes]
    collector = SnapshotCollector(lambda b: b.add(server, rows, max_tubes=max_tubes))
    return generate_latest(registry_of(collector)).decode()
