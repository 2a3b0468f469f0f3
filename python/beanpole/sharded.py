from __future__ import annotations
ShardedClient = None
