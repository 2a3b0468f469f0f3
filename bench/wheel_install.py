#!/usr/bin/env python3
"""How long the wheel takes to install, and how big it is.

Each round makes two fresh venvs (no system site packages) on a PATH without cargo or
rustc and times, in one, ``pip install WHEEL`` with its dependencies (from pip's cache
or PyPI, binaries only) and, in the other, ``pip install --no-deps WHEEL`` (the wheel
alone); then the first ``beanpole --version`` there. Prints each round and the medians.
The wheel is dist/'s current one (built by scripts/wheel.sh when there is none).

    python3 bench/wheel_install.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import wheelbuild


def timed(fn: object, *args: object, **kwargs: object) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)  # type: ignore[operator]
    return time.perf_counter() - start


def first_run(venv: Path) -> None:
    subprocess.run(
        [str(venv / "bin/beanpole"), "--version"],
        check=True,
        env=wheelbuild.venv_env(venv),
        stdout=subprocess.DEVNULL,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds [3]")
    ap.add_argument("--wheel", type=Path, help="the wheel [dist/'s current one]")
    args = ap.parse_args(argv)
    wheel = args.wheel or wheelbuild.wheel()
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.2f} MB", flush=True)
    full: list[float] = []
    alone: list[float] = []
    first: list[float] = []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="beanpole-wheel-") as tmp:
            a, b = Path(tmp) / "full", Path(tmp) / "alone"
            wheelbuild.make_venv(a)
            wheelbuild.make_venv(b)
            full.append(timed(wheelbuild.pip_install, a, str(wheel)))
            alone.append(timed(wheelbuild.pip_install, b, "--no-deps", str(wheel)))
            first.append(timed(first_run, a))
        print(
            f"round {r + 1}: with dependencies {full[-1]:.2f} s, wheel alone "
            f"{alone[-1]:.2f} s, first beanpole --version {first[-1]:.2f} s",
            flush=True,
        )
    print(
        f"median of {args.rounds}: pip install with dependencies "
        f"{statistics.median(full):.2f} s, wheel alone {statistics.median(alone):.2f} s, "
        f"first beanpole --version {statistics.median(first):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
