#!/usr/bin/env python3
"""Write-ahead log figures: beanpole against Debian's beanstalkd, both logging with ``-b``.

Run as ``python bench/compare.py --suite log`` (or ``python bench/log_bench.py``). It shares
the main suite's servers, load generator and summaries (launch.py, runner.py, summaries.py),
alternates the servers run by run (A B A B …), gives every run a fresh log directory under
/tmp, and writes the "Write-ahead log" section of ``bench/README.md`` between markers that
the main suite keeps.

    python bench/compare.py --suite log            # 5 pairs, 1,000,000 jobs for the restart
    python bench/compare.py --suite log --quick    # 2 short pairs, 200,000 jobs
    python bench/compare.py --suite log --only f0 --pairs 3

What is measured (issue 3, "Figures"):

- ``f0``: put throughput with ``-f 0`` (every change on disk before its reply) at 1, 10
  and 100 connections, pipeline 1, 100-byte bodies; also beanpole without a log under the
  same loads, the bound of its ``-f 0`` rate;
- ``f50``: put throughput with ``-f 50`` against the same server without a log;
- ``restart``: fill a server with 1,000,000 ready 100-byte jobs (pipelined puts), stop it,
  and time a fresh process on the same directory from its start to its first reply to
  ``stats`` (which must count every job); also the directory's size on disk.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from launch import Server, nofile_limit, start_server
from log_settings import (
    CONNECTIONS,
    F50_LOADS,
    FILL,
    FILL_RUNS,
    STATS_TIMEOUT,
    Meta,
    Settings,
    put_args,
)
from main_report import sh
from runner import Run, build_bench, describe_problem, progress, result_text, run_bench
from scenarios import KINDS, ROOT

# -- servers with a log ----------------------------------------------------------------------


def log_flags(log_dir: Path | None, fsync: str) -> list[str]:
    """``-b DIR -f MS`` (the same flags for both servers); no log without a directory."""
    return [] if log_dir is None else ["-b", str(log_dir), "-f", fsync]


def fresh_dir(s: Settings, kind: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"logbench-{kind}-", dir=s.tmp))


def dir_size(path: Path) -> tuple[int, int]:
    """(bytes on disk as ``du`` counts them: st_blocks * 512, apparent bytes: st_size)."""
    disk = apparent = 0
    for entry in os.scandir(path):
        st = entry.stat(follow_symlinks=False)
        disk += st.st_blocks * 512
        apparent += st.st_size
    return disk, apparent


def stats(port: int, timeout: float = STATS_TIMEOUT) -> dict[str, str]:
    """One ``stats`` round trip on a new connection, parsed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"stats\r\n")
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError(f"connection closed before the stats reply: {buf!r}")
            buf += chunk
        head, rest = buf.split(b"\r\n", 1)
        if not head.startswith(b"OK "):
            raise RuntimeError(f"stats answered {head!r}")
        size = int(head[3:])
        while len(rest) < size + 2:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed inside the stats reply")
            rest += chunk
    out: dict[str, str] = {}
    for line in rest[:size].decode().splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def timed_start(kind: str, flags: Sequence[str], nofile: int) -> tuple[Server, float, float]:
    """Start a server and wait for its first ``stats`` reply: (server, seconds to that reply,
    seconds to the listening line (beanpole) or to the process's creation (beanstalkd)).

    Nothing polls or sleeps: beanpole replays its log before it binds and prints
    ``listening on``; beanstalkd gets a socket that is already listening, so the
    connection is queued at once and answered once its replay is over.
    """
    t0 = time.monotonic()
    server = start_server(kind, flags, nofile)
    t_up = time.monotonic() - t0
    try:
        stats(server.port)
    except BaseException:
        server.stop()
        raise
    return server, time.monotonic() - t0, t_up


# -- runs ------------------------------------------------------------------------------------


def put_run(
    key: str,
    kind: str,
    pair: int,
    s: Settings,
    bench: Path,
    nofile: int,
    load: Sequence[str],
    fsync: str | None,
) -> Run:
    """Puts for ``s.duration`` seconds (or ``--jobs`` in ``load``); ``fsync`` None runs the
    server without a log."""
    log_dir = None if fsync is None else fresh_dir(s, kind)
    try:
        server = start_server(kind, log_flags(log_dir, fsync or ""), nofile)
        try:
            code, result, err = run_bench(bench, put_args(load, s), server)
            ok = code == 0 and result is not None
            problem = "" if ok else describe_problem(code, err, server)
        finally:
            server.stop()
    finally:
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)
    return Run(key, kind, pair, result, code, problem)


