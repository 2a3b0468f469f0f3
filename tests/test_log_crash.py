"""Crash tests: ``beanpole serve -b DIR -f 0`` is killed with SIGKILL at random moments
while clients put and delete, and started again on the same directory, many times.

With ``-f 0`` a reply is only sent once its change is in the log, so after every restart:
every put answered INSERTED and not since deleted is there with its body, every delete
answered DELETED stays deleted, no job appears that nobody put, and new ids are higher
than every id handed out before. A put or delete whose reply never came (the server died
first) may have happened or not; the next restart decides which, and from then on it
must stay that way.

The run is random; the seed is printed with every failure. Set BEANPOLE_CRASH_SEED to
replay one, BEANPOLE_CRASH_ROUNDS to change the number of kills.
"""

from __future__ import annotations

import importlib.util
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from logserver import Child, Client

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)

ROUNDS = int(os.environ.get("BEANPOLE_CRASH_ROUNDS", "24"))
CLIENTS = 6
MAX_JOB_SIZE = 65535
KILL_AFTER = (0.02, 0.6)  # seconds after the server is listening, uniformly
PIPELINE = 256  # commands sent at once when checking


@dataclass
class Outcome:
    """What one client saw in one round."""

    puts: dict[int, bytes] = field(default_factory=dict)  # acknowledged: id -> body
    deletes: set[int] = field(default_factory=set)  # acknowledged
    put_in_flight: bytes | None = None  # sent, no reply
    delete_in_flight: int | None = None  # sent, no reply
    errors: list[str] = field(default_factory=list)  # replies that must not happen


def make_body(rng: random.Random, client: int, n: int) -> bytes:
    """A unique body: mostly small, sometimes large enough to span several pages."""
    size = rng.randrange(20_000, MAX_JOB_SIZE - 40) if rng.random() < 0.05 else rng.randrange(2000)
    filler = rng.randbytes(size).replace(b"\r\n", b"\0\r\n")  # NUL and CRLF inside
    return b"client %d put %d|" % (client, n) + filler[:size]


def run_client(
    address: tuple[str, int],
    seed: int,
    client: int,
    mine: list[int],
    out: Outcome,
    stop: threading.Event,
) -> None:
    """Put and delete until the server dies. ``mine``: live job ids this client may delete
    (each job belongs to one client, so no two clients race to delete it)."""
    rng = random.Random(seed)
    n = 0
    try:
        c = Client(address)
    except OSError:
        return  # killed before this client connected
    try:
        while not stop.is_set():
            if mine and rng.random() < 0.4:
                job_id = mine.pop(rng.randrange(len(mine)))
                out.delete_in_flight = job_id
                reply = c.cmd(f"delete {job_id}")
                out.delete_in_flight = None
                if reply == b"DELETED":
                    out.deletes.add(job_id)
                else:
                    out.errors.append(f"delete {job_id} (live): {reply!r}")
            else:
                n += 1
                body = make_body(rng, client, n)
                out.put_in_flight = body
                reply = c.cmd(f"put {rng.randrange(2**32)} 0 60 {len(body)}", body)
                out.put_in_flight = None
                if reply.startswith(b"INSERTED "):
                    job_id = int(reply.split()[1])
                    out.puts[job_id] = body
                    mine.append(job_id)
                else:
                    out.errors.append(f"put: {reply!r}")
    except OSError:
        pass  # the server was killed: whatever was in flight stays undecided
    except Exception as err:  # a malformed reply: fail the test, not just this thread
        out.errors.append(f"{type(err).__name__}: {err}")
    finally:
        c.close()


def peek_many(c: Client, ids: list[int]) -> dict[int, bytes | None]:
    """``peek`` every id, pipelined."""
    found: dict[int, bytes | None] = {}
    for at in range(0, len(ids), PIPELINE):
        chunk = ids[at : at + PIPELINE]
        c.sock.sendall(b"".join(b"peek %d\r\n" % i for i in chunk))
        for job_id in chunk:
            reply = c.read_line()
            if reply == b"NOT_FOUND":
                found[job_id] = None
            else:
                head, got, size = reply.split()
                assert head == b"FOUND" and int(got) == job_id, reply
                found[job_id] = c.read_body(int(size))
    return found


