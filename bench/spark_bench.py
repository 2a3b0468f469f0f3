#!/usr/bin/env python3
"""Spark figures (issue 13), in one run on a local[2] session.

    python bench/spark_bench.py                  # 1,000,000 jobs, 5 warm runs
    python bench/spark_bench.py --jobs 200000 --runs 3
    python bench/spark_bench.py --smoke          # tiny, for tests/spark (no figures)

What is measured:

- ``binlog``: the log reader (format ``beanpole-binlog``) over a log of N ready jobs with
  100-byte bodies, put by pipelined clients into an embedded server that is then
  stopped; every row goes through a ``noop`` sink, so the rows are read in the
  executors and none travel to the driver. Jobs mode and records mode.
- ``writer``: N rows of 100-byte bodies written into one embedded server, three ways
  side by side: ``df.write.format("beanpole")``; greenstalk ``put`` per row in
  ``foreachPartition`` (what people write today); and a hand-pipelined socket loop in
  ``foreachPartition`` (10,000 puts written before their replies are read). Each run
  gets a fresh server, and every run checks the server holds exactly N jobs. Beside
  them Spark's floor: the same rows into a Python Arrow writer that keeps nothing.
  Where the time goes: the CPU seconds each part of the process tree spent per run
  (``bench/cpu_tree.py``: this driver with the embedded server's threads, the JVM,
  the JVM's Python workers), for beanpole and the floor.
- ``stream``: the streaming reader (format ``beanpole`` on ``readStream``) over N ready
  jobs of 100 bytes in one embedded server, availableNow, ``--stream-batch`` jobs per
  micro-batch (``maxRowsPerTrigger``), into a ``noop`` sink; every job is deleted once
  its batch is in the sink, and the run checks that the tube is empty afterwards. The
  time is from ``start()`` to the end of the query (query start included); the jobs
  are put again before each run, outside the time. Beside it, the CPU seconds each part
  of the process tree spent per run, which a busy machine disturbs far less than the
  wall time: the measure to compare two builds of the reader with.

The JVM start (``getOrCreate``) and the first query (Spark starts its Python
workers then) are reported apart from the warm runs; figures are medians of the
warm runs. Needs ``pip install "beanpole[spark]"`` and a Java runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import beanpole

PUT_CHUNK = 10_000  # puts written before their replies are read


def session() -> tuple[Any, float]:
    """The local session (created if there is none) and the seconds it took."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import beanpole.spark

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("beanpole-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    beanpole.spark.register(spark)
    return spark, time.perf_counter() - started


def fill_log(log: Path, jobs: int, body_size: int) -> float:
    """Put ``jobs`` ready jobs into a server logging to ``log``, pipelined; seconds."""
    body = b"b" * body_size
    command = b"put 0 0 60 %d\r\n%s\r\n" % (body_size, body)
    started = time.perf_counter()
    with beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(log), no_fsync=True) as srv:
        address = srv.address
        assert isinstance(address, tuple)
        with socket.create_connection(address) as sock:
            left = jobs
            while left:
                n = min(left, PUT_CHUNK)
                sock.sendall(command * n)
                replies = b""
                while replies.count(b"\r\n") < n:
                    chunk = sock.recv(1 << 20)
                    if not chunk:
                        raise RuntimeError("the server closed the connection")
                    replies += chunk
                if not all(r.startswith(b"INSERTED ") for r in replies.split(b"\r\n")[:-1]):
                    raise RuntimeError(f"a put failed: {replies[:200]!r}")
                left -= n
    return time.perf_counter() - started


def timed_read(spark: Any, log: Path, records: bool) -> float:
    reader = spark.read.format("beanpole-binlog")
    if records:
        reader = reader.option("records", "true")
    started = time.perf_counter()
    reader.load(str(log)).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def count(spark: Any, log: Path, records: bool) -> int:
    reader = spark.read.format("beanpole-binlog")
    if records:
        reader = reader.option("records", "true")
    return int(reader.load(str(log)).count())


