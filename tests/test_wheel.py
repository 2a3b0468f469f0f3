"""The release wheel installed where no Rust toolchain is (marker ``wheel``).

scripts/wheel.sh's wheel (reused from dist/ when newer than its sources, else built once
per run) goes into a fresh venv without the system's site packages, with pip, on a PATH
that has no cargo and no rustc. Then, from that venv: ``beanpole --version``,
``beanpole serve`` answering greenstalk, ``beanpole.Server(port=0)`` in a script with
``beanpole stats`` asking it; and one version everywhere: the Cargo workspace's, the
wheel's name and metadata, ``beanpole.__version__``, ``--version`` and the start line.

The Spark extra's import runs in a second venv that sees this machine's packages, with
the wheel installed ``--no-deps`` into it: pyspark is a 450 MB package, and installing it
into a fresh venv only to import it would take longer than the rest of these tests. The
venv's own copy of beanpole is checked to be the one imported.
"""

from __future__ import annotations

import configparser
import json
import queue
import re
import signal
import struct
import subprocess
import threading
import zipfile
from pathlib import Path

import greenstalk
import pytest

import wheelbuild
from wheelbuild import ROOT, cargo_version, make_venv, pip_install, venv_env

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(1800)]

TIMEOUT = 30.0  # seconds; an upper bound for what takes well under one
LISTENING = re.compile(r"^beanpole (\S+) listening on 127\.0\.0\.1:(\d+)")


@pytest.fixture(scope="module")
def wheel() -> Path:
    return wheelbuild.wheel()


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site packages) with the wheel and its dependencies."""
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    make_venv(venv)
    pip_install(venv, str(wheel))
    return venv


def run(venv: Path, *argv: str) -> str:
    """Run ARGV (a command of the venv's bin) there; its stdout."""
    done = subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        env=venv_env(venv),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stderr}"
    return done.stdout


class Lines:
    """A child's output stream read line by line on a thread, waited on with a deadline."""

    def __init__(self, stream: object) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.seen.append(line)
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait(self, pattern: re.Pattern[str]) -> re.Match[str]:
        while True:
            try:
                line = self._lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no {pattern.pattern!r} in {self.seen}") from None
            if line is None:
                raise AssertionError(f"ended before {pattern.pattern!r}: {self.seen}")
            match = pattern.search(line)
            if match:
                return match


def test_the_wheel_holds_the_command_stubs_static_files_and_notices(wheel: Path) -> None:
    version = cargo_version()
    assert wheel.name.startswith(f"beanpole-{version}-cp311-abi3-")
    assert "manylinux_2_17_x86_64" in wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"beanpole-{version}.dist-info"
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        wheel_tags = zf.read(f"{info}/WHEEL").decode()
        notices = zf.read("beanpole/THIRD_PARTY_NOTICES").decode()
        module = zf.read("beanpole/_core.abi3.so")
    scripts = configparser.ConfigParser()
    scripts.read_string(entry_points)
    assert scripts["console_scripts"]["beanpole"] == "beanpole.cli:main"
    assert "Tag: cp311-abi3-manylinux_2_17_x86_64" in wheel_tags
    for name in ("beanpole/_core.pyi", "beanpole/py.typed", "beanpole/cli/__init__.py"):
        assert name in names
    static = ROOT / "python/beanpole/ops/dashboard/static"
    expected = {f"beanpole/ops/dashboard/static/{p.name}" for p in static.iterdir()}
    assert expected and expected <= names
    # The licence texts of the linked crates, the same as the committed notice.
    assert notices == (ROOT / "python/beanpole/THIRD_PARTY_NOTICES").read_text()
    for crate in ("tokio", "pyo3", "rustls", "ring"):
        assert re.search(rf"^  {crate} \d", notices, re.MULTILINE), crate
    # Stripped: no symbol table, no debug info; the dynamic symbols Python needs remain.
    sections = elf_sections(module)
    assert {".text", ".dynsym", ".dynstr"} <= sections
    assert ".symtab" not in sections
    assert not any(name.startswith(".debug") for name in sections), sections
    assert b"PyInit__core" in module


