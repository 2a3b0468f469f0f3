"""The release wheel for the wheel tests and bench/wheel_install.py: found in dist/ when
scripts/wheel.sh built it after the last change to what goes into it, else built once
by that script; and an environment without a Rust toolchain to install it into.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
WHEEL_GLOB = "beanpole-*-cp311-abi3-*x86_64.whl"
# What the wheel is built from (the editable build's module and byte code excepted).
SOURCES = ("rust", "python", "Cargo.toml", "Cargo.lock", "pyproject.toml", "scripts/wheel.sh")
SKIP_SUFFIXES = (".so", ".pyc")


def cargo_version() -> str:
    """The one version: the Cargo workspace's, which maturin writes into the wheel."""
    with (ROOT / "Cargo.toml").open("rb") as f:
        version: str = tomllib.load(f)["workspace"]["package"]["version"]
    return version


def _source_files() -> Iterator[Path]:
    for name in SOURCES:
        top = ROOT / name
        if top.is_file():
            yield top
            continue
        for path in top.rglob("*"):
            if (
                path.is_file()
                and "__pycache__" not in path.parts
                and not path.name.endswith(SKIP_SUFFIXES)
            ):
                yield path


def newest_source() -> float:
    return max(p.stat().st_mtime for p in _source_files())


def built_wheel() -> Path | None:
    """The x86_64 wheel in dist/, if there is one newer than every source."""
    wheels = sorted(DIST.glob(WHEEL_GLOB), key=lambda p: p.stat().st_mtime)
    if wheels and wheels[-1].stat().st_mtime > newest_source():
        return wheels[-1]
    return None


def wheel() -> Path:
    """The current wheel: reused from dist/, or built now by scripts/wheel.sh."""
    found = built_wheel()
    if found is not None:
        return found
    log = DIST.parent / "target" / "wheel-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        status = subprocess.run(
            ["bash", str(ROOT / "scripts/wheel.sh")],
            cwd=ROOT,
            env={**os.environ, "PYTHON": sys.executable},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        ).returncode
    if status != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise RuntimeError(f"scripts/wheel.sh failed ({status}); end of {log}:\n{tail}")
    found = built_wheel()
    if found is None:
        raise RuntimeError(f"scripts/wheel.sh left no {WHEEL_GLOB} in {DIST}")
    return found


def path_without_rust() -> list[str]:
    """This PATH less every directory that holds cargo or rustc."""
    return [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc"))
    ]


def venv_env(venv: Path) -> dict[str, str]:
    """The environment of a program run in ``venv``: its bin first on a PATH without
    cargo or rustc, nothing that would point Python at another package or toolchain."""
    path = os.pathsep.join([str(venv / "bin"), *path_without_rust()])
    for tool in ("cargo", "rustc"):
        if shutil.which(tool, path=path) is not None:
            raise RuntimeError(f"{tool} is still on {path}")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BEANPOLE_", "PYTHON", "CARGO", "RUSTUP", "LISTEN_"))
        and k not in ("VIRTUAL_ENV", "NOTIFY_SOCKET")
    }
    env["PATH"] = path
    env["VIRTUAL_ENV"] = str(venv)
    return env


def make_venv(venv: Path, *, system_site_packages: bool = False) -> None:
    args = [sys.executable, "-m", "venv", str(venv)]
    if system_site_packages:
        args.insert(3, "--system-site-packages")
    subprocess.run(args, check=True, env=venv_env(venv), stdin=subprocess.DEVNULL)


def pip_install(venv: Path, *args: str) -> None:
    """``pip install ARGS`` in ``venv``, binaries only (nothing may need compiling)."""
    subprocess.run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            *args,
        ],
        check=True,
        env=venv_env(venv),
        stdin=subprocess.DEVNULL,
    )
