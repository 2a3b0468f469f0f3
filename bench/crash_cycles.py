"""Crash cycles: ``beanpole serve -b DIR`` killed with SIGKILL at random moments under
mixed load, restarted on the same directory, and checked, cycle after cycle.

Several clients (each with a tube of its own, so each knows exactly what its jobs
are) put, reserve, touch, release with a new priority (now or delayed), bury, kick
and delete. Every acknowledged change is recorded with the moment its reply came.
After every restart each job must be as its last acknowledged change left it (a
reserved job comes back ready), or as the change in flight when the server died
would leave it; no job may appear that nobody put, no body twice, no id again.

    python bench/crash_cycles.py                 # 100 cycles at -f 0: nothing lost
    python bench/crash_cycles.py -f 50           # what a SIGKILL loses at -f 50
    python bench/crash_cycles.py --stop term     # clean SIGTERM: nothing lost
    python bench/crash_cycles.py --disk-full     # a small tmpfs fills up and empties

At ``-f 50`` a change may be lost; the report says how many and how long before the
kill their replies came (it should be at most about 50 ms). The exit status is 0
when every check held.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from logserver import Child, Client

KILL_AFTER = (0.05, 0.5)  # seconds of load before the kill, uniformly
DELAY = 3600  # a delayed job stays delayed for the whole run


@dataclasses.dataclass(frozen=True)
class View:
    """What stats-job and peek show of a job."""

    state: str
    pri: int
    body: bytes

    def __repr__(self) -> str:
        return f"{self.state}/{self.pri}/{self.body[:12]!r}"

    def after_restart(self) -> View:
        return dataclasses.replace(self, state="ready") if self.state == "reserved" else self


# A job's history: (moment its reply came, what it was then; None: deleted or not yet
# put). The first entry is (0, None): the job before its put.
History = list[tuple[float, View | None]]


@dataclasses.dataclass
class Worker:
    """One client's jobs and what it sent."""

    index: int
    seed: int
    jobs: dict[int, View]
    history: dict[int, History] = dataclasses.field(default_factory=dict)
    in_flight: dict[int, View | None] = dataclasses.field(default_factory=dict)
    put_in_flight: bytes | None = None
    puts: int = 0
    changes: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def tube(self) -> str:
        return f"t{self.index}"

    def acked(self, job_id: int, view: View | None) -> None:
        self.history.setdefault(job_id, []).append((time.monotonic(), view))
        self.in_flight.pop(job_id, None)
        self.changes += 1
        if view is None:
            self.jobs.pop(job_id, None)
        else:
            self.jobs[job_id] = view

    def run(self, address: tuple[str, int], stop: threading.Event, cycle: int) -> None:
        rng = random.Random(self.seed)
        try:
            c = Client(address)
            c.use(self.tube)
            c.watch(self.tube)
            c.ignore("default")
        except OSError:
            return
        try:
            while not stop.is_set():
                self.step(c, rng, cycle)
        except OSError:
            pass  # killed: what was in flight stays undecided
        except Exception as err:
            self.errors.append(f"{type(err).__name__}: {err}")
        finally:
            c.close()

    def step(self, c: Client, rng: random.Random, cycle: int) -> None:
        pri = rng.randrange(2**32)
        ready = sorted((v.pri, i) for i, v in self.jobs.items() if v.state == "ready")
        held = [i for i, v in self.jobs.items() if v.state == "reserved"]
        r = rng.random()
        if not self.jobs or r < 0.3:
            self.puts += 1
            body = b"c%d/%d/%d|" % (self.index, cycle, self.puts) + rng.randbytes(
                rng.choice([10, 100, 2000])
            )
            self.put_in_flight = body
            job_id = c.put(body, pri)
            self.put_in_flight = None
            self.acked(job_id, View("ready", pri, body))
        elif r < 0.45 and ready:
            want = ready[0][1]
            self.in_flight[want] = dataclasses.replace(self.jobs[want], state="reserved")
            job_id, body = c.reserve(0)
            if job_id != want or body != self.jobs[want].body:
                self.errors.append(f"reserve gave {job_id}, expected {want}")
            self.acked(job_id, dataclasses.replace(self.jobs[job_id], state="reserved"))
        elif r < 0.75 and held:
            job_id = rng.choice(held)
            view = self.jobs[job_id]
            what = rng.random()
            if what < 0.15:
                self.in_flight[job_id] = view
                c.touch(job_id)
                self.acked(job_id, view)
            elif what < 0.45:
                after = View("ready", pri, view.body)
                self.in_flight[job_id] = after
                c.release(job_id, pri, 0)
                self.acked(job_id, after)
            elif what < 0.6:
                after = View("delayed", pri, view.body)
                self.in_flight[job_id] = after
                c.release(job_id, pri, DELAY)
                self.acked(job_id, after)
            elif what < 0.85:
                after = View("buried", pri, view.body)
                self.in_flight[job_id] = after
                c.bury(job_id, pri)
                self.acked(job_id, after)
            else:
                self.in_flight[job_id] = None
                c.delete(job_id)
                self.acked(job_id, None)
        elif r < 0.85:
            # kick: every buried job of the tube, or else every delayed one.
            buried = [i for i, v in self.jobs.items() if v.state == "buried"]
            kicked = buried or [i for i, v in self.jobs.items() if v.state == "delayed"]
            for i in kicked:
                self.in_flight[i] = dataclasses.replace(self.jobs[i], state="ready")
            n = c.kick(1000)
            if n != len(kicked):
                self.errors.append(f"kick 1000 kicked {n}, expected {len(kicked)}")
            for i in kicked:
                self.acked(i, dataclasses.replace(self.jobs[i], state="ready"))
        else:
            job_id = rng.choice(list(self.jobs))
            if self.jobs[job_id].state == "reserved" or rng.random() < 0.5:
                self.in_flight[job_id] = None
                c.delete(job_id)
                self.acked(job_id, None)


