"""Fixtures for the pystalk client tests: a client on a fresh server, a dead address."""

# The tests here drive the real ``pystalk`` client (PyPI, EasyPost) over its whole public API.
#
# Every test runs against both server kinds (``any_server`` or a local fixture built on
# ``servers.start``).  Public API covered (pystalk 0.9.x):
#
# * ``BeanstalkClient``: the constructor (lazy connect, ``socket_timeout``, ``auto_decode``),
#   ``from_uri``, ``ping``, ``close`` (and the automatic reconnect that restores use/watch),
#   ``put_job``, ``put_job_into``, ``use``, ``using`` (the tube context manager and its
#   ``BeanstalkInsertingProxy``), ``current_tube``, ``watch``, ``ignore``, ``watchlist``
#   (property and setter), ``reserve_job``, ``reserve_iter``, ``delete_job``, ``release_job``,
#   ``bury_job``, ``kick_job``, ``kick_jobs``, ``peek_ready``, ``peek_delayed``,
#   ``peek_buried`` and their ``*_iter`` forms, ``stats``, ``stats_job``, ``stats_tube``,
#   ``list_tubes``, ``pause_tube``, ``unpause_tube``.
# * ``pystalk.client.Job``; ``BeanstalkError`` (``message``, equality) for every server error
#   pystalk can provoke (NOT_FOUND, TIMED_OUT, DEADLINE_SOON, JOB_TOO_BIG, NOT_IGNORED,
#   DRAINING); ``BeanstalkConnectionError`` (``host``, ``port``, ``err``).
# * ``ProductionPool`` (``from_uris``, ``use``, ``put_job``, ``put_job_into``, round robin,
#   fail-over, ``backoff_time``, ``initial_shuffle``) and ``pystalk.pool.NoMoreClients``.
#
# pystalk 0.9.1 has no ``touch``, no ``peek`` by id, no blocking ``reserve`` without a timeout
# and no ``watching`` context manager, so those are not tested here (greenstalk covers them).

from __future__ import annotations

import socket
from collections.abc import Iterator

import pystalk  # type: ignore[import-untyped]
import pytest

from pystalk_common import open_client
from servers import Running


@pytest.fixture
def client(any_server: Running) -> Iterator[pystalk.BeanstalkClient]:
    with open_client(any_server) as c:
        yield c


@pytest.fixture
def dead_address() -> Iterator[tuple[str, int]]:
    """An address that refuses connections: bound, never listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()
