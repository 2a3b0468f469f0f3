"""Spark chaos: a streaming query from two beanpole servers into an idempotent Parquet
table, while the harness stops, kills and restarts things; a total-queue check after
every cycle.

    python bench/spark_chaos.py --cycles 50 --seed 1 --jobs-per-cycle 2000
    python bench/spark_chaos.py --cycles 3 --faults b_restart,driver_kill,clean_stop

Server A runs with ``-b DIR -f 0`` (every acknowledged change is on disk before its
reply); server B runs without a log, so its restart loses its jobs (the checker counts
those apart). Producer threads put uniquely numbered jobs into both (bodies computed
per job, lengths varying, a share with a TTR of 2-3 s, the rest 60 s), recording every
reply. The query runs in a separate driver process (bench/spark_chaos_driver.py):
``readStream.format("beanpole")`` over both servers, ``maxRowsPerTrigger`` small,
``foreachBatch`` writing batch N to ``OUT/batch=N/`` with overwrite.

A cycle: producers put ``--jobs-per-cycle`` jobs over a few seconds while a query runs
(processingTime, or availableNow for the ``available_now`` fault); after a random number
of batches and a random moment, the cycle's fault (``--faults``, or drawn with
``--seed``): ``clean_stop`` (query.stop() between batches), ``available_now`` (the run
ends by itself), ``driver_kill`` (SIGKILL to the driver's process group, JVM included),
``a_term`` / ``a_kill`` (server A restarted on its log after SIGTERM / SIGKILL),
``b_restart`` (server B restarted without a log), ``ttr`` (the sink sleeps longer than
the short TTRs for a few batches while a rival worker takes what becomes ready). Then
the settle: producers done, a clean availableNow run from the same checkpoint drains
what is left, and bench/spark_chaos_check.py checks the whole history.

A line per cycle, a summary at the end; the exit status is 1 when any check failed.
Everything runs on 127.0.0.1; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from spark_chaos_check import (
    CAUSES,
    FAULTS,
    History,
    Left,
    Progress,
    Row,
    Taken,
    Verdict,
    body_for,
    check,
    seq_of,
)
from spark_chaos_load import Producers, Rival, Server, still_there, tube_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from servechild import child_env

HERE = Path(__file__).resolve().parent
TUBE = "chaos"
JVM_START = 240.0  # seconds allowed for a driver to start its SparkSession
RUN_END = 300.0  # seconds allowed for an availableNow run or a stop


class DriverGone(Exception):
    """The driver process ended, or an awaited event did not come in time."""


class Driver:
    """The driver process: JSON commands in, ``@chaos`` events out."""

    def __init__(self, work: Path, servers: str, max_rows: int) -> None:
        cmd = [
            sys.executable, str(HERE / "spark_chaos_driver.py"),
            "--servers", servers, "--tube", TUBE,
            "--checkpoint", str(work / "checkpoint"), "--out", str(work / "out"),
            "--progress", str(work / "progress.jsonl"), "--max-rows", str(max_rows),
        ]  # fmt: skip
        self.log = open(work / "driver.log", "ab")  # noqa: SIM115 (closed in kill/exit)
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=child_env(), start_new_session=True, text=True,
        )  # fmt: skip
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.wait("ready", JVM_START)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@chaos "):
                self.events.put(json.loads(line[len("@chaos ") :]))
        self.events.put(None)

    def send(self, cmd: str, **fields: Any) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise DriverGone(f"driver gone: {e}") from e

    def wait(self, event: str, timeout: float, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                got = self.events.get(timeout=max(0.01, left))
            except queue.Empty:
                raise DriverGone(f"no {event} {match} within {timeout:.0f}s") from None
            if got is None:
                raise DriverGone(f"driver exited ({self.proc.wait()}) before {event}")
            if got["event"] == event and all(got.get(k) == v for k, v in match.items()):
                return got
            if left <= 0:
                raise DriverGone(f"no {event} {match} within {timeout:.0f}s")

    def batches(self, n: int, timeout: float, **match: Any) -> int:
        """Wait for ``n`` batch events (fewer if the run ends or time runs out)."""
        seen = 0
        deadline = time.monotonic() + timeout
        while seen < n and time.monotonic() < deadline:
            try:
                got = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if got is None or got["event"] == "ended":
                self.events.put(got)  # whoever waits for the end sees it
                break
            if got["event"] == "batch" and all(got.get(k) == v for k, v in match.items()):
                seen += 1
        return seen

    def kill(self) -> None:
        """SIGKILL the whole process group: python, the JVM and its Python workers."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.log.close()

    def exit(self) -> None:
        try:
            self.send("exit")
            self.proc.wait(timeout=RUN_END)
        except (DriverGone, subprocess.TimeoutExpired):
            self.kill()
        self.log.close()