def binlog_figure(spark: Any, jobs: int, runs: int, body_size: int) -> dict[str, Any]:
    """The log reader's figure: rows per second, jobs mode and records mode."""
    with tempfile.TemporaryDirectory(prefix="beanpole-spark-bench-") as tmp:
        log = Path(tmp) / "log"
        fill_s = fill_log(log, jobs, body_size)
        out: dict[str, Any] = {"jobs": jobs, "body_size": body_size, "fill_s": fill_s}
        modes: dict[str, Any] = {}
        for mode, records in (("jobs", False), ("records", True)):
            rows = count(spark, log, records)
            if rows != jobs:
                raise RuntimeError(f"{mode}: read {rows} rows, the log holds {jobs}")
            first = timed_read(spark, log, records)
            warm = [timed_read(spark, log, records) for _ in range(runs)]
            median = statistics.median(warm)
            modes[mode] = {
                "first_s": first,
                "warm_s": warm,
                "median_s": median,
                "rows_per_s": jobs / median,
            }
        out["modes"] = modes
        out["segments"] = len(list(log.glob("*.log")))
        # Spark's own floor: as many rows in as many partitions from a source that costs
        # nothing to produce them (bench/spark_floor.py), run in turn with the reader.
        partitions = spark.read.format("beanpole-binlog").load(str(log)).rdd.getNumPartitions()
        floor = [timed_floor(spark, jobs, partitions, body_size) for _ in range(runs + 1)][1:]
        median = statistics.median(floor)
        out["floor"] = {
            "partitions": partitions,
            "warm_s": floor,
            "median_s": median,
            "rows_per_s": jobs / median,
        }
        return out


def _bench_on_path() -> None:
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # imported by path (tests/spark), not run from bench/
        sys.path.insert(0, here)


def timed_floor(spark: Any, rows: int, partitions: int, body_size: int) -> float:
    _bench_on_path()
    import spark_floor

    spark_floor.register(spark)
    reader = (
        spark.read.format(spark_floor.NAME)
        .option("rows", str(rows))
        .option("partitions", str(partitions))
        .option("body-size", str(body_size))
    )
    started = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def _baselines(address: tuple[str, int], tube: str) -> dict[str, Callable[[Any], None]]:
    """The foreachPartition functions of the baselines. They are made here, as
    closures, so Spark ships them to its workers by value."""
    host, port = address

    def greenstalk_put(rows: Any) -> None:
        import greenstalk

        with greenstalk.Client((host, port), encoding=None, use=tube) as c:
            for row in rows:
                c.put(bytes(row.body))

    def socket_loop(rows: Any) -> None:
        import socket as sockets

        def flush(sock: Any, parts: list[bytes], n: int) -> None:
            sock.sendall(b"".join(parts))
            replies = b""
            while replies.count(b"\r\n") < n:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("the server closed the connection")
                replies += chunk
            if replies.count(b"INSERTED ") != n:
                raise RuntimeError(f"a put failed: {replies[:200]!r}")

        with sockets.create_connection((host, port)) as sock:
            sock.sendall(b"use %s\r\n" % tube.encode())
            if not sock.recv(1024).startswith(b"USING"):
                raise RuntimeError("use failed")
            parts: list[bytes] = []
            n = 0
            for row in rows:
                body = bytes(row.body)
                parts.append(b"put 65536 0 60 %d\r\n%s\r\n" % (len(body), body))
                n += 1
                if n == PUT_CHUNK:
                    flush(sock, parts, n)
                    parts, n = [], 0
            if n:
                flush(sock, parts, n)

    return {"greenstalk": greenstalk_put, "socket loop": socket_loop}


#: The contenders; "spark floor" is Spark's own cost for the same rows into a Python
#: Arrow writer that keeps nothing (bench/spark_floor.py): what no writer can beat.
WRITERS = ("beanpole", "greenstalk", "socket loop", "spark floor")
#: The two shapes of body the writer and Spark's floor are also timed with: one
#: constant binary value repeated, and a string computed per row (as users' data is).
BODIES = {
    "constant binary": "cast(repeat('b', {size}) as binary) as body",
    "per-row strings": "rpad(cast(id as string), {size}, 'x') as body",
}
#: Contenders of the writer figure: (writer, body shape).
CONTENDERS = [(how, "constant binary") for how in WRITERS] + [
    ("beanpole", "per-row strings"),
    ("spark floor", "per-row strings"),
]