def restart_run(kind: str, pair: int, s: Settings, bench: Path, nofile: int) -> Run:
    """Start on an empty directory, fill it with ``s.jobs`` ready jobs, stop (beanpole:
    SIGTERM, beanstalkd: SIGKILL; every put was acknowledged, so written), restart on the
    same directory and time it, and check the job count."""
    log_dir = fresh_dir(s, kind)
    flags = log_flags(log_dir, "50")
    extra: dict[str, float] = {}
    problems: list[str] = []
    notes: list[str] = []  # errors the run survived (listed, the run still counts)
    try:
        server, extra["start_empty_s"], _ = timed_start(kind, flags, nofile)
        try:
            extra["fill_ops_per_s"], ready, notes = fill(server, s, bench)
            if ready != s.jobs:
                problems.append(f"the fill left current-jobs-ready at {ready:,}, not {s.jobs:,}")
        finally:
            t0 = time.monotonic()
            server.stop()
            extra["stop_s"] = time.monotonic() - t0
            if server.proc.returncode not in (0, -15, -9):
                problems.append(f"{kind} exited with status {server.proc.returncode} on stop")
        if not problems:
            extra["disk_stopped"], extra["apparent_stopped"] = dir_size(log_dir)
            server, extra["restart_s"], extra["restart_up_s"] = timed_start(kind, flags, nofile)
            try:
                after = stats(server.port)
                extra["disk_restarted"], extra["apparent_restarted"] = dir_size(log_dir)
                ready = int(after.get("current-jobs-ready", -1))
                extra["jobs_after"] = ready
                others = {
                    k: after.get(f"current-jobs-{k}")
                    for k in ("reserved", "delayed", "buried")
                    if after.get(f"current-jobs-{k}") != "0"
                }
                if ready != s.jobs or others:
                    problems.append(
                        f"lost jobs: {s.jobs:,} ready before the restart, after it "
                        f"current-jobs-ready {ready:,}" + (f", and {others}" if others else "")
                    )
            finally:
                server.stop()
    except (RuntimeError, OSError) as err:
        problems.append(f"{type(err).__name__}: {err}")
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    ok = not problems and "restart_s" in extra
    return Run(
        "restart",
        kind,
        pair,
        {} if ok else None,
        0 if ok else 1,
        "; ".join(problems + notes),
        extra,
    )


def fill(server: Server, s: Settings, bench: Path) -> tuple[float, int, list[str]]:
    """Put ``s.jobs`` ready jobs. Should the load generator stop on an error (it stops at
    the first one), the jobs still missing are put by a new run, at most FILL_RUNS runs in
    all, and the error is returned. Returns (puts/s over the whole fill, the jobs ready,
    the errors)."""
    notes: list[str] = []
    ready = 0
    t0 = time.monotonic()
    for _ in range(FILL_RUNS):
        args = ["put", "--jobs", str(s.jobs - ready), *FILL]
        code, result, err = run_bench(bench, args, server)
        ready = int(stats(server.port).get("current-jobs-ready", -1))
        if code != 0 or result is None:
            why = describe_problem(code, err, server)
            notes.append(f"the fill stopped at {ready:,} ready jobs and was resumed: {why}")
        if ready >= s.jobs or ready < 0:
            break
    return ready / (time.monotonic() - t0), ready, notes


@dataclass(frozen=True)
class Step:
    key: str
    kind: str
    pair: int
    go: Callable[[], Run]


def plan(keys: Sequence[str], s: Settings, bench: Path, nofile: int) -> list[Step]:
    """The runs in the order they are made: per figure, pair by pair, A then B."""
    steps: list[Step] = []

    def put(key: str, kind: str, pair: int, load: Sequence[str], fsync: str | None) -> None:
        go = partial(put_run, key, kind, pair, s, bench, nofile, load, fsync)
        steps.append(Step(key, kind, pair, go))

    for key in keys:
        for pair in range(s.pairs):
            if key == "f0":
                for n in s.connections:
                    load = ("--connections", str(n), "--pipeline", "1")
                    for kind in KINDS:
                        put(f"f0-c{n}", kind, pair, load, "0")
                    # beanpole without a log under the same load: the rate -f 0 can at
                    # most reach (group commit makes up for the fsyncs, not for the rest).
                    put(f"f0nolog-c{n}", KINDS[0], pair, load, None)
            elif key == "f50":
                for ld in F50_LOADS:
                    # Within a pair, log and no log swap order every other pair.
                    order: list[str | None] = ["50", None] if pair % 2 == 0 else [None, "50"]
                    for kind in KINDS:
                        for fsync in order:
                            k = f"{'f50' if fsync else 'nolog'}-{ld.key}"
                            put(k, kind, pair, ld.bench_args(s), fsync)
            else:
                for kind in KINDS:
                    go = partial(restart_run, kind, pair, s, bench, nofile)
                    steps.append(Step("restart", kind, pair, go))
    return steps


# -- main ------------------------------------------------------------------------------------

