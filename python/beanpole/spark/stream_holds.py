"""The driver's connections of the streaming reader and the jobs they hold reserved.

In beanstalkd only the connection that reserved a job can delete or touch it, and
when that connection closes the job goes back to ready. The reader therefore reserves
on the driver, on one long-lived connection per server and tube, and keeps each job
reserved there until the sink has its batch; then it deletes it on the same
connection. A small thread touches the jobs held while batches run long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from beanpole.client import BatchError, Client, NotFoundError

from .stream_offsets import JobMap
from .stream_options import StreamSettings

log = logging.getLogger("beanpole.spark")

Key = tuple[str, str]


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
    """One connection per (server, tube), and per batch the ids each holds reserved."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self.clients: dict[Key, Client[bytes]] = {}
        # batch -> (server, tube) -> ids held reserved for it, not deleted yet.
        self.held: dict[int, JobMap] = {}
        # A plain lock: the touch thread reads `held` while the query's thread changes
        # it; both only copy or swap small dicts under it, never wait on the network.
        self.lock = threading.Lock()
        self.min_ttr: int | None = None
        self.lost = 0
        self._stop = threading.Event()
        self._toucher: threading.Thread | None = None

    # -- connections -------------------------------------------------------------

    def client(self, key: Key) -> Client[bytes]:
        client = self.clients.get(key)
        if client is None or not client.connected:
            server, tube = key
            try:
                client = Client(server, encoding=None, watch=tube, timeout=self.settings.timeout)
            except OSError as e:
                raise ConnectionError(f"beanpole: cannot reach server {server}: {e}") from e
            self.clients[key] = client
        return client

    def close(self) -> None:
        """Stop touching and close every connection: what is still held goes back to
        ready (a later batch, or the next run, reads it again)."""
        self._stop.set()
        if self._toucher is not None:
            self._toucher.join()
        for client in self.clients.values():
            client.close()
        self.clients.clear()

    # -- reserving ----------------------------------------------------------------

    def reserve(self, keys: list[Key], limit: int | None) -> tuple[JobMap, dict[Key, list[bytes]]]:
        """Reserve up to ``limit`` ready jobs over ``keys`` (None: all that are ready),
        shared out evenly; the ids and bodies per key, and the keys that ran dry."""
        ids: JobMap = {}
        bodies: dict[Key, list[bytes]] = {}
        active = list(keys)
        left = limit
        while active and (left is None or left > 0):
            share = None if left is None else -(-left // len(active))
            for key in list(active):
                want = share if left is None or share is None else min(share, left)
                if want is not None and want <= 0:
                    break
                asked = want if want is not None else 100_000
                jobs = self.client(key).reserve_many(asked, 0)
                if jobs:
                    ids.setdefault(key, []).extend(j.id for j in jobs)
                    bodies.setdefault(key, []).extend(j.body for j in jobs)
                    self._learn_ttr(key, jobs[0].id)
                if len(jobs) < asked:
                    active.remove(key)
                if left is not None:
                    left -= len(jobs)
        return ids, bodies

    def reserve_ids(self, key: Key, wanted: list[int]) -> tuple[list[int], list[bytes], int]:
        """Reserve the named jobs again (a replayed batch): ids and bodies found, and
        how many are gone (deleted, or reserved by someone else past the wait)."""
        client = self.client(key)
        ids: list[int] = []
        bodies: list[bytes] = []
        waiting = list(wanted)
        deadline = time.monotonic() + self.settings.release_wait
        gone = 0
        while waiting:
            later: list[int] = []
            for i in waiting:
                try:
                    job = client.reserve_job(i)
                except NotFoundError:
                    if self._reserved_elsewhere(client, i):
                        later.append(i)
                    else:
                        gone += 1
                    continue
                ids.append(job.id)
                bodies.append(job.body)
            if later and time.monotonic() >= deadline:
                log.warning(
                    "beanpole: %d jobs of a replayed batch on %s are still reserved by "
                    "another connection; they are not in the batch",
                    len(later),
                    key[0],
                )
                gone += len(later)
                break
            waiting = later
            if waiting:
                time.sleep(0.1)
        if ids:
            self._learn_ttr(key, ids[0])
        return ids, bodies, gone

    def hold(self, batch: int, ids: JobMap) -> None:
        with self.lock:
            self.held[batch] = ids
        if ids:
            self._start_touching()

    # -- deleting -----------------------------------------------------------------

    def delete(self, batch: int, named: JobMap) -> int:
        """Delete the jobs ``named`` for ``batch`` (the sink has it); how many could
        not be (their reservation ran out and someone else got them: counted lost)."""
        with self.lock:
            mine = self.held.pop(batch, {})
        lost = 0
        for key, ids in named.items():
            if not ids:
                continue
            held = set(mine.get(key, ()))
            client = self.client(key)
            missing = _delete_all(client, ids)
            deadline = time.monotonic() + self.settings.release_wait
            while missing:
                # Not found: gone already (a delete that went through before a
                # restart), or still reserved by a previous run's connection that is
                # closing, or by someone else.
                elsewhere = [i for i in missing if self._reserved_elsewhere(client, i)]
                lost += sum(1 for i in missing if i in held)
                if not elsewhere or time.monotonic() >= deadline:
                    if elsewhere:
                        lost += sum(1 for i in elsewhere if i not in held)
                        log.warning(
                            "beanpole: %d committed jobs on %s stay reserved by another "
                            "connection and could not be deleted",
                            len(elsewhere),
                            key[0],
                        )
                    break
                time.sleep(0.1)
                missing = _delete_all(client, elsewhere)
        if lost:
            log.warning("beanpole: %d jobs of batch %d were lost to a timeout", lost, batch)
        self.lost += lost
        return lost

    def _reserved_elsewhere(self, client: Client[bytes], job_id: int) -> bool:
        try:
            return client.stats_job(job_id).get("state") == "reserved"
        except NotFoundError:
            return False

    # -- touching -----------------------------------------------------------------

    def _learn_ttr(self, key: Key, job_id: int) -> None:
        try:
            ttr = int(self.client(key).stats_job(job_id).get("ttr", 0))
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
                for key, ids in jobs.items():
                    self._touch(key, ids)

    def _touch(self, key: Key, ids: Iterable[int]) -> None:
        client = self.clients.get(key)
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