def timed_write(spark: Any, df: Any, how: str, jobs: int) -> tuple[float, dict[str, float]]:
    """One write of ``df`` into a fresh server: seconds, and the CPU seconds spent by
    each part of the process tree meanwhile (``cpu_tree``). Checks every row arrived."""
    _bench_on_path()
    import cpu_tree

    if how == "spark floor":
        import spark_floor

        spark_floor.register(spark)
        before = cpu_tree.sample()
        started = time.perf_counter()
        df.write.format(spark_floor.DISCARD).mode("append").save()
        return time.perf_counter() - started, cpu_tree.spent(before, cpu_tree.sample())
    with beanpole.Server(listen="127.0.0.1", port=0) as srv:
        address = srv.address
        assert isinstance(address, tuple)
        tube = "bench"
        before = cpu_tree.sample()
        started = time.perf_counter()
        if how == "beanpole":
            df.write.format("beanpole").option("servers", f"{address[0]}:{address[1]}").option(
                "tube", tube
            ).mode("append").save()
        else:
            df.foreachPartition(_baselines(address, tube)[how])
        took = time.perf_counter() - started
        cpu = cpu_tree.spent(before, cpu_tree.sample())
        with beanpole.Client(address) as c:
            stored = c.stats_tube(tube)["current-jobs-ready"]
        if stored != jobs:
            raise RuntimeError(f"{how}: the server holds {stored} jobs, {jobs} were written")
    return took, cpu


def _label(how: str, body: str) -> str:
    return how if body == "constant binary" else f"{how} ({body})"


def writer_figure(spark: Any, jobs: int, runs: int, body_size: int) -> dict[str, Any]:
    """The writer's figure: rows per second of every contender, run in turn."""
    frames = {
        body: spark.range(0, jobs, numPartitions=2).selectExpr(expr.format(size=body_size))
        for body, expr in BODIES.items()
    }
    out: dict[str, Any] = {"jobs": jobs, "body_size": body_size, "writers": {}}
    firsts = {(h, b): timed_write(spark, frames[b], h, jobs)[0] for h, b in CONTENDERS}
    warm: dict[tuple[str, str], list[float]] = {c: [] for c in CONTENDERS}
    cpus: dict[tuple[str, str], list[dict[str, float]]] = {c: [] for c in CONTENDERS}
    for _ in range(runs):
        # Interleaved, so that a busy moment on the machine falls on every contender.
        for how, body in CONTENDERS:
            took, cpu = timed_write(spark, frames[body], how, jobs)
            warm[(how, body)].append(took)
            cpus[(how, body)].append(cpu)
    for how, body in CONTENDERS:
        median = statistics.median(warm[(how, body)])
        out["writers"][_label(how, body)] = {
            "first_s": firsts[(how, body)],
            "warm_s": warm[(how, body)],
            "median_s": median,
            "rows_per_s": jobs / median,
            # Median CPU seconds per run of each part of the process tree: the
            # driver (with the embedded server's threads), the JVM, its Python workers.
            "cpu_s": {
                role: statistics.median(c[role] for c in cpus[(how, body)])
                for role in cpus[(how, body)][0]
            },
        }
    rates = {name: w["rows_per_s"] for name, w in out["writers"].items()}
    ours = rates["beanpole"]
    out["ratios"] = {how: ours / rates[how] for how in WRITERS if how != "beanpole"}
    strings = "per-row strings"
    out["of_floor"] = {
        "constant binary": ours / rates["spark floor"],
        strings: rates[_label("beanpole", strings)] / rates[_label("spark floor", strings)],
    }
    return out


#: Jobs per micro-batch of the streaming figure (its maxRowsPerTrigger).
STREAM_BATCH = 100_000
#: What --stream-batch set.
STREAM = {"batch": STREAM_BATCH}


def fill_tube(address: str, tube: str, jobs: int, body_size: int) -> None:
    """``jobs`` jobs whose bodies are computed per row (the number, padded)."""
    with beanpole.Client(address, encoding=None, use=tube) as client:
        client.put_many(str(i).encode().ljust(body_size, b"x") for i in range(jobs))