@dataclass
class Model:
    """What must be in the log, across all rounds."""

    live: dict[int, bytes] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)
    undecided_deletes: set[int] = field(default_factory=set)
    undecided_puts: list[bytes] = field(default_factory=list)
    highest: int = 0  # the highest id seen in a reply or found after a restart
    # The highest id known before the round with the undecided puts began: their ids
    # are above it (ids at or below it may be free, but nothing new can get them).
    floor: int = 0

    def owners(self) -> list[list[int]]:
        mine: list[list[int]] = [[] for _ in range(CLIENTS)]
        for job_id in self.live:
            mine[job_id % CLIENTS].append(job_id)
        return mine


def check_after_restart(address: tuple[str, int], model: Model, where: str) -> None:
    """Every acknowledged change is there; undecided ones are decided (and recorded)."""
    with Client(address) as c:
        # Undecided deletes: either still there (with its body) or gone, from now on.
        ids = sorted(model.undecided_deletes)
        for job_id, body in peek_many(c, ids).items():
            if body is None:
                del model.live[job_id]
                model.deleted.add(job_id)
            else:
                assert body == model.live[job_id], f"{where}: job {job_id} has another body"
        model.undecided_deletes.clear()

        # Acknowledged puts are there with their bodies; acknowledged deletes are gone.
        found = peek_many(c, sorted(model.live))
        lost = sorted(i for i, body in found.items() if body is None)
        assert not lost, f"{where}: acknowledged puts lost: {lost[:20]} ({len(lost)})"
        changed = sorted(i for i, body in found.items() if body != model.live[i])
        assert not changed, f"{where}: bodies changed: {changed[:20]}"
        gone = peek_many(c, sorted(model.deleted))
        back = sorted(i for i, body in gone.items() if body is not None)
        assert not back, f"{where}: acknowledged deletes undone: {back[:20]} ({len(back)})"

        # Ids not in the model: an undecided put, or nothing. Never a job nobody put.
        # Each client has at most one put in flight, so an undecided put's id is at most
        # CLIENTS above the highest acknowledged one.
        top = model.highest + CLIENTS
        unknown = [
            i
            for i in range(model.floor + 1, top + 1)
            if i not in model.live and i not in model.deleted
        ]
        for job_id, body in peek_many(c, unknown).items():
            if body is None:
                continue
            assert body in model.undecided_puts, (
                f"{where}: job {job_id} is a job nobody put: {body[:40]!r}"
            )
            model.undecided_puts.remove(body)
            model.live[job_id] = body
            model.highest = max(model.highest, job_id)
        model.undecided_puts.clear()

        stats = c.stats()
        assert int(stats["current-jobs-ready"]) == len(model.live), (
            f"{where}: {stats['current-jobs-ready']} jobs ready, expected {len(model.live)}"
        )
        assert stats["current-jobs-reserved"] == "0"


def test_acknowledged_changes_survive_sigkill(tmp_path: Path) -> None:
    seed = int(os.environ.get("BEANPOLE_CRASH_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    log = tmp_path / "log"
    model = Model()
    started = time.monotonic()
    child: Child | None = None
    kills = 0
    try:
        for round_ in range(ROUNDS + 1):
            where = f"seed {seed}, after kill {round_}"
            child = Child("-p", "0", "-b", str(log), "-f", "0")
            address = child.listening()
            if round_ == ROUNDS:
                check_after_restart(address, model, where)
                assert child.stop() == 0
                break
            check_after_restart(address, model, where)
            floor = model.floor = model.highest  # every new id must be above this

            outcomes = [Outcome() for _ in range(CLIENTS)]
            owners = model.owners()
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=run_client,
                    args=(address, rng.randrange(2**32), i, owners[i], outcomes[i], stop),
                    daemon=True,
                )
                for i in range(CLIENTS)
            ]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(*KILL_AFTER))  # a random moment, not a wait for readiness
            child.kill()
            kills += 1
            stop.set()
            for t in threads:
                t.join(timeout=10)
                assert not t.is_alive(), f"{where}: a client is stuck"

            for out in outcomes:
                assert not out.errors, f"{where}: {out.errors[:5]}"
                reused = sorted(i for i in out.puts if i <= floor)
                assert not reused, f"{where}: ids handed out again: {reused[:10]} (<= {floor})"
                model.live.update(out.puts)
                for job_id in out.deletes:
                    model.live.pop(job_id)
                    model.deleted.add(job_id)
                if out.put_in_flight is not None:
                    model.undecided_puts.append(out.put_in_flight)
                if out.delete_in_flight is not None:
                    model.undecided_deletes.add(out.delete_in_flight)
                model.highest = max([model.highest, *out.puts])
    finally:
        if child is not None:
            child.kill()
    elapsed = time.monotonic() - started
    print(
        f"seed {seed}: {kills} kills in {elapsed:.1f}s, {len(model.live)} jobs live, "
        f"{len(model.deleted)} deleted"
    )
    assert kills == ROUNDS
    assert len(model.live) + len(model.deleted) > ROUNDS * 10, "too little load to mean much"


