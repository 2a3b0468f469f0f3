"""Fixtures for the greenstalk client tests: a client on a fresh server of each kind."""

# The tests here drive the real ``greenstalk`` client (PyPI) over its whole public API.
#
# Every test runs against both server kinds through the ``any_server`` fixture (or a local
# fixture built on ``servers.start``), so beanpole has to satisfy an unmodified third-party
# client exactly as beanstalkd does.  Public API covered (greenstalk 2.1.x):
#
# * ``Client``: ``put``, ``use``, ``reserve`` (blocking and with timeout), ``reserve_job``,
#   ``delete``, ``release``, ``bury``, ``touch``, ``watch``, ``ignore``, ``peek``,
#   ``peek_ready``, ``peek_delayed``, ``peek_buried``, ``kick``, ``kick_job``, ``stats_job``,
#   ``stats_tube``, ``stats``, ``tubes``, ``using``, ``watching``, ``pause_tube``, ``close``,
#   ``__enter__``/``__exit__``, ``__repr__``, the ``encoding``, ``use`` and ``watch``
#   constructor arguments and all three address forms (``(host, port)``, a Unix socket path,
#   an already connected socket).
# * ``Job`` (``id``, ``body``, ``__repr__``) and the module constants ``DEFAULT_TUBE``,
#   ``DEFAULT_PRIORITY``, ``DEFAULT_DELAY``, ``DEFAULT_TTR``.
# * Exceptions raised from real server replies: ``TimedOutError``, ``NotFoundError``,
#   ``DeadlineSoonError``, ``NotIgnoredError``, ``JobTooBigError``, ``BadFormatError``,
#   ``UnknownCommandError``, ``ExpectedCrlfError``, ``DrainingError`` and
#   ``UnknownResponseError`` (all ``greenstalk.Error``; the server ones ``BeanstalkdError``).
#   ``BuriedError``, ``OutOfMemoryError`` and ``InternalError`` need the server to run out of
#   memory, so only their class hierarchy is checked.

from __future__ import annotations

from collections.abc import Iterator

import greenstalk
import pytest

from servers import Running


@pytest.fixture
def client(any_server: Running) -> Iterator[greenstalk.Client[str]]:
    with greenstalk.Client(any_server.address) as c:
        yield c
