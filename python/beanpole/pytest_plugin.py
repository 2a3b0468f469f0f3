"""pytest fixtures for tests that need a beanstalkd-protocol server.

Installed as the ``beanpole`` pytest plugin (entry point ``pytest11``), so any test can ask
for them::

    def test_enqueue(beanpole_server):
        host, port = beanpole_server.address
        ...

    def test_two_queues(beanpole_server_factory):
        small = beanpole_server_factory(max_job_size=100)
        other = beanpole_server_factory()

    def test_failover(beanpole_cluster):
        client = greenstalk.Client(beanpole_cluster.address(1))
        ...

Every server is a real one, running in the test process on 127.0.0.1 and a free port, and
is stopped when the test ends.

The front door: may import any layer; nothing in the package imports it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol, Unpack

import pytest

from beanpole.config import ConfigChanges
from beanpole.ops.served import Server
from beanpole.server.cluster import Cluster

__all__ = ["ServerFactory", "beanpole_cluster", "beanpole_server", "beanpole_server_factory"]


class ServerFactory(Protocol):
    """Type of the ``beanpole_server_factory`` fixture."""

    def __call__(self, **overrides: Unpack[ConfigChanges]) -> Server: ...


@pytest.fixture
def beanpole_server_factory() -> Iterator[ServerFactory]:
    """Start servers on demand: ``factory(**config_overrides)`` returns a started Server.

    Servers listen on 127.0.0.1 and a free port unless the overrides say otherwise; all
    of them are stopped at teardown.
    """
    with contextlib.ExitStack() as stack:

        def factory(**overrides: Unpack[ConfigChanges]) -> Server:
            settings: ConfigChanges = {"listen": "127.0.0.1", "port": 0}
            settings.update(overrides)
            return stack.enter_context(Server(**settings))

        yield factory


@pytest.fixture
def beanpole_server(beanpole_server_factory: ServerFactory) -> Server:
    """A fresh, started server on 127.0.0.1 and a free port, stopped after the test."""
    return beanpole_server_factory()


@pytest.fixture
def beanpole_cluster() -> Iterator[Cluster]:
    """A fresh three-node replicated cluster in the test process (loopback, free
    ports, temporary data directories), with a leader elected; stopped after the
    test. Every node serves clients (``cluster.address(n)``)."""
    with Cluster(nodes=3) as cluster:
        cluster.leader()
        yield cluster
