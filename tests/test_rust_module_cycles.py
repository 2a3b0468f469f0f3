"""No import cycles between the Rust modules of the engine, the protocol and the client.

Reads the sources only (nothing is built): every file under each crate's ``src/`` is a
module, and each ``use`` tree and inline path that starts with ``crate::``,
``super::``, ``self::`` or a child module's name is an edge to the module it names
(items are not resolved: ``use crate::wal::LogError`` is an edge to ``wal``). A
module's edges to its own descendants do not count: a folder's ``mod.rs`` may
declare, re-export and compose its files, and those files may use what it defines.
Any other cycle fails, with the files on it and the lines that make each edge.
The synthetic cases at the end show that a cycle is found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CRATES = ("rust/engine/src", "rust/protocol/src", "rust/client/src")

Module = tuple[str, ...]


@dataclass(frozen=True)
class Edge:
    """One reference from a module to another, where it is written."""

    source: Module
    target: Module
    file: str
    line: int


# Comments, string literals (plain, byte, raw) and char literals: what may hold text
# that looks like a path. A lifetime (`'a`) is not a char literal: one char, then `'`.
LITERAL = re.compile(
    r"//[^\n]*"
    r"|/\*.*?\*/"
    r'|(?<![\w])b?r(#*)".*?"\1'
    r'|(?<![\w])b?"(?:\\.|[^"\\])*"'
    r"|(?<![\w])b?'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'",
    re.S,
)


def strip_comments_and_literals(text: str) -> str:
    """The text with comments, strings and char literals blanked (newlines kept)."""
    return LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def module_of(src: Path, file: Path) -> Module:
    """`lib.rs` is the crate root, `a/mod.rs` and `a.rs` are `a`, `a/b.rs` is `a::b`."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "mod", "main"):
        parts.pop()
    return tuple(parts)


def use_paths(tree: str) -> Iterator[list[str]]:
    """The full paths of a `use` tree: `a::{b, c::{d as e}}` gives a::b and a::c::d."""
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def walk(prefix: list[str], s: str) -> Iterator[list[str]]:
        depth, start, items = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:k])
                start = k + 1
        items.append(s[start:])
        for item in filter(None, items):
            brace = item.find("{")
            if brace >= 0:
                head = [p for p in item[:brace].split("::") if p]
                yield from walk(prefix + head, item[brace + 1 : item.rindex("}")])
            else:
                yield prefix + [p for p in item.split("::") if p]

    yield from walk([], tree)


USE = re.compile(r"\buse\s+([^;]+);")
INLINE = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
INLINE_MOD = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")


def inline_mods(code: str) -> list[tuple[int, int, str]]:
    """Each inline `mod name { ... }` block: where it opens, where it closes, its name."""
    opens = {m.end() - 1: m.group(1) for m in INLINE_MOD.finditer(code)}
    stack: list[int] = []
    blocks = []
    for m in re.finditer(r"[{}]", code):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            start = stack.pop()
            if start in opens:
                blocks.append((start, m.start(), opens[start]))
    return sorted(blocks)


def resolve(path: list[str], here: Module, known: set[Module]) -> Module | None:
    """The file module a path names (its longest known prefix), or None if outside."""
    if path[0] == "crate":
        base: list[str] = []
        rest = path[1:]
    elif path[0] in ("super", "self"):
        base, rest = list(here), path
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                if not base:
                    return None
                base.pop()
            rest = rest[1:]
    elif (*here, path[0]) in known:
        base, rest = list(here), path  # a child module named without `self::`
    else:
        return None  # another crate, std, or an item in scope
    best = None
    for k in range(len(rest) + 1):
        candidate = tuple(base + rest[:k])
        if candidate in known:
            best = candidate
    return best


def file_edges(file: Path, mod: Module, known: set[Module], name: str) -> list[Edge]:
    """The edges one file makes, named `name` in failures."""
    code = strip_comments_and_literals(file.read_text())
    blocks = inline_mods(code)

    def here_at(offset: int) -> Module:
        # An inline module (`mod tests { ... }`) is a module of its own.
        return mod + tuple(n for a, b, n in blocks if a < offset < b)

    found: list[tuple[int, list[str]]] = []
    uses = [(m.start(), m.end()) for m in USE.finditer(code)]
    for m in USE.finditer(code):
        found.extend((m.start(), p) for p in use_paths(m.group(1)))
    for m in INLINE.finditer(code):
        if not any(a <= m.start() < b for a, b in uses):
            found.append((m.start(), re.sub(r"\s+", "", m.group(1)).split("::")))
    edges = []
    for offset, path in found:
        here = here_at(offset)
        target = resolve(path, here, known | {here}) if path else None
        # A module's own items and its descendants (a parent may use its children)
        # are not edges.
        if target is not None and target[: len(here)] != here:
            edges.append(Edge(here, target, name, code.count("\n", 0, offset) + 1))
    return edges


