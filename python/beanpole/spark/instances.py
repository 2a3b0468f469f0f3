"""Which server instance a connection reached, and deleting ids where that was checked.

A job id names one job only within one server instance: a server without a log
starts again at id 1. The instance is the ``id`` of ``stats``, which beanstalkd draws
at every start and beanpole keeps with its log directory (``-b``), so it changes
exactly when job ids start over. Whatever acts on ids it kept (a checkpoint, a table
of rows read earlier) first compares the instance recorded with the one the
connection reached.

Imports only the client.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

from ..client import BatchError, Client, NotFoundError


def instance_of(client: Client[bytes]) -> str:
    """The instance of the server ``client`` reached: its ``stats`` ``id``."""
    return str(client.stats().get("id", ""))


def delete_ids(client: Client[bytes], ids: list[int]) -> list[int]:
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