# -- every kind of change, not just put and delete ------------------------------------------

STATE_ROUNDS = int(os.environ.get("BEANPOLE_CRASH_STATE_ROUNDS", "12"))
STATE_KEYS = ("state", "pri", "reserves", "releases", "buries", "kicks", "timeouts")


@dataclass(frozen=True)
class JobView:
    """What a job's stats-job must say (a reserved job comes back ready)."""

    state: str
    pri: int
    reserves: int = 0
    releases: int = 0
    buries: int = 0
    kicks: int = 0
    timeouts: int = 0

    def after_restart(self) -> JobView:
        if self.state != "reserved":
            return self
        return JobView("ready", *(getattr(self, k) for k in STATE_KEYS[1:]))

    @staticmethod
    def parse(stats: dict[str, str]) -> JobView:
        return JobView(stats["state"], *(int(stats[k]) for k in STATE_KEYS[1:]))

    def but(self, **changes: object) -> JobView:
        values = {k: getattr(self, k) for k in STATE_KEYS}
        values.update(changes)
        return JobView(**values)


@dataclass
class StateOutcome:
    views: dict[int, JobView] = field(default_factory=dict)  # acknowledged changes
    deleted: set[int] = field(default_factory=set)
    # A change sent without a reply: the job is either as before or as after it.
    undecided: dict[int, tuple[JobView | None, JobView | None]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def run_state_client(
    address: tuple[str, int],
    seed: int,
    client: int,
    mine: dict[int, JobView],
    out: StateOutcome,
    stop: threading.Event,
) -> None:
    """Change this client's jobs at random: put, reserve-job then release (delay 0 or
    not, new priority), bury, kick-job, delete. Each change is acknowledged or left
    undecided when the server dies."""
    rng = random.Random(seed)
    try:
        c = Client(address)
    except OSError:
        return
    c.use(f"t{client}")
    job_id = 0
    view: JobView | None = None

    def step(line: str, expect: bytes, after: JobView | None) -> bool:
        out.undecided[job_id] = (view, after)
        reply = c.cmd(line)
        del out.undecided[job_id]
        if not reply.startswith(expect):
            out.errors.append(f"{line} on {view}: {reply!r}")
            return False
        if line.startswith("reserve-job"):
            c.read_body(int(reply.split()[2]))
        if after is None:
            mine.pop(job_id, None)
            out.views.pop(job_id, None)
            out.deleted.add(job_id)
        else:
            mine[job_id] = out.views[job_id] = after
        return True

    try:
        while not stop.is_set():
            pri = rng.randrange(2**32)
            if not mine or rng.random() < 0.25:
                body = b"client %d job" % client
                reply = c.cmd(f"put {pri} 0 60 {len(body)}", body)
                if not reply.startswith(b"INSERTED "):
                    out.errors.append(f"put: {reply!r}")
                    continue
                job_id = int(reply.split()[1])
                mine[job_id] = out.views[job_id] = JobView("ready", pri)
                continue
            job_id = rng.choice(list(mine))
            view = mine[job_id]
            action = rng.random()
            if view.state != "reserved":
                if view.state in ("buried", "delayed") and action < 0.5:
                    kicked = view.but(state="ready", kicks=view.kicks + 1)
                    step(f"kick-job {job_id}", b"KICKED", kicked)
                    continue
                if action < 0.1:
                    step(f"delete {job_id}", b"DELETED", None)
                    continue
                reserved = view.but(state="reserved", reserves=view.reserves + 1)
                if not step(f"reserve-job {job_id}", b"RESERVED", reserved):
                    continue
                view = reserved
            then = rng.random()
            if then < 0.35:
                after = view.but(state="ready", pri=pri, releases=view.releases + 1)
                step(f"release {job_id} {pri} 0", b"RELEASED", after)
            elif then < 0.55:
                after = view.but(state="delayed", pri=pri, releases=view.releases + 1)
                step(f"release {job_id} {pri} 3600", b"RELEASED", after)
            elif then < 0.85:
                after = view.but(state="buried", pri=pri, buries=view.buries + 1)
                step(f"bury {job_id} {pri}", b"BURIED", after)
            elif then < 0.95:
                step(f"delete {job_id}", b"DELETED", None)
            # else: it stays reserved by this connection
    except OSError:
        pass
    except Exception as err:
        out.errors.append(f"{type(err).__name__}: {err}")
    finally:
        c.close()


def test_every_kind_of_change_survives_sigkill(tmp_path: Path) -> None:
    seed = int(os.environ.get("BEANPOLE_CRASH_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    log = tmp_path / "log"
    model: dict[int, JobView] = {}
    deleted: set[int] = set()
    undecided: dict[int, tuple[JobView | None, JobView | None]] = {}
    child: Child | None = None
    changes = 0
    try:
        for round_ in range(STATE_ROUNDS + 1):
            where = f"seed {seed}, after kill {round_}"
            child = Child("-p", "0", "-b", str(log), "-f", "0")
            address = child.listening()
            with Client(address) as c:
                problems = []
                for job_id in sorted(set(model) | set(undecided)):
                    stats = c.stats_job(job_id)
                    seen = None if stats is None else JobView.parse(stats)
                    if job_id in undecided:
                        before, after = undecided[job_id]
                        allowed = [v.after_restart() if v else None for v in (before, after)]
                        if seen not in allowed:
                            problems.append(f"job {job_id}: {seen}, expected one of {allowed}")
                    elif seen != model[job_id].after_restart():
                        problems.append(f"job {job_id}: {seen}, expected {model[job_id]}")
                    if seen is None:
                        model.pop(job_id, None)
                        deleted.add(job_id)
                    else:
                        model[job_id] = seen
                for job_id in sorted(deleted):
                    if c.stats_job(job_id) is not None:
                        problems.append(f"job {job_id} was deleted and is back")
                undecided.clear()
                assert not problems, f"{where}:\n" + "\n".join(problems[:20])
            if round_ == STATE_ROUNDS:
                assert child.stop() == 0
                break

            outcomes = [StateOutcome() for _ in range(CLIENTS)]
            owned: list[dict[int, JobView]] = [{} for _ in range(CLIENTS)]
            for job_id, view in model.items():
                owned[job_id % CLIENTS][job_id] = view
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=run_state_client,
                    args=(address, rng.randrange(2**32), i, owned[i], outcomes[i], stop),
                    daemon=True,
                )
                for i in range(CLIENTS)
            ]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(*KILL_AFTER))  # a random moment, not a wait for readiness
            child.kill()
            stop.set()
            for t in threads:
                t.join(timeout=10)
                assert not t.is_alive(), f"{where}: a client is stuck"
            for out in outcomes:
                assert not out.errors, f"{where}: {out.errors[:5]}"
                changes += len(out.views) + len(out.deleted)
                model.update(out.views)
                for job_id in out.deleted:
                    model.pop(job_id, None)
                    deleted.add(job_id)
                undecided.update(out.undecided)
    finally:
        if child is not None:
            child.kill()
    print(f"seed {seed}: {len(model)} jobs, {len(deleted)} deleted, {changes} changes")
    assert changes > STATE_ROUNDS * 10, "too little load to mean much"
