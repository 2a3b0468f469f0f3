#!/usr/bin/env python3
"""Write the licence texts of the Rust crates linked into beanpole's native module.

Walks ``cargo metadata`` from the ``beanpole-python`` crate (the one maturin builds)
along normal dependencies only (build scripts and dev-dependencies are not linked),
for the Linux targets the wheel is built for, and copies each crate's licence files
(LICENSE*, LICENCE*, COPYING*, NOTICE*, as unpacked in cargo's registry) into one
notice, each distinct text once. A crate whose package ships none (openraft) has
the texts of its repository kept in scripts/licences.

    python3 scripts/third_party.py                  # writes python/beanpole/THIRD_PARTY_NOTICES
    python3 scripts/third_party.py --check          # exit 1 if that file is out of date
    python3 scripts/third_party.py -o -             # to stdout

Needs the crates' sources on disk (any ``cargo build`` or ``cargo fetch`` leaves them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "python/beanpole/THIRD_PARTY_NOTICES"
ROOT_CRATE = "beanpole-python"
TARGETS = ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu")
LICENCE_PREFIXES = ("license", "licence", "copying", "notice", "unlicense")
#: Crates whose packages ship no licence file: the texts from their repositories,
#: kept in scripts/licences/<directory>.
LICENCES_KEPT_HERE = {"openraft": "openraft", "openraft-macros": "openraft"}
KEPT = ROOT / "scripts/licences"
#: Crates that bundle C code built into the module, with the licence files of that
#: code inside the package (beside the crate's own).
BUNDLED_LICENCES = {"libmimalloc-sys": ("c_src/mimalloc/v3/LICENSE",)}


class NoticeError(Exception):
    """A crate's licence cannot be accounted for."""


def metadata(target: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [
            "cargo",
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            target,
            "--manifest-path",
            str(ROOT / "Cargo.toml"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def linked(meta: dict) -> set[str]:  # type: ignore[type-arg]
    """Package ids reachable from the root crate through normal dependencies.

    Proc-macro crates run in the compiler and are not linked, so the walk stops at them.
    """
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    macros = {
        p["id"]
        for p in meta["packages"]
        if any("proc-macro" in t["kind"] for t in p["targets"])
    }
    root = next(p["id"] for p in meta["packages"] if p["name"] == ROOT_CRATE)
    seen = {root}
    todo = [root]
    while todo:
        for dep in nodes[todo.pop()]["deps"]:
            if not any(k["kind"] is None for k in dep["dep_kinds"]):
                continue
            if dep["pkg"] not in seen and dep["pkg"] not in macros:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    return seen


def licence_files(manifest: Path) -> list[Path]:
    files = [
        p
        for p in sorted(manifest.parent.iterdir())
        if p.is_file() and p.name.lower().startswith(LICENCE_PREFIXES)
    ]
    return files


def render() -> str:
    packages: dict[str, dict] = {}  # type: ignore[type-arg]
    for target in TARGETS:
        meta = metadata(target)
        by_id = {p["id"]: p for p in meta["packages"]}
        for pid in linked(meta):
            p = by_id[pid]
            if p["source"] is None:  # beanpole's own crates
                continue
            packages[f"{p['name']} {p['version']}"] = p
    # Each distinct licence text appears once, headed by every crate file that has it.
    texts: dict[str, tuple[str, list[str]]] = {}
    for key in sorted(packages, key=str.lower):
        p = packages[key]
        files = licence_files(Path(p["manifest_path"]))
        if not files and p["name"] in LICENCES_KEPT_HERE:
            files = sorted((KEPT / LICENCES_KEPT_HERE[p["name"]]).iterdir())
        if not files:
            raise NoticeError(f"{key}: no licence file beside {p['manifest_path']}")
        top = Path(p["manifest_path"]).parent
        for inner in BUNDLED_LICENCES.get(p["name"], ()):
            if not (top / inner).is_file():
                raise NoticeError(f"{key}: no bundled licence file {inner}")
            files.append(top / inner)
        for f in files:
            text = f.read_text(encoding="utf-8", errors="replace").strip()
            digest = hashlib.sha256(text.encode()).hexdigest()
            name = f.relative_to(top) if f.is_relative_to(top) else f.name
            texts.setdefault(digest, (text, []))[1].append(f"{key}: {name}")
    lines = [
        "Third-party software in beanpole's native module (beanpole/_core)",
        "",
        "The module links the Rust crates listed below, under the licences named. Their",
        "licence texts follow as the crates ship them, each distinct text once, headed by",
        "the crates and files that carry it. Generated by scripts/third_party.py.",
        "",
        f"{len(packages)} crates:",
        *(f"  {k} ({packages[k].get('license') or '?'})" for k in sorted(packages, key=str.lower)),
    ]
    rule = "=" * 78
    for text, owners in texts.values():
        lines += ["", rule, *owners, rule, "", text]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(OUT), help="file to write, - for stdout")
    ap.add_argument("--check", action="store_true", help="only say whether OUTPUT is current")
    args = ap.parse_args(argv)
    try:
        text = render()
    except (NoticeError, subprocess.CalledProcessError, OSError) as e:
        print(f"third_party: {e}", file=sys.stderr)
        return 2
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    if args.check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            print(f"{out} is out of date: run python3 scripts/third_party.py", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
