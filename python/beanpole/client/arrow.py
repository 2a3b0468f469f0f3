"""``put_many`` for pyarrow arrays: the native client reads the array's offsets and data
buffers directly (through the buffer protocol), so no Python object is made per job.
pyarrow itself is never imported here; the array brings it along.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from beanpole.client.errors import BatchError

if TYPE_CHECKING:
    from beanpole._core import NativeClient

_WIDE = {"large_binary", "large_string", "large_utf8"}
_NARROW = {"binary", "string", "utf8"}


def _chunks(array: Any) -> list[Any]:
    return list(array.chunks) if hasattr(array, "chunks") else [array]


def put_arrow(
    native: NativeClient, array: Any, priority: Any, delay: Any, ttr: Any, window: int
) -> list[int]:
    """Put every item of a binary/string (or large_) Array or ChunkedArray."""
    pri, dly, ttr_ = (v if isinstance(v, int) else iter(v) for v in (priority, delay, ttr))
    ids: list[int] = []
    for chunk in _chunks(array):
        kind = str(chunk.type)
        if kind not in _WIDE | _NARROW:
            raise TypeError(f"put_many takes binary or string arrays, not {kind}")
        if chunk.null_count:
            raise ValueError("put_many cannot put a null body")
        _validity, offsets, data = chunk.buffers()
        if data is None:  # every body empty: the array may carry no data buffer
            data = b""
        try:
            ids += native.put_many_arrow(
                offsets, data, kind in _WIDE, chunk.offset, len(chunk), pri, dly, ttr_, window
            )
        except BatchError as err:
            raise BatchError(
                str(err),
                err.index + len(ids),
                err.reason,
                [*ids, *err.ids],
                [(i + len(ids), v) for i, v in err.after],
            ) from err.reason
    return ids


def _setting(value: Any, length: int, what: str) -> Any:
    """One value for every job, or ``(buffer, offset)`` of a uint32 column without nulls."""
    if isinstance(value, int):
        if not 0 <= value < 2**32:
            raise ValueError(f"{what} {value} is outside 0..{2**32 - 1}")
        return value
    if str(value.type) != "uint32":
        raise TypeError(f"put_arrow takes {what} as an int or a uint32 array, not {value.type}")
    if len(value) != length:
        raise ValueError(f"{what} has {len(value)} items for {length} bodies")
    if value.null_count:
        raise ValueError(f"put_arrow cannot take a null {what}")
    return (value.buffers()[1], value.offset)


def _tubes(tube: Any, length: int) -> Any:
    """``(index buffer, offset, names)`` of a dictionary-encoded string array."""
    if not str(tube.type).startswith("dictionary"):
        tube = tube.dictionary_encode()
    if len(tube) != length:
        raise ValueError(f"tube has {len(tube)} items for {length} bodies")
    if tube.null_count:
        raise ValueError("put_arrow cannot take a null tube")
    indices = tube.indices
    if str(indices.type) not in ("int32", "uint32"):
        raise TypeError(f"tube indices must be 32-bit, not {indices.type}")
    return (indices.buffers()[1], indices.offset, [str(t) for t in tube.dictionary.to_pylist()])


def put_columns(
    native: NativeClient,
    bodies: Any,
    priority: Any,
    delay: Any,
    ttr: Any,
    tube: Any,
    window: int,
) -> bytes:
    """Put one binary/string Array whose settings (and tubes) are ints or Arrow arrays;
    the ids packed as little-endian uint64. See ``Client.put_arrow``."""
    kind = str(bodies.type)
    if kind not in _WIDE | _NARROW:
        raise TypeError(f"put_arrow takes a binary or string array, not {kind}")
    if bodies.null_count:
        raise ValueError("put_arrow cannot put a null body")
    n = len(bodies)
    pri, dly, ttr_ = (
        _setting(v, n, w) for v, w in ((priority, "priority"), (delay, "delay"), (ttr, "ttr"))
    )
    tubes = None if tube is None else _tubes(tube, n)
    _validity, offsets, data = bodies.buffers()
    if data is None:  # every body empty: the array may carry no data buffer
        data = b""
    return native.put_many_columns(
        offsets, data, kind in _WIDE, bodies.offset, n, pri, dly, ttr_, tubes, window
    )
