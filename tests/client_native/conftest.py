"""Fixtures for ``beanpole.Client`` tests: a client on a fresh server of each kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beanpole.client import Client
from servers import Running


@pytest.fixture
def client(any_server: Running) -> Iterator[Client[str]]:
    with Client(any_server.address, timeout=30) as c:
        yield c


@pytest.fixture
def bclient(any_server: Running) -> Iterator[Client[bytes]]:
    with Client(any_server.address, encoding=None, timeout=30) as c:
        yield c
