"""The Spark driver of bench/spark_chaos.py: a process the harness can SIGKILL.

It starts a local SparkSession (``local[2]``, UI off, bound to loopback), registers
beanpole's sources, and then obeys JSON commands, one a line, on its standard input:

    {"cmd": "run", "trigger": "processing" | "available", "cycle": 3, "phase": "main",
     "interval": "2 seconds"}        # the processingTime interval (default --interval)
    {"cmd": "slow", "seconds": 4}     # the sink sleeps this long in every batch
    {"cmd": "stop"}                   # query.stop() once no batch is in the sink
    {"cmd": "exit"}                   # stop the query if one runs; stop Spark; exit 0

Each run reads ``spark.readStream.format("beanpole")`` from the same checkpoint (the
reader is given it too, option ``checkpointLocation``) and
writes with ``foreachBatch`` in the idempotent pattern: batch N goes to
``OUT/batch=N/`` with mode overwrite, so a replayed batch replaces its own earlier rows.
Columns: batchId, server, id, body, cycle, phase. SIGTERM stops the query the same way
and exits 0.

What happens is told on standard output as lines ``@chaos {json}`` (Spark may print
other lines there): ready, started, batch, ended (status done, stopped or failed), bye.
Every query progress is appended to the ``--progress`` JSONL file with its cycle and
phase, endOffset included whole.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

OUT_LOCK = threading.Lock()  # one writer at a time on stdout: lines must not interleave


def emit(event: str, **fields: Any) -> None:
    with OUT_LOCK:
        sys.stdout.write("@chaos " + json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        from pyspark.sql.streaming.listener import StreamingQueryListener

        import beanpole.spark

        self.args = args
        self.spark = (
            SparkSession.builder.master("local[2]")
            .appName("beanpole-spark-chaos")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        beanpole.spark.register(self.spark)
        self.query: Any = None
        self.cycle = 0
        self.phase = "main"
        self.slow = 0.0
        # Guards in_batch; stop() waits on it until no batch is in the sink.
        self.batch_done = threading.Condition()
        self.in_batch = False
        self.sunk = -1  # the last batch the sink finished, and the last progress recorded:
        self.reported = -1  # a stop waits until the last batch is committed (reported)
        self.run_lock = threading.Lock()  # one run at a time; "stop" and SIGTERM race

        driver = self

        class Recorder(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                driver.record(json.loads(event.progress.json))

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self.spark.streams.addListener(Recorder())

    # -- the sink ---------------------------------------------------------------------

    def sink(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        with self.batch_done:
            self.in_batch = True
        try:
            if self.slow:
                time.sleep(self.slow)
            rows = df.select(
                F.lit(batch_id).cast("long").alias("batchId"),
                "server",
                "id",
                "body",
                F.lit(self.cycle).alias("cycle"),
                F.lit(self.phase).alias("phase"),
            )
            rows.write.mode("overwrite").parquet(os.path.join(self.args.out, f"batch={batch_id}"))
            emit("batch", batch=batch_id, cycle=self.cycle, phase=self.phase)
        finally:
            with self.batch_done:
                self.in_batch = False
                self.sunk = batch_id
                self.batch_done.notify_all()

    def record(self, progress: dict[str, Any]) -> None:
        sources = progress.get("sources") or [{}]
        end = sources[0].get("endOffset")
        if isinstance(end, str):
            with contextlib.suppress(ValueError):
                end = json.loads(end)
        # The query's name says which run it is (the listener may report a moment late).
        name = str(progress.get("name") or "")
        cycle, phase = self.cycle, self.phase
        if name.startswith("chaos_"):
            _, c, phase = name.split("_", 2)
            cycle = int(c)
        entry = {
            "cycle": cycle,
            "phase": phase,
            "batchId": progress.get("batchId"),
            "numInputRows": progress.get("numInputRows"),
            "endOffset": end,
            "progress": progress,
        }
        with open(self.args.progress, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        with self.batch_done:
            if isinstance(entry["batchId"], int):
                self.reported = max(self.reported, entry["batchId"])
            self.batch_done.notify_all()

    # -- runs -------------------------------------------------------------------------

    def run(self, trigger: str, cycle: int, phase: str, interval: str) -> None:
        with self.run_lock:
            if self.query is not None and self.query.isActive:
                emit("error", message="a query is running already")
                return
            self.cycle, self.phase = cycle, phase
            stream = (
                self.spark.readStream.format("beanpole")
                .option("servers", self.args.servers)
                .option("tube", self.args.tube)
                .option("maxRowsPerTrigger", str(self.args.max_rows))
                # The reader reads the commit log at a stop, to delete the last batch
                # the sink committed (docs/spark.md).
                .option("checkpointLocation", self.args.checkpoint)
                .load()
            )
            writer = (
                stream.writeStream.foreachBatch(self.sink)
                .option("checkpointLocation", self.args.checkpoint)
                .queryName(f"chaos_{cycle}_{phase}")
            )
            if trigger == "available":
                writer = writer.trigger(availableNow=True)
            else:
                writer = writer.trigger(processingTime=interval)
            try:
                self.query = writer.start()
            except Exception as e:  # a start that fails is a failed run
                emit("ended", status="failed", error=_first_line(e), cycle=cycle, phase=phase)
                return
            query = self.query
        emit("started", trigger=trigger, cycle=cycle, phase=phase)
        threading.Thread(target=self._await, args=(query, cycle, phase), daemon=True).start()

    def _await(self, query: Any, cycle: int, phase: str) -> None:
        try:
            query.awaitTermination()
        except Exception as e:
            emit("ended", status="failed", error=_first_line(e), cycle=cycle, phase=phase)
            return
        status = "stopped" if getattr(query, "_chaos_stopped", False) else "done"
        emit("ended", status=status, cycle=cycle, phase=phase)

    def stop(self) -> None:
        """query.stop() after the current batch: once the sink has no batch in hand and
        the last one it finished is committed (its progress reported), so that a query
        whose trigger interval is longer than its batches stops between triggers."""
        with self.run_lock:
            query = self.query
            if query is None or not query.isActive:
                return
            query._chaos_stopped = True
            with self.batch_done:
                self.batch_done.wait_for(
                    lambda: not self.in_batch and self.reported >= self.sunk, timeout=60
                )
            # Not under the condition: a batch starting meanwhile would block in the sink
            # while stop() waits for it. Spark interrupts such a batch before its commit.
            query.stop()

    def exit(self) -> None:
        self.stop()
        self.spark.stop()
        emit("bye")
        sys.stdout.flush()
        os._exit(0)


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:500]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--servers", required=True)
    p.add_argument("--tube", default="chaos")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--progress", required=True)
    p.add_argument("--max-rows", type=int, default=100)
    p.add_argument("--interval", default="2 seconds", help="processingTime trigger")
    args = p.parse_args()
    driver = Driver(args)
    signal.signal(
        signal.SIGTERM,
        lambda *_: threading.Thread(target=driver.exit, daemon=True).start(),
    )
    emit("ready", pid=os.getpid())
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd["cmd"] == "run":
            interval = cmd.get("interval") or args.interval
            driver.run(cmd["trigger"], int(cmd["cycle"]), cmd["phase"], interval)
        elif cmd["cmd"] == "slow":
            driver.slow = float(cmd["seconds"])
        elif cmd["cmd"] == "stop":
            threading.Thread(target=driver.stop, daemon=True).start()
        elif cmd["cmd"] == "exit":
            break
    driver.exit()


if __name__ == "__main__":
    main()
