"""Hooks for measuring what hooks cost: count puts and deletes, nothing more.

    PYTHONPATH=bench python3 bench/ab.py --load "rt --producers 10 --consumers 10 \\
        --pipeline 16 --duration 3" --variant "none=" \\
        --variant "hooks=--hooks trivial_hooks:install"
"""

from __future__ import annotations

from typing import Any

counts = {"put": 0, "delete": 0}


def _count(event: Any) -> None:
    counts[event.kind] += 1


def install(server: Any) -> None:
    server.hook("put", _count)
    server.hook("delete", _count)
