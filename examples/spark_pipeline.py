"""A small data pipeline through beanpole and Spark, runnable as it is on a laptop.

    pip install "beanpole[spark]"      # pyspark, pyarrow; Spark needs Java 17
    python examples/spark_pipeline.py [--tasks 10000] [--workers 4] [--dir DIR]

1. A parquet file of tasks (an id, a text, a priority) is written with pyarrow.
2. Spark reads it and enqueues one job per task on two embedded beanpole servers
   (``df.write.format("beanpole")``; the task id is the sharding key).
3. Python worker threads reserve the jobs from both servers, do the work (count the
   words of the text) and put each result into the ``results`` tube of the same server,
   then delete the task.
4. A streaming query reads the ``results`` tube (``readStream.format("beanpole")``,
   availableNow) and writes the results as parquet; each job is deleted once the
   parquet sink has it.
5. A batch query over both servers' write-ahead logs (``format("beanpole-binlog")``)
   reports what the queues did.

It prints a short summary and exits 0 when every task's result arrived exactly once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from beanpole import Client, Server, TimedOutError

TASKS_TUBE = "tasks"
RESULTS_TUBE = "results"


@dataclasses.dataclass
class Summary:
    tasks: int
    enqueued: int
    worked: int
    results: int
    distinct_results: int
    wrong_results: int
    left_in_queues: int
    records: dict[str, int]

    def ok(self) -> bool:
        return (
            self.enqueued == self.tasks
            and self.results == self.tasks
            and self.distinct_results == self.tasks
            and self.wrong_results == 0
            and self.left_in_queues == 0
        )

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.records.items()))
        return [
            f"tasks in the parquet file:   {self.tasks}",
            f"jobs enqueued by Spark:      {self.enqueued}",
            f"tasks worked by Python:      {self.worked}",
            f"results read by streaming:   {self.results} ({self.distinct_results} distinct, "
            f"{self.wrong_results} wrong)",
            f"jobs left in the queues:     {self.left_in_queues}",
            f"write-ahead log records:     {kinds}",
            "pipeline " + ("OK" if self.ok() else "FAILED"),
        ]


def make_tasks(path: Path, count: int) -> None:
    """The input: ``count`` tasks with a text of a few words each."""
    words = ["queue", "job", "spark", "tube", "log", "worker", "result", "kick"]
    ids = list(range(count))
    texts = [" ".join(words[(i + k) % len(words)] for k in range(1 + i % 7)) for i in ids]
    table = pa.table(
        {
            "task": pa.array(ids, pa.int64()),
            "text": pa.array(texts, pa.string()),
            "priority": pa.array([i % 3 * 100 for i in ids], pa.int64()),
        }
    )
    pq.write_table(table, path)


def work(text: str) -> int:
    """The work each task stands for."""
    return len(text.split())


def worker(address: tuple[str, int], stop: threading.Event, done: list[int]) -> None:
    """Reserve tasks from one server, put their results back into it, delete them."""
    with (
        Client(address, watch=TASKS_TUBE, timeout=10) as tasks,
        Client(address, use=RESULTS_TUBE, timeout=10) as results,
    ):
        count = 0
        while not stop.is_set():
            try:
                job = tasks.reserve(timeout=0)
            except TimedOutError:
                break
            task = json.loads(job.body)
            answer = {"task": task["task"], "words": work(task["text"])}
            results.put(json.dumps(answer))
            tasks.delete(job)
            count += 1
        done.append(count)


def run(spark: Any, workdir: Path, tasks: int, workers: int = 4) -> Summary:
    """Run the pipeline with ``spark`` in ``workdir``; return what happened."""
    from pyspark.sql import functions as F

    import beanpole.spark

    beanpole.spark.register(spark)
    input_path = workdir / "tasks.parquet"
    make_tasks(input_path, tasks)
    logs = [workdir / "log-a", workdir / "log-b"]
    servers = [Server(port=0, binlog_dir=str(d)).start() for d in logs]
    try:
        addresses = [(s.host, s.port) for s in servers]
        endpoints = ",".join(f"{h}:{p}" for h, p in addresses)

        # 2. Parquet -> jobs, one per task, spread over both servers by task id.
        frame = spark.read.parquet(str(input_path))
        jobs = frame.select(
            F.to_json(F.struct("task", "text")).alias("body"),
            F.col("task").cast("string").alias("key"),
            F.col("priority"),
        )
        (
            jobs.write.format("beanpole")
            .option("servers", endpoints)
            .option("tube", TASKS_TUBE)
            .mode("append")
            .save()
        )
        enqueued = sum(int(s.tube_stats(TASKS_TUBE)["current-jobs-ready"]) for s in servers)

        # 3. Python workers, a few per server.
        stop = threading.Event()
        done: list[int] = []
        threads = [
            threading.Thread(target=worker, args=(addresses[i % len(addresses)], stop, done))
            for i in range(max(workers, len(addresses)))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        # 4. Results -> parquet with a streaming query; jobs deleted once written.
        out = workdir / "results.parquet"
        schema = "task BIGINT, words BIGINT"
        stream = (
            spark.readStream.format("beanpole")
            .option("servers", endpoints)
            .option("tube", RESULTS_TUBE)
            .load()
            .select(F.from_json(F.col("body").cast("string"), schema).alias("r"))
            .select("r.*")
        )
        query = (
            stream.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(workdir / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        written = spark.read.parquet(str(out))
        expected = frame.select("task", F.size(F.split("text", " ")).alias("expected"))
        joined = written.join(expected, "task", "left")
        results = written.count()
        distinct = written.select("task").distinct().count()
        wrong = joined.filter(
            F.col("expected").isNull() | (F.col("words") != F.col("expected"))
        ).count()
        left = sum(int(s.stats()["current-jobs-ready"]) for s in servers) + sum(
            int(s.stats()["current-jobs-reserved"]) for s in servers
        )
    finally:
        for s in servers:
            s.stop()

    # 5. What the queues did, from their write-ahead logs (the servers have stopped, but
    # the reader works on a directory a live server is writing too).
    records = (
        spark.read.format("beanpole-binlog")
        .option("records", "true")
        .load(str(logs[0]))
        .unionByName(
            spark.read.format("beanpole-binlog").option("records", "true").load(str(logs[1]))
        )
        .groupBy("kind")
        .count()
        .collect()
    )
    return Summary(
        tasks=tasks,
        enqueued=enqueued,
        worked=sum(done),
        results=results,
        distinct_results=distinct,
        wrong_results=wrong,
        left_in_queues=left,
        records={r["kind"]: int(r["count"]) for r in records},
    )


def session() -> Any:
    """A local Spark session bound to loopback, whose Python workers run this interpreter."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("beanpole-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks to run (10000)")
    parser.add_argument("--workers", type=int, default=4, help="worker threads (4)")
    parser.add_argument("--dir", help="working directory (default: a temporary one)")
    args = parser.parse_args(argv)
    spark = session()
    try:
        if args.dir:
            Path(args.dir).mkdir(parents=True, exist_ok=True)
            summary = run(spark, Path(args.dir), args.tasks, args.workers)
        else:
            with tempfile.TemporaryDirectory(prefix="beanpole-pipeline-") as tmp:
                summary = run(spark, Path(tmp), args.tasks, args.workers)
    finally:
        spark.stop()
    print("\n".join(summary.lines()))
    return 0 if summary.ok() else 1


if __name__ == "__main__":
    raise SystemExit(main())