class Harness:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.a = Server("A", work / "a-log")
        self.b = Server("B", None)
        for s in (self.a, self.b):
            s.start()
        self.servers = [self.a, self.b]
        self.producers = Producers(self.servers, TUBE, args.seed, args.short_ttr)
        self.driver: Driver | None = None
        self.faults: dict[int, str] = {}
        self.taken: list[Taken] = []
        self.left: list[Left] = []
        self.failures: list[str] = []  # runs that did not end as they should
        self.read_cache: dict[Path, tuple[int, list[Row]]] = {}
        self.queues: dict[str, dict[str, int]] = {}  # stats-tube after the last settle

    # -- the driver ------------------------------------------------------------------

    def ensure_driver(self) -> Driver:
        if self.driver is None or self.driver.proc.poll() is not None:
            addresses = ",".join(s.address for s in self.servers)
            self.driver = Driver(self.work, addresses, self.args.max_rows)
        return self.driver

    def ended(self, cycle: int, phase: str, timeout: float) -> dict[str, Any] | None:
        assert self.driver is not None
        try:
            return self.driver.wait("ended", timeout, cycle=cycle, phase=phase)
        except DriverGone as e:
            self.failures.append(f"cycle {cycle} {phase}: {e}")
            return None

    # -- a cycle ---------------------------------------------------------------------

    def cycle(self, k: int, fault: str) -> None:
        self.faults[k] = fault
        driver = self.ensure_driver()
        driver.send("slow", seconds=0)
        producing = self.producers.run(self.args.jobs_per_cycle, k, self.args.put_seconds)
        if fault == "available_now":
            time.sleep(self.args.put_seconds / 3)  # something to read at the run's start
        driver.send("run", trigger="available" if fault == "available_now" else "processing",
                    cycle=k, phase="main")  # fmt: skip
        # The fault comes after a few batches (one under a slow sink, to leave a backlog).
        driver.batches(1 if fault == "ttr" else self.rng.randint(1, 4), 60, cycle=k, phase="main")
        time.sleep(self.rng.uniform(0, 1))
        self.apply(k, fault, driver)
        for t in producing:
            t.join(timeout=120)
        self.settle(k)

    def apply(self, k: int, fault: str, driver: Driver) -> None:
        if fault == "clean_stop":
            driver.send("stop")
            got = self.ended(k, "main", RUN_END)
            if got is not None and got["status"] != "stopped":
                self.failures.append(f"cycle {k}: a clean stop ended {got}")
            self.snapshot(k, "main", CAUSES[fault])
        elif fault == "available_now":
            got = self.ended(k, "main", RUN_END)
            if got is not None and got["status"] != "done":
                self.failures.append(f"cycle {k}: an availableNow run ended {got}")
            self.snapshot(k, "main", CAUSES[fault])
        elif fault == "driver_kill":
            driver.kill()
            self.driver = None
        elif fault in ("a_term", "a_kill", "b_restart"):
            server = self.b if fault == "b_restart" else self.a
            how = "kill" if fault == "a_kill" else "term"
            if fault == "b_restart":
                how = self.rng.choice(["term", "kill"])
            server.restart(how, k)
            if fault == "b_restart":
                # New work arrives at the restarted server before the query restarts, as
                # much as the ids the checkpoint names there (bounded): a server without a
                # log numbers its jobs from 1 again.
                n = min(self.named_max(server), 3 * self.args.jobs_per_cycle)
                self.producers.burst(server, n, k)
            # The query fails when it next uses the lost connections; stop it if not.
            try:
                driver.wait("ended", 20, cycle=k, phase="main")
            except DriverGone:
                driver.send("stop")
                self.ended(k, "main", RUN_END)
        elif fault == "ttr":
            driver.send("slow", seconds=self.args.slow)
            rival = Rival(self.servers, TUBE, k, every=0.2)
            driver.batches(self.rng.randint(2, 3), 60, cycle=k, phase="main")
            # The rival stops first: what the stop itself leaves ready is not its to take.
            self.taken.extend(rival.stop())
            driver.send("stop")
            self.ended(k, "main", RUN_END)
            driver.send("slow", seconds=0)

    def settle(self, k: int) -> None:
        driver = self.ensure_driver()
        driver.send("run", trigger="available", cycle=k, phase="settle")
        got = self.ended(k, "settle", RUN_END)
        if got is not None and got["status"] != "done":
            self.failures.append(f"cycle {k}: the settle run ended {got}")
        self.snapshot(k, "settle", CAUSES["available_now"])

    # -- what the run recorded -------------------------------------------------------

    def rows(self) -> list[Row]:
        out: list[Row] = []
        root = self.work / "out"
        if not root.is_dir():
            return out
        import pyarrow.parquet as pq

        for d in sorted(root.glob("batch=*")):
            done = d / "_SUCCESS"
            if not done.exists():
                continue
            stamp = done.stat().st_mtime_ns
            cached = self.read_cache.get(d)
            if cached is None or cached[0] != stamp:
                t = pq.read_table(d, columns=["batchId", "server", "id", "body", "cycle", "phase"])
                got = [
                    Row(r["batchId"], r["server"], r["id"], r["body"], r["cycle"], r["phase"])
                    for r in t.to_pylist()
                ]
                self.read_cache[d] = cached = (stamp, got)
            out.extend(cached[1])
        return out

    def committed(self) -> set[int]:
        d = self.work / "checkpoint" / "commits"
        return {int(p.name) for p in d.glob("*") if p.name.isdigit()} if d.is_dir() else set()

    def planned(self) -> dict[int, float]:
        d = self.work / "checkpoint" / "offsets"
        if not d.is_dir():
            return {}
        return {int(p.name): p.stat().st_mtime for p in d.glob("*") if p.name.isdigit()}

    def progress(self) -> list[Progress]:
        path = self.work / "progress.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            e = json.loads(line)
            end = e.get("endOffset")
            out.append(Progress(e["cycle"], e["phase"], e.get("batchId") or 0,
                                end if isinstance(end, dict) else {}))  # fmt: skip
        return out

    def named_max(self, server: Server) -> int:
        """The highest id on ``server`` that the checkpoint's last offset names (0: none)."""
        d = self.work / "checkpoint" / "offsets"
        files = sorted((p for p in d.glob("*") if p.name.isdigit()), key=lambda p: int(p.name))
        if not files:
            return 0
        best = 0
        for text in files[-1].read_text().splitlines()[2:]:
            with contextlib.suppress(ValueError, AttributeError):
                for ids in json.loads(text).get("jobs", {}).get(server.address, {}).values():
                    for part in str(ids).split(","):
                        best = max(best, int(part.rpartition("-")[2]))
        return best

    def live(self, server: Server, incarnation: int) -> bool:
        """Whether that incarnation's jobs are still in the server's current process."""
        return server.log is not None or incarnation == server.incarnation

    def snapshot(self, k: int, phase: str, cause: str) -> None:
        """After a clean end: jobs of committed batches (this run's) still in a server."""
        done = self.committed()
        puts = {p.seq: p for p in list(self.producers.puts)}
        for server in self.servers:
            jobs = []
            for r in self.rows():
                if (
                    r.cycle != k
                    or r.phase != phase
                    or r.batch not in done
                    or r.server != server.address
                ):
                    continue
                put = puts.get(seq_of(r.body) or -1)
                if put is not None and self.live(server, put.incarnation):
                    jobs.append((r.id, r.body))
            self.left.extend(Left(k, cause, b) for b in still_there(server.address, jobs))

    def history(self) -> History:
        rows = self.rows()
        delivered = {r.body for r in rows} | {t.body for t in self.taken}
        puts = list(self.producers.puts)
        in_server: set[bytes] = set()
        for server in self.servers:
            jobs = [
                (p.id, body_for(p.seq))
                for p in puts
                if p.status == "ok" and p.server == server.address and p.id is not None
                and self.live(server, p.incarnation) and body_for(p.seq) not in delivered
            ]  # fmt: skip
            in_server |= still_there(server.address, jobs)
        return History(
            puts=puts, rows=rows, faults=dict(self.faults), in_server=in_server,
            lossy=self.a.lossy() | self.b.lossy(), taken=list(self.taken),
            progress=self.progress(), planned=self.planned(), left=list(self.left),
            max_rows=self.args.max_rows,
        )  # fmt: skip

    def save(self, history: History) -> None:
        """The puts and the rival's takes as JSONL in the run's directory (for a look
        afterwards with --dir); rewritten whole after every cycle."""
        with open(self.work / "puts.jsonl", "w", encoding="utf-8") as f:
            for p in history.puts:
                f.write(json.dumps(dataclasses.asdict(p)) + "\n")
        with open(self.work / "rival.jsonl", "w", encoding="utf-8") as f:
            for t in history.taken:
                f.write(json.dumps({"seq": seq_of(t.body), "cycle": t.cycle}) + "\n")


