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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from beanpole.client import BatchError, Client, Job, NotFoundError

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
T = TypeVar("T")


def _delete_all(client: Client[bytes], ids: list[int]) -> list[int]:
    """Delete every id, pipelined; the ids the server answered NOT_FOUND for."""
    missing: list[int] = []
    rest = ids
    while rest:
        try:
            client.delete_many(rest)
            return missing
        except BatchError as e:
            if not isinstance(e.reason, NotFoundError):
                raise e.reason from e
            missing.append(rest[e.index])
            # Items after the failed one that were in flight are listed in e.after;
            # the others were never sent.
            done = {i for i, _ in e.after}
            rest = [x for i, x in enumerate(rest) if i > e.index and i not in done]
    return missing


class Holds:
    """A pool of connections per (server, tube), and per batch the ids each holds."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self.clients: dict[Slot, Client[bytes]] = {}
        # batch -> connection -> ids held reserved for it, not deleted yet.
        self.held: dict[int, dict[Slot, list[int]]] = {}
        # A plain lock: the touch thread reads `held` while the query's thread changes
        # it; both only copy or swap small dicts under it, never wait on the network.
        self.lock = threading.Lock()
        self.min_ttr: int | None = None
        self.lost = 0
        self._stop = threading.Event()
        self._toucher: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- connections -------------------------------------------------------------

    def client(self, slot: Slot) -> Client[bytes]:
        client = self.clients.get(slot)
        if client is None or not client.connected:
            server, tube, _ = slot
            try:
                client = Client(server, encoding=None, watch=tube, timeout=self.settings.timeout)
            except OSError as e:
                raise ConnectionError(f"beanpole: cannot reach server {server}: {e}") from e
            self.clients[slot] = client
        return client

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
        if self._toucher is not None:
            self._toucher.join()
        if self._pool is not None:
            self._pool.shutdown()
        for client in self.clients.values():
            client.close()
        self.clients.clear()

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
        for slot, found in ids.items():
            self._learn_ttr(slot, found[0])
            break
        return ids, bodies

    def _reserver(self, slot: Slot, n: int) -> Callable[[], list[Job[bytes]]]:
        return lambda: self.client(slot).reserve_many(n, 0)

    def reserve_ids(self, slot: Slot, wanted: list[int]) -> tuple[list[int], list[bytes], int]:
        """Reserve the named jobs again (a replayed batch): ids and bodies found, and
        how many are gone (deleted, or reserved by someone else past the wait)."""
        client = self.client(slot)
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
        if ids:
            self._learn_ttr(slot, ids[0])
        return ids, bodies, gone

    def hold(self, batch: int, ids: dict[Slot, list[int]]) -> None:
        with self.lock:
            self.held[batch] = ids
        if ids:
            self._start_touching()

    # -- deleting -----------------------------------------------------------------

    def delete(self, batch: int, named: JobMap) -> int:
        """Delete the jobs ``named`` for ``batch`` (the sink has it), each on the
        connection that holds it; how many could not be (their reservation ran out
        and someone else got them: counted lost)."""
        with self.lock:
            mine = self.held.pop(batch, {})
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
        lost = sum(self.each([self._deleter(slot, ids, held) for slot, ids, held in plan]))
        if lost:
            log.warning("beanpole: %d jobs of batch %d were lost to a timeout", lost, batch)
        self.lost += lost
        return lost

    def _deleter(self, slot: Slot, ids: list[int], held: bool) -> Callable[[], int]:
        def run() -> int:
            client = self.client(slot)
            missing = _delete_all(client, ids)
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
                missing = _delete_all(client, elsewhere)
            return lost

        return run

    def _reserved_elsewhere(self, client: Client[bytes], job_id: int) -> bool:
        try:
            return client.stats_job(job_id).get("state") == "reserved"
        except NotFoundError:
            return False

    # -- touching -----------------------------------------------------------------

    def _learn_ttr(self, slot: Slot, job_id: int) -> None:
        try:
            ttr = int(self.client(slot).stats_job(job_id).get("ttr", 0))
        except NotFoundError:
            return
        if ttr > 0 and (self.min_ttr is None or ttr < self.min_ttr):
            self.min_ttr = ttr

    def interval(self) -> float:
        if self.settings.touch_interval is not None:
            return self.settings.touch_interval
        return max(0.5, (self.min_ttr or 60) / 2)

    def _start_touching(self) -> None:
        if self._toucher is None:
            self._toucher = threading.Thread(
                target=self._touch_loop, name="beanpole-touch", daemon=True
            )
            self._toucher.start()

    def _touch_loop(self) -> None:
        while not self._stop.wait(self.interval()):
            with self.lock:
                batches = [dict(m) for m in self.held.values()]
            for jobs in batches:
                for slot, ids in jobs.items():
                    self._touch(slot, ids)

    def _touch(self, slot: Slot, ids: Iterable[int]) -> None:
        client = self.clients.get(slot)
        if client is None:
            return
        for i in ids:
            if self._stop.is_set():
                return
            try:
                client.touch(i)
            except NotFoundError:
                # Deleted meanwhile, or lost; deleting counts the lost ones.
                continue
            except (OSError, ConnectionError):
                return
