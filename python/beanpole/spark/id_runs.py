"""Job ids as runs of consecutive ids: how a write task tells the driver what it put.

A write task's commit message must name every job it inserted, so that ``abort`` can
delete them. Sent as a plain list that is 8 bytes a job: 8 MB for a million rows,
pickled by the task, carried through the JVM and unpickled on the driver, which cost
about a tenth of the whole write's CPU. The ids one connection gets are increasing and
mostly consecutive (the server applies each connection's buffered puts together), so
they are kept as ``(first id, count)`` runs instead: a few hundred runs for a million
rows written by two tasks at once. Nothing is lost: :func:`expand` gives back exactly
the ids, in order.

Packed form: little-endian uint64, the runs' first ids followed by their counts.

Spark layer: imports pyarrow only (no pyspark, nothing of beanpole), so the writer's
tests can check it alone.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def pack(ids: pa.Array) -> bytes:
    """``ids`` (uint64, no nulls) as packed runs of consecutive ids."""
    n = len(ids)
    if n == 0:
        return b""
    ids = ids.cast(pa.uint64())
    if n == 1:
        starts = pa.array([0], pa.uint64())
    else:
        # A run starts where an id is not its predecessor plus one (the first id has
        # no predecessor: its difference is null, and it starts a run).
        step = pc.pairwise_diff(ids.cast(pa.int64()))
        starts = pc.indices_nonzero(pc.fill_null(pc.not_equal(step, 1), True))
    ends = pa.concat_arrays([starts.slice(1), pa.array([n], pa.uint64())])
    counts = pc.subtract(ends, starts)
    firsts = pc.take(ids, starts)
    both = pa.concat_arrays([firsts, counts.cast(pa.uint64())])
    packed: bytes = both.buffers()[1].to_pybytes()
    return packed[both.offset * 8 : (both.offset + len(both)) * 8]


def count(packed: bytes) -> int:
    """How many ids the packed runs hold."""
    _, counts = _halves(packed)
    return int(pc.sum(counts).as_py() or 0)


def expand(packed: bytes) -> list[int]:
    """The ids of packed runs, in order."""
    out: list[int] = []
    for first, n in zip(*(h.to_pylist() for h in _halves(packed)), strict=True):
        out.extend(range(first, first + n))
    return out


def _halves(packed: bytes) -> tuple[pa.Array, pa.Array]:
    if len(packed) % 16:
        raise ValueError(f"packed id runs must be pairs of uint64, not {len(packed)} bytes")
    k = len(packed) // 16
    both = pa.Array.from_buffers(pa.uint64(), 2 * k, [None, pa.py_buffer(packed)])
    return both.slice(0, k), both.slice(k)
