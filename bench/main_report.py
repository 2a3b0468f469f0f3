"""The main suite's report: bench/README.md (tables, method, machine, commands) and the chart."""

from __future__ import annotations

import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from launch import beanpole_command, beanstalkd_command
from runner import Run, bench_command
from scenarios import (
    BIG_JOB,
    IDLE_CONNECTIONS,
    KINDS,
    MEMORY_JOBS,
    MEMORY_TARGET,
    ROOT,
    SCENARIOS,
    A,
    B,
)
from summaries import fmt, fmt_ratio, medians, pair_ratio, verdict


def sh(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def machine() -> list[tuple[str, str]]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        if m:
            mem = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    try:
        from beanpole import __version__ as bp_version
    except ImportError:
        bp_version = "?"
    commit = sh(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    return [
        ("cores (`nproc`)", sh(["nproc"])),
        ("CPU", cpu),
        ("memory", mem),
        ("kernel", platform.release()),
        ("beanstalkd", sh(["beanstalkd", "-v"])),
        ("beanpole", f"{bp_version} (git {commit})"),
        ("rustc", sh(["rustc", "--version"])),
        ("python", platform.python_version()),
    ]


METHOD = """\
**Servers.** Every run gets a fresh server process on 127.0.0.1: beanpole as
`python -m beanpole serve -l 127.0.0.1 -p 0` (the run starts once it prints its
`listening on` line), Debian's beanstalkd with a socket that is already bound and
listening, handed over by systemd socket activation (`LISTEN_FDS=1`, fd 3), with
`ulimit -n` raised. Both keep their default settings, except a 64 KiB max job size
(`-z {big}`) for both in the `big` scenario. Neither is given a log directory (`-b`),
so neither writes to disk.

**Order.** For each scenario the servers alternate run by run, beanpole then beanstalkd
(A B A B …), {pairs} pairs. Absolute figures move with the load on this shared machine
(up to 2x between runs), so the figures that count are the **per-pair ratios**
beanpole / beanstalkd, summarised by their median; the tables also give the median of
each server's own runs.

**Load generator.** `beanpole-bench` (rust/bench) is a small Rust program with one client
thread running a current-thread tokio runtime: on these 2 cores that cost the least client
CPU per operation (rt 10 + 10, pipeline 16, against beanpole: 2.0 µs per job, against 2.4
with two such threads, 2.4 with a multi-thread runtime of one worker and 3.3 of two;
against beanstalkd 19.6, 22.5, 22.3 and 24.8 µs); `--threads` and `--runtime` change it.
With `--pipeline N` each connection writes N commands in one write, then reads the N
replies; replies are parsed in place from a reused buffer, with no allocation per command.
Every reply is checked against the command it answers (INSERTED with ids increasing per
connection, USING, WATCHING counts, RESERVED, DELETED, TIMED_OUT only where a drain
expects it). Bodies are self-describing: a header with the job's number, its send time and
a checksum, then a pattern chosen by the job number, padded to the body size; every
reserved body is verified, the id a job was reserved under must be the id its put got, and
no job may be reserved twice. Any error makes the run exit non-zero; such runs are listed
under *Problems* and left out of the medians.

**What an operation is.** `put`: an acknowledged put; latency is each put's round trip.
`reserve-delete`: a job reserved and deleted, from a queue pre-filled (not measured) with
the given number of jobs, until `reserve-with-timeout 0` finds it empty; latency is each
command's round trip (reserves and deletes alike). `rt`, `many-tubes`, `big`: a job
delivered (RESERVED) while producers and consumers run at once; consumers `reserve`
(blocking), then delete the batch; producers keep at most 2 x (producers + consumers) x
pipeline jobs put and not yet reserved, so the queue stays short and memory bounded; their
latency is end-to-end, from the put being written to RESERVED being read (it includes the
time a job waits in that short queue). In `many-tubes` every put is preceded by `use tI`,
I = job number mod K (also for K = 1, so both rows send the same commands), and consumers
watch all K tubes.
`storm`: one whole connection (connect, `use`, `put`, `quit`, the server closes); latency
is the whole cycle. `delayed`: lateness of RESERVED past the due time (send time + delay);
a job delivered before it is due is an error.

**Latency** percentiles come from a log-linear histogram (0.4 % resolution, fixed memory)
merged over all connections. **CPU**: the server's user + system time from
`/proc/PID/stat` (10 ms ticks) over the measured phase, divided by the operations; for
beanpole that is the whole `python -m beanpole serve` process (an idle interpreter plus
the Rust runtime). The client's from `getrusage`. Client and server share the 2 cores:
once (client + server CPU per operation) x ops/s nears 2 s per second the machine, not
the server, sets ops/s, so **server CPU per operation** is the steadier comparison.

**Memory.** Bytes per job: the server's RSS (`VmRSS` in `/proc/PID/status`) after
putting {jobs:,} ready 100-byte jobs (4 connections, pipeline 64), minus its RSS
before, divided by the jobs, minus the 100-byte body. Bytes per idle connection: the RSS
increase after opening {conns:,} connections that each answered one command
(`list-tube-used`) and stay open.
"""


def write_report(
    path: Path,
    chart: Path | None,
    runs: Sequence[Run],
    keys: Sequence[str],
    mode: str,
    pairs: int,
    bench: Path,
    elapsed: float,
    nofile: int,
) -> None:
    scen = {s.key: s for s in SCENARIOS}
    out: list[str] = []
    w = out.append
    w("# beanpole against beanstalkd")
    w("")
    w("<!-- Generated by bench/compare.py: change the generator, not this file. -->")
    w("")
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    quick = " — **quick mode: short runs, a fast look, not the figures that count**"
    w(
        f"Run of {when}: {pairs} pairs per scenario{quick if mode == 'quick' else ''}; "
        f"the whole run took {elapsed / 60:.1f} min. Ratios are beanpole / beanstalkd "
        "(median of the per-pair ratios)."
    )
    w("")

    w("## Targets (issue 4)")
    w("")
    w("| scenario | target | ratio | |")
    w("| --- | --- | --- | --- |")
    for key in keys:
        if key == "memory":
            r = pair_ratio(runs, "memory", "bytes_per_job")
            w(
                f"| memory, {MEMORY_JOBS[mode]:,} ready jobs | {MEMORY_TARGET.text()} | "
                f"{fmt_ratio(r)} | {verdict(MEMORY_TARGET.met(r))} |"
            )
            continue
        sc = scen[key]
        for t in sc.targets:
            r = pair_ratio(runs, key, t.metric)
            w(f"| {sc.title} | {t.text()} | {fmt_ratio(r)} | {verdict(t.met(r))} |")
        if key == "tubes1000" and "tubes1" in keys:
            own = {k: _own_ratio(runs, k) for k in KINDS}
            mine = own[A]
            ok = None if mine is None else mine >= 0.8
            w(
                f"| many-tubes, 1000 tubes vs 1 | beanpole keeps ≥ 0.8 of its 1-tube rate | "
                f"beanpole {fmt(own[A], 2)}, beanstalkd {fmt(own[B], 2)} | {verdict(ok)} |"
            )
    w("")
    w(
        "For the targets not met, the profiles that show where the time goes and what "
        "would move it are in [profiles.md](profiles.md) (written by hand)."
    )
    w("")

    w("## Results")
    w("")
    w("Medians of each server's runs; the ratio row is the median of the per-pair ratios.")
    w("")
    w(
        "| scenario | server | ops/s | p50 µs | p99 µs | server CPU µs/op | client CPU µs/op "
        "| good runs |"
    )
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in keys:
        if key == "memory":
            continue
        sc = scen[key]
        for kind in KINDS:
            good = sum(1 for r in runs if r.scenario == key and r.kind == kind and r.ok)
            total = sum(1 for r in runs if r.scenario == key and r.kind == kind)
            w(
                f"| {sc.title} ({sc.unit}) | {kind} "
                f"| {fmt(medians(runs, key, kind, 'ops_per_s'))} "
                f"| {fmt(medians(runs, key, kind, 'p50_us'), 1)} "
                f"| {fmt(medians(runs, key, kind, 'p99_us'), 1)} "
                f"| {fmt(medians(runs, key, kind, 'server_cpu_us_per_op'), 1)} "
                f"| {fmt(medians(runs, key, kind, 'client_cpu_us_per_op'), 1)} "
                f"| {good}/{total} |"
            )
        w(
            f"| | *ratio* | {fmt_ratio(pair_ratio(runs, key, 'ops_per_s'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'p50_us'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'p99_us'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'server_cpu_us_per_op'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'client_cpu_us_per_op'))} | |"
        )
    w("")

    if "memory" in keys:
        w("## Memory")
        w("")
        w("| | beanpole | beanstalkd | ratio |")
        w("| --- | ---: | ---: | ---: |")
        rows = [
            (
                f"bytes per job beyond its body ({MEMORY_JOBS[mode]:,} ready 100-byte jobs)",
                "bytes_per_job",
                0,
            ),
            (f"RSS with {MEMORY_JOBS[mode]:,} ready jobs (MB)", "rss_jobs_mb", 1),
            ("RSS of the fresh server (MB)", "rss_idle_mb", 1),
            (
                f"bytes per idle connection ({IDLE_CONNECTIONS[mode]:,} connections)",
                "bytes_per_conn",
                0,
            ),
        ]
        for label, metric, digits in rows:
            w(
                f"| {label} | {fmt(medians(runs, 'memory', A, metric), digits)} "
                f"| {fmt(medians(runs, 'memory', B, metric), digits)} "
                f"| {fmt_ratio(pair_ratio(runs, 'memory', metric))} |"
            )
        w("")

    if chart is not None:
        w(f"![ops/s and p99 latency by scenario]({chart.name})")
        w("")

    w("## Method")
    w("")
    w(METHOD.format(big=BIG_JOB, pairs=pairs, jobs=MEMORY_JOBS[mode], conns=IDLE_CONNECTIONS[mode]))
    w("## Machine")
    w("")
    w("| | |")
    w("| --- | --- |")
    for k, v in machine():
        w(f"| {k} | {v} |")
    w("")

    w("## Exact commands")
    w("")
    w("```sh")
    w(f"python bench/compare.py {'--quick ' if mode == 'quick' else ''}--pairs {pairs}")
    w("# servers (a fresh one per run)")
    w(shlex.join(["python", *beanpole_command(["-z", BIG_JOB])[1:]]) + "   # -z: big only")
    stalk = shlex.join(beanstalkd_command("beanstalkd", 0, ["-z", BIG_JOB], nofile))
    w(stalk.replace("-p 0", "-p PORT") + "   # -z: big only; socket on fd 3 (TCP_NODELAY)")
    w("# load (PORT and PID of that server)")
    rel = bench.relative_to(ROOT) if bench.is_relative_to(ROOT) else bench
    for key in keys:
        if key == "memory":
            w(
                f"{rel} put --jobs {MEMORY_JOBS[mode]} --connections 4 --pipeline 64 "
                "--body-size 100 --host 127.0.0.1 --port PORT --server-pid PID"
            )
            w(
                f"{rel} idle --connections {IDLE_CONNECTIONS[mode]} --hold 120 "
                "--host 127.0.0.1 --port PORT --server-pid PID"
            )
            continue
        sc = scen[key]
        args = [*sc.args, *(sc.full if mode == "full" else sc.quick)]
        w(" ".join([str(rel), *bench_command(bench, args, None)[1:]]))
    w("```")
    w("")

    problems = [r for r in runs if not r.ok]
    w("## Problems")
    w("")
    if not problems:
        w("None: every run exited 0 with every reply and body as expected.")
    for bad in problems:
        w(f"- {bad.scenario}, pair {bad.pair + 1}, {bad.kind}: {bad.problem or f'exit {bad.code}'}")
    w("")
    # The write-ahead log section is the log suite's (bench/log_bench.py): keep it.
    from log_report import kept_block

    kept = kept_block(path.read_text()) if path.exists() else ""
    path.write_text("\n".join(out) + ("\n" + kept if kept else ""))


def _own_ratio(runs: Sequence[Run], kind: str) -> float | None:
    many = medians(runs, "tubes1000", kind, "ops_per_s")
    one = medians(runs, "tubes1", kind, "ops_per_s")
    return None if many is None or not one else many / one


def write_chart(path: Path, runs: Sequence[Run], keys: Sequence[str]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: no chart: matplotlib is missing (pip install matplotlib)", file=sys.stderr)
        return False
    # delayed's rate is fixed by the load, so its throughput says nothing: tables only.
    shown = [k for k in keys if k not in ("memory", "delayed")]
    if not shown:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    width = 0.4
    colors = {A: "#2a7ab9", B: "#c8553d"}
    xs = list(range(len(shown)))
    for ax, metric, title in (
        (axes[0], "ops_per_s", "throughput (ops/s, median; log scale)"),
        (axes[1], "p99_us", "p99 latency (µs, median; log scale)"),
    ):
        for i, kind in enumerate(KINDS):
            vals = [medians(runs, k, kind, metric) or 0.0 for k in shown]
            pos = [x + (i - 0.5) * width for x in xs]
            ax.bar(pos, vals, width, label=kind, color=colors[kind])
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels(shown, rotation=30, ha="right")
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("beanpole vs beanstalkd, same machine, alternating runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