@dataclasses.dataclass
class Report:
    cycles: int = 0
    changes: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    lost_ages: list[float] = dataclasses.field(default_factory=list)  # seconds before kill


class Model:
    """Every job ever put, and what each worker saw."""

    def __init__(self, clients: int) -> None:
        self.jobs: list[dict[int, View]] = [{} for _ in range(clients)]
        self.histories: dict[int, History] = {}
        self.in_flight: dict[int, View | None] = {}
        self.puts_in_flight: list[bytes] = []
        self.owner: dict[int, int] = {}
        self.highest = 0
        # Every id up to here was handed out before the cycle began.
        self.floor = 0

    def absorb(self, workers: list[Worker], report: Report) -> None:
        for w in workers:
            for job_id, history in w.history.items():
                if job_id not in self.histories and job_id <= self.floor:
                    report.problems.append(f"cycle {report.cycles}: id {job_id} handed out again")
                self.histories.setdefault(job_id, [(0.0, None)]).extend(history)
                self.owner[job_id] = w.index
                self.highest = max(self.highest, job_id)
            self.in_flight.update(w.in_flight)
            if w.put_in_flight is not None:
                self.puts_in_flight.append(w.put_in_flight)

    def check(
        self, address: tuple[str, int], killed_at: float, strict: bool, report: Report
    ) -> None:
        """Compare the restarted server with the histories; afterwards every job's
        history starts again from what was found."""
        where = f"after cycle {report.cycles}"
        with Client(address) as c:
            seen: dict[int, View | None] = {}
            for job_id in sorted(self.histories):
                seen[job_id] = fetch(c, job_id)
            # Ids nobody was told about: only a put in flight may have made one.
            for job_id in range(self.floor + 1, self.highest + 64):
                if job_id in self.histories:
                    continue
                found = fetch(c, job_id)
                if found is None:
                    continue
                if found.body not in self.puts_in_flight:
                    report.problems.append(f"{where}: job {job_id} that nobody put")
                    continue
                self.puts_in_flight.remove(found.body)
                self.histories[job_id] = [(0.0, found)]  # decided by the restart
                self.owner[job_id] = int(found.body[1 : found.body.index(b"/")])
                seen[job_id] = found
                self.highest = max(self.highest, job_id)
            self.puts_in_flight.clear()
            listed = [v.body for v in seen.values() if v is not None]
            if len(listed) != len(set(listed)):
                report.problems.append(f"{where}: a body appears twice")
            for job_id, history in self.histories.items():
                self.compare(job_id, history, seen[job_id], killed_at, strict, report)
            stats = c.stats()
            total = sum(
                int(stats[f"current-jobs-{s}"]) for s in ("ready", "reserved", "delayed", "buried")
            )
            live = sum(1 for v in seen.values() if v is not None)
            if total != live:
                report.problems.append(f"{where}: the server holds {total} jobs, {live} known")
        self.in_flight.clear()
        self.floor = self.highest
        self.histories = {i: [(0.0, v)] for i, v in seen.items() if v is not None}
        self.jobs = [{} for _ in self.jobs]
        for job_id, history in self.histories.items():
            view = history[-1][1]
            assert view is not None
            self.jobs[self.owner[job_id]][job_id] = view

    def compare(
        self,
        job_id: int,
        history: History,
        seen: View | None,
        killed_at: float,
        strict: bool,
        report: Report,
    ) -> None:
        where = f"after cycle {report.cycles}: job {job_id}"
        views = [v.after_restart() if v else None for _, v in history]
        if job_id in self.in_flight:
            pending = self.in_flight[job_id]
            if seen == (pending.after_restart() if pending else None):
                return
        if seen == views[-1]:
            return
        matches = [k for k, v in enumerate(views) if v == seen]
        if not matches:
            report.problems.append(
                f"{where}: {seen} was never acknowledged (history {views}, in flight "
                f"{self.in_flight.get(job_id, '-')})"
            )
            return
        first_lost = history[matches[-1] + 1][0]
        if strict:
            report.problems.append(f"{where}: {seen}, expected {views[-1]} (a change lost)")
        report.lost_ages.append(killed_at - first_lost)


