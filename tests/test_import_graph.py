"""The package's import graph, read from source (``tests/importgraph.py``): no cycle,
lazy imports included, and the layers import one way.

Layers, lowest first: the base (``config``, ``addr``, ``logs``, the native module), the
clients (``beanpole.client``), the embedded server (``beanpole.server``), what operators
look at (``beanpole.ops``), the command (``beanpole.cli``). A module imports only from its
own layer and those below. ``beanpole.spark`` sits beside the server, above the clients:
it imports the base, the clients and itself. The package's ``__init__``, ``__main__``
and the pytest plugin are the front door: they may import anything and nothing imports
them. ruff's banned imports (pyproject.toml, the ``ruff.toml`` of each subpackage) say
the same for module paths; this test also sees relative imports and every layer pair.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from importgraph import find_cycle, format_cycle, import_graph

ROOT = Path(__file__).resolve().parent.parent / "python"

#: Rank of each layer; a module may import from layers of its rank or lower.
RANKS = {"base": 0, "client": 1, "spark": 2, "server": 2, "ops": 3, "cli": 4}
#: What spark may import (it is beside the server, not above it).
SPARK_MAY_IMPORT = {"base", "client", "spark"}
FRONT_DOOR = {"beanpole", "beanpole.__main__", "beanpole.pytest_plugin"}
BASE = {
    "beanpole._core",
    "beanpole.addr",
    "beanpole.defaults",
    "beanpole.logs",
    "beanpole.config",
}


def layer_of(module: str) -> str | None:
    """The layer of a module of beanpole; None for the front door."""
    if module in FRONT_DOOR:
        return None
    if module in BASE or module.startswith("beanpole.config."):
        return "base"
    for layer in ("client", "server", "ops", "cli", "spark"):
        if module == f"beanpole.{layer}" or module.startswith(f"beanpole.{layer}."):
            return layer
    raise AssertionError(f"{module} is in no layer: add it to tests/test_import_graph.py")


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes up a layer, sideways out of spark, or to the front door."""
    found = []
    for source, targets in sorted(graph.items()):
        src = layer_of(source)
        if src is None:
            continue
        for target in sorted(targets):
            dst = layer_of(target)
            if dst is None:
                found.append(f"{source} ({src}) imports the front door {target}")
            elif src == "spark":
                if dst not in SPARK_MAY_IMPORT:
                    found.append(f"{source} (spark) imports {target} ({dst})")
            elif dst == "spark" or RANKS[dst] > RANKS[src]:
                found.append(f"{source} ({src}) imports {target} ({dst}), a higher layer")
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT, "beanpole")


def test_the_graph_is_read_right(graph: dict[str, set[str]]) -> None:
    """Edges the tests below rely on: a lazy import inside a function, one under
    TYPE_CHECKING, relative imports, a stub for the native module."""
    assert "beanpole.ops.dashboard" in graph["beanpole.ops.served"]  # inside a method
    assert "beanpole.ops.http" in graph["beanpole.ops.served"]  # TYPE_CHECKING and method
    assert "beanpole.client" in graph["beanpole.spark.writer"]  # from ..client import
    assert "beanpole._core" in graph["beanpole.spark.writer"]  # from .. import _core
    assert "beanpole.spark.ack_rows" in graph["beanpole.spark"]  # from . import ack_rows
    assert len(graph) >= 60


def test_the_package_has_no_import_cycle(graph: dict[str, set[str]]) -> None:
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + format_cycle(cycle or [])


def test_every_module_is_in_a_layer(graph: dict[str, set[str]]) -> None:
    for module in graph:
        layer_of(module)


def test_the_layers_import_one_way(graph: dict[str, set[str]]) -> None:
    assert layer_violations(graph) == []


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_lazy_cycle_is_found(tmp_path: Path) -> None:
    """A cycle closed only by a function-level import and a TYPE_CHECKING one, through
    a relative import: the finder must report it."""
    write(tmp_path, {
        "pkg/__init__.py": '"""Package."""\n',
        "pkg/a.py": "def f():\n    from pkg.sub import b\n    return b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": (
            "from typing import TYPE_CHECKING\n"
            "from . import c\n"
            "if TYPE_CHECKING:\n"
            "    from ..a import f\n"
        ),
        "pkg/sub/c.py": "import os\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.a", "pkg.sub.c"}
    cycle = find_cycle(graph)
    assert cycle is not None
    assert format_cycle(cycle) == "pkg.a -> pkg.sub.b -> pkg.a"


def test_no_cycle_is_reported_where_there_is_none(tmp_path: Path) -> None:
    """A package that re-exports its modules, and modules that import it: not a cycle
    (the parent's ``__init__`` is not an edge of its submodules)."""
    write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import f\nfrom pkg import b\n",
        "pkg/a.py": "import pkg.b\n",
        "pkg/b.py": "import json\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": {"pkg.a", "pkg.b"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert find_cycle(graph) is None


def test_a_layer_violation_is_found() -> None:
    graph = {
        "beanpole.client.blocking": {"beanpole.server.embedded"},
        "beanpole.server.embedded": {"beanpole.ops.http", "beanpole.client.errors"},
        "beanpole.spark.writer": {"beanpole.server.hooks", "beanpole.client.blocking"},
        "beanpole.ops.http": {"beanpole"},
        "beanpole.cli.ops": {"beanpole.ops.http", "beanpole.config"},
    }
    assert layer_violations(graph) == [
        "beanpole.client.blocking (client) imports beanpole.server.embedded (server), "
        "a higher layer",
        "beanpole.ops.http (ops) imports the front door beanpole",
        "beanpole.server.embedded (server) imports beanpole.ops.http (ops), a higher layer",
        "beanpole.spark.writer (spark) imports beanpole.server.hooks (server)",
    ]


def test_every_module_says_what_it_holds_and_may_import() -> None:
    """Each module's docstring says what it holds and, in a sentence about imports, what
    it must not import (its layer), as the engine's files do."""
    missing = []
    for path in sorted((ROOT / "beanpole").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if len(doc) < 40 or "import" not in doc:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []
