"""The streaming reader: ``spark.readStream.format("beanpole")``.

How a micro-batch goes (docs/spark.md has the user's view):

1. ``latestOffset(start, limit)`` runs on the driver. Spark calls it once the sink
   has the batch that ends at ``start``, so the jobs ``start`` names are deleted first.
   Then up to ``limit`` jobs are reserved, on the driver's long-lived connections (one
   per server and tube), and the offset returned names their ids.
2. ``partitions(start, end)`` gives one partition per server and tube, carrying the
   reserved ids and bodies as Arrow IPC bytes; ``read`` in the tasks turns each into
   rows. When ``end`` is not a batch this reader reserved (a restarted query replays
   the batch its checkpoint planned but did not commit), the named jobs are reserved
   again by id with ``reserve-job``: the previous run's connection closed, so they
   are ready again.
3. ``commit(end)`` deletes what ``end`` names, if that was not done already. Spark
   calls it only when it plans a following batch in the same run, which is why the
   deletion in step 1 is what a run's last batch and a restart rely on.

Jobs held reserved are touched by a driver thread while batches run long. ``stop``
first deletes the last batch the sink has committed, when the query's checkpoint
directory is given (option ``checkpointLocation``: its commit log says which batch
that is), then closes the connections, so anything still held goes back to ready.
Spark stops the reader's process with SIGTERM (pyspark 4.x), which would end it
before ``stop`` runs; so the first driver-side call turns SIGTERM in that process
into ``SystemExit``, and pyspark's own ``finally`` then calls ``stop``.

Offsets record each server's instance (:mod:`.stream_offsets`); ids are deleted or
replayed only on that instance.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from beanpole.client.blocking import Client, NotFoundError

from .instances import instance_of
from .rows import ROW_SCHEMA
from .stream_holds import CHUNK, Holds, Key, Slot
from .stream_offsets import JobMap, Offset, committed
from .stream_options import StreamSettings

log = logging.getLogger("beanpole.spark")

#: Seconds between two looks at the checkpoint's commit log while a batch is held.
WATCH_COMMITS = 0.02

_IDS_BODIES = pa.schema([pa.field("id", pa.int64()), pa.field("body", pa.binary())])


@dataclass(frozen=True)
class StreamPart(InputPartition):
    """The jobs of one server and tube in one micro-batch, as Arrow IPC bytes."""

    server: str
    instance: str
    tube: str
    rows: int
    data: bytes
    with_priority: bool
    timeout: float | None


def pack(ids: list[int], bodies: list[bytes]) -> bytes:
    batch = pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.int64()), pa.array(bodies, pa.binary())], schema=_IDS_BODIES
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _IDS_BODIES) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def rows(part: StreamPart) -> pa.RecordBatch:
    """A partition's rows, in the reader's schema."""
    table = pa.ipc.open_stream(pa.py_buffer(part.data)).read_all()
    n = table.num_rows
    ids = table.column("id").combine_chunks()
    if part.with_priority:
        priority = pa.array(_priorities(part, ids.to_pylist()), pa.int64())
    else:
        priority = pa.nulls(n, pa.int64())
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(part.server, pa.string()), n),
            pa.repeat(pa.scalar(part.instance, pa.string()), n),
            ids,
            pa.repeat(pa.scalar(part.tube, pa.string()), n),
            priority,
            table.column("body").combine_chunks(),
        ],
        schema=ROW_SCHEMA,
    )


def _priorities(part: StreamPart, ids: list[int]) -> list[int | None]:
    """Each job's priority now (pipelined stats-job); None for a job gone meanwhile,
    and for every job when the server is no longer the instance that gave them."""
    with Client(part.server, encoding=None, timeout=part.timeout) as client:
        if instance_of(client) != part.instance:
            return [None] * len(ids)
        return [None if got is None else got[1] for got in client.stats_job_many(ids)]


def _exit_on_term(signum: int, frame: object) -> None:
    # Once: Spark may signal the process more than once as it stops, and a second
    # SystemExit raised inside stop() would cut its deletes short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def _by_key(
    slots: dict[Slot, list[int]], data: dict[Slot, list[bytes]]
) -> tuple[JobMap, dict[Key, list[bytes]]]:
    """Per-connection ids and bodies, merged per (server, tube)."""
    ids: JobMap = {}
    bodies: dict[Key, list[bytes]] = {}
    for slot in sorted(slots):
        key = (slot[0], slot[1])
        ids.setdefault(key, []).extend(slots[slot])
        bodies.setdefault(key, []).extend(data[slot])
    return ids, bodies


def _limit(limit: ReadLimit, settings: StreamSettings) -> int | None:
    if isinstance(limit, ReadAllAvailable):
        return None
    if isinstance(limit, ReadMaxRows):
        return int(limit.max_rows)
    return settings.max_rows_per_trigger


class BeanpoleStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self.keys: list[Key] = [(s, t) for s in settings.servers for t in settings.tubes]
        self.holds = Holds(settings)
        # Batches reserved here and not yet planned: batch -> (offset, bodies).
        self.pending: dict[int, tuple[Offset, dict[Key, list[bytes]]]] = {}
        # The answer to the last latestOffset, by its start (Spark may ask again).
        self.answered: tuple[dict[str, Any], dict[str, Any]] | None = None
        # The last batch planned, so that planning it twice gives the same partitions.
        self.planned: tuple[dict[str, Any], list[InputPartition]] | None = None
        # Batches at or below this are deleted.
        self.settled = -1
        self.redelivered = 0
        # The counters (redelivered, lost, orphaned) of the last offset settled.
        self.counted = (0, 0, 0)
        # availableNow: jobs each (server, tube) may still give in this run.
        self.budget: dict[Key, int] | None = None
        # Whether this process runs the driver side (see _on_driver).
        self.driver = False
        # Spark's calls and the commit-log watcher both settle batches: one at a time.
        # Reentrant, since a call settles (and the watcher's settle is a call's too).
        self.lock = threading.RLock()
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def _on_driver(self) -> None:
        """Once, in the process that runs the reader's driver side: make SIGTERM (how
        Spark stops that process) end it through ``stop``."""
        if self.driver:
            return
        self.driver = True
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_term)
        if self.settings.checkpoint is not None:
            self._watcher = threading.Thread(
                target=self._watch_commits, name="beanpole-commits", daemon=True
            )
            self._watcher.start()

    def _watch_commits(self) -> None:
        """Delete each batch as soon as the checkpoint's commit log shows the sink has
        it, rather than when Spark next plans (which a stop may never come to)."""
        assert self.settings.checkpoint is not None
        while not self._watch_stop.wait(WATCH_COMMITS):
            if not self.holds.held:
                continue
            try:
                done = committed(self.settings.checkpoint, self.settings.servers)
                if done is not None and done.batch > self.settled:
                    with self.lock:
                        self._trace("commit-seen", end=done.to_json())
                        self._settle(done)
            except Exception as e:  # the next call of Spark's settles and reports it
                log.warning("beanpole: deleting a committed batch failed: %s", e)

    def __reduce__(self) -> tuple[type, tuple[StreamSettings]]:
        # Spark pickles the reader to run read() in the tasks, which needs nothing but
        # the partition: the connections and the driver's state stay behind.
        return (type(self), (self.settings,))

    # -- Spark's calls -------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        self._on_driver()
        self._trace("initialOffset")
        return Offset(0).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.settings.max_rows_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        with self.lock:
            self._on_driver()
            # The jobs ready now are the run's data: no more than that many are read.
            budget: dict[Key, int] = {}
            for key in self.keys:
                try:
                    stats = self.holds.client((key[0], key[1], 0)).stats_tube(key[1])
                    budget[key] = int(stats.get("current-jobs-ready", 0))
                except NotFoundError:
                    budget[key] = 0
            self.budget = budget
            self._trace("prepareForTriggerAvailableNow", budget=sum(budget.values()))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        with self.lock:
            self._on_driver()
            self._trace("latestOffset", start=start, limit=repr(limit))
            begin = Offset.from_json(start)
            self._settle(begin)
            if self.answered is not None and self.answered[0] == start:
                return self.answered[1]
            keys = self.keys
            if self.budget is not None:
                keys = [k for k in keys if self.budget.get(k, 0) > 0]
            most = _limit(limit, self.settings)
            if self.budget is not None:
                room = sum(self.budget[k] for k in keys)
                most = room if most is None else min(most, room)
            since = time.monotonic()
            slots, data = self.holds.reserve(keys, most) if keys else ({}, {})
            ids, bodies = _by_key(slots, data)
            if self.budget is not None:
                for key in self.budget:
                    got = len(ids.get(key, ()))
                    # A tube that gave less than its share is dry for this run.
                    self.budget[key] = max(0, self.budget[key] - got) if got else 0
            if not ids:
                return start
            end = self._offset(begin.batch + 1, ids, self.holds.instances_of(slots))
            self.holds.hold(end.batch, slots, since)
            self.pending[end.batch] = (end, bodies)
            answer = end.to_json()
            self.answered = (start, answer)
            return answer

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        with self.lock:
            self._on_driver()
            self._trace("partitions", start=start, end=end)
            begin, finish = Offset.from_json(start), Offset.from_json(end)
            self._settle(begin)
            if self.planned is not None and self.planned[0] == end:
                return self.planned[1]
            if finish.batch <= begin.batch or not finish.count():
                return []
            mine = self.pending.pop(finish.batch, None)
            if mine is not None and mine[0].to_json()["jobs"] == finish.to_json()["jobs"]:
                ids, bodies = mine[0].jobs, mine[1]
            else:
                ids, bodies = self._replay(finish)
                # The previous run may have counted more by the time it planned `end`.
                self.counted = (
                    max(self.counted[0], finish.redelivered),
                    max(self.counted[1], finish.lost),
                    max(self.counted[2], finish.orphaned),
                )
            instances = finish.instances
            made: list[StreamPart] = []
            for key in sorted(ids):
                if ids[key]:
                    made.append(
                        StreamPart(
                            server=key[0],
                            instance=instances[key[0]],
                            tube=key[1],
                            rows=len(ids[key]),
                            data=pack(ids[key], bodies[key]),
                            with_priority=self.settings.with_priority,
                            timeout=self.settings.timeout,
                        )
                    )
            self.pending = {b: p for b, p in self.pending.items() if b > finish.batch}
            parts: list[InputPartition] = list(made)
            self.planned = (end, parts)
            self._trace("planned", parts=len(made), bytes=sum(len(p.data) for p in made))
            return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, StreamPart):
            raise TypeError(f"beanpole: unexpected partition {partition!r}")
        if partition.rows:
            batch = rows(partition)
            self._trace("read", server=partition.server, tube=partition.tube, rows=batch.num_rows)
            yield batch

    def commit(self, end: dict[str, Any]) -> None:
        with self.lock:
            self._on_driver()
            self._trace("commit", end=end)
            self._settle(Offset.from_json(end))

    def stop(self) -> None:
        self._trace("stop")
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.join()
        try:
            if self.settings.checkpoint is not None:
                # The sink may have committed a batch that no later plan settled
                # (Spark calls commit() only when it plans the next one).
                done = committed(self.settings.checkpoint, self.settings.servers)
                if done is not None:
                    self._trace("stop-settle", end=done.to_json())
                    self._settle(done)
            elif self.holds.held:
                log.warning(
                    "beanpole: the query stopped holding %d batches; without option "
                    "checkpointLocation the reader cannot tell whether the sink has the "
                    "last one, so its jobs go back to ready and are read again",
                    len(self.holds.held),
                )
        finally:
            self.holds.close()
        counts = self._counters()
        if any(counts):
            log.warning(
                "beanpole: this query redelivered %d jobs, lost %d reservations and "
                "left %d jobs of other server instances alone",
                *counts,
            )

    # -- the work ------------------------------------------------------------------

    def _counters(self) -> tuple[int, int, int]:
        """The query's running counts: the last settled offset's, plus this run's."""
        return (
            self.counted[0] + self.redelivered,
            self.counted[1] + self.holds.lost,
            self.counted[2] + self.holds.orphaned,
        )

    def _offset(self, batch: int, ids: JobMap, instances: dict[str, str]) -> Offset:
        redelivered, lost, orphaned = self._counters()
        return Offset(batch, ids, instances, redelivered, lost, orphaned)

    def _settle(self, done: Offset) -> None:
        """The sink has every batch up to ``done``: delete the jobs it names."""
        if done.batch <= self.settled:
            return
        if self.settled < 0:
            # The first offset this run sees carries the query's counts so far; this
            # run's own counts are added to them from here on.
            self.counted = done.counters()
        if done.count():
            self.holds.delete(done.batch, done.jobs, done.instances)
        # Anything held for earlier batches was named by their offsets, deleted when
        # those were settled; nothing older can be pending now.
        self.settled = done.batch
        self.pending = {b: p for b, p in self.pending.items() if b > done.batch}

    def _replay(self, batch: Offset) -> tuple[JobMap, dict[Key, list[bytes]]]:
        """Read a batch this reader did not reserve, by its ids."""
        asks: list[tuple[Slot, list[int]]] = []
        for key, wanted in batch.jobs.items():
            for n, i in enumerate(range(0, len(wanted), CHUNK)):
                asks.append(((key[0], key[1], n), wanted[i : i + CHUNK]))
        since = time.monotonic()
        results = self.holds.each(
            [
                functools.partial(
                    self.holds.reserve_ids, batch.batch, slot, want, batch.instances.get(slot[0])
                )
                for slot, want in asks
            ]
        )
        slots = {slot: r[0] for (slot, _), r in zip(asks, results, strict=True)}
        data = {slot: r[1] for (slot, _), r in zip(asks, results, strict=True)}
        gone = sum(r[2] for r in results)
        ids, bodies = _by_key(slots, data)
        found = sum(len(v) for v in ids.values())
        self.redelivered += found
        self.holds.hold(batch.batch, slots, since)
        log.warning(
            "beanpole: replaying batch %d from the checkpoint: %d jobs read again, "
            "%d no longer there",
            batch.batch,
            found,
            gone,
        )
        return ids, bodies

    def _trace(self, call: str, **args: Any) -> None:
        if self.settings.call_log is None:
            return
        entry = {"call": call, "time": time.time()}
        for name, value in args.items():
            if isinstance(value, dict) and "batch" in value:
                entry[name] = value["batch"]
                entry[name + "_jobs"] = Offset.from_json(value).count()
            else:
                entry[name] = value
        with open(self.settings.call_log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