def fetch(c: Client, job_id: int) -> View | None:
    stats = c.stats_job(job_id)
    if stats is None:
        return None
    body = c.peek(job_id)
    if body is None:
        return None
    return View(stats["state"], int(stats["pri"]), body)


def run_cycles(cycles: int, clients: int, fsync: list[str], stop: str, seed: int) -> Report:
    rng = random.Random(seed)
    report = Report()
    model = Model(clients)
    strict = stop == "term" or fsync == ["-f", "0"]
    with tempfile.TemporaryDirectory(prefix="beanpole-crash-") as tmp:
        log = str(Path(tmp) / "log")
        child = Child("-p", "0", "-b", log, *fsync)
        try:
            address = child.listening()
            for cycle in range(1, cycles + 1):
                workers = [
                    Worker(i, rng.randrange(2**32), dict(model.jobs[i])) for i in range(clients)
                ]
                halt = threading.Event()
                threads = [
                    threading.Thread(target=w.run, args=(address, halt, cycle), daemon=True)
                    for w in workers
                ]
                for t in threads:
                    t.start()
                time.sleep(rng.uniform(*KILL_AFTER))  # a random moment under load
                killed_at = time.monotonic()
                if stop == "term":
                    status = child.stop()
                    if status != 0:
                        report.problems.append(f"cycle {cycle}: SIGTERM exit status {status}")
                else:
                    child.kill()
                halt.set()
                for t in threads:
                    t.join(timeout=30)
                    if t.is_alive():
                        report.problems.append(f"cycle {cycle}: a client is stuck")
                for w in workers:
                    report.problems.extend(f"cycle {cycle}: {e}" for e in w.errors)
                    report.changes += w.changes
                report.cycles = cycle
                model.absorb(workers, report)
                child = Child("-p", "0", "-b", log, *fsync)
                address = child.listening()
                model.check(address, killed_at, strict, report)
                if report.problems:
                    break
        finally:
            child.kill()
    return report


