"""The options of the streaming reader (``spark.readStream.format("beanpole")``), checked.

Read through the sources' one parser (:mod:`.options`); every problem is one
``ValueError`` naming the option, raised when the source is created (at ``.load()``),
before any query starts.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .options import NAME, Options

#: Jobs one micro-batch reserves, over every server and tube, unless told otherwise.
DEFAULT_MAX_ROWS_PER_TRIGGER = 100_000
#: Seconds a connection waits to connect, and for each reply.
DEFAULT_TIMEOUT = 30.0
#: Seconds a restarted query waits for a job that a previous run's connection still
#: holds (it goes back to ready when that connection closes).
DEFAULT_RELEASE_WAIT = 10.0


@dataclass(frozen=True)
class StreamSettings:
    """What a streaming read does."""

    #: The server addresses, as given (they name the servers in rows and offsets).
    servers: tuple[str, ...]
    tubes: tuple[str, ...]
    max_rows_per_trigger: int
    #: None: touch held jobs every half of the smallest TTR of the jobs held.
    touch_interval: float | None
    timeout: float | None
    release_wait: float
    #: Fill ``priority`` with a ``stats-job`` per row (pipelined, in the tasks).
    with_priority: bool
    #: The query's checkpoint directory (local), read at ``stop()`` to find the
    #: batches the sink has committed; None: not given.
    checkpoint: str | None
    #: Append one JSON line per call Spark makes to the reader here (for debugging).
    call_log: str | None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> StreamSettings:
        opts = Options(NAME, options)
        release_wait = opts.seconds("releaseWait", DEFAULT_RELEASE_WAIT)
        assert release_wait is not None
        return cls(
            servers=opts.servers(),
            tubes=opts.tubes(),
            max_rows_per_trigger=opts.whole(
                "maxRowsPerTrigger", DEFAULT_MAX_ROWS_PER_TRIGGER, 1, 2**31 - 1
            ),
            touch_interval=opts.seconds("touchInterval", None),
            timeout=opts.seconds("timeout", DEFAULT_TIMEOUT, zero_is_none=True),
            release_wait=release_wait,
            with_priority=opts.flag("withPriority"),
            checkpoint=_local_path(opts, opts.text("checkpointLocation")),
            call_log=opts.text("callLog"),
        )


def _local_path(opts: Options, value: str | None) -> str | None:
    """A checkpoint location on the local file system (``/path`` or ``file:/path``)."""
    if value is None:
        return None
    if value.startswith("file:"):
        value = "/" + value[len("file:") :].lstrip("/")
    if "://" in value or ":" in value.split("/", 1)[0]:
        raise opts.fail(
            f"option checkpointLocation must be a local directory (the reader reads the "
            f"query's commit log there), not {value!r}"
        )
    return os.path.abspath(value)
