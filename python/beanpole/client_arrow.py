"""``put_many`` for pyarrow arrays: the native client reads the array's offsets and data
buffers directly (through the buffer protocol), so no Python object is made per job.
pyarrow itself is never imported here; the array brings it along."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from beanpole.client_errors import BatchError

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