def plan(args: argparse.Namespace) -> list[str]:
    if args.faults:
        kinds = [f.strip() for f in args.faults.split(",") if f.strip()]
        bad = [f for f in kinds if f not in FAULTS]
        if bad:
            raise SystemExit(f"spark_chaos: unknown fault {bad[0]!r} (one of {', '.join(FAULTS)})")
        return [kinds[i % len(kinds)] for i in range(args.cycles)]
    rng = random.Random(args.seed * 7 + 1)
    return [rng.choice(FAULTS) for _ in range(args.cycles)]


def line(k: int, fault: str, v: Verdict, h: History, seconds: float, new: list[str]) -> str:
    grew: dict[str, int] = {}
    for c in v.counted.values():
        for name, n in c.items():
            grew[name] = grew.get(name, 0) + n
    text = (
        f"cycle {k:3d} {fault:13s} puts {len(h.puts):6d} rows {len(h.rows):6d} "
        f"lost {len(v.lost)} (with server {v.lost_with_server}) unexpected {len(v.unexpected)} "
        f"repeats {sum(v.repeats.values())} left {sum(v.left.values())} counters {grew} "
        f"{seconds:5.1f}s"
    )
    return text + "".join(f"\n    VIOLATION {n}" for n in new)


def summary(faults: dict[int, str], v: Verdict, h: History, failures: list[str]) -> dict[str, Any]:
    puts = Counter(p.status for p in h.puts)
    return {
        "cycles": dict(Counter(faults.values())),
        "puts": dict(puts),
        "delivered": v.delivered,
        "rows": len(h.rows),
        "lost": len(v.lost),
        "lost_reused_id": v.lost_reused_id,
        "lost_with_server": v.lost_with_server,
        "unexpected": len(v.unexpected),
        "unexpected_examples": v.unexpected[:5],
        "repeats": dict(v.repeats),
        "left_after_clean_end": dict(v.left),
        "counters": {c: dict(n) for c, n in v.counted.items()},
        "failed_runs": failures,
        "violations": v.violations + failures,
    }


