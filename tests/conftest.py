from __future__ import annotations

from collections.abc import Iterator

import pytest

from servers import KINDS, Running, start


@pytest.fixture(params=KINDS)
def server_kind(request: pytest.FixtureRequest) -> str:
    """Each test using this runs once against beanpole and once against beanstalkd."""
    return str(request.param)


@pytest.fixture
def any_server(server_kind: str) -> Iterator[Running]:
    """A fresh server of each kind (ids start at 1, stats are zero)."""
    with start(server_kind) as running:
        yield running


@pytest.fixture
def small_server(server_kind: str) -> Iterator[Running]:
    """A fresh server of each kind whose max job size is 100 bytes."""
    with start(server_kind, "-z", "100", max_job_size=100) as running:
        yield running
