#!/usr/bin/env python3
"""Write beanstalkd binlog directories for the importer's tests.

For each case this starts the real beanstalkd (Debian's 1.12 here) with ``-b`` on a fresh
temporary directory, drives it over a raw socket, stops it with SIGKILL (SIGTERM for one
case; beanstalkd 1.12 does not catch either, so both leave the files as they are), and
copies the ``binlog.N`` files to ``tests/data/beanstalkd-binlog/<case>/``, next to an
``expected.json`` that ``rust/engine/tests/import.rs`` compares the reader's output with.

The expectation is what beanstalkd put on disk, which is not always the server's state at
the end: beanstalkd journals puts, deletes, buries, kicks and releases with a delay, and
writes the whole job struct each time, but it does not journal reserves, touches, releases
with delay 0 or timeouts. So after every command the generator reads ``stats``: when
``binlog-records-written`` went up, the command was journaled and the jobs it touched are
snapshotted with ``stats-job`` (the struct on disk is the struct in memory at that moment).
Each command states which jobs it expects to be journaled, and a mismatch stops the run.
When ``binlog-records-migrated`` went up, compaction copied jobs into the current file;
``stats-job``'s ``file`` field tells which, and they are snapshotted too.

Usage: python3 tests/data/make_beanstalkd_binlogs.py [--out DIR] [--beanstalkd PATH] [CASE...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from binlog_cases import CASES
from binlog_journal import Meta
from binlog_server import Server, binlog_files

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "beanstalkd-binlog"


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="beanstalkd-binlog-") as tmp:
        d = Path(tmp) / "binlog"
        d.mkdir()
        yield d


def beanstalkd_version(exe: str) -> str:
    out = subprocess.run([exe, "-v"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def generate(name: str, exe: str, out: Path) -> dict[str, object]:
    meta = Meta()
    with scratch() as d:
        try:
            rec = CASES[name](exe, d, meta)
        finally:
            for server in Server.started:
                server.stop()
            Server.started.clear()
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        files = binlog_files(d)
        for p in files:
            shutil.copyfile(p, target / p.name)
            (target / p.name).chmod(0o644)
    expected = rec.expected(name, meta.args, meta.stop, [p.name for p in files])
    expected["beanstalkd"] = beanstalkd_version(exe)
    expected["torn"] = meta.torn
    expected.update(meta.extra)
    (target / "expected.json").write_text(to_json(expected))
    return expected


def to_json(doc: dict[str, object]) -> str:
    """JSON with one key, and one job, per line."""
    rows = []
    for key, value in doc.items():
        if key == "jobs" and isinstance(value, list) and value:
            jobs = ",\n  ".join(json.dumps(j, separators=(",", ":")) for j in value)
            rows.append(f'"{key}": [\n  {jobs}\n ]')
        else:
            rows.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n " + ",\n ".join(rows) + "\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"default: all of {', '.join(CASES)}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--beanstalkd", default=shutil.which("beanstalkd"))
    opts = parser.parse_args()
    if not opts.beanstalkd:
        print("beanstalkd is not installed (apt-get install beanstalkd)", file=sys.stderr)
        return 1
    unknown = [name for name in opts.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; cases: {', '.join(CASES)}")
    for name in opts.cases or list(CASES):
        exp = generate(name, opts.beanstalkd, opts.out)
        size = sum(p.stat().st_size for p in (opts.out / name).glob("binlog.*"))
        print(f"{name}: {size} bytes of binlog, {_summary(exp)}")
    return 0


def _summary(exp: dict[str, object]) -> str:
    jobs, files = exp["jobs"], exp["files"]
    assert isinstance(jobs, list) and isinstance(files, list)
    return (
        f"{len(files)} files, {len(jobs)} live jobs, max id {exp['max_id_min']}, "
        f"migrations {exp['migrations']}, torn {exp['torn']}"
    )


if __name__ == "__main__":
    sys.exit(main())