def crate_graph(src: Path, root: Path = ROOT) -> list[Edge]:
    """Every counted edge between the file modules of one crate (files named from root)."""
    files = sorted(src.rglob("*.rs"))
    known = {module_of(src, f) for f in files}
    edges = []
    for f in files:
        edges += file_edges(f, module_of(src, f), known, str(f.relative_to(root)))
    return edges


def find_cycle(edges: list[Edge]) -> list[Edge] | None:
    """One cycle in the graph, as the edges around it, or None."""
    out: dict[Module, list[Edge]] = {}
    for e in edges:
        out.setdefault(e.source, []).append(e)
    state: dict[Module, int] = {}  # 1: on the current path, 2: done
    path: list[Edge] = []

    def visit(node: Module) -> list[Edge] | None:
        state[node] = 1
        for e in out.get(node, []):
            if state.get(e.target) == 1:
                # The target is on the path: the cycle starts at its edge out.
                start = next(i for i, p in enumerate(path) if p.source == e.target)
                return [*path[start:], e]
            if e.target not in state:
                path.append(e)
                found = visit(e.target)
                if found:
                    return found
                path.pop()
        state[node] = 2
        return None

    for node in sorted(out):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def describe(cycle: list[Edge]) -> str:
    """A cycle for a failure message: each edge and the line that makes it."""
    return "\n".join(
        f"  {'::'.join(e.source) or 'crate'} -> {'::'.join(e.target) or 'crate'}"
        f"  ({e.file}:{e.line})"
        for e in cycle
    )


@pytest.mark.parametrize("crate", CRATES)
def test_no_module_cycles(crate: str) -> None:
    src = ROOT / crate
    edges = crate_graph(src)
    assert edges, f"no imports found under {crate}: is the parser broken?"
    cycle = find_cycle(edges)
    assert cycle is None, f"module import cycle in {crate}:\n{describe(cycle)}"


def write_crate(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def cycle_in(root: Path, files: dict[str, str]) -> list[str] | None:
    """The files on the cycle of a synthetic crate, or None."""
    cycle = find_cycle(crate_graph(write_crate(root, files), root))
    return None if cycle is None else sorted({e.file for e in cycle})


LIB = "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n"


def test_sibling_cycle_is_found(tmp_path: Path) -> None:
    found = cycle_in(
        tmp_path,
        {
            "lib.rs": LIB,
            "a.rs": "use crate::b::{self as bee, B};\npub struct A;\n",
            "b.rs": "use super::{\n    c::C,\n};\npub struct B;\n",
            "c.rs": "pub struct C(crate::a::A);\n",
            "d.rs": "use crate::a::A;\n",
        },
    )
    assert found == ["a.rs", "b.rs", "c.rs"]


def test_cycle_through_folders_and_tests_is_found(tmp_path: Path) -> None:
    found = cycle_in(
        tmp_path,
        {
            "lib.rs": "pub mod a;\npub mod b;\n",
            "a/mod.rs": "mod x;\nmod y;\n",
            "a/x.rs": "fn f() { super::super::b::g(); }\n",
            "a/y.rs": "pub fn h() {}\n",
            "b.rs": "#[cfg(test)]\nmod tests {\n    use crate::a::x;\n}\npub fn g() {}\n",
        },
    )
    # x -> b is an edge; b's test module -> x is another, but it is b::tests, not b.
    assert found is None
    found = cycle_in(
        tmp_path,
        {"b.rs": "use crate::a::y::h;\npub fn g() { h() }\n", "a/y.rs": "use crate::a::x;\n"},
    )
    assert found == ["a/x.rs", "a/y.rs", "b.rs"]


def test_comments_strings_and_descendants_are_not_edges(tmp_path: Path) -> None:
    found = cycle_in(
        tmp_path,
        {
            "lib.rs": LIB,
            "a.rs": '// use crate::b;\n/* crate::b::B */\nconst S: &str = "crate::b::B";\n'
            'const R: &str = r#"use crate::b;"#;\nconst Q: char = \'"\';\n'
            "pub fn f<'x>(s: &'x str) -> &'x str { s }\n",
            "b.rs": "use crate::a::f;\n",
            "c/mod.rs": "",
            "d.rs": "",
        },
    )
    assert found is None
    # A parent using its child while the child uses the parent's items is allowed.
    found = cycle_in(
        tmp_path / "p",
        {
            "lib.rs": "pub mod a;\n",
            "a/mod.rs": "mod x;\npub use x::X;\npub struct Shared;\n",
            "a/x.rs": "use super::Shared;\npub struct X(Shared);\n",
        },
    )
    assert found is None
