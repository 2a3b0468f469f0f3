"""The driver's connections of the streaming reader and the jobs they hold reserved.

In beanstalkd only the connection that reserved a job can delete or touch it, and
when that connection closes the job goes back to ready. The reader therefore reserves
on the driver, on one long-lived connection per server and tube, and keeps each job
reserved there until the sink has its batch; then it deletes it on the same
connection. A small thread touches the jobs held while batches run long.

A connection holds at most ``CHUNK`` jobs of a batch: a server checks, at every
reserve, whether one of the connection's reservations is close to its deadline, and
that check grows with the number of jobs the connection holds. So a batch is
reserved over a pool of connections per server and tube (``CHUNK`` jobs each, a few
at a time in threads, since the client releases the GIL while it waits).

Every connection learns, when it opens, the instance of the server it reached (the
``id`` of ``stats``: it changes exactly when job ids start over). Ids are deleted or
reserved again by id only on the instance they were recorded with; on any other they
name other jobs, so they are left alone and counted as ``orphaned``.

A batch still held half a second after it was reserved (a TTR is at least 1 s) is
touched then (pipelined), and again every half second; at its fourth touch its jobs'
TTRs are read (pipelined ``stats-job``), and from then on it is touched every half of
the smallest of them. Reading the TTRs costs about as much as four touches (for
100,000 held jobs, here: 61 ms against 17 ms a touch pass), so it waits until the
touches made have cost about that much: a batch done within half a second costs
nothing, one done within two seconds one touch per job per half second, and a batch
held long never costs more than twice what knowing its TTRs from the start would.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from beanpole.client.blocking import Client, ClientError, Job, NotFoundError

from .instances import delete_ids, instance_of
from .stream_offsets import JobMap
from .stream_options import StreamSettings

log = logging.getLogger("beanpole.spark")

#: (server, tube)
Key = tuple[str, str]
#: (server, tube, connection number)
Slot = tuple[str, str, int]
#: Jobs one connection reserves for a batch.
CHUNK = 1000
#: Connections working at once.
THREADS = 4
#: Seconds from a batch's reserve to its first touch at the latest (the smallest TTR
#: there is, 1 s, halved), and between touches at the least.
MIN_TOUCH = 0.5
#: Touches of a batch before its jobs' TTRs are read (see the module's text).
TOUCHES_BEFORE_TTRS = 4
T = TypeVar("T")


class Holds:
    """A pool of connections per (server, tube), and per batch the ids each holds."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self.clients: dict[Slot, Client[bytes]] = {}
        # The instance each open connection reached.
        self.instances: dict[Slot, str] = {}
        # batch -> connection -> ids held reserved for it, not deleted yet.
        self.held: dict[int, dict[Slot, list[int]]] = {}
        # batch -> (smallest TTR of its jobs in seconds, or None until read; touches
        # made; when it is next due a touch).
        self.due: dict[int, tuple[int | None, int, float]] = {}
        # A plain lock: the touch thread reads `held` and `due` while the query's thread
        # changes them; both only copy or swap small dicts under it, never wait on the
        # network.
        self.lock = threading.Lock()
        self.lost = 0
        self.orphaned = 0
        # batch -> (server, id) found on another instance: each counted once, although
        # a replayed batch is then also settled.
        self._orphans: dict[int, set[tuple[str, int]]] = {}
        # Set to stop the touch thread; `_changed` wakes it when a batch is held.
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._toucher: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- connections -------------------------------------------------------------

    def client(self, slot: Slot) -> Client[bytes]:
        client = self.clients.get(slot)
        if client is None or not client.connected:
            server, tube, _ = slot
            try:
                client = Client(server, encoding=None, watch=tube, timeout=self.settings.timeout)
                self.instances[slot] = instance_of(client)
            except OSError as e:
                raise ConnectionError(f"beanpole: cannot reach server {server}: {e}") from e
            self.clients[slot] = client
        return client

    def instance(self, slot: Slot) -> str:
        """The instance the slot's connection reached (connecting if needed)."""
        self.client(slot)
        return self.instances[slot]

    def instances_of(self, slots: Iterable[Slot]) -> dict[str, str]:
        """Per server, the instance its slots' jobs were reserved on."""
        out: dict[str, str] = {}
        for slot in slots:
            found = self.instances[slot]
            if out.setdefault(slot[0], found) != found:
                raise ConnectionError(
                    f"beanpole: server {slot[0]} restarted while the batch was reserved "
                    f"(instance {out[slot[0]]} and {found})"
                )
        return out

    def each(self, work: list[Callable[[], T]]) -> list[T]:
        """Run the calls, a few at a time on threads; their results in order."""
        if len(work) <= 1:
            return [w() for w in work]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(THREADS, thread_name_prefix="beanpole-reserve")
        return list(self._pool.map(lambda w: w(), work))

    def close(self) -> None:
        """Stop touching and close every connection: what is still held goes back to
        ready (a later batch, or the next run, reads it again)."""
        self._stop.set()
        self._changed.set()
        if self._toucher is not None:
            self._toucher.join()
        if self._pool is not None:
            self._pool.shutdown()
        for client in self.clients.values():
            client.close()
        self.clients.clear()
        self.instances.clear()

    # -- reserving ----------------------------------------------------------------

    def reserve(
        self, keys: list[Key], limit: int | None
    ) -> tuple[dict[Slot, list[int]], dict[Slot, list[bytes]]]:
        """Reserve up to ``limit`` ready jobs over ``keys`` (None: all that are ready),
        shared out evenly; the ids and bodies per connection."""
        ids: dict[Slot, list[int]] = {}
        bodies: dict[Slot, list[bytes]] = {}
        active = list(keys)
        left = limit
        used = dict.fromkeys(keys, 0)
        while active and (left is None or left > 0):
            share = CHUNK * THREADS * 4 if left is None else -(-left // len(active))
            asks: list[tuple[Slot, int]] = []
            for key in active:
                want = share if left is None else min(share, left - sum(n for _, n in asks))
                while want > 0:
                    n = min(CHUNK, want)
                    asks.append(((key[0], key[1], used[key]), n))
                    used[key] += 1
                    want -= n
            if not asks:
                break
            got = self.each([self._reserver(slot, n) for slot, n in asks])
            dry: set[Key] = set()
            for (slot, n), jobs in zip(asks, got, strict=True):
                if jobs:
                    ids.setdefault(slot, []).extend(j.id for j in jobs)
                    bodies.setdefault(slot, []).extend(j.body for j in jobs)
                if len(jobs) < n:
                    dry.add((slot[0], slot[1]))
                if left is not None:
                    left -= len(jobs)
            active = [k for k in active if k not in dry]
        return ids, bodies

    def _reserver(self, slot: Slot, n: int) -> Callable[[], list[Job[bytes]]]:
        return lambda: self.client(slot).reserve_many(n, 0)

    def reserve_ids(
        self, batch: int, slot: Slot, wanted: list[int], instance: str | None
    ) -> tuple[list[int], list[bytes], int]:
        """Reserve the named jobs again (a replayed batch) on the instance they were
        recorded with: ids and bodies found, and how many are gone (deleted, or
        reserved by someone else past the wait). On another instance (or none
        recorded) nothing is reserved: the ids are counted orphaned."""
        client = self.client(slot)
        if self.instances[slot] != instance:
            self._orphan(batch, slot[0], instance, self.instances[slot], wanted, "replayed")
            return [], [], 0
        ids: list[int] = []
        bodies: list[bytes] = []
        waiting = list(wanted)
        deadline = time.monotonic() + self.settings.release_wait
        gone = 0
        while waiting:
            later: list[int] = []
            # Pipelined: a replayed batch may name many thousands of jobs.
            for i, job in zip(waiting, client.reserve_job_many(waiting), strict=True):
                if job is not None:
                    ids.append(job.id)
                    bodies.append(job.body)
                elif self._reserved_elsewhere(client, i):
                    later.append(i)
                else:
                    gone += 1
            if later and time.monotonic() >= deadline:
                log.warning(
                    "beanpole: %d jobs of a replayed batch on %s are still reserved by "
                    "another connection; they are not in the batch",
                    len(later),
                    slot[0],
                )
                gone += len(later)
                break
            waiting = later
            if waiting:
                time.sleep(0.1)
        return ids, bodies, gone

    def hold(self, batch: int, ids: dict[Slot, list[int]], since: float) -> None:
        """Keep the batch's jobs, reserved from ``since`` (monotonic time) on, reserved
        (touched) until the batch is deleted."""
        with self.lock:
            self.held[batch] = ids
            if ids:
                self.due[batch] = (None, 0, since + self._half(None))
        if ids:
            self._start_touching()
            self._changed.set()

    def _orphan(
        self, batch: int, server: str, recorded: str | None, now: str, ids: list[int], what: str
    ) -> None:
        with self.lock:
            seen = self._orphans.setdefault(batch, set())
            new = {(server, i) for i in ids} - seen
            seen |= new
            self.orphaned += len(new)
        n = len(ids)
        log.warning(
            "beanpole: %d jobs of the checkpoint on %s were not %s: they belong to "
            "instance %s, and the server is now instance %s (it restarted without its "
            "log, so these ids name other jobs); counted as orphaned",
            n,
            server,
            what,
            recorded or "(not recorded)",
            now,
        )

    # -- deleting -----------------------------------------------------------------

    def delete(self, batch: int, named: JobMap, instances: dict[str, str]) -> int:
        """Delete the jobs ``named`` for ``batch`` (the sink has it), each on the
        connection that holds it, on the instance recorded for its server; how many
        could not be (their reservation ran out and someone else got them: counted
        lost). Ids recorded on another instance are left alone (counted orphaned)."""
        with self.lock:
            mine = self.held.pop(batch, {})
            self.due.pop(batch, None)
        plan: list[tuple[Slot, list[int], bool]] = []
        for key, ids in named.items():
            rest = set(ids)
            for slot, held in mine.items():
                if (slot[0], slot[1]) == key:
                    plan.append((slot, held, True))
                    rest.difference_update(held)
            if rest:
                # Not held here: a previous run reserved them, and its connection has
                # closed (or is closing), so they are ready again.
                plan.append(((key[0], key[1], 0), sorted(rest), False))
        lost = sum(
            self.each(
                [
                    self._deleter(batch, slot, ids, held, instances.get(slot[0]))
                    for slot, ids, held in plan
                ]
            )
        )
        with self.lock:
            self._orphans = {b: o for b, o in self._orphans.items() if b > batch}
        if lost:
            log.warning("beanpole: %d jobs of batch %d were lost to a timeout", lost, batch)
        self.lost += lost
        return lost

    def _deleter(
        self, batch: int, slot: Slot, ids: list[int], held: bool, instance: str | None
    ) -> Callable[[], int]:
        def run() -> int:
            client = self.client(slot)
            if self.instances[slot] != instance:
                self._orphan(batch, slot[0], instance, self.instances[slot], ids, "deleted")
                return 0
            missing = delete_ids(client, ids)
            deadline = time.monotonic() + self.settings.release_wait
            lost = 0
            while missing:
                # Not found: gone already (a delete that went through before a
                # restart), or still reserved by a previous run's connection that is
                # closing, or by someone else.
                elsewhere = [i for i in missing if self._reserved_elsewhere(client, i)]
                if held:
                    lost += len(missing)
                    break
                if not elsewhere or time.monotonic() >= deadline:
                    if elsewhere:
                        lost += len(elsewhere)
                        log.warning(
                            "beanpole: %d committed jobs on %s stay reserved by another "
                            "connection and could not be deleted",
                            len(elsewhere),
                            slot[0],
                        )
                    break
                time.sleep(0.1)
                missing = delete_ids(client, elsewhere)
            return lost

        return run

    def _reserved_elsewhere(self, client: Client[bytes], job_id: int) -> bool:
        try:
            return client.stats_job(job_id).get("state") == "reserved"
        except NotFoundError:
            return False

    # -- touching -----------------------------------------------------------------

    def _half(self, ttr: int | None) -> float:
        """Seconds from a touch to the next: half the TTR (of the least TTR there is
        while it is not known yet), at least half a second."""
        if self.settings.touch_interval is not None:
            return self.settings.touch_interval
        return max(MIN_TOUCH, (ttr or 1) / 2)

    def _start_touching(self) -> None:
        if self._toucher is None:
            self._toucher = threading.Thread(
                target=self._touch_loop, name="beanpole-touch", daemon=True
            )
            self._toucher.start()

    def _touch_loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                nearest = min((at for _, _, at in self.due.values()), default=None)
            wait = None if nearest is None else max(0.0, nearest - time.monotonic())
            if wait is None or wait > 0:
                self._changed.wait(wait)
                self._changed.clear()
                continue
            now = time.monotonic()
            with self.lock:
                due = [b for b, (_, _, at) in self.due.items() if at <= now]
            for batch in due:
                if self._stop.is_set():
                    return
                touched = time.monotonic()
                self.touch(batch)
                with self.lock:
                    ttr, touches, _ = self.due.get(batch, (None, 0, 0.0))
                touches += 1
                if ttr is None and touches >= TOUCHES_BEFORE_TTRS:
                    ttr = self.least_ttr(batch)
                with self.lock:
                    if batch in self.due:
                        self.due[batch] = (ttr, touches, touched + self._half(ttr))

    def least_ttr(self, batch: int) -> int:
        """The smallest time to run among the jobs held for ``batch`` (pipelined
        stats-job on the connections holding them); 60 when none is found."""
        with self.lock:
            jobs = dict(self.held.get(batch, {}))
        least: int | None = None
        for slot, ids in jobs.items():
            client = self.clients.get(slot)
            if client is None or not ids:
                continue
            try:
                found = [t for t in client.ttr_many(ids) if t is not None]
            except (OSError, ConnectionError, ClientError):
                continue
            if found and (least is None or min(found) < least):
                least = min(found)
        return 60 if least is None else least

    def touch(self, batch: int) -> None:
        """Touch every job held for ``batch``, pipelined per connection."""
        with self.lock:
            jobs = dict(self.held.get(batch, {}))
        for slot, ids in jobs.items():
            if self._stop.is_set():
                return
            self._touch(slot, ids)

    def _touch(self, slot: Slot, ids: list[int]) -> None:
        """Touch the jobs a connection holds, pipelined; a job not found was deleted
        meanwhile or lost (deleting counts the lost ones)."""
        client = self.clients.get(slot)
        if client is None:
            return
        try:
            client.touch_many(ids)
        except (OSError, ConnectionError, ClientError):
            return