KEYS = ("f0", "f50", "restart")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="compare.py --suite log",
        description="Write-ahead log figures: beanpole against beanstalkd, both with -b.",
    )
    p.add_argument("--pairs", type=int, help="A/B pairs per figure [5; --quick: 2]")
    p.add_argument("--quick", action="store_true", help="short runs for a fast look")
    p.add_argument(
        "--only",
        nargs="+",
        choices=KEYS,
        metavar="NAME",
        help=f"figures to measure, of: {' '.join(KEYS)}",
    )
    p.add_argument("--duration", type=float, help="seconds per put run [5; --quick: 1]")
    p.add_argument("--jobs", type=int, help="ready jobs for the restart [1000000; --quick: 200000]")
    p.add_argument(
        "--connections",
        type=int,
        nargs="+",
        default=list(CONNECTIONS),
        metavar="N",
        help="connection counts for -f 0 [1 10 100]",
    )
    p.add_argument("--tmp", type=Path, default=Path("/tmp"), help="where log directories go")
    p.add_argument("--bench", type=Path, help="the beanpole-bench binary [built with cargo]")
    p.add_argument("--no-build", action="store_true", help="do not run cargo build")
    p.add_argument("--readme", type=Path, default=ROOT / "bench" / "README.md")
    p.add_argument("--raw", type=Path, help="also write every run's result as JSON lines")
    p.add_argument(
        "--from-raw",
        type=Path,
        metavar="RAW",
        help="measure nothing: write the section from the runs of an earlier --raw file "
        "(give the same --pairs, --jobs, ... as that run)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from log_report import section, splice

    args = parse_args(argv)
    mode = "quick" if args.quick else "full"
    s = Settings(
        mode=mode,
        pairs=args.pairs or (2 if args.quick else 5),
        duration=args.duration or (1.0 if args.quick else 5.0),
        jobs=args.jobs or (200_000 if args.quick else 1_000_000),
        connections=tuple(args.connections),
        tmp=args.tmp,
    )
    keys = [k for k in KEYS if args.only is None or k in args.only]
    nofile = nofile_limit()
    if args.from_raw:
        bench = args.bench or ROOT / "target" / "release" / "beanpole-bench"
        runs, meta = read_raw(args.from_raw)
    else:
        bench = args.bench if args.bench is not None else build_bench(args.no_build)
        if not bench.exists():
            sys.exit(f"log_bench: {bench} does not exist")
        runs, meta = measure(keys, s, bench, nofile, args.raw)
    block = section(runs, keys, s, bench, nofile, meta)
    old = args.readme.read_text() if args.readme.exists() else "# beanpole against beanstalkd\n"
    args.readme.write_text(splice(old, block))
    print(f"log_bench: wrote the log section of {args.readme}", file=sys.stderr)
    return 0 if all(r.ok for r in runs) else 1


def fsync_probe(tmp: Path, n: int = 50) -> float:
    """Median ms of an fsync after appending 128 bytes to a file preallocated with
    posix_fallocate, as beanstalkd does with every record at ``-f 0`` (its rate there is
    about one over this)."""
    fd, name = tempfile.mkstemp(prefix="logbench-probe-", dir=tmp)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        os.fsync(fd)
        times = []
        for i in range(n):
            os.pwrite(fd, b"x" * 128, i * 128)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    finally:
        os.close(fd)
        os.unlink(name)


def measure(
    keys: Sequence[str], s: Settings, bench: Path, nofile: int, raw_path: Path | None
) -> tuple[list[Run], Meta]:
    """Every run of the plan, in order; each is also written to ``raw_path`` as it ends."""
    started = time.monotonic()
    commit = sh(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    meta = Meta(time.strftime("%Y-%m-%d %H:%M %Z"), commit, fsync_ms=[fsync_probe(s.tmp)])
    runs: list[Run] = []
    steps = plan(keys, s, bench, nofile)
    raw = raw_path.open("w") if raw_path else None
    try:
        for n, step in enumerate(steps, 1):
            try:
                run = step.go()
            except (RuntimeError, OSError) as err:
                problem = f"{type(err).__name__}: {err}"
                run = Run(step.key, step.kind, step.pair, None, -1, problem)
            runs.append(run)
            report(run, n, len(steps))
            if raw:
                fields = ("scenario", "kind", "pair", "code", "result", "extra", "problem")
                raw.write(json.dumps({k: getattr(run, k) for k in fields}) + "\n")
                raw.flush()
        meta.fsync_ms.append(fsync_probe(s.tmp))
        meta.took = time.monotonic() - started
        if raw:
            raw.write(json.dumps(dataclasses.asdict(meta)) + "\n")
    finally:
        if raw:
            raw.close()
    return runs, meta


def read_raw(path: Path) -> tuple[list[Run], Meta]:
    """The runs of an earlier ``--raw`` file (to rewrite the section without measuring)."""
    runs: list[Run] = []
    meta = Meta(time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(path.stat().st_mtime)))
    for line in path.read_text().splitlines():
        d = json.loads(line)
        if "took" in d:
            d["when"] = d.get("when", meta.when)
            meta = Meta(**d)
            continue
        fields = ("scenario", "kind", "pair", "result", "code", "problem", "extra")
        runs.append(Run(*(d[k] for k in fields)))
    return runs, meta


def report(run: Run, n: int, total: int) -> None:
    if run.scenario == "restart":
        e = run.extra
        text = (
            f"restart {e.get('restart_s', float('nan')):.3f} s, "
            f"fill {e.get('fill_ops_per_s', float('nan')):,.0f}/s, "
            f"disk {e.get('disk_stopped', float('nan')) / 1e6:,.1f} MB"
        )
    else:
        text = result_text(run, "puts/s")
    progress(run, n, total, text)


if __name__ == "__main__":
    sys.exit(main())
