"""The rows of the ``beanpole`` readers (batch and streaming): one job each.

``server`` is the address as given in ``servers``; ``instance`` the server's instance
when the job was reserved (the ``id`` of its ``stats``: job ids are unique per
server and instance, so ``(server, instance, id)`` names one job for good); ``tube``
where it was reserved from; ``priority`` (the streaming reader leaves it null unless
``withPriority``); ``body`` byte for byte.

Imports only pyarrow.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import pyarrow as pa

#: The rows as Spark's schema string.
SCHEMA = "server string, instance string, id bigint, tube string, priority bigint, body binary"

#: The same as an Arrow schema, for the record batches the readers yield.
ROW_SCHEMA = pa.schema(
    [
        pa.field("server", pa.string()),
        pa.field("instance", pa.string()),
        pa.field("id", pa.int64()),
        pa.field("tube", pa.string()),
        pa.field("priority", pa.int64()),
        pa.field("body", pa.binary()),
    ]
)