def timed_stream(
    spark: Any, address: str, tube: str, checkpoint: Path, batch: int
) -> tuple[float, dict[str, float]]:
    """One availableNow query over the tube: seconds (-1 if it read nothing) and the
    CPU seconds of each part of the process tree meanwhile."""
    _bench_on_path()
    import cpu_tree

    before = cpu_tree.sample()
    started = time.perf_counter()
    query = (
        spark.readStream.format("beanpole")
        .option("servers", address)
        .option("tube", tube)
        .option("maxRowsPerTrigger", str(batch))
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    cpu = cpu_tree.spent(before, cpu_tree.sample())
    read = sum(p["numInputRows"] for p in query.recentProgress)
    return (elapsed if read else -1.0), cpu


def stream_figure(spark: Any, jobs: int, runs: int, body_size: int) -> dict[str, Any]:
    """The streaming reader's figure: jobs per second through a noop sink."""
    batch = min(STREAM["batch"], jobs)
    times: list[float] = []
    cpus: list[dict[str, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="beanpole-spark-bench-") as tmp,
        beanpole.Server(listen="127.0.0.1", port=0) as srv,
    ):
        host, port = srv.address  # type: ignore[misc]
        address = f"{host}:{port}"
        for run in range(runs + 1):
            tube = f"bench{run}"
            fill_tube(address, tube, jobs, body_size)
            took, cpu = timed_stream(spark, address, tube, Path(tmp) / f"cp{run}", batch)
            times.append(took)
            cpus.append(cpu)
            with beanpole.Client(address) as client:
                try:
                    left = client.stats_tube(tube)
                except beanpole.client.NotFoundError:  # gone: empty and unused
                    left = {"current-jobs-ready": 0, "current-jobs-reserved": 0}
            if left["current-jobs-ready"] or left["current-jobs-reserved"] or times[-1] < 0:
                raise RuntimeError(f"stream: the run left jobs behind: {left}")
    warm = times[1:]
    median = statistics.median(warm)
    return {
        "jobs": jobs,
        "body_size": body_size,
        "batch": batch,
        "first_s": times[0],
        "warm_s": warm,
        "median_s": median,
        "jobs_per_s": jobs / median,
        # Median CPU seconds per warm run, by part of the process tree (the driver
        # holds the embedded server): a measure a busy machine disturbs far less
        # than the wall time, for comparing two builds of the reader.
        "cpu_s": {role: statistics.median(c[role] for c in cpus[1:]) for role in cpus[0]},
    }


def touch_figure(spark: Any, jobs: int, runs: int, body_size: int) -> dict[str, Any]:
    """How long the streaming reader's touch of a held batch takes: ``jobs`` jobs
    reserved on the reader's connections (1,000 each), one pipelined touch pass over
    all of them, timed ``runs`` times. Spark is not involved."""
    from beanpole.spark.stream_holds import Holds
    from beanpole.spark.stream_options import StreamSettings

    times: list[float] = []
    with beanpole.Server(listen="127.0.0.1", port=0) as srv:
        host, port = srv.address  # type: ignore[misc]
        address = f"{host}:{port}"
        fill_tube(address, "held", jobs, body_size)
        # The reader's own touch thread waits an hour: only the timed passes touch.
        settings = {"servers": address, "tube": "held", "touchInterval": "3600"}
        holds = Holds(StreamSettings.from_options(settings))
        try:
            since = time.monotonic()
            slots, _ = holds.reserve([(address, "held")], None)
            holds.hold(1, slots, since)
            held = sum(len(ids) for ids in slots.values())
            if held != jobs:
                raise RuntimeError(f"touch: {held} jobs held, {jobs} were put")
            before = srv.stats()["cmd-touch"]
            for _ in range(runs):
                started = time.perf_counter()
                holds.touch(1)
                times.append(time.perf_counter() - started)
            touched = srv.stats()["cmd-touch"] - before
            if touched != jobs * runs:
                raise RuntimeError(f"touch: {touched} touches seen, {jobs * runs} sent")
        finally:
            holds.close()
    return {"jobs": jobs, "warm_s": times, "median_s": statistics.median(times)}


def report_touch(figure: dict[str, Any]) -> None:
    warm = ", ".join(f"{s:.3f}" for s in figure["warm_s"])
    print(
        f"streaming reader's touch of {figure['jobs']:,} held jobs (pipelined, per "
        f"connection): median {figure['median_s']:.3f} s (runs {warm})"
    )


# Each figure: a function of (spark, jobs, runs, body_size).
FIGURES: dict[str, Callable[[Any, int, int, int], dict[str, Any]]] = {
    "binlog": binlog_figure,
    "writer": writer_figure,
    "stream": stream_figure,
    "touch": touch_figure,
}


def run(spark: Any | None, jobs: int, runs: int, body_size: int, only: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if spark is None:
        spark, result["jvm_start_s"] = session()
    for name in only:
        result[name] = FIGURES[name](spark, jobs, runs, body_size)
    return result


def report(result: dict[str, Any]) -> None:
    if "jvm_start_s" in result:
        print(f"JVM and session start: {result['jvm_start_s']:.1f} s (not in the figures)")
    figure = result.get("binlog")
    if figure:
        print(
            f"log reader, {figure['jobs']:,} jobs of {figure['body_size']} bytes "
            f"in {figure['segments']} segments (filled in {figure['fill_s']:.1f} s):"
        )
        for mode in ("jobs", "records"):
            m = figure["modes"][mode]
            warm = ", ".join(f"{s:.2f}" for s in m["warm_s"])
            print(
                f"  {mode:8} {m['rows_per_s']:>12,.0f} rows/s  median {m['median_s']:.3f} s "
                f"(warm runs {warm}; first query {m['first_s']:.2f} s)"
            )
        f = figure["floor"]
        warm = ", ".join(f"{s:.2f}" for s in f["warm_s"])
        jobs_mode = figure["modes"]["jobs"]["rows_per_s"]
        print(
            f"  {'floor':8} {f['rows_per_s']:>12,.0f} rows/s  median {f['median_s']:.3f} s "
            f"(warm runs {warm}): Spark's own cost for as many rows in {f['partitions']} "
            f"partitions from a source that costs nothing; the jobs mode is "
            f"{jobs_mode / f['rows_per_s']:.2f}x it"
        )
    if result.get("writer"):
        report_writer(result["writer"])
    if result.get("stream"):
        report_stream(result["stream"])
    if result.get("touch"):
        report_touch(result["touch"])


def report_writer(figure: dict[str, Any]) -> None:
    print(
        f"writer, {figure['jobs']:,} rows of {figure['body_size']} bytes into one server "
        "(median of warm runs):"
    )
    for how, w in figure["writers"].items():
        warm = ", ".join(f"{s:.2f}" for s in w["warm_s"])
        ratio = f"  beanpole is {figure['ratios'][how]:.1f}x" if how in figure["ratios"] else ""
        print(
            f"  {how:34} {w['rows_per_s']:>12,.0f} rows/s  median {w['median_s']:.3f} s "
            f"(warm runs {warm}; first {w['first_s']:.2f} s){ratio}"
        )
    for body, ratio in figure["of_floor"].items():
        print(f"  beanpole with {body} bodies: {ratio:.2f}x Spark's floor for the same rows")
    print(
        "  CPU seconds per run (median): driver with the embedded server / JVM / "
        "Python workers = total"
    )
    for how, w in figure["writers"].items():
        cpu = w.get("cpu_s")
        if cpu and (how.startswith("beanpole") or how.startswith("spark floor")):
            parts = " / ".join(f"{cpu[r]:.2f}" for r in ("driver", "jvm", "workers"))
            print(f"    {how:32} {parts} = {sum(cpu.values()):.2f}")


def report_stream(figure: dict[str, Any]) -> None:
    warm = ", ".join(f"{s:.2f}" for s in figure["warm_s"])
    print(
        f"streaming reader, {figure['jobs']:,} jobs of {figure['body_size']} bytes, "
        f"{figure['batch']:,} per batch, noop sink, deleted on commit:\n"
        f"  {figure['jobs_per_s']:>12,.0f} jobs/s  median {figure['median_s']:.3f} s "
        f"(warm runs {warm}; first query {figure['first_s']:.2f} s)"
    )
    cpu = figure.get("cpu_s")
    if cpu:
        parts = " / ".join(f"{cpu[r]:.2f}" for r in ("driver", "jvm", "workers"))
        print(
            f"  CPU seconds per run (median): driver with the embedded server / JVM / "
            f"Python workers = {parts} = {sum(cpu.values()):.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5, help="warm runs per figure")
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--only", nargs="*", choices=sorted(FIGURES), default=sorted(FIGURES))
    parser.add_argument("--smoke", action="store_true", help="tiny counts, no figures")
    parser.add_argument(
        "--stream-batch", type=int, default=STREAM_BATCH, help="jobs per streaming micro-batch"
    )
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.runs = 2_000, 1
    STREAM["batch"] = args.stream_batch
    result = run(None, args.jobs, args.runs, args.body_size, args.only)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