# -- disk full --------------------------------------------------------------------------


@contextlib.contextmanager
def small_filesystem(size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a fresh directory (needs root)."""
    path = Path(tempfile.mkdtemp(prefix="beanpole-full-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        raise OSError(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)


def disk_full(size: str = "2m") -> list[str]:
    """Fill a small filesystem: puts are refused (OUT_OF_MEMORY), deletes work, and puts
    are accepted again once deletes made room, with no restart; a restart then finds
    exactly the acknowledged jobs. Returns the problems found."""
    problems: list[str] = []
    body = b"f" * 8000
    with small_filesystem(size) as fs:
        child = Child("-p", "0", "-b", str(fs / "log"), "-f", "0", "-s", "262144")
        try:
            address = child.listening()
            live: list[int] = []
            with Client(address) as c:
                for _ in range(10_000):
                    reply = c.cmd(f"put 0 0 60 {len(body)}", body)
                    if reply == b"OUT_OF_MEMORY":
                        break
                    live.append(int(reply.split()[1]))
                else:
                    problems.append("the filesystem never filled")
                if c.cmd(f"put 0 0 60 {len(body)}", body) != b"OUT_OF_MEMORY":
                    problems.append("a put was accepted on a full filesystem")
                full_at = len(live)
                for job_id in live[: full_at * 3 // 4]:
                    if c.cmd(f"delete {job_id}") != b"DELETED":
                        problems.append(f"delete {job_id} failed on a full filesystem")
                live = live[full_at * 3 // 4 :]
                deadline = time.monotonic() + 20
                while True:
                    reply = c.cmd(f"put 0 0 60 {len(body)}", body)
                    if reply.startswith(b"INSERTED "):
                        live.append(int(reply.split()[1]))
                        break
                    if time.monotonic() > deadline:
                        problems.append("puts still refused 20 s after deletes made room")
                        break
                    time.sleep(0.1)  # the log's own retries, not a readiness wait
            if child.stop() != 0:
                problems.append("the server did not stop cleanly")
            child = Child("-p", "0", "-b", str(fs / "log"), "-f", "0", "-s", "262144")
            address = child.listening()
            with Client(address) as c:
                stats = c.stats()
                if int(stats["current-jobs-ready"]) != len(live):
                    problems.append(
                        f"after a restart {stats['current-jobs-ready']} jobs, expected {len(live)}"
                    )
                for job_id in live:
                    if c.peek(job_id) != body:
                        problems.append(f"job {job_id} lost after the disk was full")
                        break
            print(f"disk full ({size} tmpfs): full after {full_at} puts of 8000 bytes")
        finally:
            child.kill()
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("-f", "--fsync-ms", type=int, default=0)
    parser.add_argument("--stop", choices=["kill", "term"], default="kill")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--disk-full", action="store_true", help="the disk-full check only")
    args = parser.parse_args(argv)
    if args.disk_full:
        problems = disk_full()
        for p in problems:
            print("PROBLEM:", p)
        return 1 if problems else 0
    seed = random.randrange(2**32) if args.seed is None else args.seed
    started = time.monotonic()
    report = run_cycles(args.cycles, args.clients, ["-f", str(args.fsync_ms)], args.stop, seed)
    elapsed = time.monotonic() - started
    how = "SIGTERM" if args.stop == "term" else "SIGKILL"
    print(
        f"{report.cycles} cycles ({how}, -f {args.fsync_ms}, {args.clients} clients, seed "
        f"{seed}) in {elapsed:.1f} s: {report.changes} acknowledged changes"
    )
    if report.lost_ages:
        ages = sorted(report.lost_ages)
        print(
            f"lost: {len(ages)} acknowledged changes, their replies {ages[0] * 1000:.1f} to "
            f"{ages[-1] * 1000:.1f} ms before the kill (median {ages[len(ages) // 2] * 1000:.1f})"
        )
    else:
        print("lost: nothing")
    for p in report.problems[:20]:
        print("PROBLEM:", p)
    return 1 if report.problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