def print_summary(s: dict[str, Any]) -> None:
    print("\nsummary")
    print(f"  cycles per fault: {s['cycles']}")
    print(f"  puts: {s['puts']}; delivered {s['delivered']} (rows {s['rows']})")
    print(f"  lost: {s['lost']} (by a reused id {s['lost_reused_id']}); "
          f"lost with a server restarted without -b: {s['lost_with_server']}")  # fmt: skip
    print(f"  unexpected: {s['unexpected']}")
    for e in s["unexpected_examples"]:
        print(f"    {e}")
    print(f"  {'cause':32s} {'delivered twice':>16s} {'left after end':>15s}  counters grew")
    for cause in CAUSES.values():
        twice = s["repeats"].get(cause, 0)
        left = s["left_after_clean_end"].get(cause, 0)
        print(f"  {cause:32s} {twice:16d} {left:15d}  {s['counters'].get(cause, {})}")
    print(f"  left in the tube after the last settle: {s['queues_after']}")
    print(f"  violations: {len(s['violations'])}")
    for n in s["violations"]:
        print(f"    {n}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cycles", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs-per-cycle", type=int, default=2000)
    p.add_argument("--max-rows", type=int, default=100, help="maxRowsPerTrigger")
    p.add_argument("--faults", help=f"comma-separated, cycled (default: drawn): {','.join(FAULTS)}")
    p.add_argument("--put-seconds", type=float, default=6.0, help="how long a cycle's puts take")
    p.add_argument("--short-ttr", type=float, default=0.1, help="share of jobs with a 2-3 s TTR")
    p.add_argument("--slow", type=float, default=4.0, help="seconds the slow sink sleeps")
    p.add_argument("--dir", type=Path, help="keep the run's files here (default: a temp dir)")
    p.add_argument("--json", type=Path, help="write the summary here as JSON")
    args = p.parse_args(argv)
    faults = plan(args)
    work = args.dir or Path(tempfile.mkdtemp(prefix="spark-chaos-"))
    if args.dir and args.dir.exists() and any(args.dir.iterdir()):
        raise SystemExit(f"spark_chaos: {args.dir} is not empty (a run needs a fresh checkpoint)")
    work.mkdir(parents=True, exist_ok=True)
    print(f"spark_chaos: seed {args.seed}, {args.cycles} cycles, files in {work}", flush=True)
    h = Harness(args, work)
    shown: set[str] = set()
    v = Verdict()
    history = History([], [], {})
    try:
        for k, fault in enumerate(faults, start=1):
            started = time.monotonic()
            try:
                h.cycle(k, fault)
            except DriverGone as e:
                h.failures.append(f"cycle {k}: {e}")
                if h.driver is not None:
                    h.driver.kill()
                    h.driver = None
            history = h.history()
            h.save(history)
            h.queues = {sv.name: tube_counts(sv.address, TUBE) for sv in h.servers}
            v = check(history)
            every = v.violations + h.failures
            new = [n for n in every if n not in shown]
            print(line(k, fault, v, history, time.monotonic() - started, new), flush=True)
            shown = set(every)
    finally:
        if h.driver is not None:
            h.driver.exit()
        for server in h.servers:
            if server.child is not None:
                server.down("term")
    s = summary(h.faults, v, history, h.failures)
    s["seed"], s["command"] = args.seed, " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])])
    s["queues_after"] = h.queues
    print_summary(s)
    if args.json:
        args.json.write_text(json.dumps(s, indent=1, default=str))
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if s["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