def elf_sections(elf: bytes) -> set[str]:
    """The section names of a 64-bit little-endian ELF file."""
    assert elf[:6] == b"\x7fELF\x02\x01", "not a 64-bit little-endian ELF file"
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)

    def header(i: int) -> tuple[int, int]:
        """(name offset, file offset) of section i."""
        at = shoff + i * entsize
        (name,) = struct.unpack_from("<I", elf, at)
        (offset,) = struct.unpack_from("<Q", elf, at + 0x18)
        return name, offset

    strings = header(names_index)[1]
    names = set()
    for i in range(1, count):
        start = strings + header(i)[0]
        names.add(elf[start : elf.index(b"\0", start)].decode())
    return names


def test_the_install_found_no_rust_and_imports_the_venvs_copy(venv: Path) -> None:
    out = run(venv, "python", "-c", "import beanpole._core as c; print(c.__file__)")
    assert Path(out.strip()).is_relative_to(venv)
    env = venv_env(venv)
    assert "/.cargo/" not in env["PATH"]


def test_one_version_everywhere(venv: Path, wheel: Path) -> None:
    version = cargo_version()
    assert run(venv, "beanpole", "--version") == f"beanpole {version}\n"
    out = run(
        venv,
        "python",
        "-c",
        "import importlib.metadata as m, beanpole\n"
        "print(beanpole.__version__, m.version('beanpole'))",
    )
    assert out.split() == [version, version]
    assert f"-{version}-" in wheel.name


def test_beanpole_serve_answers_greenstalk(venv: Path) -> None:
    proc = subprocess.Popen(
        [str(venv / "bin/beanpole"), "serve", "-p", "0"],
        env=venv_env(venv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        match = Lines(proc.stderr).wait(LISTENING)
        # The start line names the same version.
        assert match.group(1) == cargo_version()
        port = int(match.group(2))
        with greenstalk.Client(("127.0.0.1", port), use="wheel", watch="wheel") as client:
            job_id = client.put("from the wheel")
            job = client.reserve(timeout=5)
            assert (job.id, job.body) == (job_id, "from the wheel")
            client.delete(job)
            stats = client.stats()
            assert stats["pid"] == proc.pid
            assert stats["total-jobs"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)


EMBEDDED = """
import os, sys
import beanpole
with beanpole.Server(port=0) as srv:
    print(srv.port, flush=True)
    sys.stdin.readline()
"""


def test_an_embedded_server_and_beanpole_stats(venv: Path) -> None:
    proc = subprocess.Popen(
        [str(venv / "bin/python"), "-c", EMBEDDED],
        env=venv_env(venv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(Lines(proc.stdout).wait(re.compile(r"^(\d+)$")).group(1))
        with greenstalk.Client(("127.0.0.1", port)) as client:
            client.put("one")
            client.put("two")
        out = run(venv, "beanpole", "stats", "-H", f"127.0.0.1:{port}", "--format", "json")
        stats = json.loads(out)
        assert stats["pid"] == proc.pid
        assert stats["current-jobs-ready"] == 2
        table = run(venv, "beanpole", "stats", "-H", f"127.0.0.1:{port}")
        assert "current-jobs-ready" in table
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)


SPARK_IMPORT = """
import beanpole, beanpole._core, beanpole.spark
print(beanpole.__file__)
print(beanpole._core.__file__)
print(*(cls.name() for cls in beanpole.spark.source_classes()))
print(beanpole.spark.ack.__module__)
"""


def test_the_spark_extra_imports(wheel: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    venv = tmp_path / "spark-venv"
    make_venv(venv, system_site_packages=True)
    pip_install(venv, "--no-deps", str(wheel))
    package, module, sources, ack = run(venv, "python", "-c", SPARK_IMPORT).splitlines()
    assert Path(package).is_relative_to(venv)
    assert Path(module).is_relative_to(venv)
    assert sources.split() == ["beanpole-binlog", "beanpole"]
    assert ack == "beanpole.spark.ack_rows"
