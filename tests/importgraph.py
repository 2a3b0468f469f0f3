"""The import graph of a package, read from its source with ``ast`` (nothing is run).

Every import counts: at module level, inside functions, under ``if TYPE_CHECKING:``, in
``try`` blocks. Relative imports are resolved. ``from P import n`` is an import of the
module ``P.n`` when there is one, else of ``P``; ``import a.b.c`` is an import of the
longest of ``a.b.c``, ``a.b``, ``a`` that is a module of the package. Importing a
submodule runs its parent packages' ``__init__`` too, but that is not counted as an
edge (a package that re-exports its modules would otherwise form a cycle with each).

Used by ``tests/test_import_graph.py``: no cycles, and the layers import one way.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

Graph = dict[str, set[str]]


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a directory under ``root``) by dotted name; a stub
    (``.pyi``) counts for a module that has no ``.py`` (a native module's)."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if path.suffix == ".py" or name not in found:
            found[name] = path
    return found


def _is_package(path: Path) -> bool:
    return path.stem == "__init__"


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             known: Iterable[str]) -> set[str]:
    names = set(known)

    def longest(dotted: str) -> str | None:
        parts = dotted.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in names:
                return candidate
            parts.pop()
        return None

    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = longest(alias.name)
            if target is not None:
                found.add(target)
        return found
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        if submodule in names:
            found.add(submodule)
        else:
            target = longest(source)
            if target is not None:
                found.add(target)
    return found


def import_graph(root: Path, package: str) -> Graph:
    """Module -> the modules of the same package it imports (itself left out)."""
    modules = modules_of(root, package)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(node, name, _is_package(path), modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None when the graph has none."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        # Iterative depth-first search: the path so far, and each node's pending edges.
        path = [start]
        pending = [iter(sorted(graph[start]))]
        colour[start] = GREY
        while path:
            nxt = next(pending[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                pending.pop()
                continue
            state = colour.get(nxt, BLACK)  # edges out of the package are not followed
            if state == GREY:
                return [*path[path.index(nxt):], nxt]
            if state == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                pending.append(iter(sorted(graph[nxt])))
    return None


def format_cycle(cycle: list[str]) -> str:
    return " -> ".join(cycle)
